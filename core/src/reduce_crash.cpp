// Reductions through crashes (docs/collectives.md, "Reductions through crashes"): the
// acknowledgements that let a child forget a partial it sent up, the tentative resends
// to the root's owner when a parent changes before acknowledging, the root owner's
// questions to the new owners of vnodes still missing, and what an adopter gives.
// Members of reduce_engine; the rest of the engine is in reduce.cpp.

#include "banyan/core/reduce.hpp"

#include <algorithm>

namespace banyan {

void reduce_engine::take_tentative(op_state& st, const vnode_set& vs, const shared_bytes& data) {
  if (st.covered.intersects(vs)) {
    ++stats_.superseded; // what it repeats got here first
    return;
  }
  // One that covers every tentative partial it meets replaces them (a child's partial
  // sent again holds its own children's); any other meeting is dropped.
  bool wider = true;
  for (auto& t : st.tentative)
    if (t.first.intersects(vs) && !vs.includes(t.first))
      wider = false;
  if (!wider) {
    ++stats_.superseded;
    return;
  }
  for (auto t = st.tentative.begin(); t != st.tentative.end();) {
    if (t->first.intersects(vs)) {
      ++stats_.superseded;
      t = st.tentative.erase(t);
    } else {
      ++t;
    }
  }
  st.tentative.emplace_back(vs, data);
  st.tentative_cover |= vs;
}

void reduce_engine::ack(timestamp now, proc_id to, std::uint64_t op, const vnode_set& vs,
                        reduce_outbox& out) {
  if (to == view_.self() || to == no_proc || vs.empty())
    return;
  ++stats_.acks;
  send(now, to, wire::reduce_ack{cfg_.kind, op, vs}, out);
}

void reduce_engine::ack_taken(timestamp now, op_state& st, reduce_outbox& out) {
  // At a relay, once its own partial went up; at the root's owner, once gathered there,
  // also when they were combined here before the root vnode moved here (the pending
  // partial became the root's). Unacknowledged, their senders would resend them once
  // their parent changes, copies for nothing (dropped wherever the result is known to
  // have completed, held where it is not: `take_done`). Acknowledging them is as
  // safe as acknowledging a partial gathered at the root on arrival: what covers them is
  // here, counted in the result, or sent on to the next owner of the root vnode with
  // the rest of what was gathered when the root vnode moves away.
  for (auto& [child, vs] : st.to_ack)
    ack(now, child, st.spec.op, vs, out);
  st.to_ack.clear();
}

void reduce_engine::resend_orphaned(timestamp now, op_state& st, bool due,
                                    reduce_outbox& out) {
  if (st.unacked.empty())
    return;
  const auto owner = view_.owner(st.spec.root);
  const auto parent = owner == no_proc ? no_proc : parent_of(st, owner);
  bool wait = false;
  for (auto u = st.unacked.begin(); u != st.unacked.end();) {
    if (u->to == parent) {
      u->orphaned = false; // back under it
      ++u;
      continue;
    }
    if (!u->orphaned || !due) {
      // The parent changed before it acknowledged this (it crashed, or left, or the tree
      // moved): give an acknowledgement on its way time to land.
      wait |= !u->orphaned;
      u->orphaned = true;
      ++u;
      continue;
    }
    // Still unacknowledged: what the old parent held of it may be lost. Again,
    // tentatively: the root's owner counts it only where nothing else covers it.
    ++stats_.resent;
    auto part = std::move(*u);
    u = st.unacked.erase(u);
    send_partial(now, st, part.vnodes, std::move(part.data), true, 0, out, true);
  }
  if (wait)
    timer(out, cfg_.resend_grace, {timer_kind::resend, st.spec.op});
}

void reduce_engine::ask_new_owners(timestamp now, op_state& st, reduce_outbox& out) {
  const auto missing = view_.all_vnodes() - st.covered - st.tentative_cover;
  auto now_owners = view_.owners(missing);
  if (!st.owners_noted) {
    st.owners_noted = true;
    st.owners = std::move(now_owners);
    return;
  }
  for (auto& [p, vs] : now_owners) {
    auto fresh = vs - st.owners[p];
    if (p == no_proc || fresh.empty())
      continue;
    st.owners[p] |= fresh;
    if (p == view_.self())
      give_adopted(now, st, fresh, out);
    else {
      ++stats_.asks;
      send(now, p, wire::reduce_ask{cfg_.kind, st.spec.op, fresh}, out);
    }
  }
}

void reduce_engine::give_adopted(timestamp now, op_state& st, const vnode_set& vs,
                                 reduce_outbox& out) {
  if (!st.started || !st.values || !view_.participating())
    return;
  // Adopted (their history died with their old owner) after this reduction started
  // here: nothing here contributed them to it, and nothing here will.
  vnode_set owed;
  for (auto a = adopted_at_.lower_bound(st.spec.op); a != adopted_at_.end(); ++a)
    owed |= a->second;
  owed &= vs & adopted_ & view_.own_vnodes();
  owed -= st.given;
  if (owed.empty())
    return;
  auto c = gather(st.spec, st.values, owed);
  if (!c) {
    out.problems.push_back(
        reduce_problem{reduce_problem::kind::bad_data, st.spec.op, owed, c.err().to_string()});
    return;
  }
  st.given |= owed;
  ++stats_.adopted_tentative;
  stats_.contributed += owed.size();
  take_in(now, st, owed, shared_bytes(std::move(*c)), false, true, 0, out, true);
}

void reduce_engine::handle_ack(const wire::reduce_ack& m, proc_id from) {
  auto i = ops_.find(m.op);
  if (i == ops_.end())
    return;
  auto& un = i->second.unacked;
  un.erase(std::remove_if(un.begin(), un.end(),
                          [&](const op_state::sent_part& u) {
                            return u.to == from && m.vnodes.includes(u.vnodes);
                          }),
           un.end());
}

void reduce_engine::take_done(timestamp now, const wire::reduce_done& d, reduce_outbox& out) {
  // The old owner of the root vnode knows that the result completed there (or was told
  // by an owner before it); this processor, which owns the root vnode now, cannot: the
  // result took every vnode, so whatever of it is here or still comes (a copy a child
  // sent again after its parent crashed, or the partial such a copy repeats) covers
  // vnodes counted already. Held as for a reduction in progress, it would stay until the
  // runtime gives the reduction up; dropped, it is counted nowhere twice and lost nowhere.
  auto [i, fresh] = ops_.try_emplace(d.op);
  op_state& st = i->second;
  if (fresh) {
    st.spec.op = d.op;
    st.spec.root = d.root;
    st.opened_done = true;
  }
  st.counted_tentatively |= d.tentative; // what a later partial may repeat
  if (st.complete)
    return;
  stats_.superseded += st.tentative.size() + (st.has_acc && !st.covered.empty() ? 1 : 0);
  st.tentative.clear();
  st.tentative_cover.clear();
  st.has_acc = false;
  st.acc.clear();
  st.covered.clear();
  st.rooted = false;
  st.complete = true;
  st.told = false;
  done_dirty_ = true;
  // Children's partials combined here: what covers them was counted at the root.
  ack_taken(now, st, out);
  linger(st, out);
}

void reduce_engine::handle_ask(timestamp now, const wire::reduce_ask& m, reduce_outbox& out) {
  auto i = ops_.find(m.op);
  if (i != ops_.end())
    give_adopted(now, i->second, m.vnodes, out);
}

} // namespace banyan

#include "membership.hpp"

#include <algorithm>
#include <atomic>

#include "supervisor_parts.hpp"

namespace banyan::sup {

std::uint64_t membership::fresh_version() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::optional<wire::member> membership::info(proc_id p) const {
  auto i = table_.find(p);
  if (i == member_table::npos || !is_member(p))
    return std::nullopt;
  return table_.member(i);
}

bool membership::admit(timestamp now, const wire::member& m, outbox& out, bool hearsay,
                       proc_id via) {
  if (m.id == s_.self || m.id == no_proc)
    return false;
  if (auto t = tombstones_.find(m.id); t != tombstones_.end() && t->second.count(m.incarnation))
    return false; // a late notice about an incarnation that has left
  if (is_member(m.id)) {
    // A member has its entry (add): read it, do not make one (nor a new version: a view
    // merged from a probe reply admits every member it lists, most of them known).
    auto known = table_.incarnation(table_.find(m.id));
    if (known == m.incarnation)
      return false;
    // A new incarnation: the old one left without our hearing of it.
    // Incarnations are random, so which of two is the later one only a notice of the
    // join can tell; a member list (a view, a join_accept) may be older than what we
    // know, and taking its incarnation would bury the live one (which then refutes, and
    // gives its vnodes up). Departures reach us as tombstones.
    if (hearsay)
      return false;
    depart(now, m.id, known, departure::hearsay, out);
  }
  const bool was_buried = buried(m.id);
  add(m);
  if (was_buried)
    report(now, tree_event::kind::member_returned, m.id, via, out);
  return true;
}

bool membership::depart(timestamp now, proc_id who, std::uint64_t inc, departure why,
                        outbox& out) {
  if (who == s_.self)
    return false;
  bool news = tombstones_[who].insert(inc).second;
  if (news)
    changed(); // (a member removed below changes it in `remove`)
  if (is_member(who) && table_.incarnation(table_.find(who)) == inc) {
    s_.watch.note_orphans(now, who, out);
    remove(now, who, out);
    if (why == departure::crash) {
      buried_[who] = inc;
      report(now, tree_event::kind::member_buried, who, no_proc, out);
    }
  } else if (why == departure::graceful) {
    left_gracefully(who, inc);
  }
  return news;
}

void membership::left_gracefully(proc_id p, std::uint64_t inc) {
  // A crash notice about it came first, but it left of its own accord: what it still
  // sends (the rest of its streams) is to be taken.
  if (auto b = buried_.find(p); b != buried_.end() && b->second == inc)
    buried_.erase(b);
}

void membership::exhume(timestamp now, proc_id p, std::uint64_t inc, outbox& out) {
  if (auto t = tombstones_.find(p); t != tombstones_.end()) {
    changed();
    t->second.erase(inc);
    if (t->second.empty())
      tombstones_.erase(t);
  }
  if (auto b = buried_.find(p); b != buried_.end() && b->second == inc) {
    buried_.erase(b);
    report(now, tree_event::kind::member_returned, p, no_proc, out);
  }
}

void membership::report(timestamp now, tree_event::kind what, proc_id p, proc_id via,
                        outbox& out) const {
  tree_event e;
  e.what = what;
  e.at = now;
  e.peer = p;
  e.via = via;
  out.events.push_back(std::move(e));
}

void membership::add(const wire::member& m) {
  auto p = m.id;
  if (p >= is_member_.size())
    is_member_.resize(p + 1, false);
  changed();
  table_.set(m);
  if (is_member_[p])
    return;
  is_member_[p] = true;
  buried_.erase(p);
  s_.paths.restore(p, m.address);
  if (s_.roots.wanted(p))
    open_trees(p);
}

void membership::open_trees(proc_id p) {
  s_.updates.make_room(s_.trees.make_room(p));
  s_.trees.add_root(p, s_.self);
  if (s_.decision.sender_capacity)
    s_.trees.find({p, tree_kind::bandwidth})->set_sender_capacity(s_.paths.widest());
}

void membership::remove(timestamp now, proc_id p, outbox& out) {
  if (!is_member(p) || p == s_.self)
    return;
  changed();
  is_member_[p] = false;
  {
    const auto i = table_.find(p);
    s_.paths.forget(p, table_.address(i));
    s_.roots.forget(p, table_.incarnation(i));
  }
  table_.erase(p);
  s_.probes.forget_strikes(p);
  s_.suspects.forget(p);
  s_.trees.drop_root(p);
  s_.probes.drop_root(p);
  bool orphaned = false;
  for (auto& t : s_.trees.all()) {
    if (!t)
      continue;
    if (t->remove_child(p)) {
      s_.updates.mark_subtree(*t);
      s_.parents.fan_out_changed(*t);
    }
    if (t->parent() == p) {
      s_.parents.lose_parent(now, *t, out);
      orphaned = true;
    }
  }
  const bool dropped_hint = s_.repairs.forget_steps(p);
  s_.probes.forget(p);
  s_.seeding.forget(p);
  s_.repairs.forget_requests(p);
  if (s_.probes.probing(p))
    s_.probes.finish_probe(now, false, out);
  if (dropped_hint) {
    s_.repairs.answer_deferred(out);
    s_.repairs.ask_step_parents(out);
    s_.repairs.after_steps(now, out);
  }
  if (orphaned)
    s_.probes.trigger(now, out);
}

proc_id membership::adopter_of(proc_id dead) const {
  auto i = std::upper_bound(table_.ids().begin(), table_.ids().end(), dead);
  for (std::size_t n = 0; n < table_.ids().size(); ++n, ++i) {
    if (i == table_.ids().end())
      i = table_.ids().begin();
    if (*i != dead)
      return *i;
  }
  return no_proc;
}

void membership::sponsor(proc_id n, timestamp now) {
  sponsored_.erase(std::remove_if(sponsored_.begin(), sponsored_.end(),
                                  [&](auto& s) { return s.first == n; }),
                   sponsored_.end());
  sponsored_.emplace_back(n, now);
}

std::vector<proc_id> membership::sponsored(timestamp now) {
  sponsored_.erase(std::remove_if(sponsored_.begin(), sponsored_.end(),
                                  [&](auto& s) { return now - s.second > s_.cfg.sponsor_window; }),
                   sponsored_.end());
  std::vector<proc_id> result;
  for (auto& s : sponsored_)
    result.push_back(s.first);
  return result;
}

void membership::on(timestamp now, proc_id from, const wire::member_joined& m, outbox& out) {
  const auto& who = m.who;
  if (!admit(now, who, out, false, from))
    return;
  // Membership must end up symmetric: the newcomer may not know us yet.
  if (from != who.id && s_.status == supervisor::status::member)
    s_.send(out, who.id, wire::member_joined{me_});
  // Newcomers we let in may have been told about members before this one joined.
  for (auto n : sponsored(now))
    if (n != who.id && n != from)
      s_.send(out, n, wire::member_joined{who});
  // While we are joining ourselves, the member is no newcomer to wait for (it answers
  // our join, or joins alongside us): our place in its tree comes from our givers, as in
  // the trees of the members our contact listed (join_leave::on vnode_handover).
  if (s_.status == supervisor::status::joining)
    return;
  // A new tree exists, rooted at the newcomer: seeded once we know its giver, else measured.
  s_.seeding.expect_seed(now, who.id, out);
}

void membership::on(timestamp now, proc_id from, const wire::member_left& m, outbox& out) {
  if (m.who == s_.self) {
    // Somebody took us for crashed: refute it (a notice about an earlier incarnation of
    // ours is stale and changes nothing).
    if (from != s_.self && m.incarnation == me_.incarnation
        && s_.status == supervisor::status::member)
      s_.watch.refute(now, from, out);
    return;
  }
  s_.owners.apply_told_routes(now, from, m.routes, out);
  // A crash notice says so (first-hand, or relayed by a sponsor); the leaver's own notice,
  // or a relay of it, never does, with routes or without (a leaver that owned no vnodes).
  const auto why = m.crashed && from != m.who ? departure::crash : departure::graceful;
  const bool news = depart(now, m.who, m.incarnation, why, out);
  // An offer of our vnodes to the one who left is as good as refused (its answer, had it
  // sent one, came first: messages between two processors arrive in order); a leave
  // waiting on it goes on now rather than after probe_timeout.
  if (!is_member(m.who))
    s_.owners.drop_offer_to(now, m.who, out);
  if (news)
    for (auto n : sponsored(now))
      if (n != m.who && n != from)
        s_.send(out, n, m);
}

void membership::reset() {
  changed();
  is_member_.clear();
  table_.clear();
  sponsored_.clear();
}

} // namespace banyan::sup

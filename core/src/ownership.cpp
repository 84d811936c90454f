#include "ownership.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {
// Vnode epochs: counter << 20 | issuing processor (processor ids stay below 2^20).
constexpr unsigned epoch_id_bits = 20;
constexpr std::uint64_t epoch_id_mask = (std::uint64_t{1} << epoch_id_bits) - 1;
} // namespace

vnode_set ownership::reported_own() const {
  if (lent_.empty())
    return own_;
  auto r = own_;
  for (auto& [seq, vs] : lent_)
    r |= vs;
  return r;
}

void ownership::set_own(vnode_set own) {
  if (own == own_)
    return;
  own_ = std::move(own);
  s_.updates.mark_all_subtrees();
}

void ownership::take_own_from_routes() { set_own(routes_.owned_by(s_.self)); }

void ownership::report_disowned(timestamp now, proc_id by, vnode_set lost, outbox& out) const {
  if (lost.empty())
    return;
  tree_event e;
  e.what = tree_event::kind::disowned;
  e.at = now;
  e.peer = by;
  e.vnodes = std::move(lost);
  out.events.push_back(std::move(e));
}

bool ownership::apply_told_routes(timestamp now, proc_id by,
                                  const std::vector<wire::route_entry>& routes, outbox& out) {
  const auto before = own_;
  const bool changed = apply_routes(routes);
  if (s_.status != supervisor::status::member || own_ == before)
    return changed;
  auto lost = before - own_;
  for (auto& [seq, o] : offers_)
    lost -= o.vnodes; // given away by us: the receiver's route may come round first
  report_disowned(now, by, std::move(lost), out);
  return changed;
}

bool ownership::apply_routes(const std::vector<wire::route_entry>& routes) {
  bool touched_own = false, changed_any = false;
  for (auto& r : routes) {
    auto changed = routes_.apply(r);
    changed_any = changed_any || !changed.empty();
    if (!changed.empty() && (r.owner == s_.self || changed.intersects(own_)))
      touched_own = true;
  }
  if (touched_own)
    set_own(routes_.owned_by(s_.self));
  return changed_any;
}

std::vector<wire::route_entry>
ownership::foreign_routes(std::vector<wire::route_entry> routes) const {
  // An entry naming us that we did not learn ourselves either comes from our
  // previous incarnation (stale: those vnodes were handed on when it left) or repeats
  // an explicit update that reaches us anyway. Vnodes become ours only through
  // explicit updates, so record them as owner-unknown just below that epoch: the
  // explicit update (same epoch) or any later news wins over it.
  std::vector<wire::route_entry> result;
  result.reserve(routes.size());
  for (auto& r : routes) {
    if (r.owner == s_.self) {
      if (r.epoch == 0)
        continue;
      r.owner = no_proc;
      --r.epoch;
    }
    result.push_back(std::move(r));
  }
  return result;
}

std::uint64_t ownership::next_epoch(const vnode_set& vnodes) {
  std::uint64_t epoch = 0;
  for (auto& r : routes_.runs())
    if (vnodes.intersects(vnode_set::range(r.lo, r.hi)))
      epoch = std::max(epoch, r.epoch);
  // Every move gets a higher epoch than any before it (should an earlier recipient
  // take vnodes after we gave up on it, the later move still wins), and an epoch
  // nobody else can issue: a counter above, our id in the low bits. So two
  // processors that both believe they own a vnode can never announce the same
  // epoch, and "the higher epoch wins" leaves every member with one owner.
  auto base = std::max(epoch, last_offer_epoch_);
  last_offer_epoch_ = (((base >> epoch_id_bits) + 1) << epoch_id_bits)
                      | (static_cast<std::uint64_t>(s_.self) & epoch_id_mask);
  return last_offer_epoch_;
}

void ownership::give_up_own() {
  std::vector<routing_table::run> mine;
  for (auto& r : routes_.runs())
    if (r.owner == s_.self)
      mine.push_back(r);
  for (auto& r : mine)
    routes_.assign(vnode_set::range(r.lo, r.hi), no_proc, r.epoch);
  set_own(routes_.owned_by(s_.self));
}

void ownership::hand_over(const vnode_set& vnodes, proc_id to, outbox& out, bool share) {
  auto give = vnodes;
  for (auto& [seq, o] : offers_)
    give -= o.vnodes; // already on offer to someone
  if (!give.empty())
    offer(give, to, false, out, share);
}

vnode_set ownership::share_of_own() const {
  // The upper half of our own vnodes not already on offer to someone (none when fewer
  // than two are left): joiners that ask at the same moment each get a share.
  auto unoffered = own_;
  for (auto& [seq, o] : offers_)
    unoffered -= o.vnodes;
  vnode_set give;
  if (unoffered.size() < 2)
    return give;
  auto keep = unoffered.size() / 2 + unoffered.size() % 2;
  std::size_t seen = 0;
  unoffered.for_each([&](vnode_id v) {
    if (seen++ >= keep)
      give.insert(v);
  });
  return give;
}

void ownership::offer(const vnode_set& vnodes, proc_id to, bool leaving, outbox& out,
                      bool share) {
  next_epoch(vnodes);
  auto seq = ++offer_seq_;
  offers_[seq] = vnode_offer{vnodes, to, last_offer_epoch_, leaving, share};
  s_.send(out, to, wire::vnode_handover{{vnodes, to, last_offer_epoch_}});
  s_.start_timer(out, s_.cfg.probe_timeout, timer_token::offer_due(seq));
}

void ownership::offer_all(proc_id to, outbox& out) { offer(own_, to, true, out); }

bool ownership::offering_to_newcomer() const {
  return std::any_of(offers_.begin(), offers_.end(), [](auto& o) { return !o.second.leaving; });
}

void ownership::drop_offer_to(timestamp now, proc_id p, outbox& out) {
  for (auto& [seq, o] : offers_)
    if (o.to == p) {
      offer_resolved(now, seq, false, out);
      break;
    }
}

void ownership::offer_resolved(timestamp now, std::uint64_t seq, bool accepted, outbox& out) {
  auto i = offers_.find(seq);
  if (i == offers_.end())
    return;
  auto o = std::move(i->second);
  offers_.erase(i);
  if (accepted) {
    wire::route_entry entry{o.vnodes, o.to, o.epoch};
    tree_event e;
    e.what = tree_event::kind::released;
    e.at = now;
    e.peer = o.to;
    e.vnodes = o.vnodes;
    out.events.push_back(std::move(e));
    if (o.leaving) {
      s_.life.finish_leave(now, {entry}, out);
      return;
    }
    apply_routes({entry});
    for (auto m : s_.members.list())
      if (m != s_.self && m != o.to)
        s_.send(out, m, wire::routing_update{{entry}});
    s_.seeding.gave_to(o.to, now, o.share);
    if (s_.cfg.lend_time.count() > 0) {
      // Still reported below us until the newcomer's own placement has climbed the trees.
      lent_[++lend_seq_] = o.vnodes;
      s_.start_timer(out, s_.cfg.lend_time, timer_token::lend(lend_seq_));
    }
    s_.seeding.after_giving(now, o.to, out);
  } else if (o.leaving && s_.status == supervisor::status::leaving) {
    s_.life.refused_by(o.to);
    s_.life.offer_vnodes(now, out);
    return;
  }
  // A refused join handover: the newcomer is gone; the vnodes stay ours. Either
  // way, a leave that waited for this answer may go on now.
  if (!o.leaving && s_.status == supervisor::status::leaving
      && std::none_of(offers_.begin(), offers_.end(), [](auto& x) { return x.second.leaving; }))
    s_.life.offer_vnodes(now, out);
}

void ownership::on(timestamp, proc_id, const wire::handover_request& m, outbox& out) {
  // A leaving processor keeps its vnodes for the recipient it chose.
  if (s_.status == supervisor::status::member && s_.members.is_member(m.to))
    hand_over(m.vnodes.empty() ? share_of_own() : m.vnodes & own_, m.to, out, m.vnodes.empty());
}

void ownership::on(timestamp now, proc_id from, const wire::vnode_handover_ack& m, outbox& out) {
  for (auto& [seq, o] : offers_)
    if (o.to == from && o.epoch == m.epoch) {
      offer_resolved(now, seq, m.accepted, out);
      return;
    }
}

void ownership::on(timestamp now, proc_id from, const wire::routing_update& m, outbox& out) {
  s_.seeding.note_givers(now, m.routes, out);
  if (apply_told_routes(now, from, m.routes, out))
    for (auto n : s_.members.sponsored(now))
      if (n != from)
        s_.send(out, n, m);
}

void ownership::on_offer_timer(timestamp now, std::uint64_t seq, outbox& out) {
  // The recipient of an offer did not answer: as good as a refusal.
  offer_resolved(now, seq, false, out);
  s_.updates.flush(out);
}

void ownership::on_lend_timer(std::uint64_t seq, outbox& out) {
  if (lent_.erase(seq) > 0) {
    s_.updates.mark_all_subtrees();
    s_.updates.flush(out);
  }
}

void ownership::reset() {
  routes_ = routing_table{};
  own_.clear();
  offers_.clear();
  lent_.clear();
}

} // namespace banyan::sup

#include "crash_watch.hpp"

#include <map>

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {
// The ping a member sends the successor it watches (probes are numbered from 1).
constexpr std::uint64_t watch_seq = 0;
} // namespace

void crash_watch::start(outbox& out) {
  if (s_.cfg.crash_timeout.count() <= 0 || watching_)
    return;
  watching_ = true;
  s_.start_timer(out, s_.cfg.crash_timeout / 4, timer_token::watch(++watch_gen_));
}

void crash_watch::on_timer(timestamp now, std::uint64_t gen, outbox& out) {
  if (gen != watch_gen_)
    return;
  watching_ = false;
  if (s_.status == supervisor::status::member) {
    tick(now, out);
    start(out);
  }
}

void crash_watch::tick(timestamp now, outbox& out) {
  s_.merges.tick(now, out); // those we buried: a partition may have healed
  auto succ = s_.members.adopter_of(s_.self); // the next member after us, wrapping around
  if (succ == s_.self || succ == no_proc) {
    watched_ = no_proc;
    return;
  }
  // A tick long overdue means that we ourselves did not run (the process was stopped or
  // starved): the silence we saw is ours, not the successor's. Give it a fresh period.
  const bool we_slept = now - last_watch_ > s_.cfg.crash_timeout / 2;
  if (we_slept && watched_ != no_proc)
    s_.health.worsen(); // (local_health.hpp)
  last_watch_ = now;
  if (succ != watched_ || we_slept) {
    watched_ = succ;
    heard_ = now;
  } else if (now - heard_ >= s_.cfg.crash_timeout) {
    // Suspected: declared crashed only if neither it nor the helpers answer in time.
    s_.suspects.suspect(now, succ, out);
    s_.updates.flush(out);
  }
  s_.send(out, succ, wire::ping{watch_seq});
}

void crash_watch::declare_crashed(timestamp now, proc_id p, outbox& out) {
  if (p == s_.self || !s_.members.is_member(p))
    return;
  auto inc = s_.members.info(p)->incarnation;
  tree_event e;
  e.what = tree_event::kind::crash_detected;
  e.at = now;
  e.peer = p;
  out.events.push_back(std::move(e));
  // Everybody hears it from us (a member_left sent by a third party, without routes,
  // marked `crashed`):
  // the adopter among them claims p's vnodes; and p, should it be alive after all, learns
  // that it lost them.
  for (auto m : s_.members.list())
    if (m != s_.self && m != p)
      s_.send(out, m, wire::member_left{p, {}, inc, true});
  s_.send(out, p, wire::member_left{p, {}, inc, true});
  s_.members.depart(now, p, inc, membership::departure::crash, out);
  s_.merges.buried(now, p, inc);
  // A leave waiting on an offer to p goes on at once.
  s_.owners.drop_offer_to(now, p, out);
}

void crash_watch::refute(timestamp now, proc_id by, outbox& out) {
  s_.health.worsen(); // taken for crashed: we were the silent one (local_health.hpp)
  // Come back as a new incarnation, which nobody has buried.
  auto& me = s_.members.me();
  me.incarnation = (s_.rng() ^ s_.cfg.incarnation_salt) | 1;
  s_.members.add(me);
  for (auto p : s_.members.list())
    if (p != s_.self)
      s_.send(out, p, wire::member_joined{me});
  // Our vnodes are the adopter's now (its claim has a higher epoch than ours): stop
  // taking them for ours at once; the claim itself reaches us as a routing_update.
  auto lost = s_.owners.own();
  s_.owners.give_up_own();
  s_.owners.report_disowned(now, by, std::move(lost), out);
  // Whoever buried us dropped us as parent and child: start over in every tree.
  s_.parents.leave_all_trees(now, out);
  s_.probes.trigger(now, out);
}

void crash_watch::note_orphans(timestamp now, proc_id who, outbox& out) {
  // Whatever routes still name it now were not handed over (a leaver's handover is
  // applied before its departure): orphans, unless news of a move arrives first.
  // A lease we granted it (delivery_lease) holds our claim back until it ran out: it
  // may still deliver to them until then.
  const auto not_before = std::max(now + s_.cfg.adopt_delay, s_.lease.claim_after(who));
  bool any = false;
  for (auto& r : s_.owners.routes().runs())
    if (r.owner == who) {
      orphans_.push_back({{vnode_set::range(r.lo, r.hi), who, r.epoch}, now, not_before});
      any = true;
    }
  if (any)
    s_.start_timer(out, not_before - now, timer_token::adopt());
}

void crash_watch::adopt_orphans(timestamp now, outbox& out) {
  if (orphans_.empty() || s_.status != supervisor::status::member)
    return;
  std::map<proc_id, vnode_set> due; // ours to claim now, by crashed owner: one claim each
  for (auto i = orphans_.begin(); i != orphans_.end();) {
    auto& o = i->route;
    // The part still named as the crashed owner's at the recorded epoch.
    std::vector<vnode_set::interval> xs;
    for (auto& r : s_.owners.routes().runs())
      if (r.owner == o.owner && r.epoch == o.epoch)
        xs.push_back({r.lo, r.hi});
    auto still = o.vnodes & vnode_set::from_intervals(std::move(xs));
    if (still.empty()) {
      i = orphans_.erase(i); // moved on: claimed by the adopter, or handed over before
      continue;
    }
    if (now < i->not_before || s_.members.adopter_of(o.owner) != s_.self) {
      i->route.vnodes = std::move(still);
      ++i;
      continue;
    }
    due[o.owner] |= still;
    i = orphans_.erase(i);
  }
  for (auto& [dead, vnodes] : due) {
    wire::route_entry entry{vnodes, s_.self, s_.owners.next_epoch(vnodes)};
    s_.owners.apply_routes({entry});
    for (auto m : s_.members.list())
      if (m != s_.self)
        s_.send(out, m, wire::routing_update{{entry}});
    if (!s_.members.is_member(dead))
      s_.send(out, dead, wire::routing_update{{entry}}); // alive after all? it learns
    tree_event e;
    e.what = tree_event::kind::adopted;
    e.at = now;
    e.peer = dead;
    e.vnodes = vnodes;
    out.events.push_back(std::move(e));
  }
  if (!due.empty())
    s_.updates.flush(out);
}

void crash_watch::end_life() {
  orphans_.clear();
  watched_ = no_proc;
}

} // namespace banyan::sup

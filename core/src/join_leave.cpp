#include "join_leave.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {
/// How many times a joiner asks again givers that handed nothing over (join_leave::
/// on_giver_timer), one `probe_timeout` apart.
constexpr int max_asks_again = 3;
} // namespace

void join_leave::found(timestamp now, const std::vector<wire::member>& members,
                       const routing_table& routes, outbox& out) {
  auto& me = s_.members.me();
  me.id = s_.self;
  for (auto& m : members) {
    if (m.id == s_.self)
      me = m;
    s_.members.add(m);
  }
  s_.members.add(me);
  s_.owners.routes() = routes;
  s_.status = supervisor::status::member;
  s_.owners.take_own_from_routes();
  s_.event(out, tree_event::kind::joined, now);
  s_.watch.start(out);
  s_.probes.trigger(now, out);
  s_.updates.flush(out);
}

void join_leave::join(timestamp, proc_id contact, const vnode_set& wanted, outbox& out) {
  if (s_.status != supervisor::status::idle && s_.status != supervisor::status::left)
    return;
  s_.status = supervisor::status::joining;
  // Figures are kept after a leave, for the engines (measured_rtt), and in the memory of
  // paths: members admitted again get theirs back.
  s_.paths.start_life();
  s_.repairs.reset();
  s_.probes.reset();
  s_.seeding.reset();
  s_.owners.reset();
  s_.suspects.reset();
  s_.merges.reset();
  s_.roots.reset();
  reset();
  auto& me = s_.members.me();
  me.id = s_.self;
  me.incarnation = (s_.rng() ^ s_.cfg.incarnation_salt) | 1; // a new one every join (0: founders)
  s_.members.add(me);
  contact_ = contact;
  wanted_ = wanted;
  join_attempts_ = 1;
  s_.send(out, contact, wire::join_request{me, wanted});
  s_.start_timer(out, s_.cfg.probe_timeout, timer_token::join_attempt(join_attempts_));
}

void join_leave::on_join_timer(timestamp now, std::uint64_t n, outbox& out) {
  if (s_.status != supervisor::status::joining || n != static_cast<std::uint64_t>(join_attempts_))
    return;
  if (join_attempts_ < 3) {
    ++join_attempts_;
    s_.send(out, contact_, wire::join_request{s_.members.me(), wanted_});
    s_.start_timer(out, s_.cfg.probe_timeout, timer_token::join_attempt(join_attempts_));
  } else {
    abandon_join();
    s_.event(out, tree_event::kind::join_failed, now);
  }
}

void join_leave::abandon_join() {
  if (s_.status != supervisor::status::joining)
    return;
  s_.status = supervisor::status::idle;
  s_.members.reset();
  s_.trees.reset();
  s_.roots.reset();
}

void join_leave::on_giver_timer(timestamp now, outbox& out) {
  givers_due_ = false; // an owner with nothing to give does not answer
  if (s_.status != supervisor::status::member)
    return;
  if (await_giver_) {
    await_giver_ = false; // no giver placed us: measure
    s_.probes.trigger(now, out);
  }
  // Givers that have not handed anything over within `probe_timeout` are asked again, a
  // bounded number of times. Assumes a live giver answers a request within
  // `probe_timeout`, and that a request can vanish without a trace: over TCP, frames
  // written behind a handshake that the peer refused (it timed out on a starved process)
  // are handed to the kernel and never come back. An owner with nothing to give does not
  // answer; asking it again costs one message. A giver whose first handover was only
  // slow hands over a second share: more vnodes here, nothing lost or doubled (every
  // handover is a route with a new epoch).
  // The join counts as done meanwhile (`awaiting_givers` stays false): vnodes that come
  // later are reported as gained, like any handover.
  if (!givers_.empty() && asks_left_ > 0) {
    --asks_left_;
    for (auto g : givers_)
      ask(g, out);
    s_.start_timer(out, s_.cfg.probe_timeout, timer_token::giver_wait());
  }
}

void join_leave::ask(proc_id giver, outbox& out) {
  if (wanted_.empty()) {
    s_.send(out, giver, wire::handover_request{{}, s_.self}); // a share of the contact's
    return;
  }
  for (auto& [owner, vs] : s_.owners.routes().partition(wanted_))
    if (owner == giver)
      s_.send(out, owner, wire::handover_request{vs, s_.self});
}

std::optional<error> join_leave::leave(timestamp now, proc_id recipient, outbox& out) {
  if (s_.status != supervisor::status::member)
    return make_error(errc::invalid_argument, "processor " + std::to_string(s_.self) +
                                                  " is not a member and cannot leave");
  if (s_.members.size() < 2)
    return make_error(errc::invalid_argument,
                      "processor " + std::to_string(s_.self) +
                        " is the last member: nobody can take its vnodes");
  s_.status = supervisor::status::leaving;
  s_.probes.abandon();
  refused_.clear();
  rank_nearest();
  offered_to_ = recipient;
  offer_vnodes(now, out);
  return std::nullopt;
}

void join_leave::rank_nearest() {
  // By the RTT measured, or, for a member not measured, by our distance from it along
  // its latency tree (one way: the RTTs of a LAN are below the wide-area ones, a LAN's
  // tree paths mostly below them too). When half of a LAN leaves at once, the leavers
  // refuse one another, and a leaver that had measured few of its LAN must still find a
  // member of it rather than the nearest it measured across a wide-area link.
  std::vector<std::pair<duration, proc_id>> ranked;
  for (auto m : s_.members.list()) {
    if (m == s_.self)
      continue;
    auto d = s_.paths.measured_rtt(m);
    if (!d)
      if (auto* t = s_.trees.find({m, tree_kind::latency}); t && t->connected())
        d = t->dist();
    if (d)
      ranked.emplace_back(*d, m);
  }
  std::sort(ranked.begin(), ranked.end());
  nearest_.clear();
  for (auto& r : ranked)
    nearest_.push_back(r.second);
}

void join_leave::offer_vnodes(timestamp now, outbox& out) {
  // Vnodes still on offer to a newcomer must not be offered twice: wait for the
  // answers (ownership::offer_resolved calls us again).
  if (s_.owners.offering_to_newcomer())
    return;
  if (s_.owners.own().empty()) {
    finish_leave(now, {}, out);
    return;
  }
  auto usable = [&](proc_id p) {
    return p != no_proc && p != s_.self && s_.members.is_member(p)
           && std::find(refused_.begin(), refused_.end(), p) == refused_.end();
  };
  auto to = offered_to_;
  if (!usable(to)) {
    // The nearest member (likely in the same cluster, see rank_nearest), else any.
    to = no_proc;
    for (auto m : nearest_)
      if (usable(m)) {
        to = m;
        break;
      }
    if (to == no_proc) {
      std::vector<proc_id> others;
      for (auto m : s_.members.list())
        if (usable(m))
          others.push_back(m);
      if (others.empty()) {
        // Everybody else refused (they are all leaving): stay a member.
        s_.status = supervisor::status::member;
        offered_to_ = no_proc;
        s_.probes.trigger(now, out);
        return;
      }
      to = others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(s_.rng)];
    }
  }
  offered_to_ = to;
  s_.owners.offer_all(to, out);
}

void join_leave::finish_leave(timestamp now, std::vector<wire::route_entry> routes,
                              outbox& out) {
  // Children first (messages between two processors arrive in order): they learn their
  // step-parents before they hear that we left.
  s_.repairs.hand_over_trees(out);
  for (auto m : s_.members.list())
    if (m != s_.self)
      s_.send(out, m, wire::member_left{s_.self, routes, s_.members.me().incarnation});
  s_.owners.set_farewell(std::move(routes));
  s_.status = supervisor::status::left;
  end_life(); // a later join starts afresh
  s_.repairs.answer_deferred(out); // refusals, pointing on
  s_.event(out, tree_event::kind::left, now);
}

void join_leave::end_life() {
  s_.paths.remember_all();
  s_.probes.reset();
  s_.updates.reset();
  s_.owners.reset();
  s_.trees.reset();
  s_.roots.reset();
  s_.members.reset();
  s_.watch.end_life();
  s_.lease.end_life();
  s_.suspects.reset();
  s_.repairs.end_life();
  s_.seeding.reset();
  reset();
}

void join_leave::rejoin(timestamp now, proc_id contact, outbox& out) {
  s_.status = supervisor::status::left;
  end_life();
  s_.repairs.answer_deferred(out);
  join(now, contact, {}, out);
}

void join_leave::on(timestamp now, proc_id, const wire::join_request& m, outbox& out) {
  if (s_.status == supervisor::status::leaving) {
    // Pass the newcomer on to a member that stays (the one taking our vnodes, if known).
    auto to = offered_to_;
    if (to == no_proc || !s_.members.is_member(to))
      for (auto p : s_.members.list())
        if (p != s_.self && p != m.newcomer.id) {
          to = p;
          break;
        }
    if (to != no_proc)
      s_.send(out, to, m);
    return;
  }
  if (s_.status != supervisor::status::member)
    return;
  auto n = m.newcomer.id;
  auto* info = s_.members.info(n);
  bool known = info && info->incarnation == m.newcomer.incarnation;
  if (!known && !s_.members.admit(now, m.newcomer, out, false, n))
    return; // an incarnation that has already left
  bool fresh = !known;
  s_.members.sponsor(n, now);
  // Tell the members first: an owner asked below to hand vnodes over must already
  // know the newcomer when the request arrives (messages between two processors
  // arrive in order).
  if (fresh)
    for (auto p : s_.members.list())
      if (p != s_.self && p != n)
        s_.send(out, p, wire::member_joined{m.newcomer});
  // Vnodes move later: the newcomer asks their owners once it is a member, so that
  // nothing is handed to a processor whose join then fails.
  wire::join_accept accept;
  for (auto p : s_.members.list())
    accept.members.push_back(*s_.members.info(p));
  accept.routes = s_.owners.routes().snapshot();
  s_.send(out, n, std::move(accept));
  if (s_.roots.on_demand()) // the roots with trees, right after (in order)
    s_.send(out, n, wire::trees_open{s_.roots.snapshot()});
  if (fresh)
    s_.seeding.expect_seed(now, n, out);
}

void join_leave::on(timestamp now, proc_id from, const wire::join_accept& m, outbox& out) {
  if (s_.status != supervisor::status::joining)
    return;
  // The list is hearsay, but for the contact's own entry: its incarnation now. A notice
  // about an earlier incarnation of the contact that reached us while we waited (a
  // member_joined relayed to newcomers) would otherwise stand, and a later view that
  // buries it would drop our edges to the live contact without a release.
  for (auto& mem : m.members)
    s_.members.admit(now, mem, out, mem.id != from);
  for (auto& r : s_.owners.foreign_routes(m.routes))
    s_.owners.routes().apply(r);
  s_.status = supervisor::status::member;
  s_.owners.take_own_from_routes();
  // Announce ourselves: the contact told the members it knows, but it may not
  // know every member yet.
  for (auto p : s_.members.list())
    if (p != s_.self && p != from)
      s_.send(out, p, wire::member_joined{s_.members.me()});
  // Now ask for vnodes (after the announcements: an owner must know us first, and
  // messages between two processors arrive in order).
  givers_.clear();
  if (wanted_.empty()) {
    givers_.push_back(from);
  } else {
    for (auto& [owner, vs] : s_.owners.routes().partition(wanted_))
      if (owner != no_proc && owner != s_.self)
        givers_.push_back(owner);
  }
  for (auto g : givers_)
    ask(g, out);
  asks_left_ = max_asks_again;
  s_.event(out, tree_event::kind::joined, now);
  out.events.back().peer = from; // the contact that let us in
  s_.watch.start(out);
  if (givers_.empty()) {
    s_.probes.trigger(now, out);
  } else {
    // Measuring starts once the givers have placed us (vnode_handover), or when none
    // has after `probe_timeout`.
    await_giver_ = true;
    givers_due_ = true;
    s_.start_timer(out, s_.cfg.probe_timeout, timer_token::giver_wait());
  }
}

void join_leave::on(timestamp now, proc_id from, const wire::vnode_handover& m, outbox& out) {
  // Take the vnodes only while staying: a leaving processor would lose them.
  bool take = s_.status == supervisor::status::member && m.route.owner == s_.self;
  if (take) {
    const auto before = s_.owners.own();
    s_.owners.apply_routes({m.route});
    if (auto got = s_.owners.own() - before; !got.empty()) {
      tree_event e;
      e.what = tree_event::kind::gained;
      e.at = now;
      e.peer = from;
      e.vnodes = std::move(got);
      out.events.push_back(std::move(e));
    }
  }
  s_.send(out, from, wire::vnode_handover_ack{m.route.epoch, take});
  auto asked = std::find(givers_.begin(), givers_.end(), from);
  if (!take || asked == givers_.end())
    return;
  givers_.erase(asked);
  bool waited = await_giver_;
  await_giver_ = false;
  // A joiner first attaches under the member that gave it vnodes, in every tree still
  // without a parent: a LAN edge (it held our vnodes while we were away, or is our
  // contact), no change to the rest of the tree; the vnodes move down one edge by the
  // usual subtree updates. Measurements improve the place later, with the paper's count
  // of extra probes, within the LAN once every tree has a parent.
  auto rtt = s_.paths.measured_rtt(from).value_or(duration{0});
  auto bw = s_.paths.measured_bw(from).value_or(0);
  s_.probes.settling();
  bool any = false;
  for (auto& t : s_.trees.all())
    if (t && !s_.repairs.has_step(t->key()))
      any = s_.repairs.hint(*t, {from}, rtt, bw) || any;
  if (any)
    s_.repairs.ask_step_parents(out);
  else if (waited)
    s_.probes.trigger(now, out);
}

void join_leave::reset() {
  givers_.clear();
  await_giver_ = false;
  givers_due_ = false;
  asks_left_ = 0;
  refused_.clear();
  nearest_.clear();
  offered_to_ = no_proc;
}

} // namespace banyan::sup

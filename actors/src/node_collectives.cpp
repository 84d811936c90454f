// banyan::node's collectives: the engines of a membership in an engine_host, their
// frames to the transport, their timers, deliveries and results, the baselines' plans,
// and when a node that left has drained (node_machine.hpp).

#include "node_machine.hpp"

namespace banyan::actors::node_internal {

// --- collectives ------------------------------------------------------------------------

/// Whether the engines of the last membership have drained (core/send_fates.hpp): they
/// hold nothing, nothing they sent waits in the transport (or in `overflow`), and a frame
/// written to the kernel has had time to be refused and come back: `drain_rtts` round
/// trips to the slowest peer written to (the supervisor's measurements, kept after a
/// leave), at least `drain_floor`, from when the queues were found empty or the last
/// send, whichever is later. A peer never measured: the blind `drain_linger`.
bool engines_drained(node_ptr self) {
  auto& st = self->state;
  if (st.host.empty())
    return true;
  auto now = now_of();
  if (st.host.holding())
    return false;
  auto busy = [&] {
    st.flushed_at.reset();
    return false;
  };
  for (auto& [p, q] : st.overflow)
    if (!q.empty())
      return busy();
  duration worst{0};
  bool unmeasured = false;
  for (auto p : st.written_to) {
    if (st.tp->queued_bytes(p) != 0)
      return busy();
    if (auto rtt = st.sup->measured_rtt(p))
      worst = std::max(worst, *rtt);
    else
      unmeasured = true;
  }
  const auto last = st.host.last_send();
  if (!st.flushed_at || *st.flushed_at < last)
    st.flushed_at = now;
  const auto bound = std::chrono::duration_cast<duration>(worst * st.drain_rtts);
  const auto fates = unmeasured ? send_fates::blind(st.bcast_cfg.drain_linger)
                                : send_fates::bounded(*st.flushed_at, std::max(st.drain_floor, bound));
  return st.host.drained(now, fates);
}

/// New engines for a membership that is about to begin (`settled`: a founder's vnodes).
void new_engines(node_ptr self, const vnode_set& settled) {
  auto& st = self->state;
  ++st.membership;
  st.host.clear(); // before the views they read
  st.bcast = nullptr;
  st.red = nullptr;
  st.plans = 0;
  st.static_view.reset();
  st.static_routes.reset();
  st.view = std::make_unique<supervisor_view>(*st.sup);
  auto bc = st.bcast_cfg;
  // Broadcasts are named (origin, kind, life, seq), numbered on from the last membership
  // (`start_broadcast`); streams are numbered apart per membership.
  bc.life = st.life;
  bc.first_seq = st.next_seq;
  bc.first_tag = (std::uint64_t{st.membership} << 32) + 1;
  st.bcast = &st.host.add(std::make_unique<broadcast_collective>(*st.view, bc));
  st.red = &st.host.add(std::make_unique<reduce_collective>(*st.view, st.ops, st.reduce_cfg,
                                                            settled));
  add_allreduce_engines(self, settled);
  st.host.add(make_gather_collective(*st.view, st.ops, st.reduce_cfg, settled));
  st.host.add(make_scatter_collective(*st.view, bc));
  // Its broadcasts are numbered on from the node's count too (`run_engines`).
  st.host.add(std::make_unique<allgather_collective>(*st.view, st.ops, st.reduce_cfg, bc,
                                                     settled));
  add_alltoall_engine(self, settled);
  st.written_to.clear();
  st.flushed_at.reset();
  // The outcomes the last membership's engine still owed will never come.
  auto waiters = std::move(st.outcome_waiters);
  st.outcome_waiters.clear();
  for (auto& [op, rs] : waiters)
    for (auto& r : rs)
      r->answer(expected<broadcast_completion>(make_error(
        errc::stopped, "broadcast " + wire::to_string(op) + ": the membership that started it ended")));
  if (st.stall_period.count() > 0 && st.last_beat.count() == 0) {
    st.last_beat = now_of();
    self->later(st.stall_period, beat_atom::value);
  }
}

/// Hands `e`, from an engine, to the transport; what cannot go now waits in `overflow`
/// (in order behind what waits already), and a frame with no address bounces at once.
/// Returns false for a frame that bounced (the caller hands it to its engine).
bool send_engine_frame(node_ptr self, wire::envelope& e) {
  auto& st = self->state;
  auto held = st.overflow.find(e.to);
  if (held != st.overflow.end() && !held->second.empty()) {
    held->second.push_back(std::move(e));
    return true;
  }
  net::send_options opt;
  opt.return_undeliverable = true;
  st.written_to.insert(e.to);
  switch (st.tp->send(e, opt)) {
  case net::send_status::queued:
  case net::send_status::stopped:
    return true;
  case net::send_status::backpressure:
    st.overflow[e.to].push_back(std::move(e));
    if (!st.overflow_armed) {
      st.overflow_armed = true;
      self->later(overflow_retry, overflow_atom::value);
    }
    return true;
  case net::send_status::unknown_peer:
  case net::send_status::oversized:
    return false;
  }
  return true;
}

void bounce_to_engine(node_ptr self, proc_id to, const wire::message& m) {
  self->state.host.on_undeliverable(now_of(), to, m);
}

/// Whether `p`, sent by this node's reduce engine, carries this node's part of an open
/// reduction: it covers every vnode counted here (or, with none counted, it is the
/// reduction's first partial sent from here).
void check_part_sent(node_ptr self, const wire::reduce_partial& p) {
  auto& st = self->state;
  if (is_allreduce(p.collective))
    return; // an allreduce resolves with its result (take_allreduce)
  // An allgather is answered by its blocks coming down, unless no vnode is here for them.
  if ((p.collective == collective_kind::allgather || p.collective == collective_kind::alltoall) &&
      st.sup->state() == supervisor::status::member &&
      !st.sup->own_vnodes().empty())
    return;
  auto op = p.op;
  if (auto* a2a = p.collective == collective_kind::alltoall
                    ? st.host.get<alltoall_collective>(collective_kind::alltoall)
                    : nullptr)
    op = a2a->call_number(p.op); // the gather of one of its ranges (core/alltoall.hpp)
  auto it = st.reductions.find({p.collective, op});
  if (it == st.reductions.end() || !p.vnodes.includes(*it->second.contributed))
    return;
  it->second.req->answer(expected<reduce_result>(reduce_result{op, p.root, {}, {}}));
  st.reductions.erase(it);
}

/// Hands what a broadcast-like engine delivered to the delivery handler.
void take_deliveries(node_ptr self, broadcast_outbox& bo) {
  auto& counted = *self->state.shared->counters;
  for (auto& d : bo.deliveries) {
    const bool scattered = d.op.kind == collective_kind::scatter;
    auto& c = counted.deliveries[d.p2p ? 1 : scattered ? 2 : 0];
    node_counters::add(c[0]);
    node_counters::add(c[1], d.vnodes.size());
    node_counters::add(c[2], d.payload.size());
    node_delivery nd;
    nd.what = d.p2p       ? node_delivery::kind::message
              : scattered ? node_delivery::kind::scatter
                          : node_delivery::kind::broadcast;
    nd.op = d.op;
    nd.vnodes = std::move(d.vnodes);
    nd.payload = std::move(d.payload);
    self->state.pending_deliveries.push_back(std::move(nd));
  }
}

void take_completions(node_ptr self, broadcast_outbox& bo) {
  auto& st = self->state;
  for (auto& c : bo.completions) {
    std::string why;
    if (!c.complete) {
      why = "broadcast " + wire::to_string(c.op) + " timed out after "
            + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                               st.bcast_cfg.complete_within).count())
            + " ms at processor " + std::to_string(st.sup->self()) + " (its origin): vnodes";
      bool first = true;
      for (auto& [p, vs] : c.owners) {
        why += (first ? " " : ", ") + vs.to_string()
               + (p == no_proc ? std::string(" (owner unknown)")
                               : " (processor " + std::to_string(p)
                                   + (p != st.sup->self() && !st.sup->is_member(p) ? ", no longer a member)" : ")"));
        first = false;
      }
      why += " did not acknowledge it (sent again " + std::to_string(c.resends) + " times)";
      emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc, why, c.missing});
    }
    if (auto w = st.outcome_waiters.find(c.op); w != st.outcome_waiters.end()) {
      for (auto& r : w->second)
        r->answer(why.empty() ? expected<broadcast_completion>(c)
                              : expected<broadcast_completion>(make_error(errc::timeout, why)));
      st.outcome_waiters.erase(w);
    }
    st.outcomes[c.op] = {c, why};
    st.outcome_order.push_back(c.op);
    while (st.outcome_order.size() > kept_outcomes) {
      st.outcomes.erase(st.outcome_order.front());
      st.outcome_order.pop_front();
    }
  }
}

void on_outcome_request(node_ptr self, const collective_request_ptr& r) {
  auto& st = self->state;
  if (auto o = st.outcomes.find(r->op); o != st.outcomes.end()) {
    r->answer(o->second.second.empty()
                ? expected<broadcast_completion>(o->second.first)
                : expected<broadcast_completion>(make_error(errc::timeout, o->second.second)));
    return;
  }
  if (!st.bcast_cfg.acknowledge) {
    r->answer(expected<broadcast_completion>(
      make_error(errc::invalid_argument, "broadcast outcomes need bcast.acknowledge")));
    return;
  }
  if (st.bcast && st.bcast->engine().awaits(r->op)) {
    st.outcome_waiters[r->op].push_back(r);
    return;
  }
  r->answer(expected<broadcast_completion>(make_error(
    errc::not_found, "broadcast " + wire::to_string(r->op) + " was not started here in this membership"
                       " (or its outcome is no longer kept)")));
}

void check_stall(node_ptr self, bool beat) {
  auto& st = self->state;
  if (st.stall_period.count() == 0 || st.last_beat.count() == 0)
    return;
  const auto now = now_of();
  if (now - st.last_beat > st.stall_limit && now >= st.fenced_until) {
    st.fenced_until = now + st.stall_fence;
    if (st.bcast)
      st.bcast->engine().fence(now, st.fenced_until, st.bcast->out());
    auto ms = [](duration d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                "this process did not run for " + ms(now - st.last_beat)
                    + " ms (stopped?): broadcast deliveries wait " + ms(st.stall_fence)
                    + " ms for news of an adoption of its vnodes", {}});
  }
  if (beat) {
    st.last_beat = now;
    self->later(st.stall_period, beat_atom::value);
  }
}

/// Answers the reductions a reduction engine (of kind `kind`) completed; reports problems.
/// A contribution of the wrong size for a vnode that settled here later fails the
/// reduction's future at once (it cannot complete without it).
void take_results(node_ptr self, collective_kind kind, reduce_outbox& ro) {
  auto& st = self->state;
  for (auto& r : ro.results) {
    auto it = st.reductions.find({kind, r.op});
    if (it == st.reductions.end()) {
      emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                  "reduction " + std::to_string(r.op)
                      + " completed here after this node's part was answered; result dropped", {}});
      continue;
    }
    it->second.req->answer(expected<reduce_result>(std::move(r)));
    st.reductions.erase(it);
  }
  for (auto& p : ro.problems) {
    const auto line = "reduction " + std::to_string(p.op) + ": problem with vnodes "
                      + p.vnodes.to_string() + ": " + p.detail;
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc, line, {}});
    if (p.what != reduce_problem::kind::bad_data)
      continue;
    if (auto it = st.reductions.find({kind, p.op}); it != st.reductions.end()) {
      it->second.req->answer(expected<reduce_result>(make_error(errc::invalid_argument, line)));
      st.reductions.erase(it);
    }
  }
}

/// Answers the allgathers whose blocks reached this node's vnodes; reports problems.
void take_allgathers(node_ptr self, allgather_collective& ag) {
  auto& st = self->state;
  auto& out = ag.out();
  for (auto& d : out.deliveries) {
    reduce_result r{d.op, d.root, d.all, d.blocks};
    auto it = st.reductions.find({collective_kind::allgather, d.op});
    if (it == st.reductions.end()) {
      // Answered by an earlier delivery, or not started here yet.
      if (d.op > ag.up().last_started()) {
        st.early_allgathers[d.op] = std::move(r);
        while (st.early_allgathers.size() > 16)
          st.early_allgathers.erase(st.early_allgathers.begin());
      }
      continue;
    }
    it->second.req->answer(expected<reduce_result>(std::move(r)));
    st.reductions.erase(it);
  }
  for (auto& p : out.problems)
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                "allgather " + std::to_string(p.op) + ": problem with vnodes "
                  + p.vnodes.to_string() + ": " + p.detail, {}});
  st.next_seq = std::max(st.next_seq, ag.down().next_seq());
  ag.down().number_from(st.next_seq);
}

namespace {

/// "{512-1023} (processor 3), {7} (processor 4, no longer a member)": `missing` by the
/// owner each vnode had when the reduction started here, else as known now.
std::string name_missing(node_ptr self, const open_reduction& o, const reduce_abandoned& rep) {
  auto& sup = *self->state.sup;
  std::map<proc_id, vnode_set> by;
  auto rest = rep.missing;
  for (auto& [p, vs] : o.owners)
    if (auto part = rest & vs; !part.empty()) {
      by[p] |= part;
      rest -= part;
    }
  for (auto& [p, vs] : rep.missing_owners)
    if (auto part = rest & vs; !part.empty())
      by[p] |= part;
  std::string r;
  for (auto& [p, vs] : by) {
    r += r.empty() ? "" : ", ";
    r += vs.to_string();
    if (p == no_proc)
      r += " (owner unknown)";
    else
      r += " (processor " + std::to_string(p)
           + (p != sup.self() && !sup.is_member(p) ? ", no longer a member)" : ")");
  }
  return r;
}

std::string ms(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

} // namespace

/// Gives up the open reduction `key` here (its time is up, or it was cancelled): the
/// engine drops it, and its future fails with `code`, saying what was missing.
bool fail_reduction(node_ptr self, const reduction_key& key, errc code,
                    const std::string& reason) {
  auto& st = self->state;
  auto it = st.reductions.find(key);
  if (it == st.reductions.end())
    return false;
  auto o = std::move(it->second);
  st.reductions.erase(it);
  reduce_abandoned rep;
  rep.op = key.second;
  if (auto* red = st.host.get<reduce_collective>(key.first))
    rep = red->engine().abandon(now_of(), key.second, red->out());
  else if (auto* ar = st.host.get<allreduce_collective>(key.first))
    rep = ar->abandon(now_of(), key.second);
  else if (auto* ag = st.host.get<allgather_collective>(key.first))
    rep = ag->abandon(now_of(), key.second);
  else if (auto* a2a = st.host.get<alltoall_collective>(key.first))
    rep = a2a->abandon(now_of(), key.second);
  const bool named = is_allreduce(key.first) || key.first == collective_kind::alltoall;
  std::string why = std::string(named ? to_string(key.first) : "reduction")
                    + " " + std::to_string(key.second)
                    + (code != errc::timeout ? std::string(" cancelled")
                       : reason.empty()      ? " timed out after " + ms(o.timeout)
                                             : " " + reason)
                    + " at processor " + std::to_string(st.sup->self());
  if (rep.at_root) {
    why += " (root vnode " + std::to_string(rep.root) + "'s owner)";
    why += rep.missing.empty() ? std::string(": nothing was missing")
                               : "; missing vnodes " + name_missing(self, o, rep);
  } else if (rep.known && !rep.part_sent) {
    why += " before its part went up";
    if (!rep.missing.empty())
      why += "; waiting for vnodes " + name_missing(self, o, rep);
    if (!rep.waiting_for.empty()) {
      why += rep.missing.empty() ? "; waiting for children" : ", children";
      for (auto p : rep.waiting_for)
        why += " " + std::to_string(p);
    }
  } else if (named) {
    why += ", waiting for the result";
  }
  o.req->answer(expected<reduce_result>(make_error(code, why)));
  run_engines(self);
  return true;
}

void on_reduction_deadline(node_ptr self, collective_kind kind, std::uint64_t seq,
                           std::uint64_t serial) {
  auto& st = self->state;
  auto it = st.reductions.find({kind, seq});
  if (it == st.reductions.end() || it->second.serial != serial)
    return; // answered already
  fail_reduction(self, {kind, seq}, errc::timeout);
}

namespace {

/// The members that owned, when reduction `key` started here, vnodes still missing at
/// the root, and are members no more; empty when this is not the root's owner.
std::set<proc_id> departed_contributors(node_ptr self, const reduction_key& key,
                                        const open_reduction& o) {
  auto& st = self->state;
  std::set<proc_id> out;
  auto* red = st.host.get<reduce_collective>(key.first);
  if (!red || !st.view)
    return out;
  auto got = red->engine().gathered_at_root(key.second);
  if (!got)
    return out;
  const auto missing = st.view->all_vnodes() - *got;
  for (auto& [p, vs] : o.owners)
    if (p != no_proc && p != st.sup->self() && !st.sup->is_member(p) && !(missing & vs).empty())
      out.insert(p);
  return out;
}

} // namespace

void check_lost_contributors(node_ptr self) {
  auto& st = self->state;
  if (st.lost_grace.count() == 0)
    return;
  for (auto& [key, o] : st.reductions) {
    if (o.lost_armed || departed_contributors(self, key, o).empty())
      continue;
    o.lost_armed = true;
    self->later(st.lost_grace, lost_atom::value, static_cast<std::uint8_t>(key.first), key.second,
                o.serial);
  }
}

void on_reduction_lost(node_ptr self, collective_kind kind, std::uint64_t seq,
                       std::uint64_t serial) {
  auto& st = self->state;
  auto it = st.reductions.find({kind, seq});
  if (it == st.reductions.end() || it->second.serial != serial)
    return; // answered already
  auto gone = departed_contributors(self, it->first, it->second);
  if (gone.empty()) {
    it->second.lost_armed = false; // their vnodes arrived (a handover): checked again later
    return;
  }
  std::string who;
  for (auto p : gone)
    who += (who.empty() ? "" : ", ") + std::to_string(p);
  fail_reduction(self, {kind, seq}, errc::timeout,
                 "cannot complete (failed early, " + ms(st.lost_grace)
                     + " after processor(s) " + who
                     + " left or crashed without their contributions reaching the root)");
}

/// The vnodes whose reduction histories are here (empty without a reduction engine).
vnode_set settled_here(node_ptr self) {
  auto& st = self->state;
  if (!st.red)
    return {};
  // The allreduce and barrier engines keep histories of their own, handed over alike.
  auto settled = st.red->engine().settled();
  for (auto kind : {collective_kind::allreduce, collective_kind::barrier})
    if (auto* ar = st.host.get<allreduce_collective>(kind))
      settled &= ar->reducer().settled();
  return settled;
}

std::uint64_t next_reduction_seq(node_ptr self, collective_kind over) {
  auto& st = self->state;
  const auto state = st.sup->state();
  if (state != supervisor::status::member && state != supervisor::status::leaving)
    return 0;
  if (auto* ar = st.host.get<allreduce_collective>(over))
    return ar->next_op();
  if (auto* ag = st.host.get<allgather_collective>(over))
    return ag->up().next_op();
  if (auto* a2a = st.host.get<alltoall_collective>(over))
    return a2a->next_op();
  auto* red = st.host.get<reduce_collective>(over);
  return red ? red->engine().next_op() : 0;
}

/// Carries out what the engines asked for, until they ask for nothing more: timers to
/// the actor (named by engine kind and membership), results to their handlers, then the
/// frames to the transport (a frame that bounces at once goes back to its engine, whose
/// reaction the next round carries out).
void run_engines(node_ptr self) {
  auto& st = self->state;
  const auto m = st.membership;
  for (bool more = true; more;) {
    more = false;
    std::vector<wire::envelope> sends;
    st.host.for_each([&](collective_engine& e) {
      auto& out = e.outbox();
      const auto kind = static_cast<std::uint8_t>(e.kind());
      for (auto& t : out.timers)
        self->later(t.after, engine_timer_atom::value, kind, m, t.token);
      if (auto* b = dynamic_cast<broadcast_collective*>(&e)) {
        take_deliveries(self, b->out());
        take_completions(self, b->out());
      }
      else if (auto* sag = dynamic_cast<scatter_allgather_collective*>(&e))
        take_deliveries(self, sag->out());
      else if (auto* r = dynamic_cast<reduce_collective*>(&e))
        take_results(self, e.kind(), r->out());
      else if (auto* a = dynamic_cast<allreduce_collective*>(&e))
        take_allreduce(self, e.kind(), a->out());
      else if (auto* ag = dynamic_cast<allgather_collective*>(&e))
        take_allgathers(self, *ag);
      else if (auto* a2a = dynamic_cast<alltoall_collective*>(&e))
        take_alltoalls(self, *a2a);
      std::move(out.sends.begin(), out.sends.end(), std::back_inserter(sends));
      e.clear_outbox();
    });
    // Acknowledgements after data: they only stop their receiver's resends, while the
    // data frames beside them carry what someone waits for (at a reduction's root, the
    // release after the acknowledgement of the partial that completed it). Each write
    // costs the sending thread a system call and loopback's delivery to the receiver
    // (10-20 us on a loaded host), so a data frame written after an acknowledgement
    // waits for it. An acknowledgement is held back only past data frames (segments,
    // partials): before any other frame of the engines (offers, answers, handoffs, asks:
    // the recovery protocols) the held ones go first, so their order is as before.
    // Assumes the receiving engine takes an acknowledgement whenever it comes after a
    // data frame (`reduce_engine::handle_ack`, the broadcast's completion): a few
    // microseconds later is what a slower link does too.
    auto send = [&](wire::envelope& e) {
      if (auto* p = std::get_if<wire::reduce_partial>(&e.body))
        check_part_sent(self, *p);
      if (!send_engine_frame(self, e)) {
        bounce_to_engine(self, e.to, e.body);
        more = true;
      }
    };
    std::vector<wire::envelope*> acks;
    auto send_acks = [&] {
      for (auto* a : acks)
        send(*a);
      acks.clear();
    };
    for (auto& e : sends) {
      if (std::holds_alternative<wire::reduce_ack>(e.body)
          || std::holds_alternative<wire::bcast_ack>(e.body)) {
        acks.push_back(&e);
        continue;
      }
      if (!std::holds_alternative<wire::bcast_segment>(e.body)
          && !std::holds_alternative<wire::reduce_partial>(e.body))
        send_acks();
      send(e);
    }
    send_acks();
  }
}

/// The engines over the supervisor's view look at it again (after every supervisor
/// event); vnodes adopted from a crashed member go with it (their history died there).
void view_changed(node_ptr self) {
  auto& st = self->state;
  if (st.host.empty())
    return;
  st.host.on_view_change(now_of(), view_change{st.adopted});
  st.adopted.clear();
  run_engines(self);
  check_lost_contributors(self);
}

/// A linger poll: answers `stop` and deferred memberships once the engines drained.
void linger(node_ptr self) {
  auto& st = self->state;
  if (!engines_drained(self)) {
    if (!st.lingering) {
      st.lingering = true;
      self->later(linger_poll, linger_atom::value);
    }
    return;
  }
  for (auto& w : st.drain_waiters)
    w->set_value();
  st.drain_waiters.clear();
  auto deferred = std::move(st.deferred);
  st.deferred.clear();
  for (auto& r : deferred)
    on_request(self, std::move(r));
}

/// Starts broadcast or message `r` on the engine it names, numbered from this node's
/// one count (1, 2, 3, ... whatever the engine, across memberships).
expected<wire::collective_id> start_broadcast(node_ptr self, const collective_request& r) {
  auto& st = self->state;
  auto now = now_of();
  auto missing = [&](const char* what) {
    return make_error(errc::invalid_argument,
                      std::string("no ") + what + " installed on processor " +
                        std::to_string(st.sup->self()));
  };
  auto numbered = [&](auto& engine, auto&& start) {
    engine.number_from(st.next_seq);
    auto id = start();
    st.next_seq = engine.next_seq();
    return id;
  };
  if (r.what == collective_request::kind::send)
    return numbered(st.bcast->engine(), [&] { return st.bcast->send(now, vnode_set{r.to}, r.message); });
  switch (r.over) {
  case collective_kind::broadcast:
    return numbered(st.bcast->engine(), [&] { return st.bcast->broadcast(now, r.message); });
  case collective_kind::static_broadcast:
    if (auto* b = st.host.get<broadcast_collective>(collective_kind::static_broadcast))
      return numbered(b->engine(), [&] { return b->broadcast(now, r.message); });
    return missing("static tree");
  case collective_kind::scatter:
    if (auto* sc = st.host.get<broadcast_collective>(collective_kind::scatter)) {
      st.view->refresh();
      auto bytes = scatter_payload(*st.view, r.root, r.blocks);
      if (!bytes)
        return bytes.err();
      return numbered(sc->engine(), [&] { return sc->broadcast(now, *bytes); });
    }
    return missing("scatter engine");
  case collective_kind::scatter_allgather:
    if (auto* sag = st.host.get<scatter_allgather_collective>(collective_kind::scatter_allgather))
      return numbered(sag->engine(), [&] { return sag->broadcast(now, r.message); });
    return missing("scatter-allgather");
  default:
    return make_error(errc::invalid_argument,
                      std::string("not a broadcast: ") + to_string(r.over));
  }
}

void on_collective(node_ptr self, const collective_request_ptr& r) {
  if (r->on_reduced) // runs as a handler, after this step
    r->defer = [self](std::function<void()> fn) { self->defer(std::move(fn)); };
  auto& st = self->state;
  auto now = now_of();
  const auto state = st.sup->state();
  const bool member = st.bcast && state == supervisor::status::member;
  using kind = collective_request::kind;
  switch (r->what) {
  case kind::outcome:
    on_outcome_request(self, r);
    break;
  case kind::broadcast:
  case kind::send: {
    if (!member) {
      r->answer(expected<wire::collective_id>(make_error(
        errc::invalid_argument, "processor " + std::to_string(st.sup->self()) + " is not a member")));
      break;
    }
    if (r->what == kind::broadcast && r->over != collective_kind::static_broadcast)
      st.sup->prepare(now, st.out); // trees on demand: this node roots the broadcast
    r->answer(start_broadcast(self, *r));
    run_engines(self);
    break;
  }
  case kind::reduce: {
    auto& nr = r->reduction;
    if (is_allreduce(nr.over)) {
      start_allreduce(self, r);
      break;
    }
    if (nr.over == collective_kind::alltoall) {
      start_alltoall(self, r);
      break;
    }
    auto refuse = [&](errc code, const std::string& why) {
      r->answer(expected<reduce_result>(make_error(code, "reduction " + std::to_string(nr.seq)
                                                           + " at processor "
                                                           + std::to_string(st.sup->self())
                                                           + ": " + why)));
    };
    const bool in = state == supervisor::status::member || state == supervisor::status::leaving;
    auto* red = in ? st.host.get<reduce_collective>(nr.over) : nullptr;
    auto* ag = in ? st.host.get<allgather_collective>(nr.over) : nullptr;
    if (!red && !ag) {
      refuse(errc::invalid_argument,
             !in ? std::string("not a member")
             : nr.over == collective_kind::static_reduce ? std::string("no static tree installed")
                                                        : "not a reduction: " + std::string(to_string(nr.over)));
      break;
    }
    if (nr.count == 0 || !nr.values || nr.timeout.count() < 0) {
      refuse(errc::invalid_argument, nr.count == 0 ? "count is 0"
                                     : !nr.values  ? "no values function"
                                                   : "negative timeout");
      break;
    }
    const reduction_key key{nr.over, nr.seq};
    if (st.reductions.count(key) != 0) {
      refuse(errc::invalid_argument, "already running here");
      break;
    }
    if (nr.over != collective_kind::static_reduce && st.sup->own_vnodes().contains(nr.root))
      st.sup->prepare(now, st.out); // trees on demand: this node roots the reduction
    auto counted = std::make_shared<vnode_set>();
    contribution_fn values = [counted, fn = nr.values](vnode_id v) {
      counted->insert(v);
      return fn(v);
    };
    reduce_spec spec{nr.seq, nr.root, nr.op, nr.count};
    if (nr.over == collective_kind::gather)
      spec = gather_spec(nr.seq, nr.root, nr.count, st.sup->routes().all().size());
    if (auto err = ag ? ag->start(now, nr.seq, nr.root, nr.count, std::move(values))
                      : red->start(now, spec, std::move(values))) {
      if (ag)
        ag->clear_outbox();
      else
        red->clear_outbox();
      r->answer(expected<reduce_result>(*err));
      break;
    }
    open_reduction o;
    o.req = r;
    o.contributed = counted;
    o.serial = ++st.next_serial;
    o.timeout = nr.timeout.count() > 0 ? nr.timeout : st.op_timeout;
    o.owners = st.sup->routes().partition(st.sup->routes().all());
    self->later(o.timeout, deadline_atom::value, static_cast<std::uint8_t>(nr.over), nr.seq,
                o.serial);
    st.reductions[key] = std::move(o);
    if (auto early = st.early_allgathers.find(nr.seq);
        ag && early != st.early_allgathers.end()) {
      st.reductions[key].req->answer(expected<reduce_result>(std::move(early->second)));
      st.reductions.erase(key);
      st.early_allgathers.erase(early);
    }
    run_engines(self);
    break;
  }
  }
  after(self, false, false);
}

/// Installs a baseline's plan (`r.plan`: a static tree, or scatter-allgather over
/// `r.procs` processors) for this membership, replacing the one installed before.
node::result install_plan(node_ptr self, const node_request& r) {
  auto& st = self->state;
  auto& sup = *st.sup;
  if (!st.bcast || sup.state() != supervisor::status::member)
    return make_error(errc::invalid_argument,
                      "processor " + std::to_string(sup.self()) + " is not a member");
  const auto n = r.plan ? r.plan->size() : r.procs;
  for (auto p : sup.members())
    if (p >= n)
      return make_error(errc::invalid_argument,
                        "the plan covers processors 0.." + std::to_string(n) + ", not member "
                          + std::to_string(p));
  if (r.plan) {
    std::vector<bool> members(n, false);
    for (auto p : sup.members())
      members[p] = true;
    if (auto wrong = r.plan->validate(members))
      return make_error(errc::invalid_argument, "the tree does not span the members: " + *wrong);
  } else if (n != sup.members().size()) {
    return make_error(errc::invalid_argument,
                      "scatter-allgather over processors 0.." + std::to_string(n) + " needs them "
                        "all as members (" + std::to_string(sup.members().size()) + " are)");
  }
  // Broadcasts are numbered from the node's count (`start_broadcast`); streams apart
  // from earlier memberships and plans.
  const auto first_tag = (std::uint64_t{st.membership} << 32) | (std::uint64_t{++st.plans} << 20);
  if (!r.plan) {
    scatter_allgather_config cfg;
    cfg.first_seq = st.next_seq;
    cfg.life = st.life;
    auto* owner = st.sup.get();
    st.host.add(std::make_unique<scatter_allgather_collective>(
                  sup.self(), r.procs, [owner] { return owner->own_vnodes(); }, cfg),
                false);
    return std::nullopt;
  }
  st.host.remove(collective_kind::static_broadcast); // before the view they read
  st.host.remove(collective_kind::static_reduce);
  st.static_view.reset();
  st.static_routes = std::make_unique<routing_table>(sup.routes());
  auto plan = r.plan;
  st.static_view = std::make_unique<static_tree_view>(sup.self(), *st.static_routes,
                                                      [plan](tree_key) { return *plan; });
  auto bc = st.bcast_cfg;
  bc.kind = collective_kind::static_broadcast;
  bc.message_kind = collective_kind::none;
  bc.acknowledge = false; // a baseline, as it was measured: no recovery of its own
  bc.first_seq = st.next_seq;
  bc.life = st.life;
  bc.first_tag = first_tag | 1;
  st.host.add(std::make_unique<broadcast_collective>(*st.static_view, bc), false);
  auto rc = st.reduce_cfg;
  rc.kind = collective_kind::static_reduce;
  rc.first_op = 1;
  st.host.add(std::make_unique<reduce_collective>(*st.static_view, st.ops, rc,
                                                  st.static_view->own_vnodes()),
              false);
  return std::nullopt;
}

void on_linger(node_ptr self, const drained_ptr& w) {
  auto& st = self->state;
  if (st.sup->state() != supervisor::status::left) {
    w->set_value(); // a member stops abruptly: nothing to wait for
    return;
  }
  st.drain_waiters.push_back(w);
  linger(self);
}

} // namespace banyan::actors::node_internal

// The actor behind banyan::node: it feeds the supervisor with what the TCP transport
// delivers and reports, and carries out what the supervisor asks (see node_actor.hpp).
//
// Joining through an address alone: the transport only connects to a processor whose id
// it knows, and its handshake names the acceptor before anything is authenticated. So
// the node first sends a ping to a reserved id (`discovery_id`) at the contact's address;
// the handshake fails with "reached processor N, expected <discovery_id>", which tells us
// N, and the join proper goes to N.
//
// Unreachable: a processor is taken to be gone only when a connection to it cannot be
// established (refused, bad address, another processor answers there), never because it
// is slow. When an established connection closes, the node sends the peer a ping, so
// that a dead peer is found at once by the connection attempt that follows.
//
// Collectives (docs/collectives.md, "Driving an engine"): per membership (found or join)
// the machine hosts, in an engine_host, a broadcast and a reduction engine over a
// supervisor_view, and the baselines once their plans are installed (a static tree,
// scatter-allgather's processors). Their
// frames go out with `return_undeliverable`, so the transport hands back those that
// cannot reach an unreachable peer (or one removed with them queued); a frame an engine
// here refuses goes back to its sender marked `returned`, and comes out of the sender's
// transport the same way. Either way the sending engine gets `on_undeliverable`. Every
// supervisor event is followed by `on_view_change` of both engines, after the
// supervisor's own frames. A new membership waits until the previous one's engines
// have drained, and `stop` of a node that has left waits for it too (at most
// `linger_timeout`). Conversely, the others keep the address of a member that left
// while anything is on its way to it (`sync_members`): removing it would return the
// queued rest of a stream whose first frames it already took, and lose that stream.

#include "node_machine.hpp"

#include <random>

namespace banyan::actors {

namespace node_internal {

void publish(node_ptr self) {
  auto& st = self->state;
  auto& sup = *st.sup;
  node_status s;
  s.id = sup.self();
  s.address = st.address;
  s.state = sup.state();
  const bool in = s.state == supervisor::status::member || s.state == supervisor::status::leaving;
  for (auto p : sup.members()) {
    if (auto m = sup.member_info(p))
      s.members.push_back(*m);
    else
      s.members.push_back({p, {}, 0});
    for (auto kind : {tree_kind::latency, tree_kind::bandwidth}) {
      node_tree t{{p, kind}, no_proc, 0};
      if (auto* ts = sup.tree({p, kind})) {
        t.parent = ts->parent();
        t.children = static_cast<std::uint32_t>(ts->children().size());
        if (ts->connected()) {
          t.dist = ts->dist();
          t.est = ts->est();
        }
      }
      s.trees.push_back(t);
    }
  }
  s.own_vnodes = sup.own_vnodes();
  if (in)
    s.routes = sup.routes();
  s.all_parented = in && sup.all_parented();
  s.busy = sup.busy();
  s.probes_completed = sup.probes_completed();
  s.probes_abandoned = sup.probes_abandoned();
  std::lock_guard<std::mutex> lk(st.shared->mtx);
  st.shared->status = std::move(s);
}

/// Queues the handler calls of this step (deliveries, then events) to run once the state
/// lock is released.
void dispatch(node_ptr self) {
  auto& st = self->state;
  if (!st.pending_deliveries.empty()) {
    auto deliveries = std::make_shared<std::vector<node_delivery>>(std::move(st.pending_deliveries));
    st.pending_deliveries.clear();
    self->defer([shared = st.shared, deliveries] {
      node::delivery_handler h;
      {
        std::lock_guard<std::mutex> lk(shared->mtx);
        h = shared->on_deliver;
      }
      if (h)
        for (auto& d : *deliveries)
          h(d);
    });
  }
  if (st.pending_events.empty())
    return;
  auto events = std::make_shared<std::vector<node_event>>(std::move(st.pending_events));
  st.pending_events.clear();
  self->defer([shared = st.shared, events] {
    node::event_handler h;
    {
      std::lock_guard<std::mutex> lk(shared->mtx);
      h = shared->on_event;
    }
    if (h)
      for (auto& e : *events)
        h(e);
  });
}

/// Carries out what the last supervisor call asked for (and what that causes), then
/// publishes the snapshot (unless `refresh` is false and nothing happened) and events.
void after(node_ptr self, bool refresh, bool view) {
  auto& st = self->state;
  bool changed = refresh;
  if (refresh)
    sync_members(self);
  while (!st.out.sends.empty() || !st.out.timers.empty() || !st.out.events.empty()) {
    outbox batch;
    std::swap(batch, st.out);
    if (!batch.events.empty())
      sync_members(self); // before sending: the sends may go to members just learnt
    for (auto& e : batch.sends)
      send_one(self, std::move(e));
    for (auto& t : batch.timers)
      self->later(t.after, timer_atom::value, t.token);
    for (auto& e : batch.events) {
      changed = true;
      on_tree_event(self, e); // may call the supervisor again (st.out)
    }
  }
  if (changed)
    sync_members(self);
  if (view || changed)
    view_changed(self); // the supervisor's frames went first: routes travel ahead
  else
    run_engines(self);
  if (st.sup->state() == supervisor::status::left && !st.drain_waiters.empty())
    linger(self);
  if (st.leaving && st.sup->state() == supervisor::status::member)
    complete(self, st.leaving, make_error(errc::timeout, "every member refused our vnodes: still a member"));
  check_join(self);
  if (changed)
    publish(self);
  dispatch(self);
  for (auto& [r, res] : st.answers)
    self->defer([r = std::move(r), res = std::move(res)] {
      if (auto done = std::move(r->done)) {
        r->done = nullptr;
        done(res);
      }
    });
  st.answers.clear();
}

/// Who asks `drain` to run the queued handlers.
enum class runner {
  caller, ///< a program's thread: handlers never run inside its call
  actor,  ///< the actor, after a timer: runs them, unless the loop polls (then the loop does)
  here,   ///< the loop's callbacks, a dispatch that arrived, `shutdown`: runs them
};

void drain(node_ptr self, runner who);

/// A dispatch posted by `drain` arrived (on the polling loop, or on the actor).
void dispatched(node_ptr self) {
  {
    std::lock_guard<std::mutex> lk(self->q_mtx);
    self->posted = false;
  }
  drain(self, runner::here);
}

/// Runs the queued handlers, one at a time and in order, unless some thread does already.
/// Handlers run on a node thread: the loop's callbacks run them at once; what a caller's
/// thread leaves behind goes to the transport's loop when it polls (it is awake: no
/// thread wakes up for them), else to the actor. When the loop polls, the actor hands
/// what its timers produce to the loop as well, so that every handler runs on the loop.
void drain(node_ptr self, runner who) {
  std::unique_lock<std::mutex> lk(self->q_mtx);
  if (self->queue.empty() || self->draining)
    return;
  if (who == runner::caller || (who == runner::actor && self->loop)) {
    if (self->posted)
      return;
    self->posted = true;
    lk.unlock();
    if (!self->loop || !self->loop->post([self] { dispatched(self); }))
      self->tell(dispatch_atom::value); // the actor runs them (`here`)
    return;
  }
  self->draining = true;
  while (!self->queue.empty()) {
    auto fn = std::move(self->queue.front());
    self->queue.pop_front();
    lk.unlock();
    fn(); // may call the node again: what that queues runs in this loop
    lk.lock();
  }
  self->draining = false;
}

/// Runs `f` on the state machine, then the handlers it queued.
template <class F>
void run(node_ptr self, runner who, F&& f) {
  {
    std::lock_guard<std::mutex> lk(self->mtx);
    if (self->stopped)
      return; // what `f` would have taken answers `stopped` from its destructor
    f(self);
  }
  drain(self, who);
}

/// The actor: the machine's timers, and the handlers callers' threads left behind.
caf::behavior node_actor(caf::event_based_actor*, std::shared_ptr<node_machine> m) {
  auto* self = m.get();
  return {
    [m, self](unreachable_atom, proc_id p) {
      run(self, runner::actor, [p](node_ptr n) {
        n->state.unreachable_peers.insert(p);
        n->state.sup->on_unreachable(now_of(), p, n->state.out);
        after(n);
      });
    },
    [self](timer_atom, std::uint64_t token) {
      run(self, runner::actor, [token](node_ptr n) {
        n->state.sup->on_timer(now_of(), token, n->state.out);
        after(n);
      });
    },
    [self](discover_atom, std::uint64_t attempt) {
      run(self, runner::actor, [attempt](node_ptr n) {
        auto& s = n->state;
        if (!s.joining || !s.joining->discovering || s.joining->attempt != attempt)
          return;
        s.tp->remove_peer(discovery_id);
        s.joining->reasons.push_back(s.joining->current.address + ": no answer");
        try_next_contact(n);
        after(n);
      });
    },
    [self](engine_timer_atom, std::uint8_t engine, std::uint32_t membership,
           std::uint64_t token) {
      run(self, runner::actor, [=](node_ptr n) {
        auto& st = n->state;
        if (membership != st.membership)
          return; // an earlier membership's engine
        st.host.on_timer(now_of(), static_cast<collective_kind>(engine), token);
        after(n, false, false);
      });
    },
    [self](overflow_atom) {
      run(self, runner::actor, [](node_ptr n) {
        auto& st = n->state;
        st.overflow_armed = false;
        auto held = std::move(st.overflow);
        st.overflow.clear();
        for (auto& [to, frames] : held)
          for (auto& e : frames)
            if (!send_engine_frame(n, e))
              bounce_to_engine(n, e.to, e.body);
        after(n, false, false);
      });
    },
    [self](forget_atom, proc_id p) {
      run(self, runner::actor, [p](node_ptr n) {
        auto& st = n->state;
        auto it = st.departed.find(p);
        if (it == st.departed.end())
          return; // a member again, or forgotten already
        auto held = st.overflow.find(p);
        const bool pending = st.tp->queued_bytes(p) != 0
                             || (held != st.overflow.end() && !held->second.empty());
        if (pending && now_of() - it->second < forget_max) {
          n->later(forget_after, forget_atom::value, p);
          return;
        }
        forget_peer(n, p);
        after(n, false, false);
      });
    },
    [self](deadline_atom, std::uint8_t kind, std::uint64_t seq, std::uint64_t serial) {
      run(self, runner::actor, [=](node_ptr n) {
        on_reduction_deadline(n, static_cast<collective_kind>(kind), seq, serial);
        after(n, false, false);
      });
    },
    [self](join_end_atom, std::uint64_t serial) {
      run(self, runner::actor, [=](node_ptr n) {
        on_join_deadline(n, serial);
        after(n);
      });
    },
    [self](settle_atom, std::uint64_t serial) {
      run(self, runner::actor, [=](node_ptr n) {
        on_settle_timer(n, serial);
        after(n, false, false);
      });
    },
    [self](linger_atom) {
      run(self, runner::actor, [](node_ptr n) {
        n->state.lingering = false;
        linger(n);
        after(n, false, false);
      });
    },
    [self](dispatch_atom) {
      dispatched(self);
    },
    [self](lost_atom, std::uint8_t kind, std::uint64_t seq, std::uint64_t serial) {
      run(self, runner::actor, [=](node_ptr n) {
        on_reduction_lost(n, static_cast<collective_kind>(kind), seq, serial);
        after(n, false, false);
      });
    },
    [self](beat_atom) {
      run(self, runner::actor, [](node_ptr n) {
        check_stall(n, true);
        after(n, false, false);
      });
    },
  };
}

} // namespace node_internal

using namespace node_internal;

node_core::node_core(caf::actor_system& sys, const node_config& cfg, std::uint64_t seed,
                     std::shared_ptr<net::tcp_transport> tp, std::shared_ptr<node_shared> shared)
  : m_(std::make_shared<node_machine>()), sys_(sys) {
  auto& init = m_->state;
  init.discover_timeout = 3 * cfg.sup.probe_timeout;
  // A fixed seed must not make this life's incarnations those of an earlier one.
  auto sup_cfg = cfg.sup;
  sup_cfg.crash_timeout = cfg.crash_timeout;
  // The delivery lease (docs/architecture.md, "Delivery lease"): with crash detection
  // and acknowledged broadcasts, unless set (a negative `sup.lease` turns it off).
  if (sup_cfg.lease.count() == 0 && cfg.crash_timeout.count() > 0 && cfg.bcast.acknowledge)
    sup_cfg.lease = std::max<duration>(cfg.crash_timeout / 8, std::chrono::milliseconds(500));
  sup_cfg.incarnation_salt = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()
                             ^ static_cast<std::uint64_t>(
                                 std::chrono::steady_clock::now().time_since_epoch().count());
  init.sup = std::make_unique<supervisor>(cfg.id, sup_cfg, seed);
  // This process's life: random (not from `seed`: a restart with the same seed is another
  // life), nonzero.
  do {
    init.life = std::random_device{}() ^ static_cast<std::uint32_t>(sup_cfg.incarnation_salt);
  } while (init.life == 0);
  // Stream and offer numbers start from membership << 32: random too, so that a frame of
  // an earlier life bounced to this one names no stream or offer of this one.
  init.membership = std::random_device{}();
  init.op_timeout = cfg.op_timeout;
  init.settle_wait = 2 * cfg.sup.probe_timeout;
  init.bcast_cfg = cfg.bcast;
  if (init.bcast_cfg.acknowledge) {
    // A stream that stops for as long as a crash takes to be found is cut off; the origin
    // sends again what nothing covered for twice that; it gives up at op_timeout.
    const duration ct = cfg.crash_timeout.count() > 0 ? duration(cfg.crash_timeout)
                                                      : duration(std::chrono::seconds(10));
    init.bcast_cfg.stale_stream = std::max<duration>(ct, std::chrono::seconds(2));
    init.bcast_cfg.resend_after = std::max<duration>(2 * ct, std::chrono::seconds(2));
    init.bcast_cfg.complete_within = cfg.op_timeout;
    // A resend after a handover must wait for the old owner's acknowledgement.
    init.bcast_cfg.resend_grace = std::max<duration>(init.bcast_cfg.resend_grace, ct / 4);
  }
  if (cfg.crash_timeout.count() > 0) {
    init.stall_period = std::max<duration>(cfg.crash_timeout / 8, std::chrono::milliseconds(10));
    init.stall_limit = cfg.crash_timeout / 4 + init.stall_period;
    init.stall_fence = std::max<duration>(cfg.crash_timeout / 2, std::chrono::milliseconds(500));
    init.lost_grace = std::max<duration>(cfg.crash_timeout / 2, std::chrono::seconds(1));
  }
  init.reduce_cfg = cfg.reduce;
  init.drain_rtts = cfg.drain_rtts;
  init.drain_floor = cfg.drain_floor;
  init.ops = cfg.ops;
  if (tp && tp->busy_polling())
    m_->loop = tp.get();
  init.tp = std::move(tp);
  init.shared = std::move(shared);
  publish(m_.get());
  // Detached: a thread of its own that sleeps on its mailbox, so that a timer or a
  // handler left behind runs at once (a pooled worker may be in a 50 us polling sleep).
  actor_ = sys.spawn<caf::detached>(node_actor, m_);
  m_->handle = actor_;
}

node_core::~node_core() {
  shutdown();
}

void node_core::shutdown() {
  if (!actor_)
    return;
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  {
    caf::scoped_actor waiter{sys_};
    waiter->wait_for(actor_);
  }
  actor_ = nullptr;
  // What is still pending answers `stopped` from its destructor, outside the lock.
  std::optional<join_attempt> joining;
  node_request_ptr leaving;
  std::vector<node_request_ptr> deferred;
  std::map<reduction_key, open_reduction> reductions;
  std::vector<drained_ptr> waiters;
  {
    std::lock_guard<std::mutex> lk(m_->mtx);
    m_->stopped = true;
    auto& st = m_->state;
    std::swap(joining, st.joining);
    std::swap(leaving, st.leaving);
    std::swap(deferred, st.deferred);
    std::swap(reductions, st.reductions);
    std::swap(waiters, st.drain_waiters);
  }
  for (auto& w : waiters)
    w->set_value();
  drain(m_.get(), runner::here); // handlers still owed (answers given before the stop)
}

void node_core::deliver(wire::envelope&& e) {
  run(m_.get(), runner::here, [&e](node_ptr n) { on_deliver(n, e); });
}

void node_core::net_event(const net::transport_event& ev) {
  run(m_.get(), runner::here, [&ev](node_ptr n) { on_net_event(n, ev); });
}

void node_core::request(node_request_ptr r) {
  run(m_.get(), runner::caller, [&r](node_ptr n) { on_request(n, std::move(r)); });
}

void node_core::collective(const collective_request_ptr& r) {
  run(m_.get(), runner::caller, [&r](node_ptr n) { on_collective(n, r); });
}

void node_core::set_address(const std::string& a) {
  run(m_.get(), runner::caller, [&a](node_ptr n) {
    n->state.address = a;
    n->state.sup->set_address(a);
    publish(n);
  });
}

void node_core::fill_metrics(node_metrics& m) const {
  std::lock_guard<std::mutex> lk(m_->mtx);
  const auto& st = m_->state;
  const auto& sup = *st.sup;
  m.state = sup.state();
  const bool in = m.state == supervisor::status::member || m.state == supervisor::status::leaving;
  if (in) {
    if (auto me = sup.member_info(sup.self()))
      m.incarnation = me->incarnation;
    m.members = sup.members().size();
    m.all_parented = sup.all_parented();
    for (auto p : sup.members())
      for (auto kind : {tree_kind::latency, tree_kind::bandwidth}) {
        auto* ts = sup.tree({p, kind});
        if (!ts || ts->parent() == no_proc)
          continue;
        m.parents.push_back({{p, kind}, ts->parent(), ts->rtt_parent(), ts->bw_parent()});
      }
  }
  m.own_vnodes = sup.own_vnodes().size();
  m.probes_completed = sup.probes_completed();
  m.probes_abandoned = sup.probes_abandoned();
  m.parent_changes.assign(st.parent_changes.begin(), st.parent_changes.end());
}

bool node_core::cancel_reduction(collective_kind over, std::uint64_t seq) {
  bool found = false;
  run(m_.get(), runner::caller, [&](node_ptr n) {
    found = fail_reduction(n, {over, seq}, errc::cancelled);
    after(n, false, false);
  });
  return found;
}

bool node_core::cancel_join() {
  bool found = false;
  run(m_.get(), runner::caller, [&](node_ptr n) {
    found = give_up_join(n, make_error(errc::cancelled, "processor " + std::to_string(n->state.sup->self())
                                                          + ": the found or join was cancelled"));
    after(n);
  });
  return found;
}

std::uint64_t node_core::next_reduction_seq(collective_kind over) {
  std::uint64_t seq = 0;
  run(m_.get(), runner::caller, [&](node_ptr n) { seq = node_internal::next_reduction_seq(n, over); });
  return seq;
}

void node_core::linger(drained_ptr w) {
  run(m_.get(), runner::caller, [&w](node_ptr n) { on_linger(n, w); });
}

} // namespace banyan::actors

#include "collective_glue.hpp"

#include <algorithm>
#include <deque>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/core/scatter_allgather.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"

namespace banyan::actors {

namespace {

struct processor_state {
  std::shared_ptr<supervisor> sup;
  caf::actor net;
  cluster_monitor* mon = nullptr;
  std::shared_ptr<collective_ledger> ledger;
  std::shared_ptr<shared_counters> ctr;
  std::uint32_t incarnation = 0;
  outbox out;
  reduce_op_table ops; ///< built-in operators (outlives the engines below)
  // The engines over the adaptive trees (the supervisor's view). The reduction engine
  // exists from `found` (its vnodes settled) or `join` (none settled) on.
  std::unique_ptr<supervisor_view> view;
  std::unique_ptr<broadcast_engine> bcast;
  std::unique_ptr<reduce_engine> reduce;
  broadcast_outbox bo;
  reduce_outbox ro;
  /// Reductions asked for before this processor took part (a joiner), in order.
  std::deque<reduce_request_ptr> pending;
  // Engines over a static tree (installed by the harness; emulation only).
  std::unique_ptr<routing_table> static_routes;
  std::unique_ptr<static_tree_view> static_view;
  std::unique_ptr<broadcast_engine> static_bcast;
  std::unique_ptr<reduce_engine> static_reduce;
  std::uint32_t static_installs = 0;
  /// MPICH's long broadcast over processors 0..n-1 (installed by the harness; emulation only).
  std::unique_ptr<scatter_allgather_engine> sag;
  std::uint32_t sag_installs = 0;
  bool left = false;
  bool holding = false; ///< counted in ctr->holding
  /// Detach blindly this long after the engines' last send instead of asking the
  /// network (cluster_config::blind_linger).
  std::optional<duration> blind_linger;
  /// The incarnation before this one, if it left (not crashed): what it measured is
  /// recalled when this one joins, as a banyan::node that leaves and joins again keeps
  /// its supervisor (supervisor::recall_paths). Read only after it detached.
  std::shared_ptr<const supervisor> predecessor;
  /// Messages received from the network (frames and bounces): a leaver's ask to detach
  /// names it, so the network can tell whether it sent the leaver anything since.
  std::uint64_t received = 0;
  /// An ask to detach is out, made when the engines had sent these many frames.
  bool asked = false;
  struct sent_counts {
    std::uint64_t bcast = 0, reduce = 0, static_bcast = 0, static_reduce = 0;
  } asked_at;
  static inline const char* name = "banyan.processor";
};

using processor_ptr = caf::stateful_actor<processor_state>*;

bool is_static(const wire::collective_id& op) {
  return (op.seq & static_bit) != 0;
}

broadcast_engine* bcast_engine_for(processor_ptr self, const wire::message& m) {
  auto& st = self->state;
  if (!broadcast_engine::handles(m))
    return nullptr;
  return is_static(broadcast_engine::op_of(m)) ? st.static_bcast.get() : st.bcast.get();
}

reduce_engine* reduce_engine_for(processor_ptr self, const wire::message& m) {
  auto& st = self->state;
  if (auto* p = std::get_if<wire::reduce_partial>(&m))
    return (p->op & static_bit) != 0 ? st.static_reduce.get() : st.reduce.get();
  if (std::holds_alternative<wire::reduce_handoff>(m))
    return st.reduce.get(); // static trees never move vnodes
  return nullptr;
}

void maybe_ask(processor_ptr self);

/// Keeps the cluster-wide count of processors whose engines hold something current.
void update_holding(processor_ptr self) {
  auto& st = self->state;
  bool h = st.bcast->holding() || (st.reduce && st.reduce->holding()) ||
           (st.static_bcast && st.static_bcast->holding()) ||
           (st.static_reduce && st.static_reduce->holding()) ||
           (st.sag && st.sag->in_progress() > 0);
  if (h == st.holding || !st.ctr)
    return;
  st.holding = h;
  if (h)
    ++st.ctr->holding;
  else
    --st.ctr->holding;
}

/// Whether `d` carries exactly the bytes the cluster sent (`bytes` of payload_fill).
bool payload_ok(const shared_bytes& b, std::size_t bytes) {
  if (b.size() != bytes)
    return false;
  for (auto x : b)
    if (x != payload_fill)
      return false;
  return true;
}

void carry_out_bcast(processor_ptr self, bool static_engine) {
  auto& st = self->state;
  auto& bo = st.bo;
  if (!bo.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(bo.sends)));
  for (auto& t : bo.timers)
    self->delayed_send(self, t.after, bctimer_atom::value, static_engine, t.token);
  if (st.ledger && !bo.deliveries.empty()) {
    auto now = now_of(self);
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    for (auto& d : bo.deliveries) {
      auto& per = st.ledger->deliveries[d.op];
      d.vnodes.for_each([&](vnode_id v) { per[v].push_back(now); });
      auto size = st.ledger->sizes.find(d.op);
      if (size == st.ledger->sizes.end() || !payload_ok(d.payload, size->second) ||
          d.p2p != (st.ledger->targets.count(d.op) > 0))
        ++st.ledger->bad_payloads;
    }
  }
  bo.clear();
  update_holding(self);
  maybe_ask(self);
}

void carry_out_reduce(processor_ptr self, bool static_engine) {
  auto& st = self->state;
  auto& ro = st.ro;
  if (!ro.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(ro.sends)));
  for (auto& t : ro.timers)
    self->delayed_send(self, t.after, rdtimer_atom::value, static_engine, t.token);
  if (st.ledger && (!ro.results.empty() || !ro.problems.empty())) {
    auto now = now_of(self);
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    for (auto& r : ro.results)
      st.ledger->reduce_results[r.op].push_back({st.sup->self(), now, r});
    for (auto& p : ro.problems)
      st.ledger->reduce_problems[p.op].push_back("processor " + std::to_string(st.sup->self()) +
                                                 ": " + p.detail + " " + p.vnodes.to_string());
  }
  ro.clear();
  update_holding(self);
  maybe_ask(self);
}

/// The engines hold nothing (their own work is done; frames they sent may still come back).
bool idle(processor_ptr self) {
  auto& st = self->state;
  return !st.bcast->holding() && (!st.reduce || !st.reduce->holding()) &&
         (!st.static_bcast || !st.static_bcast->holding()) &&
         (!st.static_reduce || !st.static_reduce->holding()) &&
         (!st.sag || st.sag->in_progress() == 0);
}

processor_state::sent_counts frames_sent(processor_ptr self) {
  auto& st = self->state;
  return {st.bcast->frames_sent(), st.reduce ? st.reduce->frames_sent() : 0,
          st.static_bcast ? st.static_bcast->frames_sent() : 0,
          st.static_reduce ? st.static_reduce->frames_sent() : 0};
}

/// The network said none of the frames sent before the ask can come back: the engines
/// have drained if they hold nothing and have sent nothing since (core/send_fates.hpp).
bool drained(processor_ptr self) {
  auto& st = self->state;
  auto now = now_of(self);
  const auto& at = st.asked_at;
  return st.bcast->drained(now, send_fates::known(at.bcast)) &&
         (!st.reduce || st.reduce->drained(now, send_fates::known(at.reduce))) &&
         (!st.static_bcast || st.static_bcast->drained(now, send_fates::known(at.static_bcast))) &&
         (!st.static_reduce ||
          st.static_reduce->drained(now, send_fates::known(at.static_reduce))) &&
         (!st.sag || st.sag->in_progress() == 0);
}

void stop(processor_ptr self) {
  auto& st = self->state;
  if (st.holding && st.ctr) {
    st.holding = false;
    --st.ctr->holding;
  }
  self->send(st.net, detach_atom::value, st.sup->self(), caf::actor_cast<caf::actor>(self));
  self->quit();
}

/// A processor that has left and whose engines hold nothing asks the network whether
/// anything it sent can still come back (it answers when nothing can: drain_ok_atom).
void maybe_ask(processor_ptr self) {
  auto& st = self->state;
  if (!st.left || st.asked || !idle(self))
    return;
  if (st.blind_linger) {
    // Knowing nothing of the frames' fates: the engines' blind rule, polled.
    auto now = now_of(self);
    auto fates = send_fates::blind(*st.blind_linger);
    if (st.bcast->drained(now, fates) && (!st.reduce || st.reduce->drained(now, fates)) &&
        (!st.static_bcast || st.static_bcast->drained(now, fates)) &&
        (!st.static_reduce || st.static_reduce->drained(now, fates))) {
      stop(self);
      return;
    }
    st.asked = true; // a poll is out
    self->delayed_send(self, std::clamp(*st.blind_linger, duration{std::chrono::milliseconds(1)},
                                        duration{std::chrono::milliseconds(100)}),
                       drain_poll_atom::value);
    return;
  }
  st.asked = true;
  st.asked_at = frames_sent(self);
  self->send(st.net, drain_ask_atom::value, st.sup->self(), caf::actor_cast<caf::actor>(self),
             st.received);
}

void start_one(processor_ptr self, const reduce_request_ptr& req, const reduce_spec& spec,
               contribution_fn values);

/// Starts reduction `req` here, or its segments one after the other.
void start_reduce(processor_ptr self, const reduce_request_ptr& req) {
  if (req->segments <= 1) {
    start_one(self, req, req->spec, req->values);
    return;
  }
  const auto esize = element_size(req->spec.fn.type);
  const auto k = req->segments;
  const auto seg = req->segment_count;
  for (std::uint32_t j = 0; j < k; ++j) {
    reduce_spec spec = req->spec;
    spec.op = req->spec.op + j;
    spec.whole_bytes = req->spec.count * esize; // the tree for the whole array
    const std::size_t first = j * seg;
    spec.count = std::min(seg, req->spec.count - first);
    auto slices = req->slices;
    auto values = req->values;
    contribution_fn piece = [slices, values, k, first, count = spec.count, esize](vnode_id v) {
      std::lock_guard<std::mutex> guard{slices->mtx};
      auto [i, fresh] = slices->arrays.try_emplace(v);
      if (fresh)
        i->second.first = values(v);
      auto& all = i->second.first;
      const auto lo = std::min(all.size(), first * esize);
      const auto hi = std::min(all.size(), (first + count) * esize);
      std::vector<std::uint8_t> part(all.begin() + static_cast<std::ptrdiff_t>(lo),
                                     all.begin() + static_cast<std::ptrdiff_t>(hi));
      if (++i->second.second == k)
        slices->arrays.erase(i);
      return part;
    };
    spec.after = j > 0 ? spec.op - 1 : 0; // its timeout runs once the one before went up
    start_one(self, req, spec, std::move(piece));
  }
}

/// Starts one engine reduction here (the contributions taken are counted in the ledger).
void start_one(processor_ptr self, const reduce_request_ptr& req, const reduce_spec& spec,
               contribution_fn values) {
  auto& st = self->state;
  auto* eng = req->use_static ? st.static_reduce.get() : st.reduce.get();
  const auto op = spec.op;
  auto note = [&](const std::string& what) {
    if (!st.ledger)
      return;
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    st.ledger->reduce_problems[op].push_back("processor " + std::to_string(st.sup->self()) +
                                             ": " + what);
  };
  if (!eng) {
    note("no engine to start the reduction on");
    return;
  }
  auto ledger = st.ledger;
  contribution_fn counted = [ledger, values, op](vnode_id v) {
    if (ledger) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      ++ledger->contributions[op][v];
    }
    return values(v);
  };
  auto now = now_of(self);
  if (st.ledger) {
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    st.ledger->reduce_started.emplace(op, now);
  }
  auto err = eng->start(now, spec, std::move(counted), st.ro);
  carry_out_reduce(self, req->use_static);
  if (err)
    note(err->to_string());
}

/// Starts the reductions a joiner was asked for before it took part.
void start_pending(processor_ptr self) {
  auto& st = self->state;
  while (!st.pending.empty() && st.reduce && st.view->participating() && !st.left) {
    auto req = st.pending.front();
    st.pending.pop_front();
    start_reduce(self, req);
  }
}

/// Carries out a supervisor event: its frames first (routes travel ahead), then the
/// engines' reactions to the view change.
void carry_out(processor_ptr self) {
  auto& st = self->state;
  if (!st.out.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(st.out.sends)));
  for (auto& t : st.out.timers)
    self->delayed_send(self, t.after, timer_atom::value, t.token);
  bool left = false;
  vnode_set adopted;
  for (auto& e : st.out.events) {
    if (st.mon)
      st.mon->on_event(st.sup->self(), e);
    left = left || e.what == tree_event::kind::left;
    if (e.what == tree_event::kind::adopted)
      adopted |= e.vnodes;
  }
  st.out.clear();
  auto now = now_of(self);
  st.bcast->on_view_change(now, st.bo);
  carry_out_bcast(self, false);
  if (st.reduce) {
    st.reduce->on_view_change(now, st.ro);
    // Adopted from a crashed processor: their history went down with it.
    if (!adopted.empty())
      st.reduce->adopt(now, adopted, st.ro);
    carry_out_reduce(self, false);
  }
  start_pending(self);
  if (left && !st.left) {
    // Stay reachable, feeding the engines, until they hold nothing and nothing they
    // sent can come back (the network knows: maybe_ask).
    st.left = true;
    st.pending.clear();
    maybe_ask(self);
  }
}

caf::behavior processor_actor(processor_ptr self, std::shared_ptr<supervisor> sup,
                              caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                              std::shared_ptr<collective_ledger> ledger,
                              std::shared_ptr<shared_counters> ctr,
                              std::optional<duration> blind_linger,
                              std::shared_ptr<const supervisor> predecessor) {
  auto& init = self->state;
  init.blind_linger = blind_linger;
  init.predecessor = std::move(predecessor);
  init.sup = std::move(sup);
  init.net = std::move(net);
  init.mon = mon;
  init.ledger = std::move(ledger);
  init.ctr = std::move(ctr);
  init.incarnation = incarnation;
  init.view = std::make_unique<supervisor_view>(*init.sup);
  broadcast_config dynamic_cfg;
  dynamic_cfg.first_seq = (std::uint64_t{incarnation} << 32) + 1;
  init.bcast = std::make_unique<broadcast_engine>(*init.view, dynamic_cfg);
  return {
    [=](deliver_atom, const wire::envelope& e, std::uint64_t gen) {
      auto& st = self->state;
      auto now = now_of(self);
      ++st.received;
      st.sup->heard_from(now, e.from);
      if (scatter_allgather_engine::handles(e.body)) {
        // A static baseline without recovery: a frame it cannot take is counted there
        // (malformed) and dropped, nobody would resend it.
        if (st.sag)
          st.sag->on_message(now, e.from, e.body, st.bo);
        carry_out_bcast(self, false);
        return;
      }
      if (broadcast_engine::handles(e.body)) {
        auto* eng = bcast_engine_for(self, e.body);
        bool taken = eng && eng->on_message(now, e.from, e.body, st.bo);
        carry_out_bcast(self, eng == st.static_bcast.get() && eng);
        if (!taken)
          self->send(st.net, refuse_atom::value, e, gen);
        return;
      }
      if (reduce_engine::handles(e.body)) {
        auto* eng = reduce_engine_for(self, e.body);
        bool taken = eng && eng->on_message(now, e.from, e.body, st.ro);
        carry_out_reduce(self, eng == st.static_reduce.get() && eng);
        if (!taken)
          self->send(st.net, refuse_atom::value, e, gen);
        return;
      }
      st.sup->on_message(now, e.from, e.body, st.out);
      carry_out(self);
    },
    [=](unreachable_atom, proc_id p) {
      self->state.sup->on_unreachable(now_of(self), p, self->state.out);
      carry_out(self);
    },
    [=](bounced_atom, const wire::envelope& e) {
      auto& st = self->state;
      ++st.received;
      if (scatter_allgather_engine::handles(e.body))
        return; // no recovery in MPICH's algorithm (processors do not leave it)
      if (auto* eng = bcast_engine_for(self, e.body)) {
        eng->on_undeliverable(now_of(self), e.to, e.body, st.bo);
        carry_out_bcast(self, eng == st.static_bcast.get());
      } else if (auto* r = reduce_engine_for(self, e.body)) {
        r->on_undeliverable(now_of(self), e.to, e.body, st.ro);
        carry_out_reduce(self, r == st.static_reduce.get());
      }
    },
    [=](timer_atom, std::uint64_t token) {
      self->state.sup->on_timer(now_of(self), token, self->state.out);
      carry_out(self);
    },
    [=](bctimer_atom, bool static_engine, std::uint64_t token) {
      auto& st = self->state;
      auto* eng = static_engine ? st.static_bcast.get() : st.bcast.get();
      if (!eng)
        return;
      eng->on_timer(now_of(self), token, st.bo);
      carry_out_bcast(self, static_engine);
    },
    [=](rdtimer_atom, bool static_engine, std::uint64_t token) {
      auto& st = self->state;
      auto* eng = static_engine ? st.static_reduce.get() : st.reduce.get();
      if (!eng)
        return;
      eng->on_timer(now_of(self), token, st.ro);
      carry_out_reduce(self, static_engine);
    },
    [=](drain_ok_atom) {
      // Nothing sent before the ask can come back, and frames for this processor wait
      // at the network: stop unless the engines sent or took something since.
      auto& st = self->state;
      st.asked = false;
      if (drained(self)) {
        stop(self);
        return;
      }
      self->send(st.net, drain_cancel_atom::value, st.sup->self(),
                 caf::actor_cast<caf::actor>(self));
      maybe_ask(self);
    },
    [=](drain_poll_atom) {
      self->state.asked = false;
      maybe_ask(self);
    },
    [=](drain_no_atom) {
      self->state.asked = false;
      maybe_ask(self);
    },
    [=](sync_atom, std::uint64_t count) {
      // Every message the network sent before this one has been handled here (and a
      // refusal among them has gone back before this answer).
      self->send(self->state.net, synced_atom::value, self->state.sup->self(), count);
    },
    [=](static_tree_atom, const static_install_ptr& inst) {
      // Emulation only: every processor is handed the same tree, and owns what its
      // supervisor's routing table says now. An operation still under way on the
      // previous static tree would be cut off: install between operations.
      auto& st = self->state;
      st.static_reduce.reset();
      st.static_bcast.reset();
      st.static_view.reset();
      st.static_routes = std::make_unique<routing_table>(st.sup->routes());
      tree copy = inst->t;
      st.static_view = std::make_unique<static_tree_view>(
        st.sup->self(), *st.static_routes, [copy](tree_key) { return copy; },
        inst->max_root_distance, inst->min_root_rate);
      broadcast_config bc;
      bc.first_seq = static_bit | (std::uint64_t{st.incarnation} << 32) |
                     (std::uint64_t{++st.static_installs} << 20);
      st.static_bcast = std::make_unique<broadcast_engine>(*st.static_view, bc);
      reduce_config rc;
      rc.first_op = inst->first_reduce_op;
      st.static_reduce = std::make_unique<reduce_engine>(*st.static_view, st.ops, rc,
                                                         st.static_view->own_vnodes());
      update_holding(self);
    },
    [=](sag_atom, std::uint32_t procs) {
      // Emulation only, like the static tree: install between broadcasts.
      auto& st = self->state;
      scatter_allgather_config cfg;
      cfg.first_seq = (std::uint64_t{st.incarnation} << 32) |
                      (std::uint64_t{++st.sag_installs} << 20) | 1;
      auto owner = st.sup;
      st.sag = std::make_unique<scatter_allgather_engine>(
        owner->self(), procs, [owner] { return owner->own_vnodes(); }, cfg);
      update_holding(self);
    },
    [=](bcast_atom, const bcast_request_ptr& req) {
      auto& st = self->state;
      if (req->scatter_allgather) {
        if (!st.sag || st.left) {
          req->result.set_value(std::nullopt);
          return;
        }
        auto now = now_of(self);
        shared_bytes payload(std::vector<std::uint8_t>(req->bytes, payload_fill));
        auto id = st.sag->broadcast(now, payload, st.bo);
        if (!id) {
          req->result.set_value(std::nullopt);
          st.bo.clear();
          return;
        }
        if (st.ledger) {
          std::lock_guard<std::mutex> guard{st.ledger->mtx};
          st.ledger->started[*id] = now;
          st.ledger->sizes[*id] = req->bytes;
        }
        carry_out_bcast(self, false);
        req->result.set_value(*id);
        return;
      }
      auto* eng = req->use_static ? st.static_bcast.get() : st.bcast.get();
      if (!eng || st.left) {
        req->result.set_value(std::nullopt);
        return;
      }
      auto now = now_of(self);
      shared_bytes payload(std::vector<std::uint8_t>(req->bytes, payload_fill));
      auto id = req->p2p      ? eng->send(now, req->to, payload, st.bo)
                : req->choice ? eng->broadcast(now, payload, *req->choice, st.bo)
                              : eng->broadcast(now, payload, st.bo);
      if (!id) {
        req->result.set_value(std::nullopt);
        st.bo.clear();
        return;
      }
      if (st.ledger) {
        // Before the deliveries this event may make (a message to an own vnode).
        std::lock_guard<std::mutex> guard{st.ledger->mtx};
        st.ledger->started[*id] = now;
        st.ledger->sizes[*id] = req->bytes;
        if (req->p2p)
          st.ledger->targets[*id] = req->to;
      }
      carry_out_bcast(self, req->use_static);
      req->result.set_value(*id);
    },
    [=](reduce_atom, const reduce_request_ptr& req) {
      auto& st = self->state;
      if (st.left)
        return;
      if (req->use_static || (st.reduce && st.view->participating() && st.pending.empty())) {
        start_reduce(self, req);
        return;
      }
      st.pending.push_back(req); // started once this processor takes part
    },
    [=](found_atom, const found_args_ptr& args) {
      auto& st = self->state;
      st.sup->found(now_of(self), args->members, args->routes, st.out);
      if (!st.reduce)
        st.reduce = std::make_unique<reduce_engine>(*st.view, st.ops, reduce_config{},
                                                    st.sup->own_vnodes());
      carry_out(self);
    },
    [=](join_atom, proc_id contact, const vnode_set& wanted) {
      auto& st = self->state;
      if (!st.reduce) // a joiner's vnodes settle when their histories arrive
        st.reduce = std::make_unique<reduce_engine>(*st.view, st.ops, reduce_config{},
                                                    vnode_set{});
      if (st.predecessor) {
        // The network hands the join over only once the predecessor has detached (and
        // quit): its supervisor is no longer touched.
        st.sup->recall_paths(*st.predecessor);
        st.predecessor.reset();
      }
      st.sup->join(now_of(self), contact, wanted, st.out);
      carry_out(self);
    },
    [=](crash_atom) {
      // Killed: no handover, no draining; the network stops delivering here.
      self->state.pending.clear();
      stop(self);
    },
    [=](leave_atom, proc_id recipient) {
      auto err = self->state.sup->leave(now_of(self), recipient, self->state.out);
      if (err)
        caf::aout(self) << "processor " << self->state.sup->self()
                        << " cannot leave: " << err->to_string() << std::endl;
      carry_out(self);
    },
  };
}

} // namespace

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                           std::shared_ptr<collective_ledger> ledger,
                           std::shared_ptr<shared_counters> counters,
                           std::optional<duration> blind_linger,
                           std::shared_ptr<const supervisor> predecessor) {
  return sys.spawn(processor_actor, std::move(sup), std::move(net), mon, incarnation,
                   std::move(ledger), std::move(counters), blind_linger,
                   std::move(predecessor));
}

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon) {
  return spawn_processor(sys, std::move(sup), std::move(net), mon, 0, nullptr, nullptr);
}

} // namespace banyan::actors

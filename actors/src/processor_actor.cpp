#include "collective_glue.hpp"

#include <algorithm>
#include <deque>

#include "banyan/core/allreduce.hpp"
#include "banyan/core/allgather.hpp"
#include "banyan/core/alltoall.hpp"
#include "banyan/core/broadcast_collective.hpp"
#include "banyan/core/engine_host.hpp"
#include "banyan/core/gather.hpp"
#include "banyan/core/pairwise_alltoall.hpp"
#include "banyan/core/reduce_collective.hpp"
#include "banyan/core/ring_allgather.hpp"
#include "banyan/core/scatter.hpp"
#include "banyan/core/scatter_allgather_collective.hpp"
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
  /// Over the adaptive trees (the supervisor's view). Declared before `host`: the
  /// engines read it until they go.
  std::unique_ptr<supervisor_view> view;
  // The static baselines' plan (installed by the harness; emulation only).
  std::unique_ptr<routing_table> static_routes;
  std::unique_ptr<static_tree_view> static_view;
  /// Every collective engine, routed to by kind: the adaptive broadcast (and messages)
  /// from the start, the adaptive reduction from `found` (its vnodes settled) or `join`
  /// (none settled) on, the static ones and scatter-allgather once installed.
  engine_host host;
  broadcast_collective* bcast = nullptr;
  reduce_collective* reduce = nullptr;
  /// Gathers (core/gather.hpp), from `found` or `join` on like `reduce`; scatters
  /// (core/scatter.hpp) from the start like `bcast`.
  reduce_collective* gather = nullptr;
  broadcast_collective* scatter = nullptr;
  allgather_collective* allgather = nullptr; ///< from `found` or `join` on, like `gather`
  alltoall_collective* alltoall = nullptr;   ///< likewise
  /// Reductions asked for before this processor took part (a joiner), in order.
  std::deque<reduce_request_ptr> pending;
  /// Allreduces and barriers over the adaptive trees (from `found` or `join` on, like
  /// the reduction), and those asked for before this processor took part.
  allreduce_collective* allreduce = nullptr;
  allreduce_collective* barrier = nullptr;
  std::deque<allreduce_request_ptr> pending_allreduces;
  std::uint32_t static_installs = 0;
  std::uint32_t sag_installs = 0;
  bool left = false;
  bool holding = false; ///< counted in ctr->holding
  bool in_view_change = false; ///< engines are being told of a view change (carry_out)
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
  engine_host::send_marks asked_at;
  static inline const char* name = "banyan.processor";
};

using processor_ptr = caf::stateful_actor<processor_state>*;

void maybe_ask(processor_ptr self);

/// The gather engine's configuration: gathers are numbered from `gather_base` + 1.
reduce_config gather_reduce_config() {
  reduce_config rc;
  rc.first_op = gather_base + 1;
  return rc;
}

/// The allgather engine's: numbered from `allgather_base` + 1; its broadcasts per
/// incarnation like the broadcast engine's.
reduce_config allgather_reduce_config() {
  reduce_config rc;
  rc.first_op = allgather_base + 1;
  return rc;
}
reduce_config alltoall_reduce_config() {
  reduce_config rc;
  rc.first_op = alltoall_base + 1;
  return rc;
}
broadcast_config allgather_bcast_config(std::uint32_t incarnation) {
  broadcast_config bc;
  bc.first_seq = (std::uint64_t{incarnation} << 32) + 1;
  return bc;
}

/// Keeps the cluster-wide count of processors whose engines hold something current.
void update_holding(processor_ptr self) {
  auto& st = self->state;
  bool h = st.host.holding();
  if (h == st.holding || !st.ctr)
    return;
  st.holding = h;
  if (h)
    ++st.ctr->holding;
  else
    --st.ctr->holding;
}

/// Carries out what engine `e` produced: its frames to the network in one batch, its
/// timers as delayed messages to this actor, its results to the ledger.
void carry_out_engine(processor_ptr self, collective_engine& e) {
  auto& st = self->state;
  auto& out = e.outbox();
  if (!out.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(out.sends)));
  const auto kind = static_cast<std::uint8_t>(e.kind());
  for (auto& t : out.timers)
    self->delayed_send(self, t.after, engine_timer_atom::value, kind, t.token);
  if (st.ledger)
    record_engine(*st.ledger, st.sup->self(), now_of(self), e);
  e.clear_outbox();
  // During a view change every engine is carried out in turn: the count of holding
  // processors is brought up to date once, after the last (carry_out).
  if (!st.in_view_change)
    update_holding(self);
  maybe_ask(self);
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
  if (!st.left || st.asked || st.host.holding())
    return;
  if (st.blind_linger) {
    // Knowing nothing of the frames' fates: the engines' blind rule, polled.
    if (st.host.drained(now_of(self), send_fates::blind(*st.blind_linger))) {
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
  st.asked_at = st.host.frames_sent();
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
  if (req->ring || req->pairwise) {
    auto* ring = st.host.get<ring_allgather_collective>(collective_kind::ring_allgather);
    auto* pw = st.host.get<pairwise_alltoall_collective>(collective_kind::pairwise_alltoall);
    if (req->ring ? !ring : !pw)
      return;
    auto ledger = st.ledger;
    const auto op = spec.op;
    contribution_fn counted = [ledger, values, op](vnode_id v) {
      if (ledger) {
        std::lock_guard<std::mutex> guard{ledger->mtx};
        ++ledger->contributions[op][v];
      }
      return values(v);
    };
    if (st.ledger) {
      std::lock_guard<std::mutex> guard{st.ledger->mtx};
      st.ledger->reduce_started.emplace(op, now_of(self));
    }
    auto err = req->ring ? ring->start(now_of(self), op, spec.count, counted)
                         : pw->start(now_of(self), op, spec.count, counted);
    carry_out_engine(self, req->ring ? static_cast<collective_engine&>(*ring) : *pw);
    if (err && st.ledger) {
      std::lock_guard<std::mutex> guard{st.ledger->mtx};
      st.ledger->reduce_problems[op].push_back(err->to_string());
    }
    return;
  }
  auto* eng = req->use_static ? st.host.get<reduce_collective>(collective_kind::static_reduce)
               : req->gather  ? st.gather
                              : st.reduce;
  const auto op = spec.op;
  auto note = [&](const std::string& what) {
    if (!st.ledger)
      return;
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    st.ledger->reduce_problems[op].push_back("processor " + std::to_string(st.sup->self()) +
                                             ": " + what);
  };
  if (!eng || (req->allgather && !st.allgather) || (req->alltoall && !st.alltoall)) {
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
  if (req->alltoall) {
    auto err = st.alltoall->start(now, spec.op, spec.root, spec.count, std::move(counted));
    carry_out_engine(self, *st.alltoall);
    if (err)
      note(err->to_string());
    return;
  }
  if (req->allgather) {
    auto err = st.allgather->start(now, spec.op, spec.root, spec.count, std::move(counted));
    carry_out_engine(self, *st.allgather);
    if (err)
      note(err->to_string());
    return;
  }
  auto err = eng->start(now, spec, std::move(counted));
  carry_out_engine(self, *eng);
  if (err)
    note(err->to_string());
}

/// Starts allreduce or barrier `req` here (the contributions taken are counted in the
/// ledger).
void start_allreduce(processor_ptr self, const allreduce_request_ptr& req) {
  auto& st = self->state;
  if (req->kind != collective_kind::allreduce && req->kind != collective_kind::barrier) {
    // A baseline installed with mpich_atom: started at once (it has no joiners).
    auto* m = st.host.get<mpich_allreduce_collective>(req->kind);
    if (!m)
      return;
    auto ledger = st.ledger;
    const std::pair<collective_kind, std::uint64_t> key{req->kind, req->spec.op};
    auto values = req->values;
    contribution_fn counted;
    if (values)
      counted = [ledger, values, key](vnode_id v) {
        if (ledger) {
          std::lock_guard<std::mutex> guard{ledger->mtx};
          ++ledger->allreduces[key].contributions[v];
        }
        return values(v);
      };
    auto now = now_of(self);
    if (ledger) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      auto& e = ledger->allreduces[key];
      if (!e.started) {
        e.started = true;
        e.first_start = now;
      }
    }
    auto err = m->start(now, req->spec, std::move(counted));
    carry_out_engine(self, *m);
    if (err && ledger) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      ledger->allreduces[key].problems.push_back(err->to_string());
    }
    return;
  }
  auto* eng = req->kind == collective_kind::barrier ? st.barrier : st.allreduce;
  if (!eng)
    return;
  auto ledger = st.ledger;
  const std::pair<collective_kind, std::uint64_t> key{req->kind, req->spec.op};
  auto values = req->values;
  contribution_fn counted = [ledger, values, key](vnode_id v) {
    if (ledger) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      ++ledger->allreduces[key].contributions[v];
    }
    return values ? values(v) : std::vector<std::uint8_t>{};
  };
  auto now = now_of(self);
  if (st.ledger) {
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    auto& e = st.ledger->allreduces[key];
    if (!e.started) {
      e.started = true;
      e.first_start = now;
    }
  }
  auto err = eng->start(now, req->spec, std::move(counted));
  carry_out_engine(self, *eng);
  if (err && st.ledger) {
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    st.ledger->allreduces[key].problems.push_back("processor " + std::to_string(st.sup->self()) +
                                                  ": " + err->to_string());
  }
}

/// Adds the allreduce and barrier engines (`settled`: a founder's own vnodes).
void add_allreduce_engines(processor_ptr self, const vnode_set& settled) {
  auto& st = self->state;
  if (st.allreduce)
    return;
  for (auto kind : {collective_kind::allreduce, collective_kind::barrier}) {
    allreduce_config cfg;
    cfg.kind = kind;
    cfg.bcast.first_seq = (std::uint64_t{st.incarnation} << 32) + 1;
    auto& e = st.host.add(std::make_unique<allreduce_collective>(*st.view, st.ops, cfg, settled));
    (kind == collective_kind::barrier ? st.barrier : st.allreduce) = &e;
  }
}

/// Starts the reductions a joiner was asked for before it took part.
void start_pending(processor_ptr self) {
  auto& st = self->state;
  while (!st.pending.empty() && st.reduce && st.gather && st.allgather && st.alltoall &&
         st.view->participating() && !st.left) {
    auto req = st.pending.front();
    st.pending.pop_front();
    start_reduce(self, req);
  }
  while (!st.pending_allreduces.empty() && st.allreduce && st.view->participating() && !st.left) {
    auto req = st.pending_allreduces.front();
    st.pending_allreduces.pop_front();
    start_allreduce(self, req);
  }
}

void carry_out(processor_ptr self);

/// Trees on demand (supervisor_config::tree_set): this processor's own trees are used.
void prepare_own_trees(processor_ptr self) {
  auto& st = self->state;
  if (st.left || !st.sup)
    return;
  st.sup->prepare(now_of(self), st.out);
  carry_out(self);
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
  // The engines over the supervisor's view, in registration order (broadcast, then
  // reduction); vnodes adopted from a crashed processor: their history went down with it.
  st.in_view_change = true;
  st.host.on_view_change(now_of(self), view_change{adopted});
  st.in_view_change = false;
  update_holding(self);
  start_pending(self);
  if (left && !st.left) {
    // Stay reachable, feeding the engines, until they hold nothing and nothing they
    // sent can come back (the network knows: maybe_ask).
    st.left = true;
    st.pending.clear();
    st.pending_allreduces.clear();
    maybe_ask(self);
  }
}

caf::behavior processor_actor(processor_ptr self, std::shared_ptr<supervisor> sup,
                              caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                              std::shared_ptr<collective_ledger> ledger,
                              std::shared_ptr<shared_counters> ctr,
                              std::optional<duration> blind_linger,
                              std::shared_ptr<const supervisor> predecessor,
                              bool bcast_acknowledge) {
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
  dynamic_cfg.acknowledge = bcast_acknowledge;
  init.host.set_carry_out([self](collective_engine& e) { carry_out_engine(self, e); });
  init.bcast = &init.host.add(std::make_unique<broadcast_collective>(*init.view, dynamic_cfg));
  init.scatter = &init.host.add(make_scatter_collective(*init.view, dynamic_cfg));
  return {
    [=](deliver_atom, const wire::envelope& e, std::uint64_t gen) {
      auto& st = self->state;
      auto now = now_of(self);
      ++st.received;
      st.sup->heard_from(now, e.from);
      if (auto* seg = std::get_if<wire::bcast_segment>(&e.body); seg && !seg->direct) {
        // A passive sample for the supervisor (only used with background measurement).
        st.sup->stream_sample(now, e.from, tree_key{seg->op.origin, seg->kind},
                              seg->payload.size(), st.out);
        carry_out(self);
      }
      if (wire::kind_of(e.body) != collective_kind::none) {
        // To the engine of its kind; one it does not take goes back to its sender.
        if (!st.host.on_message(now, e.from, e.body))
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
      st.host.on_undeliverable(now_of(self), e.to, e.body);
    },
    [=](timer_atom, std::uint64_t token) {
      self->state.sup->on_timer(now_of(self), token, self->state.out);
      carry_out(self);
    },
    [=](engine_timer_atom, std::uint8_t engine, std::uint64_t token) {
      self->state.host.on_timer(now_of(self), static_cast<collective_kind>(engine), token);
    },
    [=](drain_ok_atom) {
      // Nothing sent before the ask can come back, and frames for this processor wait
      // at the network: stop unless the engines sent or took something since.
      auto& st = self->state;
      st.asked = false;
      if (st.host.drained_since(now_of(self), st.asked_at)) {
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
      st.host.remove(collective_kind::static_broadcast);
      st.host.remove(collective_kind::static_reduce);
      st.static_view.reset();
      st.static_routes = std::make_unique<routing_table>(st.sup->routes());
      tree copy = inst->t;
      st.static_view = std::make_unique<static_tree_view>(
        st.sup->self(), *st.static_routes, [copy](tree_key) { return copy; },
        inst->max_root_distance, inst->min_root_rate);
      // Fixed plans: they follow no view change (the plan changes only with an install).
      broadcast_config bc;
      bc.kind = collective_kind::static_broadcast;
      bc.message_kind = collective_kind::none;
      bc.first_seq = (std::uint64_t{st.incarnation} << 32) |
                     (std::uint64_t{++st.static_installs} << 20);
      if (inst->blocks) // a static scatter: the engine in block mode, under the same kind
        bc = scatter_config(bc, collective_kind::static_broadcast);
      st.host.add(std::make_unique<broadcast_collective>(*st.static_view, bc), false);
      reduce_config rc;
      rc.first_op = inst->first_reduce_op;
      rc.kind = collective_kind::static_reduce;
      if (inst->blocks) // a static gather: the engine in block mode, under the same kind
        rc = gather_config(rc, collective_kind::static_reduce);
      st.host.add(std::make_unique<reduce_collective>(*st.static_view, st.ops, rc,
                                                      st.static_view->own_vnodes()),
                  false);
      update_holding(self);
    },
    [=](sag_atom, std::uint32_t procs) {
      // Emulation only, like the static tree: install between broadcasts.
      auto& st = self->state;
      scatter_allgather_config cfg;
      cfg.first_seq = (std::uint64_t{st.incarnation} << 32) |
                      (std::uint64_t{++st.sag_installs} << 20) | 1;
      auto owner = st.sup;
      st.host.add(std::make_unique<scatter_allgather_collective>(
                    owner->self(), procs, [owner] { return owner->own_vnodes(); }, cfg),
                  false);
      update_holding(self);
    },
    [=](ring_atom, std::uint32_t procs) {
      // Emulation only, like scatter-allgather: install between allgathers.
      auto& st = self->state;
      std::vector<vnode_set> owners(procs);
      for (proc_id p = 0; p < procs; ++p)
        owners[p] = st.sup->routes().owned_by(p);
      st.host.add(std::make_unique<ring_allgather_collective>(st.sup->self(), std::move(owners)),
                  false);
      update_holding(self);
    },
    [=](pairwise_atom, std::uint32_t procs) {
      // Emulation only, like the ring: install between all-to-alls.
      auto& st = self->state;
      std::vector<vnode_set> owners(procs);
      for (proc_id p = 0; p < procs; ++p)
        owners[p] = st.sup->routes().owned_by(p);
      st.host.add(std::make_unique<pairwise_alltoall_collective>(st.sup->self(), std::move(owners)),
                  false);
      update_holding(self);
    },
    [=](bcast_atom, const bcast_request_ptr& req) {
      auto& st = self->state;
      if (!req->use_static && !req->p2p)
        prepare_own_trees(self); // trees on demand: this processor roots the broadcast
      auto now = now_of(self);
      shared_bytes payload(std::vector<std::uint8_t>(req->bytes, payload_fill));
      collective_engine* eng = nullptr;
      expected<wire::collective_id> id = make_error(errc::stopped, "no engine");
      if (req->scatter) {
        auto* s = req->use_static
                    ? st.host.get<broadcast_collective>(collective_kind::static_broadcast)
                    : st.scatter;
        tree_view* view = req->use_static ? static_cast<tree_view*>(st.static_view.get())
                                          : st.view.get();
        if (s && view && !st.left) {
          view->refresh();
          std::map<vnode_id, shared_bytes> blocks;
          const auto all = view->all_vnodes();
          all.for_each([&](vnode_id v) {
            std::vector<std::uint8_t> b(req->bytes);
            for (std::size_t i = 0; i < b.size(); ++i)
              b[i] = block_byte(v, i);
            blocks.emplace(v, shared_bytes(std::move(b)));
          });
          eng = s;
          auto bytes = scatter_payload(*view, req->root, blocks);
          id = bytes ? s->broadcast(now, *bytes) : expected<wire::collective_id>(bytes.err());
        }
      } else if (req->scatter_allgather) {
        auto* sag = st.host.get<scatter_allgather_collective>(collective_kind::scatter_allgather);
        if (sag && !st.left) {
          eng = sag;
          id = sag->broadcast(now, payload);
        }
      } else {
        auto* b = req->use_static
                    ? st.host.get<broadcast_collective>(collective_kind::static_broadcast)
                    : st.bcast;
        if (b && !st.left) {
          eng = b;
          id = req->p2p      ? b->send(now, req->to, payload)
               : req->choice ? b->broadcast(now, payload, *req->choice)
                             : b->broadcast(now, payload);
        }
      }
      if (!eng) {
        req->result.set_value(std::nullopt);
        return;
      }
      if (!id) {
        req->result.set_value(std::nullopt);
        eng->clear_outbox();
        return;
      }
      if (st.ledger) {
        // Before the deliveries this event may make (a message to an own vnode).
        std::lock_guard<std::mutex> guard{st.ledger->mtx};
        st.ledger->started[*id] = now;
        st.ledger->sizes[*id] = req->bytes;
        if (req->p2p)
          st.ledger->targets[*id] = req->to;
        if (req->scatter)
          st.ledger->blocks[*id] = req->bytes;
      }
      carry_out_engine(self, *eng);
      req->result.set_value(*id);
    },
    [=](reduce_atom, const reduce_request_ptr& req) {
      auto& st = self->state;
      if (st.left)
        return;
      if (!req->use_static && st.sup->own_vnodes().contains(req->spec.root))
        prepare_own_trees(self); // trees on demand: this processor roots the reduction
      if (req->use_static ||
          (st.reduce && st.gather && st.allgather && st.alltoall && st.view->participating() &&
           st.pending.empty())) {
        start_reduce(self, req);
        return;
      }
      st.pending.push_back(req); // started once this processor takes part
    },
    [=](mpich_atom, std::uint32_t procs, std::uint8_t algo) {
      // Emulation only, like scatter-allgather: install between operations.
      auto& st = self->state;
      auto owner = st.sup;
      st.host.add(std::make_unique<mpich_allreduce_collective>(
                    owner->self(), procs, [owner] { return owner->own_vnodes(); }, st.ops,
                    static_cast<mpich_algorithm>(algo), st.incarnation),
                  false);
      update_holding(self);
    },
    [=](allreduce_atom, const allreduce_request_ptr& req) {
      auto& st = self->state;
      if (st.left)
        return;
      if (req->kind != collective_kind::allreduce && req->kind != collective_kind::barrier) {
        start_allreduce(self, req);
        return;
      }
      if (st.allreduce && st.view->participating() && st.pending_allreduces.empty()) {
        start_allreduce(self, req);
        return;
      }
      st.pending_allreduces.push_back(req); // started once this processor takes part
    },
    [=](found_atom, const found_args_ptr& args) {
      auto& st = self->state;
      st.sup->found(now_of(self), args->members, args->routes, st.out);
      if (!st.reduce)
        st.reduce = &st.host.add(std::make_unique<reduce_collective>(
          *st.view, st.ops, reduce_config{}, st.sup->own_vnodes()));
      add_allreduce_engines(self, st.sup->own_vnodes());
      if (!st.gather)
        st.gather = &st.host.add(make_gather_collective(*st.view, st.ops,
                                                        gather_reduce_config(),
                                                        st.sup->own_vnodes()));
      if (!st.allgather)
        st.allgather = &st.host.add(std::make_unique<allgather_collective>(
          *st.view, st.ops, allgather_reduce_config(), allgather_bcast_config(st.incarnation),
          st.sup->own_vnodes()));
      if (!st.alltoall)
        st.alltoall = &st.host.add(std::make_unique<alltoall_collective>(
          *st.view, st.ops, alltoall_reduce_config(), allgather_bcast_config(st.incarnation),
          st.sup->own_vnodes()));
      carry_out(self);
    },
    [=](join_atom, proc_id contact, const vnode_set& wanted) {
      auto& st = self->state;
      if (!st.reduce) // a joiner's vnodes settle when their histories arrive
        st.reduce = &st.host.add(std::make_unique<reduce_collective>(
          *st.view, st.ops, reduce_config{}, vnode_set{}));
      add_allreduce_engines(self, vnode_set{});
      if (!st.gather)
        st.gather = &st.host.add(make_gather_collective(*st.view, st.ops,
                                                        gather_reduce_config(), vnode_set{}));
      if (!st.allgather)
        st.allgather = &st.host.add(std::make_unique<allgather_collective>(
          *st.view, st.ops, allgather_reduce_config(), allgather_bcast_config(st.incarnation),
          vnode_set{}));
      if (!st.alltoall)
        st.alltoall = &st.host.add(std::make_unique<alltoall_collective>(
          *st.view, st.ops, alltoall_reduce_config(), allgather_bcast_config(st.incarnation),
          vnode_set{}));
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
      self->state.pending_allreduces.clear();
      stop(self);
    },
    [=](prepare_atom) { prepare_own_trees(self); },
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
                           std::shared_ptr<const supervisor> predecessor,
                           bool bcast_acknowledge) {
  return sys.spawn(processor_actor, std::move(sup), std::move(net), mon, incarnation,
                   std::move(ledger), std::move(counters), blind_linger,
                   std::move(predecessor), bcast_acknowledge);
}

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon) {
  return spawn_processor(sys, std::move(sup), std::move(net), mon, 0, nullptr, nullptr);
}

} // namespace banyan::actors

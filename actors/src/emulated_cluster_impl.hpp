#pragma once
/// The emulated cluster's state, shared by the files that implement
/// `emulated_cluster` (emulated_cluster.cpp: processors, membership, broadcasts and
/// reductions; emulated_cluster_blocks.cpp: gather, scatter, allgather;
/// emulated_cluster_allreduce.cpp: allreduce, barrier and their MPICH baselines).

#include "banyan/actors/emulated_cluster.hpp"

#include <algorithm>
#include <thread>

#include <caf/scheduler/test_coordinator.hpp>

#include "banyan/core/gather.hpp"
#include "banyan/core/scatter_allgather.hpp"
#include "collective_glue.hpp"

namespace banyan::actors {

/// splitmix64: independent per-processor seeds from one run seed.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct emulated_cluster::impl {
  cluster_config cfg;
  caf::actor_system_config sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr; // virtual time only
  cluster_monitor mon;
  std::shared_ptr<shared_counters> ctr = std::make_shared<shared_counters>();
  caf::actor net;
  std::vector<caf::actor> procs;
  std::vector<std::shared_ptr<supervisor>> sups;    // current incarnation
  std::vector<std::shared_ptr<supervisor>> history; // every incarnation
  /// The incarnation that left last, per processor (none after a crash): its successor
  /// recalls what it measured (supervisor::recall_paths).
  std::vector<std::shared_ptr<const supervisor>> departed;
  std::vector<std::uint32_t> incarnation;
  std::shared_ptr<collective_ledger> ledger = std::make_shared<collective_ledger>();
  reduce_op_table ops; ///< built-in operators, to check requests up front
  std::uint64_t reductions = 0;        ///< over adaptive trees: 1, 2, 3, ...
  std::uint64_t static_reductions = 0; ///< over static trees (static_reduction_base + 1, 2, ...)
  std::uint64_t gathers = 0;           ///< gathers (gather_base + 1, 2, ...)
  std::uint64_t allgathers = 0;        ///< allgathers (allgather_base + 1, 2, ...)
  std::uint64_t ring_allgathers = 0;   ///< ring allgathers (ring_allgather_base + 1, 2, ...)
  std::uint64_t alltoalls = 0;          ///< all-to-alls (alltoall_base + 1, 2, ...)
  std::uint64_t pairwise_alltoalls = 0; ///< pairwise ones (pairwise_alltoall_base + 1, 2, ...)
  std::uint32_t static_installs = 0;
  /// Reductions over adaptive trees without a result yet: a processor that joins starts
  /// them too (at the first reduction not completed, as the engine expects).
  std::map<std::uint64_t, reduce_request_ptr> open_reductions;
  /// Reductions cut into segments: first engine reduction -> how many.
  std::map<std::uint64_t, std::uint32_t> segmented;
  /// Allreduces and barriers: 1, 2, 3, ... per kind; those without a result at their
  /// root yet (a processor that joins starts them too, as for reductions).
  std::uint64_t allreduces = 0, barriers = 0;
  std::map<mpich_algorithm, std::uint64_t> mpich_ops;
  /// Allreduces cut into segments (each an allreduce of its own): first -> how many.
  std::map<std::uint64_t, std::uint32_t> segmented_allreduces;
  std::uint32_t allreduce_segments(collective_kind kind, std::uint64_t op) const {
    if (kind != collective_kind::allreduce)
      return 1;
    auto i = segmented_allreduces.find(op);
    return i == segmented_allreduces.end() ? 1 : i->second;
  }
  std::map<std::pair<collective_kind, std::uint64_t>, allreduce_request_ptr> open_allreduces;

  expected<std::uint64_t> start_allreduce(collective_kind kind, std::uint64_t op,
                                          const allreduce_spec& spec, contribution_fn values,
                                          bool run = true) {
    auto req = std::make_shared<allreduce_request>();
    req->kind = kind;
    req->spec = spec;
    req->spec.op = op;
    req->values = std::move(values);
    allreduce_request_ptr shared = req;
    if (kind == collective_kind::allreduce || kind == collective_kind::barrier) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      open_allreduces[{kind, op}] = shared;
    }
    for (auto& p : procs)
      if (p)
        caf::anon_send(p, allreduce_atom::value, shared);
    if (sched && run)
      sched->run();
    return op;
  }

  /// The engine reductions that make up reduction `op`.
  std::uint32_t segments_of(std::uint64_t op) const {
    auto i = segmented.find(op);
    return i == segmented.end() ? 1 : i->second;
  }
  std::size_t vnodes = 0;
  timestamp t0{0};

  explicit impl(cluster_config c)
    : cfg(std::move(c)), mon(cfg.topo.proc_count()), procs(cfg.topo.proc_count()),
      sups(cfg.topo.proc_count()), departed(cfg.topo.proc_count()), incarnation(cfg.topo.proc_count(), 0) {
    if (cfg.clock == clock_mode::virtual_time) {
      sys_cfg.set("scheduler.policy", caf::atom("testing"));
    } else {
      sys_cfg.set("scheduler.max-threads", cfg.threads);
    }
    sys = std::make_unique<caf::actor_system>(sys_cfg);
    if (cfg.clock == clock_mode::virtual_time)
      sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> trace;
    if (cfg.on_frame)
      trace = [this](frame_trace::kind k, timestamp at, const wire::envelope& e, std::size_t n) {
        cfg.on_frame(frame_trace{k, at - t0, &e, n});
      };
    if (cfg.on_tree_event)
      mon.set_listener([this](proc_id p, const tree_event& e) {
        auto rel = e;
        rel.at = timestamp{e.at - t0};
        cfg.on_tree_event(p, rel);
      });
    net = spawn_emulated_network(*sys, cfg.topo, ctr, std::move(trace), cfg.share_quantum);
    t0 = now();
  }

  ~impl() {
    for (auto& p : procs)
      if (p)
        caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(net, caf::exit_reason::user_shutdown);
    procs.clear();
    net = nullptr;
    if (sched) {
      // The system's destructor waits for every actor: drain jobs and timers first.
      for (;;) {
        sched->run();
        if (!sched->has_pending_timeout())
          break;
        sched->trigger_timeout();
      }
    }
  }

  timestamp now() const {
    if (sched)
      return std::chrono::duration_cast<timestamp>(
        sched->clock().now().time_since_epoch());
    return std::chrono::duration_cast<timestamp>(
      sys->clock().now().time_since_epoch());
  }

  /// Spawns p's next incarnation; `attach`: attach it to the network now (a founder; a
  /// joiner is attached by the network actor with its join, see `join`).
  void spawn(proc_id p, bool attach = true) {
    auto inc = incarnation[p]++;
    auto seed = mix(cfg.seed ^ mix(p) ^ (std::uint64_t{inc} << 40));
    auto sup = std::make_shared<supervisor>(p, cfg.sup, seed);
    sups[p] = sup;
    history.push_back(sup);
    procs[p] = spawn_processor(*sys, sup, net, &mon, inc, ledger, ctr, cfg.blind_linger,
                               std::move(departed[p]), // (leaves it empty)
                               cfg.bcast_acknowledge);
    if (attach)
      caf::anon_send(net, attach_atom::value, p, procs[p]);
  }

  /// Virtual time: runs queued jobs, then timers due up to `limit`. Returns when
  /// the next timer lies beyond it or `done()` holds.
  template <class Done>
  bool run_virtual(timestamp limit, Done done) {
    for (;;) {
      sched->run();
      if (done())
        return true;
      if (!sched->has_pending_timeout())
        return done();
      auto next = std::chrono::duration_cast<timestamp>(
        sched->clock().schedule().begin()->first.time_since_epoch());
      if (next > limit)
        return false;
      sched->trigger_timeout();
    }
  }

  /// Until `done()` holds: in virtual time, runs until it holds with the cluster `quiet()`
  /// (or until `limit` has passed); in real time, looks every 5 ms until `limit`.
  template <class Done, class Quiet>
  bool run_until_done(duration limit, Done done, Quiet quiet) {
    if (sched)
      return run_virtual(now() + limit, [&] { return done() && quiet(); });
    auto deadline = now() + limit;
    while (now() < deadline) {
      if (done())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::optional<wire::collective_id> request(proc_id origin, const bcast_request_ptr& req) {
    auto fut = req->result.get_future();
    caf::anon_send(procs[origin], bcast_atom::value, req);
    if (sched) {
      sched->run();
      if (fut.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return std::nullopt;
    } else if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return std::nullopt;
    }
    return fut.get();
  }

  /// Hands every running processor tree `t` for the static engines.
  void install_static(const banyan::tree& t, std::uint64_t first_reduce_op,
                      bool blocks = false) {
    auto inst = std::make_shared<static_install>();
    inst->t = t;
    inst->first_reduce_op = first_reduce_op;
    inst->blocks = blocks;
    // What reductions size their timeouts from: the deepest path from the root along
    // t, and the slowest link on the way up.
    duration deepest{0};
    rate slowest = infinite_rate;
    for (proc_id p = 0; p < t.size(); ++p) {
      duration d{0};
      proc_id at = p;
      for (std::size_t hops = 0; hops < t.size() && at != t.root() && at != no_proc; ++hops) {
        auto up = t.parent(at);
        if (up == no_proc)
          break;
        d += cfg.topo.one_way(up, at);
        slowest = std::min(slowest, cfg.topo.path_bandwidth(at, up));
        at = up;
      }
      deepest = std::max(deepest, d);
    }
    inst->max_root_distance = deepest;
    inst->min_root_rate = slowest;
    static_install_ptr shared = inst;
    for (auto& p : procs)
      if (p)
        caf::anon_send(p, static_tree_atom::value, shared);
  }

  /// Checks a reduction request; the owner of its root vnode, or an error.
  expected<proc_id> check(const reduction_args& r) {
    if (vnodes == 0)
      return make_error(errc::stopped, "reduce: the cluster has not started");
    if (r.root >= vnodes)
      return make_error(errc::invalid_argument, "reduce: root vnode " + std::to_string(r.root) +
                                                  " does not exist (vnodes are 0-" +
                                                  std::to_string(vnodes - 1) + ")");
    if (!r.values)
      return make_error(errc::invalid_argument, "reduce: no contribution function");
    if (auto e = ops.check(r.fn, r.count * element_size(r.fn.type)))
      return *e;
    if (!sched) // supervisors run on other threads: the founders' assignment
      return static_cast<proc_id>(r.root / std::max<std::uint32_t>(cfg.vnodes_per_proc, 1));
    for (auto& s : sups)
      if (s && s->state() == supervisor::status::member)
        return s->routes().owner(r.root);
    return make_error(errc::stopped, "reduce: no processor takes part");
  }

  /// The arguments of a gather (or allgather) `what` of `block` bytes per vnode to
  /// `root`, checked: the reduction to start and the root's owner, or the error.
  expected<std::pair<reduction_args, proc_id>> gather_args(const char* what, vnode_id root,
                                                           std::size_t block,
                                                           contribution_fn values) {
    if (block == 0)
      return make_error(errc::invalid_argument, std::string(what) + ": blocks of 0 bytes");
    reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1, std::move(values)};
    auto owner = check(r); // the root and the values; the operator is a stand-in
    if (!owner)
      return owner.err();
    r.fn = gather_fn;
    r.count = block;
    return std::make_pair(std::move(r), *owner);
  }

  /// The running processor that owns `root`, where a scatter of `block` bytes per vnode
  /// from it starts; nothing for a block of 0 bytes or a root no running processor owns.
  std::optional<proc_id> scatter_owner(vnode_id root, std::size_t block) {
    if (block == 0 || root >= vnodes)
      return std::nullopt;
    reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1,
                     [](vnode_id) { return std::vector<std::uint8_t>(4); }};
    auto owner = check(r); // the root; the operator and values are stand-ins
    if (!owner || *owner >= procs.size() || !procs[*owner])
      return std::nullopt;
    return *owner;
  }

  void start_reduce(const reduction_args& r, std::uint64_t op, bool use_static,
                    std::uint32_t segments = 1, std::size_t per = 0, bool gather = false,
                    bool allgather = false) {
    auto req = std::make_shared<reduce_request>();
    req->spec = {op, r.root, r.fn, r.count};
    if (gather || allgather)
      req->spec = gather_spec(op, r.root, r.count, vnodes);
    req->gather = gather;
    req->allgather = allgather;
    if (allgather) {
      std::lock_guard<std::mutex> guard{ledger->mtx};
      ledger->allgather_values[op] = r.values;
    }
    req->values = r.values;
    req->use_static = use_static;
    req->segments = segments;
    req->segment_count = per;
    reduce_request_ptr shared = req;
    if (!use_static)
      open_reductions[op] = shared;
    for (auto& p : procs)
      if (p)
        caf::anon_send(p, reduce_atom::value, shared);
    if (sched)
      sched->run();
  }

  /// Every engine reduction of `op` has a result (ledger locked by the caller).
  bool has_results(std::uint64_t op) const {
    for (std::uint64_t j = 0; j < segments_of(op); ++j) {
      auto r = ledger->reduce_results.find(op + j);
      if (r == ledger->reduce_results.end() || r->second.empty())
        return false;
    }
    return true;
  }

  std::size_t delivered_count(const wire::collective_id& id) {
    std::lock_guard<std::mutex> guard{ledger->mtx};
    auto i = ledger->deliveries.find(id);
    return i == ledger->deliveries.end() ? 0 : i->second.size();
  }
};

} // namespace banyan::actors

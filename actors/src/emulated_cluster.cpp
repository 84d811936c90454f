#include "banyan/actors/emulated_cluster.hpp"

#include <algorithm>
#include <thread>

#include <caf/scheduler/test_coordinator.hpp>

#include "banyan/core/gather.hpp"
#include "banyan/core/scatter_allgather.hpp"
#include "collective_glue.hpp"

namespace banyan::actors {

namespace {

std::uint64_t mix(std::uint64_t x) {
  // splitmix64: independent per-processor seeds from one run seed
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

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
    net = spawn_emulated_network(*sys, cfg.topo, ctr, std::move(trace));
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
  void install_static(const banyan::tree& t, std::uint64_t first_reduce_op) {
    auto inst = std::make_shared<static_install>();
    inst->t = t;
    inst->first_reduce_op = first_reduce_op;
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

emulated_cluster::emulated_cluster(cluster_config cfg)
  : impl_(std::make_unique<impl>(std::move(cfg))) {
}

emulated_cluster::~emulated_cluster() = default;

void emulated_cluster::start() {
  auto& d = *impl_;
  auto n = d.cfg.initial == 0 ? d.cfg.topo.proc_count()
                              : std::min(d.cfg.initial, d.cfg.topo.proc_count());
  auto args = std::make_shared<found_args>();
  auto k = d.cfg.vnodes_per_proc;
  for (proc_id p = 0; p < n; ++p) {
    args->members.push_back({p, ""});
    args->routes.assign(vnode_set::range(p * k, (p + 1) * k), p, 0);
  }
  for (proc_id p = 0; p < n; ++p)
    d.spawn(p);
  d.vnodes = n * k;
  d.t0 = d.now();
  found_args_ptr shared = args;
  for (proc_id p = 0; p < n; ++p)
    caf::anon_send(d.procs[p], found_atom::value, shared);
}

std::optional<error> emulated_cluster::join(proc_id p, proc_id contact, const vnode_set& wanted) {
  auto& d = *impl_;
  if (p >= d.procs.size())
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) +
                                                " is not a slot of topology " + d.cfg.topo.name);
  if (d.procs[p])
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) + " is already running");
  if (contact >= d.procs.size() || !d.procs[contact])
    return make_error(errc::unknown_peer, "contact " + std::to_string(contact) + " is not running");
  // The network attaches the new incarnation and hands it the join once an earlier one,
  // still draining after its leave, has detached.
  d.spawn(p, false);
  ++d.ctr->joining; // until the network hands the join over (quiet() waits for it)
  caf::anon_send(d.net, attach_atom::value, p, d.procs[p], contact, wanted);
  // The reductions not completed yet: the joiner starts them once it takes part (its
  // vnodes may come with histories that still owe them).
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    for (auto i = d.open_reductions.begin(); i != d.open_reductions.end();) {
      if (d.has_results(i->first)) {
        i = d.open_reductions.erase(i);
        continue;
      }
      caf::anon_send(d.procs[p], reduce_atom::value, i->second);
      ++i;
    }
    for (auto i = d.open_allreduces.begin(); i != d.open_allreduces.end();) {
      auto e = d.ledger->allreduces.find(i->first);
      if (e != d.ledger->allreduces.end() && !e->second.reduced.empty()) {
        i = d.open_allreduces.erase(i);
        continue;
      }
      caf::anon_send(d.procs[p], allreduce_atom::value, i->second);
      ++i;
    }
  }
  return std::nullopt;
}

std::optional<error> emulated_cluster::leave(proc_id p, proc_id recipient) {
  auto& d = *impl_;
  if (p >= d.procs.size() || !d.procs[p])
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) + " is not running");
  caf::anon_send(d.procs[p], leave_atom::value, recipient);
  d.procs[p] = nullptr;
  d.departed[p] = std::move(d.sups[p]); // (leaves it empty)
  return std::nullopt;
}

std::optional<error> emulated_cluster::crash(proc_id p) {
  auto& d = *impl_;
  if (p >= d.procs.size() || !d.procs[p])
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) + " is not running");
  caf::anon_send(d.procs[p], crash_atom::value);
  d.procs[p] = nullptr;
  d.sups[p] = nullptr;
  d.departed[p] = nullptr; // a crashed process comes back with nothing
  // For the monitor's trees, a crashed processor is gone as one that left.
  tree_event gone;
  gone.what = tree_event::kind::left;
  gone.at = d.now();
  d.mon.on_event(p, gone);
  return std::nullopt;
}

std::optional<error> emulated_cluster::schedule_change(const network_change& c) {
  auto& d = *impl_;
  if (auto err = check_network_change(d.cfg.topo, c))
    return err;
  caf::anon_send(d.net, change_atom::value, c, (d.t0 + c.at).count());
  return std::nullopt;
}

duration emulated_cluster::elapsed() const {
  return impl_->now() - impl_->t0;
}

void emulated_cluster::run_until(duration t) {
  auto& d = *impl_;
  auto target = d.t0 + t;
  if (d.sched) {
    d.run_virtual(target, [] { return false; });
    auto now = d.now();
    if (now < target)
      d.sched->advance_time(std::chrono::duration_cast<caf::timespan>(target - now));
    d.sched->run();
  } else {
    auto now = d.now();
    if (now < target)
      std::this_thread::sleep_for(target - now);
  }
}

bool emulated_cluster::run_until_quiet(duration limit, duration settle) {
  auto& d = *impl_;
  auto quiet = [this] { return this->quiet(); };
  if (d.sched)
    return d.run_virtual(d.now() + limit, quiet);
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (quiet() && d.now() - (d.t0 + last_change()) >= settle)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

bool emulated_cluster::quiet() const {
  return impl_->mon.measuring() == 0 && impl_->ctr->in_flight.load() == 0 &&
         impl_->ctr->holding.load() == 0 && impl_->ctr->joining.load() == 0;
}

const banyan::topology& emulated_cluster::topo() const {
  return impl_->cfg.topo;
}

const cluster_monitor& emulated_cluster::monitor() const {
  return impl_->mon;
}

duration emulated_cluster::last_change() const {
  auto t = impl_->mon.last_change();
  return t > impl_->t0 ? t - impl_->t0 : duration{0};
}

network_stats emulated_cluster::net_stats() const {
  auto& c = *impl_->ctr;
  return {c.messages.load(), c.bytes.load(), c.dropped.load(), c.stray_returns.load()};
}

bool emulated_cluster::running(proc_id p) const {
  return p < impl_->procs.size() && impl_->procs[p] != nullptr;
}

std::vector<proc_id> emulated_cluster::running_procs() const {
  std::vector<proc_id> result;
  for (proc_id p = 0; p < impl_->procs.size(); ++p)
    if (impl_->procs[p])
      result.push_back(p);
  return result;
}

const supervisor* emulated_cluster::inspect(proc_id p) const {
  if (!impl_->sched || p >= impl_->sups.size())
    return nullptr;
  return impl_->sups[p].get();
}

std::uint64_t emulated_cluster::probes() const {
  std::uint64_t n = 0;
  for (auto& s : impl_->history)
    n += s->probes_completed() + s->probes_abandoned();
  return n;
}

std::optional<wire::collective_id> emulated_cluster::broadcast(proc_id origin,
                                                              std::size_t bytes,
                                                              std::optional<tree_choice> choice) {
  auto& d = *impl_;
  if (origin >= d.procs.size() || !d.procs[origin])
    return std::nullopt;
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  req->choice = choice;
  return d.request(origin, req);
}

std::optional<wire::collective_id>
emulated_cluster::broadcast_static(proc_id origin, const banyan::tree& t, std::size_t bytes) {
  auto& d = *impl_;
  if (origin >= d.procs.size() || !d.procs[origin])
    return std::nullopt;
  auto tp = std::make_shared<const banyan::tree>(t);
  d.install_static(*tp, static_reduction_base + d.static_reductions + 1);
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  req->use_static = true;
  return d.request(origin, req);
}

std::optional<wire::collective_id>
emulated_cluster::broadcast_scatter_allgather(proc_id origin, std::size_t bytes) {
  auto& d = *impl_;
  if (origin >= d.procs.size() || !d.procs[origin])
    return std::nullopt;
  // Ranks are processor ids: the running processors must be 0..k-1.
  std::uint32_t k = 0;
  while (k < d.procs.size() && d.procs[k])
    ++k;
  for (auto p = k; p < d.procs.size(); ++p)
    if (d.procs[p])
      return std::nullopt;
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], sag_atom::value, k);
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  req->scatter_allgather = true;
  return d.request(origin, req);
}

std::size_t emulated_cluster::scatter_allgather_threshold() {
  return scatter_allgather_config{}.long_threshold;
}

broadcast_record emulated_cluster::deliveries(const wire::collective_id& id) const {
  auto& d = *impl_;
  broadcast_record r;
  std::lock_guard<std::mutex> guard{d.ledger->mtx};
  auto rel = [&](timestamp t) { return t > d.t0 ? t - d.t0 : duration{0}; };
  if (auto i = d.ledger->started.find(id); i != d.ledger->started.end()) {
    r.known = true;
    r.started = rel(i->second);
  }
  if (auto i = d.ledger->deliveries.find(id); i != d.ledger->deliveries.end())
    for (auto& [v, times] : i->second)
      for (auto t : times)
        r.delivered[v].push_back(rel(t));
  if (auto i = d.ledger->targets.find(id); i != d.ledger->targets.end())
    r.to = i->second;
  return r;
}

std::optional<wire::collective_id> emulated_cluster::send(proc_id from, vnode_id to,
                                                         std::size_t bytes) {
  auto& d = *impl_;
  if (from >= d.procs.size() || !d.procs[from] || to >= d.vnodes)
    return std::nullopt;
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  req->p2p = true;
  req->to = vnode_set{to};
  return d.request(from, req);
}

std::uint64_t emulated_cluster::bad_payloads() const {
  std::lock_guard<std::mutex> guard{impl_->ledger->mtx};
  return impl_->ledger->bad_payloads;
}

expected<std::uint64_t> emulated_cluster::reduce(const reduction_args& r) {
  auto& d = *impl_;
  auto owner = d.check(r);
  if (!owner)
    return owner.err();
  const auto bytes = r.count * element_size(r.fn.type);
  std::uint32_t k = 1;
  std::size_t per = r.count;
  if (d.cfg.reduce_segment > 0 && bytes > d.cfg.reduce_segment) {
    per = std::max<std::size_t>(1, d.cfg.reduce_segment / element_size(r.fn.type));
    k = static_cast<std::uint32_t>((r.count + per - 1) / per);
  }
  const auto op = d.reductions + 1;
  d.reductions += k;
  if (k > 1)
    d.segmented[op] = k;
  d.start_reduce(r, op, false, k, per);
  return op;
}

expected<std::uint64_t> emulated_cluster::reduce_static(const banyan::tree& t,
                                                        const reduction_args& r) {
  auto& d = *impl_;
  auto owner = d.check(r);
  if (!owner)
    return owner.err();
  if (t.size() != d.procs.size() || t.root() != *owner)
    return make_error(errc::invalid_argument,
                      "reduce_static: the tree must span the topology's " +
                        std::to_string(d.procs.size()) + " processors and be rooted at " +
                        std::to_string(*owner) + ", the owner of vnode " +
                        std::to_string(r.root));
  const auto op = static_reduction_base + ++d.static_reductions;
  d.install_static(t, op);
  d.start_reduce(r, op, true);
  return op;
}

expected<std::uint64_t> emulated_cluster::gather(vnode_id root, std::size_t block,
                                                 contribution_fn values) {
  auto& d = *impl_;
  if (block == 0)
    return make_error(errc::invalid_argument, "gather: blocks of 0 bytes");
  reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1, std::move(values)};
  auto owner = d.check(r); // the root and the values; the operator is a stand-in
  if (!owner)
    return owner.err();
  r.fn = gather_fn;
  r.count = block;
  const auto op = gather_base + ++d.gathers;
  d.start_reduce(r, op, false, 1, 0, true);
  return op;
}

expected<std::uint64_t> emulated_cluster::allgather(vnode_id root, std::size_t block,
                                                    contribution_fn values) {
  auto& d = *impl_;
  if (block == 0)
    return make_error(errc::invalid_argument, "allgather: blocks of 0 bytes");
  reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1, std::move(values)};
  auto owner = d.check(r);
  if (!owner)
    return owner.err();
  r.fn = gather_fn;
  r.count = block;
  const auto op = allgather_base + ++d.allgathers;
  d.start_reduce(r, op, false, 1, 0, false, true);
  return op;
}

expected<std::uint64_t> emulated_cluster::allgather_ring(std::size_t block,
                                                         contribution_fn values) {
  auto& d = *impl_;
  if (block == 0 || !values)
    return make_error(errc::invalid_argument, "allgather_ring: blocks of 0 bytes, or no values");
  std::uint32_t k = 0;
  while (k < d.procs.size() && d.procs[k])
    ++k;
  for (auto p = k; p < d.procs.size(); ++p)
    if (d.procs[p])
      return make_error(errc::invalid_argument,
                        "allgather_ring: the running processors must be 0..k-1");
  if (k == 0)
    return make_error(errc::stopped, "allgather_ring: no processor runs");
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], ring_atom::value, k);
  const auto op = ring_allgather_base + ++d.ring_allgathers;
  auto req = std::make_shared<reduce_request>();
  req->spec = gather_spec(op, 0, block, d.vnodes);
  req->values = values;
  req->use_static = true; // started at once, never by joiners
  req->ring = true;
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    d.ledger->allgather_values[op] = values;
  }
  reduce_request_ptr shared = req;
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], reduce_atom::value, shared);
  if (d.sched)
    d.sched->run();
  return op;
}

allgather_record emulated_cluster::allgathered(std::uint64_t op) const {
  auto& d = *impl_;
  allgather_record r;
  std::lock_guard<std::mutex> guard{d.ledger->mtx};
  auto rel = [&](timestamp t) { return t > d.t0 ? t - d.t0 : duration{0}; };
  if (auto i = d.ledger->reduce_started.find(op); i != d.ledger->reduce_started.end()) {
    r.known = true;
    r.started = rel(i->second);
  }
  if (auto i = d.ledger->reduce_results.find(op); i != d.ledger->reduce_results.end()) {
    r.gathered = !i->second.empty();
    if (i->second.size() > 1)
      r.problems.push_back(std::to_string(i->second.size()) + " gather results");
  }
  if (auto i = d.ledger->allgathered.find(op); i != d.ledger->allgathered.end())
    r.delivered = i->second;
  if (auto i = d.ledger->allgather_last.find(op); i != d.ledger->allgather_last.end())
    r.last = rel(i->second);
  if (auto i = d.ledger->contributions.find(op); i != d.ledger->contributions.end())
    r.contributions = i->second;
  if (auto i = d.ledger->reduce_problems.find(op); i != d.ledger->reduce_problems.end())
    r.problems.insert(r.problems.end(), i->second.begin(), i->second.end());
  r.bad = d.ledger->bad_allgathers;
  return r;
}

bool emulated_cluster::run_until_allgathered(std::uint64_t op, duration limit) {
  auto& d = *impl_;
  auto all = [&] {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    auto i = d.ledger->allgathered.find(op);
    return i != d.ledger->allgathered.end() && i->second.size() >= d.vnodes;
  };
  if (d.sched)
    return d.run_virtual(d.now() + limit, [&] { return all() && quiet(); });
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (all())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::optional<wire::collective_id> emulated_cluster::scatter(vnode_id root, std::size_t block) {
  auto& d = *impl_;
  if (block == 0 || root >= d.vnodes)
    return std::nullopt;
  reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1,
                   [](vnode_id) { return std::vector<std::uint8_t>(4); }};
  auto owner = d.check(r);
  if (!owner || *owner >= d.procs.size() || !d.procs[*owner])
    return std::nullopt;
  auto req = std::make_shared<bcast_request>();
  req->bytes = block;
  req->scatter = true;
  req->root = root;
  return d.request(*owner, req);
}

reduction_record emulated_cluster::reduction(std::uint64_t op) const {
  auto& d = *impl_;
  reduction_record r;
  std::lock_guard<std::mutex> guard{d.ledger->mtx};
  auto rel = [&](timestamp t) { return t > d.t0 ? t - d.t0 : duration{0}; };
  const auto k = d.segments_of(op);
  // A reduction cut into segments: its result is there once every segment's is; it
  // counted what every segment counted, and its value is theirs end to end.
  bool all = true;
  reduction_record::result whole;
  for (std::uint64_t j = 0; j < k; ++j) {
    const auto seg = op + j;
    const std::string which = k > 1 ? "segment " + std::to_string(j) + ": " : "";
    if (auto i = d.ledger->reduce_started.find(seg); i != d.ledger->reduce_started.end()) {
      r.started = r.known ? std::min(r.started, rel(i->second)) : rel(i->second);
      r.known = true;
    }
    if (auto i = d.ledger->reduce_problems.find(seg); i != d.ledger->reduce_problems.end())
      for (auto& p : i->second)
        r.problems.push_back(which + p);
    std::map<vnode_id, int> taken;
    if (auto i = d.ledger->contributions.find(seg); i != d.ledger->contributions.end())
      taken = i->second;
    if (j == 0)
      r.contributions = taken;
    else if (taken != r.contributions)
      r.problems.push_back(which + "other vnodes counted than in segment 0");
    auto i = d.ledger->reduce_results.find(seg);
    if (i == d.ledger->reduce_results.end() || i->second.empty()) {
      all = false;
      continue;
    }
    if (k == 1) {
      for (auto& e : i->second)
        r.results.push_back({e.at, rel(e.when), e.result.vnodes, e.result.value.to_vector()});
      continue;
    }
    if (i->second.size() > 1)
      r.problems.push_back(which + std::to_string(i->second.size()) + " results");
    auto& e = i->second.front();
    whole.at = e.at;
    whole.when = std::max(whole.when, rel(e.when));
    whole.vnodes = j == 0 ? e.result.vnodes : (whole.vnodes & e.result.vnodes);
    whole.value.insert(whole.value.end(), e.result.value.begin(), e.result.value.end());
  }
  if (k > 1 && all)
    r.results.push_back(std::move(whole));
  return r;
}

bool emulated_cluster::run_until_reduced(std::uint64_t op, duration limit) {
  auto& d = *impl_;
  auto has_result = [&] {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    return d.has_results(op);
  };
  if (d.sched)
    return d.run_virtual(d.now() + limit, [&] { return has_result() && quiet(); });
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (has_result())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

bool emulated_cluster::run_until_delivered(const wire::collective_id& id, duration limit) {
  auto& d = *impl_;
  std::size_t want = d.vnodes;
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    if (auto i = d.ledger->targets.find(id); i != d.ledger->targets.end())
      want = i->second.size();
  }
  auto done = [&] { return d.delivered_count(id) >= want && quiet(); };
  if (d.sched)
    return d.run_virtual(d.now() + limit, done);
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (d.delivered_count(id) >= want)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::size_t emulated_cluster::vnode_count() const {
  return impl_->vnodes;
}

// --- allreduce and barrier --------------------------------------------------------------

expected<std::uint64_t> emulated_cluster::allreduce(const reduction_args& r) {
  auto& d = *impl_;
  auto owner = d.check(r);
  if (!owner)
    return make_error(owner.err().code, "allreduce: " + owner.err().message);
  // Long arrays: segments of `reduce_segment` bytes, each an allreduce of its own
  // (consecutive numbers), reduced and released as soon as it is complete, so that the
  // segments pipeline up the tree and down again; a vnode's array is computed once.
  const auto esize = element_size(r.fn.type);
  const auto bytes = r.count * esize;
  if (d.cfg.reduce_segment == 0 || bytes <= d.cfg.reduce_segment)
    return d.start_allreduce(collective_kind::allreduce, ++d.allreduces,
                             {0, r.root, r.fn, r.count}, r.values);
  const std::size_t per = std::max<std::size_t>(1, d.cfg.reduce_segment / esize);
  const auto k = static_cast<std::uint32_t>((r.count + per - 1) / per);
  const auto first = d.allreduces + 1;
  d.allreduces += k;
  d.segmented_allreduces[first] = k;
  auto slices = std::make_shared<reduce_request::slicer>();
  for (std::uint32_t j = 0; j < k; ++j) {
    const std::size_t lo = j * per;
    const std::size_t count = std::min(per, r.count - lo);
    allreduce_spec spec{0, r.root, r.fn, count, bytes, j > 0 ? first + j - 1 : 0};
    contribution_fn piece = [slices, values = r.values, k, lo, count, esize](vnode_id v) {
      std::lock_guard<std::mutex> guard{slices->mtx};
      auto [i, fresh] = slices->arrays.try_emplace(v);
      if (fresh)
        i->second.first = values(v);
      auto& all = i->second.first;
      const auto a = std::min(all.size(), lo * esize);
      const auto b = std::min(all.size(), (lo + count) * esize);
      std::vector<std::uint8_t> part(all.begin() + static_cast<std::ptrdiff_t>(a),
                                     all.begin() + static_cast<std::ptrdiff_t>(b));
      if (++i->second.second == k)
        slices->arrays.erase(i);
      return part;
    };
    d.start_allreduce(collective_kind::allreduce, first + j, spec, std::move(piece), j + 1 == k);
  }
  return first;
}

expected<std::uint64_t> emulated_cluster::barrier() {
  auto& d = *impl_;
  if (d.vnodes == 0)
    return make_error(errc::stopped, "barrier: the cluster has not started");
  return d.start_allreduce(collective_kind::barrier, ++d.barriers, {0, 0, {}, 0}, nullptr);
}

allreduce_record emulated_cluster::allreduction(collective_kind kind, std::uint64_t op) const {
  auto& d = *impl_;
  allreduce_record r;
  std::lock_guard<std::mutex> guard{d.ledger->mtx};
  auto rel = [&](timestamp t) { return t > d.t0 ? t - d.t0 : duration{0}; };
  if (const auto k = d.allreduce_segments(kind, op); k > 1) {
    // Segments: each vnode must have each segment once (then it counts as delivered
    // once, when its last segment came); the values end to end; segment 0's
    // contributions, which every other segment's must equal.
    std::map<vnode_id, std::vector<int>> per_vnode;
    reduction_record::result whole;
    bool gathered = true;
    for (std::uint32_t j = 0; j < k; ++j) {
      auto i = d.ledger->allreduces.find({kind, op + j});
      if (i == d.ledger->allreduces.end()) {
        gathered = false;
        continue;
      }
      auto& e = i->second;
      const std::string which = "segment " + std::to_string(j) + ": ";
      if (e.started) {
        r.started = r.known ? std::min(r.started, rel(e.first_start)) : rel(e.first_start);
        r.known = true;
      }
      if (j == 0)
        r.contributions = e.contributions;
      else if (e.contributions != r.contributions)
        r.problems.push_back(which + "other vnodes counted than in segment 0");
      for (auto& p : e.problems)
        r.problems.push_back(which + p);
      r.wrong_values += e.wrong_values;
      for (auto& [v, ds] : e.delivered) {
        auto& counts = per_vnode[v];
        counts.resize(k, 0);
        counts[j] += static_cast<int>(ds.size());
        for (auto& [t, p] : ds)
          r.finished = std::max(r.finished, rel(t));
      }
      if (e.reduced.size() != 1) {
        if (e.reduced.size() > 1)
          r.problems.push_back(which + std::to_string(e.reduced.size()) + " reductions");
        gathered = false;
        continue;
      }
      auto& x = e.reduced.front();
      whole.at = x.at;
      whole.when = std::max(whole.when, rel(x.when));
      whole.vnodes = j == 0 ? x.result.vnodes : (whole.vnodes & x.result.vnodes);
      whole.value.insert(whole.value.end(), x.result.value.begin(), x.result.value.end());
    }
    for (auto& [v, counts] : per_vnode) {
      const auto lo = *std::min_element(counts.begin(), counts.end());
      const auto hi = *std::max_element(counts.begin(), counts.end());
      // Once each: one entry; a segment missing: none (unless another came twice).
      const int entries = lo == 1 && hi == 1 ? 1 : hi > 1 ? hi : 0;
      for (int m = 0; m < entries; ++m)
        r.delivered[v].push_back(r.finished);
    }
    if (gathered) {
      r.value = whole.value;
      r.reduced.push_back(std::move(whole));
    }
    return r;
  }
  auto i = d.ledger->allreduces.find({kind, op});
  if (i == d.ledger->allreduces.end())
    return r;
  auto& e = i->second;
  r.known = e.started;
  r.started = rel(e.first_start);
  for (auto& x : e.reduced)
    r.reduced.push_back({x.at, rel(x.when), x.result.vnodes, x.result.value.to_vector()});
  r.contributions = e.contributions;
  for (auto& [v, ds] : e.delivered)
    for (auto& [t, p] : ds) {
      r.delivered[v].push_back(rel(t));
      r.finished = std::max(r.finished, rel(t));
    }
  r.wrong_values = e.wrong_values;
  r.problems = e.problems;
  if (!e.reduced.empty())
    r.value = e.reduced.front().result.value.to_vector();
  else if (e.first_value)
    r.value = e.first_value->to_vector();
  return r;
}

bool emulated_cluster::run_until_allreduced(collective_kind kind, std::uint64_t op,
                                            duration limit) {
  auto& d = *impl_;
  auto all = [&] {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    const auto k = d.allreduce_segments(kind, op);
    for (std::uint32_t j = 0; j < k; ++j) {
      auto i = d.ledger->allreduces.find({kind, op + j});
      if (i == d.ledger->allreduces.end() || i->second.delivered.size() < d.vnodes)
        return false;
    }
    return true;
  };
  if (d.sched)
    return d.run_virtual(d.now() + limit, [&] { return all() && quiet(); });
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (all())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

expected<std::uint64_t> emulated_cluster::allreduce_mpich(mpich_algorithm algo,
                                                          const reduction_args& r) {
  auto& d = *impl_;
  const std::string what = std::string("allreduce_mpich (") + to_string(algo) + "): ";
  if (d.vnodes == 0)
    return make_error(errc::stopped, what + "the cluster has not started");
  if (algo == mpich_algorithm::dissemination ? r.count != 0 : !r.values)
    return make_error(errc::invalid_argument,
                      what + (r.count != 0 ? "a barrier takes no array" : "no contribution function"));
  if (auto e = d.ops.check(r.fn, r.count * element_size(r.fn.type)))
    return make_error(e->code, what + e->message);
  // Ranks are processor ids: the running processors must be 0..k-1.
  std::uint32_t k = 0;
  while (k < d.procs.size() && d.procs[k])
    ++k;
  for (auto p = k; p < d.procs.size(); ++p)
    if (d.procs[p])
      return make_error(errc::invalid_argument,
                        what + "the running processors are not 0.." + std::to_string(k - 1));
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], mpich_atom::value, k, static_cast<std::uint8_t>(algo));
  return d.start_allreduce(kind_of(algo), ++d.mpich_ops[algo], {0, 0, r.fn, r.count}, r.values);
}

} // namespace banyan::actors

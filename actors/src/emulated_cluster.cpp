#include "banyan/actors/emulated_cluster.hpp"

#include <thread>

#include <caf/scheduler/test_coordinator.hpp>

#include "broadcast_glue.hpp"

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
  std::vector<std::uint32_t> incarnation;
  std::shared_ptr<broadcast_ledger> ledger = std::make_shared<broadcast_ledger>();
  std::size_t vnodes = 0;
  timestamp t0{0};

  explicit impl(cluster_config c)
    : cfg(std::move(c)), mon(cfg.topo.proc_count()), procs(cfg.topo.proc_count()),
      sups(cfg.topo.proc_count()), incarnation(cfg.topo.proc_count(), 0) {
    if (cfg.clock == clock_mode::virtual_time) {
      sys_cfg.set("scheduler.policy", caf::atom("testing"));
    } else {
      sys_cfg.set("scheduler.max-threads", cfg.threads);
    }
    sys = std::make_unique<caf::actor_system>(sys_cfg);
    if (cfg.clock == clock_mode::virtual_time)
      sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    net = spawn_emulated_network(*sys, cfg.topo, ctr);
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

  void spawn(proc_id p) {
    auto inc = incarnation[p]++;
    auto seed = mix(cfg.seed ^ mix(p) ^ (std::uint64_t{inc} << 40));
    auto sup = std::make_shared<supervisor>(p, cfg.sup, seed);
    sups[p] = sup;
    history.push_back(sup);
    procs[p] = spawn_processor(*sys, sup, net, &mon, inc, ledger);
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
  d.spawn(p);
  caf::anon_send(d.procs[p], join_atom::value, contact, wanted);
  return std::nullopt;
}

std::optional<error> emulated_cluster::leave(proc_id p, proc_id recipient) {
  auto& d = *impl_;
  if (p >= d.procs.size() || !d.procs[p])
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) + " is not running");
  caf::anon_send(d.procs[p], leave_atom::value, recipient);
  d.procs[p] = nullptr;
  d.sups[p] = nullptr;
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
  return impl_->mon.measuring() == 0 && impl_->ctr->in_flight.load() == 0;
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
  return {c.messages.load(), c.bytes.load(), c.dropped.load()};
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
                                                              std::size_t bytes) {
  auto& d = *impl_;
  if (origin >= d.procs.size() || !d.procs[origin])
    return std::nullopt;
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  return d.request(origin, req);
}

std::optional<wire::collective_id>
emulated_cluster::broadcast_static(proc_id origin, const banyan::tree& t, std::size_t bytes) {
  auto& d = *impl_;
  if (origin >= d.procs.size() || !d.procs[origin])
    return std::nullopt;
  auto shared = std::make_shared<const banyan::tree>(t);
  tree_ptr tp = shared;
  for (auto& p : d.procs)
    if (p)
      caf::anon_send(p, static_tree_atom::value, tp);
  auto req = std::make_shared<bcast_request>();
  req->bytes = bytes;
  req->use_static = true;
  return d.request(origin, req);
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
  return r;
}

bool emulated_cluster::run_until_delivered(const wire::collective_id& id, duration limit) {
  auto& d = *impl_;
  auto done = [&] { return d.delivered_count(id) >= d.vnodes && quiet(); };
  if (d.sched)
    return d.run_virtual(d.now() + limit, done);
  auto deadline = d.now() + limit;
  while (d.now() < deadline) {
    if (d.delivered_count(id) >= d.vnodes)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::size_t emulated_cluster::vnode_count() const {
  return impl_->vnodes;
}

} // namespace banyan::actors

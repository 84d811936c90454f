#include "emulated_cluster_impl.hpp"

namespace banyan::actors {

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

std::optional<error> emulated_cluster::prepare(proc_id p) {
  auto& d = *impl_;
  if (p >= d.procs.size() || !d.procs[p])
    return make_error(errc::invalid_argument, "processor " + std::to_string(p) + " is not running");
  caf::anon_send(d.procs[p], prepare_atom::value);
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
  return d.run_until_done(limit, has_result, [this] { return quiet(); });
}

bool emulated_cluster::run_until_delivered(const wire::collective_id& id, duration limit) {
  auto& d = *impl_;
  std::size_t want = d.vnodes;
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    if (auto i = d.ledger->targets.find(id); i != d.ledger->targets.end())
      want = i->second.size();
  }
  auto done = [&] { return d.delivered_count(id) >= want; };
  return d.run_until_done(limit, done, [this] { return quiet(); });
}

std::size_t emulated_cluster::vnode_count() const {
  return impl_->vnodes;
}

} // namespace banyan::actors

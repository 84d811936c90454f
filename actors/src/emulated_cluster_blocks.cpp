// The emulated cluster's per-vnode block collectives: gather, scatter, allgather, and
// MPICH's ring allgather (its state: emulated_cluster_impl.hpp).

#include "emulated_cluster_impl.hpp"

namespace banyan::actors {

expected<std::uint64_t> emulated_cluster::gather(vnode_id root, std::size_t block,
                                                 contribution_fn values) {
  auto& d = *impl_;
  auto a = d.gather_args("gather", root, block, std::move(values));
  if (!a)
    return a.err();
  const auto op = gather_base + ++d.gathers;
  d.start_reduce(a->first, op, false, 1, 0, true);
  return op;
}

expected<std::uint64_t> emulated_cluster::gather_static(const banyan::tree& t, vnode_id root,
                                                        std::size_t block,
                                                        contribution_fn values) {
  auto& d = *impl_;
  auto a = d.gather_args("gather_static", root, block, std::move(values));
  if (!a)
    return a.err();
  const auto owner = a->second;
  if (t.size() != d.procs.size() || t.root() != owner)
    return make_error(errc::invalid_argument,
                      "gather_static: the tree must span the topology's " +
                        std::to_string(d.procs.size()) + " processors and be rooted at " +
                        std::to_string(owner) + ", the owner of vnode " + std::to_string(root));
  const auto op = static_reduction_base + ++d.static_reductions;
  d.install_static(t, op, true);
  d.start_reduce(a->first, op, true, 1, 0, true);
  return op;
}

expected<std::uint64_t> emulated_cluster::allgather(vnode_id root, std::size_t block,
                                                    contribution_fn values) {
  auto& d = *impl_;
  auto a = d.gather_args("allgather", root, block, std::move(values));
  if (!a)
    return a.err();
  const auto op = allgather_base + ++d.allgathers;
  d.start_reduce(a->first, op, false, 1, 0, false, true);
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
  return d.run_until_done(limit, all, [this] { return quiet(); });
}

std::optional<wire::collective_id> emulated_cluster::scatter(vnode_id root, std::size_t block) {
  auto& d = *impl_;
  auto owner = d.scatter_owner(root, block);
  if (!owner)
    return std::nullopt;
  auto req = std::make_shared<bcast_request>();
  req->bytes = block;
  req->scatter = true;
  req->root = root;
  return d.request(*owner, req);
}

std::optional<wire::collective_id>
emulated_cluster::scatter_static(const banyan::tree& t, vnode_id root, std::size_t block) {
  auto& d = *impl_;
  auto owner = d.scatter_owner(root, block);
  if (!owner || t.size() != d.procs.size() || t.root() != *owner)
    return std::nullopt;
  d.install_static(t, static_reduction_base + d.static_reductions + 1, true);
  auto req = std::make_shared<bcast_request>();
  req->bytes = block;
  req->scatter = true;
  req->use_static = true;
  req->root = root;
  return d.request(*owner, req);
}

} // namespace banyan::actors

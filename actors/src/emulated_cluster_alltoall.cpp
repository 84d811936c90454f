// The emulated cluster's all-to-all: banyan's (core/alltoall.hpp) and MPICH's pairwise
// exchange (core/pairwise_alltoall.hpp), recorded per vnode (its state:
// emulated_cluster_impl.hpp; the ledger: alltoall_record.cpp).

#include "emulated_cluster_impl.hpp"

namespace banyan::actors {

expected<std::uint64_t> emulated_cluster::alltoall(vnode_id root, std::size_t block,
                                                   contribution_fn values) {
  auto& d = *impl_;
  if (block == 0)
    return make_error(errc::invalid_argument, "alltoall: blocks of 0 bytes");
  reduction_args r{root, {reduce_kind::sum, element_type::int32, 0}, 1, values};
  auto owner = d.check(r); // the root and the values; the operator is a stand-in
  if (!owner)
    return owner.err();
  const auto op = alltoall_base + ++d.alltoalls;
  auto req = std::make_shared<reduce_request>();
  req->spec = {op, root, gather_fn, block};
  req->values = values;
  req->alltoall = true;
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    d.ledger->alltoall_values[op] = {values, block};
  }
  reduce_request_ptr shared = req;
  d.open_reductions[op] = shared; // a joiner starts it too
  for (auto& p : d.procs)
    if (p)
      caf::anon_send(p, reduce_atom::value, shared);
  if (d.sched)
    d.sched->run();
  return op;
}

expected<std::uint64_t> emulated_cluster::alltoall_pairwise(std::size_t block,
                                                            contribution_fn values) {
  auto& d = *impl_;
  if (block == 0 || !values)
    return make_error(errc::invalid_argument,
                      "alltoall_pairwise: blocks of 0 bytes, or no values");
  std::uint32_t k = 0;
  while (k < d.procs.size() && d.procs[k])
    ++k;
  for (auto p = k; p < d.procs.size(); ++p)
    if (d.procs[p])
      return make_error(errc::invalid_argument,
                        "alltoall_pairwise: the running processors must be 0..k-1");
  if (k == 0)
    return make_error(errc::stopped, "alltoall_pairwise: no processor runs");
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], pairwise_atom::value, k);
  const auto op = pairwise_alltoall_base + ++d.pairwise_alltoalls;
  auto req = std::make_shared<reduce_request>();
  req->spec = {op, 0, gather_fn, block};
  req->values = values;
  req->use_static = true; // started at once, never by joiners
  req->pairwise = true;
  {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    d.ledger->alltoall_values[op] = {values, block};
  }
  reduce_request_ptr shared = req;
  for (std::uint32_t p = 0; p < k; ++p)
    caf::anon_send(d.procs[p], reduce_atom::value, shared);
  if (d.sched)
    d.sched->run();
  return op;
}

alltoall_record emulated_cluster::alltoalled(std::uint64_t op) const {
  auto& d = *impl_;
  alltoall_record r;
  std::lock_guard<std::mutex> guard{d.ledger->mtx};
  auto rel = [&](timestamp t) { return t > d.t0 ? t - d.t0 : duration{0}; };
  if (auto i = d.ledger->reduce_started.find(op); i != d.ledger->reduce_started.end()) {
    r.known = true;
    r.started = rel(i->second);
  }
  // One gather per range (core/alltoall.hpp), under its gather number; the pairwise
  // exchange has none.
  std::size_t ranges = 0;
  if (auto i = d.ledger->alltoall_values.find(op);
      i != d.ledger->alltoall_values.end() && op > alltoall_base)
    ranges = alltoall_ranges(d.vnodes, i->second.second);
  r.gathered = ranges > 0;
  for (std::size_t g = 0; g < ranges; ++g) {
    auto i = d.ledger->reduce_results.find(alltoall_gather_number(alltoall_base + 1, op, g));
    r.gathered = r.gathered && i != d.ledger->reduce_results.end() && !i->second.empty();
    if (i != d.ledger->reduce_results.end() && i->second.size() > 1)
      r.problems.push_back(std::to_string(i->second.size()) + " gather results" +
                           (ranges > 1 ? " for range " + std::to_string(g) : std::string()));
  }
  if (auto i = d.ledger->alltoalled.find(op); i != d.ledger->alltoalled.end())
    r.delivered = i->second;
  if (auto i = d.ledger->alltoall_last.find(op); i != d.ledger->alltoall_last.end())
    r.last = rel(i->second);
  if (auto i = d.ledger->contributions.find(op); i != d.ledger->contributions.end())
    r.contributions = i->second;
  if (auto i = d.ledger->reduce_problems.find(op); i != d.ledger->reduce_problems.end())
    r.problems.insert(r.problems.end(), i->second.begin(), i->second.end());
  r.bad = d.ledger->bad_alltoalls;
  return r;
}

bool emulated_cluster::run_until_alltoalled(std::uint64_t op, duration limit) {
  auto& d = *impl_;
  auto all = [&] {
    std::lock_guard<std::mutex> guard{d.ledger->mtx};
    auto i = d.ledger->alltoalled.find(op);
    return i != d.ledger->alltoalled.end() && i->second.size() >= d.vnodes;
  };
  return d.run_until_done(limit, all, [this] { return quiet(); });
}

} // namespace banyan::actors

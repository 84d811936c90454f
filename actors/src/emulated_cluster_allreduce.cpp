// The emulated cluster's allreduce and barrier over the adaptive trees, and MPICH's
// allreduce and barrier baselines (its state: emulated_cluster_impl.hpp).

#include "emulated_cluster_impl.hpp"

namespace banyan::actors {

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
  return d.run_until_done(limit, all, [this] { return quiet(); });
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

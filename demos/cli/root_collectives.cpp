#include "root_collectives.hpp"

#include <cstdio>
#include <cstring>

namespace banyan::cli {

nlohmann::json root_collectives::to_json() const {
  return {{"broadcasts", broadcasts},        {"broadcasts_exactly_once", broadcasts_once},
          {"reductions", reductions},        {"reductions_exactly_once", reductions_once},
          {"broadcast_ms_max", broadcast_ms_max}, {"reduction_ms_max", reduction_ms_max},
          {"ok", ok()}};
}

namespace {

constexpr std::size_t elements = 4;

std::int32_t element(vnode_id v, std::size_t i) {
  return static_cast<std::int32_t>(v * 3 + i);
}

/// Whether broadcast `id` reached every vnode exactly once.
bool delivered_once(const actors::emulated_cluster& c, const wire::collective_id& id,
                    double& last_ms) {
  auto d = c.deliveries(id);
  if (d.delivered.size() != c.vnode_count())
    return false;
  bool once = true;
  for (auto& [v, times] : d.delivered) {
    once = once && times.size() == 1;
    for (auto t : times)
      last_ms = std::max(last_ms, to_ms(t - d.started));
  }
  return once;
}

/// Whether reduction `op` gave one result at `root`, of every vnode counted once, with
/// the sum of every vnode's `element`s.
bool reduced_once(const actors::emulated_cluster& c, std::uint64_t op, proc_id root,
                  double& ms) {
  auto r = c.reduction(op);
  const auto n = static_cast<vnode_id>(c.vnode_count());
  if (r.results.size() != 1 || !r.problems.empty() || r.contributions.size() != n)
    return false;
  for (auto& [v, k] : r.contributions)
    if (k != 1)
      return false;
  auto& res = r.results[0];
  ms = to_ms(res.when - r.started);
  if (res.at != root || !(res.vnodes == vnode_set::range(0, n))
      || res.value.size() != elements * 4)
    return false;
  for (std::size_t i = 0; i < elements; ++i) {
    std::int64_t want = 0;
    for (vnode_id v = 0; v < n; ++v)
      want += element(v, i);
    std::int32_t got = 0;
    std::memcpy(&got, res.value.data() + i * 4, 4);
    if (got != static_cast<std::int32_t>(want))
      return false;
  }
  return true;
}

} // namespace

root_collectives run_root_collectives(actors::emulated_cluster& c, const std::vector<proc_id>& roots,
                                      std::size_t bytes, std::uint32_t vnodes_per_proc,
                                      duration limit) {
  root_collectives out;
  std::vector<std::pair<proc_id, wire::collective_id>> started;
  std::vector<std::pair<proc_id, std::uint64_t>> reduced;
  for (auto root : roots) {
    ++out.broadcasts;
    if (auto id = c.broadcast(root, bytes)) {
      // Until every vnode has it and nothing is in flight; while the trees are still
      // measuring the cluster is never quiet, and the deliveries alone are judged below.
      c.run_until_delivered(*id, limit);
      started.emplace_back(root, *id);
    }
    ++out.reductions;
    actors::reduction_args a;
    a.root = root * vnodes_per_proc;
    a.fn = {reduce_kind::sum, element_type::int32, 0};
    a.count = elements;
    a.values = actors::int32_values(elements, element);
    if (auto op = c.reduce(a)) {
      c.run_until_reduced(*op, limit); // (quiet too, as above)
      reduced.emplace_back(root, *op);
    }
  }
  for (auto& [root, op] : reduced) {
    double ms = 0;
    if (reduced_once(c, op, root, ms)) {
      ++out.reductions_once;
      out.reduction_ms_max = std::max(out.reduction_ms_max, ms);
    } else {
      std::fprintf(stderr, "reduction to %u: not exactly once\n", root);
    }
  }
  // Judged once everything has run: a late duplicate would show here.
  for (auto& [root, id] : started) {
    double last = 0;
    if (delivered_once(c, id, last)) {
      ++out.broadcasts_once;
      out.broadcast_ms_max = std::max(out.broadcast_ms_max, last);
      continue;
    }
    auto d = c.deliveries(id);
    std::size_t twice = 0;
    for (auto& [v, times] : d.delivered)
      twice += times.size() > 1 ? 1 : 0;
    std::fprintf(stderr,
                 "broadcast from %u: not delivered exactly once (%zu of %zu vnodes delivered, "
                 "%zu more than once)\n",
                 root, d.delivered.size(), c.vnode_count(), twice);
  }
  return out;
}

} // namespace banyan::cli

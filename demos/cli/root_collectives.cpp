#include "root_collectives.hpp"

#include <algorithm>
#include <cstdio>

#include "bench_reduce.hpp"

namespace banyan::cli {

nlohmann::json root_collectives::to_json() const {
  return {{"broadcasts", broadcasts},        {"broadcasts_exactly_once", broadcasts_once},
          {"reductions", reductions},        {"reductions_exactly_once", reductions_once},
          {"broadcast_ms_max", broadcast_ms_max}, {"reduction_ms_max", reduction_ms_max},
          {"ok", ok()}};
}

namespace {

constexpr std::size_t elements = 4;

/// How broadcast `id` was delivered: vnodes reached, vnodes reached more than once, and
/// the last delivery after its start.
struct delivery_count {
  std::size_t reached = 0, twice = 0;
  double last_ms = 0;
};

delivery_count count_deliveries(const actors::emulated_cluster& c, const wire::collective_id& id) {
  auto d = c.deliveries(id);
  delivery_count n;
  for (auto& [v, times] : d.delivered) {
    n.reached += times.empty() ? 0 : 1;
    n.twice += times.size() > 1 ? 1 : 0;
    for (auto t : times)
      n.last_ms = std::max(n.last_ms, to_ms(t - d.started));
  }
  return n;
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
    a.values = int32_contributions(elements, root);
    if (auto op = c.reduce(a)) {
      c.run_until_reduced(*op, limit); // (quiet too, as above)
      reduced.emplace_back(root, *op);
    }
  }
  const auto vnodes = c.vnode_count();
  for (auto& [root, op] : reduced) {
    auto rec = c.reduction(op);
    if (reduced_exactly_once(rec, vnodes,
                             int32_true_sum(static_cast<vnode_id>(vnodes), elements, root)) &&
        rec.results.front().at == root) {
      ++out.reductions_once;
      out.reduction_ms_max =
        std::max(out.reduction_ms_max, to_ms(rec.results.front().when - rec.started));
    } else {
      std::fprintf(stderr, "reduction to %u: not exactly once\n", root);
    }
  }
  // Judged once everything has run: a late duplicate would show here.
  for (auto& [root, id] : started) {
    auto d = count_deliveries(c, id);
    if (d.reached == vnodes && d.twice == 0) {
      ++out.broadcasts_once;
      out.broadcast_ms_max = std::max(out.broadcast_ms_max, d.last_ms);
      continue;
    }
    std::fprintf(stderr,
                 "broadcast from %u: not delivered exactly once (%zu of %zu vnodes delivered, "
                 "%zu more than once)\n",
                 root, d.reached, vnodes, d.twice);
  }
  return out;
}

} // namespace banyan::cli

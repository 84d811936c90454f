// The adaptive tree: what banyan's latency rule converges to on a latency matrix.

#include <algorithm>

#include "banyan/core/matrix_grid.hpp"
#include "banyan/core/tree_builders.hpp"

namespace banyan {

tree adaptive_tree(const cost_matrix& latency, proc_id root, std::uint64_t seed,
                   const supervisor_config& cfg) {
  if (latency.empty())
    return {};
  // A probe takes three round trips (ping, download, adopt) under one timeout; in a
  // grid that loses nothing a timeout only means "too slow", so leave room for them.
  double rtt_max = 0;
  for (std::size_t a = 0; a < latency.size(); ++a)
    for (std::size_t b = a + 1; b < latency.size(); ++b)
      rtt_max = std::max(rtt_max, latency[a][b] + latency[b][a]);
  auto run_cfg = cfg;
  run_cfg.probe_timeout = std::max(run_cfg.probe_timeout, from_ms(4 * rtt_max));
  matrix_grid grid(latency, seed, run_cfg);
  grid.start();
  grid.run();
  return grid.tree_of({root, tree_kind::latency});
}

} // namespace banyan

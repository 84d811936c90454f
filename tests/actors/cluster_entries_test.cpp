// Trees that enter each cluster once (docs/tree-protocol.md, "The rules"): entries per
// cluster after formation on small generated two-level topologies, in virtual time with
// fixed seeds.

#include <boost/test/unit_test.hpp>

#include <string>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/group_entries.hpp"
#include "banyan/core/topology_generator.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

/// `banyan topology generate --seed S --levels 2 --max-procs 40`: 9 to 34 processors in
/// 2 to 8 clusters, some of them of two or three processors.
topology two_levels(std::uint64_t seed) {
  topology_generator_options g;
  g.seed = seed;
  g.max_procs = 40;
  g.levels = 2;
  auto t = generate_topology(g);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

cluster_config formation(topology topo) {
  cluster_config cfg;
  cfg.topo = std::move(topo);
  cfg.seed = 1;
  cfg.clock = clock_mode::virtual_time;
  return cfg;
}

} // namespace

// Entries into clusters after formation on ten small generated two-level topologies
// (9-34 processors in 2-8 clusters; `banyan sim trees --topology T -q` on each). With
// (II-local) taking a LAN peer as far from the root as the prober (latency_rule.hpp),
// the latency trees enter each cluster once in 159 of the 217 trees, 25 of 27 on
// gen-6-2l-27p; with the strict condition 140 and 6 (there, pairs of a cluster's
// processors fed by one parent at one RTT kept their wide-area edges for good). The
// rest are not at the minimum: in nearly all of them the cluster's entrants never
// measured each other (a processor of a small cluster among many draws its peers late,
// or never, and takes the nearest remote cluster for its LAN), which this rule cannot
// help. So this asserts the floor the rules reach on these seeds, not the minimum.
BOOST_AUTO_TEST_CASE(latency_trees_enter_clusters_once_where_entrants_tie) {
  std::uint32_t minimal = 0, trees = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto topo = two_levels(seed);
    BOOST_TEST_CONTEXT("generated seed " << seed << " (" << topo.name << ")") {
      emulated_cluster c{formation(topo)};
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(120s));
      const auto live = c.monitor().live();
      std::uint32_t here = 0;
      for (auto r : c.monitor().roots()) {
        for (auto k : {tree_kind::latency, tree_kind::bandwidth})
          BOOST_TEST(!c.monitor().tree_of({r, k}).validate(live).has_value());
        auto t = c.monitor().tree_of({r, tree_kind::latency});
        here += count_group_entries(t, c.topo(), live).minimal() ? 1 : 0;
        ++trees;
      }
      if (seed == 6)
        BOOST_TEST(here >= 25u, here << " of 27 latency trees entry-minimal");
      minimal += here;
    }
  }
  BOOST_TEST(trees == 217u);
  BOOST_TEST(minimal >= 159u, minimal << " of " << trees << " latency trees entry-minimal");
}

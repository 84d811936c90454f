// The search for the LAN on demand (lan_search.hpp, supervisor_config::lan_search): the
// rule's arithmetic, and on a generated multi-cluster topology in virtual time, what it
// does to the trees of a few roots against the extra probes counted from the start and
// against every member rooting trees.

#include <boost/test/unit_test.hpp>

#include <cstdio>

#include "banyan/core/lan_search.hpp"
#include "banyan/core/topology_generator.hpp"
#include "core/supervisor_checks.hpp"

using namespace banyan;
using banyan::test::mini_grid;

BOOST_AUTO_TEST_CASE(searches_about_members_over_the_lan_size_found) {
  // Nothing measured as local yet (one class of RTTs): every member, once.
  BOOST_TEST(!lan_search_done(300, 150, 0));
  BOOST_TEST(!lan_search_done(300, 298, 0));
  BOOST_TEST(lan_search_done(300, 299, 0));
  // A pair (one local peer) among 300: half of the others.
  BOOST_TEST(!lan_search_done(300, 149, 1));
  BOOST_TEST(lan_search_done(300, 150, 1));
  // A LAN of 60 found in part (9 local peers) among 200: 20 distinct members.
  BOOST_TEST(!lan_search_done(200, 19, 9));
  BOOST_TEST(lan_search_done(200, 20, 9));
  // Alone, or with one other member: nothing to search.
  BOOST_TEST(lan_search_done(1, 0, 0));
  BOOST_TEST(lan_search_done(2, 1, 0));
}

namespace {

struct formed {
  double wan_edges = 0; ///< per latency tree of the roots measured
  double probes = 0;    ///< completed per processor
};

/// Forms the trees of `roots` (all: every member's, `roots` measured) on `topo`.
formed form(const topology& topo, const std::vector<proc_id>& roots, bool on_demand,
            bool lan_search) {
  supervisor_config cfg;
  if (on_demand) {
    cfg.tree_set = tree_set_mode::on_demand;
    cfg.retire_after = duration{0};
  }
  cfg.lan_search = lan_search;
  mini_grid g{topo, 1, cfg};
  g.start();
  if (on_demand)
    for (auto r : roots)
      g.prepare(r);
  g.run();
  BOOST_TEST_REQUIRE(!g.busy(), g.busy_report()); // every round of measuring ended
  const auto cluster = topo.cluster_of();
  const auto live = g.live();
  formed f;
  for (auto r : roots) {
    auto t = g.tree_of({r, tree_kind::latency});
    auto problem = t.validate(live);
    BOOST_TEST_REQUIRE(!problem.has_value(), problem.value_or(""));
    for (proc_id p = 0; p < topo.proc_count(); ++p)
      if (auto q = t.parent(p); q != no_proc && cluster[p] != cluster[q])
        f.wan_edges += 1;
  }
  f.wan_edges /= static_cast<double>(roots.size());
  std::uint64_t probes = 0;
  for (proc_id p = 0; p < topo.proc_count(); ++p)
    probes += g.sup(p)->probes_completed();
  f.probes = static_cast<double>(probes) / static_cast<double>(topo.proc_count());
  return f;
}

} // namespace

BOOST_AUTO_TEST_CASE(searching_for_the_lan_places_a_few_roots_trees_better) {
  for (std::uint64_t seed : {1, 2}) {
    topology_generator_options o;
    o.seed = seed;
    o.procs = 48;
    o.levels = 2;
    o.clusters = 12;
    auto topo = generate_topology(o);
    BOOST_TEST_REQUIRE(topo.has_value());
    const std::vector<proc_id> roots = {0, 24};
    auto searched = form(*topo, roots, true, true);
    auto counted = form(*topo, roots, true, false);
    auto every = form(*topo, roots, false, true);
    std::printf("seed %llu: WAN edges per latency tree %.1f searched, %.1f counted from the "
                "start, %.1f every root; probes per processor %.1f, %.1f, %.1f\n",
                static_cast<unsigned long long>(seed), searched.wan_edges, counted.wan_edges,
                every.wan_edges, searched.probes, counted.probes, every.probes);
    // Searching for the LAN places the trees better than counting the extra probes from
    // the start, and measures no more than every member rooting trees does.
    BOOST_TEST(searched.wan_edges < counted.wan_edges);
    BOOST_TEST(searched.probes > counted.probes);
    BOOST_TEST(searched.probes <= every.probes);
  }
}

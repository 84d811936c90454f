// The whole stack in virtual time: processor actors with their supervisors on the
// emulated wide-area network actor, on CAF's test coordinator. Deterministic.

#include <boost/test/unit_test.hpp>

#include <map>
#include <random>

#include "banyan/actors/emulated_cluster.hpp"
#include "actors/require_topology.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

using banyan::testing::require_topology;

cluster_config config(topology topo, std::uint64_t seed) {
  cluster_config cfg;
  cfg.topo = std::move(topo);
  cfg.seed = seed;
  cfg.clock = clock_mode::virtual_time;
  return cfg;
}

/// Every tree rooted at a live processor spans exactly the live processors, has no
/// cycle and is rooted at its root; the supervisors' own view agrees with the monitor.
void check_all_trees(const emulated_cluster& c) {
  auto live = c.monitor().live();
  std::size_t roots = 0;
  for (proc_id r = 0; r < live.size(); ++r) {
    if (!live[r])
      continue;
    ++roots;
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto t = c.monitor().tree_of({r, k});
      auto problem = t.validate(live);
      BOOST_TEST_REQUIRE(!problem.has_value(),
                         to_string(k) << " tree of " << r << ": " << problem.value_or(""));
      for (proc_id p = 0; p < live.size(); ++p)
        if (live[p])
          BOOST_TEST_REQUIRE(c.inspect(p)->parent({r, k}) == t.parent(p));
    }
  }
  BOOST_TEST(c.monitor().roots().size() == roots);
}

std::vector<std::vector<proc_id>> all_parents(const emulated_cluster& c) {
  std::vector<std::vector<proc_id>> result;
  for (auto r : c.monitor().roots())
    for (auto k : {tree_kind::latency, tree_kind::bandwidth})
      result.push_back(c.monitor().tree_of({r, k}).parents());
  return result;
}

double mean_cross_edges(const emulated_cluster& c, tree_kind k) {
  auto cl = c.topo().cluster_of();
  double sum = 0;
  auto roots = c.monitor().roots();
  for (auto r : roots)
    sum += static_cast<double>(c.monitor().tree_of({r, k}).cross_edges(cl));
  return sum / static_cast<double>(roots.size());
}

} // namespace

BOOST_AUTO_TEST_CASE(trees_form_and_the_cluster_goes_quiet) {
  emulated_cluster c{config(require_topology("tiny-2c8"), 1)};
  c.start();
  BOOST_TEST(c.run_until_quiet(60s));
  check_all_trees(c);
  BOOST_TEST(c.last_change().count() > 0);
  BOOST_TEST(c.net_stats().messages > 0u);
  BOOST_TEST(c.net_stats().dropped == 0u);
  // Quiet means quiet: nothing changes afterwards.
  auto before = all_parents(c);
  auto changes = c.monitor().parent_changes();
  c.run_until(c.elapsed() + 5s);
  BOOST_TEST(c.monitor().parent_changes() == changes);
  BOOST_TEST((all_parents(c) == before));
}

BOOST_AUTO_TEST_CASE(same_seed_gives_identical_trees) {
  auto run = [](std::uint64_t seed) {
    emulated_cluster c{config(require_topology("paper-4c160"), seed)};
    c.start();
    BOOST_REQUIRE(c.run_until_quiet(120s));
    return std::make_pair(all_parents(c), c.last_change());
  };
  auto a = run(7), b = run(7), other = run(8);
  BOOST_TEST((a.first == b.first));
  BOOST_TEST(a.second.count() == b.second.count());
  BOOST_TEST((a.first != other.first));
}

BOOST_AUTO_TEST_CASE(random_topologies_and_seeds_span_without_cycles) {
  std::mt19937 rng{11};
  for (int round = 0; round < 12; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      emulated_cluster c{config(test::random_topology(rng, 6), 100 + round)};
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(120s));
      check_all_trees(c);
    }
  }
}

BOOST_AUTO_TEST_CASE(paper_3c201_latency_trees_cross_clusters_rarely) {
  emulated_cluster c{config(require_topology("paper-3c201"), 1)};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(120s));
  check_all_trees(c);
  auto clusters = c.topo().clusters().size();
  auto wan = mean_cross_edges(c, tree_kind::latency);
  BOOST_TEST_MESSAGE("paper-3c201 latency trees: " << wan << " cross-cluster edges on average");
  BOOST_TEST(wan <= static_cast<double>(clusters - 1) + 2.0);
}

BOOST_AUTO_TEST_CASE(half_leave_and_rejoin_and_trees_span_the_live_processors_again) {
  emulated_cluster c{config(require_topology("paper-4c160"), 3)};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(120s));
  std::vector<proc_id> gone;
  for (proc_id p = 1; p < c.topo().proc_count(); p += 2) {
    BOOST_REQUIRE(!c.leave(p).has_value());
    gone.push_back(p);
  }
  BOOST_REQUIRE(c.run_until_quiet(120s));
  BOOST_TEST(c.monitor().live_count() == c.topo().proc_count() - gone.size());
  check_all_trees(c);
  // Every vnode is owned by a live processor, and every live processor agrees.
  auto live = c.monitor().live();
  for (proc_id p = 0; p < live.size(); ++p)
    if (live[p])
      for (vnode_id v = 0; v < c.topo().proc_count(); ++v) {
        auto owner = c.inspect(p)->routes().owner(v);
        BOOST_TEST_REQUIRE(owner < live.size());
        BOOST_TEST_REQUIRE(live[owner]);
        BOOST_TEST_REQUIRE(owner == c.inspect(0)->routes().owner(v));
      }
  for (auto p : gone)
    BOOST_REQUIRE(!c.join(p, p - 1, vnode_set{p}).has_value());
  BOOST_REQUIRE(c.run_until_quiet(120s));
  BOOST_TEST(c.monitor().live_count() == c.topo().proc_count());
  check_all_trees(c);
  for (proc_id p = 0; p < c.topo().proc_count(); ++p)
    BOOST_TEST((c.inspect(p)->own_vnodes() == vnode_set{p}));
}

// A processor that leaves and joins again keeps what it measured (remember_paths), in
// the emulated cluster as in banyan::node, whose supervisor outlives the leave: the new
// incarnation recalls its predecessor's memory (supervisor::recall_paths). With no
// extra measurements the rejoiner measures next to nothing itself, so without the
// recall it knew only its giver: its LAN-only probing round then re-measured the giver
// again and again (paper-4c160, seed 18: 390 of 1012 rejoiners' probes went to their
// own giver).
BOOST_AUTO_TEST_CASE(a_rejoining_incarnation_recalls_what_its_predecessor_measured) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      auto cfg = config(require_topology("tiny-2c8"), seed);
      cfg.sup.extra_measurements = 0;
      emulated_cluster c{cfg};
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(60s));
      const proc_id p = 3;
      std::map<proc_id, duration> before;
      for (proc_id q = 0; q < c.topo().proc_count(); ++q)
        if (auto rtt = c.inspect(p)->measured_rtt(q); q != p && rtt)
          before[q] = *rtt;
      BOOST_TEST_REQUIRE(before.size() >= 3u); // it had measured much of the grid
      BOOST_REQUIRE(!c.leave(p).has_value());
      BOOST_REQUIRE(c.run_until_quiet(60s));
      BOOST_REQUIRE(!c.join(p, 0, vnode_set{p}).has_value());
      BOOST_REQUIRE(c.run_until_quiet(60s));
      check_all_trees(c);
      auto* again = c.inspect(p);
      BOOST_TEST_REQUIRE(again->probes_completed() < before.size()); // not all measured anew
      for (auto [q, rtt] : before) {
        auto now = again->measured_rtt(q);
        BOOST_TEST_REQUIRE(now.has_value(), p << " forgot its RTT to " << q);
        BOOST_TEST((*now <= rtt));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_api_calls_are_refused_with_a_reason) {
  emulated_cluster c{config(require_topology("tiny-2c8"), 1)};
  cluster_config cfg = config(require_topology("tiny-2c8"), 1);
  cfg.initial = 6;
  emulated_cluster d{cfg};
  d.start();
  auto e1 = d.join(3, 0); // already running
  BOOST_REQUIRE(e1.has_value());
  BOOST_TEST((e1->code == errc::invalid_argument));
  auto e2 = d.join(99, 0); // not a slot of the topology
  BOOST_REQUIRE(e2.has_value());
  auto e3 = d.join(6, 7); // contact not running
  BOOST_REQUIRE(e3.has_value());
  BOOST_TEST((e3->code == errc::unknown_peer));
  auto e4 = d.leave(7); // not running
  BOOST_REQUIRE(e4.has_value());
  BOOST_TEST(d.run_until_quiet(60s));
  check_all_trees(d);
}

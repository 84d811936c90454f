#include "banyan/core/tree_builders.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "banyan/core/matrix_grid.hpp"

using namespace banyan;

namespace {

constexpr proc_id none = no_proc;

std::vector<bool> all_members(std::size_t n) {
  return std::vector<bool>(n, true);
}

void require_spanning(const tree& t, std::size_t n) {
  auto problem = t.validate(all_members(n));
  BOOST_TEST_REQUIRE(!problem.has_value(), problem.value_or(""));
}

/// Paper 001, Fig. 1: one-way latencies between the sites A..H (0..7), row = sender.
const cost_matrix hlot_paper = {
  {0, 400, 800, 420, 520, 500, 800, 150},    // A
  {430, 0, 200, 450, 700, 540, 700, 370},    // B
  {700, 250, 0, 500, 870, 850, 700, 600},    // C
  {400, 450, 500, 0, 500, 950, 1300, 780},   // D
  {500, 670, 800, 500, 0, 500, 700, 520},    // E
  {580, 550, 850, 800, 500, 0, 280, 480},    // F
  {920, 700, 700, 1260, 720, 300, 0, 200},   // G
  {300, 520, 600, 800, 550, 320, 200, 0},    // H
};
enum site : proc_id { A, B, C, D, E, F, G, H };

/// A random grid: `clusters` clusters of `per` processors, 0.1-0.5 ms inside, 5-60 ms
/// between clusters (asymmetric), bandwidths 100 MB/s inside and 0.2-5 MB/s between.
struct random_grid {
  cost_matrix latency, bandwidth;
};
random_grid make_grid(std::size_t clusters, std::size_t per, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> lan(0.1, 0.5), wan(5, 60), wan_bw(0.2e6, 5e6);
  auto n = clusters * per;
  random_grid g{cost_matrix(n, std::vector<double>(n, 0)),
                cost_matrix(n, std::vector<double>(n, 0))};
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      bool same = a / per == b / per;
      g.latency[a][b] = same ? lan(rng) : wan(rng);
      g.bandwidth[a][b] = same ? 100e6 : wan_bw(rng);
    }
  return g;
}

} // namespace

BOOST_AUTO_TEST_SUITE(fixed_shapes)

BOOST_AUTO_TEST_CASE(binomial_eight_root_zero) {
  auto t = binomial_tree(8, 0);
  // 0 -> 1, 2, 4;  2 -> 3;  4 -> 5, 6;  6 -> 7
  std::vector<proc_id> want{none, 0, 0, 2, 0, 4, 4, 6};
  BOOST_TEST(t.root() == 0u);
  BOOST_TEST(t.parents() == want);
  BOOST_TEST(t.depth_max() == 3);
}

BOOST_AUTO_TEST_CASE(binomial_eight_root_three) {
  auto t = binomial_tree(8, 3);
  // relative ranks: proc p has r = (p - 3 + 8) % 8; r's parent clears its lowest bit
  //   4(r1)->3  5(r2)->3  6(r3)->5  7(r4)->3  0(r5)->7  1(r6)->7  2(r7)->1
  std::vector<proc_id> want{7, 7, 1, none, 3, 3, 5, 3};
  BOOST_TEST(t.root() == 3u);
  BOOST_TEST(t.parents() == want);
  require_spanning(t, 8);
}

BOOST_AUTO_TEST_CASE(binomial_small_and_odd_sizes) {
  BOOST_TEST(binomial_tree(0, 0).size() == 0u);
  BOOST_TEST(binomial_tree(1, 0).parents() == std::vector<proc_id>{none});
  // n = 6, root 4: relative ranks 4:0 5:1 0:2 1:3 2:4 3:5
  std::vector<proc_id> want{4, 0, 4, 2, none, 4};
  BOOST_TEST(binomial_tree(6, 4).parents() == want);
  for (std::size_t n = 1; n <= 33; ++n)
    for (proc_id r : {proc_id{0}, static_cast<proc_id>(n - 1), static_cast<proc_id>(n / 2)}) {
      auto t = binomial_tree(n, r);
      require_spanning(t, n);
      // relative rank r sits at depth popcount(r): the deepest is the largest popcount
      int deepest = 0;
      for (std::size_t rel = 0; rel < n; ++rel)
        deepest = std::max(deepest, __builtin_popcountll(rel));
      BOOST_TEST(t.depth_max() == deepest);
    }
}

BOOST_AUTO_TEST_CASE(flat) {
  std::vector<proc_id> want{2, 2, none, 2};
  BOOST_TEST(flat_tree(4, 2).parents() == want);
  BOOST_TEST(flat_tree(4, 2).root() == 2u);
}

BOOST_AUTO_TEST_CASE(chain_follows_the_order) {
  auto t = chain_tree({2, 0, 3, 1});
  std::vector<proc_id> want{2, 3, none, 0};
  BOOST_TEST(t.root() == 2u);
  BOOST_TEST(t.parents() == want);
  BOOST_TEST(t.depth_max() == 3);
}

BOOST_AUTO_TEST_CASE(widest_chain_escapes_the_greedy_trap) {
  // Greedy from 0 takes 0->1 (10) and then is stuck with 1's narrow links (1).
  // The best order is 0, 2, 3, 1 (links 9, 8, 8).
  cost_matrix bw = {
    {0, 10, 9, 1},
    {1, 0, 1, 1},
    {1, 8, 0, 8},
    {1, 8, 1, 0},
  };
  auto order = widest_chain(bw, 0);
  BOOST_TEST(order == (std::vector<proc_id>{0, 2, 3, 1}));
  BOOST_TEST(chain_bottleneck(order, bw) == 8.0);
  BOOST_TEST(chain_bottleneck({0, 1, 2, 3}, bw) == 1.0);
  // Direction matters: the reverse of the chosen order is narrow.
  BOOST_TEST(chain_bottleneck({1, 3, 2, 0}, bw) == 1.0);
}

BOOST_AUTO_TEST_CASE(widest_chain_matches_brute_force_on_small_grids) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    auto g = make_grid(seed % 2 == 0 ? 2 : 3, seed % 2 == 0 ? 4 : 3, seed);
    const auto n = g.bandwidth.size();
    proc_id root = seed % n;
    auto order = widest_chain(g.bandwidth, root);
    BOOST_TEST_REQUIRE(order.size() == n);
    BOOST_TEST(order.front() == root);
    require_spanning(chain_tree(order), n);
    // every order that starts at the root
    std::vector<proc_id> rest;
    for (proc_id p = 0; p < n; ++p)
      if (p != root)
        rest.push_back(p);
    double best = 0;
    do {
      std::vector<proc_id> o{root};
      o.insert(o.end(), rest.begin(), rest.end());
      best = std::max(best, chain_bottleneck(o, g.bandwidth));
    } while (std::next_permutation(rest.begin(), rest.end()));
    BOOST_TEST(chain_bottleneck(order, g.bandwidth) == best);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(paper_001_example)

// Fig. 2 of paper 001 gives each tree's total time on the 8-site matrix.

BOOST_AUTO_TEST_CASE(binomial_total_1420) {
  auto t = binomial_tree(8, A);
  BOOST_TEST(completion_time(t, hlot_paper) == 1420.0); // A -> E -> G -> H
}

BOOST_AUTO_TEST_CASE(flat_total_800) {
  BOOST_TEST(completion_time(flat_tree(8, A), hlot_paper) == 800.0);
}

BOOST_AUTO_TEST_CASE(mst_is_fig_2b_total_1150) {
  auto t = mst_tree(hlot_paper, A);
  //                          A     B  C  D  E  F  G  H
  std::vector<proc_id> want{none, A, B, A, F, G, H, A};
  BOOST_TEST(t.parents() == want);
  BOOST_TEST(completion_time(t, hlot_paper) == 1150.0); // A -> H -> G -> F -> E
}

BOOST_AUTO_TEST_CASE(hlot_is_fig_2d_total_600) {
  auto t = hlot_tree(hlot_paper, A);
  // A sends to B, D, E and H directly; H relays to F (150 + 320 < 500) and G
  // (150 + 200 < 800); B relays to C (400 + 200 < 800).
  std::vector<proc_id> want{none, A, B, A, A, H, H, A};
  BOOST_TEST(t.parents() == want);
  auto arrival = arrival_times(t, hlot_paper);
  std::vector<double> want_arrival{0, 400, 600, 420, 520, 470, 350, 150};
  BOOST_TEST(arrival == want_arrival, boost::test_tools::per_element());
  BOOST_TEST(completion_time(t, hlot_paper) == 600.0);
}

BOOST_AUTO_TEST_CASE(shortest_paths_bound_every_arrival) {
  // A -> H -> G, A -> H -> F and A -> B -> C are shorter than the direct links; on
  // this matrix HLOT meets the bound at every site.
  std::vector<double> want{0, 400, 600, 420, 520, 470, 350, 150};
  BOOST_TEST(shortest_path_latencies(hlot_paper, A) == want, boost::test_tools::per_element());
  BOOST_TEST(farthest_shortest_path(hlot_paper, A) == 600.0);
  auto binomial = arrival_times(binomial_tree(8, A), hlot_paper);
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(binomial[p] >= want[p]);
}

BOOST_AUTO_TEST_CASE(hlot_never_later_than_direct) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    auto g = make_grid(3, 4, seed);
    for (proc_id root : {0u, 6u}) {
      auto t = hlot_tree(g.latency, root);
      require_spanning(t, 12);
      auto arrival = arrival_times(t, g.latency);
      for (proc_id p = 0; p < 12; ++p)
        BOOST_TEST(arrival[p] <= g.latency[root][p] + 1e-9);
    }
  }
}

BOOST_AUTO_TEST_CASE(mst_spans_random_grids_with_one_link_into_each_cluster) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    auto g = make_grid(3, 4, seed);
    auto t = mst_tree(g.latency, 5);
    require_spanning(t, 12);
    std::vector<int> cluster;
    for (int p = 0; p < 12; ++p)
      cluster.push_back(p / 4);
    // LAN links are all cheaper than WAN links, so Prim crosses into a cluster once.
    BOOST_TEST(t.cross_edges(cluster) == 2u);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cluster_shapes)

BOOST_AUTO_TEST_CASE(magpie_two_clusters) {
  std::vector<int> cluster{0, 0, 0, 0, 1, 1, 1, 1};
  auto t = magpie_tree(8, 1, cluster);
  // Root 1 coordinates cluster 0: binomial over [0 1 2 3] from 1 (2, 3 under 1; 0 under
  // 3); cluster 1's coordinator is 4, the WAN hop 1 -> 4; binomial over [4 5 6 7].
  std::vector<proc_id> want{3, none, 1, 1, 1, 4, 4, 6};
  BOOST_TEST(t.parents() == want);
  BOOST_TEST(t.cross_edges(cluster) == 1u);
}

BOOST_AUTO_TEST_CASE(magpie_given_coordinator) {
  std::vector<int> cluster{0, 0, 0, 0, 1, 1, 1, 1};
  auto t = magpie_tree(8, 1, cluster, {6});
  // cluster 1 from 6: relative ranks 6:0 7:1 4:2 5:3
  std::vector<proc_id> want{3, none, 1, 1, 6, 4, 1, 6};
  BOOST_TEST(t.parents() == want);
  // A coordinator named for the root's own cluster is ignored: the root coordinates it.
  BOOST_TEST(magpie_tree(8, 1, cluster, {0}).parents() == magpie_tree(8, 1, cluster).parents());
}

BOOST_AUTO_TEST_CASE(magpie_interleaved_cluster_ids) {
  std::vector<int> cluster{7, 3, 7, 3, 7, 3};
  auto t = magpie_tree(6, 0, cluster);
  std::vector<proc_id> want{none, 0, 0, 1, 0, 1};
  BOOST_TEST(t.parents() == want);
}

BOOST_AUTO_TEST_CASE(multilevel_two_sites_two_machines) {
  // site, machine
  std::vector<std::vector<int>> levels{{0, 0}, {0, 0}, {0, 1}, {0, 1},
                                       {1, 0}, {1, 0}, {1, 1}, {1, 1}};
  // Root 0: 0 -> 4 (site masters); 0 -> 2, 4 -> 6 (machine masters); then binomial.
  std::vector<proc_id> from0{none, 0, 0, 2, 0, 4, 4, 6};
  BOOST_TEST(multilevel_tree(0, levels).parents() == from0);
  // Root 5 stands in for the master of its site and of its machine.
  std::vector<proc_id> from5{5, 0, 0, 2, 5, none, 5, 6};
  auto t = multilevel_tree(5, levels);
  BOOST_TEST(t.parents() == from5);
  std::vector<int> site{0, 0, 0, 0, 1, 1, 1, 1};
  BOOST_TEST(t.cross_edges(site) == 1u);
}

BOOST_AUTO_TEST_CASE(multilevel_groups_are_read_within_their_parent_group) {
  // Machine ids repeat across sites: "machine 0" of site 0 and of site 1 differ.
  // Site 1's machine 0 has three processors: a binomial tree of 3.
  std::vector<std::vector<int>> levels{{0, 0}, {0, 1}, {1, 0}, {1, 0}, {1, 0}};
  std::vector<proc_id> want{none, 0, 0, 2, 2};
  BOOST_TEST(multilevel_tree(0, levels).parents() == want);
}

BOOST_AUTO_TEST_CASE(multilevel_without_levels_is_binomial) {
  std::vector<std::vector<int>> none_levels(8);
  BOOST_TEST(multilevel_tree(3, none_levels).parents() == binomial_tree(8, 3).parents());
  // One level equals MagPIe with lowest-id coordinators.
  std::vector<std::vector<int>> one{{0}, {1}, {0}, {1}, {1}, {0}};
  std::vector<int> cluster{0, 1, 0, 1, 1, 0};
  BOOST_TEST(multilevel_tree(2, one).parents() == magpie_tree(6, 2, cluster).parents());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(postal_model)

BOOST_AUTO_TEST_CASE(completion_by_hand) {
  cost_matrix lat = {
    {0, 5, 9},
    {7, 0, 2},
    {4, 6, 0},
  };
  auto chain = chain_tree({0, 1, 2});
  BOOST_TEST(arrival_times(chain, lat) == (std::vector<double>{0, 5, 7}),
             boost::test_tools::per_element());
  BOOST_TEST(completion_time(chain, lat) == 7.0);
  BOOST_TEST(completion_time(flat_tree(3, 0), lat) == 9.0);
  BOOST_TEST(completion_time(flat_tree(3, 2), lat) == 6.0);
  // Latencies are directed: parent -> child.
  BOOST_TEST(completion_time(chain_tree({1, 0, 2}), lat) == 16.0);
  BOOST_TEST(completion_time(chain_tree({2, 1, 0}), lat) == 13.0);
}

BOOST_AUTO_TEST_CASE(absent_processors_are_left_out) {
  cost_matrix lat = {{0, 1, 50}, {1, 0, 50}, {50, 50, 0}};
  tree t(0, {none, 0, none}); // processor 2 is not a member
  auto arrival = arrival_times(t, lat);
  BOOST_TEST(arrival[1] == 1.0);
  BOOST_TEST(std::isinf(arrival[2]));
  BOOST_TEST(completion_time(t, lat) == 1.0);
  BOOST_TEST(completion_time(tree{}, lat) == 0.0);
}

BOOST_AUTO_TEST_CASE(overhead_sends_bigger_subtrees_first) {
  // 0 -> 1 (leaf, 2 ms), 0 -> 2 (5 ms) -> 3 (3 ms)
  cost_matrix lat(4, std::vector<double>(4, 100));
  lat[0][1] = 2;
  lat[0][2] = 5;
  lat[2][3] = 3;
  tree t(0, {none, 0, 0, 2});
  BOOST_TEST(send_order(t)[0] == (std::vector<proc_id>{2, 1}));
  // o = 1: 2 leaves at 1, arrives 6; 1 leaves at 2, arrives 4; 3 arrives 6 + 1 + 3.
  auto arrival = arrival_times_with_overhead(t, lat, 1.0);
  BOOST_TEST(arrival == (std::vector<double>{0, 4, 6, 10}), boost::test_tools::per_element());
  BOOST_TEST(completion_time_with_overhead(t, lat, 1.0) == 10.0);
  BOOST_TEST(completion_time_with_overhead(t, lat, 0.0) == completion_time(t, lat));
  BOOST_TEST(completion_time(t, lat) == 8.0);
  // Flat over the paper's matrix, o = 10: the i-th send leaves at 10 (i + 1).
  // B 410, C 820, D 450, E 560, F 550, G 860, H 220.
  BOOST_TEST(completion_time_with_overhead(flat_tree(8, A), hlot_paper, 10.0) == 860.0);
}

BOOST_AUTO_TEST_CASE(bandwidth_serializes_each_senders_link) {
  cost_matrix lat(4, std::vector<double>(4, 100));
  lat[0][1] = 2;
  lat[0][2] = 5;
  lat[2][3] = 3;
  cost_matrix bw(4, std::vector<double>(4, 1e6)); // 1000 bytes take 1 ms
  tree t(0, {none, 0, 0, 2});
  // 2 first (5 + its subtree's 1 + 3 > 2): 2 at 1 + 5 = 6; 1 at 2 + 2 = 4; 3 at 6 + 1 + 3.
  auto arrival = arrival_times_with_bandwidth(t, lat, bw, 1000);
  BOOST_TEST(arrival == (std::vector<double>{0, 4, 6, 10}), boost::test_tools::per_element());
  BOOST_TEST(completion_time_with_bandwidth(t, lat, bw, 1000) == 10.0);
  // Slower link to 1 (2 ms per 1000 bytes): 1 arrives at 1 + 2 + 2.
  bw[0][1] = 0.5e6;
  BOOST_TEST(arrival_times_with_bandwidth(t, lat, bw, 1000)[1] == 5.0);
  // Without bandwidths (or bytes) it is the plain postal model.
  BOOST_TEST(completion_time_with_bandwidth(t, lat, {}, 1000) == 8.0);
  BOOST_TEST(completion_time_with_bandwidth(t, lat, bw, 0) == 8.0);
  // A link without bandwidth cannot carry the message.
  bw[2][3] = 0;
  BOOST_TEST(std::isinf(completion_time_with_bandwidth(t, lat, bw, 1000)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(simulated_annealing)

BOOST_AUTO_TEST_CASE(deterministic_for_a_seed) {
  auto g = make_grid(2, 5, 3);
  auto a = sa_tree(g.latency, g.bandwidth, 0, 1e6, 42);
  auto b = sa_tree(g.latency, g.bandwidth, 0, 1e6, 42);
  require_spanning(a, 10);
  BOOST_TEST(a.parents() == b.parents());
  BOOST_TEST(a.root() == 0u);
}

BOOST_AUTO_TEST_CASE(never_worse_than_its_starting_trees) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    auto g = make_grid(3, 3, seed);
    for (double bytes : {1.0, 1e6}) {
      proc_id root = seed % 9;
      auto t = sa_tree(g.latency, g.bandwidth, root, bytes, seed);
      require_spanning(t, 9);
      auto cost = completion_time_with_bandwidth(t, g.latency, g.bandwidth, bytes);
      for (const auto& start : {flat_tree(9, root), binomial_tree(9, root),
                                mst_tree(g.latency, root), hlot_tree(g.latency, root)})
        BOOST_TEST(cost <= completion_time_with_bandwidth(start, g.latency, g.bandwidth, bytes));
    }
  }
}

BOOST_AUTO_TEST_CASE(reaches_the_optimum_on_the_paper_example) {
  // No tree can beat 600: C is 600 away from A however the message travels.
  auto t = sa_tree(hlot_paper, {}, A, 1, 1);
  BOOST_TEST(completion_time(t, hlot_paper) == 600.0);
}

BOOST_AUTO_TEST_CASE(finds_relaying_when_the_root_link_is_slow) {
  // The root pushes 1 MB at 1 MB/s (1 s per send); the others exchange it at 100 MB/s.
  // All latencies are 1 ms, so flat, MST and HLOT are all the flat tree (5 sends from
  // the root, ~5 s) and binomial sends 3 times from the root (~3 s). Sending once and
  // letting a relay fan out takes ~1.05 s.
  const std::size_t n = 6;
  cost_matrix lat(n, std::vector<double>(n, 1)), bw(n, std::vector<double>(n, 100e6));
  for (std::size_t p = 0; p < n; ++p)
    bw[0][p] = 1e6;
  double best_start = std::numeric_limits<double>::infinity();
  for (const auto& s : {flat_tree(n, 0), binomial_tree(n, 0), mst_tree(lat, 0), hlot_tree(lat, 0)})
    best_start = std::min(best_start, completion_time_with_bandwidth(s, lat, bw, 1e6));
  BOOST_TEST(best_start > 2900.0);
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    auto t = sa_tree(lat, bw, 0, 1e6, seed);
    require_spanning(t, n);
    BOOST_TEST(t.children()[0].size() == 1u);
    BOOST_TEST(completion_time_with_bandwidth(t, lat, bw, 1e6) < 1100.0);
  }
}

BOOST_AUTO_TEST_CASE(pools_above_sixteen_processors) {
  auto g = make_grid(3, 6, 11); // 18 processors: the pooled search
  auto t = sa_tree(g.latency, g.bandwidth, 7, 64e3, 5);
  require_spanning(t, 18);
  BOOST_TEST(t.parents() == sa_tree(g.latency, g.bandwidth, 7, 64e3, 5).parents());
  auto cost = completion_time_with_bandwidth(t, g.latency, g.bandwidth, 64e3);
  for (const auto& start : {flat_tree(18, 7), binomial_tree(18, 7), mst_tree(g.latency, 7),
                            hlot_tree(g.latency, 7)})
    BOOST_TEST(cost <= completion_time_with_bandwidth(start, g.latency, g.bandwidth, 64e3));
}

BOOST_AUTO_TEST_CASE(tiny_inputs) {
  BOOST_TEST(sa_tree({}, {}, 0, 1, 1).size() == 0u);
  BOOST_TEST(sa_tree({{0}}, {}, 0, 1, 1).parents() == std::vector<proc_id>{none});
  BOOST_TEST(sa_tree({{0, 3}, {3, 0}}, {}, 1, 1, 1).parents() == (std::vector<proc_id>{1, none}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(adaptive)

BOOST_AUTO_TEST_CASE(matrix_grid_runs_to_quiescence) {
  auto g = make_grid(2, 4, 2);
  matrix_grid grid(g.latency, 9);
  grid.start();
  grid.run();
  BOOST_TEST(grid.quiet());
  BOOST_TEST(!grid.busy());
  BOOST_TEST(grid.messages() > 0u);
  auto trees = grid.trees(tree_kind::latency);
  BOOST_TEST_REQUIRE(trees.size() == 8u);
  for (proc_id r = 0; r < 8; ++r) {
    BOOST_TEST(trees[r].root() == r);
    require_spanning(trees[r], 8);
  }
  // Measured RTTs are the sum of both one-way latencies.
  for (proc_id q = 1; q < 8; ++q) {
    auto rtt = grid.sup(0).measured_rtt(q);
    if (rtt)
      BOOST_TEST(std::abs(to_ms(*rtt) - (g.latency[0][q] + g.latency[q][0])) < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(adaptive_tree_is_deterministic_and_spans) {
  auto g = make_grid(3, 4, 4);
  auto a = adaptive_tree(g.latency, 5, 3);
  require_spanning(a, 12);
  BOOST_TEST(a.root() == 5u);
  BOOST_TEST(a.parents() == adaptive_tree(g.latency, 5, 3).parents());
}

BOOST_AUTO_TEST_CASE(adaptive_tree_reaches_processors_seconds_away) {
  // RTTs up to 2.56 s, beyond the default probe timeout of 1 s: without a longer one
  // the far sites would stay orphans.
  for (proc_id root : {A, D, G}) {
    auto t = adaptive_tree(hlot_paper, root, 1);
    require_spanning(t, 8);
  }
}

BOOST_AUTO_TEST_CASE(adaptive_tree_crosses_into_each_cluster_about_once) {
  // banyan's latency rule keeps LAN neighbours together: with 3 clusters the tree
  // should not cross the wide area much more than the 2 times a MagPIe tree does.
  std::vector<int> cluster;
  for (int p = 0; p < 12; ++p)
    cluster.push_back(p / 4);
  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    auto g = make_grid(3, 4, seed);
    auto t = adaptive_tree(g.latency, 0, seed);
    require_spanning(t, 12);
    BOOST_TEST(t.cross_edges(cluster) <= 3u);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The long-message ceilings (maximum flows through the emulated network's resources) on
// topologies small enough to work out by hand, and the short-message oracles.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "banyan/core/static_tree_oracle.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology_generator.hpp"

using namespace banyan;

namespace {

topology parse_ok(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

/// A generated topology of at most 40 processors.
topology generated(std::uint64_t seed) {
  topology_generator_options o;
  o.seed = seed;
  o.max_procs = 40;
  auto t = generate_topology(o);
  BOOST_REQUIRE(t);
  return std::move(t).value();
}

constexpr double mbit = 1e6 / 8;

} // namespace

BOOST_AUTO_TEST_SUITE(stream_ceiling_suite)

BOOST_AUTO_TEST_CASE(one_wan_link_is_the_ceiling_of_two_clusters) {
  auto t = parse_ok("send_overhead 20us\ndefault nic 1Gbit\ngroup A procs 4 rtt 0.2ms\n"
                    "group B procs 4 rtt 0.2ms\nlink A B rtt 2ms bw 100Mbit\n");
  auto c = broadcast_ceiling(t, 0);
  BOOST_CHECK_CLOSE(c.ceiling, 100 * mbit, 1e-6);
  BOOST_CHECK_EQUAL(c.bottleneck, 4u);
  BOOST_CHECK_CLOSE(c.per_proc[1], 1000 * mbit, 1e-6); // a LAN peer: the NICs
  BOOST_CHECK(std::isinf(c.per_proc[0]));
  BOOST_CHECK_CLOSE(reduce_ceiling(t, 0).ceiling, 100 * mbit, 1e-6);
}

BOOST_AUTO_TEST_CASE(a_cluster_alone_is_limited_by_the_nics) {
  auto t = parse_ok("default nic 1Gbit\ngroup A procs 5 rtt 0.2ms\n");
  BOOST_CHECK_CLOSE(broadcast_ceiling(t, 2).ceiling, 1000 * mbit, 1e-6);
  auto free = parse_ok("group A procs 3 rtt 0.2ms\n");
  BOOST_CHECK(std::isinf(broadcast_ceiling(free, 0).ceiling));
}

BOOST_AUTO_TEST_CASE(relays_add_to_a_narrow_direct_link) {
  // Into C: the direct 10 Mbit plus 100 relayed by B's processors (and into B, 100 plus
  // 10 relayed by C's).
  auto t = parse_ok("default nic 1Gbit\ngroup A procs 2 rtt 0.2ms\ngroup B procs 2 rtt 0.2ms\n"
                    "group C procs 2 rtt 0.2ms\nlink A B rtt 2ms bw 100Mbit\n"
                    "link B C rtt 2ms bw 100Mbit\nlink A C rtt 9ms bw 10Mbit\n");
  auto c = broadcast_ceiling(t, 0);
  BOOST_CHECK_CLOSE(c.per_proc[4], 110 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(c.per_proc[2], 110 * mbit, 1e-6); // and into B through C the same way
  BOOST_CHECK_CLOSE(c.ceiling, 110 * mbit, 1e-6);
  // One tree takes one path into C: the relayed 100 Mbit, not the sum.
  auto one = broadcast_tree_ceiling(t, 0);
  BOOST_CHECK_CLOSE(one.per_proc[4], 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(one.per_proc[1], 1000 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(one.ceiling, 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(reduce_tree_ceiling(t, 0).ceiling, 100 * mbit, 1e-6);
}

BOOST_AUTO_TEST_CASE(directions_and_shared_uplinks_count) {
  auto t = parse_ok("default nic 1Gbit\ngroup A procs 2 rtt 0.2ms\ngroup B procs 2 rtt 0.2ms\n"
                    "link A B rtt 2ms bw 100Mbit/10Mbit\n");
  BOOST_CHECK_CLOSE(broadcast_ceiling(t, 0).ceiling, 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(reduce_ceiling(t, 0).ceiling, 10 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(broadcast_tree_ceiling(t, 0).ceiling, 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(reduce_tree_ceiling(t, 0).ceiling, 10 * mbit, 1e-6);
  // Two machines of four processes behind 100 Mbit uplinks on a non-blocking LAN.
  auto m = parse_ok("default nic 10Gbit\ngroup S rtt 0.3ms\n"
                    "group m1 in S procs 4 rtt 0.01ms uplink 100Mbit\n"
                    "group m2 in S procs 4 rtt 0.01ms uplink 100Mbit\n");
  auto c = broadcast_ceiling(m, 0);
  BOOST_CHECK_CLOSE(c.ceiling, 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(c.per_proc[1], 10000 * mbit, 1e-6);
}

BOOST_AUTO_TEST_CASE(a_tree_shares_its_resources_and_never_beats_the_ceiling) {
  auto t = parse_ok("default nic 1Gbit\ngroup A procs 4 rtt 0.2ms\ngroup B procs 4 rtt 0.2ms\n"
                    "link A B rtt 2ms bw 100Mbit\n");
  BOOST_CHECK_CLOSE(tree_stream_rate(t, flat_tree(8, 0)), 25 * mbit, 1e-6); // 4 edges on A->B
  BOOST_CHECK_CLOSE(tree_stream_rate(t, magpie_tree(8, 0, t.cluster_of())), 100 * mbit, 1e-6);
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const auto g = generated(seed);
    const auto n = g.proc_count();
    const auto ceiling = broadcast_ceiling(g, 0).ceiling;
    const auto one_tree = broadcast_tree_ceiling(g, 0).ceiling;
    BOOST_CHECK_LE(one_tree, ceiling * (1 + 1e-9));
    BOOST_CHECK_LE(reduce_tree_ceiling(g, 0).ceiling, reduce_ceiling(g, 0).ceiling * (1 + 1e-9));
    for (const auto& tr : {flat_tree(n, 0), binomial_tree(n, 0), magpie_tree(n, 0, g.cluster_of()),
                           multilevel_tree(0, group_levels(g))})
      BOOST_CHECK_LE(tree_stream_rate(g, tr), one_tree * (1 + 1e-9));
  }
}

BOOST_AUTO_TEST_CASE(a_tree_that_shares_nothing_reaches_the_tree_ceiling) {
  // The chain 0 -> 1 -> 2 -> 3 crosses A->B once and every NIC serves one child: its
  // rate is the link's, which is the tree ceiling, so there the bound is tight.
  auto t = parse_ok("default nic 1Gbit\ngroup A procs 2 rtt 0.2ms\ngroup B procs 2 rtt 0.2ms\n"
                    "link A B rtt 2ms bw 100Mbit\n");
  BOOST_CHECK_CLOSE(tree_stream_rate(t, chain_tree({0, 1, 2, 3})), 100 * mbit, 1e-6);
  BOOST_CHECK_CLOSE(broadcast_tree_ceiling(t, 0).ceiling, 100 * mbit, 1e-6);
}

BOOST_AUTO_TEST_CASE(short_message_bound_counts_a_send_overhead_per_hop) {
  auto t = parse_ok("send_overhead 20us\ndefault nic 1Gbit\ngroup A procs 4 rtt 0.2ms\n"
                    "group B procs 4 rtt 0.2ms\nlink A B rtt 2ms bw 100Mbit\n");
  BOOST_CHECK_CLOSE(short_message_bound(t, 0), 1.02, 1e-6);
  auto d = short_message_bounds(t, 0);
  BOOST_CHECK_CLOSE(d[1], 0.12, 1e-6);
  BOOST_CHECK_EQUAL(d[0], 0.0);
}

BOOST_AUTO_TEST_CASE(the_best_static_tree_beats_every_candidate_and_no_tree_beats_the_bound) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const auto t = generated(seed);
    auto r = best_static_tree(t, 0, 1);
    const double bound = short_message_bound(t, 0);
    BOOST_TEST_CONTEXT(t.name) {
      BOOST_CHECK_GE(r.candidates.size(), 7u);
      for (const auto& c : r.candidates) {
        BOOST_CHECK(!c.t.validate(std::vector<bool>(t.proc_count(), true)));
        BOOST_CHECK_LE(r.winner().completion_ms, c.completion_ms + 1e-9);
        BOOST_CHECK_GE(c.completion_ms, bound - 1e-9);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

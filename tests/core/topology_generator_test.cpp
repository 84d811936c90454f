// Generated topologies: pinned output for a seed, the options respected, and the
// distribution covering what it promises (docs/topology.md, "Generated topologies").

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "banyan/core/topology_generator.hpp"

using namespace banyan;

namespace {

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

topology generated(const topology_generator_options& o) {
  auto t = generate_topology(o);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

std::vector<int> top_groups(const topology& t) {
  std::vector<int> out;
  for (std::size_t g = 0; g < t.groups.size(); ++g)
    if (t.groups[g].parent < 0)
      out.push_back(static_cast<int>(g));
  return out;
}

/// RTT and bandwidth a -> b between top-level groups (every pair has a link).
std::pair<double, double> wan(const topology& t, int a, int b) {
  const auto& l = t.links[static_cast<std::size_t>(t.find_link(a, b))];
  return {to_ms(l.rtt), l.a == a ? l.bw_ab : l.bw_ba};
}

} // namespace

BOOST_AUTO_TEST_SUITE(topology_generator)

BOOST_AUTO_TEST_CASE(seed_1_gives_the_same_topology_forever) {
  topology_generator_options o;
  o.seed = 1;
  auto text = generate_topology_text(o);
  BOOST_REQUIRE(text);
  auto t = generated(o);
  BOOST_TEST_MESSAGE(*text);
  BOOST_CHECK_EQUAL(t.name, "gen-1-2l-13p");
  BOOST_CHECK_EQUAL(t.proc_count(), 13u);
  BOOST_CHECK_EQUAL(top_groups(t).size(), 3u);
  BOOST_CHECK_EQUAL(t.links.size(), 3u);
  BOOST_CHECK_EQUAL(fnv1a(*text), 1818447200152015490ull);
}

BOOST_AUTO_TEST_CASE(a_seed_repeats_and_seeds_differ) {
  topology_generator_options a, b;
  a.seed = b.seed = 42;
  BOOST_CHECK_EQUAL(*generate_topology_text(a), *generate_topology_text(b));
  b.seed = 43;
  BOOST_CHECK_NE(*generate_topology_text(a), *generate_topology_text(b));
}

BOOST_AUTO_TEST_CASE(the_options_are_respected) {
  for (std::uint32_t procs : {2u, 7u, 50u, 300u})
    for (int levels : {2, 3})
      for (std::uint32_t clusters : {0u, 2u}) {
        topology_generator_options o;
        o.seed = procs * 10 + static_cast<std::uint32_t>(levels);
        o.procs = procs;
        o.levels = levels;
        o.clusters = clusters;
        auto t = generated(o);
        BOOST_TEST_CONTEXT(t.name) {
          BOOST_CHECK_EQUAL(t.proc_count(), procs);
          if (clusters)
            BOOST_CHECK_EQUAL(top_groups(t).size(), clusters);
          int depth = 0;
          for (const auto& g : t.groups)
            depth = std::max(depth, g.depth + 1);
          BOOST_CHECK_EQUAL(depth, levels - 1);
        }
      }
  topology_generator_options o;
  o.levels = 4;
  BOOST_CHECK(!generate_topology_text(o));
  o.levels = 2;
  o.procs = 3;
  o.clusters = 4;
  BOOST_CHECK(!generate_topology_text(o));
}

BOOST_AUTO_TEST_CASE(the_distribution_covers_uneven_asymmetric_detoured_and_shared) {
  int two = 0, three = 0, uneven = 0, asymmetric = 0, relay_shorter_and_wider = 0,
      relay_shorter = 0, relay_wider = 0, shared_uplinks = 0;
  std::size_t smallest = 1000, largest = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    topology_generator_options o;
    o.seed = seed;
    auto t = generated(o);
    smallest = std::min(smallest, t.proc_count());
    largest = std::max(largest, t.proc_count());
    auto top = top_groups(t);
    std::uint32_t lo = 1u << 30, hi = 0;
    for (auto g : top) {
      lo = std::min(lo, t.groups[static_cast<std::size_t>(g)].proc_count);
      hi = std::max(hi, t.groups[static_cast<std::size_t>(g)].proc_count);
    }
    uneven += hi >= 2 * lo;
    bool deep = false;
    for (const auto& g : t.groups) {
      deep = deep || g.depth > 0;
      shared_uplinks += g.is_leaf() && g.procs > 1 && g.parent >= 0 && !std::isinf(g.uplink);
    }
    (deep ? three : two) += 1;
    for (const auto& l : t.links)
      asymmetric += l.bw_ab != l.bw_ba;
    for (auto a : top)
      for (auto b : top)
        for (auto c : top) {
          if (a == b || b == c || a == c)
            continue;
          auto [direct_rtt, direct_bw] = wan(t, a, c);
          auto [r1, b1] = wan(t, a, b);
          auto [r2, b2] = wan(t, b, c);
          bool shorter = r1 + r2 < direct_rtt, wider = std::min(b1, b2) > direct_bw;
          relay_shorter += shorter;
          relay_wider += wider;
          relay_shorter_and_wider += shorter && wider;
        }
  }
  BOOST_TEST_MESSAGE("2 levels " << two << ", 3 levels " << three << ", uneven " << uneven
                                 << ", asymmetric links " << asymmetric << ", relay shorter "
                                 << relay_shorter << ", wider " << relay_wider << ", both "
                                 << relay_shorter_and_wider << ", shared uplinks "
                                 << shared_uplinks << ", sizes " << smallest << "-" << largest);
  BOOST_CHECK_GE(two, 10);
  BOOST_CHECK_GE(three, 10);
  BOOST_CHECK_GE(uneven, 20);
  BOOST_CHECK_GE(asymmetric, 20);
  BOOST_CHECK_GE(relay_shorter, 10);
  BOOST_CHECK_GE(relay_wider, 10);
  BOOST_CHECK_GE(relay_shorter_and_wider, 5);
  BOOST_CHECK_GE(shared_uplinks, 20);
  BOOST_CHECK_LE(smallest, 20u);
  BOOST_CHECK_GE(largest, 150u);
}

BOOST_AUTO_TEST_SUITE_END()

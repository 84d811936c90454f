#pragma once
// The emulated cluster most actors suites run on: tiny-2c8 (two clusters of four
// processors), formed before the test begins, and the check that a per-vnode block
// collective (an allgather's or an all-to-all's record) served every vnode once.

#include <chrono>
#include <cstddef>
#include <cstdint>

#include <boost/test/unit_test.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "actors/require_topology.hpp"

namespace banyan::testing {

/// tiny-2c8 with `vnodes_per_proc` vnodes per processor and `initial` founders (0: all
/// eight; the others can join later).
inline actors::cluster_config tiny_config(std::uint64_t seed, std::size_t vnodes_per_proc,
                                          std::size_t initial = 0) {
  actors::cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = seed;
  cfg.vnodes_per_proc = vnodes_per_proc;
  cfg.initial = initial;
  return cfg;
}

/// Starts `c` and runs it until its trees have formed and nothing is under way.
inline void start_formed(actors::emulated_cluster& c) {
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(std::chrono::seconds(600)));
}

/// A block collective's record (`allgathered`, `alltoalled`): known, gathered at its root
/// unless `gathered` is false (a baseline without a gather), every one of the `n` vnodes
/// delivered once and its contribution taken once, no bad block, no problem reported.
template <class Record>
void check_every_vnode_once(const Record& r, std::size_t n, bool gathered = true) {
  BOOST_TEST(r.known);
  BOOST_TEST(r.gathered == gathered);
  BOOST_TEST(r.delivered.size() == n);
  for (auto& [v, k] : r.delivered)
    BOOST_TEST(k == 1, "vnode " << v << " delivered " << k << " times");
  BOOST_TEST(r.contributions.size() == n);
  for (auto& [v, k] : r.contributions)
    BOOST_TEST(k == 1, "vnode " << v << " contributed " << k << " times");
  BOOST_TEST(r.bad == 0u);
  for (auto& p : r.problems)
    BOOST_ERROR(p);
}

} // namespace banyan::testing

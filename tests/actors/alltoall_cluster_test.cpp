// All-to-all through the whole stack in virtual time: the engines each processor actor
// hosts, over banyan's adaptive trees, on the emulated wide-area network, and MPICH's
// pairwise exchange on the same network. Every vnode gets the block every vnode has for
// it exactly once (every block checked at delivery), also while processors join and
// leave in the middle of all-to-alls.

#include <boost/test/unit_test.hpp>

#include <random>

#include "banyan/actors/emulated_cluster.hpp"
#include "actors/tiny_cluster.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

using banyan::testing::start_formed;
using banyan::testing::tiny_config;

/// Vnode v's contribution: its block of `b` bytes for each of the `n` vnodes.
contribution_fn contributions(vnode_id n, std::size_t b, std::uint64_t salt) {
  return [n, b, salt](vnode_id v) {
    std::vector<std::uint8_t> all(n * b);
    for (vnode_id w = 0; w < n; ++w)
      for (std::size_t i = 0; i < b; ++i)
        all[w * b + i] = static_cast<std::uint8_t>(v * 13 + w * 7 + i * 5 + salt);
    return all;
  };
}

/// All-to-all `op`: every vnode got its blocks once (checked at delivery), every vnode's
/// contribution taken once.
void check_alltoall(emulated_cluster& c, std::uint64_t op, bool gathered = true) {
  banyan::testing::check_every_vnode_once(c.alltoalled(op), c.vnode_count(), gathered);
}

} // namespace

BOOST_AUTO_TEST_SUITE(alltoall_cluster)

BOOST_AUTO_TEST_CASE(alltoall_and_pairwise_on_formed_trees) {
  emulated_cluster c{tiny_config(3, 3)};
  start_formed(c);
  const auto n = static_cast<vnode_id>(c.vnode_count());
  for (std::size_t block : {std::size_t{1}, std::size_t{8}, std::size_t{3000}}) {
    BOOST_TEST_CONTEXT("blocks of " << block) {
      auto op = c.alltoall(5, block, contributions(n, block, block));
      BOOST_REQUIRE(op.has_value());
      BOOST_REQUIRE(c.run_until_alltoalled(*op, 60s));
      check_alltoall(c, *op);
      auto pw = c.alltoall_pairwise(block, contributions(n, block, block + 1));
      BOOST_REQUIRE(pw.has_value());
      BOOST_REQUIRE(c.run_until_alltoalled(*pw, 60s));
      check_alltoall(c, *pw, false);
    }
  }
  // A contribution of the wrong size is refused where it is taken, naming the vnode,
  // and nothing is delivered.
  auto wrong = c.alltoall(0, 4, [](vnode_id) { return std::vector<std::uint8_t>(4); });
  BOOST_REQUIRE(wrong.has_value());
  c.run_until(c.elapsed() + 2s);
  auto r = c.alltoalled(*wrong);
  BOOST_TEST(r.delivered.empty());
  BOOST_REQUIRE(!r.problems.empty());
  BOOST_TEST(r.problems.front().find("for each of the " + std::to_string(n) + " vnodes") !=
               std::string::npos, r.problems.front());
  // Refused at once: a root outside the namespace, blocks of 0 bytes, no values.
  BOOST_TEST(!c.alltoall(n, 4, contributions(n, 4, 0)).has_value());
  BOOST_TEST(!c.alltoall(0, 0, contributions(n, 1, 0)).has_value());
  BOOST_TEST(!c.alltoall(0, 4, nullptr).has_value());
  BOOST_TEST(!c.alltoall_pairwise(0, contributions(n, 1, 0)).has_value());
}

BOOST_AUTO_TEST_CASE(alltoalls_exactly_once_under_churn) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      emulated_cluster c{tiny_config(seed, 2, 6)}; // 6 and 7 join later
      start_formed(c);
      const auto n = static_cast<vnode_id>(c.vnode_count());
      std::mt19937 rng{static_cast<unsigned>(seed)};
      std::vector<std::uint64_t> ops;
      auto some_ops = [&](int k) {
        for (int i = 0; i < k; ++i) {
          const std::size_t block = (ops.size() + i) % 3 == 2 ? 2000 : 4 + i;
          auto op = c.alltoall(std::uniform_int_distribution<vnode_id>(0, n - 1)(rng), block,
                               contributions(n, block, 100 * seed + ops.size()));
          BOOST_REQUIRE(op.has_value());
          ops.push_back(*op);
        }
      };
      some_ops(2);
      c.run_until(c.elapsed() + std::chrono::milliseconds(1 + seed));
      BOOST_REQUIRE(!c.join(6, 0, vnode_set{static_cast<vnode_id>(seed % n)}));
      some_ops(2);
      c.run_until(c.elapsed() + std::chrono::milliseconds(2 * seed));
      proc_id leaver = static_cast<proc_id>(1 + seed % 5);
      BOOST_REQUIRE(!c.leave(leaver));
      some_ops(2);
      BOOST_REQUIRE(!c.join(7, 0));
      c.run_until(c.elapsed() + std::chrono::milliseconds(3));
      some_ops(2);
      BOOST_REQUIRE(c.run_until_quiet(600s));
      c.run_until(c.elapsed() + 5s); // nothing more arrives later
      for (auto op : ops)
        BOOST_TEST_CONTEXT("alltoall " << op) { check_alltoall(c, op); }
      BOOST_TEST(!c.running(leaver));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

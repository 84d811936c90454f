// Gather, scatter and allgather through the whole stack in virtual time: the engines each processor
// actor hosts, over banyan's adaptive trees, on the emulated wide-area network. Every
// vnode's block reaches the root exactly once (gather) and every vnode gets its own block
// exactly once (scatter), while processors join and leave in the middle of them.

#include <boost/test/unit_test.hpp>

#include <random>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/tree_builders.hpp"
#include "actors/tiny_cluster.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

using banyan::testing::start_formed;
using banyan::testing::tiny_config;

std::vector<std::uint8_t> block_of(vnode_id v, std::size_t n, std::uint64_t salt) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(v * 13 + i * 5 + salt);
  return b;
}

/// Gather `op` has one result, every vnode counted once, each block right.
void check_gather(emulated_cluster& c, std::uint64_t op, std::size_t block, std::uint64_t salt) {
  const auto n = static_cast<vnode_id>(c.vnode_count());
  auto r = c.reduction(op);
  BOOST_REQUIRE_EQUAL(r.results.size(), 1u);
  BOOST_TEST((r.results[0].vnodes == vnode_set::range(0, n)));
  BOOST_TEST(r.contributions.size() == n);
  for (auto& [v, k] : r.contributions)
    BOOST_TEST(k == 1, "vnode " << v << " contributed " << k << " times");
  for (auto& p : r.problems)
    BOOST_ERROR(p);
  auto& value = r.results[0].value;
  BOOST_REQUIRE_EQUAL(value.size(), block * n);
  for (vnode_id v = 0; v < n; ++v) {
    std::vector<std::uint8_t> got(value.begin() + v * block, value.begin() + (v + 1) * block);
    BOOST_TEST((got == block_of(v, block, salt)), "the block of vnode " << v);
  }
}

/// Allgather `op`: every vnode got every block once (blocks checked at delivery), every
/// vnode's block taken once.
void check_allgather(emulated_cluster& c, std::uint64_t op) {
  banyan::testing::check_every_vnode_once(c.allgathered(op), c.vnode_count());
}

} // namespace

BOOST_AUTO_TEST_SUITE(gather_scatter_cluster)

BOOST_AUTO_TEST_CASE(gather_and_scatter_on_formed_trees) {
  emulated_cluster c{tiny_config(3, 3)};
  start_formed(c);
  const auto n = static_cast<vnode_id>(c.vnode_count());
  for (std::size_t block : {std::size_t{8}, std::size_t{20000}}) {
    BOOST_TEST_CONTEXT("blocks of " << block) {
      const std::uint64_t salt = block;
      auto op = c.gather(5, block, [block, salt](vnode_id v) { return block_of(v, block, salt); });
      BOOST_REQUIRE(op.has_value());
      BOOST_REQUIRE(c.run_until_reduced(*op, 60s));
      check_gather(c, *op, block, salt);
      BOOST_TEST(c.reduction(*op).results[0].at == 1u); // vnode 5's owner
      auto s = c.scatter(7, block);
      BOOST_REQUIRE(s.has_value());
      BOOST_REQUIRE(c.run_until_delivered(*s, 60s));
      auto d = c.deliveries(*s);
      BOOST_TEST(d.delivered.size() == n);
      for (auto& [v, times] : d.delivered)
        BOOST_TEST(times.size() == 1u);
    }
  }
  BOOST_TEST(c.bad_payloads() == 0u);
  for (std::size_t block : {std::size_t{8}, std::size_t{9000}}) {
    auto op = c.allgather(3, block, [block](vnode_id v) { return block_of(v, block, 77); });
    BOOST_REQUIRE(op.has_value());
    BOOST_REQUIRE(c.run_until_allgathered(*op, 60s));
    check_allgather(c, *op);
  }
  // Refused at once: a root outside the namespace, blocks of 0 bytes.
  BOOST_TEST(!c.gather(n, 4, [](vnode_id) { return std::vector<std::uint8_t>(4); }).has_value());
  BOOST_TEST(!c.gather(0, 0, [](vnode_id) { return std::vector<std::uint8_t>(); }).has_value());
  BOOST_TEST(!c.scatter(n, 4).has_value());
  BOOST_TEST(!c.scatter(0, 0).has_value());
}

BOOST_AUTO_TEST_CASE(gathers_and_scatters_over_static_trees_move_every_block_once) {
  // MagPIe's cluster-aware gather and scatter (and binomial ones) on the same runtime:
  // the gather and scatter engines in block mode over a fixed tree, rooted at the root
  // vnode's owner.
  emulated_cluster c{tiny_config(4, 3)};
  start_formed(c);
  const auto procs = c.topo().proc_count();
  for (std::size_t block : {std::size_t{8}, std::size_t{20000}}) {
    for (bool magpie : {true, false}) {
      BOOST_TEST_CONTEXT((magpie ? "magpie" : "binomial") << ", blocks of " << block) {
        const std::uint64_t salt = block + (magpie ? 1 : 2);
        // vnode 7 lives at processor 2 (three per processor, founders)
        auto t = magpie ? magpie_tree(procs, 2, c.topo().cluster_of()) : binomial_tree(procs, 2);
        auto op = c.gather_static(t, 7, block,
                                  [block, salt](vnode_id v) { return block_of(v, block, salt); });
        BOOST_REQUIRE(op.has_value());
        BOOST_REQUIRE(c.run_until_reduced(*op, 60s));
        check_gather(c, *op, block, salt);
        BOOST_TEST(c.reduction(*op).results[0].at == 2u);
        // and back down: every vnode its own block once (checked at delivery)
        auto s = c.scatter_static(t, 7, block);
        BOOST_REQUIRE(s.has_value());
        BOOST_REQUIRE(c.run_until_delivered(*s, 60s));
        auto d = c.deliveries(*s);
        BOOST_TEST(d.delivered.size() == c.vnode_count());
        for (auto& [v, times] : d.delivered)
          BOOST_TEST(times.size() == 1u, "vnode " << v);
      }
    }
  }
  // Refused at once: a tree not rooted at the root vnode's owner, blocks of 0 bytes.
  auto any = [](vnode_id) { return std::vector<std::uint8_t>(4); };
  BOOST_TEST(!c.gather_static(binomial_tree(procs, 0), 7, 4, any).has_value());
  BOOST_TEST(!c.gather_static(binomial_tree(procs, 2), 7, 0, any).has_value());
  BOOST_TEST(!c.scatter_static(binomial_tree(procs, 0), 7, 4).has_value());
  BOOST_TEST(c.bad_payloads() == 0u);
}

BOOST_AUTO_TEST_CASE(gathers_and_scatters_exactly_once_under_churn) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      emulated_cluster c{tiny_config(seed, 2, 6)}; // 6 and 7 join later
      start_formed(c);
      const auto n = static_cast<vnode_id>(c.vnode_count());
      std::mt19937 rng{static_cast<unsigned>(seed)};
      std::vector<wire::collective_id> scatters;
      std::vector<std::tuple<std::uint64_t, std::size_t, std::uint64_t>> gathers; // op, block, salt
      std::vector<std::uint64_t> allgathers;
      auto some_ops = [&](int k) {
        for (int i = 0; i < k; ++i) {
          const std::size_t block = (gathers.size() + i) % 3 == 2 ? 30000 : 4 + i;
          if (auto s = c.scatter(std::uniform_int_distribution<vnode_id>(0, n - 1)(rng), block))
            scatters.push_back(*s);
          const std::uint64_t salt = 100 * seed + gathers.size();
          auto op = c.gather(std::uniform_int_distribution<vnode_id>(0, n - 1)(rng), block,
                             [block, salt](vnode_id v) { return block_of(v, block, salt); });
          BOOST_REQUIRE(op.has_value());
          gathers.emplace_back(*op, block, salt);
          auto ag = c.allgather(std::uniform_int_distribution<vnode_id>(0, n - 1)(rng), block,
                                [block, salt](vnode_id v) { return block_of(v, block, salt + 1); });
          BOOST_REQUIRE(ag.has_value());
          allgathers.push_back(*ag);
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
      BOOST_TEST(scatters.size() >= 6u);
      for (auto& id : scatters) {
        auto r = c.deliveries(id);
        BOOST_TEST(r.delivered.size() == n);
        for (auto& [v, times] : r.delivered)
          BOOST_TEST(times.size() == 1u, "scatter to vnode " << v << ": " << times.size());
      }
      BOOST_TEST(c.bad_payloads() == 0u);
      for (auto& [op, block, salt] : gathers)
        BOOST_TEST_CONTEXT("gather " << op) { check_gather(c, op, block, salt); }
      for (auto op : allgathers)
        BOOST_TEST_CONTEXT("allgather " << op) { check_allgather(c, op); }
      BOOST_TEST(!c.running(leaver));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

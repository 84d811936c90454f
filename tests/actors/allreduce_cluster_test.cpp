// Allreduces and barriers through the whole emulated stack in virtual time: the engines
// each processor actor hosts (core/allreduce.hpp) over banyan's adaptive trees on the
// emulated wide-area network. Every operator and type against the value computed
// directly, at every vnode; every vnode counted and delivered exactly once while
// processors join and leave in the middle of them.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

#include "actors/reduction_values.hpp"
#include "actors/require_topology.hpp"
#include "banyan/actors/emulated_cluster.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;
using banyan::test::same;
using banyan::test::truth;
using banyan::test::contribution;

namespace {

using banyan::testing::require_topology;

template <class T> contribution_fn values_of(std::size_t count, std::uint64_t salt) {
  return [count, salt](vnode_id v) { return contribution<T>(v, count, salt); };
}

/// Allreduce or barrier `op` as it stands: gathered once over every vnode, each vnode
/// counted once and delivered once, every delivery the gathered value, no problems.
/// Returns the gathered value.
std::vector<std::uint8_t> check_done(emulated_cluster& c, collective_kind kind, std::uint64_t op) {
  const auto n = static_cast<vnode_id>(c.vnode_count());
  auto r = c.allreduction(kind, op);
  BOOST_TEST_CONTEXT(to_string(kind) << " " << op) {
    BOOST_TEST(r.known);
    BOOST_REQUIRE_EQUAL(r.reduced.size(), 1u);
    BOOST_TEST((r.reduced[0].vnodes == vnode_set::range(0, n)), "counted " << r.reduced[0].vnodes.to_string());
    BOOST_TEST(r.contributions.size() == n);
    for (auto& [v, k] : r.contributions)
      BOOST_TEST(k == 1, "vnode " << v << " contributed " << k << " times");
    BOOST_TEST(r.delivered.size() == n);
    for (auto& [v, times] : r.delivered) {
      BOOST_TEST(times.size() == 1u, "vnode " << v << " delivered " << times.size() << " times");
      // Released only after the last vnode arrived at the root.
      BOOST_TEST((times.front() >= r.reduced[0].when));
    }
    BOOST_TEST(r.wrong_values == 0u);
    for (auto& p : r.problems)
      BOOST_ERROR(p);
  }
  return r.reduced.empty() ? std::vector<std::uint8_t>{} : r.reduced[0].value;
}

std::vector<std::uint8_t> finish(emulated_cluster& c, expected<std::uint64_t> op,
                                 collective_kind kind = collective_kind::allreduce) {
  BOOST_REQUIRE_MESSAGE(op.has_value(), (op ? "" : op.err().to_string()));
  BOOST_REQUIRE_MESSAGE(c.run_until_allreduced(kind, *op, 120s), to_string(kind) << " " << *op << " unfinished");
  return check_done(c, kind, *op);
}

template <class T> void check_every_kind(emulated_cluster& c, element_type type, std::uint64_t& salt) {
  const auto n = static_cast<vnode_id>(c.vnode_count());
  for (auto k : {reduce_kind::sum, reduce_kind::min, reduce_kind::max, reduce_kind::product}) {
    ++salt;
    const std::size_t count = 5 + salt % 4;
    reduction_args a;
    a.root = static_cast<vnode_id>(salt % n);
    a.fn = {k, type};
    a.count = count;
    a.values = values_of<T>(count, salt);
    BOOST_TEST_CONTEXT(to_string(k) << " over " << to_string(type) << " from vnode " << a.root) {
      auto got = finish(c, c.allreduce(a));
      BOOST_TEST(same(got, truth<T>(k, n, count, salt)));
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(allreduce_cluster)

BOOST_AUTO_TEST_CASE(every_operator_and_type_and_barriers_over_adaptive_trees) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = 3;
  cfg.vnodes_per_proc = 3;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  std::uint64_t salt = 0;
  check_every_kind<std::int32_t>(c, element_type::int32, salt);
  check_every_kind<std::int64_t>(c, element_type::int64, salt);
  check_every_kind<float>(c, element_type::float32, salt);
  check_every_kind<double>(c, element_type::float64, salt);
  // A user operator nobody registered is refused up front.
  reduction_args u;
  u.fn = {reduce_kind::user, element_type::bytes, 9};
  u.count = 4;
  u.values = [](vnode_id) { return std::vector<std::uint8_t>(4); };
  BOOST_TEST(!c.allreduce(u).has_value());
  // Barriers: an allreduce of nothing.
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(finish(c, c.barrier(), collective_kind::barrier).empty());
  // A long array: up the bandwidth tree, released in segments.
  reduction_args a;
  a.root = 7;
  a.fn = {reduce_kind::sum, element_type::int32};
  a.count = 100 * 1024 + 3;
  a.values = values_of<std::int32_t>(a.count, 99);
  auto got = finish(c, c.allreduce(a));
  BOOST_TEST(same(got, truth<std::int32_t>(reduce_kind::sum, 24, a.count, 99)));
}

BOOST_AUTO_TEST_CASE(allreduces_and_barriers_exactly_once_under_churn) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      cluster_config cfg;
      cfg.topo = require_topology("tiny-2c8");
      cfg.seed = seed;
      cfg.initial = 6; // 6 and 7 join later
      cfg.vnodes_per_proc = 2;
      emulated_cluster c{cfg};
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(600s));
      const auto n = static_cast<vnode_id>(c.vnode_count());
      std::mt19937 rng{static_cast<unsigned>(seed)};
      struct started { collective_kind kind; std::uint64_t op; reduce_kind k; std::uint64_t salt; std::size_t count; };
      std::vector<started> ops;
      auto some_ops = [&](int k) {
        for (int i = 0; i < k; ++i) {
          if ((ops.size() + seed) % 3 == 0) {
            auto b = c.barrier();
            BOOST_REQUIRE(b.has_value());
            ops.push_back({collective_kind::barrier, *b, reduce_kind::sum, 0, 0});
            continue;
          }
          reduction_args a;
          const std::uint64_t salt = 1000 * seed + ops.size();
          a.root = std::uniform_int_distribution<vnode_id>(0, n - 1)(rng);
          const auto kinds = {reduce_kind::sum, reduce_kind::min, reduce_kind::max};
          a.fn = {*(kinds.begin() + salt % 3), element_type::int64};
          a.count = ops.size() % 4 == 1 ? 40 * 1024 + 5 : 16; // long: bandwidth trees
          a.values = values_of<std::int64_t>(a.count, salt);
          auto op = c.allreduce(a);
          BOOST_REQUIRE(op.has_value());
          ops.push_back({collective_kind::allreduce, *op, a.fn.kind, salt, a.count});
        }
      };
      // Random joins and leaves between and during them.
      auto churn = [&] {
        auto run = c.running_procs();
        std::vector<proc_id> idle;
        for (proc_id p = 0; p < 8; ++p)
          if (!c.running(p))
            idle.push_back(p);
        if (!idle.empty() && (run.size() <= 4 || rng() % 2)) {
          auto p = idle[rng() % idle.size()];
          auto contact = run[rng() % run.size()];
          vnode_set wanted;
          if (rng() % 2)
            wanted.insert(static_cast<vnode_id>(rng() % n));
          BOOST_REQUIRE(!c.join(p, contact, wanted));
        } else if (run.size() > 3) {
          BOOST_REQUIRE(!c.leave(run[rng() % run.size()]));
        }
      };
      for (int step = 0; step < 6; ++step) {
        some_ops(2);
        c.run_until(c.elapsed() + std::chrono::milliseconds(rng() % (3 * seed + 2)));
        churn();
      }
      some_ops(2);
      BOOST_REQUIRE(c.run_until_quiet(600s));
      c.run_until(c.elapsed() + 5s); // nothing more arrives later
      for (auto& o : ops) {
        auto got = check_done(c, o.kind, o.op);
        if (o.kind == collective_kind::allreduce)
          BOOST_TEST(same(got, truth<std::int64_t>(o.k, n, o.count, o.salt)),
                     "allreduce " << o.op << " has a wrong value");
        else
          BOOST_TEST(got.empty());
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// MPICH's baselines on the same emulated network: every vnode gets the true value once.
BOOST_AUTO_TEST_SUITE(mpich_baselines)

BOOST_AUTO_TEST_CASE(recursive_doubling_ring_and_dissemination_are_exact) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = 5;
  cfg.vnodes_per_proc = 2;
  cfg.initial = 7; // not a power of two: recursive doubling's extra ranks
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  const auto n = static_cast<vnode_id>(c.vnode_count());
  std::uint64_t salt = 500;
  for (auto algo : {mpich_algorithm::recursive_doubling, mpich_algorithm::ring}) {
    for (std::size_t count : {std::size_t{3}, std::size_t{40 * 1024 + 1}}) {
      BOOST_TEST_CONTEXT(to_string(algo) << ", " << count << " elements") {
        reduction_args a;
        a.fn = {reduce_kind::sum, element_type::int64};
        a.count = count;
        a.values = values_of<std::int64_t>(count, ++salt);
        auto op = c.allreduce_mpich(algo, a);
        BOOST_REQUIRE_MESSAGE(op.has_value(), (op ? "" : op.err().to_string()));
        BOOST_REQUIRE(c.run_until_allreduced(kind_of(algo), *op, 60s));
        auto r = c.allreduction(kind_of(algo), *op);
        BOOST_TEST(r.delivered.size() == n);
        for (auto& [v, times] : r.delivered)
          BOOST_TEST(times.size() == 1u);
        BOOST_TEST(r.contributions.size() == n);
        BOOST_TEST(r.wrong_values == 0u);
        BOOST_TEST(r.problems.empty());
        // Every delivery equals the first; the first is the truth.
        BOOST_TEST(r.reduced.empty());
        BOOST_TEST(same(r.value, truth<std::int64_t>(reduce_kind::sum, n, count, salt)));
      }
    }
  }
  // The truth, through the first delivery's value: an allreduce over the adaptive trees
  // of the same contributions gathers the same value.
  reduction_args a;
  a.fn = {reduce_kind::max, element_type::int32};
  a.count = 9;
  a.values = values_of<std::int32_t>(9, 77);
  auto op = c.allreduce_mpich(mpich_algorithm::ring, a);
  BOOST_REQUIRE(op.has_value());
  BOOST_REQUIRE(c.run_until_allreduced(collective_kind::ring_allreduce, *op, 60s));
  auto ring = c.allreduction(collective_kind::ring_allreduce, *op);
  BOOST_TEST(ring.wrong_values == 0u);
  auto dyn = finish(c, c.allreduce(a));
  BOOST_TEST(same(dyn, truth<std::int32_t>(reduce_kind::max, n, 9, 77)));
  BOOST_TEST(ring.value == dyn);
  for (int i = 0; i < 2; ++i) {
    reduction_args b;
    auto bop = c.allreduce_mpich(mpich_algorithm::dissemination, b);
    BOOST_REQUIRE(bop.has_value());
    BOOST_REQUIRE(c.run_until_allreduced(collective_kind::dissemination_barrier, *bop, 60s));
    auto r = c.allreduction(collective_kind::dissemination_barrier, *bop);
    BOOST_TEST(r.delivered.size() == n);
    BOOST_TEST(r.wrong_values == 0u);
  }
  // Processors other than 0..k-1 running: refused.
  BOOST_REQUIRE(!c.join(7, 0));
  BOOST_REQUIRE(!c.leave(3));
  BOOST_REQUIRE(c.run_until_quiet(600s));
  BOOST_TEST(!c.allreduce_mpich(mpich_algorithm::ring, a).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

// Reductions and point-to-point messages through the whole stack in virtual time: the
// engines each processor actor hosts, over banyan's adaptive trees and over static trees,
// on the emulated wide-area network. Every operator and type against the value computed
// directly; broadcasts, messages and reductions exactly once while processors join and
// leave in the middle of them.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

#include "actors/reduction_values.hpp"
#include "banyan/actors/emulated_cluster.hpp"
#include "actors/require_topology.hpp"
#include "banyan/core/tree_builders.hpp"

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

/// Runs reduction `op` to its end and checks it: one result, at the owner of the root,
/// every vnode counted once, no problems. Returns the result's value.
std::vector<std::uint8_t> finish(emulated_cluster& c, expected<std::uint64_t> op) {
  BOOST_REQUIRE_MESSAGE(op.has_value(), (op ? "" : op.err().to_string()));
  BOOST_REQUIRE_MESSAGE(c.run_until_reduced(*op, 120s), "reduction " << *op << " unfinished");
  auto r = c.reduction(*op);
  BOOST_TEST(r.known);
  BOOST_REQUIRE_EQUAL(r.results.size(), 1u);
  BOOST_TEST((r.results[0].vnodes == vnode_set::range(0, static_cast<vnode_id>(c.vnode_count()))),
             "counted " << r.results[0].vnodes.to_string());
  BOOST_TEST(r.contributions.size() == c.vnode_count());
  for (auto& [v, n] : r.contributions)
    BOOST_TEST(n == 1, "vnode " << v << " contributed " << n << " times");
  for (auto& p : r.problems)
    BOOST_ERROR(p);
  return r.results[0].value;
}

template <class T> void check_every_kind(emulated_cluster& c, element_type type, std::uint64_t& salt,
                                         const std::function<expected<std::uint64_t>(
                                           const reduction_args&)>& start) {
  const auto n = static_cast<vnode_id>(c.vnode_count());
  for (auto k : {reduce_kind::sum, reduce_kind::min, reduce_kind::max, reduce_kind::product}) {
    ++salt;
    const std::size_t count = 5 + salt % 4;
    reduction_args a;
    a.root = static_cast<vnode_id>(salt % n);
    a.fn = {k, type};
    a.count = count;
    a.values = values_of<T>(count, salt);
    BOOST_TEST_CONTEXT(to_string(k) << " over " << to_string(type) << " to vnode " << a.root) {
      auto got = finish(c, start(a));
      BOOST_TEST(same(got, truth<T>(k, n, count, salt)));
    }
  }
}

void check_all_types(emulated_cluster& c, std::uint64_t& salt,
                     const std::function<expected<std::uint64_t>(const reduction_args&)>& start) {
  check_every_kind<std::int32_t>(c, element_type::int32, salt, start);
  check_every_kind<std::int64_t>(c, element_type::int64, salt, start);
  check_every_kind<float>(c, element_type::float32, salt, start);
  check_every_kind<double>(c, element_type::float64, salt, start);
}

} // namespace

BOOST_AUTO_TEST_SUITE(collectives_cluster)

BOOST_AUTO_TEST_CASE(every_operator_and_type_over_adaptive_trees) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = 3;
  cfg.vnodes_per_proc = 3;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  std::uint64_t salt = 0;
  check_all_types(c, salt, [&](const reduction_args& a) { return c.reduce(a); });
  // A long array goes up the bandwidth trees.
  reduction_args a;
  a.root = 7;
  a.fn = {reduce_kind::sum, element_type::int32};
  a.count = 100 * 1024 + 3; // 400 KiB: segments, the last one short
  a.values = values_of<std::int32_t>(a.count, 99);
  auto got = finish(c, c.reduce(a));
  BOOST_TEST(same(got, truth<std::int32_t>(reduce_kind::sum, 24, a.count, 99)));
}

BOOST_AUTO_TEST_CASE(every_operator_and_type_over_static_trees) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = 4;
  cfg.vnodes_per_proc = 2;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  const auto n = c.topo().proc_count();
  const auto clusters = c.topo().cluster_of();
  std::uint64_t salt = 100;
  // The root vnode's owner roots the tree (founders: vnode v lives at v / 2).
  check_all_types(c, salt, [&](const reduction_args& a) {
    return c.reduce_static(binomial_tree(n, a.root / 2), a);
  });
  check_all_types(c, salt, [&](const reduction_args& a) {
    return c.reduce_static(magpie_tree(n, a.root / 2, clusters), a);
  });
}

BOOST_AUTO_TEST_CASE(bad_reductions_are_refused) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  emulated_cluster c{cfg};
  reduction_args a;
  a.fn = {reduce_kind::sum, element_type::int32};
  a.count = 1;
  a.values = values_of<std::int32_t>(1, 0);
  BOOST_TEST(!c.reduce(a).has_value()); // not started
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  a.root = 8;
  auto beyond = c.reduce(a);
  BOOST_REQUIRE(!beyond.has_value());
  BOOST_TEST(beyond.err().message.find("root vnode 8") != std::string::npos);
  a.root = 1;
  a.fn = {reduce_kind::sum, element_type::bytes};
  BOOST_TEST(!c.reduce(a).has_value()); // no built-in sum over bytes
  a.fn = {reduce_kind::sum, element_type::int32};
  BOOST_TEST(!c.reduce_static(binomial_tree(8, 0), a).has_value()); // not rooted at 1
  // The cluster goes on: a good one still works.
  auto got = finish(c, c.reduce(a));
  BOOST_TEST(same(got, truth<std::int32_t>(reduce_kind::sum, 8, 1, 0)));
}

BOOST_AUTO_TEST_CASE(point_to_point_reaches_the_owner_once) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.vnodes_per_proc = 2;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  BOOST_TEST(!c.send(0, 16, 10).has_value()); // no vnode 16
  BOOST_TEST(!c.send(8, 1, 10).has_value());  // no processor 8
  std::vector<wire::collective_id> ids;
  for (proc_id p = 0; p < 8; ++p)
    for (vnode_id v : {vnode_id{(p * 5 + 3) % 16}, vnode_id{2 * p}}) { // elsewhere, own
      auto id = c.send(p, v, p % 2 ? 300 * 1024 : 100);
      BOOST_REQUIRE(id.has_value());
      ids.push_back(*id);
    }
  for (auto& id : ids) {
    BOOST_REQUIRE(c.run_until_delivered(id, 60s));
    auto r = c.deliveries(id);
    BOOST_REQUIRE_EQUAL(r.to.size(), 1u);
    BOOST_REQUIRE_EQUAL(r.delivered.size(), 1u);
    BOOST_TEST(r.to.contains(r.delivered.begin()->first));
    BOOST_TEST(r.delivered.begin()->second.size() == 1u);
  }
  BOOST_TEST(c.bad_payloads() == 0u);
  BOOST_TEST(c.quiet());
}

// Processors leave and join while broadcasts, messages and reductions are under way:
// each broadcast reaches every vnode once, each message its vnode once, each reduction
// counts every vnode once and has the true value.
BOOST_AUTO_TEST_CASE(collectives_exactly_once_under_churn) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
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
      std::vector<wire::collective_id> bcasts, msgs;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> reductions; // (op, salt)
      auto live = [&] {
        auto r = c.running_procs();
        return r[std::uniform_int_distribution<std::size_t>(0, r.size() - 1)(rng)];
      };
      auto some_ops = [&](int k) {
        for (int i = 0; i < k; ++i) {
          if (auto b = c.broadcast(live(), i % 2 ? 400 * 1024 : 64))
            bcasts.push_back(*b);
          const vnode_id to = std::uniform_int_distribution<vnode_id>(0, n - 1)(rng);
          if (auto m = c.send(live(), to, i % 2 ? 64 : 300 * 1024))
            msgs.push_back(*m);
        }
        reduction_args a;
        const std::uint64_t salt = 1000 * seed + reductions.size();
        a.root = std::uniform_int_distribution<vnode_id>(0, n - 1)(rng);
        a.fn = {reduce_kind::sum, element_type::int64};
        a.count = reductions.size() % 2 ? 80 * 1024 + 5 : 16; // long: segments, bandwidth trees
        a.values = values_of<std::int64_t>(a.count, salt);
        auto op = c.reduce(a);
        BOOST_REQUIRE(op.has_value());
        reductions.push_back({*op, salt});
      };
      some_ops(3);
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
      // Quiet means done: no engine still holds a stream, a partial or a retry.
      std::size_t reached = 0, expected_deliveries = 0;
      for (auto& id : bcasts)
        reached += c.deliveries(id).delivered.size();
      for (auto& id : msgs)
        reached += c.deliveries(id).delivered.size();
      expected_deliveries = bcasts.size() * n + msgs.size();
      BOOST_TEST(reached == expected_deliveries);
      for (auto& [op, salt] : reductions)
        BOOST_TEST(c.reduction(op).results.size() == 1u, "reduction " << op << " not done when quiet");
      c.run_until(c.elapsed() + 5s); // nothing more arrives later
      for (auto& id : bcasts) {
        auto r = c.deliveries(id);
        BOOST_TEST(r.delivered.size() == n);
        for (auto& [v, times] : r.delivered)
          BOOST_TEST(times.size() == 1u, "broadcast to vnode " << v << ": " << times.size());
      }
      for (auto& id : msgs) {
        auto r = c.deliveries(id);
        BOOST_TEST(r.delivered.size() == 1u);
        for (auto& [v, times] : r.delivered) {
          BOOST_TEST(r.to.contains(v));
          BOOST_TEST(times.size() == 1u, "message to vnode " << v << ": " << times.size());
        }
      }
      BOOST_TEST(c.bad_payloads() == 0u);
      for (auto& [op, salt] : reductions) {
        BOOST_TEST_CONTEXT("reduction " << op) {
          auto r = c.reduction(op);
          BOOST_REQUIRE_EQUAL(r.results.size(), 1u);
          BOOST_TEST((r.results[0].vnodes == vnode_set::range(0, n)));
          for (auto& [v, k] : r.contributions)
            BOOST_TEST(k == 1, "vnode " << v << " contributed " << k << " times");
          BOOST_TEST(r.contributions.size() == n);
          for (auto& p : r.problems)
            BOOST_ERROR(p);
          const std::size_t count = r.results[0].value.size() / 8;
          BOOST_TEST(same(r.results[0].value,
                          truth<std::int64_t>(reduce_kind::sum, n, count, salt)));
        }
      }
      BOOST_TEST(!c.running(leaver));
    }
  }
}

// A processor crashes (no handover) while a long broadcast passes through the trees: its
// successor adopts its vnodes, the broadcast reaches every vnode at most once, and every
// later broadcast reaches every vnode exactly once, and a reduction started after the
// crash counts every vnode once, with the true value.
BOOST_AUTO_TEST_CASE(a_crashed_processor_s_vnodes_are_adopted_and_collectives_go_on) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      cluster_config cfg;
      cfg.topo = require_topology("tiny-2c8");
      cfg.seed = seed;
      cfg.vnodes_per_proc = 2;
      emulated_cluster c{cfg};
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(600s));
      const auto n = static_cast<vnode_id>(c.vnode_count());
      auto cut = c.broadcast(0, 400 * 1024);
      BOOST_REQUIRE(cut.has_value());
      c.run_until(c.elapsed() + std::chrono::milliseconds(2 * seed));
      BOOST_REQUIRE(!c.crash(5)); // vnodes 10 and 11
      BOOST_TEST(c.crash(5).has_value()); // not running any more
      // Later broadcasts (short and long, from both clusters): every vnode exactly once.
      std::vector<wire::collective_id> later;
      for (proc_id from : {proc_id{0}, proc_id{7}, proc_id{6}})
        for (std::size_t bytes : {std::size_t{64}, std::size_t{300 * 1024}}) {
          auto id = c.broadcast(from, bytes);
          BOOST_REQUIRE(id.has_value());
          later.push_back(*id);
        }
      for (auto& id : later) {
        BOOST_REQUIRE_MESSAGE(c.run_until_delivered(id, 120s), "a broadcast after the crash never completed");
        auto r = c.deliveries(id);
        BOOST_TEST(r.delivered.size() == n);
        for (auto& [v, times] : r.delivered)
          BOOST_TEST(times.size() == 1u, "vnode " << v << ": " << times.size() << " deliveries");
      }
      // Processor 6, the next member after 5, owns 5's vnodes now, as every table says.
      auto* adopter = c.inspect(6);
      BOOST_REQUIRE(adopter);
      BOOST_TEST((adopter->own_vnodes() == vnode_set::range(10, 14)));
      for (auto p : c.running_procs()) {
        BOOST_TEST(!c.inspect(p)->is_member(5));
        for (vnode_id v = 10; v < 12; ++v)
          BOOST_TEST(c.inspect(p)->routes().owner(v) == 6u, "processor " << p << ", vnode " << v);
      }
      // The broadcast cut by the crash: at most once everywhere; the survivors' own
      // vnodes all have it (5's may have had it before it crashed, lost with it).
      auto r = c.deliveries(*cut);
      for (auto& [v, times] : r.delivered)
        BOOST_TEST(times.size() == 1u, "vnode " << v << ": " << times.size() << " deliveries");
      for (vnode_id v = 0; v < n; ++v)
        if (v < 10 || v >= 12)
          BOOST_TEST(r.delivered.count(v) == 1u, "vnode " << v << " missed the cut broadcast");
      // A reduction started after the crash: every vnode once, the true sum.
      reduction_args a;
      const std::uint64_t salt = 77 + seed;
      a.root = 11; // one of the adopted vnodes
      a.fn = {reduce_kind::sum, element_type::int64};
      a.count = 32;
      a.values = values_of<std::int64_t>(a.count, salt);
      auto op = c.reduce(a);
      auto got = finish(c, op);
      BOOST_TEST(same(got, truth<std::int64_t>(reduce_kind::sum, n, a.count, salt)));
      BOOST_TEST(c.reduction(*op).results.at(0).at == 6u); // the root vnode's new owner
      BOOST_TEST(c.bad_payloads() == 0u);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

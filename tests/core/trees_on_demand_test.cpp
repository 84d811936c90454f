// Trees on demand (supervisor_config::tree_set on_demand): only the roots that prepared
// have trees; they form after prepare, retire unused, reach newcomers, and go with a root
// that leaves or crashes; collectives from a root without trees complete exactly once.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/collective_rider.hpp"
#include "core/supervisor_checks.hpp"

using namespace banyan;
using banyan::test::collective_rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::reduction_ledger;
using banyan::test::rider;
using banyan::test::supervisor_checks::tiny;

namespace {

/// `retire_after` 0: trees never retire (a grid run to its end would otherwise see them go).
supervisor_config on_demand(duration retire_after = duration{0}) {
  supervisor_config cfg;
  cfg.tree_set = tree_set_mode::on_demand;
  cfg.retire_after = retire_after;
  return cfg;
}

/// Every live processor has the trees of exactly `roots`, and each of them spans the
/// live processors with true subtree sets.
void check_open(const mini_grid& g, std::vector<proc_id> roots) {
  std::sort(roots.begin(), roots.end());
  auto live = g.live();
  for (proc_id p = 0; p < live.size(); ++p)
    if (live[p])
      BOOST_TEST_REQUIRE(g.sup(p)->open_roots() == roots,
                         "processor " << p << " has the trees of " << g.sup(p)->open_roots().size()
                                      << " roots, not " << roots.size());
  for (auto r : roots)
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto t = g.tree_of({r, k});
      auto problem = t.validate(live);
      BOOST_TEST_REQUIRE(!problem.has_value(),
                         to_string(k) << " tree of " << r << ": " << problem.value_or(""));
      banyan::test::supervisor_checks::check_subtrees_of(g, {r, k});
    }
}

/// Riders with a broadcast and a reduction engine over each supervisor.
struct engines {
  delivery_ledger deliveries;
  reduction_ledger reductions;
  engines() {
    reductions.value = [](std::uint64_t op, vnode_id v) {
      std::vector<std::uint8_t> b(8, 0);
      b[0] = static_cast<std::uint8_t>(op * 31 + v);
      b[1] = static_cast<std::uint8_t>(v);
      return b;
    };
  }
  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id, const supervisor& s) {
      return std::make_unique<collective_rider>(s, deliveries, broadcast_config{}, &reductions);
    });
  }
  void broadcast(mini_grid& g, proc_id from, std::size_t bytes) {
    g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
      dynamic_cast<collective_rider&>(r).broadcast(now, shared_bytes(std::vector<std::uint8_t>(bytes, 7)), out);
    });
  }
  /// Reduction `op` rooted at vnode `root`, started at every processor of [0, n).
  void reduce(mini_grid& g, std::uint64_t op, vnode_id root, proc_id n) {
    reduce_spec spec{op, root, {reduce_kind::sum, element_type::int64, 0}, 1};
    for (proc_id p = 0; p < n; ++p)
      g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
        auto e = dynamic_cast<collective_rider&>(r).reduce(now, spec, out);
        BOOST_TEST(!e.has_value());
      });
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(only_prepared_roots_have_trees_and_probe_replies_carry_only_theirs) {
  mini_grid g{tiny(), 1, on_demand()};
  std::size_t replies = 0, widest = 0;
  g.slow([&](const wire::envelope& e) {
    if (auto* r = std::get_if<wire::bw_reply>(&e.body)) {
      ++replies;
      widest = std::max(widest, r->trees.size());
    }
    return false;
  }, duration{0});
  g.start();
  g.run();
  BOOST_TEST(!g.busy());
  check_open(g, {});
  BOOST_TEST(widest == 0u); // peers measured, no tree carried
  g.prepare(2);
  g.prepare(5);
  g.run();
  BOOST_TEST(!g.busy());
  check_open(g, {2, 5});
  BOOST_TEST(replies > 0u);
  BOOST_TEST(widest <= 4u); // two roots, two trees each
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(g.sup(p)->all_parented());
}

BOOST_AUTO_TEST_CASE(collectives_from_a_root_without_trees_complete_exactly_once) {
  mini_grid g{tiny(), 2, on_demand()};
  engines e;
  e.install(g);
  g.start();
  g.run();
  check_open(g, {});
  // No processor has a tree of root 3: the broadcast and the reduction go flat.
  std::size_t down_trees = 0; // segments sent by a parent to its child in a tree of theirs
  g.slow([&](const wire::envelope& m) {
    if (auto* s = std::get_if<wire::bcast_segment>(&m.body))
      for (auto k : {tree_kind::latency, tree_kind::bandwidth})
        if (auto* t = g.sup(m.from)->tree({s->op.origin, k}); t && t->has_child(m.to))
          ++down_trees;
    return false;
  }, duration{0});
  e.broadcast(g, 3, 3000);
  e.reduce(g, 1, 3, 8);
  g.run();
  BOOST_TEST(e.deliveries.check_exactly_once(8) == "");
  BOOST_TEST(e.reductions.check(8) == "");
  BOOST_TEST(down_trees == 0u);
  auto tree_partials = [&] {
    std::uint64_t n = 0;
    for (proc_id p = 0; p < 8; ++p)
      n += rider(g, p).reducer().stats().tree_partials;
    return n;
  };
  BOOST_TEST(tree_partials() == 0u);
  // Prepared, a broadcast and a reduction right away (the trees still forming), and one
  // each once they have formed: exactly once, and the last ones follow the trees.
  g.prepare(3);
  e.broadcast(g, 3, 3000);
  e.reduce(g, 2, 3, 8);
  g.run();
  check_open(g, {3});
  down_trees = 0;
  const auto before = tree_partials();
  e.broadcast(g, 3, 3000);
  e.reduce(g, 3, 3, 8);
  g.run();
  BOOST_TEST(e.deliveries.check_exactly_once(8) == "");
  BOOST_TEST(e.reductions.check(8) == "");
  BOOST_TEST(g.lost_rider_messages() == 0u);
  BOOST_TEST(down_trees > 0u);
  BOOST_TEST(tree_partials() > before);
}

BOOST_AUTO_TEST_CASE(unused_trees_retire_everywhere_and_reopen) {
  mini_grid g{tiny(), 3, on_demand(std::chrono::seconds(5))};
  g.start();
  g.run_for(std::chrono::seconds(1));
  g.prepare(1);
  g.prepare(6);
  g.run_for(std::chrono::seconds(3));
  check_open(g, {1, 6});
  g.prepare(6); // 6 uses its trees again: they outlive 1's
  g.run_for(std::chrono::milliseconds(2500)); // 1's retired at 6 s
  check_open(g, {6});
  g.run();
  check_open(g, {});
  BOOST_TEST(!g.busy());
  g.prepare(1); // opened again
  g.run_for(std::chrono::seconds(3));
  check_open(g, {1});
}

BOOST_AUTO_TEST_CASE(a_newcomer_learns_the_open_roots) {
  mini_grid g{tiny(), 4, on_demand()};
  g.start(7);
  g.prepare(2);
  g.prepare(4);
  g.run();
  g.join(7, 0, {});
  g.run();
  BOOST_TEST((g.sup(7)->state() == supervisor::status::member));
  check_open(g, {2, 4});
  g.prepare(7); // and its own open too
  g.run();
  check_open(g, {2, 4, 7});
}

BOOST_AUTO_TEST_CASE(a_root_that_leaves_or_crashes_takes_its_trees) {
  auto cfg = on_demand();
  cfg.crash_timeout = std::chrono::seconds(2);
  mini_grid g{tiny(), 5, cfg};
  g.start();
  g.prepare(2);
  g.prepare(4);
  g.prepare(6);
  g.run_for(std::chrono::seconds(5));
  check_open(g, {2, 4, 6});
  g.leave(2);
  g.run_for(std::chrono::seconds(5));
  BOOST_TEST((!g.sup(2) || g.sup(2)->state() == supervisor::status::left));
  g.crash(4);
  g.run_for(std::chrono::seconds(15));
  auto live = g.live();
  BOOST_TEST(!live[2]);
  BOOST_TEST(!live[4]);
  check_open(g, {6});
}

// A processor that missed a root's notice learns it from its next probe's reply.
BOOST_AUTO_TEST_CASE(probe_replies_spread_what_a_notice_missed) {
  mini_grid g{tiny(), 6, on_demand()};
  g.start();
  g.run();
  // 3's notice to 7 takes a minute; 7 measures for 5's trees meanwhile.
  g.slow([&](const wire::envelope& e) {
    return e.from == 3 && e.to == 7 && std::holds_alternative<wire::trees_open>(e.body);
  }, std::chrono::seconds(60));
  g.prepare(3);
  g.run_for(std::chrono::seconds(2));
  BOOST_TEST(g.sup(7)->open_roots().empty());
  g.prepare(5);
  g.run_for(std::chrono::seconds(10));
  BOOST_TEST(g.sup(7)->open_roots() == (std::vector<proc_id>{3, 5}));
  g.run();
  check_open(g, {3, 5});
}

// Trees on demand on the emulated network (virtual time): a broadcast and a reduction
// started before any tree exists complete exactly once, and open their root's trees,
// which then span every processor.

#include <boost/test/unit_test.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "actors/require_topology.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

/// Every running processor has the trees of exactly `roots`, and each spans them all.
void check_open(const emulated_cluster& c, const std::vector<proc_id>& roots) {
  for (auto p : c.running_procs())
    BOOST_TEST_REQUIRE(c.inspect(p)->open_roots() == roots, "processor " << p);
  auto live = c.monitor().live();
  for (auto r : roots)
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto problem = c.monitor().tree_of({r, k}).validate(live);
      BOOST_TEST(!problem.has_value(), to_string(k) << " tree of " << r << ": "
                                                      << problem.value_or(""));
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(collectives_open_the_trees_of_their_roots) {
  cluster_config cfg;
  cfg.topo = banyan::testing::require_topology("tiny-2c8");
  cfg.seed = 3;
  cfg.sup.tree_set = tree_set_mode::on_demand;
  cfg.sup.retire_after = duration{0};
  emulated_cluster c(cfg);
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(30s));
  check_open(c, {});

  auto id = c.broadcast(3, 4096);
  BOOST_REQUIRE(id.has_value());
  BOOST_REQUIRE(c.run_until_delivered(*id, 30s));
  auto d = c.deliveries(*id);
  BOOST_TEST(d.delivered.size() == c.vnode_count());
  for (auto& [v, times] : d.delivered)
    BOOST_TEST(times.size() == 1u, "vnode " << v << " delivered " << times.size() << " times");

  reduction_args a;
  a.root = 5; // owned by processor 5
  a.fn = {reduce_kind::sum, element_type::int32, 0};
  a.count = 2;
  a.values = int32_values(2, [](vnode_id v, std::size_t i) { return static_cast<int>(v * 3 + i); });
  auto op = c.reduce(a);
  BOOST_REQUIRE(op.has_value());
  BOOST_REQUIRE(c.run_until_reduced(*op, 30s));
  auto r = c.reduction(*op);
  BOOST_REQUIRE_EQUAL(r.results.size(), 1u);
  BOOST_TEST(r.results[0].at == 5u);
  BOOST_TEST((r.results[0].vnodes == vnode_set::range(0, static_cast<vnode_id>(c.vnode_count()))));
  for (auto& [v, n] : r.contributions)
    BOOST_TEST(n == 1, "vnode " << v << " contributed " << n << " times");
  BOOST_TEST(r.contributions.size() == c.vnode_count());
  for (auto& p : r.problems)
    BOOST_ERROR(p);

  BOOST_REQUIRE(c.run_until_quiet(30s));
  check_open(c, {3, 5});
}

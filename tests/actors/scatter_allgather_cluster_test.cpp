// MPICH's broadcast (core/scatter_allgather) hosted by the processor actors in virtual
// time on the emulated wide-area network: short messages whole down the binomial tree,
// long ones scattered then gathered around the ring. Every vnode gets each broadcast
// exactly once with the bytes sent, at several sizes (below, at and above the long
// threshold, and sizes that do not divide into equal chunks), from several origins.

#include <boost/test/unit_test.hpp>

#include <string>

#include "banyan/actors/emulated_cluster.hpp"
#include "actors/require_topology.hpp"
#include "actors/tiny_cluster.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

using banyan::testing::require_topology;
using banyan::testing::start_formed;
using banyan::testing::tiny_config;

/// Runs broadcast `id` to the end; every vnode exactly once, nothing later.
void check_once(emulated_cluster& c, std::optional<wire::collective_id> id,
                const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE(id.has_value());
    BOOST_REQUIRE(c.run_until_delivered(*id, 600s));
    c.run_until(c.elapsed() + 5s);
    auto r = c.deliveries(*id);
    BOOST_REQUIRE(r.known);
    BOOST_CHECK_EQUAL(r.delivered.size(), c.vnode_count());
    for (auto& [v, times] : r.delivered)
      BOOST_CHECK_MESSAGE(times.size() == 1, "vnode " << v << " delivered " << times.size());
    BOOST_CHECK_EQUAL(c.bad_payloads(), 0u);
    BOOST_CHECK(c.quiet());
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(scatter_allgather_cluster)

BOOST_AUTO_TEST_CASE(every_vnode_exactly_once_at_every_size) {
  emulated_cluster c{tiny_config(3, 2)};
  start_formed(c);
  const auto n = static_cast<proc_id>(c.topo().proc_count());
  const auto th = emulated_cluster::scatter_allgather_threshold();
  for (std::size_t bytes : {std::size_t{1}, th - 1, th, th + 5, std::size_t{1024 * 1024 + 3}}) {
    for (proc_id origin : {proc_id{0}, proc_id{3}, static_cast<proc_id>(n - 1)}) {
      check_once(c, c.broadcast_scatter_allgather(origin, bytes),
                 std::to_string(bytes) + " bytes from " + std::to_string(origin));
      BOOST_REQUIRE(c.run_until_quiet(60s));
    }
  }
}

BOOST_AUTO_TEST_CASE(on_a_paper_topology) {
  cluster_config cfg;
  cfg.topo = require_topology("paper-3c128");
  cfg.seed = 1;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(3600s));
  const auto th = emulated_cluster::scatter_allgather_threshold();
  check_once(c, c.broadcast_scatter_allgather(0, 4 * th + 77), "4 x threshold + 77");
}

BOOST_AUTO_TEST_CASE(refused_unless_processors_are_0_to_k) {
  cluster_config cfg;
  cfg.topo = require_topology("tiny-2c8");
  cfg.seed = 5;
  emulated_cluster c{cfg};
  c.start();
  BOOST_REQUIRE(c.run_until_quiet(600s));
  const auto n = static_cast<proc_id>(c.topo().proc_count());
  BOOST_CHECK(!c.broadcast_scatter_allgather(n, 1024).has_value()); // no such processor
  BOOST_REQUIRE(!c.leave(2));
  BOOST_REQUIRE(c.run_until_quiet(600s));
  BOOST_REQUIRE(!c.running(2));
  // Ranks are ids: with processor 2 gone the ring would have a hole.
  BOOST_CHECK(!c.broadcast_scatter_allgather(0, 1024 * 1024).has_value());
}

BOOST_AUTO_TEST_SUITE_END()

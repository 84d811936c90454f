// Latency trees on a single LAN (processes on one host, one cluster): every RTT alike, so
// the paper's rule (I), a strictly shorter RTT, would freeze the first, random
// attachments. Once every member is measured and no two classes of RTT show, banyan
// treats all peers as local and moves by arrival time (supervisor::context).

#include <boost/test/unit_test.hpp>

#include "core/mini_grid.hpp"

#include "banyan/core/topology.hpp"

using namespace banyan;
using banyan::test::mini_grid;

namespace {

topology one_lan(int procs) {
  auto t = parse_topology("group A procs " + std::to_string(procs) + " rtt 0.05ms\n");
  BOOST_TEST_REQUIRE(t.has_value());
  return *t;
}

} // namespace

BOOST_AUTO_TEST_CASE(latency_trees_on_one_lan_are_shallow) {
  for (int procs : {4, 8, 16}) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      mini_grid g{one_lan(procs), seed};
      g.start();
      g.run();
      BOOST_TEST_REQUIRE(!g.busy());
      auto t = g.tree_of({0, tree_kind::latency});
      BOOST_TEST_MESSAGE(procs << " processes, seed " << seed << ": depth max " << t.depth_max()
                                << ", mean " << t.depth_mean());
      BOOST_TEST(t.depth_max() <= (procs <= 8 ? 2 : 3));
    }
  }
}

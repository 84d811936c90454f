// The segment a long broadcast is cut into (`segment_for`, broadcast_config::max_segment):
// the configured one unless a larger one is allowed, then doubled while at least
// `min_segments` remain; the origin cuts at it and every receiver delivers the bytes.
#include <boost/test/unit_test.hpp>

#include <random>

#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/tree_builders.hpp"
#include "core/collective_rider.hpp"
#include "core/message_bytes.hpp"

using namespace banyan;
using banyan::test::collective_rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::rider;

namespace {

constexpr std::size_t kib = 1024, mib = 1024 * 1024;

broadcast_config with_max(std::size_t max_segment) {
  broadcast_config c;
  c.max_segment = max_segment;
  return c;
}

using banyan::test::message_bytes;

} // namespace

// The table of broadcast.hpp, and its edges.
BOOST_AUTO_TEST_CASE(segment_for_doubles_while_enough_segments_remain) {
  const auto tcp = with_max(mib);
  BOOST_TEST(segment_for(tcp, 64 * mib) == mib);
  BOOST_TEST(segment_for(tcp, 16 * mib) == 256 * kib);
  BOOST_TEST(segment_for(tcp, 4 * mib) == 64 * kib);
  BOOST_TEST(segment_for(tcp, 8 * mib) == 128 * kib);
  BOOST_TEST(segment_for(tcp, 8 * mib - 1) == 64 * kib); // 63 segments of 128 KiB: too few
  BOOST_TEST(segment_for(tcp, 1024 * mib) == mib);       // never above the cap
  BOOST_TEST(segment_for(tcp, 1) == 64 * kib);
  // Without a larger cap (the default): always segment_size.
  BOOST_TEST(segment_for(broadcast_config{}, 64 * mib) == 64 * kib);
  BOOST_TEST(segment_for(with_max(64 * kib), 64 * mib) == 64 * kib);
  // A cap that is not a power-of-two multiple: the largest doubling below it.
  BOOST_TEST(segment_for(with_max(700 * kib), 64 * mib) == 512 * kib);
  auto fewer = with_max(mib);
  fewer.min_segments = 16;
  BOOST_TEST(segment_for(fewer, 4 * mib) == 256 * kib);
}

// Eight processors on the tiny topology, processor 0 broadcasting along a flat static
// tree (7 edges): the origin sends count frames per child, and every processor gets the
// bytes once, whatever the segment.
BOOST_AUTO_TEST_CASE(the_origin_cuts_at_the_segment_and_every_receiver_gets_the_bytes) {
  auto topo = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(topo.has_value());
  const auto n = topo->proc_count();
  BOOST_REQUIRE(n == 8u);
  routing_table routes;
  for (proc_id p = 0; p < n; ++p)
    routes.assign(vnode_set{p}, p, 0);
  struct run {
    broadcast_config cfg;
    std::size_t bytes;
    std::uint64_t frames; // tree frames in all: 7 children x segments
  };
  for (const run& r : {run{broadcast_config{}, 16 * mib, 7 * 256},
                       run{with_max(mib), 16 * mib, 7 * 64},
                       run{with_max(mib), 16 * mib + 12345, 7 * 65}, // a short last segment
                       run{with_max(mib), 3 * mib, 7 * 48}}) {
    delivery_ledger ledger;
    mini_grid g{*topo, 5};
    g.set_rider_factory([&](proc_id p, const supervisor&) {
      auto trees = [n](tree_key k) { return flat_tree(n, k.root); };
      return std::make_unique<collective_rider>(
          std::make_unique<static_tree_view>(p, routes, trees), ledger, r.cfg);
    });
    g.start();
    g.with_rider(0, [&](mini_grid::rider& rd, timestamp now, outbox& out) {
      dynamic_cast<collective_rider&>(rd).broadcast(now, message_bytes(r.bytes, r.bytes), out);
    });
    g.run();
    BOOST_TEST_CONTEXT(r.bytes << " bytes, max_segment " << r.cfg.max_segment) {
      BOOST_TEST(ledger.check_exactly_once(static_cast<vnode_id>(n)) == "");
      BOOST_TEST(rider(g, 0).bcast().stats().tree_frames == r.frames);
    }
  }
}

// A long array reduced as segments: consecutive reductions started together, each a
// piece of the array (what the emulated runtime does for arrays longer than its segment
// size). `reduce_spec::whole_bytes` picks the tree of the whole array, `after` keeps a
// segment's timeout running while the segment before it has not gone up.

#include <boost/test/unit_test.hpp>

#include <cstring>

#include "core/collective_rider.hpp"

using namespace banyan;
using banyan::test::collective_rider;
using banyan::test::rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::reduction_ledger;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

constexpr std::size_t segment_count = 4096; // int32 elements: 16 KiB
constexpr std::uint32_t segments = 64;      // 1 MiB in all

struct fixture {
  delivery_ledger deliveries;
  reduction_ledger reductions;

  fixture() {
    // Small integers, different per segment, vnode and element.
    reductions.value = [](std::uint64_t op, vnode_id v) {
      std::vector<std::uint8_t> b(segment_count * 4);
      for (std::size_t i = 0; i < segment_count; ++i) {
        const auto x = static_cast<std::int32_t>((op * 13 + v * 31 + i * 7) % 17) - 8;
        std::memcpy(b.data() + i * 4, &x, 4);
      }
      return b;
    };
  }
  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id, const supervisor& s) {
      return std::make_unique<collective_rider>(s, deliveries, broadcast_config{}, &reductions);
    });
  }
};


/// Starts the segments of one 1 MiB int32 sum to vnode `root` at every processor, chained
/// (`after`) or not; returns the timeouts that fired and the tree partials sent.
std::pair<std::uint64_t, std::uint64_t> run_segments(std::uint64_t seed, bool chained) {
  fixture f;
  mini_grid g{tiny(), seed};
  f.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  const vnode_id root = static_cast<vnode_id>(seed % 8);
  for (proc_id p = 0; p < 8; ++p)
    g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
      auto& cr = dynamic_cast<collective_rider&>(r);
      for (std::uint32_t j = 0; j < segments; ++j) {
        reduce_spec spec{j + 1, root, {reduce_kind::sum, element_type::int32, 0}, segment_count};
        spec.whole_bytes = segments * segment_count * 4;
        if (chained && j > 0)
          spec.after = j; // the segment before (numbered j)
        if (auto e = cr.reduce(now, spec, out))
          BOOST_FAIL(e->to_string());
      }
    });
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
  std::uint64_t timeouts = 0, tree = 0;
  for (proc_id p = 0; p < 8; ++p) {
    timeouts += rider(g, p).reducer().stats().timeouts;
    tree += rider(g, p).reducer().stats().tree_partials;
  }
  return {timeouts, tree};
}

} // namespace

// Every segment is counted exactly once with the right value, chained or not; chained,
// no segment times out on stable trees (each partial goes to its parent combined);
// unchained, the later segments, queued behind the earlier ones, time out.
BOOST_AUTO_TEST_CASE(segments_pipeline_without_premature_timeouts) {
  std::uint64_t without = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      auto [timeouts, tree] = run_segments(seed, true);
      BOOST_TEST(timeouts == 0u);
      BOOST_TEST(tree == 7u * segments); // every processor but the root's owner, once each
      without += run_segments(seed, false).first;
    }
  }
  BOOST_TEST(without > 0u); // chaining is what keeps them from timing out
}

// The tree follows the whole array: a segment of a long array goes up the bandwidth tree
// although it is below the long threshold itself; without `whole_bytes`, the latency tree.
BOOST_AUTO_TEST_CASE(segments_take_the_tree_of_the_whole_array) {
  fixture f;
  mini_grid g{tiny(), 2};
  f.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  const reduce_spec alone{1, 0, {reduce_kind::sum, element_type::int32, 0}, segment_count};
  reduce_spec seg = alone;
  seg.whole_bytes = 1 << 20;
  int checked = 0;
  for (auto [kind, spec] : {std::pair{tree_kind::bandwidth, seg}, std::pair{tree_kind::latency, alone}}) {
    const auto t = g.tree_of({0, kind});
    const auto kids = t.children();
    for (proc_id p = 1; p < 8; ++p) {
      if (!kids[p].empty())
        continue; // a leaf sends its partial at once
      // The engine alone (its frames kept here): the first partial's tree and parent.
      reduce_op_table ops;
      auto& view = rider(g, p).view();
      reduce_engine e{view, ops, {}, view.own_vnodes()};
      reduce_outbox ro;
      auto values = [&](vnode_id v) { return f.reductions.value(1, v); };
      BOOST_REQUIRE(!e.start(g.now(), spec, values, ro));
      BOOST_REQUIRE_EQUAL(ro.sends.size(), 1u);
      auto* part = std::get_if<wire::reduce_partial>(&ro.sends[0].body);
      BOOST_REQUIRE(part != nullptr);
      BOOST_TEST((part->kind == kind));
      BOOST_TEST(ro.sends[0].to == t.parent(p));
      ++checked;
    }
  }
  BOOST_TEST(checked >= 2);
}

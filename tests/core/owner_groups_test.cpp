// group_owners: the point-to-point step of a broadcast as a tree of direct streams.

#include <boost/test/unit_test.hpp>

#include <map>
#include <set>

#include "banyan/core/owner_groups.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

/// A view that knows owners (vnode v belongs to processor v) and measured distances.
class fake_view final : public tree_view {
public:
  std::map<proc_id, duration> rtts;
  std::set<proc_id> lan;

  proc_id self() const override { return 0; }
  bool participating() const override { return true; }
  vnode_set own_vnodes() const override { return vnode_set{0}; }
  vnode_set all_vnodes() const override { return vnode_set::range(0, 64); }
  proc_id owner(vnode_id v) const override { return v; }
  std::map<proc_id, vnode_set> owners(const vnode_set& vs) const override {
    std::map<proc_id, vnode_set> r;
    vs.for_each([&](vnode_id v) { r[v].insert(v); });
    return r;
  }
  std::vector<tree_child> children(tree_key) const override { return {}; }
  proc_id parent(tree_key) const override { return no_proc; }
  duration max_root_distance() const override { return 0ms; }
  rate min_root_rate() const override { return infinite_rate; }
  std::vector<proc_id> peers() const override { return {1}; }
  std::optional<duration> rtt(proc_id p) const override {
    auto i = rtts.find(p);
    return i == rtts.end() ? std::nullopt : std::optional<duration>{i->second};
  }
  bool local(proc_id p) const override { return lan.count(p) > 0; }
  std::map<proc_id, duration> tree_dists; ///< our distance in each root's latency tree
  std::optional<duration> tree_distance(proc_id root) const override {
    auto i = tree_dists.find(root);
    return i == tree_dists.end() ? std::nullopt : std::optional<duration>{i->second};
  }
  std::optional<duration> smallest_remote_rtt() const override {
    std::optional<duration> best;
    for (auto& [p, r] : rtts)
      if (!lan.count(p) && (!best || r < *best))
        best = r;
    return best;
  }
};

std::map<proc_id, vnode_set> parts_of(std::initializer_list<proc_id> owners) {
  std::map<proc_id, vnode_set> r;
  for (auto p : owners)
    r[p] = vnode_set{p};
  return r;
}

/// The groups partition the parts' vnodes, and every head owns part of its group.
void check_partition(const std::vector<owner_group>& groups,
                     const std::map<proc_id, vnode_set>& parts) {
  vnode_set all, seen;
  for (auto& [p, vs] : parts)
    all |= vs;
  for (auto& g : groups) {
    BOOST_TEST(!g.vnodes.intersects(seen));
    seen |= g.vnodes;
    BOOST_REQUIRE(parts.count(g.head));
    BOOST_TEST(g.vnodes.includes(parts.at(g.head)));
  }
  BOOST_TEST((seen == all));
}

} // namespace

BOOST_AUTO_TEST_SUITE(owner_groups)

BOOST_AUTO_TEST_CASE(fanout_zero_or_one_owner_is_one_stream_per_owner) {
  fake_view v;
  auto parts = parts_of({3, 5, 9});
  auto g = group_owners(v, parts, 0);
  BOOST_REQUIRE_EQUAL(g.size(), 3u);
  check_partition(g, parts);
  auto one = group_owners(v, parts_of({7}), 2);
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  BOOST_TEST(one[0].head == proc_id{7});
}

BOOST_AUTO_TEST_CASE(lan_owners_split_nearest_first_measured_remote_ones_go_to_the_nearest) {
  fake_view v;
  // LAN: 1..6 (0.2 ms, 4 and 5 nearer); remote: 20, 21 at 4 ms, 30 at 10 ms, 31 unmeasured.
  for (proc_id p = 1; p <= 6; ++p) {
    v.lan.insert(p);
    v.rtts[p] = p == 4 || p == 5 ? 150us : 200us;
  }
  v.rtts[20] = 4ms;
  v.rtts[21] = 4100us;
  v.rtts[30] = 10ms;
  auto parts = parts_of({1, 2, 3, 4, 5, 6, 20, 21, 30, 31});
  auto g = group_owners(v, parts, 2);
  check_partition(g, parts);
  BOOST_REQUIRE_EQUAL(g.size(), 4u);
  // Two LAN groups of three, nearest first: {4, 5, 1} headed by 4, {2, 3, 6} by 2.
  BOOST_TEST(g[0].head == proc_id{4});
  BOOST_TEST((g[0].vnodes == (vnode_set{1, 4, 5})));
  BOOST_TEST(g[1].head == proc_id{2});
  BOOST_TEST((g[1].vnodes == (vnode_set{2, 3, 6})));
  // The measured remote owners through the nearest of them.
  BOOST_TEST(g[2].head == proc_id{20});
  BOOST_TEST((g[2].vnodes == (vnode_set{20, 21, 30})));
  // The unmeasured one on its own (it might be next door).
  BOOST_TEST(g[3].head == proc_id{31});
  BOOST_TEST((g[3].vnodes == (vnode_set{31})));
}

BOOST_AUTO_TEST_CASE(without_measurements_owners_split_by_id) {
  fake_view v; // static trees: nothing measured
  auto parts = parts_of({9, 2, 7, 4, 5});
  auto g = group_owners(v, parts, 2);
  check_partition(g, parts);
  BOOST_REQUIRE_EQUAL(g.size(), 2u);
  BOOST_TEST(g[0].head == proc_id{2});
  BOOST_TEST((g[0].vnodes == (vnode_set{2, 4, 5})));
  BOOST_TEST(g[1].head == proc_id{7});
  BOOST_TEST((g[1].vnodes == (vnode_set{7, 9})));
}

BOOST_AUTO_TEST_CASE(a_peer_standing_in_for_unknown_owners_gets_their_part_alone) {
  fake_view v;
  v.lan = {1, 2, 3};
  v.rtts = {{1, 200us}, {2, 200us}, {3, 200us}};
  // Processor 1 stands in for vnodes 40 and 41 (it does not own them).
  auto parts = parts_of({1, 2, 3});
  parts[1] = vnode_set{40, 41};
  parts[5] = vnode_set{5};
  auto g = group_owners(v, parts, 2);
  check_partition(g, parts);
  BOOST_REQUIRE_EQUAL(g.size(), 4u);
  BOOST_TEST(g[0].head == proc_id{1});
  BOOST_TEST((g[0].vnodes == (vnode_set{40, 41})));
  BOOST_TEST(g[1].head == proc_id{2}); // LAN {2, 3} split two ways
  BOOST_TEST(g[2].head == proc_id{3});
  BOOST_TEST(g[3].head == proc_id{5}); // remote, unmeasured
}

BOOST_AUTO_TEST_SUITE_END()

// Owners not measured whose latency trees reach us along a path as long as a wide-area
// round trip are beyond our LAN: they go in the one remote group (headed by the nearest
// measured remote owner) instead of in groups by id, each of which would cross the
// wide-area link with the whole message. Unmeasured owners along LAN-short paths, or
// with no tree place known, are still grouped by id, apart.
BOOST_AUTO_TEST_CASE(unmeasured_owners_far_along_their_trees_join_the_remote_group) {
  fake_view v;
  v.lan = {1, 2};
  v.rtts = {{1, 200us}, {2, 250us}, {10, 6ms}};
  // 11-14: unmeasured, their trees reach us across the WAN (6-7 ms); 20, 21: unmeasured,
  // along LAN paths (0.5 ms); 30: unmeasured, no tree place known.
  v.tree_dists = {{11, 6500us}, {12, 7ms}, {13, 6200us}, {14, 6800us}, {20, 500us}, {21, 450us}};
  auto parts = parts_of({1, 2, 10, 11, 12, 13, 14, 20, 21, 30});
  auto groups = group_owners(v, parts, 2);
  check_partition(groups, parts);
  const owner_group* far = nullptr;
  for (auto& g : groups)
    if (g.head == 10)
      far = &g;
  BOOST_REQUIRE(far);
  BOOST_TEST((far->vnodes == vnode_set{10, 11, 12, 13, 14}));
  for (auto& g : groups) {
    BOOST_TEST(!(g.head >= 11 && g.head <= 14), "a far owner heads its own group: " << g.head);
    if (g.head == 20 || g.head == 21 || g.head == 30)
      BOOST_TEST(!g.vnodes.intersects(far->vnodes));
  }
  // With no remote RTT measured there is no yardstick: the unmeasured are grouped by id.
  v.rtts = {{1, 200us}, {2, 250us}};
  auto parts2 = parts_of({1, 11, 12, 13, 14});
  auto groups2 = group_owners(v, parts2, 2);
  check_partition(groups2, parts2);
  BOOST_TEST(groups2.size() == 3u); // the local owner 1, and 11-14 in two groups by id
  // Only far ones, none measured among the parts: the nearest along its tree heads them.
  v.rtts = {{1, 200us}, {2, 250us}, {10, 6ms}};
  auto parts3 = parts_of({11, 12, 13});
  auto groups3 = group_owners(v, parts3, 2);
  BOOST_REQUIRE(groups3.size() == 1u);
  BOOST_TEST(groups3.front().head == 13u);
}

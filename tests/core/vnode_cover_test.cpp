#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <stdexcept>
#include <vector>

#include "banyan/core/tree_state.hpp"
#include "banyan/core/vnode_cover.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {
inline std::ostream& boost_test_print_type(std::ostream& os, const vnode_set& s) {
  return os << s.to_string();
}
} // namespace banyan

using banyan::proc_id;
using banyan::tree_key;
using banyan::tree_kind;
using banyan::tree_state;
using banyan::vnode_cover;
using banyan::vnode_id;
using banyan::vnode_set;

namespace {

vnode_set random_set(std::mt19937& rng, vnode_id universe) {
  std::uniform_int_distribution<int> runs(0, 5);
  std::uniform_int_distribution<vnode_id> at(0, universe - 1);
  std::uniform_int_distribution<vnode_id> len(1, 12);
  std::vector<vnode_set::interval> xs;
  for (int n = runs(rng); n > 0; --n) {
    auto lo = at(rng);
    xs.push_back({lo, std::min<vnode_id>(universe, lo + len(rng))});
  }
  return vnode_set::from_intervals(std::move(xs));
}

vnode_set union_of(const std::map<int, vnode_set>& sets) {
  vnode_set u;
  for (auto& [k, s] : sets)
    u |= s;
  return u;
}

} // namespace

BOOST_AUTO_TEST_SUITE(vnode_cover_suite)

BOOST_AUTO_TEST_CASE(counts_overlapping_sets_and_keeps_what_another_still_holds) {
  vnode_cover c;
  c.add(vnode_set::range(0, 10));
  c.add(vnode_set::range(5, 15));
  BOOST_TEST(c.members() == vnode_set::range(0, 15));
  BOOST_TEST(c.count(4) == 1u);
  BOOST_TEST(c.count(7) == 2u);
  BOOST_TEST(c.count(15) == 0u);
  c.remove(vnode_set::range(0, 10));
  BOOST_TEST(c.members() == vnode_set::range(5, 15)); // 5-9 still held by the second
  c.remove(vnode_set::range(5, 15));
  BOOST_TEST(c.empty());
  BOOST_TEST(c.members().empty());
}

BOOST_AUTO_TEST_CASE(removing_what_was_not_added_throws_and_changes_nothing) {
  vnode_cover c;
  c.add(vnode_set{1, 2, 3});
  BOOST_CHECK_THROW(c.remove(vnode_set{3, 4}), std::logic_error);
  BOOST_CHECK_THROW(c.remove(vnode_set{0}), std::logic_error);
  BOOST_CHECK_THROW(c.replace(vnode_set{9}, vnode_set{}), std::logic_error);
  BOOST_TEST(c.members() == (vnode_set{1, 2, 3}));
  BOOST_TEST(c.count(3) == 1u);
  BOOST_TEST(c.step_count() == 2u); // [1, 4) counted once, then 0
}

BOOST_AUTO_TEST_CASE(replace_touches_only_the_difference) {
  vnode_cover c;
  c.add(vnode_set::range(0, 8));
  c.add(vnode_set::range(4, 12));
  c.replace(vnode_set::range(4, 12), vnode_set::range(6, 20));
  BOOST_TEST(c.members() == vnode_set::range(0, 20));
  BOOST_TEST(c.count(5) == 1u);
  BOOST_TEST(c.count(6) == 2u);
  BOOST_TEST(c.count(19) == 1u);
}

BOOST_AUTO_TEST_CASE(the_union_matches_a_recomputed_one_after_random_changes) {
  // Sets come, change and go in random order; after each step the cover's members equal
  // the union recomputed from scratch, its counts match, and its steps stay minimal.
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng{seed};
    const vnode_id universe = seed % 2 ? 64 : 4000;
    std::map<int, vnode_set> sets;
    vnode_cover c;
    std::uniform_int_distribution<int> key(0, 9);
    std::uniform_int_distribution<int> what(0, 2);
    for (int step = 0; step < 400; ++step) {
      const int k = key(rng);
      auto it = sets.find(k);
      switch (what(rng)) {
      case 0: // add a new set, or replace one
        if (it == sets.end()) {
          auto s = random_set(rng, universe);
          c.add(s);
          sets.emplace(k, std::move(s));
        } else {
          auto s = random_set(rng, universe);
          c.replace(it->second, s);
          it->second = std::move(s);
        }
        break;
      case 1: // grow or shrink one a little
        if (it != sets.end()) {
          auto r = random_set(rng, universe);
          auto s = (it->second - r) | (r - it->second);
          c.replace(it->second, s);
          it->second = std::move(s);
        }
        break;
      default:
        if (it != sets.end()) {
          c.remove(it->second);
          sets.erase(it);
        }
      }
      const auto want = union_of(sets);
      BOOST_TEST_REQUIRE(c.members() == want);
      for (vnode_id v = 0; v < universe; v += universe / 64 + 1) {
        std::uint32_t n = 0;
        for (auto& [kk, s] : sets)
          n += s.contains(v) ? 1 : 0;
        BOOST_TEST_REQUIRE(c.count(v) == n);
      }
      // Minimal: one step where the count rises from 0 and one where it returns, per
      // run of the union at most as many as the boundaries of all sets.
      std::size_t bounds = 0;
      for (auto& [kk, s] : sets)
        bounds += 2 * s.interval_count();
      BOOST_TEST_REQUIRE(c.step_count() <= bounds);
      BOOST_TEST_REQUIRE(c.step_count() >= 2 * want.interval_count());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_tree_state_subtree_is_own_plus_every_child) {
  // tree_state keeps its children's union in a cover: set, replaced and removed
  // children give the union of what is left, whatever the order.
  std::mt19937 rng{7};
  tree_state t{tree_key{0, tree_kind::latency}, 3};
  std::map<int, vnode_set> kids;
  std::uniform_int_distribution<int> child(4, 12);
  std::uniform_int_distribution<int> coin(0, 3);
  const auto own = vnode_set::range(30, 40);
  for (int step = 0; step < 300; ++step) {
    const int c = child(rng);
    if (coin(rng) == 0) {
      BOOST_TEST(t.remove_child(static_cast<proc_id>(c)) == (kids.erase(c) == 1));
    } else {
      auto s = random_set(rng, 200);
      t.set_child(static_cast<proc_id>(c), s);
      kids[c] = s;
    }
    BOOST_TEST_REQUIRE(t.subtree(own) == (own | union_of(kids)));
    BOOST_TEST_REQUIRE(t.subtree(vnode_set{}) == union_of(kids));
  }
}

BOOST_AUTO_TEST_SUITE_END()

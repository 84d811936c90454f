#include <boost/test/unit_test.hpp>

#include <random>

#include "banyan/core/tree_state.hpp"

using banyan::proc_id;
using banyan::tree_key;
using banyan::tree_kind;
using banyan::tree_state;
using banyan::vnode_id;
using banyan::vnode_set;

BOOST_AUTO_TEST_SUITE(tree_state_suite)

// The subtree set is the union of the processor's own vnodes and every child's subtree,
// however many children there are and however their sets overlap or interleave (the
// many-children path sorts every interval at once instead of a union per child).
BOOST_AUTO_TEST_CASE(subtree_is_the_union_of_own_and_children) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    tree_state t(tree_key{0, tree_kind::bandwidth}, 0);
    vnode_set own;
    for (int i = 0; i < 3; ++i) {
      auto lo = static_cast<vnode_id>(rng() % 1000);
      own |= vnode_set::range(lo, lo + 1 + rng() % 20);
    }
    vnode_set expected = own;
    const auto children = 1 + rng() % 40;
    for (proc_id c = 1; c <= children; ++c) {
      vnode_set vs;
      for (int i = 0, n = static_cast<int>(rng() % 4); i < n; ++i) {
        auto lo = static_cast<vnode_id>(rng() % 1000);
        vs |= vnode_set::range(lo, lo + 1 + rng() % 30);
      }
      t.set_child(c, vs);
      expected |= vs;
      BOOST_TEST((t.subtree(own) == expected), "seed " << seed << " children " << c);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

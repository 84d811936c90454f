#pragma once
/// Checks shared by the supervisor suites (supervisor_test.cpp, supervisor_crash_test.cpp,
/// supervisor_join_test.cpp): trees that span the live processors, subtree sets and routing
/// tables that are true, and a grid that has settled.

#include <boost/test/unit_test.hpp>

#include <set>

#include "banyan/core/supervisor_view.hpp"
#include "core/mini_grid.hpp"
#include "core/random_topology.hpp"

namespace banyan::test::supervisor_checks {

using banyan::test::mini_grid;

inline topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

using banyan::test::random_topology;

/// Every tree rooted at a live processor spans exactly the live processors.
inline void check_trees(const mini_grid& g) {
  auto live = g.live();
  for (proc_id r = 0; r < live.size(); ++r) {
    if (!live[r])
      continue;
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto problem = g.tree_of({r, k}).validate(live);
      BOOST_TEST_REQUIRE(!problem.has_value(),
                         to_string(k) << " tree of " << r << ": " << problem.value_or(""));
    }
  }
}

/// In the tree `key`, each parent's per-child subtree vnode sets are exactly the vnodes
/// below that child.
inline void check_subtrees_of(const mini_grid& g, tree_key key) {
  auto live = g.live();
  auto [r, k] = key;
  auto t = g.tree_of(key);
  auto kids = t.children();
  // vnodes below each processor, computed from the tree itself
  std::vector<vnode_set> below(live.size());
  std::function<vnode_set(proc_id)> fill = [&](proc_id p) {
    below[p] = g.sup(p)->own_vnodes();
    for (auto c : kids[p])
      below[p] |= fill(c);
    return below[p];
  };
  fill(r);
  for (proc_id p = 0; p < live.size(); ++p) {
    if (!live[p])
      continue;
    auto& st = *g.sup(p)->tree(key);
    BOOST_TEST_REQUIRE(st.children().size() == kids[p].size(),
                       "tree " << r << " " << to_string(k) << ": " << p << " has "
                               << st.children().size() << " children, " << kids[p].size()
                               << " name it their parent");
    for (auto c : kids[p])
      BOOST_TEST_REQUIRE((st.children().at(c) == below[c]),
                         "tree " << r << " " << to_string(k) << ": " << p << " thinks child "
                                 << c << " holds " << st.children().at(c).to_string()
                                 << ", it holds " << below[c].to_string());
  }
}

/// Each parent's per-child subtree vnode sets are exactly the vnodes below that child,
/// in every tree rooted at a live processor.
inline void check_subtrees(const mini_grid& g) {
  auto live = g.live();
  for (proc_id r = 0; r < live.size(); ++r) {
    if (!live[r])
      continue;
    for (auto k : {tree_kind::latency, tree_kind::bandwidth})
      check_subtrees_of(g, {r, k});
  }
}

/// Every live processor has the same routing table, and owns what it says.
inline void check_routing(const mini_grid& g, std::size_t vnodes) {
  auto& conflicts = g.ownership_conflicts();
  BOOST_TEST_REQUIRE(conflicts.empty(), (conflicts.empty() ? std::string{} : conflicts.front()));
  auto live = g.live();
  const supervisor* first = nullptr;
  vnode_set owned;
  for (proc_id p = 0; p < live.size(); ++p) {
    if (!live[p])
      continue;
    auto s = g.sup(p);
    if (!first)
      first = s;
    for (vnode_id v = 0; v < vnodes; ++v)
      BOOST_TEST_REQUIRE(s->routes().owner(v) == first->routes().owner(v),
                         "vnode " << v << ": processor " << p << " says "
                                  << s->routes().owner(v) << " (epoch " << s->routes().epoch(v)
                                  << "), processor " << first->self() << " says "
                                  << first->routes().owner(v) << " (epoch "
                                  << first->routes().epoch(v) << "); history:"
                                  << g.ownership_history(v));
    BOOST_TEST_REQUIRE((s->own_vnodes() == s->routes().owned_by(p)));
    BOOST_TEST_REQUIRE(!owned.intersects(s->own_vnodes()));
    owned |= s->own_vnodes();
  }
  BOOST_TEST((owned == vnode_set::range(0, static_cast<vnode_id>(vnodes))));
}

/// The grid has settled (nothing measuring or waiting) and its trees, subtree sets and
/// routing tables are all true.
inline void check_settled(const mini_grid& g, std::size_t vnodes) {
  BOOST_TEST(!g.busy());
  check_trees(g);
  check_subtrees(g);
  check_routing(g, vnodes);
}

} // namespace banyan::test::supervisor_checks

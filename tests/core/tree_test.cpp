#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "banyan/core/tree.hpp"

using banyan::no_proc;
using banyan::proc_id;
using banyan::tree;
using procs = std::vector<proc_id>;

namespace {

constexpr proc_id X = no_proc;

//          0            proc 5 is absent
//        /   \          parent = {X, 0, 0, 1, 1, X, 2}
//       1     2
//      / \     \        depths = {0, 1, 1, 2, 2, -1, 2}
//     3   4     6
tree sample() {
  return tree(0, {X, 0, 0, 1, 1, X, 2});
}
std::vector<bool> sample_members() {
  return {true, true, true, true, true, false, true};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The error validate() reports, or "" when the tree is valid.
std::string problem(const tree& t, const std::vector<bool>& members) {
  auto e = t.validate(members);
  return e ? *e : std::string();
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(tree_structure)

BOOST_AUTO_TEST_CASE(accessors) {
  auto t = sample();
  BOOST_TEST(t.root() == 0u);
  BOOST_TEST(t.size() == 7u);
  BOOST_TEST(t.parent(0) == no_proc);
  BOOST_TEST(t.parent(4) == 1u);
  BOOST_TEST(t.parent(5) == no_proc);
  BOOST_TEST(t.parent(100) == no_proc); // out of range
  BOOST_TEST(t.parents() == (procs{X, 0, 0, 1, 1, X, 2}));
  BOOST_TEST((tree::from_parents(0, {X, 0, 0, 1, 1, X, 2}) == t));
  BOOST_TEST((tree(0, {X, 0, 0, 1, 0, X, 2}) != t));
  BOOST_TEST((tree(1, {X, 0, 0, 1, 1, X, 2}) != t));
  tree empty;
  BOOST_TEST(empty.root() == no_proc);
  BOOST_TEST(empty.size() == 0u);
  BOOST_TEST(empty.children().empty());
}

BOOST_AUTO_TEST_CASE(children_are_sorted) {
  // Parents listed out of order must still give ascending child lists.
  tree t(3, {3, 3, 0, X, 3, 0});
  auto kids = t.children();
  BOOST_TEST_REQUIRE(kids.size() == 6u);
  BOOST_TEST(kids[3] == (procs{0, 1, 4}));
  BOOST_TEST(kids[0] == (procs{2, 5}));
  BOOST_TEST(kids[1].empty());
  BOOST_TEST(kids[2].empty());
  auto s = sample().children();
  BOOST_TEST(s[0] == (procs{1, 2}));
  BOOST_TEST(s[1] == (procs{3, 4}));
  BOOST_TEST(s[2] == (procs{6}));
  BOOST_TEST(s[5].empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tree_validate)

BOOST_AUTO_TEST_CASE(accepts_valid_trees) {
  BOOST_TEST(!sample().validate(sample_members()).has_value());
  BOOST_TEST(!tree(2, {X, X, X}).validate({false, false, true}).has_value()); // lone root
  BOOST_TEST(!tree().validate({}).has_value());                               // empty
  BOOST_TEST(!tree(X, {X, X}).validate({false, false}).has_value());
  // A chain 4 -> 3 -> 2 -> 1 -> 0.
  BOOST_TEST(!tree(0, {X, 0, 1, 2, 3}).validate(std::vector<bool>(5, true)).has_value());
}

BOOST_AUTO_TEST_CASE(member_count_mismatch) {
  auto e = problem(sample(), {true, true});
  BOOST_TEST(contains(e, "2 processors"), e);
  BOOST_TEST(contains(e, "7"), e);
}

BOOST_AUTO_TEST_CASE(wrong_root) {
  auto m = sample_members();
  // Root that has a parent.
  auto e = problem(tree(0, {1, 0, 0, 1, 1, X, 2}), m);
  BOOST_TEST(contains(e, "root 0 has parent 1"), e);
  // Root that is not a member.
  e = problem(tree(5, {X, 0, 0, 1, 1, X, 2}), m);
  BOOST_TEST(contains(e, "root 5 is not a member"), e);
  // Root out of range.
  e = problem(tree(9, {X, 0, 0, 1, 1, X, 2}), m);
  BOOST_TEST(contains(e, "root 9 is out of range"), e);
  // No root at all while there are members.
  e = problem(tree(X, {X, 0, 0, 1, 1, X, 2}), m);
  BOOST_TEST(contains(e, "no root"), e);
  // Re-rooted at 1 with the link 1 -> 0 reversed: a different but valid tree.
  e = problem(tree(1, {1, X, 0, 1, 1, X, 2}), m);
  BOOST_TEST(e.empty(), e);
}

BOOST_AUTO_TEST_CASE(orphans) {
  auto e = problem(tree(0, {X, 0, 0, X, 1, X, 2}), sample_members());
  BOOST_TEST(contains(e, "proc 3"), e);
  BOOST_TEST(contains(e, "no parent"), e);
  // A member added to the set but never attached.
  auto m = sample_members();
  m[5] = true;
  e = problem(sample(), m);
  BOOST_TEST(contains(e, "proc 5"), e);
  BOOST_TEST(contains(e, "orphan"), e);
}

BOOST_AUTO_TEST_CASE(non_members) {
  auto m = sample_members();
  // A member hanging under a non-member.
  auto e = problem(tree(0, {X, 0, 0, 1, 1, X, 5}), m);
  BOOST_TEST(contains(e, "proc 6: parent 5 is not a member"), e);
  // A non-member with a parent.
  e = problem(tree(0, {X, 0, 0, 1, 1, 2, 2}), m);
  BOOST_TEST(contains(e, "proc 5 is not a member but has parent 2"), e);
  // A member whose parent is out of range.
  e = problem(tree(0, {X, 0, 0, 1, 1, X, 17}), m);
  BOOST_TEST(contains(e, "proc 6: parent 17 is out of range"), e);
}

BOOST_AUTO_TEST_CASE(cycles) {
  // 3 -> 4 -> 6 -> 3 is detached from the root.
  auto e = problem(tree(0, {X, 0, 0, 4, 6, X, 3}), sample_members());
  BOOST_TEST(contains(e, "cycle"), e);
  BOOST_TEST(contains(e, "3 -> 4 -> 6 -> 3"), e);
  // Self loop.
  e = problem(tree(0, {X, 1, 0, 1, 1, X, 2}), sample_members());
  BOOST_TEST(contains(e, "proc 1 is its own parent"), e);
  // A tail leading into a cycle: 4 -> 3 -> 6 -> 2 -> 3; the cycle is named.
  e = problem(tree(0, {X, 0, 3, 6, 3, X, 2}), sample_members());
  BOOST_TEST(contains(e, "2 -> 3 -> 6 -> 2"), e);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tree_metrics)

BOOST_AUTO_TEST_CASE(depths_on_hand_made_trees) {
  auto t = sample();
  BOOST_TEST(t.depths() == (std::vector<int>{0, 1, 1, 2, 2, -1, 2}));
  BOOST_TEST(t.depth_max() == 2);
  BOOST_TEST(t.depth_mean() == 8.0 / 5.0, boost::test_tools::tolerance(1e-12));

  tree chain(0, {X, 0, 1, 2, 3});
  BOOST_TEST(chain.depths() == (std::vector<int>{0, 1, 2, 3, 4}));
  BOOST_TEST(chain.depth_max() == 4);
  BOOST_TEST(chain.depth_mean() == 2.5, boost::test_tools::tolerance(1e-12));

  tree star(2, {2, 2, X, 2, 2});
  BOOST_TEST(star.depth_max() == 1);
  BOOST_TEST(star.depth_mean() == 1.0, boost::test_tools::tolerance(1e-12));

  tree lone(0, {X, X});
  BOOST_TEST(lone.depths() == (std::vector<int>{0, -1}));
  BOOST_TEST(lone.depth_max() == 0);
  BOOST_TEST(lone.depth_mean() == 0.0);

  BOOST_TEST(tree().depths().empty());
  BOOST_TEST(tree().depth_max() == 0);

  // A detached cycle is unreachable, and does not hang the traversal.
  tree broken(0, {X, 0, 3, 2});
  BOOST_TEST(broken.depths() == (std::vector<int>{0, 1, -1, -1}));
  BOOST_TEST(broken.depth_max() == 1);
  // The root itself on a cycle (an invalid tree): it stays at depth 0.
  tree looped(0, {2, 0, 1});
  BOOST_TEST(looped.depths() == (std::vector<int>{0, 1, 2}));
  BOOST_TEST(looped.descendants(0) == 2u);
}

BOOST_AUTO_TEST_CASE(descendants_on_hand_made_trees) {
  auto t = sample();
  BOOST_TEST(t.descendants(0) == 5u);
  BOOST_TEST(t.descendants(1) == 2u);
  BOOST_TEST(t.descendants(2) == 1u);
  BOOST_TEST(t.descendants(3) == 0u);
  BOOST_TEST(t.descendants(5) == 0u);
  BOOST_TEST(t.descendants(42) == 0u);
  tree chain(0, {X, 0, 1, 2, 3});
  BOOST_TEST(chain.descendants(1) == 3u);
  // In a cycle every member is below every other; counting must still stop.
  tree broken(0, {X, 0, 3, 2});
  BOOST_TEST(broken.descendants(2) == 1u);
}

BOOST_AUTO_TEST_CASE(cross_edges_count_cluster_changes) {
  auto t = sample();
  // Clusters: {0, 1, 3}, {2, 6}, {4}, and 5 absent (its cluster is irrelevant).
  std::vector<int> clusters{0, 0, 1, 0, 2, 1, 1};
  // Edges 1-0 same, 2-0 cross, 3-1 same, 4-1 cross, 6-2 same.
  BOOST_TEST(t.cross_edges(clusters) == 2u);
  BOOST_TEST(t.cross_edges(std::vector<int>(7, 0)) == 0u);
  BOOST_TEST(t.cross_edges({0, 1, 2, 3, 4, 5, 6}) == 5u);
  // Processors missing from cluster_of count as cluster -1.
  // With {0, 0, 0}: 1-0 and 2-0 stay inside cluster 0; 3-1, 4-1, 6-2 leave it.
  BOOST_TEST(t.cross_edges({0, 0, 0}) == 3u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tree_property)

// Random valid trees: validate accepts them, depth(child) = depth(parent) + 1,
// descendants add up; then one re-pointed link either keeps a valid tree or is caught.
BOOST_AUTO_TEST_CASE(random_trees) {
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    auto n = static_cast<proc_id>(1 + rng() % 24);
    std::vector<bool> members(n);
    for (proc_id p = 0; p < n; ++p)
      members[p] = rng() % 5 != 0;
    procs order;
    for (proc_id p = 0; p < n; ++p)
      if (members[p])
        order.push_back(p);
    if (order.empty())
      continue;
    std::shuffle(order.begin(), order.end(), rng);
    // Attach each member under one placed before it in the shuffled order.
    procs parent(n, X);
    for (std::size_t i = 1; i < order.size(); ++i)
      parent[order[i]] = order[rng() % i];
    tree t(order[0], parent);
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_TEST(!t.validate(members).has_value(), problem(t, members));
      auto d = t.depths();
      auto kids = t.children();
      int max_depth = 0;
      double sum = 0;
      for (proc_id p = 0; p < n; ++p) {
        if (!members[p]) {
          BOOST_TEST(d[p] == -1);
          BOOST_TEST(kids[p].empty());
          continue;
        }
        if (p != t.root()) {
          BOOST_TEST(d[p] == d[parent[p]] + 1);
          sum += d[p];
        }
        max_depth = std::max(max_depth, d[p]);
        std::size_t below = 0;
        for (auto c : kids[p])
          below += 1 + t.descendants(c);
        BOOST_TEST(t.descendants(p) == below);
      }
      BOOST_TEST(t.descendants(t.root()) == order.size() - 1);
      BOOST_TEST(t.depth_max() == max_depth);
      double mean = order.size() > 1 ? sum / static_cast<double>(order.size() - 1) : 0.0;
      BOOST_TEST(t.depth_mean() == mean, boost::test_tools::tolerance(1e-12));

      // Re-point one non-root member: under a descendant of itself (or itself) it must
      // be rejected as a cycle; anywhere else the tree stays valid.
      if (order.size() > 1) {
        auto p = order[1 + rng() % (order.size() - 1)];
        auto q = order[rng() % order.size()];
        bool below_p = q == p;
        for (auto x = q; x != no_proc && !below_p; x = parent[x])
          below_p = parent[x] == p;
        auto moved = parent;
        moved[p] = q;
        auto e = problem(tree(t.root(), moved), members);
        if (below_p) {
          BOOST_TEST(!e.empty());
          BOOST_TEST((contains(e, "cycle") || contains(e, "own parent")), e);
        } else {
          BOOST_TEST(e.empty(), e);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tree_dot)

BOOST_AUTO_TEST_CASE(dot_text) {
  auto t = sample();
  std::vector<int> clusters{0, 0, 1, 0, 2, 1, 1};
  std::vector<std::string> labels(7);
  labels[4] = "12.5 ms";
  auto dot = t.to_dot(clusters, {"tokyo", "osaka \"west\""}, "latency tree, root 0", labels);
  BOOST_TEST_MESSAGE(dot);
  BOOST_TEST(contains(dot, "digraph"));
  BOOST_TEST(contains(dot, "label=\"latency tree, root 0\""));
  BOOST_TEST(contains(dot, "subgraph cluster_0 {"));
  BOOST_TEST(contains(dot, "subgraph cluster_1 {"));
  BOOST_TEST(contains(dot, "subgraph cluster_2 {"));
  BOOST_TEST(contains(dot, "label=\"tokyo\""));
  BOOST_TEST(contains(dot, "label=\"osaka \\\"west\\\"\"")); // quotes escaped
  BOOST_TEST(contains(dot, "label=\"cluster 2\""));           // no name given
  BOOST_TEST(contains(dot, "0 [fillcolor=\"#8dd3c7\", shape=doublecircle"));
  // Every edge goes parent -> child; cross-cluster ones are bold; labels attached.
  BOOST_TEST(contains(dot, "0 -> 1;"));
  BOOST_TEST(contains(dot, "0 -> 2 [style=bold"));
  BOOST_TEST(contains(dot, "1 -> 3;"));
  BOOST_TEST(contains(dot, "1 -> 4 [style=bold, color=\"#c0392b\", label=\"12.5 ms\"];"));
  BOOST_TEST(contains(dot, "2 -> 6;"));
  BOOST_TEST(!contains(dot, "-> 0"));
  // Absent processor 5 is not drawn.
  BOOST_TEST(!contains(dot, "  5 ["));
  BOOST_TEST(!contains(dot, "-> 5"));
  // Five edges in all.
  std::size_t arrows = 0;
  for (auto pos = dot.find("->"); pos != std::string::npos; pos = dot.find("->", pos + 2))
    ++arrows;
  BOOST_TEST(arrows == 5u);
}

BOOST_AUTO_TEST_CASE(dot_accepted_by_graphviz) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) {
    BOOST_TEST_MESSAGE("graphviz 'dot' not in PATH: skipping the rendering check");
    return;
  }
  namespace fs = std::filesystem;
  // A per-process name, so that concurrent runs of this test cannot collide.
  auto base = fs::temp_directory_path() / ("banyan_tree_test_" + std::to_string(::getpid()));
  auto render = [&](const tree& t, const std::vector<int>& clusters,
                    const std::vector<std::string>& names, const std::string& title) {
    auto in = base;
    in += ".dot";
    auto svg = base;
    svg += ".svg";
    auto err = base;
    err += ".err";
    {
      std::ofstream f(in);
      f << t.to_dot(clusters, names, title);
    }
    auto cmd = "dot -Tsvg '" + in.string() + "' -o '" + svg.string() + "' 2>'" +
               err.string() + "'";
    int rc = std::system(cmd.c_str());
    auto out = slurp(svg);
    auto diagnostics = slurp(err);
    fs::remove(in);
    fs::remove(svg);
    fs::remove(err);
    BOOST_TEST(rc == 0, title);
    BOOST_TEST(diagnostics.empty(), title << ": " << diagnostics);
    BOOST_TEST(contains(out, "<svg"), title);
    return out;
  };
  auto svg = render(sample(), {0, 0, 1, 0, 2, 1, 1}, {"a", "b \\ \"c\""}, "sample \"tree\"");
  BOOST_TEST(contains(svg, "sample &quot;tree&quot;"));
  // Unclustered processors, a lone root, the empty tree.
  render(tree(0, {X, 0, 0}), {}, {}, "no clusters");
  render(tree(1, {X, X}), {3, 3}, {}, "lone root");
  render(tree(), {}, {}, "empty");
  // Many clusters (palette wraps around).
  procs parent(40, 0);
  parent[0] = X;
  std::vector<int> clusters(40);
  std::iota(clusters.begin(), clusters.end(), 0);
  render(tree(0, parent), clusters, {}, "forty clusters");
}

BOOST_AUTO_TEST_SUITE_END()

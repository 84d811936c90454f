#pragma once
/// A rooted spanning tree over processors 0..n-1, as a plain value: a root and one
/// parent link per processor. Builders return trees, collectives and tools consume them.
///
///          0          root       = 0
///        /   \        parent     = {no_proc, 0, 0, 1, 1, no_proc}
///       1     2       proc 5 is absent (not a member)
///      / \            children() = {{1, 2}, {3, 4}, {}, {}, {}, {}}
///     3   4

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "banyan/core/types.hpp"

namespace banyan {

class tree {
public:
  /// The empty tree: no root, no processors.
  tree() = default;
  /// `parent[p]` is p's parent; `no_proc` for the root and for absent processors.
  tree(proc_id root, std::vector<proc_id> parent);
  /// Same as the constructor; reads better where a builder hands back its result.
  static tree from_parents(proc_id root, std::vector<proc_id> parent);

  proc_id root() const noexcept { return root_; }
  /// Number of processor slots (members or not), i.e. `parents().size()`.
  std::size_t size() const noexcept { return parent_.size(); }
  /// p's parent; `no_proc` for the root, absent processors and p out of range.
  proc_id parent(proc_id p) const noexcept;
  const std::vector<proc_id>& parents() const noexcept { return parent_; }
  /// Children of every processor, each list in ascending id order. Links to a parent
  /// outside 0..n-1 are left out.
  std::vector<std::vector<proc_id>> children() const;

  /// Checks that the tree spans exactly `members` (one flag per processor): the root is
  /// a member without a parent, every other member reaches the root through members by
  /// parent links without a cycle, and non-members have no parent and no children.
  /// Returns what is wrong and where ("proc 4: parent 7 is not a member"), or nothing.
  /// The empty tree spans an empty member set.
  std::optional<std::string> validate(const std::vector<bool>& members) const;

  /// Hops from the root for each processor; -1 for those the root does not reach.
  std::vector<int> depths() const;
  /// Largest depth over the processors the root reaches (0 for a lone root or an
  /// empty tree).
  int depth_max() const;
  /// Mean depth over the processors the root reaches, root excluded (0 if none).
  double depth_mean() const;
  /// Number of processors below p (p excluded); 0 for p out of range.
  std::size_t descendants(proc_id p) const;

  /// Number of links (p, parent(p)) whose ends lie in different clusters. A processor
  /// missing from `cluster_of` counts as cluster -1.
  std::size_t cross_edges(const std::vector<int>& cluster_of) const;

  /// Graphviz DOT text: one `subgraph cluster_X` per cluster holding its processors,
  /// filled with the cluster's colour; the root drawn as a double circle; edges from
  /// parent to child, cross-cluster edges bold. `cluster_names[c]` labels cluster c
  /// ("cluster c" if missing). `edge_labels[p]`, if given and not empty, labels the edge
  /// into p. Processors that are neither the root nor linked to anything are left out.
  std::string to_dot(const std::vector<int>& cluster_of,
                     const std::vector<std::string>& cluster_names, const std::string& title,
                     const std::vector<std::string>& edge_labels = {}) const;

  friend bool operator==(const tree& a, const tree& b) {
    return a.root_ == b.root_ && a.parent_ == b.parent_;
  }
  friend bool operator!=(const tree& a, const tree& b) { return !(a == b); }

private:
  proc_id root_ = no_proc;
  std::vector<proc_id> parent_;
};

} // namespace banyan

#pragma once
/// A `tree_view` over fixed trees: the baselines (binomial, MagPIe, MST, ... from
/// core/tree_builders.hpp) run through the same broadcast and reduction engines as
/// banyan's adaptive trees. Every processor is a member for good and ownership follows
/// a routing table that the caller keeps (and may change; the view reads it on every
/// question). A child's subtree vnode set is computed from the tree and the table.
///
///   static_tree_view v{self, routes, [&](tree_key k) { return binomial_tree(n, k.root); }};

#include <functional>
#include <map>
#include <vector>

#include "banyan/core/routing_table.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/tree_view.hpp"

namespace banyan {

class static_tree_view final : public tree_view {
public:
  /// `trees(k)` gives the tree for key k (asked once per key; the same shape may serve
  /// both kinds). `routes` must outlive the view. `max_root_distance` and
  /// `min_root_rate` are what reductions size their timeouts from (static trees carry no
  /// measurements).
  static_tree_view(proc_id self, const routing_table& routes, std::function<tree(tree_key)> trees,
                   duration max_root_distance = std::chrono::milliseconds(10),
                   rate min_root_rate = infinite_rate);

  proc_id self() const override { return self_; }
  bool participating() const override { return true; }
  vnode_set own_vnodes() const override { return routes_.owned_by(self_); }
  vnode_set all_vnodes() const override { return routes_.all(); }
  proc_id owner(vnode_id v) const override { return routes_.owner(v); }
  std::map<proc_id, vnode_set> owners(const vnode_set& vs) const override {
    return routes_.partition(vs);
  }
  /// Exact: the descendants counted in the tree, subtree sets from the routing table.
  std::vector<tree_child> children(tree_key k) const override;
  proc_id parent(tree_key k) const override;
  duration max_root_distance() const override { return max_dist_; }
  rate min_root_rate() const override { return min_rate_; }
  /// Every other processor that owns a vnode, by id.
  std::vector<proc_id> peers() const override;

private:
  const tree& tree_for(tree_key k) const;

  proc_id self_;
  const routing_table& routes_;
  std::function<tree(tree_key)> make_;
  duration max_dist_;
  rate min_rate_;
  mutable std::map<tree_key, tree> trees_;
};

} // namespace banyan

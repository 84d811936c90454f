#include "banyan/core/static_tree_view.hpp"

namespace banyan {

static_tree_view::static_tree_view(proc_id self, const routing_table& routes,
                                   std::function<tree(tree_key)> trees,
                                   duration max_root_distance, rate min_root_rate)
  : self_(self), routes_(routes), make_(std::move(trees)), max_dist_(max_root_distance),
    min_rate_(min_root_rate) {}

const tree& static_tree_view::tree_for(tree_key k) const {
  auto i = trees_.find(k);
  if (i == trees_.end())
    i = trees_.emplace(k, make_(k)).first;
  return i->second;
}

std::vector<tree_child> static_tree_view::children(tree_key k) const {
  const tree& t = tree_for(k);
  std::vector<tree_child> result;
  if (self_ >= t.size())
    return result;
  const auto kids = t.children();
  // Ownership may change between calls, so subtree sets are computed afresh.
  // A valid tree has no cycle; the marks keep a malformed one from looping.
  std::vector<proc_id> stack;
  std::vector<bool> seen(t.size(), false);
  seen[self_] = true;
  for (auto c : kids[self_]) {
    tree_child child{c, {}, t.descendants(c)};
    stack.assign(1, c);
    while (!stack.empty()) {
      auto p = stack.back();
      stack.pop_back();
      if (seen[p])
        continue;
      seen[p] = true;
      child.subtree |= routes_.owned_by(p);
      for (auto q : kids[p])
        stack.push_back(q);
    }
    result.push_back(std::move(child));
  }
  return result;
}

proc_id static_tree_view::parent(tree_key k) const { return tree_for(k).parent(self_); }

std::vector<proc_id> static_tree_view::peers() const {
  std::vector<proc_id> result;
  for (auto& [owner, vs] : routes_.partition(routes_.all()))
    if (owner != self_ && owner != no_proc)
      result.push_back(owner);
  return result;
}

} // namespace banyan

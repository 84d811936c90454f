#pragma once
// The trees a supervisor takes part in: a latency and a bandwidth tree per root, by key.
// Every member is a root (supervisor_config::tree_set all_roots), or only the roots whose
// trees are open (on_demand, tree_set.hpp). An empty slot costs one pointer.

#include <cstddef>
#include <memory>
#include <vector>

#include "banyan/core/tree_state.hpp"

namespace banyan::sup {

class tree_table {
public:
  static std::size_t index_of(tree_key k) {
    return static_cast<std::size_t>(k.root) * tree_kind_count + static_cast<std::size_t>(k.kind);
  }

  tree_state* find(tree_key k) {
    auto i = index_of(k);
    return i < trees_.size() && trees_[i] ? trees_[i].get() : nullptr;
  }
  const tree_state* find(tree_key k) const {
    auto i = index_of(k);
    return i < trees_.size() && trees_[i] ? trees_[i].get() : nullptr;
  }
  tree_state* at(std::size_t i) { return i < trees_.size() && trees_[i] ? trees_[i].get() : nullptr; }

  /// Slots for every tree up to root p; returns the number of slots.
  std::size_t make_room(proc_id p) {
    auto needed = (static_cast<std::size_t>(p) + 1) * tree_kind_count;
    if (trees_.size() < needed)
      trees_.resize(needed);
    return trees_.size();
  }
  /// Creates the trees rooted at p, with `self` taking part.
  void add_root(proc_id p, proc_id self) {
    for (auto k : {tree_kind::latency, tree_kind::bandwidth})
      trees_[index_of({p, k})] = std::make_unique<tree_state>(tree_key{p, k}, self);
  }
  void drop_root(proc_id p) {
    for (auto k : {tree_kind::latency, tree_kind::bandwidth})
      if (auto i = index_of({p, k}); i < trees_.size())
        trees_[i].reset();
  }
  /// Whether the trees rooted at p exist here.
  bool has_root(proc_id p) const { return find({p, tree_kind::latency}) != nullptr; }
  /// Every slot, some empty: iterate with `if (t)`.
  std::vector<std::unique_ptr<tree_state>>& all() { return trees_; }
  const std::vector<std::unique_ptr<tree_state>>& all() const { return trees_; }

  bool all_parented() const {
    for (auto& t : trees_)
      if (t && !t->connected())
        return false;
    return true;
  }
  void reset() { trees_.clear(); }

private:
  std::vector<std::unique_ptr<tree_state>> trees_; // by index_of(key)
};

} // namespace banyan::sup

#pragma once
// The trees a supervisor takes part in: a latency and a bandwidth tree per root, by key.
// Every member is a root (supervisor_config::tree_set all_roots), or only the roots whose
// trees are open (on_demand, tree_set.hpp). Only trees that exist take room.

#include <algorithm>
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

  tree_state* find(tree_key k) { return at(index_of(k)); }
  const tree_state* find(tree_key k) const {
    auto j = pos(index_of(k));
    return j < index_.size() && index_[j] == index_of(k) ? trees_[j].get() : nullptr;
  }
  /// The tree at index_of(key) == i; nullptr if there is none.
  tree_state* at(std::size_t i) {
    auto j = pos(i);
    return j < index_.size() && index_[j] == i ? trees_[j].get() : nullptr;
  }

  /// Indices for every tree up to root p (update_batching keeps flags by index); returns
  /// their number.
  std::size_t make_room(proc_id p) {
    slots_ = std::max(slots_, (static_cast<std::size_t>(p) + 1) * tree_kind_count);
    return slots_;
  }
  /// Creates the trees rooted at p, with `self` taking part.
  void add_root(proc_id p, proc_id self) {
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto i = index_of({p, k});
      auto j = pos(i);
      auto t = std::make_unique<tree_state>(tree_key{p, k}, self);
      if (j < index_.size() && index_[j] == i) {
        trees_[j] = std::move(t);
      } else {
        index_.insert(index_.begin() + static_cast<std::ptrdiff_t>(j), i);
        trees_.insert(trees_.begin() + static_cast<std::ptrdiff_t>(j), std::move(t));
      }
    }
  }
  void drop_root(proc_id p) {
    for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
      auto i = index_of({p, k});
      if (auto j = pos(i); j < index_.size() && index_[j] == i) {
        index_.erase(index_.begin() + static_cast<std::ptrdiff_t>(j));
        trees_.erase(trees_.begin() + static_cast<std::ptrdiff_t>(j));
      }
    }
  }
  /// Whether the trees rooted at p exist here.
  bool has_root(proc_id p) const { return find({p, tree_kind::latency}) != nullptr; }
  /// Every tree, by index_of(key) (a root's latency tree before its bandwidth tree).
  /// No entry is empty; iterating with `if (t)` does no harm.
  std::vector<std::unique_ptr<tree_state>>& all() { return trees_; }
  const std::vector<std::unique_ptr<tree_state>>& all() const { return trees_; }

  bool all_parented() const {
    for (auto& t : trees_)
      if (t && !t->connected())
        return false;
    return true;
  }
  void reset() {
    trees_.clear();
    index_.clear();
    slots_ = 0;
  }

private:
  /// Where index i is, or would be inserted, in index_.
  std::size_t pos(std::size_t i) const {
    // Every member a root (all_roots) and no id missing: index i is at i (the indices
    // increase, so i at place i has every smaller one before it). Else a binary search.
    if (i < index_.size() && index_[i] == i)
      return i;
    return static_cast<std::size_t>(std::lower_bound(index_.begin(), index_.end(), i)
                                    - index_.begin());
  }

  /// Only the trees that exist, sorted by index_of(key), with their indices alongside:
  /// on demand a member holds a few roots' trees, and a slot per member (a pointer per
  /// tree, as this table was) costs 16 bytes per member on every processor.
  std::vector<std::unique_ptr<tree_state>> trees_;
  std::vector<std::size_t> index_;
  std::size_t slots_ = 0; ///< make_room's bound: index_of of every root seen, plus one
};

} // namespace banyan::sup

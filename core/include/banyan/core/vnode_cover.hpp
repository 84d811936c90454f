#pragma once
/// A multiset of vnode sets and their union, kept up to date as sets come and go.
///
/// A tree's subtree set is the union of its children's subtree sets. Recomputing that
/// union on every change sorts every child's intervals; here a child's change costs the
/// intervals it adds or removes (found by a binary search each), and the union is read
/// in one pass over the covered runs when it is asked for after a change.
///
/// The cover counts, for each vnode, how many of the sets added (and not removed) hold
/// it. Removing a set that was not added (a vnode whose count would drop below zero) is
/// a caller bug and throws `std::logic_error`, leaving the cover unchanged.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

class vnode_cover {
public:
  /// Counts each member of `s` once more.
  void add(const vnode_set& s);
  /// Counts each member of `s` once less; every member must be counted at least once.
  void remove(const vnode_set& s);
  /// Replaces `before` (added earlier) by `after`: only their difference is touched.
  void replace(const vnode_set& before, const vnode_set& after);
  void clear() noexcept;

  /// The vnodes counted at least once.
  const vnode_set& members() const;
  /// How many of the sets counted hold `v`.
  std::uint32_t count(vnode_id v) const;
  bool empty() const noexcept { return steps_.empty(); }
  /// Number of places where the count changes (the cost of the cover).
  std::size_t step_count() const noexcept { return steps_.size(); }

private:
  /// The count is `count` from `at` up to the next step's `at`; before the first step
  /// and from the last step on (whose count is 0) it is 0. Steps are sorted by `at`,
  /// adjacent steps differ in count, and the first step's count is not 0.
  struct step {
    vnode_id at;
    std::uint32_t count;
  };
  void add_interval(vnode_id lo, vnode_id hi, bool up);
  bool can_remove(const vnode_set& s) const;
  std::size_t split_at(vnode_id v);
  void tidy(std::size_t i);

  std::vector<step> steps_;
  mutable vnode_set members_;
  mutable bool stale_ = false;
};

} // namespace banyan

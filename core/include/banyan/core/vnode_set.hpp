#pragma once
/// A set of virtual nodes stored as sorted, disjoint, non-adjacent half-open
/// intervals [lo, hi). Contiguous ranges cost one interval however long they are, which
/// is what compresses broadcast headers (the paper's planned improvement).

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/types.hpp"

namespace banyan {

class vnode_set {
public:
  struct interval {
    vnode_id lo; ///< first member
    vnode_id hi; ///< one past the last member (lo < hi)
    friend bool operator==(interval a, interval b) { return a.lo == b.lo && a.hi == b.hi; }
  };

  /// The largest vnode id a set can hold: `hi` must fit in a vnode_id, so 2^32-1 itself
  /// is never a member. Inserting it throws `std::out_of_range` (a caller bug).
  static constexpr vnode_id max_member = std::numeric_limits<vnode_id>::max() - 1;

  vnode_set() = default;
  /// Throws `std::out_of_range` if an id exceeds `max_member`.
  vnode_set(std::initializer_list<vnode_id> ids);

  /// The set [lo, hi); empty when lo >= hi.
  static vnode_set range(vnode_id lo, vnode_id hi);
  /// Builds from intervals in any order, overlapping or not; empty ones (lo >= hi) are
  /// ignored.
  static vnode_set from_intervals(std::vector<interval> xs);

  bool empty() const noexcept { return runs_.empty(); }
  /// Number of vnodes (not intervals).
  std::size_t size() const noexcept;
  /// Number of intervals: the cost of the set on the wire.
  std::size_t interval_count() const noexcept { return runs_.size(); }
  const std::vector<interval>& intervals() const noexcept { return runs_; }

  bool contains(vnode_id v) const noexcept;
  bool intersects(const vnode_set& other) const noexcept;
  /// True when every member of `other` is in this set.
  bool includes(const vnode_set& other) const noexcept;

  /// Throws `std::out_of_range` if `v` exceeds `max_member`.
  void insert(vnode_id v);
  void erase(vnode_id v);
  void clear() noexcept { runs_.clear(); }

  /// Set algebra, linear in the number of intervals of both operands.
  vnode_set operator|(const vnode_set& other) const;
  vnode_set operator&(const vnode_set& other) const;
  vnode_set operator-(const vnode_set& other) const;
  vnode_set& operator|=(const vnode_set& other);
  vnode_set& operator&=(const vnode_set& other);
  vnode_set& operator-=(const vnode_set& other);

  /// Calls f(v) for every member in increasing order.
  template <class F>
  void for_each(F&& f) const {
    for (auto [lo, hi] : runs_)
      for (vnode_id v = lo; v < hi; ++v)
        f(v);
  }
  /// The smallest member; the set must not be empty.
  vnode_id front() const { return runs_.front().lo; }

  friend bool operator==(const vnode_set& a, const vnode_set& b) { return a.runs_ == b.runs_; }
  friend bool operator!=(const vnode_set& a, const vnode_set& b) { return !(a == b); }

  /// "{0-3,7,9-11}"
  std::string to_string() const;

private:
  std::vector<interval> runs_; // sorted, disjoint, non-adjacent
};

} // namespace banyan

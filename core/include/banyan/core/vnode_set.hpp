#pragma once
/// A set of virtual nodes stored as sorted, disjoint, non-adjacent half-open
/// intervals [lo, hi). Contiguous ranges cost one interval however long they are, which
/// is what compresses broadcast headers (the paper's planned improvement).
///
/// Up to `inline_intervals` intervals live inside the set itself, without a heap
/// allocation: the sets a broadcast's frames, plans and deliveries carry are a few
/// intervals long, and copying or combining them then allocates nothing
/// (tests/core/engine_allocations_test.cpp; docs/decisions.md).

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

  /// The intervals: a vector that keeps its first `inline_intervals` elements inside
  /// itself (no allocation until it grows beyond them).
  static constexpr std::size_t inline_intervals = 4;
  class interval_list {
  public:
    using value_type = interval;
    using iterator = interval*;
    using const_iterator = const interval*;

    interval_list() noexcept = default;
    interval_list(const interval_list& o) { assign(o); }
    interval_list(interval_list&& o) noexcept { take(o); }
    interval_list& operator=(const interval_list& o) {
      if (this != &o) {
        size_ = 0;
        assign(o);
      }
      return *this;
    }
    interval_list& operator=(interval_list&& o) noexcept {
      if (this != &o) {
        release();
        take(o);
      }
      return *this;
    }
    ~interval_list() { release(); }

    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    interval* begin() noexcept { return data(); }
    interval* end() noexcept { return data() + size_; }
    const interval* begin() const noexcept { return data(); }
    const interval* end() const noexcept { return data() + size_; }
    interval& operator[](std::size_t i) noexcept { return data()[i]; }
    const interval& operator[](std::size_t i) const noexcept { return data()[i]; }
    interval& front() noexcept { return data()[0]; }
    const interval& front() const noexcept { return data()[0]; }
    interval& back() noexcept { return data()[size_ - 1]; }
    const interval& back() const noexcept { return data()[size_ - 1]; }

    void clear() noexcept { size_ = 0; }
    void reserve(std::size_t n) {
      if (n <= cap_)
        return;
      auto* p = new interval[n];
      std::copy(begin(), end(), p);
      const auto n0 = size_;
      release();
      heap_ = p;
      cap_ = n;
      size_ = n0;
    }
    void push_back(interval x) {
      if (size_ == cap_)
        reserve(cap_ * 2);
      data()[size_++] = x;
    }
    interval* insert(interval* at, interval x) {
      const auto i = static_cast<std::size_t>(at - data());
      push_back(x);
      std::rotate(data() + i, data() + size_ - 1, data() + size_);
      return data() + i;
    }
    interval* erase(interval* at) {
      std::copy(at + 1, end(), at);
      --size_;
      return at;
    }
    friend bool operator==(const interval_list& a, const interval_list& b) {
      return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
    }

  private:
    interval* data() noexcept { return heap_ ? heap_ : inline_; }
    const interval* data() const noexcept { return heap_ ? heap_ : inline_; }
    void release() noexcept {
      delete[] heap_;
      heap_ = nullptr;
      cap_ = inline_intervals;
      size_ = 0;
    }
    void assign(const interval_list& o) {
      reserve(o.size_);
      std::copy(o.begin(), o.end(), data());
      size_ = o.size_;
    }
    void take(interval_list& o) noexcept {
      if (o.heap_) {
        heap_ = o.heap_;
        cap_ = o.cap_;
        o.heap_ = nullptr;
        o.cap_ = inline_intervals;
      } else {
        std::copy(o.begin(), o.end(), inline_);
      }
      size_ = o.size_;
      o.size_ = 0;
    }

    interval* heap_ = nullptr;
    std::size_t size_ = 0;
    std::size_t cap_ = inline_intervals;
    interval inline_[inline_intervals];
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
  const interval_list& intervals() const noexcept { return runs_; }

  bool contains(vnode_id v) const noexcept;
  bool intersects(const vnode_set& other) const noexcept;
  /// True when every member of `other` is in this set.
  bool includes(const vnode_set& other) const noexcept;

  /// Throws `std::out_of_range` if `v` exceeds `max_member`.
  void insert(vnode_id v);
  /// Adds [lo, hi) (nothing when lo >= hi) to a set built in order: `lo` must be at
  /// least the `lo` of every interval already in it (merged where they overlap or
  /// touch). Builds a set from sorted intervals without a scratch vector.
  void append(vnode_id lo, vnode_id hi);
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
  interval_list runs_; // sorted, disjoint, non-adjacent
};

} // namespace banyan

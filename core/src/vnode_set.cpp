#include "banyan/core/vnode_set.hpp"

#include <algorithm>
#include <stdexcept>

namespace banyan {

namespace {

using interval = vnode_set::interval;

// Appends [lo, hi) to `out`, whose intervals are sorted by `lo` and end at or before
// `lo` is reached; merges with the last interval when they overlap or touch, so the
// result stays disjoint and non-adjacent.
void append_run(vnode_set::interval_list& out, vnode_id lo, vnode_id hi) {
  if (lo >= hi)
    return;
  if (!out.empty() && lo <= out.back().hi) {
    out.back().hi = std::max(out.back().hi, hi);
    return;
  }
  out.push_back(interval{lo, hi});
}

// The interval is [v, v + 1); v + 1 must not wrap around.
interval singleton(vnode_id v) {
  if (v > vnode_set::max_member)
    throw std::out_of_range("vnode_set: vnode id " + std::to_string(v) +
                            " cannot be a member (the largest member is 2^32-2)");
  return interval{v, v + 1};
}

// Index of the first interval whose `hi` is greater than v: the only interval that can
// contain v, or the first interval entirely above v.
std::size_t first_ending_after(const vnode_set::interval_list& xs, vnode_id v) {
  auto it = std::upper_bound(xs.begin(), xs.end(), v,
                             [](vnode_id x, const interval& r) { return x < r.hi; });
  return static_cast<std::size_t>(it - xs.begin());
}

} // namespace

vnode_set::vnode_set(std::initializer_list<vnode_id> ids) {
  // Lists are short (a vnode or a few): inserted one by one, no scratch vector.
  for (auto v : ids)
    insert(v);
}

vnode_set vnode_set::range(vnode_id lo, vnode_id hi) {
  vnode_set result;
  if (lo < hi)
    result.runs_.push_back(interval{lo, hi});
  return result;
}

vnode_set vnode_set::from_intervals(std::vector<interval> xs) {
  std::sort(xs.begin(), xs.end(),
            [](const interval& a, const interval& b) { return a.lo < b.lo; });
  vnode_set result;
  result.runs_.reserve(xs.size());
  for (auto [lo, hi] : xs)
    append_run(result.runs_, lo, hi);
  return result;
}

std::size_t vnode_set::size() const noexcept {
  std::size_t n = 0;
  for (auto [lo, hi] : runs_)
    n += static_cast<std::size_t>(hi - lo);
  return n;
}

bool vnode_set::contains(vnode_id v) const noexcept {
  auto i = first_ending_after(runs_, v);
  return i < runs_.size() && runs_[i].lo <= v;
}

bool vnode_set::intersects(const vnode_set& other) const noexcept {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < runs_.size() && j < other.runs_.size()) {
    const auto& a = runs_[i];
    const auto& b = other.runs_[j];
    if (a.lo < b.hi && b.lo < a.hi)
      return true;
    if (a.hi <= b.hi)
      ++i;
    else
      ++j;
  }
  return false;
}

bool vnode_set::includes(const vnode_set& other) const noexcept {
  // Our intervals are non-adjacent, so each interval of `other` must lie inside one
  // of ours.
  std::size_t i = 0;
  for (const auto& b : other.runs_) {
    while (i < runs_.size() && runs_[i].hi <= b.lo)
      ++i;
    if (i == runs_.size() || runs_[i].lo > b.lo || runs_[i].hi < b.hi)
      return false;
  }
  return true;
}

void vnode_set::insert(vnode_id v) {
  auto x = singleton(v);
  auto i = first_ending_after(runs_, v);
  if (i < runs_.size() && runs_[i].lo <= v)
    return; // already a member
  // runs_[i] (if any) starts above v; runs_[i - 1] (if any) ends at or before v.
  bool joins_prev = i > 0 && runs_[i - 1].hi == v;
  bool joins_next = i < runs_.size() && runs_[i].lo == x.hi;
  if (joins_prev && joins_next) {
    runs_[i - 1].hi = runs_[i].hi;
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
  } else if (joins_prev) {
    runs_[i - 1].hi = x.hi;
  } else if (joins_next) {
    runs_[i].lo = v;
  } else {
    runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(i), x);
  }
}

void vnode_set::append(vnode_id lo, vnode_id hi) {
  append_run(runs_, lo, hi);
}

void vnode_set::erase(vnode_id v) {
  auto i = first_ending_after(runs_, v);
  if (i == runs_.size() || runs_[i].lo > v)
    return; // not a member
  auto& r = runs_[i];
  if (r.lo == v) {
    if (++r.lo == r.hi)
      runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
  } else if (r.hi - 1 == v) {
    --r.hi;
  } else {
    interval upper{v + 1, r.hi};
    r.hi = v;
    runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(i + 1), upper);
  }
}

vnode_set vnode_set::operator|(const vnode_set& other) const {
  vnode_set result; // grows as it goes: a union of short sets stays inline
  std::size_t i = 0;
  std::size_t j = 0;
  // Feed intervals of both operands in order of `lo`; `append` merges overlaps.
  while (i < runs_.size() || j < other.runs_.size()) {
    bool take_ours = j == other.runs_.size() ||
                     (i < runs_.size() && runs_[i].lo <= other.runs_[j].lo);
    const auto& x = take_ours ? runs_[i++] : other.runs_[j++];
    append_run(result.runs_, x.lo, x.hi);
  }
  return result;
}

vnode_set vnode_set::operator&(const vnode_set& other) const {
  vnode_set result;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < runs_.size() && j < other.runs_.size()) {
    const auto& a = runs_[i];
    const auto& b = other.runs_[j];
    auto lo = std::max(a.lo, b.lo);
    auto hi = std::min(a.hi, b.hi);
    // Pieces cannot touch: consecutive pieces are separated by a gap of one operand.
    if (lo < hi)
      result.runs_.push_back(interval{lo, hi});
    if (a.hi <= b.hi)
      ++i;
    else
      ++j;
  }
  return result;
}

vnode_set vnode_set::operator-(const vnode_set& other) const {
  vnode_set result;
  std::size_t j = 0;
  for (auto [lo, hi] : runs_) {
    auto cur = lo;
    // Skip the intervals of `other` that end before this one starts.
    while (j < other.runs_.size() && other.runs_[j].hi <= cur)
      ++j;
    // Cut out every interval of `other` that overlaps [cur, hi).
    auto k = j;
    while (k < other.runs_.size() && other.runs_[k].lo < hi) {
      if (other.runs_[k].lo > cur)
        result.runs_.push_back(interval{cur, other.runs_[k].lo});
      cur = std::max(cur, other.runs_[k].hi);
      if (cur >= hi)
        break;
      ++k;
    }
    if (cur < hi)
      result.runs_.push_back(interval{cur, hi});
    // Intervals of `other` reaching past `hi` may overlap our next interval too, so
    // only those ending before `hi` are done with.
    j = k;
  }
  return result;
}

vnode_set& vnode_set::operator|=(const vnode_set& other) {
  *this = *this | other;
  return *this;
}

vnode_set& vnode_set::operator&=(const vnode_set& other) {
  *this = *this & other;
  return *this;
}

vnode_set& vnode_set::operator-=(const vnode_set& other) {
  *this = *this - other;
  return *this;
}

std::string vnode_set::to_string() const {
  std::string s = "{";
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    if (i > 0)
      s += ',';
    auto [lo, hi] = runs_[i];
    s += std::to_string(lo);
    if (hi - lo > 1) {
      s += '-';
      s += std::to_string(hi - 1);
    }
  }
  s += '}';
  return s;
}

} // namespace banyan

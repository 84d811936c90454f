#include "banyan/core/vnode_cover.hpp"

#include <algorithm>
#include <stdexcept>

namespace banyan {

std::size_t vnode_cover::split_at(vnode_id v) {
  auto it = std::lower_bound(steps_.begin(), steps_.end(), v,
                             [](const step& s, vnode_id x) { return s.at < x; });
  if (it != steps_.end() && it->at == v)
    return static_cast<std::size_t>(it - steps_.begin());
  const std::uint32_t c = it == steps_.begin() ? 0 : std::prev(it)->count;
  it = steps_.insert(it, step{v, c});
  return static_cast<std::size_t>(it - steps_.begin());
}

void vnode_cover::tidy(std::size_t i) {
  if (i >= steps_.size())
    return;
  const std::uint32_t before = i == 0 ? 0 : steps_[i - 1].count;
  if (steps_[i].count == before)
    steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(i));
}

void vnode_cover::add_interval(vnode_id lo, vnode_id hi, bool up) {
  const auto i = split_at(lo);
  const auto j = split_at(hi); // above lo: i is still the step at lo
  for (auto k = i; k < j; ++k)
    steps_[k].count = up ? steps_[k].count + 1 : steps_[k].count - 1;
  // Only the counts inside [lo, hi) moved, all by one: the steps at hi and at lo are
  // the only ones that can now repeat their predecessor's count.
  tidy(j);
  tidy(i);
}

bool vnode_cover::can_remove(const vnode_set& s) const {
  for (auto [lo, hi] : s.intervals()) {
    auto it = std::upper_bound(steps_.begin(), steps_.end(), lo,
                               [](vnode_id x, const step& st) { return x < st.at; });
    if (it == steps_.begin())
      return false; // lo lies before the first step: counted 0 times
    for (--it; it != steps_.end() && it->at < hi; ++it)
      if (it->count == 0)
        return false;
  }
  return true;
}

void vnode_cover::add(const vnode_set& s) {
  for (auto [lo, hi] : s.intervals())
    add_interval(lo, hi, true);
  if (!s.empty())
    stale_ = true;
}

void vnode_cover::remove(const vnode_set& s) {
  if (!can_remove(s))
    throw std::logic_error("vnode_cover: removing " + s.to_string() +
                           ", which is not counted in full");
  for (auto [lo, hi] : s.intervals())
    add_interval(lo, hi, false);
  if (!s.empty())
    stale_ = true;
}

void vnode_cover::replace(const vnode_set& before, const vnode_set& after) {
  const auto gone = before - after;
  if (!can_remove(gone))
    throw std::logic_error("vnode_cover: replacing " + before.to_string() +
                           ", which is not counted in full");
  remove(gone);
  add(after - before);
}

void vnode_cover::clear() noexcept {
  steps_.clear();
  members_.clear();
  stale_ = false;
}

const vnode_set& vnode_cover::members() const {
  if (stale_) {
    members_.clear();
    for (std::size_t k = 0; k + 1 < steps_.size(); ++k)
      if (steps_[k].count > 0)
        members_.append(steps_[k].at, steps_[k + 1].at); // touching runs merge
    stale_ = false;
  }
  return members_;
}

std::uint32_t vnode_cover::count(vnode_id v) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), v,
                             [](vnode_id x, const step& st) { return x < st.at; });
  return it == steps_.begin() ? 0 : std::prev(it)->count;
}

} // namespace banyan

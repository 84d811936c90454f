#include "banyan/core/subtree_summary.hpp"

#include <algorithm>
#include <cmath>

#include "banyan/core/tree_state.hpp"

namespace banyan {

subtree_summary fold(const subtree_summary& a, const subtree_summary& b) {
  subtree_summary r;
  r.half_rtt = std::max(a.half_rtt, b.half_rtt);
  r.per_byte = std::max(a.per_byte, b.per_byte);
  r.bottleneck = std::min(a.bottleneck, b.bottleneck);
  r.depth = std::max(a.depth, b.depth);
  r.complete = a.complete && b.complete;
  return r;
}

subtree_summary through_hop(const subtree_summary& below, duration rtt, rate hop) {
  subtree_summary r = below;
  r.half_rtt += rtt / 2;
  r.depth += 1;
  if (hop > 0 && hop != infinite_rate) {
    r.per_byte += 1.0 / hop;
    r.bottleneck = std::min(r.bottleneck, hop);
  } else if (!(hop > 0)) {
    r.complete = false; // no figures for this hop (a rate of 0 or NaN)
  }
  return r;
}

namespace {
/// Relative change of b against a, above h (a and b not negative; two zeros or two
/// infinities are equal).
bool moved(double a, double b, double h) {
  if (a == b)
    return false;
  if (std::isinf(a) || std::isinf(b))
    return true;
  return std::abs(b - a) > h * std::max(a, b);
}
} // namespace

bool differs(const subtree_summary& sent, const subtree_summary& now, double hysteresis) {
  return sent.depth != now.depth || sent.complete != now.complete ||
         moved(static_cast<double>(sent.half_rtt.count()),
               static_cast<double>(now.half_rtt.count()), hysteresis) ||
         moved(sent.per_byte, now.per_byte, hysteresis) ||
         moved(sent.bottleneck, now.bottleneck, hysteresis);
}

subtree_summary fold_children(const tree_state& t) {
  subtree_summary r = empty_summary();
  const auto& sent = t.child_summaries();
  for (auto& [c, vs] : t.children()) {
    auto s = sent.find(c);
    if (s == sent.end())
      r.complete = false;
    else
      r = fold(r, s->second);
  }
  return r;
}

std::optional<subtree_summary> subtree_summary_of(const tree_state& t, rate capacity) {
  if (t.is_root() || t.parent() == no_proc)
    return std::nullopt;
  const auto bw = t.bw_parent();
  const auto n = std::max<std::uint32_t>(t.parent_info().children, 1);
  const auto cap = std::max(t.sender_capacity(), capacity);
  const rate hop = !(bw > 0) ? 0 : cap > 0 ? std::min(bw, std::max(bw, cap) / n) : bw / n;
  return through_hop(fold_children(t), t.rtt_parent(), hop);
}

} // namespace banyan

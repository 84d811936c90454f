#include "banyan/core/tree_choice.hpp"

#include <algorithm>

#include "banyan/core/tree_state.hpp"
#include "banyan/core/tree_view.hpp"

namespace banyan {

namespace {

/// Longer than any broadcast: what an unknown or zero rate costs (sums stay finite).
constexpr double never_s = 1e6;

/// Seconds to move `bytes` at `r` bytes per second, as a duration.
duration transfer(double bytes, rate r) {
  if (bytes <= 0 || r == infinite_rate)
    return duration{0};
  const double s = r > 0 ? std::min(bytes / r, never_s) : never_s;
  return std::chrono::duration_cast<duration>(std::chrono::duration<double>(s));
}

/// `s` seconds as a duration (at most "never").
duration seconds(double s) {
  if (!(s > 0))
    return duration{0};
  return std::chrono::duration_cast<duration>(std::chrono::duration<double>(std::min(s, never_s)));
}

/// The rate of the hops other than the narrowest (never below it).
rate other_hops(const tree_position& p) {
  return std::max(p.hop, p.est);
}

} // namespace

std::optional<tree_position> position_of(const tree_state& t, rate capacity) {
  if (t.is_root() || t.parent() == no_proc)
    return std::nullopt;
  const auto est = t.est();
  const auto bw = t.bw_parent();
  if (!(est > 0) || !(bw > 0))
    return std::nullopt;
  tree_position p;
  p.root = t.key().root;
  p.dist = t.dist();
  p.est = est;
  p.depth = static_cast<std::uint32_t>(t.parent_info().path.size() + 1); // path() without a copy
  const auto n = std::max<std::uint32_t>(t.parent_info().children, 1);
  const auto cap = std::max(t.sender_capacity(), capacity);
  p.hop = cap > 0 ? std::min(bw, std::max(bw, cap) / n) : bw / n;
  return p;
}

duration predict_latency_tree(const tree_position& p, std::size_t bytes, const tree_cost& c) {
  return p.dist / 2 + (c.overhead + transfer(static_cast<double>(bytes), p.hop)) * p.depth;
}

duration predict_bandwidth_tree(const tree_position& p, std::size_t bytes, const tree_cost& c) {
  const auto seg = std::max<std::size_t>(c.segment, 1);
  const auto first = std::min(seg, bytes);
  const auto segments = std::max<std::size_t>(1, (bytes + seg - 1) / seg);
  const auto hops_above = p.depth > 0 ? p.depth - 1 : 0;
  return p.dist / 2 + c.overhead * p.depth
         + transfer(static_cast<double>(first) * hops_above, other_hops(p))
         + transfer(static_cast<double>(bytes), p.est)
         + c.overhead * static_cast<std::int64_t>(segments - 1);
}

tree_prediction predict(const std::vector<tree_position>& latency,
                        const std::vector<tree_position>& bandwidth, std::size_t bytes,
                        const tree_cost& c) {
  tree_prediction r;
  r.known = !latency.empty() && !bandwidth.empty();
  for (auto& p : latency)
    r.latency = std::max(r.latency, predict_latency_tree(p, bytes, c));
  for (auto& p : bandwidth)
    r.bandwidth = std::max(r.bandwidth, predict_bandwidth_tree(p, bytes, c));
  return r;
}

duration predict_latency_tree(const subtree_summary& s, std::size_t bytes, const tree_cost& c) {
  return s.half_rtt + c.overhead * s.depth + seconds(static_cast<double>(bytes) * s.per_byte);
}

duration predict_bandwidth_tree(const subtree_summary& s, std::size_t bytes, const tree_cost& c) {
  const auto seg = std::max<std::size_t>(c.segment, 1);
  const auto first = std::min(seg, bytes);
  const auto segments = std::max<std::size_t>(1, (bytes + seg - 1) / seg);
  return s.half_rtt + c.overhead * s.depth + seconds(static_cast<double>(first) * s.per_byte)
         + transfer(static_cast<double>(bytes - first), s.bottleneck)
         + c.overhead * static_cast<std::int64_t>(segments - 1);
}

tree_prediction predict(const subtree_summary& latency, const subtree_summary& bandwidth,
                        std::size_t bytes, const tree_cost& c) {
  tree_prediction r;
  r.known = latency.complete && bandwidth.complete && latency.depth > 0 && bandwidth.depth > 0;
  r.latency = predict_latency_tree(latency, bytes, c);
  r.bandwidth = predict_bandwidth_tree(bandwidth, bytes, c);
  return r;
}

tree_prediction predict(const tree_view& view, std::size_t bytes, const tree_cost& c) {
  auto places = predict(view.positions(tree_kind::latency), view.positions(tree_kind::bandwidth),
                        bytes, c);
  auto ls = view.own_summary(tree_kind::latency);
  auto bs = view.own_summary(tree_kind::bandwidth);
  if (!ls || !bs)
    return places;
  auto own = predict(*ls, *bs, bytes, c);
  if (!own.known)
    return places;
  own.from_summaries = true;
  if (!places.known)
    return own;
  // The summaries' figures are envelopes (up to summary_margin above the worst path) over
  // every hop's measurement, the lowest of which rules: they decide where they are
  // decisive, the places otherwise.
  const auto slow = std::max(own.latency, own.bandwidth);
  const auto fast = std::min(own.latency, own.bandwidth);
  if (static_cast<double>(slow.count()) > summary_margin * static_cast<double>(fast.count()))
    return own;
  return places;
}

tree_kind choose_tree(const tree_view& view, std::size_t bytes, const tree_choice& choice) {
  if (choice.rule == tree_rule::model) {
    auto r = predict(view, bytes, choice.cost);
    if (r.known)
      return r.faster();
  }
  return threshold_tree(bytes, choice.long_threshold);
}

} // namespace banyan

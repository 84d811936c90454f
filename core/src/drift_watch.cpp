#include "drift_watch.hpp"

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {

/// What a bandwidth tree assumed for its parent edge: est's own terms for the edge.
rate assumed_edge_rate(const tree_state& t) {
  const auto n = std::max<std::uint32_t>(t.parent_info().children, 1);
  const auto cap = t.sender_capacity();
  const auto sendable = cap > 0 ? std::max(t.bw_parent(), cap) : t.bw_parent();
  return std::min(t.bw_parent(), sendable / n);
}

/// Passive windows: a stream's rate is judged over this much of it...
constexpr duration window_span = std::chrono::milliseconds(250);
/// ...and a silence this long starts a new window (between broadcasts).
constexpr duration window_gap = std::chrono::milliseconds(100);
/// An RTT sample is trusted only with no stream from the peer this long: a ping queues
/// behind the segments of its pair.
constexpr duration stream_quiet = std::chrono::milliseconds(200);
/// At most one re-examination round per processor this often.
constexpr duration round_spacing = std::chrono::seconds(2);

} // namespace

void drift_watch::on_stream(timestamp now, proc_id from, tree_key k, std::size_t bytes,
                            outbox& out) {
  last_stream_[from] = now;
  if (k.kind != tree_kind::bandwidth)
    return;
  auto t = s_.trees.find(k);
  if (!t || t->parent() != from) {
    windows_.erase({from, k});
    return;
  }
  auto& w = windows_[{from, k}];
  if (w.last == timestamp{0} || now - w.last > window_gap) {
    w.first = w.last = now; // the first frame's bytes came before the window began
    w.bytes = 0;
    return;
  }
  w.bytes += bytes;
  w.last = now;
  if (now - w.first < window_span)
    return;
  const double r = static_cast<double>(w.bytes) * 1e9 / static_cast<double>((now - w.first).count());
  w.first = now;
  w.bytes = 0;
  if (r < (1 - s_.cfg.drift) * t->est())
    ++w.low;
  else
    w.low = 0;
  if (w.low < 2 || s_.paths.is_local(from))
    return;
  w.low = 0;
  drifted(now, from, std::nullopt, r, out);
}

void drift_watch::on_measured(timestamp now, proc_id p, duration rtt, rate bw, outbox& out) {
  bool slow = false, far = false;
  auto quiet = last_stream_.find(p);
  const bool rtt_trusted = quiet == last_stream_.end() || now - quiet->second >= stream_quiet;
  for (auto& t : s_.trees.all()) {
    if (!t || t->parent() != p)
      continue;
    if (t->key().kind == tree_kind::bandwidth) {
      if (bw < (1 - s_.cfg.drift) * assumed_edge_rate(*t))
        slow = true;
    } else if (rtt_trusted) {
      const auto limit = (1 + s_.cfg.drift) * static_cast<double>(t->rtt_parent().count())
                         + static_cast<double>(s_.cfg.lan_margin.count());
      if (static_cast<double>(rtt.count()) > limit)
        far = true;
    }
  }
  if (!slow && !far) {
    strikes_.erase(p);
    return;
  }
  if (++strikes_[p] < 2) {
    s_.probes.confirm(p); // once more, at once: one low figure may be noise
    return;
  }
  strikes_.erase(p);
  drifted(now, p, far ? std::optional<duration>(rtt) : std::nullopt,
          slow ? std::optional<rate>(bw) : std::nullopt, out);
}

void drift_watch::drifted(timestamp now, proc_id p, std::optional<duration> rtt,
                          std::optional<rate> bw, outbox& out) {
  ++drifts_;
  if (bw)
    s_.paths.replace_bw(p, *bw);
  if (rtt)
    s_.paths.replace_rtt(p, *rtt);
  std::set<tree_key> affected;
  for (auto& t : s_.trees.all()) {
    if (!t || t->parent() != p)
      continue;
    const bool bw_tree = t->key().kind == tree_kind::bandwidth;
    if (bw_tree && bw)
      t->refresh_measurement(t->rtt_parent(), *bw);
    else if (!bw_tree && rtt)
      t->refresh_measurement(*rtt, t->bw_parent());
    else
      continue;
    s_.updates.mark_info(*t); // the new est (or dist) flows down the subtree
    affected.insert(t->key());
  }
  if (affected.empty() || now - last_round_ < round_spacing || s_.probes.round_active())
    return; // (a round that judges every tree is on: it re-examines these too)
  last_round_ = now;
  reexam_ = std::move(affected);
  s_.probes.reexamine(now, out);
}

void drift_watch::forget(proc_id p) {
  strikes_.erase(p);
  last_stream_.erase(p);
  for (auto i = windows_.begin(); i != windows_.end();)
    i = i->first.first == p ? windows_.erase(i) : std::next(i);
}

void drift_watch::reset() {
  windows_.clear();
  last_stream_.clear();
  strikes_.clear();
  reexam_.clear();
  last_round_ = timestamp{std::numeric_limits<timestamp::rep>::min() / 2};
}

} // namespace banyan::sup

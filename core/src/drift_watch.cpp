#include "drift_watch.hpp"

#include <algorithm>
#include <cmath>

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
/// Members whose RTT figure is this close (a share of it) to a drifted parent's are
/// presumed behind the same link (alternatives).
constexpr double same_path_share = 0.05;
/// At most one re-examination round per processor this often.
constexpr duration round_spacing = std::chrono::seconds(2);

} // namespace

void drift_watch::on_stream(timestamp now, proc_id from, tree_key k, std::size_t bytes,
                            outbox& out) {
  last_stream_[from] = now;
  auto& rec = recent_[from];
  if (now - rec.first > stream_quiet)
    rec = {now, 0};
  rec.bytes += bytes;
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

bool drift_watch::rtt_trusted(timestamp now, proc_id p) const {
  // Assumes every byte that came from p in the last stream_quiet may still be ahead of
  // the pong: trusted when they take at most lan_margin at p's measured rate (the
  // margin the RTT limit already allows), or when no stream came that long.
  auto quiet = last_stream_.find(p);
  if (quiet == last_stream_.end() || now - quiet->second >= stream_quiet)
    return true;
  auto r = recent_.find(p);
  const auto bw = s_.paths.measured_bw(p);
  if (r == recent_.end() || !bw || *bw <= 0)
    return false;
  const auto bytes = now - r->second.first <= 2 * stream_quiet ? r->second.bytes : std::size_t{0};
  return static_cast<double>(bytes) <= *bw * std::chrono::duration<double>(s_.cfg.lan_margin).count();
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
  if (rtt) {
    if (auto old = s_.paths.measured_rtt(p); old && *rtt > *old) {
      far_figures_.push_back(*old);
      // The remote members whose figure is within same_path_share (or lan_margin) of
      // p's old one are presumed in p's LAN, behind the same link: their figures grow
      // by as much (assumption: a link's RTT grew, not one processor's). Otherwise a
      // round judging by best figures takes them for the near parents they were.
      const auto grew = *rtt - *old;
      const double tol = std::max(same_path_share * static_cast<double>(old->count()),
                                  static_cast<double>(s_.cfg.lan_margin.count()));
      std::vector<std::pair<proc_id, duration>> behind;
      for (auto& [q, f] : s_.paths.figures())
        if (q != p && q != s_.self && f.rtt != duration::max() && !s_.paths.is_local(q)
            && std::abs(static_cast<double>((f.rtt - *old).count())) <= tol)
          behind.emplace_back(q, f.rtt + grew);
      for (auto& [q, f] : behind)
        s_.paths.replace_rtt(q, f);
    }
    s_.paths.replace_rtt(p, *rtt);
  }
  std::set<tree_key> affected;
  for (auto& t : s_.trees.all()) {
    if (!t || t->parent() != p)
      continue;
    const bool bw_tree = t->key().kind == tree_kind::bandwidth;
    if (!rtt && !(bw_tree && bw))
      continue;
    // Either tree takes the figures that changed: a bandwidth tree's dist (the RTT sum)
    // is what the choice of tree reads too (tree_choice.hpp); only the trees whose own
    // measure drifted re-examine their place.
    t->refresh_measurement(rtt ? *rtt : t->rtt_parent(), bw_tree && bw ? *bw : t->bw_parent());
    s_.updates.mark_info(*t); // the new est (or dist) flows down the subtree
    if (bw_tree ? bw.has_value() : rtt.has_value())
      affected.insert(t->key());
  }
  if (!affected.empty() && !reexam_.empty() && s_.probes.round_active()) {
    // A re-examination round is on (several parents drift at once when a link behind
    // them does): it judges these trees too.
    reexam_.insert(affected.begin(), affected.end());
    return;
  }
  if (affected.empty() || s_.probes.round_active())
    return; // (a round that judges every tree is on: it re-examines these too)
  if (now - last_round_ < round_spacing) {
    pending_.insert(affected.begin(), affected.end()); // re-examined once the spacing ends
    return;
  }
  pending_.clear();
  last_round_ = now;
  if (!rtt)
    far_figures_.clear();
  reexam_ = std::move(affected);
  s_.probes.reexamine(now, out);
}

std::vector<proc_id> drift_watch::alternatives(std::size_t count) const {
  if (far_figures_.empty())
    return s_.background.alternatives(count);
  std::set<proc_id> parents; // of the trees re-examined (a parent in another tree may
                             // be the best alternative for them)
  for (auto& t : s_.trees.all())
    if (t && t->parent() != no_proc && reexam_.count(t->key()))
      parents.insert(t->parent());
  auto behind = [&](duration f) {
    for (auto d : far_figures_) {
      const double gap = std::abs(static_cast<double>((f - d).count()));
      if (gap <= std::max(same_path_share * static_cast<double>(d.count()),
                          static_cast<double>(s_.cfg.lan_margin.count())))
        return true;
    }
    return false;
  };
  std::vector<std::pair<duration, proc_id>> ranked;
  for (auto& [q, f] : s_.paths.figures())
    if (q != s_.self && s_.members.is_member(q) && !parents.count(q) && f.rtt != duration::max()
        && !s_.paths.is_local(q) && !behind(f.rtt))
      ranked.emplace_back(f.rtt, q);
  std::sort(ranked.begin(), ranked.end());
  std::vector<proc_id> out;
  for (std::size_t i = 0; i < ranked.size() && out.size() < count; ++i)
    out.push_back(ranked[i].second);
  return out;
}

void drift_watch::resume(timestamp now, outbox& out) {
  if (pending_.empty() || now - last_round_ < round_spacing || s_.probes.measuring())
    return;
  if (s_.probes.round_active()) {
    pending_.clear(); // a round that judges every tree is on
    return;
  }
  last_round_ = now;
  reexam_ = std::move(pending_);
  pending_.clear();
  s_.probes.reexamine(now, out);
}

void drift_watch::forget(proc_id p) {
  strikes_.erase(p);
  last_stream_.erase(p);
  recent_.erase(p);
  for (auto i = windows_.begin(); i != windows_.end();)
    i = i->first.first == p ? windows_.erase(i) : std::next(i);
}

void drift_watch::reset() {
  windows_.clear();
  last_stream_.clear();
  recent_.clear();
  strikes_.clear();
  reexam_.clear();
  pending_.clear();
  far_figures_.clear();
  last_round_ = timestamp{std::numeric_limits<timestamp::rep>::min() / 2};
}

} // namespace banyan::sup

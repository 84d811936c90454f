#include "path_memory.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

std::optional<duration> path_memory::measured_rtt(proc_id p) const {
  auto i = figures_.find(p);
  if (i == figures_.end() || i->second.rtt == duration::max())
    return std::nullopt;
  return i->second.rtt;
}

std::optional<rate> path_memory::measured_bw(proc_id p) const {
  auto i = figures_.find(p);
  if (i == figures_.end() || i->second.bw <= 0)
    return std::nullopt;
  return i->second.bw;
}

duration path_memory::note_rtt(proc_id p, duration rtt) {
  auto& f = figures_[p];
  f.rtt = std::min(f.rtt, rtt);
  return f.rtt;
}

rate path_memory::note_bw(proc_id p, rate bw) {
  auto& f = figures_[p];
  f.bw = std::max(f.bw, bw);
  return f.bw;
}

duration path_memory::best_rtt(proc_id p) {
  return figures_[p].rtt;
}

bool path_memory::is_local(proc_id p) const {
  auto rtt = measured_rtt(p);
  return rtt && context().local(*rtt);
}

std::optional<duration> path_memory::smallest_remote_rtt() const {
  auto ctx = context();
  std::optional<duration> best;
  for (auto& [p, f] : figures_)
    if (f.rtt != duration::max() && s_.members.is_member(p) && !ctx.local(f.rtt)
        && (!best || f.rtt < *best))
      best = f.rtt;
  return best;
}

rule_context path_memory::context() const {
  rule_context ctx;
  ctx.variant = s_.decision.rules;
  ctx.local_factor = s_.cfg.local_factor;
  ctx.bw_margin = s_.cfg.bw_margin;
  ctx.per_child = s_.cfg.forward_overhead;
  ctx.lan_margin = s_.cfg.lan_margin;
  if (s_.decision.sender_capacity)
    ctx.sender_capacity = widest_;
  // The smallest RTT is the LAN's only once we have evidence of two classes of
  // peers (a spread of at least 4x); before that it may be a WAN RTT, and calling
  // WAN peers local would let WAN hops chain (and condition (I) would forbid
  // undoing it later).
  auto lo = duration::max(), hi = duration{0};
  std::size_t measured = 0;
  for (auto& [peer, fig] : figures_) {
    if (fig.rtt == duration::max() || !s_.members.is_member(peer))
      continue;
    ++measured;
    lo = std::min(lo, fig.rtt);
    hi = std::max(hi, fig.rtt);
  }
  if (lo != duration::max() && hi >= lo * 4) {
    ctx.min_rtt = lo;
  } else if (measured > 0 && hi < s_.cfg.one_lan_rtt
             && measured >= std::min(s_.cfg.one_lan_peers, s_.members.size() - 1)) {
    // Enough members measured, all alike and LAN-fast: one LAN (processes on one host,
    // or one cluster). All are local, or (I) would freeze the first, random
    // attachments (on loopback: chains, 3 hops for 4 processes). The margin scales down
    // with the LAN's RTT, which may be far below the wide-area grids' it was set for.
    ctx.min_rtt = std::max(lo, std::chrono::duration_cast<duration>(hi / ctx.local_factor));
    ctx.lan_margin = std::min(ctx.lan_margin, lo / 2);
  }
  return ctx;
}

void path_memory::remember(proc_id p, const std::string& address, const peer_figures& f) {
  if (p == s_.self)
    return;
  const auto& here = s_.members.me().address;
  if (remembered_from_ != here) {
    remembered_.clear(); // measured from another place: none of it holds here
    remembered_from_ = here;
  }
  remembered_[p] = {address, f};
}

void path_memory::restore(proc_id p, const std::string& address) {
  if (auto r = remembered_.find(p); r != remembered_.end()) {
    if (p != s_.self && r->second.address == address
        && remembered_from_ == s_.members.me().address)
      figures_.try_emplace(p, r->second.figures);
    remembered_.erase(r);
  }
}

void path_memory::forget(proc_id p, const std::string& address) {
  if (auto f = figures_.find(p); f != figures_.end()) {
    remember(p, address, f->second);
    figures_.erase(f);
  }
}

void path_memory::remember_all() {
  const auto& info = s_.members.all_info();
  for (auto& [p, f] : figures_)
    if (auto i = info.find(p); i != member_table::npos)
      remember(p, info.address(i), f);
}

void path_memory::recall(const path_memory& earlier) {
  remembered_ = earlier.remembered_;
  remembered_from_ = earlier.remembered_from_;
  widest_ = std::max(widest_, earlier.widest_);
}

} // namespace banyan::sup

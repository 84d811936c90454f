#include "background_probing.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "supervisor_parts.hpp"

namespace banyan::sup {

void background_probing::arm(outbox& out) {
  if (armed_ || s_.cfg.background_period.count() <= 0
      || s_.status != supervisor::status::member)
    return;
  armed_ = true;
  const auto period = s_.cfg.background_period.count();
  const auto jitter =
      std::uniform_int_distribution<duration::rep>(-period / 4, period / 4)(s_.rng);
  s_.start_timer(out, duration{period + jitter}, timer_token::background(++gen_));
}

void background_probing::on_timer(timestamp now, std::uint64_t gen, outbox& out) {
  if (gen != gen_)
    return; // armed before a reset
  armed_ = false;
  if (s_.status == supervisor::status::member)
    s_.drift.resume(now, out);
  if (s_.status != supervisor::status::member || s_.probes.measuring()
      || s_.members.size() < 2)
    return; // a round of measuring runs (or a probe): it is the budget of this period
  const auto cand = next_candidate(now);
  if (cand == no_proc)
    return;
  if (s_.probes.start_background(now, cand, out)) {
    ++probes_;
    if (!s_.paths.is_local(cand))
      last_remote_ = now;
  }
}

bool background_probing::remote_allowed(timestamp now, proc_id p) const {
  // Assumes the members of this LAN share the wide-area links into it and follow the
  // same rule, and that no link on the path is narrower than the path's figure (it is
  // the path's bottleneck). The LAN's size is estimated from the members measured: the
  // local share of them, scaled to all members (probing favours LAN peers, so this
  // overestimates the LAN: the bound errs on the safe side).
  const auto bw = s_.paths.measured_bw(p);
  if (!bw || *bw <= 0)
    return true; // never measured: the first probe tells
  std::size_t local = 1, measured = 1; // (ourselves)
  const auto ctx = s_.paths.context();
  for (auto& [q, f] : s_.paths.figures())
    if (q != s_.self && s_.members.is_member(q) && f.rtt != duration::max()) {
      ++measured;
      if (ctx.local(f.rtt))
        ++local;
    }
  const auto members = std::max<std::size_t>(s_.members.size(), 1);
  const double lan = std::min<double>(static_cast<double>(members),
                                      static_cast<double>(local) * static_cast<double>(members)
                                        / static_cast<double>(measured));
  const double gap_s = lan * static_cast<double>(wire::bw_probe_bytes)
                       / (0.01 * *bw);
  return now - last_remote_ >= duration{static_cast<duration::rep>(gap_s * 1e9)};
}

std::vector<proc_id> background_probing::alternatives(std::size_t count) const {
  std::set<proc_id> parents;
  for (auto& t : s_.trees.all())
    if (t && t->parent() != no_proc)
      parents.insert(t->parent());
  std::vector<std::pair<rate, proc_id>> ranked;
  for (auto& [q, f] : s_.paths.figures())
    if (q != s_.self && s_.members.is_member(q) && !parents.count(q) && f.bw > 0)
      ranked.emplace_back(f.bw, q);
  std::sort(ranked.begin(), ranked.end(),
            [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<proc_id> out;
  for (std::size_t i = 0; i < ranked.size() && out.size() < count; ++i)
    out.push_back(ranked[i].second);
  return out;
}

proc_id background_probing::next_candidate(timestamp now) {
  std::set<proc_id> parent_set;
  for (auto& t : s_.trees.all())
    if (t && t->parent() != no_proc && s_.members.is_member(t->parent()))
      parent_set.insert(t->parent());
  std::vector<proc_id> remote, local;
  for (auto p : parent_set)
    (s_.paths.is_local(p) ? local : remote).push_back(p);
  const auto alts = alternatives(3);
  auto take = [&](const std::vector<proc_id>& v, std::size_t& i) -> proc_id {
    if (v.empty())
      return no_proc;
    return v[i++ % v.size()];
  };
  // Three slots in turn; a slot whose list is empty (or whose remote peer must wait)
  // falls through to the next kind.
  for (int tries = 0; tries < 3; ++tries) {
    const auto slot = slot_++ % 3;
    proc_id p = no_proc;
    if (slot == 0)
      p = take(remote, next_remote_);
    else if (slot == 1)
      p = take(local, next_local_);
    else
      p = take(alts, next_alt_);
    if (p != no_proc && (s_.paths.is_local(p) || remote_allowed(now, p)))
      return p;
  }
  return no_proc;
}

void background_probing::reset() {
  ++gen_;
  armed_ = false;
  slot_ = next_remote_ = next_local_ = next_alt_ = 0;
  last_remote_ = timestamp{std::numeric_limits<timestamp::rep>::min() / 2};
}

} // namespace banyan::sup

#include "entry_audit.hpp"

#include <algorithm>

#include "supervisor_parts.hpp"

namespace banyan::sup {

namespace {

/// a * gap <= b, for RTTs (no overflow: RTTs are far below the range).
bool much_closer(duration a, duration b) {
  return static_cast<double>(a.count()) * group_rtt_gap
         <= static_cast<double>(b.count());
}

} // namespace

void entry_audit::note(proc_id q, const std::vector<wire::tree_info>& trees) {
  if (q == s_.self)
    return;
  const auto rtt_q = s_.paths.measured_rtt(q);
  auto& kept = seen_[q];
  kept.clear();
  if (!rtt_q)
    return;
  // Only entries that can show a double entry: q connected through a parent that is
  // not much closer to us than q itself (see doubled()); in a formed tree that is the
  // few trees q enters its group in, so little is kept per peer.
  for (const auto& info : trees) {
    if (!info.connected || info.path.empty())
      continue;
    const auto r = info.path.front();
    if (r == s_.self)
      continue;
    const auto rtt_r = s_.paths.measured_rtt(r);
    if (rtt_r && !much_closer(*rtt_q, *rtt_r))
      continue;
    kept.push_back({info.tree, r});
  }
}

bool entry_audit::doubled(proc_id q) const {
  auto it = seen_.find(q);
  if (it == seen_.end() || !s_.members.is_member(q))
    return false;
  const auto rtt_q = s_.paths.measured_rtt(q);
  if (!rtt_q)
    return false;
  // Neither entrant being the other's ancestor is not required: a path that leaves the
  // group and comes back in enters it twice as well, and the lower entrant moves under
  // the upper one (or is told to).
  for (const auto& e : it->second) {
    const auto* t = s_.trees.find(e.tree);
    if (!t || t->is_root() || !t->connected() || t->parent() == q)
      continue;
    const auto our_rtt = s_.paths.measured_rtt(t->parent()).value_or(t->rtt_parent());
    if (!much_closer(*rtt_q, our_rtt))
      continue; // q is not inside the group our parent is outside of
    const auto rtt_r = s_.paths.measured_rtt(e.parent);
    if (rtt_r && much_closer(*rtt_r, our_rtt))
      continue; // q's parent is inside it: q does not enter it
    return true;
  }
  return false;
}

proc_id entry_audit::next_suspect() {
  for (const auto& [q, entries] : seen_) {
    if (entries.empty() || audited_.count(q) || !doubled(q))
      continue;
    audited_.insert(q);
    ++audits_;
    return q;
  }
  return no_proc;
}

bool entry_audit::should_tell(proc_id q) {
  if (told_this_round_.count(q) || !doubled(q))
    return false;
  const auto& now = seen_[q];
  if (auto t = told_what_.find(q); t != told_what_.end() && t->second == now)
    return false; // told already, and nothing changed there since
  told_what_[q] = now;
  told_this_round_.insert(q);
  ++told_;
  return true;
}

void entry_audit::new_round() {
  audited_.clear();
  told_this_round_.clear();
}

void entry_audit::forget(proc_id p) {
  seen_.erase(p);
  told_what_.erase(p);
  audited_.erase(p);
  told_this_round_.erase(p);
}

void entry_audit::reset() {
  seen_.clear();
  told_what_.clear();
  new_round();
}

} // namespace banyan::sup

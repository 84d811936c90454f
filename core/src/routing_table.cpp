#include "banyan/core/routing_table.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

namespace banyan {

namespace {

using run = routing_table::run;

// Appends a run to `out` (sorted, ending at or before r.lo), merging it into the last
// run when they touch and agree on owner and epoch: that keeps the form canonical.
void append(std::vector<run>& out, const run& r) {
  if (r.lo >= r.hi)
    return;
  if (!out.empty()) {
    auto& b = out.back();
    if (b.hi == r.lo && b.owner == r.owner && b.epoch == r.epoch) {
      b.hi = r.hi;
      return;
    }
  }
  out.push_back(r);
}

// Overwrites the entries of `v` for which `take(current run)` holds (vnodes without an
// entry are always taken) and returns the vnodes overwritten. One linear pass over both
// the runs and the intervals of `v`.
template <class Take>
vnode_set overlay(std::vector<run>& runs, const vnode_set& v, proc_id owner,
                  std::uint64_t epoch, Take take) {
  // `src` is consumed from the front; a run that straddles an interval boundary has its
  // front cut off in place.
  std::vector<run> src = std::move(runs);
  std::vector<run> out;
  out.reserve(src.size() + 2 * v.interval_count());
  std::vector<vnode_set::interval> changed;
  auto write = [&](vnode_id lo, vnode_id hi) {
    append(out, run{lo, hi, owner, epoch});
    if (!changed.empty() && changed.back().hi == lo)
      changed.back().hi = hi;
    else
      changed.push_back({lo, hi});
  };
  std::size_t i = 0;
  for (auto [lo, hi] : v.intervals()) {
    while (i < src.size() && src[i].hi <= lo)
      append(out, src[i++]);
    auto cur = lo;
    while (cur < hi) {
      if (i < src.size() && src[i].lo <= cur) {
        auto& r = src[i];
        if (r.lo < cur) // the part before the interval stays as it was
          append(out, run{r.lo, cur, r.owner, r.epoch});
        auto end = std::min(r.hi, hi);
        if (take(r))
          write(cur, end);
        else
          append(out, run{cur, end, r.owner, r.epoch});
        if (r.hi > hi) {
          r.lo = hi; // the rest lies beyond this interval
        } else {
          ++i;
        }
        cur = end;
      } else {
        // No entry from `cur` up to the next run (or the end of the interval).
        auto end = i < src.size() ? std::min(src[i].lo, hi) : hi;
        write(cur, end);
        cur = end;
      }
    }
  }
  while (i < src.size())
    append(out, src[i++]);
  runs = std::move(out);
  return vnode_set::from_intervals(std::move(changed));
}

} // namespace

void routing_table::changed() noexcept {
  // Shared by every table of the process (several supervisors run in one emulation),
  // so that a number names one state of one table.
  static std::atomic<std::uint64_t> last{0};
  version_ = last.fetch_add(1, std::memory_order_relaxed) + 1;
}

const std::vector<run>& routing_table::no_runs() noexcept {
  static const std::vector<run> none;
  return none;
}

std::vector<run> routing_table::take_runs() {
  if (!runs_)
    return {};
  // The only holder may give its runs up; one that shares them copies.
  if (runs_.use_count() == 1)
    return std::move(*runs_);
  return *runs_;
}

void routing_table::keep_runs(std::vector<run> runs) {
  runs_ = runs.empty() ? nullptr : std::make_shared<std::vector<run>>(std::move(runs));
}

void routing_table::assign(const vnode_set& v, proc_id owner, std::uint64_t epoch) {
  if (v.empty())
    return;
  auto rs = take_runs();
  overlay(rs, v, owner, epoch, [](const run&) { return true; });
  keep_runs(std::move(rs));
  changed();
}

bool routing_table::would_change(const wire::route_entry& e) const {
  // Walks the runs that meet each interval, from a binary search to its first vnode: an
  // interval with a gap (an unknown vnode) or a run of a lower epoch would be taken.
  for (auto [lo, hi] : e.vnodes.intervals()) {
    auto it = std::upper_bound(runs().begin(), runs().end(), lo,
                               [](vnode_id x, const run& r) { return x < r.hi; });
    for (auto cur = lo; cur < hi; ++it) {
      if (it == runs().end() || it->lo > cur)
        return true; // [cur, ...) has no entry
      if (e.epoch > it->epoch)
        return true;
      cur = it->hi;
    }
  }
  return false;
}

vnode_set routing_table::apply(const wire::route_entry& e) {
  if (!would_change(e))
    return {};
  auto rs = take_runs();
  auto result = overlay(rs, e.vnodes, e.owner, e.epoch,
                        [&e](const run& r) { return e.epoch > r.epoch; });
  keep_runs(std::move(rs));
  changed();
  return result;
}

const run* routing_table::find(vnode_id v) const {
  auto it = std::upper_bound(runs().begin(), runs().end(), v,
                             [](vnode_id x, const run& r) { return x < r.hi; });
  if (it == runs().end() || it->lo > v)
    return nullptr;
  return &*it;
}

proc_id routing_table::owner(vnode_id v) const {
  auto r = find(v);
  return r ? r->owner : no_proc;
}

std::uint64_t routing_table::epoch(vnode_id v) const {
  auto r = find(v);
  return r ? r->epoch : 0;
}

bool routing_table::knows(vnode_id v) const {
  return find(v) != nullptr;
}

vnode_set routing_table::owned_by(proc_id p) const {
  vnode_set result; // runs are sorted: appended in order
  for (const auto& r : runs())
    if (r.owner == p)
      result.append(r.lo, r.hi);
  return result;
}

vnode_set routing_table::all() const {
  vnode_set result;
  for (const auto& r : runs())
    result.append(r.lo, r.hi);
  return result;
}

std::vector<wire::route_entry> routing_table::snapshot() const {
  std::map<std::pair<proc_id, std::uint64_t>, std::vector<vnode_set::interval>> groups;
  for (const auto& r : runs())
    groups[{r.owner, r.epoch}].push_back({r.lo, r.hi});
  std::vector<wire::route_entry> out;
  out.reserve(groups.size());
  for (auto& [key, xs] : groups)
    out.push_back(wire::route_entry{vnode_set::from_intervals(std::move(xs)), key.first,
                                    key.second});
  return out;
}

std::map<proc_id, vnode_set> routing_table::partition(const vnode_set& v) const {
  // Each owner's pieces come in increasing order: appended to its set as they come.
  std::map<proc_id, vnode_set> out;
  std::size_t i = 0;
  for (auto [lo, hi] : v.intervals()) {
    while (i < runs().size() && runs()[i].hi <= lo)
      ++i;
    auto cur = lo;
    // Runs that reach past `hi` are not consumed: they may cover the next interval too.
    for (auto j = i; cur < hi; ) {
      if (j < runs().size() && runs()[j].lo <= cur) {
        auto end = std::min(runs()[j].hi, hi);
        out[runs()[j].owner].append(cur, end);
        cur = end;
        ++j;
      } else {
        auto end = j < runs().size() ? std::min(runs()[j].lo, hi) : hi;
        out[no_proc].append(cur, end);
        cur = end;
      }
    }
  }
  return out;
}

} // namespace banyan

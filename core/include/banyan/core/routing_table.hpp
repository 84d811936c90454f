#pragma once
/// Who owns each virtual node, with a per-vnode epoch that counts its migrations.
///
/// Updates carry an epoch and the higher epoch wins, so members that receive the same
/// updates in different orders still converge to the same table. Ownership is stored as
/// runs of consecutive vnodes with one owner and epoch, so a table over millions of
/// vnodes spread over a few processors stays a few runs long.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "banyan/core/messages.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

class routing_table {
public:
  /// Vnodes [lo, hi) owned by `owner` since `epoch`.
  struct run {
    vnode_id lo;
    vnode_id hi;
    proc_id owner;
    std::uint64_t epoch;
    friend bool operator==(const run& a, const run& b) {
      return a.lo == b.lo && a.hi == b.hi && a.owner == b.owner && a.epoch == b.epoch;
    }
  };

  /// Makes `owner` the owner of `v` at `epoch`, whatever the current entries say.
  void assign(const vnode_set& v, proc_id owner, std::uint64_t epoch);

  /// Takes `e.owner` for each vnode of `e.vnodes` that is unknown or whose epoch is
  /// lower than `e.epoch`. Returns the vnodes whose entry was replaced (a newer epoch
  /// naming the same owner counts: the entry changed even though the owner did not).
  /// An entry that changes nothing (the common case: probe replies repeat the routes the
  /// prober knows) costs a lookup per interval of `e.vnodes`, not a rebuild of the runs.
  vnode_set apply(const wire::route_entry& e);
  /// True when `apply(e)` would change the table.
  bool would_change(const wire::route_entry& e) const;

  /// The owner of `v`; `no_proc` if unknown.
  proc_id owner(vnode_id v) const;
  /// The epoch of `v`'s entry; 0 if unknown.
  std::uint64_t epoch(vnode_id v) const;
  /// True when the table has an entry for `v`.
  bool knows(vnode_id v) const;

  /// The vnodes whose entry names `p`.
  vnode_set owned_by(proc_id p) const;
  /// Every vnode with an entry.
  vnode_set all() const;

  /// The table as route entries, one per (owner, epoch) pair, ordered by owner then
  /// epoch. Applying them to an empty table reproduces this table.
  std::vector<wire::route_entry> snapshot() const;

  /// Splits `v` by current owner; vnodes without an entry are filed under `no_proc`.
  /// Owners with no vnode in `v` are absent from the map.
  std::map<proc_id, vnode_set> partition(const vnode_set& v) const;

  /// The runs, sorted by `lo`, disjoint; touching runs never share owner and epoch.
  const std::vector<run>& runs() const noexcept { return runs_ ? *runs_ : no_runs(); }
  bool empty() const noexcept { return !runs_; }

  /// Names the table's state: every change gives the table a number no table in this
  /// process has had, and a copy keeps its original's. So two tables with the same
  /// version hold the same entries (the converse need not hold), which lets a holder of
  /// a copy see in O(1) whether it is still current (`supervisor_view::refresh`).
  std::uint64_t version() const noexcept { return version_; }

  friend bool operator==(const routing_table& a, const routing_table& b) {
    return a.version_ == b.version_ || a.runs() == b.runs();
  }
  friend bool operator!=(const routing_table& a, const routing_table& b) { return !(a == b); }

private:
  const run* find(vnode_id v) const;
  void changed() noexcept;

  /// The runs, for a change: moved out when this table alone holds them, else copied.
  std::vector<run> take_runs();
  static const std::vector<run>& no_runs() noexcept;
  void keep_runs(std::vector<run> runs);

  /// Canonical, so equal tables have equal runs; null when empty. Copies of a table share
  /// its runs until one of them changes (copy on write): every emulated processor is
  /// handed the same initial table, and the views' snapshots of their supervisor's table
  /// (supervisor_view) cost no copy while it stays unchanged. Never written while shared.
  std::shared_ptr<std::vector<run>> runs_;
  std::uint64_t version_ = 0; // 0: the empty table every table starts as
};

} // namespace banyan

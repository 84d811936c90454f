#pragma once
/// Watches a cluster from outside: every processor reports its tree events here,
/// and the monitor keeps the global picture (every tree's parent array, who is
/// measuring, when the last parent changed). Thread-safe, so processors may report
/// from CAF worker threads in real time. It is instrumentation for simulations,
/// tests and the demo, not part of the protocol: no processor ever reads it.

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/types.hpp"

namespace banyan::actors {

class cluster_monitor {
public:
  /// `procs`: the size of the processor id space.
  explicit cluster_monitor(std::size_t procs);

  void on_event(proc_id who, const tree_event& e);
  /// Also hands every event to `f` (after taking it in; outside the monitor's lock).
  /// Set it before any processor reports.
  void set_listener(std::function<void(proc_id, const tree_event&)> f) { listener_ = std::move(f); }

  /// The tree as the processors' reports describe it.
  banyan::tree tree_of(tree_key k) const;
  /// Roots of the trees that exist now (one per live member).
  std::vector<proc_id> roots() const;
  std::vector<bool> live() const;
  std::size_t live_count() const;
  /// Processors that are busy: measuring, holding tree updates, joining or leaving.
  std::size_t measuring() const;
  timestamp last_change() const;
  std::uint64_t parent_changes() const;
  std::uint64_t cycles_broken() const;
  /// Joins given up because no contact answered.
  std::uint64_t join_failures() const;
  /// Trees (of both kinds) in which every live processor has a parent; with `roots`,
  /// only those roots' trees count (trees on demand: the roots in use).
  std::size_t complete_trees(const std::vector<proc_id>& roots = {}) const;

private:
  void take(proc_id who, const tree_event& e);

  mutable std::mutex mtx_;
  std::size_t procs_;
  std::vector<bool> live_;
  std::vector<bool> measuring_;
  std::size_t measuring_count_ = 0;
  /// Every live processor's parent in each tree (by processor id), for the trees of every
  /// joined root; empty while no processor has had a parent in it (on demand, the trees
  /// of roots not open), so a root whose trees are never formed costs no N-long list.
  std::map<tree_key, std::vector<proc_id>> parents_;
  timestamp last_change_{0};
  std::uint64_t changes_ = 0;
  std::uint64_t cycles_ = 0;
  std::uint64_t join_failures_ = 0;
  std::function<void(proc_id, const tree_event&)> listener_;
};

} // namespace banyan::actors

#pragma once
// Which roots have trees (supervisor_config::tree_set). Every member is a root in
// all-roots mode. On demand, a root's two trees exist only while open: the root opens
// them (supervisor::prepare, which the layer that starts collectives calls) and tells
// every member (`trees_open`); members attach as to a newcomer's trees, by measuring. The
// root closes them `retire_after` after their last use, and every member drops them.
// Each opening or closing has a sequence number of the root's incarnation: a later one
// wins, so a late notice neither reopens nor closes. The set reaches newcomers from their
// contact (a `trees_open` right after the join_accept) and converges by anti-entropy
// (every probe reply carries the candidate's set). A root that leaves or crashes takes
// its trees with it (membership::remove).

#include <map>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class tree_set {
public:
  explicit tree_set(parts& s) : s_(s) {}

  bool on_demand() const;
  /// Whether the trees rooted at member p are to exist here.
  bool wanted(proc_id p) const;
  /// Our own trees are used now: opened if they were not (every member told), kept
  /// `retire_after` from now on. Nothing in all-roots mode, or when not a member.
  void prepare(timestamp now, outbox& out);
  void on(timestamp now, proc_id from, const wire::trees_open& m, outbox& out);
  /// What a probe reply or a contact told us of the roots.
  void merge(timestamp now, const std::vector<wire::open_root>& roots, outbox& out);
  /// Every root we know open or closed (ours included): for probe replies and newcomers.
  std::vector<wire::open_root> snapshot() const;
  /// Roots whose trees are open here.
  std::vector<proc_id> open_roots() const;
  void on_retire_timer(timestamp now, std::uint64_t gen, outbox& out);
  /// Member p (of incarnation inc) departed: what we knew of its trees goes with it.
  void forget(proc_id p, std::uint64_t inc);
  void reset();

private:
  /// Brings p's trees here in line with what we know: opened (and measured for) or
  /// dropped.
  void sync(timestamp now, proc_id p, outbox& out);
  void announce(const wire::open_root& e, outbox& out) const;

  parts& s_;
  std::map<proc_id, wire::open_root> roots_;
  timestamp last_used_{0};
  std::uint64_t retire_gen_ = 0; ///< the retire timer armed (0: none)
  std::uint64_t retire_timers_ = 0; ///< numbers them across lives (never reset)
};

} // namespace banyan::sup

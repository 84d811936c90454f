#pragma once
// Parents and children: the rules' verdict on a measured candidate in every tree, the
// adoption of children that ask us (refused where they are our ancestor or we are
// unconnected), the figures parents tell us, and losing a parent. A bandwidth-tree
// processor whose parent lost its own path keeps the figures of that path, marked
// `reattaching`, and for at most `reattach_hold` moves to no candidate outside its LAN:
// it would judge the candidate against the estimate of a path that no longer exists.

#include <cstdint>
#include <set>
#include <vector>

#include "banyan/core/rule_context.hpp"
#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

/// What one probe's verdicts are limited to: a larger bandwidth margin (background
/// probes: hysteresis), and only the trees being re-examined (empty or null: all).
struct judge_scope {
  double bw_margin = 0;
  /// Latency trees: a move must shorten the RTT to the parent and the distance to the
  /// root by this fraction (background probes: the same hysteresis as `bw_margin`).
  double dist_margin = 0;
  const std::set<tree_key>* only = nullptr;
};

class parent_selection {
public:
  explicit parent_selection(parts& s) : s_(s) {}

  /// The trees (and the subtrees to offer) in which candidate `from`, measured at
  /// `rtt` and `bw`, should become our parent by the rules; refreshes the figures of the
  /// trees where it already is.
  std::vector<wire::subtree_entry> judge_candidate(timestamp now, proc_id from, duration rtt,
                                                   rate bw,
                                                   const std::vector<wire::tree_info>& trees,
                                                   const judge_scope& scope = {});
  /// Our verdict on adopting `from` in one tree.
  wire::adopt_verdict judge(proc_id from, const wire::subtree_entry& e);

  void on(timestamp now, proc_id from, const wire::adopt_request& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::tree_update& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::release& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::subtree_update& m, outbox& out);
  /// A child's subtree summary (subtree_summary.hpp).
  void on(timestamp now, proc_id from, const wire::tree_summary& m, outbox& out);

  /// Tree t has no parent now (the children of a bandwidth tree hear `connected` false).
  void lose_parent(timestamp now, tree_state& t, outbox& out);
  /// Notes when tree t's figures became those of a lost path (`was`: before the change).
  void note_reattaching(timestamp now, tree_state& t, bool was) const;
  /// Releases every parent and orphans every child (after being taken for gone).
  void leave_all_trees(timestamp now, outbox& out);
  /// Our number of children in t changed: its children hear it where their figures
  /// depend on it (bandwidth trees).
  void fan_out_changed(const tree_state& t);
  /// Bandwidth-rule moves to a remote candidate held (see reattach_hold).
  std::uint64_t held_moves() const noexcept { return held_moves_; }

private:
  bool hold_move(timestamp now, const tree_state& t, duration rtt, const rule_context& ctx) const;
  /// Where to send joiner `from` asking for its first place in bandwidth tree t instead
  /// of adopting it (no_proc: adopt it here): a LAN child when our fan-out would bind.
  proc_id relief_child(const tree_state& t, proc_id from) const;

  parts& s_;
  std::uint64_t held_moves_ = 0;
};

} // namespace banyan::sup

#pragma once
/// What a broadcast down one tree costs below a processor: a summary of its subtree that
/// each non-root processor sends its parent (`wire::tree_summary`) and that every parent
/// folds together, so that the root of a tree learns, for its own two trees, the worst
/// arrival a broadcast from it can expect (tree_choice.hpp). A root otherwise knows
/// nothing of its trees beyond its children.
///
///   root                      root's summary: the fold of its children's
///    |  hop r->a                                (each includes the child's own hop)
///    a         a's summary = own hop (r->a)  +  fold(b's, c's)
///   / \      (b, c: leaves)
///  b   c       a leaf's summary = its own hop
///
/// Per tree, over every path from the parent of the processor down to a processor in its
/// subtree, the summary keeps
///   half_rtt    the largest sum of RTT/2 (one-way latency, taking links as symmetric)
///   per_byte    the largest sum of 1/hop rate, in seconds per byte: what one byte costs
///               on a path when every hop carries the whole message before passing it on
///               (store-and-forward, the latency tree)
///   bottleneck  the smallest hop rate (what pipelined segments are paced by: the
///               bandwidth tree)
///   depth       the largest number of hops (per-message send overheads)
/// where a hop's rate is the rate the child receives at from its parent: the bandwidth
/// measured to the parent, or the parent's sending capacity split among its children if
/// that is less (tree_choice.hpp's `tree_position::hop`). It assumes a parent sends to its
/// children at the same time, each at its share, and that a hop's rate does not depend on
/// what else crosses the same link in other trees.
///
/// Each maximum is taken on its own, so they may come from different paths: the
/// predictions from a summary (half_rtt + depth * overhead + N * per_byte on the latency
/// tree) are an upper envelope of the worst path's, at most a few times above it when
/// the slowest and the farthest paths differ.
///
/// A summary is `complete` when every hop below has figures (a measured rate) and every
/// child has sent its own; the root predicts from its summaries only when they are.
///
/// Pure values and functions; `subtree_summary_of` reads a `tree_state`.

#include <cstdint>
#include <optional>

#include "banyan/core/types.hpp"

namespace banyan {

class tree_state;

/// The relative change of a figure that makes a processor send its parent a new summary
/// (`differs`): smaller changes are not worth a message.
inline constexpr double summary_hysteresis = 0.1;

struct subtree_summary {
  duration half_rtt{0};
  double per_byte = 0; ///< seconds per byte
  rate bottleneck = infinite_rate;
  std::uint32_t depth = 0;
  bool complete = true;
  friend bool operator==(const subtree_summary& a, const subtree_summary& b) {
    return a.half_rtt == b.half_rtt && a.per_byte == b.per_byte &&
           a.bottleneck == b.bottleneck && a.depth == b.depth && a.complete == b.complete;
  }
  friend bool operator!=(const subtree_summary& a, const subtree_summary& b) { return !(a == b); }
};

/// The summary of nothing below (a leaf's children): no path, complete.
inline subtree_summary empty_summary() { return subtree_summary{}; }

/// Both subtrees' worst: largest half_rtt, per_byte and depth, smallest bottleneck;
/// complete only if both are.
subtree_summary fold(const subtree_summary& a, const subtree_summary& b);

/// `below` (the fold of a processor's children's summaries) seen from the processor's
/// parent: one more hop of round trip `rtt` and rate `hop` above every path (0 or
/// unknown rate: incomplete).
subtree_summary through_hop(const subtree_summary& below, duration rtt, rate hop);

/// Whether `now` differs enough from `sent` (what the parent last heard) to tell it: a
/// change of depth or completeness, or a relative change above `hysteresis` in any
/// other figure.
bool differs(const subtree_summary& sent, const subtree_summary& now, double hysteresis);

/// The fold of the summaries `t`'s children sent (`tree_state::child_summaries`),
/// incomplete if a child has sent none yet; the empty summary for a processor without
/// children. What the root of `t` predicts its broadcasts from.
subtree_summary fold_children(const tree_state& t);

/// The summary a non-root processor at `t` sends its parent: its own hop (rate as in
/// `position_of`, `capacity` standing for the parent's sending capacity where the tree
/// keeps none) above the fold of its children's. Incomplete while a child has not sent
/// its own, or the hop has no measured rate. Nothing for a root or an orphan.
std::optional<subtree_summary> subtree_summary_of(const tree_state& t, rate capacity = 0);

} // namespace banyan

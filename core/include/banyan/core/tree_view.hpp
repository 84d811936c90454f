#pragma once
/// What a collective engine (broadcast, reduction) needs to know about its processor:
/// which vnodes it owns, who owns the others, and its place in the trees. The engines
/// read nothing else, so the same code runs over banyan's adaptive trees
/// (`supervisor_view`, which reads a processor's supervisor) and over static baseline
/// trees (`static_tree_view`, which reads `banyan::tree` values and a routing table).
///
///      broadcast_engine      reduce_engine
///              |                   |
///              +----- tree_view ---+
///              |                   |
///      supervisor_view       static_tree_view
///   (adaptive trees, churn)  (binomial, MagPIe, ...: fixed)

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "banyan/core/subtree_summary.hpp"
#include "banyan/core/tree_choice.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

/// One child of this processor in a tree.
struct tree_child {
  proc_id id = no_proc;
  vnode_set subtree;           ///< vnodes of the child and everything below it
  std::size_t descendants = 0; ///< processors below the child, or an estimate (vnode count)
};

class tree_view {
public:
  virtual ~tree_view() = default;

  virtual proc_id self() const = 0;
  /// Still taking part: a member, or leaving but not gone yet. Once false, the processor
  /// owns nothing and engines only pass on what they hold.
  virtual bool participating() const = 0;
  /// No longer taking part, but able to pass new work on to a member that knows better
  /// (a processor that has left, through the member that took its vnodes): a broadcast
  /// engine then still takes new streams and relays them, rather than refusing them.
  virtual bool relaying() const { return false; }
  /// The vnodes this processor owns now.
  virtual vnode_set own_vnodes() const = 0;
  /// Every vnode of the computation: what a broadcast reaches, what a reduction counts.
  virtual vnode_set all_vnodes() const = 0;
  /// The owner of `v` as this processor knows it (`no_proc` if unknown); may be stale.
  virtual proc_id owner(vnode_id v) const = 0;
  /// `vs` split by owner as this processor knows it; unknown ones under `no_proc`.
  virtual std::map<proc_id, vnode_set> owners(const vnode_set& vs) const = 0;
  /// This processor's children in tree `k` (none if it does not know the tree).
  virtual std::vector<tree_child> children(tree_key k) const = 0;
  /// This processor's parent in tree `k` (`no_proc` for the root, an orphan, or an
  /// unknown tree).
  virtual proc_id parent(tree_key k) const = 0;
  /// The largest distance to a root over this processor's latency trees (the paper's
  /// estimate of how long a reduction takes to reach it from the farthest leaf).
  virtual duration max_root_distance() const = 0;
  /// The lowest rate at which this processor receives along its bandwidth trees (their
  /// `est`), for sizing waits on long messages; `infinite_rate` if unknown.
  virtual rate min_root_rate() const = 0;
  /// This processor's place in the trees of kind `k` of the other roots, where it has a
  /// parent (core/tree_choice.hpp: what a broadcast's origin predicts completion times
  /// from). Empty when nothing is measured, as for static trees.
  virtual std::vector<tree_position> positions(tree_kind k) const {
    (void)k;
    return {};
  }
  /// What a broadcast down this processor's own tree of kind `k` costs, from the
  /// summaries its children sent up (subtree_summary.hpp); nothing while the tree has no
  /// child, or the view keeps none (static trees, the paper's rule variant). Possibly
  /// incomplete (`complete`): a child has not sent one yet.
  virtual std::optional<subtree_summary> own_summary(tree_kind k) const {
    (void)k;
    return std::nullopt;
  }
  /// Other processors to hand a frame to when the owner of its vnodes is unknown (or
  /// unreachable), preferred first. Any member will do: it forwards by its own table.
  virtual std::vector<proc_id> peers() const = 0;
  /// The round trip to `p` as this processor measured it; nothing when it has not (or
  /// the view keeps no measurements). Used to send point-to-point parts nearest first.
  virtual std::optional<duration> rtt(proc_id p) const {
    (void) p;
    return std::nullopt;
  }
  /// Whether `p` is in this processor's LAN, as far as its measurements tell.
  virtual bool local(proc_id p) const {
    (void) p;
    return false;
  }
  /// This processor's distance from `root` along root's latency tree (the sum of the
  /// hops' RTTs), when it has a place in that tree; nothing otherwise.
  virtual std::optional<duration> tree_distance(proc_id root) const {
    (void) root;
    return std::nullopt;
  }
  /// The smallest RTT measured to a processor outside this one's LAN, if any: a path
  /// at least that long crosses a wide-area link.
  virtual std::optional<duration> smallest_remote_rtt() const { return std::nullopt; }
  /// Whether deliveries to this processor's own vnodes may be made now (the delivery
  /// lease, supervisor_config::lease: its adopter has not claimed them and cannot yet).
  /// Engines hold the deliveries due while it is false.
  virtual bool may_deliver(timestamp now) const {
    (void) now;
    return true;
  }
  /// Engines call this at the start of every event they handle: a view may take a
  /// snapshot of what it will still need once its source is gone.
  virtual void refresh() {}
};

/// Splits `vs` by the processor each part should be sent to: its owner per `view`, or,
/// when the owner is unknown, this processor itself or `unusable`, the first usable peer.
/// What nobody can take is filed under `view.self()`.
std::map<proc_id, vnode_set> route_to_owners(const tree_view& view, const vnode_set& vs,
                                             const std::function<bool(proc_id)>& unusable);

} // namespace banyan

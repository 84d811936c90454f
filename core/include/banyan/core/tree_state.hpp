#pragma once
/// What one processor knows about its place in one tree (one root, one kind).
///
///            root
///             |      parent_info_: what the parent last told us (its dist,
///          parent      est, child count and path to the root)
///             |      rtt_parent_ / bw_parent_: what we measured to it
///            self    children_: child -> vnodes of that child's subtree
///           /    |
///        child  child
///
/// Derived values follow the paper: dist = parent's dist + RTT to the parent
/// (latency trees); est = min(parent's est, bandwidth to the parent / the parent's
/// number of children) (bandwidth trees).

#include <algorithm>
#include <map>
#include <vector>

#include "banyan/core/messages.hpp"
#include "banyan/core/subtree_summary.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

class tree_state {
public:
  tree_state() = default;
  tree_state(tree_key key, proc_id self) : key_(key), self_(self) {}

  tree_key key() const noexcept { return key_; }
  bool is_root() const noexcept { return key_.root == self_; }
  /// The root, or a processor with a parent.
  bool connected() const noexcept { return is_root() || parent_ != no_proc; }
  proc_id parent() const noexcept { return parent_; }

  duration rtt_parent() const noexcept { return rtt_parent_; }
  rate bw_parent() const noexcept { return bw_parent_; }

  /// Latency trees: distance to the root along the tree (sum of hop RTTs).
  duration dist() const noexcept {
    return is_root() ? duration{0} : parent_info_.dist + rtt_parent_;
  }
  /// Bandwidth trees: estimated rate at which this processor receives a broadcast:
  /// at most the parent's own, the path's (bw_parent), and the parent's share of what
  /// it can send, split among its children. Without a sender capacity (the paper's
  /// rule) the path rate itself is split: bw_parent / children.
  rate est() const noexcept {
    if (is_root())
      return infinite_rate;
    if (parent_ == no_proc)
      return 0;
    auto n = std::max<std::uint32_t>(parent_info_.children, 1);
    auto sendable = sender_capacity_ > 0 ? std::max(bw_parent_, sender_capacity_) : bw_parent_;
    return std::min({parent_info_.est, bw_parent_, sendable / n});
  }
  /// What a parent can send in all, split among its children (0: unknown, split the
  /// path rate instead). See bandwidth_rule.hpp.
  rate sender_capacity() const noexcept { return sender_capacity_; }
  void set_sender_capacity(rate r) noexcept { sender_capacity_ = r; }
  /// Ancestors, parent first, root last.
  std::vector<proc_id> path() const {
    std::vector<proc_id> result;
    if (parent_ == no_proc)
      return result;
    result.reserve(parent_info_.path.size() + 1);
    result.push_back(parent_);
    result.insert(result.end(), parent_info_.path.begin(), parent_info_.path.end());
    return result;
  }
  /// Bandwidth trees (supervisor_config::hold_while_reattaching): our parent, or a
  /// processor above it, lost its parent and is looking for another, so est() and dist()
  /// are those of a path that is gone; since when we know it.
  bool reattaching() const noexcept { return parent_ != no_proc && parent_info_.reattaching; }
  timestamp reattaching_since() const noexcept { return reattaching_since_; }
  void set_reattaching_since(timestamp t) noexcept { reattaching_since_ = t; }
  bool has_ancestor(proc_id p) const {
    return parent_ == p || std::find(parent_info_.path.begin(), parent_info_.path.end(), p)
                               != parent_info_.path.end();
  }
  /// This processor's own place, as told to probers and children.
  wire::tree_info info() const {
    wire::tree_info i;
    i.tree = key_;
    i.connected = connected();
    i.dist = dist();
    i.est = est();
    i.children = static_cast<std::uint32_t>(children_.size());
    i.path = path();
    i.reattaching = reattaching();
    return i;
  }

  /// Attach to a new parent (or refresh the current one).
  void set_parent(proc_id p, duration rtt, rate bw, wire::tree_info parent_info) {
    parent_ = p;
    rtt_parent_ = rtt;
    bw_parent_ = bw;
    parent_info_ = std::move(parent_info);
    summary_sent_to_ = no_proc; // a parent (new, or adopting us again) has none of ours
  }
  /// Refresh what the parent told us, keeping the measurements.
  void set_parent_info(wire::tree_info parent_info) { parent_info_ = std::move(parent_info); }
  void refresh_measurement(duration rtt, rate bw) {
    rtt_parent_ = rtt;
    bw_parent_ = bw;
  }
  void clear_parent() {
    parent_ = no_proc;
    rtt_parent_ = duration{0};
    bw_parent_ = 0;
    parent_info_ = wire::tree_info{};
    summary_sent_to_ = no_proc;
  }
  const wire::tree_info& parent_info() const noexcept { return parent_info_; }

  const std::map<proc_id, vnode_set>& children() const noexcept { return children_; }
  bool has_child(proc_id c) const { return children_.count(c) != 0; }
  void set_child(proc_id c, vnode_set subtree) { children_[c] = std::move(subtree); }
  bool remove_child(proc_id c) {
    child_summaries_.erase(c);
    return children_.erase(c) != 0;
  }

  /// vnodes of this processor's subtree: its own plus its children's subtrees.
  /// One sort of every interval, not a union per child: a processor with c children
  /// would otherwise rebuild the growing set c times (quadratic at a flat LAN's root).
  vnode_set subtree(const vnode_set& own) const {
    if (children_.size() <= 2) {
      vnode_set s = own;
      for (auto& [c, vs] : children_)
        s |= vs;
      return s;
    }
    std::size_t n = own.interval_count();
    for (auto& [c, vs] : children_)
      n += vs.interval_count();
    std::vector<vnode_set::interval> xs;
    xs.reserve(n);
    xs.insert(xs.end(), own.intervals().begin(), own.intervals().end());
    for (auto& [c, vs] : children_)
      xs.insert(xs.end(), vs.intervals().begin(), vs.intervals().end());
    return vnode_set::from_intervals(std::move(xs));
  }
  /// What was last reported to the parent (to send only real changes).
  const vnode_set& reported() const noexcept { return reported_; }
  void set_reported(vnode_set s) { reported_ = std::move(s); }

  /// The subtree summaries children sent (subtree_summary.hpp), by child; a child that
  /// has sent none is missing. Dropped with the child.
  const std::map<proc_id, subtree_summary>& child_summaries() const noexcept {
    return child_summaries_;
  }
  /// Records child c's summary; false if c is no child here.
  bool set_child_summary(proc_id c, const subtree_summary& s) {
    if (!has_child(c))
      return false;
    child_summaries_[c] = s;
    return true;
  }
  /// The summary last sent, and the parent it went to (no_proc: none sent).
  const subtree_summary& summary_sent() const noexcept { return summary_sent_; }
  proc_id summary_sent_to() const noexcept { return summary_sent_to_; }
  void set_summary_sent(proc_id to, const subtree_summary& s) {
    summary_sent_to_ = to;
    summary_sent_ = s;
  }

private:
  tree_key key_;
  proc_id self_ = no_proc;
  proc_id parent_ = no_proc;
  duration rtt_parent_{0};
  rate bw_parent_ = 0;
  rate sender_capacity_ = 0;
  wire::tree_info parent_info_;
  timestamp reattaching_since_{0};
  std::map<proc_id, vnode_set> children_;
  vnode_set reported_;
  std::map<proc_id, subtree_summary> child_summaries_;
  subtree_summary summary_sent_;
  proc_id summary_sent_to_ = no_proc;
};

} // namespace banyan

#pragma once
/// A `tree_view` over a processor's own supervisor: banyan's adaptive trees, its routing
/// table and its vnodes, as they are at the moment of each question.
///
/// A supervisor that has left forgets its trees, members and routes, but the collective
/// engines of a leaving processor still have frames to pass on (docs/collectives.md,
/// "Leaving"). So while the supervisor is a member (or leaving), `refresh()` keeps a
/// snapshot of its routing table and members; once it has left, the view answers from
/// that snapshot: no vnodes, no trees. Its knowledge of owners is stale from then on
/// (others leave and join meanwhile, and it hears nothing), so every vnode is routed to
/// its successor, the member that took its vnodes (a neighbour that stays, with current
/// routes and trees), first among `peers()` too; without one (it owned nothing), owners
/// as last known.

#include <vector>

#include "banyan/core/routing_table.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree_view.hpp"

namespace banyan {

class supervisor_view final : public tree_view {
public:
  /// `s` must outlive the view.
  explicit supervisor_view(const supervisor& s);

  proc_id self() const override { return sup_.self(); }
  bool participating() const override;
  /// Left, with a successor: new streams are relayed to it.
  bool relaying() const override { return successor() != no_proc; }
  vnode_set own_vnodes() const override;
  vnode_set all_vnodes() const override;
  proc_id owner(vnode_id v) const override;
  std::map<proc_id, vnode_set> owners(const vnode_set& vs) const override;
  /// Children with their subtree vnode sets as the supervisor keeps them; the number of
  /// descendants is not known there, so the subtree's vnode count stands in for it.
  std::vector<tree_child> children(tree_key k) const override;
  proc_id parent(tree_key k) const override;
  duration max_root_distance() const override;
  rate min_root_rate() const override;
  std::vector<tree_position> positions(tree_kind k) const override;
  std::optional<subtree_summary> own_summary(tree_kind k) const override;
  /// Members nearest first (by the RTT the supervisor measured), then the unmeasured
  /// ones by id.
  std::vector<proc_id> peers() const override;
  /// What the supervisor measured (kept after it has left).
  std::optional<duration> rtt(proc_id p) const override { return sup_.measured_rtt(p); }
  bool local(proc_id p) const override { return sup_.is_local(p); }
  std::optional<duration> tree_distance(proc_id root) const override;
  std::optional<duration> smallest_remote_rtt() const override {
    return sup_.smallest_remote_rtt();
  }
  bool may_deliver(timestamp now) const override { return sup_.may_deliver(now); }
  void refresh() override;

private:
  const routing_table& routes() const;
  /// Once the supervisor has left: the member that took its vnodes (no_proc if none).
  proc_id successor() const;

  const supervisor& sup_;
  routing_table routes_;       // snapshot, for after the supervisor has left
  std::vector<proc_id> members_; // snapshot of the member list the peers were ranked from
  /// The supervisor's members_version() when members_ was last compared with its list
  /// (0: never; versions start at 1).
  std::uint64_t members_version_ = 0;
  std::vector<proc_id> peers_;   // snapshot, ranked
};

} // namespace banyan

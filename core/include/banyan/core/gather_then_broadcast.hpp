#pragma once
/// The shape allgather and all-to-all share: a gather up the trees (the reduction engine in
/// block mode, core/gather.hpp) and a broadcast or scatter from the root vnode's owner
/// (core/broadcast.hpp, core/scatter.hpp), owned as one `collective_engine`.
///
/// Frames go to the half whose message type they are (`reduce_partial`, `reduce_handoff`,
/// `reduce_ack`, `reduce_ask` up; `bcast_segment`, `bcast_offer`, `bcast_answer`,
/// `bcast_ack` down), timer tokens name the half (`token * 2` for the gather, + 1 for the
/// broadcast), and view changes reach both (adoptions the gather). After every event the
/// collective's own `absorb` turns what the halves produced into its outbox: what goes down
/// once a gather completes at the root's owner, and what the collective delivers.

#include <algorithm>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

class gather_then_broadcast : public collective_engine {
public:
  reduce_engine& up() noexcept { return up_; }
  broadcast_engine& down() noexcept { return down_; }

  /// Gives operation `op` up here (see `reduce_engine::abandon`); what already went down
  /// goes on.
  reduce_abandoned abandon(timestamp now, std::uint64_t op);

  bool on_message(timestamp now, proc_id from, const wire::message& m) override;
  void on_timer(timestamp now, std::uint64_t token) override;
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m) override;
  void on_view_change(timestamp now, const view_change& change) override;
  bool holding() const override { return up_.holding() || down_.holding(); }
  bool drained(timestamp now, const send_fates& fates) const override;
  std::uint64_t frames_sent() const override {
    return up_.frames_sent() + down_.frames_sent();
  }
  timestamp last_send() const override { return std::max(up_.last_send(), down_.last_send()); }

protected:
  /// `up` and `down` are the halves' configurations, kinds and block modes already set.
  gather_then_broadcast(tree_view& view, const reduce_op_table& ops, reduce_config up,
                        broadcast_config down, vnode_set settled)
    : view_(view), up_(view, ops, up, std::move(settled)), down_(view, down) {}

  /// Moves what the halves produced (`ro_`, `bo_`) into the collective's outbox.
  virtual void absorb(timestamp now) = 0;

  tree_view& view_;
  reduce_engine up_;
  broadcast_engine down_;
  reduce_outbox ro_;
  broadcast_outbox bo_;
};

} // namespace banyan

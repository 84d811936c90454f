#pragma once
/// Allreduce and barrier over the adaptive trees, as one hosted `collective_engine`
/// composed of the two engines that exist already: a `reduce_engine` gathers every
/// vnode's contribution, once, at the owner of the root vnode (up the latency tree, or
/// the bandwidth tree for long arrays), and that processor broadcasts the result with a
/// `broadcast_engine` to every vnode, once (down the tree the broadcasts' model picks:
/// the latency tree for short results, segments pipelined down the bandwidth tree for
/// long ones; core/tree_choice.hpp).
///
///   start(k) at every processor --> reduce k (kind K) --> result at root's owner R
///   R: broadcast [k | value] (kind K) --> every vnode's owner: delivery {k, vnodes, value}
///
/// Both inner engines carry the engine's kind K (`allreduce`, or `barrier`: a barrier is
/// an allreduce of zero elements, whose release is the broadcast), so the runtime's
/// engine host hands every frame of either to this engine, which passes reduction
/// frames (`reduce_partial`, `reduce_handoff`) to the one and broadcast frames
/// (`bcast_segment`, `bcast_offer`, `bcast_answer`) to the other. Each inner engine keeps
/// its own guarantees under churn (docs/collectives.md): the reduction counts every
/// vnode exactly once and completes at exactly one processor, whose broadcast reaches
/// every vnode exactly once, wherever it lives then. Timers are the inner engines'
/// tokens times two, plus one for the reduction's.
///
/// A delivery for an allreduce this processor will still start (`next_op` and above: a
/// vnode moved here from a faster processor) is kept and handed out when it starts here;
/// one below `next_op` (it was started here, or never will be: a joiner's vnode came with
/// its history counted in it) is handed out at once. Deliveries of one allreduce may come
/// in several pieces (vnodes that reach this processor later), each naming its vnodes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

struct allreduce_config {
  /// The reduction phase (its `kind` and `first_op` are set from `kind` and
  /// `first_op` below).
  reduce_config reduce;
  /// The release: the broadcast of the result (its `kind` is set from `kind`; it sends
  /// no point-to-point messages). Numbering (`first_seq`, `life`, `first_tag`) as for a
  /// broadcast engine: apart per incarnation.
  broadcast_config bcast;
  /// `allreduce` or `barrier`: the kind every frame carries.
  collective_kind kind = collective_kind::allreduce;
  /// The number of the first allreduce (see reduce_config::first_op).
  std::uint64_t first_op = 1;
};

/// One allreduce, the same at every processor. A barrier: `count` 0.
struct allreduce_spec {
  std::uint64_t op = 0; ///< 1, 2, 3, ... in the order every processor starts them
  /// The vnode whose owner gathers the result and broadcasts it.
  vnode_id root = 0;
  reduce_op fn{reduce_kind::sum, element_type::int32, 0};
  std::size_t count = 0; ///< elements per vnode
  /// A runtime that cuts one long array into several allreduces (segments, each reduced
  /// and released on its own): for the reduction phase, as `reduce_spec::whole_bytes` and
  /// `reduce_spec::after` (the tree of the whole array; the segment before).
  std::size_t whole_bytes = 0;
  std::uint64_t after = 0;
};

/// The result, delivered to vnodes owned here.
struct allreduce_delivery {
  std::uint64_t op = 0;
  vnode_set vnodes;   ///< this processor's vnodes it reached (each exactly once overall)
  shared_bytes value; ///< the reduction of every vnode's contribution (empty: a barrier)
};

struct allreduce_outbox : engine_outbox {
  std::vector<allreduce_delivery> deliveries;
  /// The reduction results gathered here (at the root vnode's owner), as their
  /// broadcast starts: instrumentation.
  std::vector<reduce_result> reduced;
  /// Bugs (tests assert none): the reduction's problems, a release that could not be
  /// started, a malformed release payload.
  std::vector<reduce_problem> problems;
  void clear() {
    sends.clear();
    timers.clear();
    deliveries.clear();
    reduced.clear();
    problems.clear();
  }
};

class allreduce_collective final : public collective_engine {
public:
  /// `view` and `ops` must outlive it. `settled`: as for `reduce_engine` (a founder's own
  /// vnodes; empty for a processor that joins).
  allreduce_collective(tree_view& view, const reduce_op_table& ops, allreduce_config cfg,
                       vnode_set settled);

  /// Starts allreduce `spec.op` here; `values` gives each vnode's contribution (as for
  /// `reduce_engine::start`, whose errors it returns; a barrier needs none: null is
  /// fine with `count` 0). Deliveries kept for it (and for any before it) are handed out.
  std::optional<error> start(timestamp now, const allreduce_spec& spec, contribution_fn values);
  /// Gives allreduce `op` up here (see `reduce_engine::abandon`): its reduction state is
  /// dropped; a result that still reaches this processor's vnodes is delivered.
  reduce_abandoned abandon(timestamp now, std::uint64_t op);
  /// See `reduce_engine::next_op`.
  std::uint64_t next_op() const { return red_.next_op(); }
  std::uint64_t last_started() const noexcept { return red_.last_started(); }
  /// The inner engines (statistics, descriptions).
  const reduce_engine& reducer() const noexcept { return red_; }
  const broadcast_engine& releaser() const noexcept { return bcast_; }
  allreduce_outbox& out() noexcept { return out_; }

  /// The payload of the release of allreduce `op` with result `value`, and back.
  static shared_bytes release_payload(std::uint64_t op, const shared_bytes& value);
  static std::optional<std::pair<std::uint64_t, shared_bytes>> parse_release(
    const shared_bytes& payload);

  std::vector<collective_kind> kinds() const override { return {kind_}; }
  collective_kind kind() const override { return kind_; }
  bool on_message(timestamp now, proc_id from, const wire::message& m) override;
  void on_timer(timestamp now, std::uint64_t token) override;
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m) override;
  void on_view_change(timestamp now, const view_change& change) override;
  bool holding() const override { return red_.holding() || bcast_.holding(); }
  bool drained(timestamp now, const send_fates& fates) const override;
  std::uint64_t frames_sent() const override {
    return red_.frames_sent() + bcast_.frames_sent();
  }
  timestamp last_send() const override { return std::max(red_.last_send(), bcast_.last_send()); }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

  /// Open reductions, streams, kept deliveries, for logs.
  std::string describe() const;

private:
  /// Moves what the inner engines produced into this engine's outbox: reduction results
  /// become releases (broadcasts), release deliveries become allreduce deliveries.
  void harvest(timestamp now);

  collective_kind kind_;
  reduce_engine red_;
  broadcast_engine bcast_;
  reduce_outbox ro_;
  broadcast_outbox bo_;
  allreduce_outbox out_;
  /// Deliveries for allreduces not started here yet, by number.
  std::map<std::uint64_t, std::vector<allreduce_delivery>> early_;
};

} // namespace banyan

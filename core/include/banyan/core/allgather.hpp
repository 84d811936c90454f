#pragma once
/// Allgather: every vnode gets every vnode's block. A gather to a root vnode (core/gather.hpp:
/// the reduction engine in block mode), then a broadcast of the gathered blocks from the
/// root vnode's owner down its own trees (core/broadcast.hpp), so both halves follow the
/// trees rooted at the same processor:
///
///   up:    blocks rise to the root's owner R, merged per subtree     (gather, d hops)
///   down:  R broadcasts [op | root | every block] to every vnode     (broadcast, d hops;
///          long results in segments pipelined down the bandwidth tree)
///
/// Both halves are exactly-once under churn by their own engines' rules: each vnode's block
/// is counted once in the gather (histories move with the vnodes), and the broadcast reaches
/// each vnode once wherever it lives then. Why this and not a ring: docs/collectives.md.
///
/// One `collective_engine` of kind `allgather` owns both engines: frames of that kind go to
/// the gather engine (`reduce_partial`, `reduce_handoff`) or the broadcast engine
/// (`bcast_segment`, `bcast_offer`, `bcast_answer`) by their type, and its timer tokens
/// name the engine (`token * 2`, + 1 for the broadcast).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/gather_then_broadcast.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

/// Every vnode's block, delivered to vnodes of this processor.
struct allgather_delivery {
  std::uint64_t op = 0;
  vnode_id root = 0;
  vnode_set vnodes;   ///< the vnodes of this processor it was delivered to
  vnode_set all;      ///< the vnodes whose blocks `blocks` holds (every vnode)
  shared_bytes blocks; ///< their blocks in vnode order (core/vnode_blocks.hpp)
};

struct allgather_outbox : engine_outbox {
  std::vector<allgather_delivery> deliveries;
  /// Parts sent up from here (the gather's partials leaving this processor), for a
  /// runtime that answers a member owning no vnodes: the gather's op numbers.
  std::vector<wire::reduce_partial> partials_sent;
  /// At the root vnode's owner: gathers complete here, whose blocks went down (the
  /// result's `value` is the blocks, as broadcast).
  std::vector<reduce_result> gathered;
  std::vector<reduce_problem> problems;
  void clear() {
    sends.clear();
    timers.clear();
    deliveries.clear();
    partials_sent.clear();
    gathered.clear();
    problems.clear();
  }
};

class allgather_collective final : public gather_then_broadcast {
public:
  /// `view` and `ops` must outlive it. `rc`, `bc`: the gather's and the broadcast's
  /// configuration (their kinds are set to `allgather`). `settled` as for `reduce_engine`.
  allgather_collective(tree_view& view, const reduce_op_table& ops, reduce_config rc,
                       broadcast_config bc, vnode_set settled);

  /// Starts allgather `op` (numbered 1, 2, 3, ... in the order every processor starts
  /// them, apart from reductions and gathers) of `block` bytes per vnode to `root`
  /// (where the blocks meet before going down again). Errors as for a gather.
  std::optional<error> start(timestamp now, std::uint64_t op, vnode_id root, std::size_t block,
                             contribution_fn values);

  allgather_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override { return {collective_kind::allgather}; }
  collective_kind kind() const override { return collective_kind::allgather; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  /// Moves what the engines produced into `out_`: a gather result at the root's owner
  /// starts the broadcast down; broadcast deliveries become allgather deliveries.
  void absorb(timestamp now) override;

  allgather_outbox out_;
};

} // namespace banyan

#pragma once
/// MPICH's pairwise-exchange all-to-all (MPIR_Alltoall_intra_pairwise), a baseline for
/// banyan's all-to-all (core/alltoall.hpp), as a pure state machine. Processors 0..k-1
/// (ranked by id) each hold their own vnodes' contributions (a block for every vnode);
/// in steps i = 1 .. k-1 rank r sends to (r + i) mod k the blocks its vnodes have for
/// that processor's vnodes, one message per processor pair, and waits for the message
/// of step i from (r - i) mod k before it goes on to step i + 1 (MPI_Sendrecv):
///
///   k = 4, rank 0:   step 1: -> 1, <- 3    step 2: -> 2, <- 2    step 3: -> 3, <- 1
///
/// k (k - 1) messages in all, k - 1 steps each paying a round of latency. (MPICH pairs
/// ranks by exclusive or when k is a power of two; this always uses the modular pairing,
/// which has the same message count and step count.) The blocks between a processor's
/// own vnodes never leave it.
///
/// A static baseline like core/ring_allgather (MPI's communicator): the processors and
/// who owns which vnode are fixed when it is made (`owners`), with no recovery. Frames are
/// `wire::bcast_segment`s of kind `pairwise_alltoall`, named (0, op): `index` the step,
/// `vnodes` the sender's vnodes, `payload` for each of them in vnode order its blocks for
/// the receiver's vnodes in vnode order.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "banyan/core/alltoall.hpp"
#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

struct pairwise_alltoall_stats {
  std::uint64_t frames = 0;    ///< messages sent
  std::uint64_t delivered = 0; ///< all-to-alls completed here
  /// Frames dropped: twice from one sender, a step that does not match it, wrong sizes.
  std::uint64_t malformed = 0;
};

class pairwise_alltoall_engine {
public:
  /// `owners[p]`: the vnodes processor p (0..k-1) holds, fixed.
  pairwise_alltoall_engine(proc_id self, std::vector<vnode_set> owners);

  /// Starts all-to-all `op` here: `values(v)` for each vnode v of this processor is its
  /// block for every vnode, in vnode order (n x `block` bytes). Errors: `invalid_argument`
  /// (block 0, a contribution of the wrong size, `op` started here already, this
  /// processor outside 0..k-1).
  std::optional<error> start(timestamp now, std::uint64_t op, std::size_t block,
                             const contribution_fn& values, alltoall_outbox& out);
  static bool handles(const wire::message& m);
  /// A message of some step arrived from `from`. False when it is not this engine's.
  bool on_message(timestamp now, proc_id from, const wire::message& m, alltoall_outbox& out);

  /// All-to-alls not completed here yet.
  std::size_t in_progress() const noexcept { return ops_.size(); }
  const pairwise_alltoall_stats& stats() const noexcept { return stats_; }

private:
  struct op_state {
    std::vector<shared_bytes> from; ///< per sender: its vnodes' blocks for ours
    std::vector<bool> have;
    std::size_t step = 0; ///< the step this processor is at (0: not started)
    std::size_t block = 0;
  };
  op_state& state(std::uint64_t op);
  void send(std::uint64_t op, std::size_t step, op_state& s, alltoall_outbox& out);
  void advance(std::uint64_t op, alltoall_outbox& out);

  proc_id self_;
  std::vector<vnode_set> owners_;
  vnode_set all_;
  std::map<std::uint64_t, op_state> ops_;
  /// This processor's vnodes' contributions, per all-to-all started here.
  std::map<std::uint64_t, std::vector<std::uint8_t>> mine_;
  pairwise_alltoall_stats stats_;
};

/// The pairwise all-to-all as a hosted `collective_engine` (a static baseline without
/// recovery, like `ring_allgather_collective`: a frame it cannot use is counted and
/// dropped, it sets no timers, ignores bounces and view changes, and has drained once no
/// all-to-all is under way here).
class pairwise_alltoall_collective final : public collective_engine {
public:
  pairwise_alltoall_collective(proc_id self, std::vector<vnode_set> owners)
    : eng_(self, std::move(owners)) {}

  std::optional<error> start(timestamp now, std::uint64_t op, std::size_t block,
                             const contribution_fn& values) {
    return eng_.start(now, op, block, values, out_);
  }
  pairwise_alltoall_engine& engine() noexcept { return eng_; }
  alltoall_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override {
    return {collective_kind::pairwise_alltoall};
  }
  collective_kind kind() const override { return collective_kind::pairwise_alltoall; }
  bool on_message(timestamp now, proc_id from, const wire::message& m) override {
    eng_.on_message(now, from, m, out_);
    return true;
  }
  void on_timer(timestamp, std::uint64_t) override {}
  void on_undeliverable(timestamp, proc_id, const wire::message&) override {}
  void on_view_change(timestamp, const view_change&) override {}
  bool holding() const override { return eng_.in_progress() > 0; }
  bool drained(timestamp, const send_fates&) const override { return !holding(); }
  std::uint64_t frames_sent() const override { return 0; }
  timestamp last_send() const override { return timestamp::min() / 2; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  pairwise_alltoall_engine eng_;
  alltoall_outbox out_;
};

} // namespace banyan

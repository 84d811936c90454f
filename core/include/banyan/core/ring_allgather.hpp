#pragma once
/// MPICH's ring allgather (MPIR_Allgather_ring), a baseline for banyan's allgather
/// (core/allgather.hpp), as a pure state machine. Processors 0..k-1 (ranked by id) each
/// hold the blocks of their own vnodes (one chunk per processor); in k - 1 steps every
/// chunk travels the ring p -> p+1 -> ... -> p-1: a processor sends its own chunk to its
/// right neighbour when it starts, and passes every chunk it receives from its left on to
/// the right unless the right neighbour is where that chunk began.
///
///   k = 4:   0 -> 1 -> 2 -> 3 -> 0      every chunk 3 hops, every link 3 chunks
///
/// A static baseline like core/scatter_allgather (MPI's communicator): the processors
/// and who owns which vnode are fixed when it is made (`owners`), with no recovery.
/// Frames are `wire::bcast_segment`s of kind `ring_allgather`, named (0, op): `index` the
/// chunk's processor, `vnodes` its vnodes, `payload` their blocks in vnode order.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "banyan/core/allgather.hpp"
#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

struct ring_allgather_stats {
  std::uint64_t frames = 0;     ///< chunks sent
  std::uint64_t delivered = 0;  ///< allgathers completed here
  std::uint64_t malformed = 0;  ///< frames dropped (a chunk twice, wrong sizes, unknown rank)
};

class ring_allgather_engine {
public:
  /// `owners[p]`: the vnodes processor p (0..k-1) holds, fixed.
  ring_allgather_engine(proc_id self, std::vector<vnode_set> owners);

  /// Starts allgather `op` here: this processor's blocks (`values(v)` for its vnodes, each
  /// `block` bytes) go round the ring. Errors: `invalid_argument` (block 0, a block of
  /// the wrong size, `op` started here already, this processor outside 0..k-1).
  std::optional<error> start(timestamp now, std::uint64_t op, std::size_t block,
                             const contribution_fn& values, allgather_outbox& out);
  static bool handles(const wire::message& m);
  /// A chunk arrived from the left neighbour. False when it is not this engine's.
  bool on_message(timestamp now, proc_id from, const wire::message& m, allgather_outbox& out);

  /// Allgathers whose chunks are still expected here.
  std::size_t in_progress() const noexcept { return ops_.size(); }
  const ring_allgather_stats& stats() const noexcept { return stats_; }

private:
  struct op_state {
    std::vector<shared_bytes> chunks;
    std::vector<bool> have;
    std::size_t count = 0;
    bool started = false;
  };
  op_state& state(std::uint64_t op);
  void send(std::uint64_t op, std::size_t chunk, const shared_bytes& payload,
            allgather_outbox& out);
  void maybe_deliver(std::uint64_t op, allgather_outbox& out);

  proc_id self_;
  std::vector<vnode_set> owners_;
  vnode_set all_;
  std::map<std::uint64_t, op_state> ops_;
  ring_allgather_stats stats_;
};

/// The ring allgather as a hosted `collective_engine` (a static baseline without recovery,
/// like `scatter_allgather_collective`: a frame it cannot use is counted and dropped, it
/// sets no timers, ignores bounces and view changes, and has drained once it expects no
/// more chunks).
class ring_allgather_collective final : public collective_engine {
public:
  ring_allgather_collective(proc_id self, std::vector<vnode_set> owners)
    : eng_(self, std::move(owners)) {}

  std::optional<error> start(timestamp now, std::uint64_t op, std::size_t block,
                             const contribution_fn& values) {
    return eng_.start(now, op, block, values, out_);
  }
  ring_allgather_engine& engine() noexcept { return eng_; }
  allgather_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override { return {collective_kind::ring_allgather}; }
  collective_kind kind() const override { return collective_kind::ring_allgather; }
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
  ring_allgather_engine eng_;
  allgather_outbox out_;
};

} // namespace banyan

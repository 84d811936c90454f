#pragma once
/// MPICH's broadcast for long messages (MPIR_Bcast_scatter_ring_allgather), a baseline
/// for banyan's pipelined bandwidth trees, as a pure state machine: frames in, frames
/// and deliveries out (the style of core/broadcast, whose outbox it shares).
///
/// Processors 0..n-1 are ranked relative to the origin, r = (p - origin + n) % n; the
/// message is cut into n chunks of ceil(size / n) bytes, chunk j belonging to rank j
/// (trailing chunks may be short or empty).
///
///   1. binomial scatter: a rank receives from its binomial parent the chunks of its
///      subtree, [r, r + lowbit(r)), and passes each child c its range [c, c + mask)
///      (largest subtree first);
///   2. ring allgather: every chunk j travels the ring j -> j+1 -> ... -> j-1, so each
///      rank receives the n-1 chunks it does not own from its left neighbour and
///      forwards them right (a rank starts its own chunk once its scatter part is in).
///
///   n = 4, origin 0:  scatter  0 -[2,3]-> 2,  0 -[1]-> 1,  2 -[3]-> 3
///                     ring     0 -> 1 -> 2 -> 3 -> 0, each chunk n-1 hops
///
/// Messages shorter than `long_threshold` (or with fewer than 2 processors) go whole
/// down the binomial tree instead, as in MPICH.
///
/// Frames are `wire::bcast_segment`s of kind `scatter_allgather`: `direct` marks
/// a ring frame, `index` the chunk (`count` = n; 1 for a whole short message). The set
/// of processors is fixed (a static baseline, like MPI's communicator): there is no
/// churn handling; a malformed frame is counted and dropped.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "banyan/core/broadcast.hpp"

namespace banyan {

struct scatter_allgather_config {
  /// Below this, the whole message goes down the binomial tree (MPICH's threshold for
  /// the scatter-allgather algorithm is of the same order).
  std::size_t long_threshold = 256 * 1024;
  /// The first broadcast number, and the origin's life (`collective_id::life`).
  std::uint64_t first_seq = 1;
  std::uint32_t life = 0;
};

struct scatter_allgather_stats {
  std::uint64_t scatter_frames = 0;
  std::uint64_t ring_frames = 0;
  std::uint64_t whole_frames = 0;
  std::uint64_t delivered = 0; ///< vnode deliveries
  std::uint64_t malformed = 0;
};

class scatter_allgather_engine {
public:
  /// `procs` processors 0..procs-1 take part; `own_vnodes` tells this processor's vnodes
  /// at delivery time.
  scatter_allgather_engine(proc_id self, std::size_t procs, std::function<vnode_set()> own_vnodes,
                           scatter_allgather_config cfg = {});

  /// Broadcasts `message` from this processor; its own vnodes are delivered at once.
  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message,
                                          broadcast_outbox& out);
  /// Whether `m` is one of this engine's frames.
  static bool handles(const wire::message& m);
  /// A frame arrived from `from`. False (and counted) when it is malformed.
  bool on_message(timestamp now, proc_id from, const wire::message& m, broadcast_outbox& out);

  /// Broadcasts whose chunks are still expected here.
  std::size_t in_progress() const noexcept { return ops_.size(); }
  /// The number the next broadcast started here gets; `number_from` sets it (a runtime
  /// that keeps one count for several engines).
  std::uint64_t next_seq() const noexcept { return next_seq_; }
  void number_from(std::uint64_t seq) noexcept { next_seq_ = seq; }
  const scatter_allgather_stats& stats() const noexcept { return stats_; }

private:
  struct op_state {
    std::uint64_t total = 0;
    std::vector<shared_bytes> chunks;
    std::vector<bool> have;
    std::size_t scatter_left = 0; ///< non-empty chunks of our range still to come by scatter
    std::size_t ring_left = 0;    ///< non-empty chunks still to come by the ring
    bool delivered = false;
    bool ring_started = false;
  };

  std::size_t rank_of(proc_id p, proc_id origin) const;
  proc_id proc_of(std::size_t rank, proc_id origin) const;
  std::size_t chunk_size(std::uint64_t total) const;
  std::size_t chunk_bytes(std::uint64_t total, std::size_t j) const;
  /// [first, last) ranks of the subtree of `rank` in the binomial tree.
  std::pair<std::size_t, std::size_t> subtree(std::size_t rank) const;
  void send(const wire::collective_id& op, proc_id to, bool ring, std::uint32_t index,
            std::uint32_t count, std::uint64_t total, shared_bytes payload, broadcast_outbox& out);
  void scatter_to_children(const wire::collective_id& op, std::size_t rank, op_state& s,
                           broadcast_outbox& out);
  void whole_to_children(const wire::collective_id& op, std::size_t rank, std::uint64_t total,
                         const shared_bytes& payload, broadcast_outbox& out);
  void start_ring(const wire::collective_id& op, std::size_t rank, op_state& s,
                  broadcast_outbox& out);
  void maybe_deliver(const wire::collective_id& op, op_state& s, broadcast_outbox& out);

  proc_id self_;
  std::size_t n_;
  std::function<vnode_set()> own_;
  scatter_allgather_config cfg_;
  std::uint64_t next_seq_;
  std::map<wire::collective_id, op_state> ops_;
  scatter_allgather_stats stats_;
};

} // namespace banyan

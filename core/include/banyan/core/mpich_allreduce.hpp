#pragma once
/// MPICH's allreduce and barrier algorithms over processors ranked 0..n-1 (rank = id),
/// baselines for banyan's allreduce and barrier over adaptive trees (core/allreduce.hpp),
/// as one hosted `collective_engine` per algorithm. Static, like
/// core/scatter_allgather.hpp and MPI's communicators: the processors are fixed and
/// stay; there is no recovery (a frame it cannot use is counted and dropped).
///
/// Every processor first combines its own vnodes' contributions into one array (its
/// "rank buffer"); at the end it delivers the result to its own vnodes.
///
///  recursive doubling (MPIR_Allreduce_intra_recursive_doubling): pof2 = the largest
///    power of two <= n, rem = n - pof2. Of the first 2 rem ranks, each even one sends
///    its buffer to the odd one above it (step 0) and waits; the other pof2 ranks then
///    exchange whole buffers with partner newrank ^ mask for mask = 1, 2, ..., pof2/2
///    (steps 1..log2 pof2), combining each time; finally each odd rank below 2 rem sends
///    the result to the even one below it. log2(n) + 2 latencies, the whole array each.
///
///      n = 4:  step 1: 0<->1  2<->3     step 2: 0<->2  1<->3
///
///  ring (MPIR_Allreduce_intra_ring): the array is cut into n chunks (whole elements);
///    reduce-scatter: at step i (0..n-2) rank r sends chunk r-i (its own at i = 0, the
///    one it just combined after) to r+1 and combines chunk r-1-i from r-1, so that
///    after n-1 steps chunk r+1 is complete at r; allgather: n-1 more steps pass the
///    complete chunks around the ring. 2(n-1) latencies, about 2 x the array per link.
///
///  dissemination barrier (MPIR_Barrier_intra_dissemination): in round k (0 ..
///    ceil(log2 n) - 1) rank r sends to r + 2^k and waits for r - 2^k (mod n); after the
///    last round every rank has heard, directly or not, from every other. Arrays are
///    not allowed (`count` must be 0).
///
/// Frames are `wire::bcast_segment`s of the algorithm's kind (no schema message of its
/// own): `op` = (sender, kind, life, the allreduce's number), `index` the step, `total`
/// and `payload` the bytes. A processor keeps frames of steps (and allreduces) it has not
/// reached yet until it does.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "banyan/core/allreduce.hpp"
#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce_op.hpp"

namespace banyan {

enum class mpich_algorithm : std::uint8_t { recursive_doubling, ring, dissemination };

/// The kind the algorithm's frames carry.
collective_kind kind_of(mpich_algorithm a);
/// "recursive_doubling", "ring", "dissemination".
const char* to_string(mpich_algorithm a);

struct mpich_allreduce_stats {
  std::uint64_t frames = 0;    ///< frames sent
  std::uint64_t bytes = 0;     ///< payload bytes sent
  std::uint64_t completed = 0; ///< allreduces completed here
  std::uint64_t malformed = 0; ///< frames dropped as unusable
};

class mpich_allreduce_collective final : public collective_engine {
public:
  /// `procs` processors 0..procs-1 take part; `own_vnodes` tells this processor's vnodes
  /// (read at the start, for the contributions, and at the end, for the delivery). `ops`
  /// must outlive it. `life`: the processor's, for the frames' names.
  mpich_allreduce_collective(proc_id self, std::size_t procs,
                             std::function<vnode_set()> own_vnodes, const reduce_op_table& ops,
                             mpich_algorithm algo, std::uint32_t life = 0);

  /// Starts allreduce `spec.op` (increasing; `spec.root` is unused). Errors
  /// (`invalid_argument`, nothing started): out of order, an operator or count the table
  /// refuses, a contribution of the wrong size, no `values` for a non-empty array, an
  /// array for the dissemination barrier, this processor outside 0..procs-1.
  std::optional<error> start(timestamp now, const allreduce_spec& spec, contribution_fn values);

  mpich_algorithm algorithm() const noexcept { return algo_; }
  const mpich_allreduce_stats& stats() const noexcept { return stats_; }
  allreduce_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override { return {kind_of(algo_)}; }
  collective_kind kind() const override { return kind_of(algo_); }
  /// Always taken (a frame it cannot use is counted and dropped: nobody would resend it).
  bool on_message(timestamp now, proc_id from, const wire::message& m) override;
  void on_timer(timestamp, std::uint64_t) override {}
  void on_undeliverable(timestamp, proc_id, const wire::message&) override {}
  void on_view_change(timestamp, const view_change&) override {}
  /// An allreduce started here and not completed.
  bool holding() const override;
  bool drained(timestamp, const send_fates&) const override { return !holding(); }
  std::uint64_t frames_sent() const override { return 0; }
  timestamp last_send() const override { return timestamp::min() / 2; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  struct op_state {
    bool started = false;
    allreduce_spec spec;
    std::vector<std::uint8_t> acc;          ///< this rank's buffer
    std::map<std::uint32_t, shared_bytes> inbox; ///< frames by step, not used yet
    std::uint32_t next = 0;                 ///< the step awaited next (its send done)
    bool opened = false;                    ///< ring, dissemination: step 0 sent
    bool done = false;
  };

  void send(std::uint64_t op, std::size_t to_rank, std::uint32_t step, shared_bytes data);
  /// Runs `op` as far as the frames at hand allow.
  void advance(std::uint64_t op, op_state& s);
  void advance_doubling(std::uint64_t op, op_state& s);
  void advance_ring(std::uint64_t op, op_state& s);
  void advance_dissemination(std::uint64_t op, op_state& s);
  void finish(std::uint64_t op, op_state& s);
  bool combine(op_state& s, std::size_t offset, const shared_bytes& in);
  /// Ring: [begin, end) bytes of chunk `j`.
  std::pair<std::size_t, std::size_t> chunk(const op_state& s, std::size_t j) const;
  /// Recursive doubling: the real rank of `newrank`, and the number of mask steps.
  std::size_t real_rank(std::size_t newrank) const;
  std::uint32_t doubling_steps() const;

  proc_id self_;
  std::size_t n_;
  std::function<vnode_set()> own_;
  const reduce_op_table& ops_;
  mpich_algorithm algo_;
  std::uint32_t life_;
  std::size_t pof2_ = 1, rem_ = 0;
  std::uint64_t last_started_ = 0;
  std::map<std::uint64_t, op_state> state_;
  std::set<std::uint64_t> finished_; ///< recent ones: late frames for them are dropped
  allreduce_outbox out_;
  mpich_allreduce_stats stats_;
};

} // namespace banyan

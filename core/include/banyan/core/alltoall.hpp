#pragma once
/// All-to-all: vnode v has one block for every vnode w (n x n blocks of one size over n
/// vnodes), and every w gets the block every v has for it. A gather to a root vnode
/// (core/gather.hpp: the reduction engine in block mode), then a scatter from the root
/// vnode's owner (core/scatter.hpp: the broadcast engine in block mode) of the transpose:
///
///   up:    v's contribution = [ v->w0 | v->w1 | ... | v->w(n-1) ]    (gather, d hops)
///          rises to the root's owner R, merged per subtree
///   at R:  transpose: w's block = [ head | v0->w | v1->w | ... ]     (n^2 blocks copied)
///   down:  R scatters: each child gets only its subtree's w blocks   (scatter, d hops)
///
/// Every byte passes the root's owner (n^2 b bytes in, n^2 b out), so a large one is cut
/// into m destination ranges W_0 .. W_(m-1) (`alltoall_ranges`: m from n and b alone, by
/// a cost model, so every processor cuts alike): range g is the same gather and scatter
/// restricted to W_g (gather number `alltoall_gather_number(first, op, g)`), every v giving
/// only its blocks for W_g, gathered to
/// W_g's first vnode, transposed there and scattered to W_g only. The m ranges run at
/// once on the trees of m different processors.
///
///   W_0 = {0..31}:  [v->0..31 for every v] up to owner(0),  transpose, down to 0..31
///   W_1 = {32..63}: [v->32..63 for every v] up to owner(32), transpose, down to 32..63  ...
///
/// Both halves of every range are exactly-once under churn by their own engines' rules,
/// unchanged: each vnode's contribution to each range is counted once in its gather
/// (histories move with the vnodes: one number, and a vnode gives to every range of an
/// all-to-all in one go, counted in operations: `reduce_config::stride`), and the scatter delivers each w's block once wherever w lives
/// then. The cost and why: docs/collectives.md.
///
/// One `collective_engine` of kind `alltoall` owns both engines: frames of that kind go
/// to the gather engine (`reduce_partial`, `reduce_handoff`) or the scatter engine
/// (`bcast_segment`, `bcast_ack`) by their type, and its timer tokens name the engine
/// (`token * 2`, + 1 for the scatter). A scattered block starts with a 12-byte head (the
/// all-to-all's number and root vnode), so a receiver knows which all-to-all it is.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/gather_then_broadcast.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

/// What reached vnodes of this processor in all-to-all `op`.
struct alltoall_delivery {
  std::uint64_t op = 0;
  vnode_id root = 0;
  vnode_set vnodes;  ///< the vnodes of this processor it was delivered to
  vnode_set from;    ///< the vnodes whose blocks each entry of `blocks` holds (every vnode)
  std::size_t block = 0; ///< bytes per block
  /// Per vnode of `vnodes`: the block every vnode of `from` had for it, in vnode order
  /// (|from| x block bytes; `split_blocks(from, ...)` in core/vnode_blocks.hpp).
  std::map<vnode_id, shared_bytes> blocks;
};

struct alltoall_outbox : engine_outbox {
  std::vector<alltoall_delivery> deliveries;
  /// The gather's partials leaving this processor (for a runtime that answers a member
  /// owning no vnodes once its part went up).
  std::vector<wire::reduce_partial> partials_sent;
  /// At the root vnode's owner: gathers complete here, whose transpose went down (the
  /// result's `value` is every vnode's blocks for the range in vnode order; `op` the
  /// range's gather number, `alltoall_gather_number`).
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

/// How an all-to-all is cut into destination ranges (docs/collectives.md, "All-to-all").
/// Every processor must use the same values: they number the all-to-alls.
struct alltoall_config {
  /// The rate (bytes per second) assumed for a range root's link: every byte of a range
  /// goes into its root's owner and out again.
  double rate = 125e6; // 1 Gbit/s
  /// What one more range costs each processor: its partial up one more tree and a frame
  /// down (about a send overhead; the emulated topologies' is 20 us).
  duration range_cost = std::chrono::microseconds(20);
};

/// The most ranges an all-to-all is cut into, and how many gather numbers each takes.
inline constexpr std::size_t alltoall_max_ranges = 4096;

/// The number of destination ranges (1 .. min(n, alltoall_max_ranges)) of an all-to-all
/// over `n` vnodes with blocks of `block` bytes.
std::size_t alltoall_ranges(std::size_t n, std::size_t block, const alltoall_config& cfg = {});

/// Range `g` (0 .. m-1) of `all` cut into `m` ranges: the vnodes of ranks [g n / m,
/// (g + 1) n / m) in vnode order (contiguous, sizes differing by at most one).
vnode_set alltoall_range(const vnode_set& all, std::size_t m, std::size_t g);

/// The gather number of range `g` of all-to-all `op`, for an engine whose all-to-alls are
/// numbered from `first_op` (`reduce_config::first_op`): first_op + (op - first_op) x
/// alltoall_max_ranges + g. Its gather results, partials and histories carry it.
inline std::uint64_t alltoall_gather_number(std::uint64_t first_op, std::uint64_t op,
                                            std::size_t g) {
  return first_op + (op - first_op) * alltoall_max_ranges + g;
}

/// The bytes of one scattered block's head (op, 8 bytes; root, 4 bytes; little-endian).
inline constexpr std::size_t alltoall_head_bytes = 12;

/// The transpose at the root: `gathered` holds, for every vnode v of `all` in order, v's
/// blocks for every vnode of `all` in order (|all|^2 x `block` bytes). Returns, for every
/// vnode w of `all` in order, a head (`op`, `root`) and the blocks every v had for w: the
/// scatter's payload, `alltoall_head_bytes` + |all| x `block` bytes per vnode.
std::vector<std::uint8_t> alltoall_transpose(std::uint64_t op, vnode_id root,
                                             const vnode_set& all, std::size_t block,
                                             const std::uint8_t* gathered);
/// The same for a range: `gathered` holds, for every vnode of `all` in order, its blocks
/// for the `destinations` vnodes of one range (|all| x `destinations` x `block` bytes);
/// returns, for each of them, a head and the blocks every v had for it.
std::vector<std::uint8_t> alltoall_transpose(std::uint64_t op, vnode_id root,
                                             const vnode_set& all, std::size_t destinations,
                                             std::size_t block, const std::uint8_t* gathered);

class alltoall_collective final : public gather_then_broadcast {
public:
  /// `view` and `ops` must outlive it. `rc`, `bc`: the gather's and the scatter's
  /// configuration (their kinds are set to `alltoall`, the gather to block mode on the
  /// latency tree, the scatter to block mode). `settled` as for `reduce_engine`.
  /// `ac`: how all-to-alls are cut into ranges (the same at every processor).
  alltoall_collective(tree_view& view, const reduce_op_table& ops, reduce_config rc,
                      broadcast_config bc, vnode_set settled, alltoall_config ac = {});

  /// Starts all-to-all `op` (numbered first_op, first_op + 1, ... in the order every
  /// processor starts them, apart from every other collective) with blocks of `block`
  /// bytes. `values(v)` is vnode v's contribution: its block for every vnode of the
  /// namespace, in vnode order (n x `block` bytes), asked for once per vnode. With one
  /// range (`alltoall_ranges`), the blocks go through `root`; with m, range g
  /// (`alltoall_range`) is a gather (`alltoall_gather_number`) to the range's first vnode
  /// and a scatter of its transpose to the range's vnodes. Errors: `invalid_argument`
  /// (block 0, a contribution of another size, naming the vnode, a root outside the
  /// namespace, a number not above the last one started here), `stopped` (not taking
  /// part).
  std::optional<error> start(timestamp now, std::uint64_t op, vnode_id root, std::size_t block,
                             contribution_fn values);
  /// The number the next all-to-all takes here (as `reduce_engine::next_op`).
  std::uint64_t next_op() const { return call_number(up_.next_op()); }
  /// The last all-to-all started here (0: none).
  std::uint64_t last_started() const {
    return up_.last_started() == 0 ? 0 : call_number(up_.last_started());
  }
  /// The all-to-all gather number `k` belongs to.
  std::uint64_t call_number(std::uint64_t k) const {
    return k < first_op_ ? k : first_op_ + (k - first_op_) / alltoall_max_ranges;
  }
  /// Gives all-to-all `op` up here: every range of it (what they had come to, together;
  /// `at_root` when this processor gathered one of them).
  reduce_abandoned abandon(timestamp now, std::uint64_t op);

  alltoall_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override { return {collective_kind::alltoall}; }
  collective_kind kind() const override { return collective_kind::alltoall; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  /// Moves what the engines produced into `out_`: a gather result at the root's owner
  /// starts the scatter of its transpose; scatter deliveries become all-to-all ones.
  void absorb(timestamp now) override;

  /// An all-to-all started here: its ranges, its root.
  struct call {
    std::size_t ranges = 1;
    vnode_id root = 0;
  };
  alltoall_outbox out_;
  alltoall_config cfg_;
  std::uint64_t first_op_ = 1;
  std::map<std::uint64_t, call> calls_; ///< by number; the last `kept_calls`
  static constexpr std::size_t kept_calls = 256;
};

} // namespace banyan

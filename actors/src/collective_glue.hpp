#pragma once
// Internal: what the processor actors, the network actor and the emulated cluster
// exchange for collectives (the broadcast and reduction engines each processor hosts next
// to its supervisor, and point-to-point messages through the broadcast engine).
// In-process only, like caf_glue.hpp.

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "banyan/core/allreduce.hpp"
#include "banyan/core/alltoall.hpp"
#include "banyan/core/mpich_allreduce.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/tree_choice.hpp"
#include "processor_actor.hpp"

namespace banyan::actors {

/// A frame that could not be delivered, carried back to its sender (the engines need
/// the frame itself; the supervisor still gets the (unreachable_atom, proc_id) notice).
using bounced_atom = caf::atom_constant<caf::atom("bbounced")>;
/// A processor hands a frame its engine refused to the network, to go back to its sender.
using refuse_atom = caf::atom_constant<caf::atom("brefuse")>;
// Engine timers: (engine_timer_atom, the engine's collective_kind as std::uint8_t,
// token), a token space apart from the supervisor's timer_atom (caf_glue.hpp).
// Detaching a processor that has left as soon as nothing it sent can come back (the
// network knows every frame's fate; core/send_fates.hpp, docs/collectives.md):
/// A processor that has left under the blind rule polls whether its engines drained.
using drain_poll_atom = caf::atom_constant<caf::atom("bdrainpoll")>;
/// processor -> network: (drain_ask_atom, p, itself, messages received from the network):
/// my engines hold nothing; may I detach?
using drain_ask_atom = caf::atom_constant<caf::atom("bdrainask")>;
/// network -> processor: (drain_ok_atom): none of your frames can come back; frames for
/// you wait at the network until you detach or cancel.
using drain_ok_atom = caf::atom_constant<caf::atom("bdrainok")>;
/// network -> processor: (drain_no_atom): you were sent something since you asked.
using drain_no_atom = caf::atom_constant<caf::atom("bdrainno")>;
/// processor -> network: (drain_cancel_atom, p, itself): my engines sent or took
/// something after all; I stay.
using drain_cancel_atom = caf::atom_constant<caf::atom("bdraincan")>;
/// network -> processor: (sync_atom, n); the processor answers (synced_atom, p, n) once
/// it has handled the network's first n messages to its id (a refusal among them reaches
/// the network before the answer: messages between two actors stay in order).
using sync_atom = caf::atom_constant<caf::atom("bsync")>;
using synced_atom = caf::atom_constant<caf::atom("bsynced")>;
/// Start a broadcast or a point-to-point message: (bcast_atom, request).
using bcast_atom = caf::atom_constant<caf::atom("bbcast")>;
/// Start a reduction: (reduce_atom, request).
using reduce_atom = caf::atom_constant<caf::atom("breduce")>;
/// Install a static tree on a processor (in-process emulation only).
using static_tree_atom = caf::atom_constant<caf::atom("bstatic")>;
/// Install MPICH's long broadcast (core/scatter_allgather) on a processor, over
/// processors 0..procs-1 ranked by id: (sag_atom, procs). In-process emulation only.
using sag_atom = caf::atom_constant<caf::atom("bsag")>;
/// Install MPICH's ring allgather (core/ring_allgather) on a processor, over processors
/// 0..procs-1 owning what its routing table says now: (ring_atom, procs). Emulation only.
using ring_atom = caf::atom_constant<caf::atom("bring")>;
/// Install MPICH's pairwise all-to-all (core/pairwise_alltoall) likewise: (pairwise_atom,
/// procs). Emulation only.
using pairwise_atom = caf::atom_constant<caf::atom("bpairwise")>;

/// The emulated cluster numbers its reductions over static trees from here on, and
/// those over the adaptive trees from 1: its ledger and its API (`reduction(op)`) name
/// either kind by number alone. Engines and frames tell the kinds apart by
/// `collective_kind`, not by this number.
constexpr std::uint64_t static_reduction_base = std::uint64_t{1} << 61;
/// Gathers (core/gather.hpp, their own engine) are numbered from here on, apart from
/// both kinds of reduction, in the same ledger.
constexpr std::uint64_t gather_base = std::uint64_t{1} << 60;
/// Allgathers (core/allgather.hpp) likewise, from here on.
constexpr std::uint64_t allgather_base = std::uint64_t{1} << 59;
/// Ring allgathers (the baseline) likewise.
constexpr std::uint64_t ring_allgather_base = std::uint64_t{1} << 58;
/// All-to-alls (core/alltoall.hpp) and pairwise all-to-alls (the baseline) likewise.
constexpr std::uint64_t alltoall_base = std::uint64_t{1} << 57;
constexpr std::uint64_t pairwise_alltoall_base = std::uint64_t{1} << 56;

/// Byte i of vnode v's block in the emulated cluster's scatters (checked at delivery).
constexpr std::uint8_t block_byte(vnode_id v, std::size_t i) {
  return static_cast<std::uint8_t>(v * 131 + i * 7 + 3);
}

/// What the processors report of collectives (instrumentation, like the monitor).
struct collective_ledger {
  std::mutex mtx;
  /// Per broadcast or message, per vnode, every time it was delivered (more than one
  /// entry would be a duplicate), and when each started.
  std::map<wire::collective_id, std::map<vnode_id, std::vector<timestamp>>> deliveries;
  std::map<wire::collective_id, timestamp> started;
  std::map<wire::collective_id, std::size_t> sizes;       ///< bytes sent
  std::map<wire::collective_id, vnode_set> targets;       ///< point-to-point: its vnodes
  std::map<wire::collective_id, std::size_t> blocks;      ///< scatters: bytes per vnode
  std::uint64_t bad_payloads = 0; ///< deliveries whose bytes were not the bytes sent

  struct reduce_entry {
    proc_id at = no_proc;
    timestamp when{0};
    reduce_result result;
  };
  /// Per reduction: when the first processor started it, its results (one when all is
  /// well), how often each vnode's contribution was taken, and what went wrong.
  std::map<std::uint64_t, timestamp> reduce_started;
  std::map<std::uint64_t, std::vector<reduce_entry>> reduce_results;
  std::map<std::uint64_t, std::map<vnode_id, int>> contributions;
  std::map<std::uint64_t, std::vector<std::string>> reduce_problems;

  /// Per allreduce or barrier (by kind and number): when the first processor started
  /// it, its reductions at the root (one when all is well), each vnode's contributions
  /// and deliveries (one each), deliveries whose value was not the root's, problems.
  struct allreduce_entry {
    bool started = false;
    timestamp first_start{0};
    std::vector<reduce_entry> reduced;
    std::map<vnode_id, int> contributions;
    std::map<vnode_id, std::vector<std::pair<timestamp, proc_id>>> delivered;
    std::uint64_t wrong_values = 0;
    std::vector<std::string> problems;
    /// Without a root (the MPICH baselines): the first value delivered, which every
    /// other delivery must equal.
    std::optional<shared_bytes> first_value;
  };
  std::map<std::pair<collective_kind, std::uint64_t>, allreduce_entry> allreduces;
  /// Allgathers (numbered like reductions; their gathers' results and contributions are
  /// in the maps above): per vnode, how often every block was delivered to it, and when
  /// the last delivery was; every vnode's block (the cluster's `values`), to check them.
  std::map<std::uint64_t, std::map<vnode_id, int>> allgathered;
  std::map<std::uint64_t, timestamp> allgather_last;
  std::map<std::uint64_t, contribution_fn> allgather_values;
  std::uint64_t bad_allgathers = 0;
  /// All-to-alls (numbered like reductions; their gathers' results and contributions
  /// are in the maps above), recorded like allgathers: per vnode, how often its blocks
  /// were delivered to it; when the last delivery was; every vnode's contribution
  /// (`values`, computed once per vnode for the checks, `alltoall_seen`), its block size.
  std::map<std::uint64_t, std::map<vnode_id, int>> alltoalled;
  std::map<std::uint64_t, timestamp> alltoall_last;
  std::map<std::uint64_t, std::pair<contribution_fn, std::size_t>> alltoall_values;
  std::map<std::uint64_t, std::map<vnode_id, std::vector<std::uint8_t>>> alltoall_seen;
  std::uint64_t bad_alltoalls = 0;
};
using broadcast_ledger = collective_ledger;

/// A request to start a broadcast (or, with `p2p`, a message to `to`) at a processor;
/// the answer comes through `result`. The payload is `bytes` bytes of `fill`.
struct bcast_request {
  std::size_t bytes = 0;
  bool use_static = false;
  bool p2p = false;
  /// MPICH's scatter-allgather broadcast (the engine installed with sag_atom).
  bool scatter_allgather = false;
  /// A scatter (core/scatter.hpp) from vnode `root`, `bytes` per vnode (`block_byte`).
  bool scatter = false;
  vnode_id root = 0;
  vnode_set to;
  /// A broadcast over the adaptive trees: choose the tree so instead of as configured.
  std::optional<tree_choice> choice;
  std::promise<std::optional<wire::collective_id>> result;
};
using bcast_request_ptr = std::shared_ptr<bcast_request>;

/// The byte every emulated broadcast and message carries (checked at delivery).
constexpr std::uint8_t payload_fill = 0x5a;

/// A request to start a reduction at a processor. The processor starts it as soon as it
/// takes part (a joining one: when its join completed), in the order requests came.
/// With `segments` > 1 the array is cut into that many pieces of `segment_count`
/// elements (the last one shorter), reduced as engine reductions spec.op, spec.op + 1,
/// ...: each goes on up the tree as soon as its piece is complete, so the pieces are
/// pipelined (one vnode's array is computed once and sliced, see `slicer`).
struct reduce_request {
  reduce_spec spec;
  contribution_fn values;
  bool use_static = false;
  /// A gather (core/gather.hpp): `spec` is a gather's, started on the gather engine.
  bool gather = false;
  /// An allgather (core/allgather.hpp): `spec` is its gather's.
  bool allgather = false;
  /// A ring allgather (core/ring_allgather.hpp, the baseline installed with ring_atom):
  /// `spec.op` its number, `spec.count` the block.
  bool ring = false;
  /// An all-to-all (core/alltoall.hpp): `spec.op` its number, `spec.root`, `spec.count`
  /// the block (`values(v)` is v's block for every vnode).
  bool alltoall = false;
  /// A pairwise all-to-all (core/pairwise_alltoall.hpp, the baseline installed with
  /// pairwise_atom), likewise.
  bool pairwise = false;
  std::uint32_t segments = 1;
  std::size_t segment_count = 0;

  /// Slices every vnode's array for the segments, computing it once (shared by the
  /// processors: a vnode may move between its segments' contributions).
  struct slicer {
    std::mutex mtx;
    std::map<vnode_id, std::pair<std::vector<std::uint8_t>, std::uint32_t>> arrays;
  };
  std::shared_ptr<slicer> slices = std::make_shared<slicer>();
};
using reduce_request_ptr = std::shared_ptr<const reduce_request>;

/// Install one of MPICH's allreduce or barrier algorithms on a processor, over processors
/// 0..procs-1 ranked by id: (mpich_atom, procs, mpich_algorithm as std::uint8_t).
/// In-process emulation only, like sag_atom.
using mpich_atom = caf::atom_constant<caf::atom("bmpich")>;
/// Start an allreduce or a barrier: (allreduce_atom, request).
using allreduce_atom = caf::atom_constant<caf::atom("ballred")>;

/// A request to start an allreduce (or a barrier: `kind` barrier, `spec.count` 0) at a
/// processor; started as soon as it takes part, in the order requests came.
struct allreduce_request {
  collective_kind kind = collective_kind::allreduce;
  allreduce_spec spec;
  contribution_fn values;
};
using allreduce_request_ptr = std::shared_ptr<const allreduce_request>;

/// A static tree for every processor (emulation only): the tree, the number of the next
/// static reduction (the static reduction engine starts there), whether that engine
/// gathers blocks (core/gather.hpp) instead of combining arrays, and what reductions size
/// their timeouts from.
struct static_install {
  banyan::tree t;
  std::uint64_t first_reduce_op = static_reduction_base + 1;
  bool blocks = false;
  duration max_root_distance = std::chrono::milliseconds(10);
  rate min_root_rate = infinite_rate;
};
using static_install_ptr = std::shared_ptr<const static_install>;

/// Records what engine `e` (at processor `me`) delivered, gathered or found wrong since
/// its outbox was last cleared, each kind by its own rule (engine_record.cpp). Locks the
/// ledger.
void record_engine(collective_ledger& ledger, proc_id me, timestamp now, collective_engine& e);

/// Records what an all-to-all engine (banyan's or the baseline) gathered at the root,
/// delivered (each block checked against the ledger's `alltoall_values`) or found wrong,
/// at processor `me` (alltoall_record.cpp). Locks the ledger.
void record_alltoall(collective_ledger& ledger, proc_id me, timestamp now,
                     const alltoall_outbox& out);

/// A processor that also hosts the collective engines reporting to `ledger`.
/// `incarnation` numbers the broadcasts it starts apart from those of its earlier
/// incarnations. `blind_linger`: see cluster_config. `predecessor`: the incarnation
/// that left before this one, whose memory of paths this one recalls when it joins.
caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                           std::shared_ptr<collective_ledger> ledger,
                           std::shared_ptr<shared_counters> counters,
                           std::optional<duration> blind_linger = {},
                           std::shared_ptr<const supervisor> predecessor = {},
                           bool bcast_acknowledge = false);

} // namespace banyan::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::bcast_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::reduce_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::static_install_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::allreduce_request_ptr)

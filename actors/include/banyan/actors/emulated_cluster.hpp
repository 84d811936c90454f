#pragma once
/// An in-process grid: one CAF actor per processor (its supervisor runs the
/// parent-selection protocol) on an emulated wide-area network (a network actor
/// that owns a `net::wan_model` built from a topology). EMULATED: no byte leaves
/// the process; delays and bandwidth sharing come from the model.
///
/// Time is either virtual (CAF's test coordinator: deterministic, as fast as the
/// CPU allows, driven by `run_until`/`run_until_quiet`) or real (CAF's normal
/// scheduler; the same calls then wait on the wall clock).
///
/// CAF stays behind this header: embedders and tools include no CAF headers.

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "banyan/actors/cluster_monitor.hpp"
#include "banyan/core/error.hpp"
#include "banyan/core/mpich_allreduce.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/tree_choice.hpp"

namespace banyan::actors {

enum class clock_mode { virtual_time, real_time };

/// One frame as the emulated network saw it (instrumentation for traces: no processor
/// reads it). Times are relative to `emulated_cluster::start()`.
struct frame_trace {
  enum class kind : std::uint8_t {
    sent,          ///< handed to the network by its sender
    delivered,     ///< arrived and handed to the receiving processor
    undeliverable, ///< arrived where nobody runs (it goes back to its sender)
  };
  kind what = kind::sent;
  duration at{0};
  const wire::envelope* frame = nullptr; ///< valid during the call only
  std::size_t bytes = 0;                 ///< modelled wire size
};

struct cluster_config {
  banyan::topology topo;
  std::uint64_t seed = 1;
  clock_mode clock = clock_mode::virtual_time;
  supervisor_config sup;
  /// Processors started at `start()`: the first `initial` ids (0 = all of the topology).
  std::size_t initial = 0;
  /// vnodes given to each initial processor: processor p owns [p*k, (p+1)*k).
  std::uint32_t vnodes_per_proc = 1;
  /// Reductions over the adaptive trees of arrays longer than this many bytes are cut
  /// into segments of this size, pipelined up the tree (0: never cut).
  std::size_t reduce_segment = 16 * 1024;
  /// Worker threads in real time.
  std::size_t threads = 2;
  /// When a processor that has left may detach (core/send_fates.hpp). Nothing (the
  /// default): once its engines hold nothing and the network, which sees every frame's
  /// fate, says that nothing it sent can come back. A duration: blindly, that long after
  /// its engines' last send, as a runtime that knows nothing must (the engines'
  /// `drain_linger`; 2 s before the network knew); too short a one lets frames come back
  /// after it detached (`network_stats::stray_returns`).
  std::optional<duration> blind_linger;
  /// The emulated network's approximation for large runs, net::wan_options::share_quantum
  /// (0, the default: exact fair sharing).
  duration share_quantum{0};
  /// The processors' broadcast engines acknowledge deliveries to origins and keep each
  /// broadcast until covered (`broadcast_config::acknowledge`, as `banyan::node` does).
  bool bcast_acknowledge = false;
  /// Instrumentation (may be empty): every frame the emulated network carries, and every
  /// tree event a processor reports, as they happen. Called on the actors' threads (one
  /// at a time in virtual time; concurrently in real time, so it must be thread-safe
  /// then). Slows the run down; for traces of single runs.
  std::function<void(const frame_trace&)> on_frame;
  std::function<void(proc_id, const tree_event&)> on_tree_event;
};

/// Counters of the emulated network.
struct network_stats {
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  std::uint64_t dropped = 0; ///< addressed to processors that were not running
  /// Engine frames that came back (bounced or refused) after the incarnation that sent
  /// them had detached: a crashed processor's; after a graceful leave never (a leaver
  /// detaches only once nothing it sent can come back).
  std::uint64_t stray_returns = 0;
};

/// What the processors reported of one broadcast or point-to-point message. Times are
/// relative to `start()`.
struct broadcast_record {
  bool known = false;   ///< the broadcast was started
  duration started{0};  ///< when the origin started it
  /// Every time each vnode was delivered to (one entry each when all is well).
  std::map<vnode_id, std::vector<duration>> delivered;
  /// A point-to-point message: the vnodes it is for (a broadcast: empty, every vnode).
  vnode_set to;
};

/// A reduction for `emulated_cluster::reduce`: `count` elements of `fn`'s type per
/// vnode, combined into vnode `root`. `values(v)` is vnode v's contribution; it is called
/// on the processors' actors (in real time from several threads at once), once for each
/// vnode where that vnode is counted.
struct reduction_args {
  vnode_id root = 0;
  reduce_op fn;
  std::size_t count = 0;
  contribution_fn values;
};

/// `reduction_args::values` for an int32 array of `count` elements per vnode: element i
/// of vnode v is `element(v, i)`.
template <class Element>
contribution_fn int32_values(std::size_t count, Element element) {
  return [count, element](vnode_id v) {
    std::vector<std::uint8_t> b(count * 4);
    for (std::size_t i = 0; i < count; ++i) {
      const std::int32_t x = element(v, i);
      std::memcpy(b.data() + i * 4, &x, 4);
    }
    return b;
  };
}

/// What the processors reported of one reduction. Times are relative to `start()`.
struct reduction_record {
  bool known = false;  ///< some processor started it
  duration started{0}; ///< when the first processor started it
  struct result {
    proc_id at = no_proc; ///< the processor owning the root vnode then
    duration when{0};
    vnode_set vnodes;     ///< the vnodes counted
    std::vector<std::uint8_t> value;
  };
  /// One entry when all is well (more would be a bug).
  std::vector<result> results;
  /// How often each vnode's contribution was taken (once each when all is well).
  std::map<vnode_id, int> contributions;
  /// Engine problems (bugs) and errors of processors that could not start it.
  std::vector<std::string> problems;
};

/// What the processors reported of one allreduce or barrier. Times are relative to
/// `start()`.
struct allreduce_record {
  bool known = false;  ///< some processor started it
  duration started{0}; ///< when the first processor started it
  /// The reduction gathered at the root vnode's owner, whose result it broadcast (one
  /// entry when all is well; a barrier's value is empty).
  std::vector<reduction_record::result> reduced;
  /// How often each vnode's contribution was taken (once each when all is well).
  std::map<vnode_id, int> contributions;
  /// Every time each vnode was delivered the result (once each when all is well).
  std::map<vnode_id, std::vector<duration>> delivered;
  duration finished{0}; ///< the last delivery so far
  /// Deliveries whose value was not the one gathered at the root (0 when all is well).
  std::uint64_t wrong_values = 0;
  std::vector<std::string> problems; ///< engine problems (bugs) and refused starts
  /// The value delivered: the one gathered at the root, or (no root) the first delivered.
  std::vector<std::uint8_t> value;
};

/// What the processors reported of one allgather. Times are relative to `start()`.
struct allgather_record {
  bool known = false;  ///< some processor started it
  duration started{0}; ///< when the first processor started it
  bool gathered = false; ///< its gather completed at the root vnode's owner
  duration last{0};    ///< when the last delivery was
  /// Per vnode, how often every block was delivered to it (once each when all is well).
  std::map<vnode_id, int> delivered;
  /// How often each vnode's block was taken (once each when all is well).
  std::map<vnode_id, int> contributions;
  /// Deliveries whose blocks were not the vnodes' (`values`).
  std::uint64_t bad = 0;
  std::vector<std::string> problems;
};

/// What the processors reported of one all-to-all, as for an allgather (`delivered`:
/// per vnode, how often the blocks for it arrived; `bad`: deliveries with a wrong block).
using alltoall_record = allgather_record;

class emulated_cluster {
public:
  explicit emulated_cluster(cluster_config cfg);
  ~emulated_cluster();
  emulated_cluster(const emulated_cluster&) = delete;
  emulated_cluster& operator=(const emulated_cluster&) = delete;

  /// Starts the initial processors as founding members; they begin measuring.
  void start();
  /// Processor `p` (a topology slot not running now) joins through `contact`,
  /// asking for `wanted` vnodes (empty: a share of the contact's). When p's earlier
  /// incarnation has left but is still draining its engines, the new one attaches to the
  /// network, and joins, once the old one has detached (p's frames keep reaching it).
  std::optional<error> join(proc_id p, proc_id contact, const vnode_set& wanted = {});
  /// Processor `p` hands its vnodes to `recipient` (no_proc: its nearest member) and stops.
  std::optional<error> leave(proc_id p, proc_id recipient = no_proc);
  /// Trees on demand (supervisor_config::tree_set): p's own trees are to be used
  /// (supervisor::prepare). Broadcasts and reductions p roots call it too.
  std::optional<error> prepare(proc_id p);
  /// Processor `p` crashes: it stops at once, without a handover, and everything it held
  /// (frames it had not sent yet, its engines' state) is lost; what it had already sent
  /// is still delivered. The others find out as over TCP (frames to it come back
  /// undeliverable; with `supervisor_config::crash_timeout` also when nobody sends it
  /// anything), and its successor adopts its vnodes (docs/architecture.md).
  std::optional<error> crash(proc_id p);
  /// Schedules a change of the emulated network (core/network_change.hpp) at `c.at`
  /// after `start()`, besides the topology's own (`topology::changes`); `topo()` stays
  /// the network at time zero (`topology_at` gives it later). An error when `c` does not
  /// fit the topology.
  std::optional<error> schedule_change(const network_change& c);

  /// Emulated time since `start()`.
  duration elapsed() const;
  /// Runs until `elapsed() >= t` (virtual: jumps; real: sleeps).
  void run_until(duration t);
  /// Runs until no processor measures and nothing is in flight (virtual), or until
  /// trees have not changed for `settle` while nobody measures (real); at most `limit`.
  /// Returns false when the limit was reached first.
  bool run_until_quiet(duration limit, duration settle = std::chrono::milliseconds(500));

  /// Nobody measures, no message is in flight, and no collective engine holds anything
  /// (streams, partials waiting for children or a timeout, frames waiting for a retry).
  bool quiet() const;

  const banyan::topology& topo() const;
  const cluster_monitor& monitor() const;
  /// Time of the last parent change, relative to `start()`.
  duration last_change() const;
  network_stats net_stats() const;
  bool running(proc_id p) const;
  std::vector<proc_id> running_procs() const;

  /// Direct read of a processor's supervisor. Virtual time only, and only between
  /// run calls (nothing runs then); nullptr when p is not running.
  const supervisor* inspect(proc_id p) const;
  /// Probes started by processors, summed over every processor that ever ran.
  std::uint64_t probes() const;

  /// Processor `origin` broadcasts `bytes` bytes to every vnode over banyan's adaptive
  /// trees (the broadcast engine each processor hosts next to its supervisor). Returns
  /// the broadcast's id, or nothing when `origin` is not running or no longer takes part.
  /// The broadcast then proceeds as the cluster runs (`run_until_delivered`). With
  /// `choice`, the origin picks the tree by it instead of by the engine's configuration
  /// (core/tree_choice.hpp), to compare rules on the same trees.
  std::optional<wire::collective_id> broadcast(proc_id origin, std::size_t bytes,
                                               std::optional<tree_choice> choice = {});
  /// The same over a fixed tree `t` (from core/tree_builders.hpp, over processor ids,
  /// rooted at `origin`), through `static_tree_view`. EMULATION ONLY: every running
  /// processor is handed `t` and a copy of its supervisor's routing table now (a real
  /// deployment would have to distribute the tree); install between broadcasts, not
  /// while a static broadcast is under way.
  std::optional<wire::collective_id> broadcast_static(proc_id origin, const banyan::tree& t,
                                                      std::size_t bytes);
  /// MPICH's broadcast (core/scatter_allgather): messages of at least
  /// `scatter_allgather_threshold()` bytes are scattered down a binomial tree, one chunk
  /// per processor, then gathered around a ring; shorter ones go whole down the binomial
  /// tree. Processors are ranked by id relative to `origin`. EMULATION ONLY: every running
  /// processor is handed a fresh engine now (install between these broadcasts, not while
  /// one is under way); the running processors must be exactly 0..k-1 and must not change
  /// while it runs (the algorithm has no recovery). Deliveries are recorded like a
  /// broadcast's. Nothing when `origin` is not running or the processors are not 0..k-1.
  std::optional<wire::collective_id> broadcast_scatter_allgather(proc_id origin,
                                                                 std::size_t bytes);
  /// From this size on `broadcast_scatter_allgather` scatters and gathers (MPICH's long
  /// threshold, core/scatter_allgather's default).
  static std::size_t scatter_allgather_threshold();
  /// Deliveries of broadcast `id` so far.
  broadcast_record deliveries(const wire::collective_id& id) const;
  /// Runs until every vnode has been delivered broadcast `id` and nothing is in flight
  /// (virtual), or until every vnode has it (real); at most `limit`. False on the limit.
  bool run_until_delivered(const wire::collective_id& id, duration limit);
  /// Processor `from` sends `bytes` bytes to vnode `to`, delivered exactly once at the
  /// processor owning it at delivery time (point-to-point through the broadcast engine).
  /// Deliveries are recorded like a broadcast's (`deliveries`, `run_until_delivered`).
  /// Nothing when `from` is not running or no longer takes part, or `to` does not exist.
  std::optional<wire::collective_id> send(proc_id from, vnode_id to, std::size_t bytes);
  /// Deliveries whose bytes, or whose point-to-point mark, were wrong (0 when all is well).
  std::uint64_t bad_payloads() const;

  /// Starts a reduction over banyan's adaptive trees at every running processor, in the
  /// same order everywhere (reductions are numbered 1, 2, 3, ...); a processor still
  /// joining starts it once it takes part. Returns its number, or an error for a bad
  /// root, operator or count. It proceeds as the cluster runs (`run_until_reduced`).
  expected<std::uint64_t> reduce(const reduction_args& r);
  /// The same over a fixed tree `t` rooted at the processor owning `r.root` (EMULATION
  /// ONLY, installed like `broadcast_static`'s; timeouts sized from the topology's
  /// latencies and bandwidths along `t`). Numbered apart from `reduce`'s.
  expected<std::uint64_t> reduce_static(const banyan::tree& t, const reduction_args& r);
  /// What the processors reported of reduction `op` so far.
  reduction_record reduction(std::uint64_t op) const;
  /// Runs until reduction `op` has a result and (virtual time) the cluster is quiet;
  /// at most `limit`. False on the limit.
  bool run_until_reduced(std::uint64_t op, duration limit);

  /// The number of vnodes (fixed at `start()`).
  std::size_t vnode_count() const;

  /// Starts an allreduce over banyan's adaptive trees at every running processor, in the
  /// same order everywhere (numbered 1, 2, 3, ..., apart from reductions): the reduction
  /// of `r` gathered at the owner of `r.root`, then broadcast from there to every vnode
  /// (core/allreduce.hpp). A processor still joining starts it once it takes part; one
  /// that joins starts every allreduce not yet gathered. Arrays longer than
  /// `reduce_segment` are cut into segments, each an allreduce of its own (consecutive
  /// numbers; the first is returned), reassembled in `allreduction`. Returns its number,
  /// or an error for a bad root, operator or count. It proceeds as the cluster runs.
  expected<std::uint64_t> allreduce(const reduction_args& r);
  /// Starts a barrier the same way (an allreduce of nothing, rooted at vnode 0; numbered
  /// apart): every vnode is delivered its release once every vnode has arrived.
  expected<std::uint64_t> barrier();
  /// What the processors reported of allreduce (`kind` allreduce) or barrier (`barrier`)
  /// `op` so far.
  allreduce_record allreduction(collective_kind kind, std::uint64_t op) const;
  /// Runs until every vnode has been delivered allreduce or barrier `op` and (virtual
  /// time) the cluster is quiet; at most `limit`. False on the limit.
  bool run_until_allreduced(collective_kind kind, std::uint64_t op, duration limit);
  /// One of MPICH's algorithms over the running processors ranked by id
  /// (core/mpich_allreduce.hpp): the recursive-doubling or ring allreduce of `r`, or
  /// (`dissemination`, `r.count` 0) a barrier. EMULATION ONLY: every running processor is
  /// handed a fresh engine now (start one when the last has finished); the running
  /// processors must be exactly 0..k-1 and stay (no recovery). Numbered 1, 2, 3, ... per
  /// algorithm; recorded like an allreduce (`allreduction(kind_of(algo), op)`, without
  /// a root: `reduced` stays empty, and every delivery must equal the first).
  expected<std::uint64_t> allreduce_mpich(mpich_algorithm algo, const reduction_args& r);
  /// Gathers every vnode's block of `block` bytes (`values(v)`, called once for each
  /// vnode where it is counted) to vnode `root`, over banyan's adaptive trees
  /// (core/gather.hpp): started at every running processor in the same order, like
  /// `reduce`, and numbered apart from reductions. The record is a reduction's
  /// (`reduction(op)`, `run_until_reduced(op)`): its result's value is the blocks of
  /// its vnodes in vnode order (core/vnode_blocks.hpp). Errors: a bad root, block 0,
  /// no `values`.
  expected<std::uint64_t> gather(vnode_id root, std::size_t block, contribution_fn values);
  /// The same over a fixed tree `t` rooted at the processor owning `root` (EMULATION
  /// ONLY, installed like `reduce_static`'s, numbered with the static reductions): the
  /// blocks of a subtree side by side as they rise along `t`, stored and forwarded
  /// whole, as MagPIe's cluster-aware gather does over `magpie_tree`.
  expected<std::uint64_t> gather_static(const banyan::tree& t, vnode_id root,
                                        std::size_t block, contribution_fn values);
  /// The owner of vnode `root` scatters one block of `block` bytes to every vnode over
  /// banyan's adaptive trees (core/scatter.hpp); byte i of vnode v's block is
  /// `(v * 131 + i * 7 + 3) mod 256`, checked at delivery (`bad_payloads`). Recorded
  /// like a broadcast (`deliveries`, `run_until_delivered`). Nothing when the root does
  /// not exist, no running processor owns it, or `block` is 0.
  std::optional<wire::collective_id> scatter(vnode_id root, std::size_t block);
  /// The same down a fixed tree `t` rooted at the processor owning `root` (EMULATION
  /// ONLY, installed like `broadcast_static`'s): every child gets the blocks of its
  /// subtree along `t`, as MagPIe's cluster-aware scatter does over `magpie_tree`.
  /// Nothing when `scatter` would give nothing, or `t` is not rooted at that processor
  /// or does not span the topology.
  std::optional<wire::collective_id> scatter_static(const banyan::tree& t, vnode_id root,
                                                    std::size_t block);
  /// Every vnode gets every vnode's block of `block` bytes (`values(v)`), over banyan's
  /// adaptive trees (core/allgather.hpp: a gather to vnode `root`, then a broadcast of
  /// the blocks from its owner). Started at every running processor like `reduce`,
  /// numbered apart. Errors as for `gather`.
  expected<std::uint64_t> allgather(vnode_id root, std::size_t block, contribution_fn values);
  /// The same by MPICH's ring allgather (core/ring_allgather.hpp) over the running
  /// processors, which must be exactly 0..k-1 and stay (no recovery): every one is handed
  /// a fresh ring engine now (install between these, not while one runs), owning what its
  /// routing table says now. Recorded like `allgather` (`allgathered`). Errors: block 0,
  /// no `values`, processors other than 0..k-1.
  expected<std::uint64_t> allgather_ring(std::size_t block, contribution_fn values);
  allgather_record allgathered(std::uint64_t op) const;
  /// Runs until every vnode has allgather `op` and (virtual time) the cluster is quiet;
  /// at most `limit`. False on the limit.
  bool run_until_allgathered(std::uint64_t op, duration limit);
  /// All-to-all over banyan's adaptive trees (core/alltoall.hpp: a gather to vnode
  /// `root`, then a scatter of the transpose from its owner): `values(v)` is vnode v's
  /// block of `block` bytes for every vnode, in vnode order (vnodes x `block` bytes), and
  /// every vnode w gets the block every vnode has for it. Started at every running
  /// processor like `reduce`, numbered apart. Every delivered block is checked against
  /// `values` (`alltoalled(op).bad`). Errors: a bad root, block 0, no `values`.
  expected<std::uint64_t> alltoall(vnode_id root, std::size_t block, contribution_fn values);
  /// The same by MPICH's pairwise exchange (core/pairwise_alltoall.hpp) over the running
  /// processors, which must be exactly 0..k-1 and stay (no recovery), installed fresh on
  /// every one now, like `allgather_ring`. Errors: block 0, no `values`, processors other
  /// than 0..k-1.
  expected<std::uint64_t> alltoall_pairwise(std::size_t block, contribution_fn values);
  /// What the processors reported of all-to-all `op`: per vnode, how often its blocks
  /// were delivered to it (`delivered`), each vnode's contribution taken (`contributions`;
  /// the baseline's too), deliveries with a wrong block (`bad`).
  alltoall_record alltoalled(std::uint64_t op) const;
  /// Runs until every vnode has all-to-all `op` and (virtual time) the cluster is quiet;
  /// at most `limit`. False on the limit.
  bool run_until_alltoalled(std::uint64_t op, duration limit);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace banyan::actors

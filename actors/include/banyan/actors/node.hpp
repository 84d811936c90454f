#pragma once
/// One processor over real TCP, for embedding in a program: a `banyan::node` owns a
/// supervisor (the protocol state machine of core/) and its collective engines, runs them
/// on the real clock (timers on a CAF actor), and moves their messages with a
/// `net::tcp_transport` (libuv, on a thread of its own, HMAC challenge-response under a
/// shared secret). See docs/api.md.
///
///     banyan::node_config cfg;
///     cfg.id = 3;
///     cfg.listen = "0.0.0.0:7003";
///     cfg.advertise = "10.0.0.3:7003";
///     cfg.secret = read_secret();
///     banyan::node n(cfg);                       // or n(my_actor_system, cfg)
///     n.on_event([](const banyan::node_event& e) { log(to_string(e)); });
///     if (auto port = n.start(); !port) fail(port.err());
///     auto joined = n.join({{"10.0.0.1:7000"}});  // any member's address
///     if (auto err = joined.get()) fail(*err);
///     ...
///     n.leave().wait();                           // hands its vnodes over
///     n.stop();
///
/// Bootstrap: the first processor `found`s the computation with the vnodes it owns;
/// every other one `join`s through any member's address (its processor id is learnt
/// from that member's side of the handshake, or may be given).
///
/// Threads. Every method is thread-safe and returns at once. The node's state is one
/// state machine under a lock, run by whichever thread has work for it: a frame that
/// arrives is handled (and forwarded) on the transport's loop thread, a call on the
/// caller's thread, a timer on the node's actor. Handlers (deliveries, events, the
/// completion callbacks of `found`, `join` and `leave`) run on the loop thread or the
/// actor, one at a time and in order, never inside a call from another thread: they may
/// call any method but `stop`, must not wait on a future of this node, and should be
/// quick (a long handler holds up the network). CAF stays behind this header.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/collective_kind.hpp"
#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/reduce.hpp"
#include "banyan/core/reduce_op.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/routing_table.hpp"
#include "banyan/core/shared_bytes.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"
#include "banyan/net/tcp_transport.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace banyan {

/// Processor ids a node may take: [0, max_node_id]. Ids above are reserved (a node uses
/// a few of them internally while it learns a contact's id).
inline constexpr proc_id max_node_id = 0x7fffffff;

/// A member to join through.
struct node_contact {
  std::string address;  ///< "host:port" or "[v6]:port"
  proc_id id = no_proc; ///< its processor id; no_proc: learnt from its handshake
};

/// The engines' defaults for a node over TCP: `broadcast_config` with larger segments
/// for long broadcasts (`max_segment` 1 MiB).
inline broadcast_config tcp_broadcast_config() {
  broadcast_config c;
  c.max_segment = std::size_t{1} << 20;
  c.acknowledge = true; // exactly once through crashes; `resend_after`, `stale_stream` and
                        // `complete_within` are set from crash_timeout and op_timeout
  return c;
}

struct node_config {
  proc_id id = no_proc;               ///< this processor; required, at most max_node_id
  std::string listen = "127.0.0.1:0"; ///< "host:port" to listen on; port 0: an ephemeral one
  /// The address other processors reach this one at; empty: the listen host with the
  /// port actually bound (so set it when listening on 0.0.0.0 or behind NAT).
  std::string advertise;
  std::string secret; ///< shared by every processor of the computation; never sent
  /// Frames travel unencrypted (net::tcp_config::plaintext): trusted networks only;
  /// every processor of the computation must agree.
  bool plaintext = false;
  supervisor_config sup;
  std::uint64_t seed = 0; ///< the supervisor's randomness; 0: from std::random_device
  /// Emulated wide-area links on one host (see docs/transport.md); empty: none.
  net::link_shaper shaper;
  /// CAF worker threads, when the node owns its actor system.
  std::size_t threads = 2;
  /// The transport's `busy_poll` (net::tcp_config): after activity, poll the sockets
  /// this long before sleeping; trades CPU for latency. 0: never.
  duration busy_poll{0};
  /// `stop` waits this long at most for queued frames to reach the kernel.
  duration drain_timeout = std::chrono::seconds(1);
  /// The transport's `max_pending_per_address` (net::tcp_config): inbound connections in
  /// their handshake from one IP address. The default assumes one address is one host
  /// running few processors; many processors of one host (all on 127.0.0.1) connect to
  /// a newcomer at once, so raise it to their number there (`banyan cluster` does).
  std::size_t handshakes_per_address = 8;
  /// The transport's `handshake_timeout` and `accept_timeout` (net::tcp_config; 0: their
  /// defaults, 2 s and 1 s). An acceptor that gives up on a slow initiator's proof drops
  /// the frames written behind it (at most once), so set it above the longest a live
  /// process can take to answer (many processes on few cores: seconds).
  duration handshake_timeout{0};
  /// The collective engines (`first_seq` is set by the node, per membership). A long
  /// broadcast goes in segments of up to 1 MiB, at least 64 of them
  /// (`broadcast_config::max_segment`, `segment_for`): fewer frames, reads and engine
  /// events per byte, which is what a segment costs on fast links.
  broadcast_config bcast = tcp_broadcast_config();
  reduce_config reduce;
  /// User reduction operators (`reduce_kind::user`), by id; every member must register
  /// the same ones. The built-in operators need nothing here.
  reduce_op_table ops;
  /// `stop` of a node that has left waits this long at most for its collective engines
  /// to drain, so that frames bounced back to them still find them: they hold nothing,
  /// nothing they sent is still queued in the transport, and `drain_rtts` round trips
  /// to the slowest peer they wrote to (as the supervisor measured it; at least
  /// `drain_floor`) have passed since the queues were found empty; a refusal comes back
  /// within about one. With a peer never measured, `bcast.drain_linger` after the last
  /// send instead (core/send_fates.hpp, docs/collectives.md). A new membership (found,
  /// join) waits for the same.
  duration linger_timeout = std::chrono::seconds(5);
  double drain_rtts = 4;
  duration drain_floor = std::chrono::milliseconds(200);
  /// A member that sends nothing at all for this long is suspected, and taken to have
  /// crashed (its vnodes adopted) unless it or a member asked to ping it answers within
  /// `sup.suspect_timeout` (it replaces `sup.crash_timeout`; 0: only connections that
  /// cannot be made count). A process that dies is usually found sooner: its
  /// connections close, and reconnecting is refused. Keep it well above the longest a
  /// live node can go unheard (its pings queue behind the frames sent to us).
  duration crash_timeout = std::chrono::seconds(10);
  /// How long a reduction (`node_reduction::timeout` overrides it), or a `found` or
  /// `join` (waiting for the previous membership's engines, trying contacts, waiting for
  /// its share), may take before its future fails with `timeout`; at least 1 ms.
  duration op_timeout = std::chrono::seconds(60);
};

/// A message delivered to vnodes of this node.
struct node_delivery {
  enum class kind : std::uint8_t {
    broadcast, ///< `node::broadcast` of some member
    message,   ///< `node::send` of some member, to one vnode
    scatter,   ///< `node::scatter`: `payload` is the blocks of `vnodes`, in vnode order
  } what = kind::broadcast;
  /// (origin processor, number there): numbers count 1, 2, 3, ... per origin process,
  /// broadcasts and messages alike; `op.life` tells a restarted origin's apart. Use the
  /// whole id as a key; `to_string(op)` prints "origin:seq", e.g. "2:17".
  wire::collective_id op;
  vnode_set vnodes;       ///< this node's vnodes it was delivered to (one event may cover several)
  shared_bytes payload;
};

/// One reduction, started by every member with the same `seq`, `root`, `op` and `count`.
struct node_reduction {
  std::uint64_t seq = 0;   ///< 1, 2, 3, ... the same order at every member (like MPI's call order)
  vnode_id root = 0;       ///< the vnode receiving the result
  reduce_op op;            ///< e.g. {reduce_kind::sum, element_type::int32}
  std::size_t count = 0;   ///< elements per vnode
  contribution_fn values;  ///< the contribution of one vnode of this node (`count` elements)
  /// Over banyan's adaptive trees (`reduce`), or over the static tree installed with
  /// `install_static_tree` (`static_reduce`; numbered 1, 2, ... from each install).
  collective_kind over = collective_kind::reduce;
  /// How long it may take here before it fails with `timeout`; 0: `node_config::op_timeout`.
  duration timeout{0};
  /// Optional: called once with the outcome, as a handler (on the loop thread or the
  /// actor, after the state lock is released; see "Threads" above), before the future
  /// resolves; at once on the caller's thread when the node is not running, and where a
  /// node that stops drops it. Saves a waiting thread the wake-up a future costs.
  std::function<void(const expected<reduce_result>&)> done;
};

/// One gather (core/gather.hpp), started by every member with the same `seq`, `root`
/// and `block`: every vnode's block of `block` bytes to the owner of `root`.
struct node_gather {
  std::uint64_t seq = 0;  ///< 1, 2, 3, ... the same order at every member, apart from reductions
  vnode_id root = 0;      ///< the vnode receiving every block
  std::size_t block = 0;  ///< bytes per vnode
  contribution_fn values; ///< the block of one vnode of this node (`block` bytes)
  /// How long it may take here before it fails with `timeout`; 0: `node_config::op_timeout`.
  duration timeout{0};
  /// Optional: called once with the outcome, as for `node_reduction::done`.
  std::function<void(const expected<reduce_result>&)> done;
};

/// Something that happened to a node; one log line each (`to_string`).
struct node_event {
  enum class kind : std::uint8_t {
    joined,         ///< became a member (`found` or `join`)
    join_failed,    ///< a join was given up (`detail` says why)
    left,           ///< handed its vnodes over and left
    member_joined,  ///< `peer` became a member (as far as this node knows)
    member_left,    ///< `peer` left, or was taken to have crashed
    member_crashed, ///< `peer` was taken to have crashed (unreachable, or silent for `crash_timeout`)
    vnodes_adopted, ///< this node now owns `vnodes`, adopted from the crashed `peer`
    vnodes_disowned, ///< `peer` took this node for crashed: `vnodes` are no longer its own
    vnodes_gained,   ///< `peer` handed `vnodes` to this node (its join share, or `peer` left)
    vnodes_released, ///< this node handed `vnodes` to `peer` (a newcomer's share, or its leave)
    parent_changed, ///< in `tree`, from `old_parent` to `new_parent`
    cycle_broken,   ///< left `old_parent` in `tree` to break a cycle
    busy,           ///< started measuring, joining or leaving
    idle,           ///< nothing more to do until something happens
    transport,      ///< a connection came up, went down or was refused (`detail`)
    collective,     ///< something about a collective worth a log line (`detail`)
    /// `peer` is suspected of having crashed (unreachable, or silent for `crash_timeout`):
    /// it and members asked to ping it have `sup.suspect_timeout` to answer. At most one
    /// line per peer per `suspicion_log_interval`, `detail` counting those held back.
    member_suspected,
    suspicion_cleared, ///< `peer` answered: no longer suspected (limited likewise)
  };
  kind what = kind::transport;
  tree_key tree;
  proc_id old_parent = no_proc;
  proc_id new_parent = no_proc;
  proc_id peer = no_proc;
  std::string detail;
  vnode_set vnodes; ///< vnodes_adopted, vnodes_disowned, vnodes_gained, vnodes_released
  /// transport: about input from a connection that had not proved the secret, or broke
  /// the protocol (malformed, forged): the transport rate-limits these per address.
  bool hostile = false;
  /// transport: why a connection failed or was refused (none otherwise).
  net::connection_failure failure = net::connection_failure::none;
};

const char* to_string(node_event::kind k);
/// "parent_changed: latency tree of 2: 4 -> 1", "member_joined: 5 at 127.0.0.1:4005"
std::string to_string(const node_event& e);

/// One tree as this node sees it.
struct node_tree {
  tree_key tree;
  proc_id parent = no_proc; ///< no_proc: none (always so in the tree rooted here)
  std::uint32_t children = 0;
  /// Latency trees: the measured distance from the root along the tree (the sum of the
  /// hops' RTTs; 0 at the root and without a parent).
  duration dist{0};
  /// Bandwidth trees: the estimated rate at which a broadcast reaches this processor,
  /// bytes per second (`infinite_rate` at the root, 0 without a parent).
  rate est = 0;
};

/// A snapshot of a node, as of its last change.
struct node_status {
  proc_id id = no_proc;
  std::string address; ///< advertised; empty before `start`
  supervisor::status state = supervisor::status::idle;
  std::vector<wire::member> members; ///< by id, this node included
  vnode_set own_vnodes;
  routing_table routes; ///< who owns each vnode, as this node knows it now
  std::vector<node_tree> trees; ///< two per member (latency, bandwidth), by root
  bool all_parented = false;    ///< every tree rooted elsewhere has a parent here
  bool busy = false;            ///< measuring, holding updates, joining or leaving
  std::uint64_t probes_completed = 0;
  std::uint64_t probes_abandoned = 0;
};

const char* to_string(supervisor::status s);

/// What a node has done (counters: monotonic from its construction, across memberships)
/// and where it stands (gauges: values now), from `node::metrics()`. `banyan node
/// --metrics` serves them in Prometheus's text format (banyan/actors/node_exposition.hpp;
/// every metric and its meaning: docs/observability.md). Counting costs a relaxed atomic
/// increment, or a map entry under the node's lock (parent changes).
struct node_metrics {
  proc_id id = no_proc;
  // --- gauges ------------------------------------------------------------------------
  supervisor::status state = supervisor::status::idle;
  std::uint64_t incarnation = 0; ///< this node's, while a member (0 otherwise)
  std::size_t members = 0;       ///< members it knows, itself included (0 when not a member)
  std::size_t own_vnodes = 0;
  bool all_parented = false;     ///< as in `node_status`
  /// A tree rooted elsewhere that has a parent here now, and what was measured on that edge.
  struct parent_edge {
    tree_key tree;
    proc_id parent = no_proc;
    duration rtt{0};    ///< the RTT measured to the parent (0: placed without measuring it)
    rate bandwidth = 0; ///< the path bandwidth measured to it, bytes/s (0: not measured)
  };
  std::vector<parent_edge> parents; ///< by tree
  // --- counters ----------------------------------------------------------------------
  /// Deliveries to this node's vnodes of one `node_delivery::kind`.
  struct delivery_counts {
    std::uint64_t events = 0; ///< delivery handler calls (one may cover several vnodes)
    std::uint64_t vnodes = 0; ///< vnode deliveries: each event counts the vnodes it covers
    std::uint64_t bytes = 0;  ///< payload bytes of those events (one payload per event)
  };
  /// Indexed by `node_delivery::kind`: [0] broadcasts, [1] messages, [2] scatters.
  std::array<delivery_counts, 3> deliveries{};
  /// Operations asked of this node (`broadcast`, `send`, `reduce`), by outcome:
  /// `started` counts the calls, `completed` and `failed` the futures resolved with
  /// success or an error (a broadcast or send completes once its engine has it; a
  /// reduction at the root once its result is there, elsewhere once this node's part is
  /// sent). Calls whose futures are still open: started - completed - failed.
  struct collective_counts {
    std::uint64_t started = 0;
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
  };
  /// Indexed by `collective_kind` (the kind asked for: `message` for `send`).
  std::array<collective_counts, collective_kind_count> collectives{};
  /// The transport's counters: bytes and frames sent and received, connections, failed
  /// or refused connections by side and reason (net/tcp_transport.hpp).
  net::transport_stats transport;
  /// Parent changes in each tree where there has been one (trees of members that left
  /// included), by tree.
  std::vector<std::pair<tree_key, std::uint64_t>> parent_changes;
  std::uint64_t probes_completed = 0; ///< measurements of a candidate parent completed
  std::uint64_t probes_abandoned = 0; ///< and given up (the candidate did not answer)
  std::uint64_t members_joined = 0;   ///< `member_joined` events
  std::uint64_t members_left = 0;     ///< `member_left` events (crashed ones included)
  std::uint64_t crashes_detected = 0; ///< `member_crashed` events: members this node took for crashed
  std::uint64_t vnodes_adopted = 0;   ///< vnodes adopted from crashed members
  std::uint64_t vnodes_disowned = 0;  ///< vnodes given up because this node was taken for crashed
  std::uint64_t frames_from_buried = 0; ///< engine frames dropped: from a processor taken for crashed
  std::uint64_t suspicions = 0;         ///< members this node suspected (each suspicion, logged or not)
  std::uint64_t suspicions_cleared = 0; ///< of those, suspicions that ended with an answer
};

class node {
public:
  using event_handler = std::function<void(const node_event&)>;
  using delivery_handler = std::function<void(const node_delivery&)>;
  /// The outcome of `found`, `join` or `leave`: nothing on success.
  using result = std::optional<error>;
  using completion = std::function<void(const result&)>;

  /// A node that owns its actor system (`node_config::threads` workers).
  explicit node(node_config cfg);
  /// A node that runs its actor in `sys`, which must outlive it.
  node(caf::actor_system& sys, node_config cfg);
  /// Stops (see `stop`).
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Receives every event from now on (replaces an earlier handler).
  void on_event(event_handler h);

  /// Binds, listens and starts the actor. Returns the port listened on. The transport
  /// sets SIGPIPE to be ignored if it has its default disposition (a write to a peer that
  /// just died would otherwise kill the process; see net/tcp_transport.hpp). Errors:
  /// `invalid_argument` (bad id, listen or advertised address, `op_timeout` below 1 ms,
  /// started twice), `io_error` (bind).
  expected<std::uint16_t> start();

  /// Founds the computation as its only member, owning `vnodes`. Errors:
  /// `invalid_argument` (no vnodes, already a member or joining), `timeout` (the engines
  /// of the previous membership did not drain within `op_timeout`), `cancelled`.
  std::future<result> found(vnode_set vnodes, completion done = {});
  /// Joins through the first of `contacts` that lets it in, asking for `wanted` vnodes
  /// (empty: a share of the contact's). A contact that cannot be reached, refuses the
  /// handshake or does not answer is skipped. Resolves once the vnodes asked for have
  /// arrived with their reduction histories (the node owns them: `own_vnodes()`,
  /// `next_reduction_seq()` are then known); an owner with nothing to give (a contact
  /// owning fewer than two vnodes) does not answer, and the join then resolves
  /// `sup.probe_timeout` after the contact let it in, owning what arrived by then
  /// (possibly nothing); at most twice that after being let in. Errors: `auth_failed` (a
  /// contact refused our secret), `timeout` (a contact never answered, or
  /// `op_timeout`), `unknown_peer` (no contact reachable), `invalid_argument` (already a
  /// member or joining, no contact, a malformed contact address), `cancelled`.
  std::future<result> join(std::vector<node_contact> contacts, vnode_set wanted = {},
                           completion done = {});
  /// Gives up the `found` or `join` still pending: its future fails with `cancelled`.
  /// A join a contact has not answered yet tries no further contact (should the contact
  /// let it in after all, it leaves at once); one already let in and waiting for its
  /// vnodes leaves again (handing back what arrived). Returns whether one was pending.
  bool cancel_join();
  /// Hands every vnode to another member, tells everyone, and leaves. Errors:
  /// `invalid_argument` (not a member, or the last one), `timeout` (every member refused).
  std::future<result> leave(completion done = {});
  /// Trees on demand (`sup.tree_set`): this node's own trees are to be used. They open
  /// if they were not (every member attaches by measuring) and stay open until
  /// `sup.retire_after` passes without another call; every broadcast and reduction this
  /// node roots calls it too. Nothing with every member rooting trees (the default).
  /// Errors: `invalid_argument` (not a member), `stopped`.
  std::future<result> prepare();

  /// Receives every delivery to this node's vnodes from now on (replaces an earlier
  /// handler); called in order, like event handlers (see "Threads" above).
  void on_deliver(delivery_handler h);

  /// Broadcasts `message` to every vnode, this node's own included (each exactly once,
  /// wherever it lives when the message reaches it). Resolves once started, with the
  /// broadcast's name ("origin:seq", see `node_delivery::op`). Errors: `invalid_argument`
  /// (not a member), `stopped`.
  /// `over` picks the algorithm: banyan's adaptive trees (`broadcast`), or a baseline
  /// whose plan is installed: the static tree (`static_broadcast`, `install_static_tree`)
  /// or MPICH's scatter-allgather (`scatter_allgather`, `install_scatter_allgather`).
  /// Errors also: `invalid_argument` (no such plan installed, not a broadcast kind).
  std::future<expected<wire::collective_id>> broadcast(
    shared_bytes message, collective_kind over = collective_kind::broadcast);
  /// How broadcast `op`, started here over the adaptive trees, ended (with
  /// `bcast.acknowledge`, the default): resolves once every vnode acknowledged it, each
  /// delivered exactly once, also through crashes (the vnodes a crash cut off are sent
  /// again once adopted); fails with `timeout` once `op_timeout` passed since its start
  /// without, naming the vnodes it did not reach and their owners. Other errors:
  /// `not_found` (no such broadcast started here in this membership, or its outcome is
  /// no longer kept: the last 4096 are), `invalid_argument` (acknowledgements off),
  /// `stopped` (the node stopped, or left, first). See docs/api.md, "Exactly once".
  std::future<expected<broadcast_completion>> broadcast_outcome(const wire::collective_id& op);
  /// Sends `message` to vnode `to` alone (delivered exactly once, at its owner at
  /// delivery time, as a `node_delivery::kind::message`). Resolves once handed to the
  /// engine. Errors: `invalid_argument` (not a member, no such vnode), `stopped`.
  std::future<expected<wire::collective_id>> send(vnode_id to, shared_bytes message);
  /// Starts reduction `r.seq` (every member starts every reduction, in order). Resolves
  /// at the root vnode's owner with the result, once it covers every vnode; at the other
  /// members once this node's part is sent (`value` empty). Errors, at once:
  /// `invalid_argument` (not a member, a number not above the last one started here, a
  /// root vnode outside the namespace, count 0 or one the operator cannot take, no
  /// `values`, a contribution of the wrong size: nothing is started, the same number may
  /// be started again), `not_found` (a user operator nobody registered). Later:
  /// `timeout` after `r.timeout` (at the root, naming the vnodes whose contributions
  /// never arrived and their processors), `cancelled` (`cancel_reduction`), `stopped`
  /// (the node stops first); the reduction is then dropped here, later ones go on.
  std::future<expected<reduce_result>> reduce(node_reduction r);
  /// Gives up reduction `seq` (of `over`) started here and not answered yet: its future
  /// fails with `cancelled`, naming what was missing, and its state here is dropped (what
  /// it had gathered with it). Returns whether it was pending.
  bool cancel_reduction(std::uint64_t seq, collective_kind over = collective_kind::reduce);
  /// The number the next reduction (of `over`) started here should carry: one above the
  /// last one started here; before any (a node that just joined), the first reduction
  /// the vnodes it received still owe; 0 when the node runs no such engine (not a member,
  /// no static tree installed). See `reduce_engine::next_op`.
  std::uint64_t next_reduction_seq(collective_kind over = collective_kind::reduce) const;
  /// Starts allreduce `r.seq` over the adaptive trees (`r.over` is ignored: every member
  /// starts every allreduce, in order, numbered apart from reductions): the reduction of
  /// every vnode's contribution, gathered at the owner of `r.root`, is broadcast from
  /// there to every vnode (core/allreduce.hpp). Resolves at every member owning vnodes,
  /// once the result has reached every vnode it owns (it may come in several
  /// deliveries), with the result (`value`) and those vnodes (`vnodes`).
  /// Errors as for `reduce` (`invalid_argument` at once for what this node can tell is
  /// wrong, `timeout` after `r.timeout` naming what was missing, `cancelled` by
  /// `cancel_reduction(seq, collective_kind::allreduce)`, `stopped`). A member owning no
  /// vnodes when the result is broadcast receives none: its future fails with `timeout`.
  /// `next_reduction_seq(collective_kind::allreduce)`: the number to start next.
  std::future<expected<reduce_result>> allreduce(node_reduction r);
  /// Starts barrier `seq` (an allreduce of nothing; barriers are numbered apart): resolves
  /// once every vnode has arrived (every member owning vnodes started it) and the
  /// release reached this node's vnodes (`value` empty). Errors, cancellation
  /// (`collective_kind::barrier`) and numbering as for `allreduce`; `timeout` 0:
  /// `node_config::op_timeout`.
  std::future<expected<reduce_result>> barrier(std::uint64_t seq, duration timeout = duration{0});

  /// Baselines, to measure against banyan over the same network. Every member installs
  /// the same plan, between operations (an operation under way on the plan it replaces
  /// is cut off), and again after membership changes; a plan lasts for this membership.
  /// Installs static broadcast and reduction engines over `t` (from
  /// core/tree_builders.hpp, over processor ids 0..t.size()-1), with vnode ownership as
  /// this node's routing table says now; reductions size their timeouts for 10 ms to the
  /// root. Completes at once. Errors: `invalid_argument` (not a member, a tree that does
  /// not span exactly the members: one outside it, a cycle, an orphan).
  std::future<result> install_static_tree(banyan::tree t);
  /// Installs MPICH's scatter-allgather broadcast over processors 0..procs-1 (ranked by
  /// id; it has no recovery: the members must be exactly those and stay). Completes at
  /// once. Errors: `invalid_argument` (not a member, members other than 0..procs-1).
  std::future<result> install_scatter_allgather(std::size_t procs);

  /// Starts gather `g.seq` over banyan's adaptive trees (every member starts every
  /// gather, in order; numbered apart from reductions). Each vnode's block reaches the
  /// root exactly once, wherever the vnode lives when it is counted. Resolves at the root
  /// vnode's owner with every vnode's block (`reduce_result::value`: the blocks of
  /// `vnodes` in vnode order; `gathered_blocks` in core/gather.hpp splits them), at the
  /// other members once this node's part is sent (`value` empty). Errors, at once:
  /// `invalid_argument` (not a member, a number not above the last gather started here,
  /// a root vnode outside the namespace, block 0, no `values`, a block of the wrong
  /// size: nothing is started). Later: `timeout` (naming the vnodes whose blocks never
  /// arrived and their processors), `cancelled` (`cancel_reduction(seq,
  /// collective_kind::gather)`), `stopped`. `next_reduction_seq(collective_kind::gather)`
  /// gives the number the next one should carry.
  std::future<expected<reduce_result>> gather(node_gather g);
  /// Starts allgather `g.seq` (core/allgather.hpp: a gather to `g.root`, then a broadcast
  /// of every block from the root's owner down the same trees). Every member starts every
  /// allgather, in order, numbered apart from reductions and gathers. Resolves at every
  /// member once the blocks reach one of its vnodes, with every vnode's block
  /// (`reduce_result::vnodes` every vnode, `value` their blocks in vnode order;
  /// `gathered_blocks` splits them); a member that owns no vnode when its part goes up
  /// resolves then, `value` empty. Errors as for `gather`;
  /// `cancel_reduction(seq, collective_kind::allgather)`,
  /// `next_reduction_seq(collective_kind::allgather)`.
  std::future<expected<reduce_result>> allgather(node_gather g);
  /// Starts all-to-all `g.seq` (core/alltoall.hpp: a gather to `g.root`, then a scatter
  /// of the transpose from the root's owner down the same trees). `g.values(v)` is vnode
  /// v's contribution: its block of `g.block` bytes for every vnode of the namespace, in
  /// vnode order (vnodes x `g.block` bytes). Every member starts every all-to-all, in
  /// order, numbered apart from every other collective. Resolves at every member owning
  /// vnodes once the blocks for all of them are here: `reduce_result::vnodes` those
  /// vnodes, `value` for each of them in vnode order the block every vnode had for it,
  /// in vnode order (vnodes x `g.block` bytes each); a member that owns no vnode when
  /// its part goes up resolves then, `value` empty. Errors as for `gather` (a
  /// contribution of the wrong size: `invalid_argument` naming the vnode);
  /// `cancel_reduction(seq, collective_kind::alltoall)`,
  /// `next_reduction_seq(collective_kind::alltoall)`.
  std::future<expected<reduce_result>> alltoall(node_gather g);
  /// Scatters `blocks`, one for every vnode of the namespace, all of one size, from vnode
  /// `root` (owned by this node) over banyan's adaptive trees: each vnode gets its own
  /// block exactly once, wherever it lives then, as a `node_delivery::kind::scatter`.
  /// Resolves once started, with its name. Errors: `invalid_argument` (not a member,
  /// `root` not owned here or not a vnode, a vnode without a block, a block for a vnode
  /// outside the namespace, blocks of different or zero size), `stopped`.
  std::future<expected<wire::collective_id>> scatter(vnode_id root,
                                                     std::map<vnode_id, shared_bytes> blocks);

  /// Drains queued frames (at most `drain_timeout`), closes every connection and stops
  /// the actor; operations still pending complete with `stopped`. Does not leave: a
  /// stopped member is found unreachable by the others (call `leave` first). Idempotent.
  void stop();

  proc_id id() const noexcept;
  /// The port listened on (0 before `start`).
  std::uint16_t port() const;
  /// The advertised address (empty before `start`).
  std::string address() const;
  node_status status() const;
  /// The counters and gauges (`node_metrics`), as of now. Thread-safe; takes the node's
  /// lock for a moment (the parents' measurements are read from the supervisor), so it is
  /// meant for a scrape now and then, and must not be called from `reduce`'s `values`.
  node_metrics metrics() const;
  supervisor::status state() const;
  std::vector<proc_id> members() const;
  vnode_set own_vnodes() const;
  /// Our parent in `k` (no_proc: none, or no such tree).
  proc_id parent(tree_key k) const;
  /// Who owns vnode `v`, as this node knows it now (no_proc: unknown). Ownership moves
  /// with joins, leaves and crash adoptions; a `send` to `v` follows it wherever it goes.
  proc_id owner_of(vnode_id v) const;
  /// The vnodes `p` owns, as this node knows it now (empty: none, or not a member).
  vnode_set vnodes_of(proc_id p) const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace banyan

#pragma once
/// Broadcast from any processor to every vnode (paper IV-D), as a pure state machine:
/// events in (a segment arrived, a timer fired, a frame bounced, the view changed),
/// frames, timers and deliveries out. It reads trees and ownership through a
/// `tree_view`, so it runs over adaptive and static trees alike.
///
/// Every frame carries the set of vnodes to reach through its receiver (the header).
/// A receiver
///   (I)   delivers to the vnodes it owns,
///   (II)  passes each child the part of the rest inside that child's subtree set
///         (children with the most descendants first),
///   (III) sends what is left point-to-point to the owners its routing table names,
///         grouped: a few owners get the rest between them and pass it on the same way
///         (`owner_groups.hpp`).
/// A direct receiver of a broadcast does the same (its tree children may cover part of
/// what it got); a point-to-point message (`send`) skips (II).
///
/// Short messages travel whole along the latency tree of the origin; long ones are cut
/// into `segment_size` segments pipelined along its bandwidth tree. Which is which the
/// origin decides (`broadcast_config::rule`, core/tree_choice.hpp): below `long_threshold`
/// or not, or whichever tree the model predicts to finish first; the tree kind travels in
/// every frame.
///
///   time ->     t1      t2      t3      t4      t5
///   origin      s0->A   s1->A   s2->A   s3->A
///   A                   s0->B   s1->B   s2->B   s3->B
///   B                           s0->C   s1->C   s2->C ...
///
/// The segments a processor receives from one sender for one header form a stream. Its
/// forwarding plan (what to deliver, which part to which child or owner) is decided at
/// its first segment and applied to every later one, so a vnode gets all the segments of
/// a message along one path. A message of one segment (every short one) is planned, sent
/// on and completed within the event that brought it: its stream is never stored, so no
/// later event can see it half done (nor does it need its per-segment bookkeeping).
/// A vnode is delivered to once all segments are here, if it
/// is still owned here then; if it moved away meanwhile, its new owner is offered the
/// responsibility without the bytes (`bcast_offer`): it takes it if it holds the same
/// broadcast (a stream of it here, or a completed one it keeps for a while) and delivers
/// its own copy; otherwise the assembled message goes to it point-to-point.
///
/// Exactly once: at every moment each (broadcast, vnode) is the responsibility of
/// exactly one stream, or one frame in flight; a plan splits a header into disjoint
/// parts, delivery ends the responsibility, and nothing is ever dropped: a frame that
/// cannot be delivered comes back (`on_undeliverable`) and is routed again, a frame that
/// has passed `max_hops` processors is held for `retry_delay` and then sent
/// point-to-point afresh; an offered (broadcast, vnodes) stays the offerer's until the
/// answer says it was taken. See docs/collectives.md.
///
/// Leaving: a processor whose supervisor has left must stay reachable, feeding this
/// engine, until `drained(now, fates)`: it holds no stream and none of the frames it
/// sent can come back any more (so that frames it sent that bounce find it still
/// there). What the runtime knows of their fates decides (core/send_fates.hpp); with
/// nothing known, `drained(now)` waits `drain_linger` after the last send.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "banyan/core/collective_engine.hpp"
#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/send_fates.hpp"
#include "banyan/core/shared_bytes.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree_choice.hpp"
#include "banyan/core/tree_view.hpp"

namespace banyan {

struct broadcast_config {
  /// How a broadcast picks its tree (core/tree_choice.hpp): `threshold`, by
  /// `long_threshold` alone, or `model`, the tree with the lower completion time
  /// predicted from the supervisor's measurements (`long_threshold` when there are none,
  /// as over static trees). Point-to-point messages follow no tree: they are cut into
  /// segments from `long_threshold` on whatever the rule.
  tree_rule rule = tree_rule::model;
  /// Messages of at least this many bytes follow the bandwidth tree, in segments;
  /// shorter ones travel whole along the latency tree (the paper's 256 KiB).
  std::size_t long_threshold = 256 * 1024;
  /// Messages longer than this always follow the bandwidth tree, in segments, whatever
  /// the model predicts: a whole message is one frame, and a transport bounds frames
  /// (tcp_config::max_frame, 64 MiB); nor does store-and-forward of such a message gain
  /// anything over the pipeline. Keep it well below the transport's frame limit.
  std::size_t max_whole = 4u << 20;
  /// The model's sender cost per message (the emulated topologies' `send_overhead`).
  duration send_overhead = std::chrono::microseconds(20);
  /// Segment size for long messages: 4 segments at the threshold, and at 1 Gbit/s a
  /// segment takes about 0.5 ms, so a 20 us send overhead and a header costs a few
  /// percent while the pipeline fills within a few hops (docs/collectives.md).
  std::size_t segment_size = 64 * 1024;
  /// Long broadcasts may be cut into larger segments, up to this many bytes, as long as
  /// there are at least `min_segments` of them (`segment_for`). Not above
  /// `segment_size` (the default): always `segment_size`. For fast links (a LAN, one
  /// host), where what a segment costs is the receivers' CPU per frame, not its time on
  /// the wire; the TCP node sets 1 MiB (node_config). Point-to-point messages always
  /// use `segment_size`.
  std::size_t max_segment = 0;
  /// See `max_segment`: a message cut into at least this many segments keeps the
  /// pipeline's fill, (depth - 1) segments, a small part of its time.
  std::size_t min_segments = 64;
  /// A frame that has passed this many processors since it was last held is held for
  /// `retry_delay`, then sent point-to-point afresh (with its count restarted). Tree
  /// depth must stay below this; only stale routes and transient cycles should reach it.
  /// Bandwidth trees are deep (they favour chains: paper-4c137's reach depth 42, a List
  /// chain is as deep as there are processors), and a hold in the middle of a pipelined
  /// message turns the rest of its subtree into point-to-point sends from one processor.
  std::uint32_t max_hops = 1024;
  duration retry_delay = std::chrono::milliseconds(5);
  /// How long a processor that no longer takes part must stay reachable after its last
  /// send (bounces of its frames must find it) when its runtime knows nothing of their
  /// fates (`drained(now)`; core/send_fates.hpp). Well above any round trip.
  duration drain_linger = std::chrono::seconds(2);
  /// The point-to-point step (III) sends to at most this many owners of the sender's
  /// LAN, each passing on a share of the rest, and to one owner beyond it that passes
  /// the farther ones on (`core/owner_groups.hpp`): a tree of direct streams instead of
  /// one stream per owner. 0: one stream per owner.
  std::size_t direct_fanout = 2;
  /// A shallow start: a whole latency-tree message of at most this many bytes goes from
  /// its origin straight to every processor of the origin's LAN (`tree_view::local`)
  /// that owns some of its vnodes and is not a child of the origin (one direct stream
  /// each, after the tree's frames), instead of down the tree to them; its other vnodes
  /// go down the tree as before. Only while the origin counts at most
  /// `shallow_max_procs` processors in its LAN. 0: off (broadcasts; the releases of
  /// allreduce, barrier and allgather set it from the reductions' star,
  /// `reduce_config::star_bytes`). Assumes what the star assumes: a few small sends cost
  /// the origin less than the hops down a latency tree deepened by the forwarding
  /// overhead it charges each child (core/reduce_star.cpp).
  std::size_t shallow_bytes = 0;
  std::size_t shallow_max_procs = 8;
  /// A processor a frame bounced from is avoided (its parts go to a peer) this long.
  duration unreachable_memory = std::chrono::seconds(1);
  /// A vnode that moved away from where a broadcast was to be delivered to it: offer the
  /// new owner the responsibility without the bytes (`wire::bcast_offer`), which it takes
  /// when it holds that broadcast's payload; the assembled message goes to it only if it
  /// does not. false: always send the message (point-to-point messages always are).
  bool offer_handoff = true;
  /// Completed broadcasts whose payloads are kept (they are shared, not copied) so that
  /// offers arriving after this processor's own copy was delivered can still be taken:
  /// at most `keep_count` of them, `keep_bytes` in all, each for `keep_for`.
  std::size_t keep_count = 4;
  std::size_t keep_bytes = 32u << 20;
  duration keep_for = std::chrono::seconds(2);
  /// An offer taken for vnodes that moved on again is offered on; after this many such
  /// steps (stale tables passing it round) the bytes go instead.
  std::uint32_t max_offer_hops = 8;
  /// The first broadcast number (broadcasts and messages share one count), and the
  /// origin's life (`collective_id::life`). Broadcasts are named (origin, kind, life,
  /// number): a processor that joins again must name its operations apart from those of
  /// its earlier incarnation, by numbering on (`number_from`) or by another life, or
  /// (life 0) from beyond the numbers the earlier one used, e.g. its incarnation times 2^32.
  std::uint64_t first_seq = 1;
  std::uint32_t life = 0;
  /// The first stream (and offer) number; streams are named (sender, number). 0: the
  /// same as `first_seq`. A later incarnation starts beyond the earlier one's.
  std::uint64_t first_tag = 0;
  /// The kinds this engine's broadcasts and point-to-point messages carry
  /// (`collective_id::kind`): receivers and forwarders tell a message from a broadcast
  /// by it, and the runtime's engine host routes frames by it. Over fixed trees:
  /// `static_broadcast`, and `none` for messages (such an engine does not `send`).
  collective_kind kind = collective_kind::broadcast;
  collective_kind message_kind = collective_kind::message;
  /// Per-vnode blocks instead of one message for all (the scatter engine,
  /// core/scatter.hpp): a frame carries the blocks of the vnodes in its header, in vnode
  /// order (core/vnode_blocks.hpp), and every part a plan splits off takes only its own
  /// vnodes' blocks; a delivery carries the blocks of the vnodes it is for. Messages
  /// travel whole down the latency tree (one frame per hop, never segmented: what a
  /// frame carries shrinks at every hop), and vnodes that moved get their blocks sent
  /// on, never offered.
  bool blocks = false;

  /// Exactly once through crashes (docs/collectives.md, "Through crashes"). Receivers
  /// acknowledge every broadcast delivery to its origin (`wire::bcast_ack`, repeats too)
  /// and deliver each (broadcast, vnode) once (a history of `history_count` broadcasts,
  /// each kept `history_for`); the origin keeps the broadcast until every vnode is
  /// covered, sends the uncovered ones again (offered first, the bytes when not taken)
  /// when their owners change or nothing new was covered for `resend_after`, and reports
  /// the outcome (`broadcast_completion`): complete, or failed after `complete_within`
  /// naming the vnodes not reached. Incomplete streams that received nothing for
  /// `stale_stream` are dropped (the origin sends their part again). Off: none of this
  /// (no frames, no state).
  bool acknowledge = false;
  /// After the owners of uncovered vnodes changed (an adoption), the origin waits this
  /// long before sending again (acknowledgements of deliveries made just before the
  /// change land first).
  duration resend_grace = std::chrono::milliseconds(200);
  duration resend_after = std::chrono::seconds(10);
  duration complete_within = std::chrono::seconds(60);
  /// How long a vnode's owner at a broadcast's start, no longer its owner, gets to answer
  /// for it (resends go to it, which acknowledges what it delivered) before resends go to
  /// the vnode's owner of the moment (docs/collectives.md, "Past owners first").
  duration past_owner_wait = std::chrono::seconds(20);
  duration stale_stream = std::chrono::seconds(5);
  std::size_t history_count = 1024;
  duration history_for = std::chrono::seconds(120);
};

/// The segment a long broadcast of `bytes` is cut into: `segment_size`, doubled while
/// the result stays at most `max_segment` and cuts the message into at least
/// `min_segments` segments. So with the TCP node's 1 MiB cap a 64 MiB broadcast goes in
/// 64 segments of 1 MiB, 16 MiB in 256 KiB ones, 4 MiB and less in 64 KiB ones.
///
///   bytes    segments of:  64 KiB  128 KiB  256 KiB  512 KiB  1 MiB   chosen (min 64)
///   4 MiB                      64       32                              64 KiB
///   16 MiB                    256      128       64       32            256 KiB
///   64 MiB                   1024      512      256      128      64    1 MiB
std::size_t segment_for(const broadcast_config& cfg, std::size_t bytes);


/// The message reached `vnodes` (all owned here at this moment).
struct broadcast_delivery {
  wire::collective_id op;
  vnode_set vnodes;
  shared_bytes payload;
  bool p2p = false; ///< a point-to-point message (`send`), not a broadcast
};

/// The outcome of a broadcast started here (`broadcast_config::acknowledge`): every
/// vnode acknowledged it (`complete`), or it failed after `complete_within`, naming the
/// vnodes not acknowledged and their owners as this processor knows them.
struct broadcast_completion {
  wire::collective_id op;
  bool complete = false;
  vnode_set missing;
  std::map<proc_id, vnode_set> owners; ///< of `missing`
  std::uint32_t resends = 0;           ///< times the uncovered vnodes were sent again
};

/// What handling one event produced.
struct broadcast_outbox : engine_outbox {
  std::vector<broadcast_delivery> deliveries;
  std::vector<broadcast_completion> completions;
  void clear() {
    sends.clear();
    timers.clear();
    deliveries.clear();
    completions.clear();
  }
};

struct broadcast_stats {
  std::uint64_t started = 0;       ///< broadcasts started here
  std::uint64_t sent = 0;          ///< point-to-point messages started here
  std::uint64_t tree_frames = 0;   ///< frames sent to a child (II)
  std::uint64_t direct_frames = 0; ///< frames sent point-to-point (III, redirects, retries)
  std::uint64_t shallow_frames = 0; ///< frames an origin sent straight to its LAN (`shallow_bytes`)
  std::uint64_t delivered = 0;     ///< vnode deliveries (a delivery to 3 vnodes counts 3)
  std::uint64_t redirected = 0;    ///< assembled messages sent on because a vnode moved
  std::uint64_t offered = 0;       ///< offers sent for vnodes that moved (no bytes)
  std::uint64_t offers_taken = 0;  ///< offers of others taken here (delivered from our copy)
  std::uint64_t offers_refused = 0; ///< offers of others refused here (no payload held)
  std::uint64_t offer_fallbacks = 0; ///< our offers refused or bounced: the bytes went
  std::uint64_t holds = 0;         ///< streams held for `retry_delay`
  std::uint64_t bounces = 0;       ///< frames that came back undeliverable
  std::uint64_t malformed = 0;     ///< segments dropped as inconsistent with their stream
  std::uint64_t acks_sent = 0;     ///< acknowledgements sent to origins
  std::uint64_t repeats = 0;       ///< vnode deliveries not made: delivered here before
  std::uint64_t resends = 0;       ///< times an origin sent uncovered vnodes again
  std::uint64_t completed = 0;     ///< broadcasts started here that every vnode acknowledged
  std::uint64_t failed = 0;        ///< broadcasts started here given up (`complete_within`)
  std::uint64_t stale_dropped = 0; ///< incomplete streams dropped after `stale_stream`
  std::uint64_t fenced = 0;        ///< deliveries deferred by a fence
  std::uint64_t unleased = 0;      ///< of them, for want of a delivery lease
  /// Vnodes an origin sent again to their owner at the broadcast's start, no longer
  /// their owner (taken for crashed, or a handover), rather than to their new owner.
  std::uint64_t past_owner_resends = 0;
  /// Vnodes no longer owned here, of a copy that came here, acknowledged rather than
  /// sent on: delivered here while they were ours.
  std::uint64_t delivered_before = 0;
};

class broadcast_engine {
public:
  /// `view` must outlive the engine.
  explicit broadcast_engine(tree_view& view, broadcast_config cfg = {});

  /// Broadcasts `message` to every vnode (this processor's own included). Fails with
  /// `errc::stopped` when the processor no longer takes part.
  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message,
                                          broadcast_outbox& out);
  /// The same, choosing the tree by `choice` instead of the configured rule (to compare
  /// rules on the same trees).
  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message,
                                          const tree_choice& choice, broadcast_outbox& out);
  /// Broadcasts `message` to the vnodes `to` only, down the same trees (in block mode, a
  /// scatter to part of the namespace: `message` holds the blocks of `to`). Exactly once
  /// and acknowledged as a broadcast, for `to`. Errors as `broadcast`, and
  /// `invalid_argument` when `to` names vnodes outside the namespace.
  expected<wire::collective_id> broadcast_to(timestamp now, shared_bytes message,
                                             const vnode_set& to, broadcast_outbox& out);
  expected<wire::collective_id> broadcast_to(timestamp now, shared_bytes message,
                                             const vnode_set& to, const tree_choice& choice,
                                             broadcast_outbox& out);
  /// The tree choice the configuration makes.
  tree_choice configured_choice() const;

  /// Point-to-point: delivers `message` exactly once to each vnode of `to`, at the
  /// processor owning it at delivery time (forwarded during migration), along direct
  /// streams (steps I and III only). Deliveries carry `p2p = true`. Fails with
  /// `errc::invalid_argument` when `to` is empty or names vnodes outside the namespace,
  /// with `errc::stopped` when the processor no longer takes part, with
  /// `errc::invalid_argument` when the engine sends no messages (`message_kind` none).
  expected<wire::collective_id> send(timestamp now, vnode_set to, shared_bytes message,
                                     broadcast_outbox& out);

  /// Whether `m` is for this engine (a `bcast_segment`, `bcast_offer` or `bcast_answer`).
  static bool handles(const wire::message& m) {
    return std::holds_alternative<wire::bcast_segment>(m) ||
           std::holds_alternative<wire::bcast_offer>(m) ||
           std::holds_alternative<wire::bcast_answer>(m) ||
           std::holds_alternative<wire::bcast_ack>(m);
  }
  /// The broadcast a frame for this engine belongs to (`handles(m)` must hold).
  static wire::collective_id op_of(const wire::message& m);
  /// A frame for this engine arrived from `from`. Returns false when the engine does
  /// not take it: the runtime must then hand it back to its sender as undeliverable
  /// (`on_undeliverable` there), as if nobody ran here. A stream is taken whole or not
  /// at all: a new one only from its first frame on (the others of a stream whose first
  /// frame went elsewhere are refused), and only while the processor takes part or can
  /// relay it (`tree_view::relaying`: one that has left passes new streams whole to the
  /// member that took its vnodes). One that has not joined yet, or left owning nothing,
  /// has frozen knowledge and takes only the rest of the streams it holds: new work must
  /// go to processors that know better.
  bool on_message(timestamp now, proc_id from, const wire::message& m, broadcast_outbox& out);
  bool on_segment(timestamp now, proc_id from, const wire::bcast_segment& m,
                  broadcast_outbox& out);
  /// A timer this engine asked for fired.
  void on_timer(timestamp now, std::uint64_t token, broadcast_outbox& out);
  /// `m`, sent by this engine to `to`, could not be delivered there (nobody runs
  /// there): its vnodes are this engine's again.
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m,
                        broadcast_outbox& out);
  /// The view may have changed (call after every event of the processor's supervisor).
  void on_view_change(timestamp now, broadcast_outbox& out);
  /// No vnode is delivered to here before `until`: deliveries due meanwhile wait and are
  /// made then, to the vnodes still owned here (the others are handed on). A runtime
  /// that finds its process was stopped (a stall: its timers came late) fences until
  /// news of a possible adoption of its vnodes has had time to arrive.
  void fence(timestamp now, timestamp until, broadcast_outbox& out);
  // Deliveries are also held while the view says they may not be made
  // (tree_view::may_deliver: the delivery lease), and made once it says they may, to
  // the vnodes still owned here; those no longer owned are handed on at once.
  /// Broadcasts started here whose outcome is not known yet (`acknowledge`).
  std::size_t unacknowledged() const noexcept { return pending_.size(); }
  /// Whether broadcast `op` was started here and its outcome is still to come.
  bool awaits(const wire::collective_id& op) const { return pending_.count(op) > 0; }

  /// Still responsible for some vnodes of some broadcast (a stream, or an offer not
  /// answered yet).
  bool holding() const noexcept { return !streams_.empty() || !offers_.empty(); }
  /// Holds nothing and none of the frames it sent can come back, by what the runtime
  /// knows of their fates (core/send_fates.hpp): a processor that has left may stop now.
  bool drained(timestamp now, const send_fates& fates) const {
    return !holding() && fates.none_can_return(frames_sent_, last_send_, now);
  }
  /// The blind rule: holds nothing and has sent nothing for `drain_linger`.
  bool drained(timestamp now) const {
    return drained(now, send_fates::blind(cfg_.drain_linger));
  }
  /// Frames sent so far (what `send_fates::settled` counts against).
  std::uint64_t frames_sent() const noexcept { return frames_sent_; }
  /// When the last frame was sent.
  timestamp last_send() const noexcept { return last_send_; }
  /// The number the next broadcast or message started here gets.
  std::uint64_t next_seq() const noexcept { return next_seq_; }
  /// Numbers the next broadcast or message `seq` (and on from there): a runtime that
  /// keeps one count for several engines, or across memberships, sets it before a start.
  void number_from(std::uint64_t seq) noexcept { next_seq_ = seq; }

  const broadcast_stats& stats() const noexcept { return stats_; }
  /// The streams held, one per line, for logs and failure messages.
  std::string describe() const;
  const broadcast_config& config() const noexcept { return cfg_; }

private:
  using stream_key = std::tuple<wire::collective_id, proc_id, std::uint64_t>;
  struct forward {
    proc_id to = no_proc;
    vnode_set vnodes;
    bool direct = false;
    std::uint64_t tag = 0;
    bool local = false; ///< fed to this engine's own held stream (self, tag)
    bool opened = false; ///< its first frame has been sent
    bool shallow = false; ///< from the origin straight to a processor of its LAN
  };
  struct stream {
    stream_key key;
    vnode_set header;
    tree_kind kind = tree_kind::latency;
    std::uint32_t count = 1;
    std::uint64_t total = 0;
    bool direct = false;
    std::uint32_t hops = 0;
    bool fresh = false;   ///< after a hold: plan point-to-point with the hop count restarted
    bool shallow = false; ///< started here, within `shallow_bytes`: see `shallow_parts`
    bool held = false;    ///< waiting for a retry timer
    bool planned = false;
    std::uint32_t out_hops = 0;
    vnode_set deliver;
    std::vector<forward> forwards;
    std::vector<shared_bytes> segments; ///< kept while held or for local delivery
    std::vector<bool> have;
    std::uint32_t received = 0;
    vnode_set adopted;           ///< taken over by offers: delivered here when complete
    std::uint32_t adopted_hops = 0;
    /// Never stored in `streams_`: a whole message (one segment), planned, sent on and
    /// completed in one event (`run_whole`). Its forwards need no `tag_owner_` entry:
    /// it has no later segment to divert.
    bool transient = false;
    timestamp last_fed{0}; ///< when its last segment came (`stale_stream`)
  };
  /// What every frame of one message says about it.
  struct message_head {
    wire::collective_id op;
    tree_kind kind = tree_kind::latency;
    std::uint32_t count = 1;
    std::uint64_t total = 0;
  };
  /// A whole message as a stream's segments (what a redirect or an offer needs).
  struct whole {
    message_head head;
    vnode_set header; ///< block mode: the vnodes the segments carry blocks of
    std::uint32_t out_hops = 0; ///< the hop count its frames carry
    std::vector<shared_bytes> segments;
  };
  /// A completed broadcast's payload, kept for offers.
  struct kept {
    whole msg;
    shared_bytes bytes;
    timestamp until;
  };
  /// An offer sent and not answered: the vnodes are still this engine's.
  struct offer_out {
    proc_id to = no_proc;
    vnode_set vnodes;
    std::uint32_t hops = 0;
    whole msg;
  };

  /// Starts a message from here to `to` (every vnode for a broadcast), a long one cut
  /// into segments of `segment` bytes (0: `segment_size`).
  wire::collective_id originate(timestamp now, wire::collective_id id, const vnode_set& to,
                                bool direct, tree_kind kind, const shared_bytes& message,
                                broadcast_outbox& out, std::size_t segment = 0);
  stream& open(const stream_key& key, const vnode_set& header, tree_kind kind,
               std::uint32_t count, std::uint64_t total, bool direct, std::uint32_t hops);
  /// A held stream of this engine's own, for the part `vnodes` (retried after a delay).
  stream& local_stream(const wire::collective_id& op, tree_kind kind, std::uint32_t count,
                       std::uint64_t total, std::uint64_t tag, const vnode_set& vnodes,
                       broadcast_outbox& out);
  void feed(timestamp now, const stream_key& key, std::uint32_t index, const shared_bytes& seg,
            broadcast_outbox& out);
  void plan(timestamp now, stream& s, broadcast_outbox& out);
  /// A shallow start's parts (`broadcast_config::shallow_bytes`): of `rest`, the vnodes
  /// of the origin's LAN that are not for one of its children in `tree`, by the
  /// processor they go to, taken out of `rest`. Empty when the LAN is over
  /// `shallow_max_procs`.
  std::map<proc_id, vnode_set> shallow_parts(timestamp now, const stream& s, vnode_set& rest);
  void dispatch(timestamp now, const stream_key& key, std::uint32_t index,
                const shared_bytes& seg, broadcast_outbox& out);
  void dispatch(timestamp now, stream& s, std::uint32_t index, const shared_bytes& seg,
                broadcast_outbox& out);
  /// A stored stream has all its segments: out of `streams_`, then `finish`.
  void complete(timestamp now, const stream_key& key, broadcast_outbox& out);
  /// A complete stream (no longer stored): its vnodes delivered or handed on.
  void finish(timestamp now, stream& s, broadcast_outbox& out);
  /// The single segment `payload` of a transient stream `s` (count 1, not held, not
  /// planned): what `feed` and `complete` do for a stored one, in one step.
  void run_whole(timestamp now, stream& s, const shared_bytes& payload, broadcast_outbox& out);
  void send_segment(timestamp now, std::uint32_t hops, forward& f, const message_head& head,
                    std::uint32_t index, const shared_bytes& seg, broadcast_outbox& out);
  /// What of `seg` (for `header`) goes to `part`: all of it, or in block mode the
  /// blocks of `part`.
  shared_bytes part_of(const shared_bytes& seg, const vnode_set& header,
                       const vnode_set& part) const;
  bool unusable(timestamp now, proc_id p) const;
  /// Whether `op` is a point-to-point message, not a broadcast.
  bool is_p2p(const wire::collective_id& op) const noexcept {
    return cfg_.message_kind != collective_kind::none && op.kind == cfg_.message_kind;
  }
  /// Whether `s` has kept every segment so far (so it can deliver to more vnodes).
  static bool keeps_all(const stream& s) {
    return !s.planned || !s.deliver.empty() || !s.adopted.empty();
  }
  /// `vnodes` of a complete message: delivered where owned here, handed on otherwise.
  void settle(timestamp now, const whole& msg, const shared_bytes& bytes,
              const vnode_set& vnodes, std::uint32_t hops, broadcast_outbox& out);
  /// Vnodes of a complete message that are not owned here: offered to their owners, or
  /// (`offer` false, point-to-point messages, too many offer hops) sent to them.
  void hand_on(timestamp now, const whole& msg, const vnode_set& vnodes, std::uint32_t hops,
               bool offer, broadcast_outbox& out);
  void on_offer(timestamp now, proc_id from, const wire::bcast_offer& m, broadcast_outbox& out);
  void on_answer(timestamp now, const wire::bcast_answer& m, broadcast_outbox& out);
  /// An answer of ours the transport handed back (its connection broke): sent again once
  /// per (offerer, tag) within `unreachable_memory` (broadcast_handoff.cpp).
  void resend_answer(timestamp now, proc_id to, const wire::bcast_answer& a,
                     broadcast_outbox& out);
  void keep(timestamp now, whole msg, const shared_bytes& bytes);
  const kept* kept_copy(timestamp now, const wire::collective_id& op) const;

  /// Through crashes (`acknowledge`): a broadcast started here, kept until covered.
  struct pending_op {
    whole msg;
    vnode_set to; ///< the vnodes it is for
    vnode_set covered;
    std::map<proc_id, vnode_set> owners; ///< of the uncovered vnodes, when last sent
    /// Of every vnode, its owner when the broadcast started: the processor that may
    /// have delivered it without our hearing so (its acknowledgement late or lost).
    std::map<proc_id, vnode_set> first_owners;
    /// Vnodes sent again to their owner of the start once already: the next resend
    /// goes to their owner of the moment.
    vnode_set past_tried;
    timestamp past_since = timestamp::max(); ///< when the first went to a past owner
    timestamp progress{0};               ///< when something was last covered (or sent)
    timestamp resend_at = timestamp::max();
    timestamp deadline{0};
    std::uint32_t resends = 0;
  };
  /// Deliveries waiting for a fence to end.
  struct fenced {
    whole msg;
    shared_bytes bytes;
    vnode_set vnodes;
    std::uint32_t hops = 0;
  };
  bool acks_for(const wire::collective_id& op) const {
    return cfg_.acknowledge && !is_p2p(op) && op.kind == cfg_.kind;
  }
  void track(timestamp now, const wire::collective_id& id, const shared_bytes& message,
             const vnode_set& to, tree_kind kind, std::size_t segment, broadcast_outbox& out);
  void acknowledged(timestamp now, const wire::collective_id& op, const vnode_set& vnodes,
                    broadcast_outbox& out);
  void check_pending(timestamp now, broadcast_outbox& out);
  /// Holds a delivery of `vnodes` (owned here) until the fence ends and the view lets
  /// deliveries be made (broadcast_fence.cpp).
  void hold(timestamp now, const whole& msg, const shared_bytes& bytes, const vnode_set& vnodes,
            std::uint32_t hops, broadcast_outbox& out);
  /// Makes the deliveries held once they may be made; hands on those no longer ours.
  void release_held(timestamp now, broadcast_outbox& out);
  void drop_stale(timestamp now);
  void arm(timestamp now, timestamp at, broadcast_outbox& out);
  /// Of `vnodes` of `op`, those delivered here before (and records the rest as delivered).
  vnode_set repeats(timestamp now, const wire::collective_id& op, const vnode_set& vnodes);
  /// Of `vnodes` of `op`, those delivered here before (nothing recorded).
  vnode_set delivered_here(const wire::collective_id& op, const vnode_set& vnodes) const;
  /// `vnodes` of `op`, no longer owned here but delivered here before: acknowledged to
  /// the origin again. Returns them (empty without acknowledgements).
  vnode_set answer_for_past(timestamp now, const wire::collective_id& op,
                            const vnode_set& vnodes, broadcast_outbox& out);

  tree_view& view_;
  broadcast_config cfg_;
  std::map<wire::collective_id, pending_op> pending_;
  std::map<wire::collective_id, std::pair<vnode_set, timestamp>> history_;
  std::vector<fenced> fenced_;
  timestamp fence_until_{timestamp::min() / 2};
  std::map<std::uint64_t, timestamp> ticks_; ///< check timers armed: token -> when
  std::uint64_t next_seq_;
  std::uint64_t next_tag_;
  std::uint64_t next_token_ = 1;
  std::map<stream_key, stream> streams_;
  std::map<std::uint64_t, stream_key> tag_owner_; ///< outgoing stream tag -> its stream
  std::map<std::uint64_t, stream_key> timers_;    ///< retry token -> held stream
  std::map<proc_id, timestamp> unreachable_;      ///< bounced peers, avoided until then
  std::map<std::uint64_t, offer_out> offers_;     ///< offer tag -> offer not answered yet
  /// Answers sent again after a bounce: (offerer, tag) -> until when a second bounce of
  /// it is dropped.
  std::map<std::pair<proc_id, std::uint64_t>, timestamp> answers_resent_;
  std::vector<kept> kept_;                        ///< completed broadcasts, oldest first
  timestamp last_send_{timestamp::min() / 2};
  std::uint64_t frames_sent_ = 0;
  broadcast_stats stats_;
};

} // namespace banyan

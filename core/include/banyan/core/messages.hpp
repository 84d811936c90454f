#pragma once
/// The messages processors exchange, as plain C++ values. `schema/banyan.capnp`
/// defines the same messages for the wire; `banyan::schema` converts between the two.
/// The emulated network passes these values without serializing and charges
/// `wire_size()` bytes for them; the TCP transport sends their Cap'n Proto encoding.

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "banyan/core/collective_kind.hpp"
#include "banyan/core/reduce_op.hpp"
#include "banyan/core/shared_bytes.hpp"
#include "banyan/core/subtree_summary.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan::wire {

/// Size of the bandwidth probe download, as in the paper.
inline constexpr std::size_t bw_probe_bytes = 128 * 1024;

/// What a processor tells a prober about its own place in one tree.
struct tree_info {
  tree_key tree;
  bool connected = false;     ///< is the root or has a parent
  duration dist{0};           ///< latency tree: sum of hop RTTs to the root
  rate est = 0;               ///< bandwidth tree: estimated rate received from the parent
  std::uint32_t children = 0; ///< current number of children
  std::vector<proc_id> path;  ///< ancestors, parent first, root last (loop prevention)
  /// Connected, but a processor on the path to the root lost its parent and is looking
  /// for another: dist, est and path are those of the path it had (bandwidth trees,
  /// supervisor_config::hold_while_reattaching).
  bool reattaching = false;
  friend bool operator==(const tree_info& a, const tree_info& b) {
    return a.tree == b.tree && a.connected == b.connected && a.dist == b.dist &&
           a.est == b.est && a.children == b.children && a.path == b.path &&
           a.reattaching == b.reattaching;
  }
};

/// A subtree's vnodes for one tree (child -> parent).
struct subtree_entry {
  tree_key tree;
  vnode_set vnodes;
  friend bool operator==(const subtree_entry& a, const subtree_entry& b) {
    return a.tree == b.tree && a.vnodes == b.vnodes;
  }
};

/// Ownership of a set of vnodes at an epoch (higher epoch wins).
struct route_entry {
  vnode_set vnodes;
  proc_id owner = no_proc;
  std::uint64_t epoch = 0;
  friend bool operator==(const route_entry& a, const route_entry& b) {
    return a.vnodes == b.vnodes && a.owner == b.owner && a.epoch == b.epoch;
  }
};

/// A processor as a member: its id and its incarnation. A processor that leaves and
/// joins again comes back as a new incarnation, so a late notice about the old one
/// (joined or left) can never be mistaken for news about the new one. Founding
/// members are incarnation 0; a joiner draws a random non-zero one.
struct member {
  proc_id id = no_proc;
  std::string address; ///< transport address ("host:port"); empty in emulation
  std::uint64_t incarnation = 0;
  friend bool operator==(const member& a, const member& b) {
    return a.id == b.id && a.address == b.address && a.incarnation == b.incarnation;
  }
};

// --- measurement ------------------------------------------------------------
/// RTT probe: a 1-byte ping-pong.
struct ping { std::uint64_t seq = 0; friend bool operator==(ping a, ping b) { return a.seq == b.seq; } };
struct pong { std::uint64_t seq = 0; friend bool operator==(pong a, pong b) { return a.seq == b.seq; } };
/// Indirect probe (SWIM's ping-req): a member that suspects `target` asks another member
/// to ping it; the helper answers with a `ping_ack` of the same seq if the target
/// answered its ping.
struct ping_req {
  std::uint64_t seq = 0;
  proc_id target = no_proc;
  friend bool operator==(ping_req a, ping_req b) { return a.seq == b.seq && a.target == b.target; }
};
/// Helper -> suspector, about the ping asked for by ping_req `seq`: `target` answered it
/// (`reached`), or the helper could not connect to it (not reached).
struct ping_ack {
  std::uint64_t seq = 0;
  proc_id target = no_proc;
  bool reached = true;
  friend bool operator==(ping_ack a, ping_ack b) {
    return a.seq == b.seq && a.target == b.target && a.reached == b.reached;
  }
};
/// Bandwidth probe: the prober asks for a 128 KiB download. `view` is the digest of the
/// prober's view (members, departed incarnations, routing table); a candidate whose own
/// view has that digest leaves its view out of the reply. 0: no digest, send the view.
struct bw_request {
  std::uint64_t seq = 0;
  std::uint64_t view = 0;
  /// The digests of the prober's view cut into buckets (core/src/view_buckets.hpp; their
  /// count is the list's length): the reply carries only the buckets that differ. Empty:
  /// the whole view whenever `view` differs.
  std::vector<std::uint32_t> buckets{};
  /// Where the candidate starts among the differing buckets when not all fit in its
  /// reply (supervisor_config::reply_budget): the first at or after this one, then on in
  /// cyclic order. Ignored unless less than `buckets.size()`.
  std::uint16_t buckets_from = 0;
  friend bool operator==(const bw_request& a, const bw_request& b) {
    return a.seq == b.seq && a.view == b.view && a.buckets == b.buckets &&
           a.buckets_from == b.buckets_from;
  }
};
/// Whether a root's two trees are open (supervisor_config::tree_set on_demand), as of the
/// root's `seq`-th opening or closing of them in incarnation `incarnation`: a later seq
/// (of the same incarnation) wins, so a late notice neither reopens nor closes wrongly.
struct open_root {
  proc_id root = no_proc;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  bool open = false;
  friend bool operator==(const open_root& a, const open_root& b) {
    return a.root == b.root && a.incarnation == b.incarnation && a.seq == b.seq &&
           a.open == b.open;
  }
};
/// The download: the candidate's place in every tree, and its view of the
/// computation (members, departed incarnations, routing table) for the prober to
/// merge (anti-entropy: membership news that missed a processor reaches it with its
/// next probe), padded to `bw_probe_bytes`.
struct bw_reply {
  std::uint64_t seq = 0;
  /// The candidate's place in its trees, each path cut to what the prober's loop check
  /// needs: `{prober}` when the prober is on the candidate's path to the root, else empty.
  std::vector<tree_info> trees;
  std::uint32_t padding = 0; ///< bytes of filler that bring the reply to 128 KiB
  std::vector<member> members;
  std::vector<member> departed; ///< tombstones: incarnations known to have left
  std::vector<route_entry> routes;
  /// The candidate's view has the digest the prober sent: members, departed and routes
  /// are left out (empty), and the prober has nothing to merge.
  bool view_omitted = false;
  /// On demand: the roots whose trees the candidate knows open or closed (anti-entropy
  /// for `trees_open`); empty in all-roots mode.
  std::vector<open_root> open_roots{};
  /// The buckets of the request's `buckets` whose digests differed from the candidate's:
  /// members, departed and routes are the candidate's entries in these buckets only.
  /// Empty: the whole view (or none, with `view_omitted`).
  std::vector<std::uint16_t> view_buckets{};
  /// How many more of the request's buckets differ but were left out to keep the reply
  /// within the candidate's byte budget: the prober's view is still stale in them. Those
  /// carried are the differing ones from the request's `buckets_from` on, cyclically.
  std::uint16_t view_buckets_left = 0;
  friend bool operator==(const bw_reply& a, const bw_reply& b) {
    return a.seq == b.seq && a.trees == b.trees && a.padding == b.padding &&
           a.members == b.members && a.departed == b.departed && a.routes == b.routes &&
           a.view_omitted == b.view_omitted && a.open_roots == b.open_roots &&
           a.view_buckets == b.view_buckets && a.view_buckets_left == b.view_buckets_left;
  }
};

// --- tree maintenance -------------------------------------------------------
/// Child -> candidate: become my parent in these trees (with my subtree's vnodes).
struct adopt_request {
  std::uint64_t seq = 0;
  std::vector<subtree_entry> trees;
  friend bool operator==(const adopt_request& a, const adopt_request& b) {
    return a.seq == b.seq && a.trees == b.trees;
  }
};
struct adopt_verdict {
  tree_key tree;
  bool accepted = false;
  tree_info info; ///< the candidate's current place in the tree
  /// A refusal from a processor that is leaving or has left: whom to ask instead (its
  /// own parent or step-parent in that tree); no_proc: nobody, measure.
  proc_id redirect = no_proc;
  friend bool operator==(const adopt_verdict& a, const adopt_verdict& b) {
    return a.tree == b.tree && a.accepted == b.accepted && a.info == b.info
           && a.redirect == b.redirect;
  }
};
/// Candidate -> child: which adoptions it accepted.
struct adopt_reply {
  std::uint64_t seq = 0;
  std::vector<adopt_verdict> verdicts;
  friend bool operator==(const adopt_reply& a, const adopt_reply& b) {
    return a.seq == b.seq && a.verdicts == b.verdicts;
  }
};
/// Child -> old parent: I am no longer your child in these trees.
struct release {
  std::vector<tree_key> trees;
  friend bool operator==(const release& a, const release& b) { return a.trees == b.trees; }
};
/// Parent -> child: I dropped you in these trees (a cycle was broken); find a parent.
struct orphan {
  std::vector<tree_key> trees;
  /// Empty, or one list per tree: the step-parents to ask for adoption at once, in
  /// order (the next when one refuses or is gone), before measuring. A leaving parent
  /// ranks its children: each is sent to those ranked before it (the heir first), then
  /// to the leaver's own parent and ancestors; so the heir takes its place under its
  /// parent, the others go under the heir, and the tree keeps its shape.
  std::vector<std::vector<proc_id>> steps;
  friend bool operator==(const orphan& a, const orphan& b) {
    return a.trees == b.trees && a.steps == b.steps;
  }
};
/// Parent -> child: my place in these trees changed (dist, est, children, path).
struct tree_update {
  std::vector<tree_info> trees;
  friend bool operator==(const tree_update& a, const tree_update& b) { return a.trees == b.trees; }
};
/// Child -> parent: the vnodes below me changed in these trees.
struct subtree_update {
  std::vector<subtree_entry> trees;
  friend bool operator==(const subtree_update& a, const subtree_update& b) {
    return a.trees == b.trees;
  }
};

// --- membership and vnode ownership ----------------------------------------
/// Newcomer -> any member: let me join; give me `wanted` (empty: a share of yours).
struct join_request {
  member newcomer;
  vnode_set wanted;
  friend bool operator==(const join_request& a, const join_request& b) {
    return a.newcomer == b.newcomer && a.wanted == b.wanted;
  }
};
/// Contact -> newcomer: the members and the routing table as the contact knows them.
/// The newcomer then asks the owners of the vnodes it wants (handover_request).
struct join_accept {
  std::vector<member> members;
  std::vector<route_entry> routes;
  friend bool operator==(const join_accept& a, const join_accept& b) {
    return a.members == b.members && a.routes == b.routes;
  }
};
/// Contact -> every member: a processor joined (new trees rooted at it now exist).
struct member_joined {
  member who;
  friend bool operator==(const member_joined& a, const member_joined& b) { return a.who == b.who; }
};
/// Root -> every member: my trees opened or closed (on demand); contact -> newcomer,
/// right after its join_accept: every root it knows open or closed.
struct trees_open {
  std::vector<open_root> roots;
  friend bool operator==(const trees_open& a, const trees_open& b) { return a.roots == b.roots; }
};
/// Leaver -> every member: I handed my vnodes over (see `routes`) and I am gone.
struct member_left {
  proc_id who = no_proc;
  std::vector<route_entry> routes;
  std::uint64_t incarnation = 0; ///< of the leaver
  /// A crash notice: a member took `who` for crashed (or relays such a notice). False in
  /// the leaver's own notice of a graceful leave and in relays of it.
  bool crashed = false;
  friend bool operator==(const member_left& a, const member_left& b) {
    return a.who == b.who && a.routes == b.routes && a.incarnation == b.incarnation
           && a.crashed == b.crashed;
  }
};
/// A member -> a processor it took for crashed (once per watch period, for a while):
/// the members of the sender's side. After a partition heals, the receiver (if its side
/// does not know the sender) compares the sides (more members wins, then the lowest
/// processor id) and, if its side loses, gives its vnodes up and joins the sender's.
struct merge_offer {
  std::vector<member> members;
  friend bool operator==(const merge_offer& a, const merge_offer& b) {
    return a.members == b.members;
  }
};
/// Newcomer -> an owner, once the newcomer is a member: hand these vnodes (those you
/// own) over to `to`; empty `vnodes`: a share of yours (the upper half).
struct handover_request {
  vnode_set vnodes;
  proc_id to = no_proc;
  friend bool operator==(const handover_request& a, const handover_request& b) {
    return a.vnodes == b.vnodes && a.to == b.to;
  }
};
/// Owner -> every member (the new owner included): ownership moved.
struct routing_update {
  std::vector<route_entry> routes;
  friend bool operator==(const routing_update& a, const routing_update& b) {
    return a.routes == b.routes;
  }
};

/// Leaver -> recipient: take these vnodes (ownership moves at `route.epoch`).
/// The leaver waits for the answer before it tells anyone it leaves, so vnodes are
/// never handed to a processor that is itself leaving.
struct vnode_handover {
  route_entry route;
  friend bool operator==(const vnode_handover& a, const vnode_handover& b) {
    return a.route == b.route;
  }
};
/// Recipient -> leaver: taken, or refused (the recipient is leaving or not a member).
struct vnode_handover_ack {
  std::uint64_t epoch = 0;
  bool accepted = false;
  friend bool operator==(const vnode_handover_ack& a, const vnode_handover_ack& b) {
    return a.epoch == b.epoch && a.accepted == b.accepted;
  }
};

// --- collectives (docs/collectives.md) -------------------------------------------
/// Names one broadcast or point-to-point message: the processor that started it, its
/// number there, its kind (the engine it belongs to), and the origin's life (a number
/// that differs from one run of the origin's process to the next, so that a restarted
/// processor with the same id names its operations apart from its earlier life's; 0
/// where the runtime numbers lives into `seq` instead, as the emulation does). Ordered by
/// origin, kind, life, number. Printed as "origin:seq" (`to_string`).
///
/// On the wire life and number share one 64-bit field, life in the high 32 bits
/// (docs/wire-protocol.md): an id that travels over TCP has `seq` below 2^32.
struct collective_id {
  proc_id origin = no_proc;
  std::uint64_t seq = 0;
  collective_kind kind = collective_kind::none;
  std::uint32_t life = 0;
  friend bool operator==(collective_id a, collective_id b) {
    return a.origin == b.origin && a.seq == b.seq && a.kind == b.kind && a.life == b.life;
  }
  friend bool operator!=(collective_id a, collective_id b) { return !(a == b); }
  friend bool operator<(collective_id a, collective_id b) {
    if (a.origin != b.origin)
      return a.origin < b.origin;
    if (a.kind != b.kind)
      return a.kind < b.kind;
    return a.life != b.life ? a.life < b.life : a.seq < b.seq;
  }
};

/// "2:17": origin and number (the life and kind are not printed).
std::string to_string(const collective_id& id);

/// One segment of a broadcast, for the vnodes in `vnodes` (the paper's header): the
/// receiver delivers to those it owns and passes the rest on. A message below the
/// long-message threshold is one segment on the latency tree of `op.origin`; a long one
/// is cut into `count` segments pipelined along the bandwidth tree.
struct bcast_segment {
  collective_id op;
  tree_kind kind = tree_kind::latency; ///< the tree followed: {op.origin, kind}
  vnode_set vnodes;                     ///< the vnodes to reach through the receiver
  bool direct = false;      ///< point-to-point (to an owner) rather than down the tree
  std::uint32_t hops = 0;   ///< processors passed since the last hold (loop bound)
  std::uint64_t stream = 0; ///< the sender's number for this (receiver, vnodes) stream
  bool first = false;       ///< the first frame the sender sends in this stream
  std::uint32_t index = 0;  ///< this segment's place, 0 .. count-1
  std::uint32_t count = 1;  ///< segments in the message
  std::uint64_t total = 0;  ///< bytes in the whole message
  shared_bytes payload;     ///< bytes [index * segment size, ...) of the message
  friend bool operator==(const bcast_segment& a, const bcast_segment& b) {
    return a.op == b.op && a.kind == b.kind && a.vnodes == b.vnodes && a.direct == b.direct &&
           a.hops == b.hops && a.stream == b.stream && a.first == b.first && a.index == b.index &&
           a.count == b.count && a.total == b.total && a.payload == b.payload;
  }
};

/// A partial result of reduction number `op`, covering the contributions of `vnodes`
/// (disjoint from every other partial of the same reduction), on its way to the owner of
/// vnode `root`.
struct reduce_partial {
  collective_kind collective = collective_kind::none; ///< the engine: reduce, static_reduce
  std::uint64_t op = 0;
  vnode_id root = 0;
  reduce_op fn;
  tree_kind kind = tree_kind::latency; ///< the trees followed: those rooted at root's owner
  vnode_set vnodes;
  bool direct = false;    ///< point-to-point (to the root's owner) rather than up the tree
  std::uint32_t hops = 0; ///< processors passed since the last hold (loop bound)
  shared_bytes data;
  /// Sent again after a crash (a child's partial whose parent died, or an adopter's
  /// contribution for vnodes of a crashed processor): possibly counted already. Goes
  /// point-to-point to the root's owner, which holds it apart and counts it only where
  /// nothing else covers its vnodes (docs/collectives.md, "Reductions through crashes").
  bool tentative = false;
  friend bool operator==(const reduce_partial& a, const reduce_partial& b) {
    return a.collective == b.collective && a.op == b.op && a.root == b.root && a.fn == b.fn &&
           a.kind == b.kind &&
           a.vnodes == b.vnodes &&
           a.direct == b.direct && a.hops == b.hops && a.data == b.data &&
           a.tentative == b.tentative;
  }
};

/// Vnodes whose reductions are accounted for up to and including number `done`.
struct reduce_record {
  vnode_set vnodes;
  std::uint64_t done = 0;
  friend bool operator==(const reduce_record& a, const reduce_record& b) {
    return a.vnodes == b.vnodes && a.done == b.done;
  }
};

/// A reduction whose result completed at an owner of its root vnode that no longer owns
/// it (`reduce_handoff::completed`).
struct reduce_done {
  std::uint64_t op = 0;
  vnode_id root = 0;
  vnode_set tentative; ///< the vnodes the result took from tentative partials
  friend bool operator==(const reduce_done& a, const reduce_done& b) {
    return a.op == b.op && a.root == b.root && a.tentative == b.tentative;
  }
};

/// Old owner -> new owner of vnodes: how far their contributions to reductions went.
/// The new owner contributes them to no reduction before this arrives; it is routed
/// like a point-to-point message (to the owner, again and again) until it finds them.
/// `completed`: the reductions rooted at one of the vnodes that moved whose result
/// completed at the sender (or at an owner before it): the new owner drops their
/// partials that still arrive (copies sent after a crash) instead of holding them.
struct reduce_handoff {
  collective_kind collective = collective_kind::none; ///< the engine whose histories these are
  std::vector<reduce_record> records;
  std::uint32_t hops = 0;
  std::vector<reduce_done> completed;
  friend bool operator==(const reduce_handoff& a, const reduce_handoff& b) {
    return a.collective == b.collective && a.records == b.records && a.hops == b.hops &&
           a.completed == b.completed;
  }
};

/// A vnode's old owner -> its new owner: the sender holds broadcast `op`, assembled, for
/// `vnodes`, which it no longer owns; it offers the responsibility for them, without the
/// bytes. A receiver that holds the broadcast's payload (a stream of it here, or a
/// completed one it still keeps) takes them over and delivers its own copy; otherwise
/// the sender sends the message (docs/collectives.md, "Handing over without the bytes").
struct bcast_offer {
  collective_id op;
  vnode_set vnodes;
  std::uint64_t tag = 0;  ///< the sender's number for this offer, echoed in the answer
  std::uint32_t hops = 0; ///< offers taken and passed on since the last bytes sent (loop bound)
  friend bool operator==(const bcast_offer& a, const bcast_offer& b) {
    return a.op == b.op && a.vnodes == b.vnodes && a.tag == b.tag && a.hops == b.hops;
  }
};

/// The answer to a `bcast_offer`: accepted (the receiver is responsible for those vnodes
/// now) or not (the sender still is, and sends the bytes).
struct bcast_answer {
  collective_id op;
  std::uint64_t tag = 0; ///< the offer's
  bool accepted = false;
  friend bool operator==(const bcast_answer& a, const bcast_answer& b) {
    return a.op == b.op && a.tag == b.tag && a.accepted == b.accepted;
  }
};

/// A receiver of broadcast `op` -> its origin: `vnodes` have it (delivered now, or
/// earlier: a repeat is acknowledged again, not delivered). The origin keeps the
/// broadcast until every vnode is covered (docs/collectives.md, "Through crashes").
struct bcast_ack {
  collective_id op;
  vnode_set vnodes;
  friend bool operator==(const bcast_ack& a, const bcast_ack& b) {
    return a.op == b.op && a.vnodes == b.vnodes;
  }
};

/// A parent -> a child that sent it a partial of reduction `op` up the tree: what covers
/// `vnodes` has gone up from here (in this processor's partial, or gathered here as the
/// root's owner). The child keeps what it sent until then, and sends it again,
/// tentatively, if its parent changes first (a crash).
struct reduce_ack {
  collective_kind collective = collective_kind::none;
  std::uint64_t op = 0;
  vnode_set vnodes;
  friend bool operator==(const reduce_ack& a, const reduce_ack& b) {
    return a.collective == b.collective && a.op == b.op && a.vnodes == b.vnodes;
  }
};

/// The root's owner -> the owner of `vnodes`: their contributions to reduction `op` have
/// not arrived and their owner changed. An owner that adopted them from a crashed
/// processor after starting `op` (their history died with it) contributes them,
/// tentatively; any other ignores it.
struct reduce_ask {
  collective_kind collective = collective_kind::none;
  std::uint64_t op = 0;
  vnode_set vnodes;
  friend bool operator==(const reduce_ask& a, const reduce_ask& b) {
    return a.collective == b.collective && a.op == b.op && a.vnodes == b.vnodes;
  }
};

/// One tree's subtree summary (subtree_summary.hpp), child -> parent.
struct summary_entry {
  tree_key tree;
  subtree_summary summary;
  friend bool operator==(const summary_entry& a, const summary_entry& b) {
    return a.tree == b.tree && a.summary == b.summary;
  }
};
/// Child -> parent: what a broadcast costs below me in these trees changed (by more than
/// the hysteresis), or I have just attached. Sent only in the banyan rule variant.
struct tree_summary {
  std::vector<summary_entry> trees;
  friend bool operator==(const tree_summary& a, const tree_summary& b) {
    return a.trees == b.trees;
  }
};

using message = std::variant<ping, pong, bw_request, bw_reply, adopt_request, adopt_reply,
                             release, orphan, tree_update, subtree_update, join_request,
                             join_accept, member_joined, member_left, handover_request,
                             routing_update, vnode_handover, vnode_handover_ack,
                             bcast_segment, reduce_partial, reduce_handoff, bcast_offer,
                             bcast_answer, bcast_ack, ping_req, ping_ack, merge_offer,
                             reduce_ack, reduce_ask, tree_summary, trees_open>;

/// A message with its endpoints, as the network moves it.
struct envelope {
  proc_id from = no_proc;
  proc_id to = no_proc;
  message body;
};

/// The collective a message belongs to (the engine it is for); `none` for the
/// supervisor's messages.
collective_kind kind_of(const message& m);
/// Sets the collective of a collective message (nothing for the supervisor's).
void set_kind(message& m, collective_kind k);

/// Short name of the message's type, for logs and statistics ("bw_reply").
const char* name_of(const message& m);

/// Bytes the message occupies on the wire, modelled on its Cap'n Proto encoding
/// (8-byte words, pointers and list headers, packing off, frame prefix included).
/// The emulated network charges this many bytes; a schema test keeps it within a
/// few percent of the real encoding.
std::size_t wire_size(const message& m);
/// The same for a probe reply, without copying it into a `message` first (a reply
/// carries every tree, member and route: copying it cost more than the rest of a probe).
std::size_t wire_size(const bw_reply& m);

} // namespace banyan::wire

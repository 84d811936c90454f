# banyan wire protocol, version 1: the reference for what travels between processors.
#
# Every message of `core/include/banyan/core/messages.hpp` has a struct here, and a frame
# on the wire carries one `Frame` (below). `banyan::schema` converts between these structs
# and the C++ values; `docs/wire-protocol.md` explains framing, who sends what and when,
# and how errors are handled.
#
# Conventions
# - Processor ids are UInt32 (`banyan::proc_id`); 0xffffffff means "no processor".
# - Vnode sets are `List(Interval)`: sorted, disjoint, non-adjacent, each lo < hi.
#   A decoder rejects any other form, so a set has exactly one encoding.
# - Durations are Int64 nanoseconds; rates are Float64 bytes per second.
# - Empty lists, texts and data are sent as null pointers (Cap'n Proto reads a null
#   pointer as empty), which keeps the encoding canonical and its size predictable.
# - All defaults are zero; senders set every field.
#
# Evolution (Cap'n Proto rules): fields and union members may only be appended, with the
# next ordinal; nothing is renumbered or retyped. Old decoders see appended fields as
# absent. A new union member in `Frame.body` is unknown to an old decoder, which rejects
# the frame as malformed, so such an addition needs `Frame.version` raised, or a
# handshake that tells both sides what the peer understands. The collectives (broadcast
# segments, reductions) were appended to `Frame.body` this way, within version 1, before
# any release: every peer of version 1 knows them.

@0xd4a4ff6c8d2997c3;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("banyan::capnp_schema");

# --- shared pieces -----------------------------------------------------------

enum TreeKind {
  # The two trees kept for every root (`banyan::tree_kind`).
  latency @0;    # short messages: built from RTT by the latency rule
  bandwidth @1;  # long messages: built from bandwidth by the bandwidth rule
}

struct Interval {
  # The vnodes [lo, hi); lo < hi.
  lo @0 :UInt32;
  hi @1 :UInt32;
}

struct TreeKey {
  # Names one tree: its root processor and its kind.
  root @0 :UInt32;
  kind @1 :TreeKind;
}

struct TreeInfo {
  # What a processor tells a prober about its own place in one tree.
  tree :group {
    root @0 :UInt32;
    kind @1 :TreeKind;
  }
  connected @2 :Bool;       # is the root or has a parent
  dist @3 :Int64;           # latency tree: sum of hop RTTs to the root, ns
  est @4 :Float64;          # bandwidth tree: estimated rate received from the parent, B/s
  children @5 :UInt32;      # current number of children
  path @6 :List(UInt32);    # ancestors, parent first, root last (loop prevention)
  reattaching @7 :Bool;     # connected, but an ancestor lost its parent: dist, est and
                            # path are those of the path it had
}

struct SubtreeEntry {
  # The vnodes in one processor's subtree of one tree (child -> parent).
  tree :group {
    root @0 :UInt32;
    kind @1 :TreeKind;
  }
  vnodes @2 :List(Interval);
}

struct RouteEntry {
  # Ownership of a set of vnodes at an epoch; the higher epoch wins.
  vnodes @0 :List(Interval);
  owner @1 :UInt32;
  epoch @2 :UInt64;
}

struct Member {
  # A processor of the computation.
  id @0 :UInt32;
  address @1 :Text;         # transport address "host:port"; empty (null) in emulation
  incarnation @2 :UInt64;   # 0 for founding members, random for each join: a notice about
                            # an old incarnation is never taken for news of a new one
}

# --- measurement -------------------------------------------------------------

struct Ping {
  # RTT probe, answered at once by a Pong with the same seq.
  seq @0 :UInt64;
}

struct Pong {
  seq @0 :UInt64;
}

struct PingReq {
  # Suspector -> another member: ping `target` for me (an indirect probe). The helper
  # pings the target and, if it answers, sends a PingAck with the same seq.
  seq @0 :UInt64;
  target @1 :UInt32;
}

struct PingAck {
  # Helper -> suspector, about the ping asked for by the PingReq `seq`: `target` answered
  # it (reached), or the helper could not connect to it (not reached).
  seq @0 :UInt64;
  target @1 :UInt32;
  reached @2 :Bool;
}

struct BwRequest {
  # Bandwidth probe: the prober asks the candidate for a BwReply of about 128 KiB.
  seq @0 :UInt64;
  viewDigest @1 :UInt64;  # digest of the prober's view (0: none); see BwReply.viewOmitted
  viewBuckets @2 :List(UInt32);
  # The digests of the prober's view cut into buckets by processor id (their count is
  # the list's length; empty: none); see BwReply.viewBuckets.
  bucketsFrom @3 :UInt16;
  # Where the candidate starts among the buckets that differ when not all of them fit
  # in its reply: the first at or after this one, then on in cyclic order; see
  # BwReply.viewBucketsLeft. Ignored unless less than viewBuckets' length.
}

struct BwReply {
  # The probe download: the candidate's place in every tree, padded so that the whole
  # frame is about 128 KiB and its transfer time measures the path's bandwidth.
  seq @0 :UInt64;
  trees @1 :List(TreeInfo);
  padding @2 :Data;         # `padding` zero bytes; only the length is meaningful
  # The candidate's view, merged by the prober (anti-entropy for membership news):
  members @3 :List(Member);     # members as the candidate knows them
  departed @4 :List(Member);    # tombstones: incarnations known to have left
  routes @5 :List(RouteEntry);  # the candidate's routing table
  viewOmitted @6 :Bool;
  # The candidate's view has the request's viewDigest: members, departed and routes are
  # left out, and the prober has nothing to merge.
  openRoots @7 :List(OpenRoot);
  # Trees on demand: the roots whose trees the candidate knows open or closed, merged by
  # the prober (anti-entropy for TreesOpen). Empty when every member is a root.
  viewBuckets @8 :List(UInt16);
  # The buckets of the request's viewBuckets whose digests differ from the candidate's:
  # members, departed and routes hold only the candidate's entries in these buckets.
  # Empty: the whole view (or none, with viewOmitted).
  viewBucketsLeft @9 :UInt16;
  # How many more of the request's buckets differ but were left out to keep the reply
  # within the candidate's byte budget: the prober's view is still stale in them. The
  # buckets carried are those that differ from the request's bucketsFrom on, in cyclic
  # order; the prober's next request starts after the last of them.
  # In a BwReply, each TreeInfo's path is cut to what the prober's loop check needs:
  # the prober's own id when it is on the candidate's path to the root, else empty.
}

# --- tree maintenance --------------------------------------------------------

struct AdoptRequest {
  # Child -> candidate: become my parent in these trees (with my subtree's vnodes).
  seq @0 :UInt64;
  trees @1 :List(SubtreeEntry);
}

struct AdoptVerdict {
  # The candidate's answer for one tree of an AdoptRequest.
  tree :group {
    root @0 :UInt32;
    kind @1 :TreeKind;
  }
  accepted @2 :Bool;
  info @3 :TreeInfo;        # the candidate's current place in the tree
  redirect @4 :UInt32 = 0xffffffff;
  # When refused by a processor that is leaving or has left: where to ask instead (its
  # own parent or step-parent in that tree; 0xffffffff: nowhere, measure).
}

struct AdoptReply {
  # Candidate -> child: which adoptions it accepted; seq echoes the request's.
  seq @0 :UInt64;
  verdicts @1 :List(AdoptVerdict);
}

struct Release {
  # Child -> old parent: I am no longer your child in these trees.
  trees @0 :List(TreeKey);
}

struct Orphan {
  # Parent -> child: I dropped you in these trees (a cycle was broken, or I leave);
  # find a parent.
  trees @0 :List(TreeKey);
  steps @1 :List(List(UInt32));
  # Empty, or one list per tree: the step-parents to ask, in order, before measuring.
  # A leaving parent ranks its children; each is sent to the children ranked before it
  # (the heir first), then to the leaver's own parent and the next ancestors.
}

struct TreeUpdate {
  # Parent -> child: my place in these trees changed (dist, est, children, path).
  trees @0 :List(TreeInfo);
}

struct SubtreeUpdate {
  # Child -> parent: the vnodes below me changed in these trees.
  trees @0 :List(SubtreeEntry);
}

# --- membership and vnode ownership ------------------------------------------

struct JoinRequest {
  # Newcomer -> any member: let me join; give me `wanted` (empty: a share of yours).
  newcomer @0 :Member;
  wanted @1 :List(Interval);
}

struct JoinAccept {
  # Contact -> newcomer: the members and the routing table as the contact knows them.
  members @0 :List(Member);
  routes @1 :List(RouteEntry);
}

struct MemberJoined {
  # Contact -> every member: a processor joined (new trees rooted at it now exist).
  who @0 :Member;
}

struct MemberLeft {
  # Leaver -> every member: I handed my vnodes over (see routes) and I am gone.
  who @0 :UInt32;
  routes @1 :List(RouteEntry);
  incarnation @2 :UInt64;   # of the leaver; receivers keep it as a tombstone
  crashed @3 :Bool;         # a crash notice (a member took `who` for crashed), or a relay
                            # of one; false in the leaver's own notice and relays of it
}

struct MergeOffer {
  # A member -> a processor it took for crashed (sent once per watch period for a while):
  # my side's members. The receiver, if it is a member of a side that does not know the
  # sender, compares the two sides (more members wins, then the lowest id) and, if it
  # loses, gives its vnodes up and joins the sender's side.
  members @0 :List(Member);
}

struct HandoverRequest {
  # Anyone -> an owner: hand these vnodes (those you own) over to processor `to`.
  vnodes @0 :List(Interval);
  to @1 :UInt32;
}

struct RoutingUpdate {
  # Owner -> every member (the new owner included): ownership moved.
  routes @0 :List(RouteEntry);
}

struct VnodeHandover {
  # Leaver -> recipient: take these vnodes; ownership moves at route.epoch. The leaver
  # waits for the VnodeHandoverAck before it announces MemberLeft, so vnodes are never
  # handed to a processor that is itself leaving.
  route @0 :RouteEntry;
}

struct VnodeHandoverAck {
  # Recipient -> leaver: taken, or refused (the recipient is leaving or not a member).
  epoch @0 :UInt64;         # echoes VnodeHandover.route.epoch
  accepted @1 :Bool;
}

# --- collectives (docs/collectives.md) ---------------------------------------

enum Collective {
  # The kind of a collective operation: which engine its frames belong to
  # (`banyan::collective_kind`). Carried by every frame (Frame.collective).
  none @0;                  # not a collective: the supervisor's messages
  broadcast @1;             # broadcast over the adaptive trees
  message @2;               # point-to-point message (through the broadcast engine)
  reduce @3;                # reduction over the adaptive trees
  staticBroadcast @4;       # broadcast over a fixed tree (a baseline)
  staticReduce @5;          # reduction over a fixed tree (a baseline)
  scatterAllgather @6;      # MPICH's scatter-allgather broadcast (a baseline)
  allreduce @7;             # allreduce over the adaptive trees (a reduction, then its
                            # result broadcast from the root vnode's owner)
  barrier @8;               # barrier over the adaptive trees (an allreduce of nothing)
  recursiveDoubling @9;     # MPICH's recursive-doubling allreduce (a baseline)
  ringAllreduce @10;        # MPICH's ring allreduce (a baseline)
  disseminationBarrier @11; # MPICH's dissemination barrier (a baseline)
  gather @12;               # per-vnode blocks to a root vnode, up the adaptive trees
  scatter @13;              # per-vnode blocks from a root vnode, down the adaptive trees
  allgather @14;            # every vnode's block to every vnode (gather, then broadcast)
  ringAllgather @15;        # MPICH's ring allgather (a baseline)
  alltoall @16;             # every vnode's block for every vnode (gather, then scatter)
  pairwiseAlltoall @17;     # MPICH's pairwise all-to-all (a baseline)
}

struct BcastSegment {
  # One segment of a broadcast, for the vnodes to reach through the receiver (the
  # header): it delivers to those it owns, passes those below a child to that child,
  # and sends the rest point-to-point to their owners.
  origin @0 :UInt32;        # the processor that started the broadcast
  seq @1 :UInt64;           # its number there (low 32 bits) and the origin's life (high 32):
                            # `collective_id::seq` and `collective_id::life`
  kind @2 :TreeKind;        # the tree followed: the one of `kind` rooted at `origin`
  vnodes @3 :List(Interval);
  direct @4 :Bool;          # point-to-point rather than down the tree
  hops @5 :UInt32;          # processors passed since the last hold (loop bound)
  stream @6 :UInt64;        # the sender's number for this (receiver, vnodes) stream
  index @7 :UInt32;         # this segment's place, 0 .. count-1
  count @8 :UInt32;         # segments in the message
  total @9 :UInt64;         # bytes in the whole message
  payload @10 :Data;        # this segment's bytes
  first @11 :Bool;          # the first frame the sender sends in this stream: a receiver
                            # takes a stream only from its first frame on, or not at all
}

enum ReduceKind {
  # `banyan::reduce_kind`.
  sum @0;
  min @1;
  max @2;
  product @3;
  user @4;                  # a user operator, by number (ReducePartial.userOp)
}

enum ElementType {
  # `banyan::element_type`: host byte order.
  int32 @0;
  int64 @1;
  float32 @2;
  float64 @3;
  bytes @4;                 # opaque: user operators only
}

struct ReducePartial {
  # A partial result of reduction number `op` covering the contributions of `vnodes`, on
  # its way to the owner of vnode `root`.
  op @0 :UInt64;
  root @1 :UInt32;
  kind @2 :ReduceKind;
  type @3 :ElementType;
  userOp @4 :UInt32;
  vnodes @5 :List(Interval);
  direct @6 :Bool;          # point-to-point to the root's owner rather than up the tree
  hops @7 :UInt32;          # processors passed since the last hold (loop bound)
  data @8 :Data;
  treeKind @9 :TreeKind;    # the trees followed: those rooted at the root's owner
  tentative @10 :Bool;      # sent again after a crash: counted only where nothing else covers it
}

struct ReduceRecord {
  # Vnodes whose reductions are accounted for up to and including number `done`.
  vnodes @0 :List(Interval);
  done @1 :UInt64;
}

struct ReduceHandoff {
  # Old owner -> new owner of vnodes (routed to the owner until it finds them): how far
  # their contributions to reductions went.
  records @0 :List(ReduceRecord);
  hops @1 :UInt32;
  completed @2 :List(ReduceDone); # reductions rooted at a vnode that moved, whose result completed
}

struct ReduceDone {
  # A reduction whose result completed at an owner of its root vnode that no longer owns
  # it: the root vnode's later owners drop the partials of it that still arrive.
  op @0 :UInt64;
  root @1 :UInt32;
  tentative @2 :List(Interval); # the vnodes the result took from tentative partials
}

struct BcastOffer {
  # A vnode's old owner -> its new owner: the sender holds broadcast (origin, seq),
  # assembled, for `vnodes`, which it no longer owns, and offers the responsibility for
  # them without the bytes. The receiver takes it if it holds the broadcast's payload.
  origin @0 :UInt32;
  seq @1 :UInt64;           # life and number, as in BcastSegment
  vnodes @2 :List(Interval);
  tag @3 :UInt64;           # the sender's number for this offer, echoed in the answer
  hops @4 :UInt32;          # offers taken and passed on since bytes were last sent
}

struct BcastAnswer {
  # The answer to a BcastOffer: accepted (the receiver is responsible now) or not (the
  # sender still is, and sends the message itself).
  origin @0 :UInt32;
  seq @1 :UInt64;           # life and number, as in BcastSegment
  tag @2 :UInt64;
  accepted @3 :Bool;
}

struct ReduceAck {
  # Parent -> child: what covers `vnodes` of reduction `op` (a partial the child sent up
  # the tree) has gone up from the parent. Until then the child keeps its partial, and
  # sends it again, tentatively, to the root's owner if its parent changes (a crash).
  op @0 :UInt64;
  vnodes @1 :List(Interval);
}

struct ReduceAsk {
  # Root vnode's owner -> the owner of `vnodes`, missing from reduction `op` after their
  # owner changed: an owner that adopted them from a crashed processor contributes them,
  # tentatively.
  op @0 :UInt64;
  vnodes @1 :List(Interval);
}

struct SummaryEntry {
  # One tree's subtree summary (core/subtree_summary.hpp): over every path from the
  # sender's parent down to a processor in the sender's subtree, the worst figures.
  tree :group {
    root @0 :UInt32;
    kind @1 :TreeKind;
  }
  halfRtt @2 :Int64;        # largest sum of hop RTT/2 on a path, ns (at least 0)
  perByte @3 :Float64;      # largest sum of 1/hop rate on a path, s per byte (finite, at least 0)
  bottleneck @4 :Float64;   # smallest hop rate on a path, B/s (above 0; infinite: no hop has figures)
  depth @5 :UInt32;         # largest number of hops on a path (at least 1)
  complete @6 :Bool;        # every hop below has figures and every child below has sent its own
}

struct TreeSummary {
  # Child -> parent: what a broadcast costs below the sender in these trees changed by
  # more than the hysteresis, or the sender has just attached. The root of a tree folds
  # its children's to predict its broadcasts (core/tree_choice.hpp). Sent in the banyan
  # rule variant only.
  trees @0 :List(SummaryEntry);
}

struct OpenRoot {
  # Trees on demand: whether `root`'s two trees are open, as of the root's `seq`-th
  # opening or closing of them in incarnation `incarnation` (a later seq wins).
  root @0 :UInt32;
  incarnation @1 :UInt64;
  seq @2 :UInt64;
  open @3 :Bool;
}

struct TreesOpen {
  # Root -> every member: its trees opened or closed (trees on demand). Contact ->
  # newcomer, right after JoinAccept: every root it knows open or closed.
  roots @0 :List(OpenRoot);
}

struct BcastAck {
  # A receiver of broadcast (origin, seq) -> its origin: `vnodes` have it (delivered
  # here now, or earlier: a repeat). The origin keeps the broadcast until every vnode is
  # covered, and sends the uncovered ones again after a crash.
  origin @0 :UInt32;
  seq @1 :UInt64;           # life and number, as in BcastSegment
  vnodes @2 :List(Interval);
}

# --- connection handshake ------------------------------------------------------
#
# Challenge-response on every fresh TCP connection, before any Frame (docs/transport.md,
# "Handshake"): the initiator sends a Hello; the acceptor answers with a HelloAck holding
# its nonce and its proof, a MAC under the cluster's shared secret of both nonces, both
# processor ids, both sessions and the refusal; the initiator checks it and sends its own
# HelloAck (its proof), then its Frames. A wrong version or mode is answered without a
# proof; a wrong proof closes the connection. An acceptor may refuse an initiator that
# claims a processor id another process holds (`refusal`).
#
# These are deliberately not members of `Frame.body`: they precede the point where a
# connection is known to speak this version and to belong to the cluster, they have no
# counterpart in `banyan::wire::message` (the emulated network does not authenticate),
# and keeping them out means a Frame can never be mistaken for a handshake step. Each
# is sent as its own root message in the same length-prefixed framing; the transport
# knows from the connection's state which root type to expect.

struct Hello {
  # Initiator -> acceptor, the first message on every connection (docs/transport.md):
  # Hello, then the acceptor's HelloAck (with its nonce and proof), then the initiator's
  # HelloAck (proof only), then the initiator's Frames.
  version @0 :UInt16;       # the sender's protocol version (Frame.version)
  procId @1 :UInt32;        # the sender's processor id
  nonce @2 :Data;           # fresh random challenge, 32 bytes
  listenPort @3 :UInt16;    # where the sender accepts connections; 0: nowhere
  plaintext @4 :Bool;       # the sender sends Frames unencrypted (docs/transport.md, "Security")
  session @5 :UInt64;       # the sending process, random per transport: tells two processes
                            # that claim one procId apart (docs/transport.md, "One process per id")
}

enum Refusal {
  # Why an acceptor refuses a connection whose initiator holds the secret.
  none @0;
  idInUse @1;               # another process runs under the initiator's procId
}

struct HelloAck {
  # Acceptor -> initiator: version, procId, nonce and proof. Initiator -> acceptor:
  # version, procId and proof (nonce null). A version-mismatch answer has neither.
  # proof = HMAC-SHA256(secret, schema::proof_transcript(...)): both nonces, both ids,
  # the initiator's listenPort, both sessions, the refusal and the prover's role; the
  # secret never travels.
  version @0 :UInt16;
  procId @1 :UInt32;
  proof @2 :Data;           # 32 bytes, or null
  nonce @3 :Data;           # acceptor's fresh random challenge, 32 bytes, or null
  plaintext @4 :Bool;       # the sender's mode; a mode-mismatch answer has no nonce or proof
  session @5 :UInt64;       # acceptor -> initiator: the acceptor's process (see Hello.session)
  refusal @6 :Refusal;      # acceptor -> initiator: none, or why the connection is refused.
                            # In the first HelloAck (the Hello claims the acceptor's own id),
                            # covered by the acceptor's proof; or as a further HelloAck after
                            # the initiator's proof (procId, proof with role 'R', session,
                            # refusal; no nonce), after which the acceptor closes
}

# --- the frame ---------------------------------------------------------------

struct Frame {
  # The root of every message on the wire. Framing: a 4-byte little-endian length N,
  # then N bytes holding this struct as an unpacked Cap'n Proto flat-array message.
  version @0 :UInt16;       # protocol version, 1; a decoder rejects any other
  from @1 :UInt32;          # sending processor
  to @2 :UInt32;            # receiving processor
  body :union {
    ping @3 :Ping;
    pong @4 :Pong;
    bwRequest @5 :BwRequest;
    bwReply @6 :BwReply;
    adoptRequest @7 :AdoptRequest;
    adoptReply @8 :AdoptReply;
    release @9 :Release;
    orphan @10 :Orphan;
    treeUpdate @11 :TreeUpdate;
    subtreeUpdate @12 :SubtreeUpdate;
    joinRequest @13 :JoinRequest;
    joinAccept @14 :JoinAccept;
    memberJoined @15 :MemberJoined;
    memberLeft @16 :MemberLeft;
    handoverRequest @17 :HandoverRequest;
    routingUpdate @18 :RoutingUpdate;
    vnodeHandover @19 :VnodeHandover;
    vnodeHandoverAck @20 :VnodeHandoverAck;
    bcastSegment @21 :BcastSegment;
    reducePartial @22 :ReducePartial;
    reduceHandoff @23 :ReduceHandoff;
    bcastOffer @25 :BcastOffer;     # appended after `returned` (@24)
    bcastAnswer @26 :BcastAnswer;
    bcastAck @28 :BcastAck;
    pingReq @29 :PingReq;
    pingAck @30 :PingAck;
    mergeOffer @31 :MergeOffer;
    reduceAck @32 :ReduceAck;
    reduceAsk @33 :ReduceAsk;
    treeSummary @34 :TreeSummary;
    treesOpen @35 :TreesOpen;
  }
  returned @24 :Bool;
  # A frame handed back to the processor that sent it (`from` is the processor that
  # gave it back, `to` the original sender): its receiver's collective engine did not
  # take it. The receiver passes it to its engine as undeliverable, never as a message.
  # A Bool in the data section's free bits: frames are exactly as long as without it.
  collective @27 :Collective;
  # The kind of operation the body belongs to: `none` for the supervisor's messages, the
  # engine's kind for a collective's (BcastSegment, BcastOffer, BcastAnswer, BcastAck,
  # ReducePartial, ReduceHandoff, ReduceAck, ReduceAsk); a supervisor message of another kind is malformed. A
  # receiver hands the frame to the engine of that kind (none there: it hands it back).
  # In the data section's free bits, like `returned`: frames are exactly as long as
  # without it.
}

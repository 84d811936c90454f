#pragma once
// Internal: what the codec's parts share (codec_pieces.cpp: the structs messages are made
// of; codec_tree.cpp: measurement and tree maintenance; codec_membership.cpp: membership
// and vnode ownership; codec_collectives.cpp: the collectives; codec.cpp: frames and the
// stream decoder). Every `write` initialises a member of Frame.body (or fills a struct),
// every `read` converts one back; decoding failures of our own are thrown as `rejection`
// and caught where a frame is decoded (codec.cpp).

#include <cassert>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <capnp/message.h>
#include <capnp/orphan.h>

#include "banyan.capnp.h"
#include "banyan/core/messages.hpp"

namespace banyan::schema::codec_internal {

namespace cs = banyan::capnp_schema;
using body_builder = cs::Frame::Body::Builder;
using body_reader = cs::Frame::Body::Reader;

// Cap'n Proto's own limit on list lengths (29 bits).
inline constexpr std::size_t max_list_size = (std::size_t{1} << 29) - 1;

// Read limits. A valid frame is traversed once (every getter below is called once per
// object), so twice its size plus slack is plenty and still stops amplification through
// pointers that share targets. The deepest valid nesting is
// Frame > AdoptReply > verdicts > AdoptVerdict > info > path: 6.
inline constexpr std::uint64_t traversal_factor = 2;
inline constexpr std::uint64_t traversal_slack_words = 64;
inline constexpr int nesting_limit = 16;

// Keep the decoder's buffer after a frame up to this size (a bandwidth probe fits).
inline constexpr std::size_t retained_buffer_words = (std::size_t{1} << 20) / sizeof(std::uint64_t);

inline unsigned list_size(std::size_t n) {
  assert(n <= max_list_size && "message too large to encode");
  return static_cast<unsigned>(n);
}

// Decoding failures found by our own checks (as opposed to Cap'n Proto's, which throw
// kj::Exception). Both are thrown only inside this file and caught in decode_words().
struct rejection {
  std::string what;
};
[[noreturn]] inline void reject(std::string what) { throw rejection{std::move(what)}; }

// --- shared pieces (codec_pieces.cpp) ----------------------------------------------

cs::TreeKind to_capnp(tree_kind k);
tree_kind from_capnp(cs::TreeKind k);
cs::Collective to_capnp(collective_kind k);
collective_kind from_capnp(cs::Collective k);

// TreeKey, and the `tree` groups of TreeInfo, SubtreeEntry and AdoptVerdict.
template <class TreeBuilder>
void write_tree(tree_key k, TreeBuilder b) {
  b.setRoot(k.root);
  b.setKind(to_capnp(k.kind));
}

// Empty sets, lists and texts stay null pointers: see the schema's conventions.
template <class Init>
void write_vnodes(const vnode_set& v, Init&& init) {
  if (v.empty())
    return;
  const auto& runs = v.intervals();
  auto out = init(list_size(runs.size()));
  for (unsigned i = 0; i < out.size(); ++i) {
    out[i].setLo(runs[i].lo);
    out[i].setHi(runs[i].hi);
  }
}

void write(const wire::tree_info& t, cs::TreeInfo::Builder b);
void write(const wire::subtree_entry& s, cs::SubtreeEntry::Builder b);
void write(const wire::summary_entry& s, cs::SummaryEntry::Builder b);
void write(const wire::route_entry& r, cs::RouteEntry::Builder b);
void write(const wire::member& m, cs::Member::Builder b);
void write(const wire::adopt_verdict& v, cs::AdoptVerdict::Builder b);
void write(const wire::reduce_record& r, cs::ReduceRecord::Builder b);
void write(const wire::reduce_done& d, cs::ReduceDone::Builder b);
void write(tree_key k, cs::TreeKey::Builder b);
void write(const wire::open_root& o, cs::OpenRoot::Builder b);

template <class T, class Init>
void write_list(const std::vector<T>& xs, Init&& init) {
  if (xs.empty())
    return;
  auto out = init(list_size(xs.size()));
  for (unsigned i = 0; i < out.size(); ++i)
    write(xs[i], out[i]);
}

template <class TreeReader>
tree_key read_tree(TreeReader r) {
  return tree_key{r.getRoot(), from_capnp(r.getKind())};
}

vnode_set read_vnodes(capnp::List<cs::Interval>::Reader xs);
wire::tree_info read(cs::TreeInfo::Reader r);
wire::subtree_entry read(cs::SubtreeEntry::Reader r);
wire::summary_entry read(cs::SummaryEntry::Reader r);
wire::route_entry read(cs::RouteEntry::Reader r);
wire::member read(cs::Member::Reader r);
wire::adopt_verdict read(cs::AdoptVerdict::Reader r);
tree_key read(cs::TreeKey::Reader r);
wire::reduce_record read(cs::ReduceRecord::Reader r);
wire::open_root read(cs::OpenRoot::Reader r);
wire::reduce_done read(cs::ReduceDone::Reader r);

template <class ListReader>
auto read_list(ListReader xs) {
  std::vector<decltype(read(xs[0]))> out;
  out.reserve(xs.size());
  for (auto x : xs)
    out.push_back(read(x));
  return out;
}


// Empty data stays a null pointer, like empty lists.
template <class Init>
void write_data(const shared_bytes& bytes, Init&& init) {
  if (bytes.empty())
    return;
  auto out = init(list_size(bytes.size()));
  std::memcpy(out.begin(), bytes.data(), bytes.size());
}

// `encode_frame`: the one payload to reference instead of copying, while it builds.
struct external_payload {
  const shared_bytes* bytes = nullptr;
  capnp::Orphanage orphanage;
  bool used = false;
};
extern thread_local external_payload* t_external;

/// An operation's life and number as the frame's one 64-bit `seq` (life in the high 32
/// bits, docs/wire-protocol.md), and back.
std::uint64_t wire_seq(const wire::collective_id& id);
wire::collective_id collective_id_of(proc_id origin, std::uint64_t seq, collective_kind kind);

// A Data field that `encode_frame` may reference in place (see `external_payload`).
template <class Init, class Adopt>
void write_data(const shared_bytes& bytes, Init&& init, Adopt&& adopt) {
  if (auto* x = t_external; x != nullptr && !x->used && x->bytes == &bytes) {
    x->used = true;
    adopt(x->orphanage.referenceExternalData(capnp::Data::Reader(bytes.data(), bytes.size())));
    return;
  }
  write_data(bytes, std::forward<Init>(init));
}

// The buffer of the frame being decoded when the decoded envelope may keep it (a large
// frame's own buffer, see frame_decoder): data inside it is sliced, not copied.
extern thread_local const shared_bytes* backing;

// --- messages: each `write` initialises its member of Frame.body ----------------------

// codec_tree.cpp
void write(const wire::ping& m, body_builder b);
void write(const wire::pong& m, body_builder b);
void write(const wire::ping_req& m, body_builder b);
void write(const wire::ping_ack& m, body_builder b);
void write(const wire::merge_offer& m, body_builder b);
void write(const wire::bw_request& m, body_builder b);
void write(const wire::bw_reply& m, body_builder b);
void write(const wire::adopt_request& m, body_builder b);
void write(const wire::adopt_reply& m, body_builder b);
void write(const wire::release& m, body_builder b);
void write(const wire::orphan& m, body_builder b);
void write(const wire::tree_update& m, body_builder b);
void write(const wire::subtree_update& m, body_builder b);
void write(const wire::tree_summary& m, body_builder b);
wire::ping read(cs::Ping::Reader r);
wire::pong read(cs::Pong::Reader r);
wire::ping_req read(cs::PingReq::Reader r);
wire::ping_ack read(cs::PingAck::Reader r);
wire::merge_offer read(cs::MergeOffer::Reader r);
wire::bw_request read(cs::BwRequest::Reader r);
wire::bw_reply read(cs::BwReply::Reader r);
wire::adopt_request read(cs::AdoptRequest::Reader r);
wire::adopt_reply read(cs::AdoptReply::Reader r);
wire::release read(cs::Release::Reader r);
wire::orphan read(cs::Orphan::Reader r);
wire::tree_update read(cs::TreeUpdate::Reader r);
wire::subtree_update read(cs::SubtreeUpdate::Reader r);
wire::tree_summary read(cs::TreeSummary::Reader r);

// codec_membership.cpp
void write(const wire::join_request& m, body_builder b);
void write(const wire::join_accept& m, body_builder b);
void write(const wire::member_joined& m, body_builder b);
void write(const wire::member_left& m, body_builder b);
void write(const wire::handover_request& m, body_builder b);
void write(const wire::routing_update& m, body_builder b);
void write(const wire::vnode_handover& m, body_builder b);
void write(const wire::vnode_handover_ack& m, body_builder b);
wire::join_request read(cs::JoinRequest::Reader r);
wire::join_accept read(cs::JoinAccept::Reader r);
wire::member_joined read(cs::MemberJoined::Reader r);
wire::member_left read(cs::MemberLeft::Reader r);
wire::handover_request read(cs::HandoverRequest::Reader r);
wire::routing_update read(cs::RoutingUpdate::Reader r);
wire::vnode_handover read(cs::VnodeHandover::Reader r);
wire::vnode_handover_ack read(cs::VnodeHandoverAck::Reader r);
void write(const wire::trees_open& m, body_builder b);
wire::trees_open read(cs::TreesOpen::Reader r);

// codec_collectives.cpp
void write(const wire::bcast_segment& m, body_builder b);
void write(const wire::reduce_partial& m, body_builder b);
void write(const wire::reduce_handoff& m, body_builder b);
void write(const wire::bcast_offer& m, body_builder b);
void write(const wire::bcast_answer& m, body_builder b);
void write(const wire::bcast_ack& m, body_builder b);
void write(const wire::reduce_ack& m, body_builder b);
void write(const wire::reduce_ask& m, body_builder b);
wire::bcast_segment read(cs::BcastSegment::Reader r);
wire::reduce_partial read(cs::ReducePartial::Reader r);
wire::reduce_handoff read(cs::ReduceHandoff::Reader r);
wire::bcast_offer read(cs::BcastOffer::Reader r);
wire::bcast_answer read(cs::BcastAnswer::Reader r);
wire::bcast_ack read(cs::BcastAck::Reader r);
wire::reduce_ack read(cs::ReduceAck::Reader r);
wire::reduce_ask read(cs::ReduceAsk::Reader r);

} // namespace banyan::schema::codec_internal

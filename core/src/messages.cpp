#include "banyan/core/messages.hpp"

#include <array>
#include <type_traits>

namespace banyan::wire {

namespace {

// --- names ------------------------------------------------------------------

// In the order of the alternatives of `message`.
constexpr std::array<const char*, 31> message_names = {
    "ping",          "pong",           "bw_request",       "bw_reply",
    "adopt_request", "adopt_reply",    "release",          "orphan",
    "tree_update",   "subtree_update", "join_request",     "join_accept",
    "member_joined", "member_left",    "handover_request", "routing_update",
    "vnode_handover", "vnode_handover_ack", "bcast_segment", "reduce_partial",
    "reduce_handoff", "bcast_offer", "bcast_answer", "bcast_ack", "ping_req", "ping_ack",
    "merge_offer", "reduce_ack", "reduce_ask", "tree_summary", "trees_open"};
static_assert(message_names.size() == std::variant_size_v<message>,
              "a message type was added: name it here and model its size below");

// --- size model ----------------------------------------------------------------
//
// An unpacked, single-segment Cap'n Proto message, as `banyan::schema::encode` writes it:
//
//   +--------+-------------+--------------+--------------------------------------+
//   | prefix | segment     | root pointer | Frame struct, then every object it     |
//   | 4 B    | table 8 B   | 1 word       | points to, depth first, word-aligned   |
//   +--------+-------------+--------------+--------------------------------------+
//
// A struct costs its data words plus its pointer words, wherever it sits; what its
// pointers point to is counted separately ("content"). A struct list costs a tag word
// plus its elements; a primitive list or Data its bytes rounded up to words; Text its
// bytes plus a NUL, rounded up. The encoder leaves empty lists, texts and data as null
// pointers, so they cost nothing beyond the pointer.
//
// The shapes below are those the schema compiler gives the structs of
// schema/banyan.capnp (see `capnp compile -oc++` output, CAPNP_DECLARE_STRUCT_HEADER).
// They must change with the schema; the schema codec test compares this model with the
// real encoding for every message type and fails on any difference.

constexpr std::size_t word_bytes = 8;
constexpr std::size_t prefix_bytes = 4;
constexpr std::size_t segment_table_bytes = 8; // one segment: count-1 and size, 4 B each
constexpr std::size_t root_pointer_words = 1;

struct shape {
  std::size_t data_words;
  std::size_t pointers;
  constexpr std::size_t words() const { return data_words + pointers; }
};

constexpr shape frame_shape{2, 1};
constexpr shape interval_shape{1, 0};
constexpr shape tree_key_shape{1, 0};
constexpr shape tree_info_shape{4, 1};
constexpr shape subtree_entry_shape{1, 1};
constexpr shape route_entry_shape{2, 1};
constexpr shape member_shape{2, 1};
constexpr shape ping_shape{1, 0};
constexpr shape pong_shape{1, 0};
constexpr shape bw_request_shape{3, 1};
constexpr shape bw_reply_shape{2, 7};
constexpr shape adopt_request_shape{1, 1};
constexpr shape adopt_verdict_shape{2, 1};
constexpr shape adopt_reply_shape{1, 1};
constexpr shape release_shape{0, 1};
constexpr shape orphan_shape{0, 2};
constexpr shape tree_update_shape{0, 1};
constexpr shape subtree_update_shape{0, 1};
constexpr shape join_request_shape{0, 2};
constexpr shape join_accept_shape{0, 2};
constexpr shape member_joined_shape{0, 1};
constexpr shape member_left_shape{2, 1};
constexpr shape handover_request_shape{1, 1};
constexpr shape routing_update_shape{0, 1};
constexpr shape vnode_handover_shape{0, 1};
constexpr shape vnode_handover_ack_shape{2, 0};
constexpr shape bcast_segment_shape{6, 2};
constexpr shape reduce_partial_shape{4, 2};
constexpr shape reduce_record_shape{1, 1};
constexpr shape reduce_handoff_shape{1, 2};
constexpr shape reduce_done_shape{2, 1};
constexpr shape bcast_offer_shape{3, 1};
constexpr shape bcast_answer_shape{3, 0};
constexpr shape bcast_ack_shape{2, 1};
constexpr shape ping_req_shape{2, 0};
constexpr shape ping_ack_shape{2, 0};
constexpr shape merge_offer_shape{0, 1};
constexpr shape reduce_ack_shape{1, 1};
constexpr shape reduce_ask_shape{1, 1};
constexpr shape tree_summary_shape{0, 1};
constexpr shape summary_entry_shape{5, 0};
constexpr shape open_root_shape{3, 0};
constexpr shape trees_open_shape{0, 1};

constexpr std::size_t bytes_to_words(std::size_t bytes) {
  return (bytes + word_bytes - 1) / word_bytes;
}

// Lists: 0 when empty (null pointer).
constexpr std::size_t struct_list_words(std::size_t n, shape s) {
  return n == 0 ? 0 : 1 + n * s.words();
}
constexpr std::size_t u32_list_words(std::size_t n) { return bytes_to_words(4 * n); }
std::size_t text_words(const std::string& s) {
  return s.empty() ? 0 : bytes_to_words(s.size() + 1);
}
std::size_t vnodes_words(const vnode_set& v) {
  return struct_list_words(v.interval_count(), interval_shape);
}

// Content: the words an object's pointers lead to, excluding the object itself.
std::size_t content_words(const tree_info& t) { return u32_list_words(t.path.size()); }
std::size_t content_words(const subtree_entry& s) { return vnodes_words(s.vnodes); }
std::size_t content_words(const route_entry& r) { return vnodes_words(r.vnodes); }
std::size_t content_words(const member& m) { return text_words(m.address); }
std::size_t content_words(const adopt_verdict& v) {
  return tree_info_shape.words() + content_words(v.info);
}
std::size_t content_words(const tree_key&) { return 0; }
std::size_t content_words(const reduce_record& r) { return vnodes_words(r.vnodes); }
std::size_t content_words(const reduce_done& d) { return vnodes_words(d.tentative); }
std::size_t content_words(const summary_entry&) { return 0; }
std::size_t content_words(const open_root&) { return 0; }

template <class T>
std::size_t list_words(const std::vector<T>& xs, shape s) {
  if (xs.empty())
    return 0;
  std::size_t words = struct_list_words(xs.size(), s);
  for (const auto& x : xs)
    words += content_words(x);
  return words;
}

// Message bodies: the body struct plus its content.
std::size_t body_words(const ping&) { return ping_shape.words(); }
std::size_t body_words(const pong&) { return pong_shape.words(); }
std::size_t body_words(const bw_request& m) {
  return bw_request_shape.words() + u32_list_words(m.buckets.size());
}
std::size_t body_words(const bw_reply& m) {
  return bw_reply_shape.words() + list_words(m.trees, tree_info_shape) +
         bytes_to_words(m.padding) + list_words(m.members, member_shape) +
         list_words(m.departed, member_shape) + list_words(m.routes, route_entry_shape) +
         list_words(m.open_roots, open_root_shape) + bytes_to_words(2 * m.view_buckets.size());
}
std::size_t body_words(const adopt_request& m) {
  return adopt_request_shape.words() + list_words(m.trees, subtree_entry_shape);
}
std::size_t body_words(const adopt_reply& m) {
  return adopt_reply_shape.words() + list_words(m.verdicts, adopt_verdict_shape);
}
std::size_t body_words(const release& m) {
  return release_shape.words() + list_words(m.trees, tree_key_shape);
}
std::size_t body_words(const orphan& m) {
  std::size_t steps = m.steps.empty() ? 0 : m.steps.size(); // a pointer per tree
  for (auto& s : m.steps)
    steps += u32_list_words(s.size());
  return orphan_shape.words() + list_words(m.trees, tree_key_shape) + steps;
}
std::size_t body_words(const tree_update& m) {
  return tree_update_shape.words() + list_words(m.trees, tree_info_shape);
}
std::size_t body_words(const subtree_update& m) {
  return subtree_update_shape.words() + list_words(m.trees, subtree_entry_shape);
}
std::size_t body_words(const join_request& m) {
  return join_request_shape.words() + member_shape.words() + content_words(m.newcomer) +
         vnodes_words(m.wanted);
}
std::size_t body_words(const join_accept& m) {
  return join_accept_shape.words() + list_words(m.members, member_shape) +
         list_words(m.routes, route_entry_shape);
}
std::size_t body_words(const member_joined& m) {
  return member_joined_shape.words() + member_shape.words() + content_words(m.who);
}
std::size_t body_words(const member_left& m) {
  return member_left_shape.words() + list_words(m.routes, route_entry_shape);
}
std::size_t body_words(const handover_request& m) {
  return handover_request_shape.words() + vnodes_words(m.vnodes);
}
std::size_t body_words(const routing_update& m) {
  return routing_update_shape.words() + list_words(m.routes, route_entry_shape);
}

std::size_t body_words(const vnode_handover& m) {
  return vnode_handover_shape.words() + route_entry_shape.words() + content_words(m.route);
}
std::size_t body_words(const vnode_handover_ack&) { return vnode_handover_ack_shape.words(); }

// Data is its bytes rounded up to words (null, 0 words, when empty).
std::size_t body_words(const bcast_segment& m) {
  return bcast_segment_shape.words() + vnodes_words(m.vnodes) + bytes_to_words(m.payload.size());
}
std::size_t body_words(const reduce_partial& m) {
  return reduce_partial_shape.words() + vnodes_words(m.vnodes) + bytes_to_words(m.data.size());
}
std::size_t body_words(const reduce_handoff& m) {
  return reduce_handoff_shape.words() + list_words(m.records, reduce_record_shape) +
         list_words(m.completed, reduce_done_shape);
}
std::size_t body_words(const bcast_offer& m) {
  return bcast_offer_shape.words() + vnodes_words(m.vnodes);
}
std::size_t body_words(const bcast_answer&) { return bcast_answer_shape.words(); }
std::size_t body_words(const bcast_ack& m) {
  return bcast_ack_shape.words() + vnodes_words(m.vnodes);
}
std::size_t body_words(const ping_req&) { return ping_req_shape.words(); }
std::size_t body_words(const ping_ack&) { return ping_ack_shape.words(); }
std::size_t body_words(const merge_offer& m) {
  return merge_offer_shape.words() + list_words(m.members, member_shape);
}
std::size_t body_words(const reduce_ack& m) {
  return reduce_ack_shape.words() + vnodes_words(m.vnodes);
}
std::size_t body_words(const reduce_ask& m) {
  return reduce_ask_shape.words() + vnodes_words(m.vnodes);
}
std::size_t body_words(const tree_summary& m) {
  return tree_summary_shape.words() + list_words(m.trees, summary_entry_shape);
}
std::size_t body_words(const trees_open& m) {
  return trees_open_shape.words() + list_words(m.roots, open_root_shape);
}

} // namespace

const char* name_of(const message& m) { return message_names[m.index()]; }

std::string to_string(const collective_id& id) {
  return std::to_string(id.origin) + ":" + std::to_string(id.seq);
}

collective_kind kind_of(const message& m) {
  if (auto* s = std::get_if<bcast_segment>(&m))
    return s->op.kind;
  if (auto* p = std::get_if<reduce_partial>(&m))
    return p->collective;
  if (auto* h = std::get_if<reduce_handoff>(&m))
    return h->collective;
  if (auto* o = std::get_if<bcast_offer>(&m))
    return o->op.kind;
  if (auto* a = std::get_if<bcast_answer>(&m))
    return a->op.kind;
  if (auto* k = std::get_if<bcast_ack>(&m))
    return k->op.kind;
  if (auto* ra = std::get_if<reduce_ack>(&m))
    return ra->collective;
  if (auto* rq = std::get_if<reduce_ask>(&m))
    return rq->collective;
  return collective_kind::none;
}

void set_kind(message& m, collective_kind k) {
  if (auto* s = std::get_if<bcast_segment>(&m))
    s->op.kind = k;
  else if (auto* p = std::get_if<reduce_partial>(&m))
    p->collective = k;
  else if (auto* h = std::get_if<reduce_handoff>(&m))
    h->collective = k;
  else if (auto* o = std::get_if<bcast_offer>(&m))
    o->op.kind = k;
  else if (auto* a = std::get_if<bcast_answer>(&m))
    a->op.kind = k;
  else if (auto* c = std::get_if<bcast_ack>(&m))
    c->op.kind = k;
  else if (auto* ra = std::get_if<reduce_ack>(&m))
    ra->collective = k;
  else if (auto* rq = std::get_if<reduce_ask>(&m))
    rq->collective = k;
}

namespace {
std::size_t frame_bytes(std::size_t body) {
  const std::size_t words = root_pointer_words + frame_shape.words() + body;
  return prefix_bytes + segment_table_bytes + words * word_bytes;
}
} // namespace

std::size_t wire_size(const message& m) {
  return frame_bytes(std::visit([](const auto& x) { return body_words(x); }, m));
}

std::size_t wire_size(const bw_reply& m) {
  return frame_bytes(body_words(m));
}

} // namespace banyan::wire

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "banyan.capnp.h"
#include "banyan/schema/codec.hpp"
#include "message_gen.hpp"

namespace bs = banyan::schema;
namespace cs = banyan::capnp_schema;
namespace wire = banyan::wire;
using banyan::errc;
using banyan::proc_id;
using banyan::tree_key;
using banyan::tree_kind;
using banyan::vnode_set;
using bytes = std::vector<std::uint8_t>;

// For Boost.Test's messages.
namespace banyan {
std::ostream& operator<<(std::ostream& os, errc e) { return os << to_string(e); }
} // namespace banyan

namespace {

constexpr std::size_t message_type_count = std::variant_size_v<wire::message>;

using banyan::test::gen;

std::uint32_t prefix_of(const bytes& frame) {
  return static_cast<std::uint32_t>(frame[0]) | static_cast<std::uint32_t>(frame[1]) << 8 |
         static_cast<std::uint32_t>(frame[2]) << 16 | static_cast<std::uint32_t>(frame[3]) << 24;
}

banyan::expected<wire::envelope> decode_frame(const bytes& frame) {
  return bs::decode_body(frame.data() + 4, frame.size() - 4);
}

std::string describe(const banyan::expected<wire::envelope>& d) {
  return d ? std::string("decoded ") + wire::name_of(d->body) : d.err().to_string();
}

bool same(const wire::envelope& a, const wire::envelope& b) {
  return a.from == b.from && a.to == b.to && a.body == b.body;
}

// A frame body written with Cap'n Proto directly, for inputs our encoder never makes.
template <class Fill>
bytes raw_frame(Fill fill) {
  capnp::MallocMessageBuilder builder;
  auto frame = builder.initRoot<cs::Frame>();
  frame.setVersion(bs::protocol_version);
  frame.setFrom(1);
  frame.setTo(2);
  fill(frame);
  auto words = capnp::messageToFlatArray(builder);
  auto chars = words.asBytes();
  return bytes(chars.begin(), chars.end());
}

// Word `i` of a single-segment frame (prefix and segment table skipped).
std::size_t word_offset(std::size_t i) { return 4 + 8 + 8 * i; }
std::uint64_t get_word(const bytes& f, std::size_t i) {
  std::uint64_t w;
  std::memcpy(&w, f.data() + word_offset(i), 8);
  return w;
}
void set_word(bytes& f, std::size_t i, std::uint64_t w) {
  std::memcpy(f.data() + word_offset(i), &w, 8);
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trip_every_message_type) {
  for (std::size_t type = 0; type < message_type_count; ++type) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      gen g(seed * 1000 + type);
      const auto e = g.envelope(type);
      BOOST_TEST_CONTEXT("type " << wire::name_of(e.body) << ", seed " << seed) {
        BOOST_TEST(e.body.index() == type);
        const bytes frame = bs::encode(e);
        BOOST_REQUIRE_GE(frame.size(), 4u);
        BOOST_TEST(prefix_of(frame) == frame.size() - 4);
        const auto d = decode_frame(frame);
        BOOST_REQUIRE_MESSAGE(d.has_value(), describe(d));
        BOOST_TEST(same(*d, e));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(round_trip_keeps_extreme_values) {
  wire::tree_info t;
  t.tree = {banyan::no_proc, tree_kind::bandwidth};
  t.connected = true;
  t.dist = banyan::duration(std::numeric_limits<std::int64_t>::min());
  t.est = banyan::infinite_rate;
  t.children = std::numeric_limits<std::uint32_t>::max();
  t.path = {0, banyan::no_proc};
  const wire::envelope e{banyan::no_proc, 0,
                         wire::adopt_reply{~0ull, {{t.tree, true, t}, {tree_key{0, tree_kind::latency}, false, {}}}}};
  const auto d = decode_frame(bs::encode(e));
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(same(*d, e));

  const wire::envelope top{1, 2, wire::handover_request{vnode_set::range(0, banyan::no_proc), 3}};
  const auto d2 = decode_frame(bs::encode(top));
  BOOST_REQUIRE(d2.has_value());
  BOOST_TEST(same(*d2, top));
}

BOOST_AUTO_TEST_CASE(names) {
  BOOST_TEST(std::string(wire::name_of(wire::ping{})) == "ping");
  BOOST_TEST(std::string(wire::name_of(wire::bw_reply{})) == "bw_reply");
  BOOST_TEST(std::string(wire::name_of(wire::routing_update{})) == "routing_update");
  gen g(7);
  std::vector<std::string> seen;
  for (std::size_t type = 0; type < message_type_count; ++type)
    seen.push_back(wire::name_of(g.message(type)));
  std::sort(seen.begin(), seen.end());
  BOOST_TEST((std::adjacent_find(seen.begin(), seen.end()) == seen.end())); // all distinct
}

// The model is exact, so the tolerance is 0 bytes.
BOOST_AUTO_TEST_CASE(wire_size_equals_encoding_for_every_type) {
  for (std::size_t type = 0; type < message_type_count; ++type) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      gen g(seed * 7919 + type);
      const auto e = g.envelope(type);
      BOOST_TEST_CONTEXT("type " << wire::name_of(e.body) << ", seed " << seed) {
        const std::size_t actual = bs::encode(e).size();
        BOOST_TEST(wire::wire_size(e.body) == actual);
        BOOST_TEST(bs::encoded_size(e) == actual);
      }
    }
  }
}

// Edges of the rounding rules: empty lists, text lengths around a word, odd lists.
BOOST_AUTO_TEST_CASE(wire_size_equals_encoding_at_rounding_edges) {
  std::vector<wire::message> ms;
  for (std::size_t len : {0, 1, 6, 7, 8, 9, 15, 16, 17})
    ms.push_back(wire::member_joined{{3, std::string(len, 'a')}});
  for (std::size_t len : {0, 1, 2, 3, 4, 5}) {
    wire::tree_info t;
    t.path.assign(len, 9);
    ms.push_back(wire::tree_update{{t, t}});
  }
  for (std::uint32_t padding : {0u, 1u, 7u, 8u, 9u, 4096u})
    ms.push_back(wire::bw_reply{1, {}, padding, {}, {}, {}});
  ms.push_back(wire::join_accept{});
  ms.push_back(wire::join_accept{{{1, ""}, {2, "x"}}, {{vnode_set{}, 1, 1}}});
  ms.push_back(wire::join_request{{banyan::no_proc, ""}, {}});
  ms.push_back(wire::release{});
  ms.push_back(wire::subtree_update{{{tree_key{}, {}}, {tree_key{}, {1, 2, 3, 10}}}});
  for (std::size_t len : {0, 1, 7, 8, 9, 16, 65536}) {
    wire::bcast_segment seg;
    seg.payload = banyan::shared_bytes(bytes(len, 0xab));
    ms.push_back(seg);
    wire::reduce_partial part;
    part.data = seg.payload;
    ms.push_back(part);
  }
  ms.push_back(wire::reduce_handoff{});
  ms.push_back(wire::reduce_handoff{banyan::collective_kind::reduce,
                                    {{vnode_set{}, 0}, {vnode_set{1, 5}, 3}}, 2, {}});
  ms.push_back(wire::reduce_handoff{banyan::collective_kind::gather,
                                    {{vnode_set{1, 5}, 3}},
                                    0,
                                    {{7, 0, vnode_set{}}, {~0ull, 1023, vnode_set{2, 3, 9}}}});
  ms.push_back(wire::bcast_offer{});
  ms.push_back(wire::bcast_offer{{3, 0xffffffffu, banyan::collective_kind::scatter_allgather, ~0u},
                                 vnode_set{1, 5, 9}, 7, 2});
  ms.push_back(wire::bcast_answer{});
  ms.push_back(wire::bcast_answer{{3, 4, banyan::collective_kind::message}, 5, true});
  ms.push_back(wire::bcast_ack{});
  ms.push_back(wire::bcast_ack{{3, 4, banyan::collective_kind::broadcast, 9}, vnode_set{0, 2, 7}});
  ms.push_back(wire::ping_req{7, 3});
  ms.push_back(wire::ping_ack{7, 3, true});
  ms.push_back(wire::ping_ack{7, 3, false});
  ms.push_back(wire::merge_offer{});
  ms.push_back(wire::merge_offer{{{1, "10.0.0.1:7001", 9}, {4, "", 0}}});
  ms.push_back(wire::reduce_ack{});
  ms.push_back(wire::reduce_ack{banyan::collective_kind::gather, 9, vnode_set{0, 2, 7}});
  ms.push_back(wire::reduce_ask{});
  ms.push_back(wire::reduce_ask{banyan::collective_kind::reduce, 3, vnode_set{4, 5, 6}});
  ms.push_back(wire::tree_summary{});
  ms.push_back(wire::trees_open{});
  ms.push_back(wire::trees_open{{{3, 77, 2, true}, {9, 5, 4, false}}});
  {
    wire::bw_reply r{1, {}, 100, {}, {}, {}};
    r.view_omitted = true;
    r.open_roots = {{3, 77, 2, true}};
    ms.push_back(r);
  }
  {
    wire::summary_entry a{tree_key{3, tree_kind::latency}, {}};
    a.summary.depth = 1;
    auto b = a;
    b.tree.kind = tree_kind::bandwidth;
    b.summary = {std::chrono::milliseconds(7), 3e-8, 2.5e7, 4, false};
    ms.push_back(wire::tree_summary{{a, b}});
  }
  {
    wire::reduce_partial again;
    again.tentative = true;
    again.direct = true;
    again.data = banyan::shared_bytes(bytes(24, 0x5a));
    ms.push_back(again);
  }
  for (const auto& m : ms) {
    BOOST_TEST_CONTEXT(wire::name_of(m)) {
      const wire::envelope e{1, 2, m};
      BOOST_TEST(wire::wire_size(m) == bs::encode(e).size());
    }
  }
}

// Random types and contents, with larger lists than above: still exact.
BOOST_AUTO_TEST_CASE(wire_size_equals_encoding_randomized) {
  gen g(20240611);
  g.max_list = 60;
  std::size_t checked = 0, largest = 0;
  for (int i = 0; i < 3000; ++i) {
    const auto e = g.envelope(g.upto(message_type_count - 1));
    const std::size_t actual = bs::encode(e).size();
    BOOST_TEST(wire::wire_size(e.body) == actual, wire::name_of(e.body) << " at " << i);
    if (auto* r = std::get_if<wire::bw_reply>(&e.body)) // the probe reply's own overload
      BOOST_TEST(wire::wire_size(*r) == actual, "bw_reply at " << i);
    largest = std::max(largest, actual);
    ++checked;
  }
  BOOST_TEST(checked == 3000u);
  BOOST_TEST(largest > 4000u);  // the set is not all tiny messages
}

BOOST_AUTO_TEST_CASE(bandwidth_probe_reply_is_about_128_kib) {
  gen g(5);
  wire::bw_reply reply{42, {g.info(), g.info()}, static_cast<std::uint32_t>(wire::bw_probe_bytes), {}, {}, {}};
  const wire::envelope e{1, 2, reply};
  const bytes frame = bs::encode(e);
  BOOST_TEST(frame.size() >= wire::bw_probe_bytes);
  BOOST_TEST(frame.size() <= wire::bw_probe_bytes + 512);
  BOOST_TEST(wire::wire_size(e.body) == frame.size());
  // The padding really travels as zero bytes.
  const auto zeros = std::count(frame.begin(), frame.end(), std::uint8_t{0});
  BOOST_TEST(static_cast<std::size_t>(zeros) >= wire::bw_probe_bytes);
  const auto d = decode_frame(frame);
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(same(*d, e));
}

BOOST_AUTO_TEST_CASE(decode_body_accepts_aligned_and_unaligned_input) {
  gen g(11);
  const auto e = g.envelope(11);
  const bytes frame = bs::encode(e);
  std::vector<std::uint64_t> aligned((frame.size() - 4) / 8);
  std::memcpy(aligned.data(), frame.data() + 4, frame.size() - 4);
  const auto a = bs::decode_body(reinterpret_cast<const std::uint8_t*>(aligned.data()), frame.size() - 4);
  BOOST_REQUIRE(a.has_value());
  BOOST_TEST(same(*a, e));
  bytes shifted(frame.size() - 4 + 1);
  std::memcpy(shifted.data() + 1, frame.data() + 4, frame.size() - 4);
  const auto u = bs::decode_body(shifted.data() + 1, frame.size() - 4);
  BOOST_REQUIRE(u.has_value());
  BOOST_TEST(same(*u, e));
}

BOOST_AUTO_TEST_CASE(truncated_frames_are_malformed) {
  for (std::size_t type = 0; type < message_type_count; ++type) {
    gen g(300 + type);
    const bytes frame = bs::encode(g.envelope(type));
    const std::size_t body = frame.size() - 4;
    for (std::size_t n = 0; n < body; ++n) {
      const auto d = bs::decode_body(frame.data() + 4, n);
      BOOST_TEST_CONTEXT("type " << type << ", " << n << " of " << body << " bytes") {
        BOOST_REQUIRE(!d.has_value());
        BOOST_TEST(d.err().code == errc::malformed_frame);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_malformed) {
  bytes frame = bs::encode({1, 2, wire::ping{5}});
  frame.insert(frame.end(), 8, 0);
  const auto d = decode_frame(frame);
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);
}

BOOST_AUTO_TEST_CASE(wrong_version_is_rejected) {
  for (std::uint16_t version : {0, 2, 0xffff}) {
    bytes body = raw_frame([&](cs::Frame::Builder f) {
      f.setVersion(version);
      f.getBody().initPing().setSeq(1);
    });
    const auto d = bs::decode_body(body.data(), body.size());
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::version_mismatch);
    BOOST_TEST(d.err().message.find(std::to_string(version)) != std::string::npos);
  }
  // The same frame with the right version decodes: the test above fails for the version.
  bytes good = raw_frame([](cs::Frame::Builder f) { f.getBody().initPing().setSeq(1); });
  const auto d = bs::decode_body(good.data(), good.size());
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(std::get<wire::ping>(d->body).seq == 1u);
}

BOOST_AUTO_TEST_CASE(unknown_message_type_is_malformed) {
  bytes frame = bs::encode({1, 2, wire::ping{5}});
  // Frame's data section is word 1; its union discriminant is the second 16-bit field.
  const std::size_t at = word_offset(1) + 2;
  BOOST_REQUIRE_EQUAL(frame[at] | frame[at + 1] << 8, 0); // ping is member 0
  frame[at] = 200;
  const auto d = decode_frame(frame);
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);
  BOOST_TEST(d.err().message.find("unknown message type") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_probe_reply_that_omits_its_view_carries_none) {
  wire::bw_reply omitted{7, {}, 100, {}, {}, {}};
  omitted.view_omitted = true;
  const auto ok = decode_frame(bs::encode({1, 2, omitted}));
  BOOST_REQUIRE(ok.has_value());
  BOOST_TEST(std::get<wire::bw_reply>(ok->body).view_omitted);

  // "Omitted" with members, departures or routes all the same contradicts itself.
  for (int part = 0; part < 3; ++part) {
    wire::bw_reply bad = omitted;
    if (part == 0)
      bad.members.push_back({3, {}, 1});
    else if (part == 1)
      bad.departed.push_back({3, {}, 1});
    else
      bad.routes.push_back({vnode_set::range(0, 4), 3, 1});
    const auto d = decode_frame(bs::encode({1, 2, bad}));
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
    BOOST_TEST(d.err().message.find("omits its view") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(a_probe_reply_names_the_buckets_of_its_view_once_each_in_order) {
  wire::bw_request req{7, 42, {1, 2, 3, 0xffffffffu}};
  const auto q = decode_frame(bs::encode({1, 2, req}));
  BOOST_REQUIRE(q.has_value());
  BOOST_TEST((std::get<wire::bw_request>(q->body) == req));

  wire::bw_reply part{7, {}, 100, {{3, {}, 1}}, {}, {}};
  part.view_buckets = {0, 5, 127};
  const auto ok = decode_frame(bs::encode({1, 2, part}));
  BOOST_REQUIRE(ok.has_value());
  BOOST_TEST((std::get<wire::bw_reply>(ok->body) == part));

  for (int which = 0; which < 3; ++which) {
    wire::bw_reply bad{7, {}, 100, {}, {}, {}};
    if (which == 0) { // omitted, yet naming buckets
      bad.view_omitted = true;
      bad.view_buckets = {4};
    } else if (which == 1) {
      bad.view_buckets = {4, 4};
    } else {
      bad.view_buckets = {9, 2};
    }
    const auto d = decode_frame(bs::encode({1, 2, bad}));
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
  }
}

BOOST_AUTO_TEST_CASE(unknown_tree_kind_is_malformed) {
  bytes body = raw_frame([](cs::Frame::Builder f) {
    auto k = f.getBody().initRelease().initTrees(1)[0];
    k.setRoot(4);
    k.setKind(static_cast<cs::TreeKind>(7));
  });
  const auto d = bs::decode_body(body.data(), body.size());
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);
}

// A subtree summary's figures are summed and divided by (core/subtree_summary.hpp):
// a decoder takes none it cannot use.
BOOST_AUTO_TEST_CASE(a_tree_summary_with_unusable_figures_is_malformed) {
  auto frame_with = [](std::int64_t half_rtt, double per_byte, double bottleneck,
                       std::uint32_t depth) {
    return raw_frame([&](cs::Frame::Builder f) {
      auto e = f.getBody().initTreeSummary().initTrees(1)[0];
      e.getTree().setRoot(4);
      e.getTree().setKind(cs::TreeKind::LATENCY);
      e.setHalfRtt(half_rtt);
      e.setPerByte(per_byte);
      e.setBottleneck(bottleneck);
      e.setDepth(depth);
    });
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  bytes good = frame_with(1000, 1e-8, 1e6, 2);
  BOOST_TEST(bs::decode_body(good.data(), good.size()).has_value());
  bytes no_hop = frame_with(1000, 1e-8, inf, 2); // infinite: no hop with figures
  BOOST_TEST(bs::decode_body(no_hop.data(), no_hop.size()).has_value());
  for (auto bad : {frame_with(-1, 1e-8, 1e6, 2), frame_with(1000, -1e-8, 1e6, 2),
                   frame_with(1000, nan, 1e6, 2), frame_with(1000, inf, 1e6, 2),
                   frame_with(1000, 1e-8, 0, 2), frame_with(1000, 1e-8, nan, 2),
                   frame_with(1000, 1e-8, 1e6, 0)}) {
    const auto d = bs::decode_body(bad.data(), bad.size());
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
    BOOST_TEST(d.err().message.find("tree summary") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(unknown_reduction_kind_or_type_is_malformed) {
  for (int field = 0; field < 2; ++field) {
    bytes body = raw_frame([&](cs::Frame::Builder f) {
      auto p = f.getBody().initReducePartial();
      p.setKind(field == 0 ? static_cast<cs::ReduceKind>(9) : cs::ReduceKind::SUM);
      p.setType(field == 1 ? static_cast<cs::ElementType>(9) : cs::ElementType::INT32);
    });
    const auto d = bs::decode_body(body.data(), body.size());
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
  }
}

// A segment's payload may be a slice of a larger buffer: only the slice travels.
BOOST_AUTO_TEST_CASE(segment_payload_slices_encode_only_their_bytes) {
  bytes message(1000);
  for (std::size_t i = 0; i < message.size(); ++i)
    message[i] = static_cast<std::uint8_t>(i * 7);
  const banyan::shared_bytes all(message);
  wire::bcast_segment seg;
  seg.op = {3, 9};
  seg.vnodes = vnode_set::range(0, 100);
  seg.count = 4;
  seg.index = 2;
  seg.total = message.size();
  seg.payload = all.slice(500, 250);
  const wire::envelope e{3, 4, seg};
  const auto d = decode_frame(bs::encode(e));
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(same(*d, e));
  const auto& got = std::get<wire::bcast_segment>(d->body).payload;
  BOOST_TEST((got.to_vector() == bytes(message.begin() + 500, message.begin() + 750)));
  BOOST_TEST(wire::wire_size(e.body) == bs::encode(e).size());
}

BOOST_AUTO_TEST_CASE(non_canonical_vnode_sets_are_malformed) {
  const std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> bad = {
      {{5, 5}},           // empty
      {{6, 5}},           // inverted
      {{0, 4}, {4, 8}},   // adjacent
      {{0, 4}, {2, 8}},   // overlapping
      {{10, 12}, {0, 4}}, // unsorted
  };
  for (const auto& runs : bad) {
    bytes body = raw_frame([&](cs::Frame::Builder f) {
      auto h = f.getBody().initHandoverRequest();
      auto xs = h.initVnodes(static_cast<unsigned>(runs.size()));
      for (unsigned i = 0; i < runs.size(); ++i) {
        xs[i].setLo(runs[i].first);
        xs[i].setHi(runs[i].second);
      }
    });
    const auto d = bs::decode_body(body.data(), body.size());
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
  }
}

BOOST_AUTO_TEST_CASE(out_of_bounds_pointers_are_malformed) {
  // Words: 0 root pointer, 1-2 Frame data, 3 Frame's body pointer, 4 Ping.
  const bytes ping = bs::encode({1, 2, wire::ping{5}});
  BOOST_REQUIRE_EQUAL(ping.size(), 4u + 8 + 5 * 8);
  const std::uint64_t body_ptr = get_word(ping, 3);
  BOOST_REQUIRE_EQUAL(body_ptr & 3, 0u); // a struct pointer, offset 0
  BOOST_REQUIRE_EQUAL((body_ptr >> 2) & 0x3fffffff, 0u);
  for (std::int32_t offset : {1, 1000, -10, 0x1fffffff}) {
    bytes f = ping;
    const auto field = static_cast<std::uint64_t>(static_cast<std::uint32_t>(offset) << 2);
    set_word(f, 3, (body_ptr & ~std::uint64_t{0xffffffff}) | field);
    const auto d = decode_frame(f);
    BOOST_TEST_CONTEXT("offset " << offset) {
      BOOST_REQUIRE(!d.has_value());
      BOOST_TEST(d.err().code == errc::malformed_frame);
    }
  }
  // A list pointer where the body struct should be.
  {
    bytes f = ping;
    set_word(f, 3, (body_ptr & ~std::uint64_t{3}) | 1u);
    const auto d = decode_frame(f);
    BOOST_REQUIRE(!d.has_value());
    BOOST_TEST(d.err().code == errc::malformed_frame);
  }
  // The root pointer claims a struct larger than the segment.
  bytes f = ping;
  set_word(f, 0, get_word(f, 0) | (std::uint64_t{0x7fff} << 32));
  const auto d = decode_frame(f);
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);

  // A list pointer claiming far more elements than the segment holds.
  bytes rel = bs::encode({1, 2, wire::release{{tree_key{1, tree_kind::latency}}}});
  // Words: 0 root, 1-2 Frame data, 3 body pointer, 4 Release's list pointer, 5 tag, 6 key.
  const std::uint64_t list_ptr = get_word(rel, 4);
  BOOST_REQUIRE_EQUAL(list_ptr & 3, 1u);
  set_word(rel, 4, (list_ptr & 0xffffffffu) | (std::uint64_t{1000000} << 35) | (std::uint64_t{7} << 32));
  const auto dl = decode_frame(rel);
  BOOST_REQUIRE(!dl.has_value());
  BOOST_TEST(dl.err().code == errc::malformed_frame);
}

// Many pointers to the same list: every pointer is in bounds, but reading them all would
// traverse far more than the frame holds. The traversal limit stops it.
BOOST_AUTO_TEST_CASE(pointer_amplification_hits_traversal_limit) {
  constexpr std::size_t k = 60;
  wire::tree_update m;
  m.trees.resize(k);
  m.trees[0].path.assign(1000, 7); // 500 words
  bytes f = bs::encode({1, 2, m});
  // Words: 0 root, 1-2 Frame data, 3 body ptr, 4 TreeUpdate's list ptr, 5 tag,
  // then k TreeInfo of 5 words, each ending in its path pointer.
  auto path_ptr = [](std::size_t i) { return 5 + 1 + 5 * i + 4; };
  const std::uint64_t first = get_word(f, path_ptr(0));
  BOOST_REQUIRE_EQUAL(first & 3, 1u); // a list pointer
  const auto target =
      static_cast<std::int64_t>(path_ptr(0)) + 1 + (static_cast<std::int32_t>(first & 0xffffffffu) >> 2);
  for (std::size_t i = 1; i < k; ++i) {
    BOOST_REQUIRE_EQUAL(get_word(f, path_ptr(i)), 0u); // empty path: null pointer
    const auto offset = static_cast<std::int32_t>(target - static_cast<std::int64_t>(path_ptr(i)) - 1);
    set_word(f, path_ptr(i), (first & ~std::uint64_t{0xffffffff}) |
                                 (static_cast<std::uint32_t>(offset) << 2) | 1u);
  }
  const auto d = decode_frame(f);
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);
  BOOST_TEST(d.err().message.find("traversal") != std::string::npos, d.err().message);

  // Sharing only a few times stays under the limit, so the check above is the limit's.
  bytes few = bs::encode({1, 2, m});
  for (std::size_t i = 1; i < 2; ++i) {
    const auto offset = static_cast<std::int32_t>(target - static_cast<std::int64_t>(path_ptr(i)) - 1);
    set_word(few, path_ptr(i), (first & ~std::uint64_t{0xffffffff}) |
                                   (static_cast<std::uint32_t>(offset) << 2) | 1u);
  }
  const auto ok = decode_frame(few);
  BOOST_REQUIRE_MESSAGE(ok.has_value(), describe(ok));
  BOOST_TEST(std::get<wire::tree_update>(ok->body).trees[1].path.size() == 1000u);
}

BOOST_AUTO_TEST_CASE(returned_flag_round_trips_without_changing_the_size) {
  const wire::envelope e{7, 3, wire::ping{42}};
  const bytes plain = bs::encode(e);
  const bytes back = bs::encode(e, true);
  BOOST_TEST(plain.size() == back.size());
  BOOST_TEST(back.size() == wire::wire_size(e.body));
  const auto p = bs::decode_frame_body(plain.data() + 4, plain.size() - 4);
  const auto b = bs::decode_frame_body(back.data() + 4, back.size() - 4);
  BOOST_REQUIRE(p.has_value());
  BOOST_REQUIRE(b.has_value());
  BOOST_TEST(!p->returned);
  BOOST_TEST(b->returned);
  BOOST_TEST(b->envelope.from == 7u);
  BOOST_TEST(std::get<wire::ping>(b->envelope.body).seq == 42u);
  // The stream decoder reports the flag per frame.
  bytes both = plain;
  both.insert(both.end(), back.begin(), back.end());
  bs::frame_decoder dec;
  const auto frames = dec.feed_frames(both.data(), both.size());
  BOOST_REQUIRE(frames.has_value());
  BOOST_REQUIRE(frames->size() == 2u);
  BOOST_TEST(!(*frames)[0].returned);
  BOOST_TEST((*frames)[1].returned);
}

BOOST_AUTO_TEST_CASE(oversized_frames_are_rejected) {
  const bytes frame = bs::encode({1, 2, wire::bw_reply{1, {}, 4096, {}, {}, {}}});
  const auto d = bs::decode_body(frame.data() + 4, frame.size() - 4, 1024);
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::oversized_frame);
  BOOST_TEST(bs::decode_body(frame.data() + 4, frame.size() - 4, frame.size() - 4).has_value());

  // The stream decoder fails on the prefix alone, before the body arrives.
  bs::frame_decoder dec(1024);
  const auto r = dec.feed(frame.data(), 4);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.err().code == errc::oversized_frame);
  BOOST_TEST(dec.failed());
  // Sticky: even a valid frame is refused now.
  const bytes ping = bs::encode({1, 2, wire::ping{1}});
  const auto again = dec.feed(ping.data(), ping.size());
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST(again.err().code == errc::oversized_frame);

  // The default limit applies to a 4 GiB - 1 prefix.
  bs::frame_decoder big;
  const bytes huge_prefix = {0xff, 0xff, 0xff, 0xff};
  const auto h = big.feed(huge_prefix.data(), huge_prefix.size());
  BOOST_REQUIRE(!h.has_value());
  BOOST_TEST(h.err().code == errc::oversized_frame);
}

BOOST_AUTO_TEST_CASE(stream_decoder_rejects_lengths_that_are_not_whole_words) {
  for (std::uint8_t len : {0, 7, 12}) {
    bs::frame_decoder dec;
    const bytes prefix = {len, 0, 0, 0};
    const auto r = dec.feed(prefix.data(), prefix.size());
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.err().code == errc::malformed_frame);
  }
}

BOOST_AUTO_TEST_CASE(random_bytes_never_crash_the_decoder) {
  std::mt19937_64 rng(99);
  std::size_t ok = 0, malformed = 0, other = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::size_t words = rng() % 24;
    bytes body(words * 8);
    for (auto& b : body)
      b = static_cast<std::uint8_t>(rng());
    // Half the time, a plausible one-segment table so that parsing goes deeper.
    if (words > 0 && (i & 1)) {
      const std::uint32_t zero = 0, size = static_cast<std::uint32_t>(words - 1);
      std::memcpy(body.data(), &zero, 4);
      std::memcpy(body.data() + 4, &size, 4);
    }
    const auto d = bs::decode_body(body.data(), body.size());
    if (d)
      ++ok;
    else if (d.err().code == errc::malformed_frame)
      ++malformed;
    else if (d.err().code == errc::version_mismatch)
      ++other;
    else
      BOOST_FAIL("unexpected error " << d.err().to_string());
  }
  BOOST_TEST(ok + malformed + other == 5000u);
  BOOST_TEST(malformed > 2000u);
}

// Valid frames with random bytes changed: decoding either fails cleanly or yields an
// envelope that itself round-trips.
BOOST_AUTO_TEST_CASE(mutated_frames_decode_to_errors_or_valid_envelopes) {
  gen g(4242);
  std::size_t ok = 0, failed = 0;
  for (int i = 0; i < 4000; ++i) {
    bytes frame = bs::encode(g.envelope(g.upto(message_type_count - 1)));
    const std::size_t flips = 1 + g.upto(3);
    for (std::size_t j = 0; j < flips; ++j)
      frame[4 + g.upto(frame.size() - 5)] ^= static_cast<std::uint8_t>(1 + g.upto(254));
    const auto d = decode_frame(frame);
    if (!d) {
      ++failed;
      BOOST_TEST((d.err().code == errc::malformed_frame || d.err().code == errc::version_mismatch));
      continue;
    }
    ++ok;
    // Compared as bytes: a flipped bit may have made a rate NaN.
    const bytes reencoded = bs::encode(*d);
    const auto again = decode_frame(reencoded);
    BOOST_REQUIRE(again.has_value());
    BOOST_TEST((bs::encode(*again) == reencoded));
  }
  // Both outcomes occur, so both paths were exercised.
  BOOST_TEST(ok > 100u);
  BOOST_TEST(failed > 100u);
}

BOOST_AUTO_TEST_CASE(stream_decoder_with_one_byte_chunks) {
  gen g(77);
  std::vector<wire::envelope> sent;
  bytes stream;
  for (int i = 0; i < 60; ++i) {
    sent.push_back(g.envelope(static_cast<std::size_t>(i) % message_type_count));
    const bytes f = bs::encode(sent.back());
    stream.insert(stream.end(), f.begin(), f.end());
  }
  bs::frame_decoder dec;
  std::vector<wire::envelope> got;
  std::size_t max_buffered = 0;
  for (std::uint8_t b : stream) {
    auto r = dec.feed(&b, 1);
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE_LE(r->size(), 1u);
    for (auto& e : *r)
      got.push_back(std::move(e));
    max_buffered = std::max(max_buffered, dec.buffered());
  }
  BOOST_TEST(dec.buffered() == 0u);
  BOOST_TEST(max_buffered > 8u);
  BOOST_REQUIRE_EQUAL(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    BOOST_TEST(same(got[i], sent[i]), "frame " << i);
}

BOOST_AUTO_TEST_CASE(stream_decoder_with_many_frames_per_chunk) {
  gen g(78);
  std::vector<wire::envelope> sent;
  bytes stream;
  for (int i = 0; i < 500; ++i) {
    sent.push_back(g.envelope(g.upto(message_type_count - 1)));
    const bytes f = bs::encode(sent.back());
    stream.insert(stream.end(), f.begin(), f.end());
  }
  // All at once.
  {
    bs::frame_decoder dec;
    auto r = dec.feed(stream.data(), stream.size());
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE_EQUAL(r->size(), sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i)
      BOOST_TEST(same((*r)[i], sent[i]), "frame " << i);
    BOOST_TEST(dec.buffered() == 0u);
  }
  // Random chunk sizes that split prefixes and bodies anywhere.
  {
    bs::frame_decoder dec;
    std::vector<wire::envelope> got;
    std::size_t at = 0;
    while (at < stream.size()) {
      const std::size_t n = std::min(stream.size() - at, 1 + g.upto(700));
      auto r = dec.feed(stream.data() + at, n);
      BOOST_REQUIRE(r.has_value());
      for (auto& e : *r)
        got.push_back(std::move(e));
      at += n;
    }
    BOOST_REQUIRE_EQUAL(got.size(), sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i)
      BOOST_TEST(same(got[i], sent[i]), "frame " << i);
  }
}

BOOST_AUTO_TEST_CASE(stream_decoder_reports_a_bad_frame_and_stays_failed) {
  const bytes good = bs::encode({1, 2, wire::ping{1}});
  bytes bad = bs::encode({1, 2, wire::pong{2}});
  bad[word_offset(1) + 2] = 99; // unknown message type
  bytes stream = good;
  stream.insert(stream.end(), bad.begin(), bad.end());
  stream.insert(stream.end(), good.begin(), good.end());
  bs::frame_decoder dec;
  const auto first = dec.feed(stream.data(), good.size());
  BOOST_REQUIRE(first.has_value());
  BOOST_TEST(first->size() == 1u);
  const auto rest = dec.feed(stream.data() + good.size(), stream.size() - good.size());
  BOOST_REQUIRE(!rest.has_value());
  BOOST_TEST(rest.err().code == errc::malformed_frame);
  const auto after = dec.feed(good.data(), good.size());
  BOOST_REQUIRE(!after.has_value());
  BOOST_TEST(after.err().code == errc::malformed_frame);
}

// encode_frame leaves a large aligned payload in place as the message's last segment;
// head + tail is a standard frame that decodes to the same envelope. Small, unaligned or
// odd-sized payloads (and other messages) are copied: then it equals `encode`.
BOOST_AUTO_TEST_CASE(encode_frame_references_large_payloads_in_place) {
  bytes message(4u << 20);
  for (std::size_t i = 0; i < message.size(); ++i)
    message[i] = static_cast<std::uint8_t>(i * 13 + (i >> 11));
  const banyan::shared_bytes all(message);
  auto joined = [](const bs::frame_bytes& f) {
    bytes b = f.head;
    b.insert(b.end(), f.tail.data(), f.tail.data() + f.tail.size());
    return b;
  };
  for (std::size_t offset : {std::size_t{0}, std::size_t{64} << 10, std::size_t{3}}) {
    for (std::size_t n : {std::size_t{64} << 10, std::size_t{16} << 10, std::size_t{1000},
                          (std::size_t{64} << 10) + 4, std::size_t{1} << 20}) {
      wire::bcast_segment seg;
      seg.op = {3, 9};
      seg.vnodes = vnode_set::range(0, 100);
      seg.count = 64;
      seg.index = 1;
      seg.total = message.size();
      seg.payload = all.slice(offset, n);
      for (bool returned : {false, true}) {
        const wire::envelope e{3, 4, seg};
        auto f = bs::encode_frame(e, returned);
        const bool in_place = offset % 8 == 0 && n % 8 == 0 && n >= bs::external_min_bytes;
        BOOST_TEST_CONTEXT("offset " << offset << ", " << n << " bytes, returned " << returned) {
          BOOST_TEST(f.tail.empty() == !in_place);
          if (in_place) {
            BOOST_TEST(f.tail.data() == seg.payload.data()); // not copied
            BOOST_TEST(f.tail.size() == n);
            BOOST_TEST(f.head.size() < 256u);
          } else {
            BOOST_TEST((f.head == bs::encode(e, returned)));
          }
          auto whole = joined(f);
          BOOST_TEST(prefix_of(whole) + 4 == whole.size());
          bs::frame_decoder dec(bs::default_max_frame);
          auto frames = dec.feed_frames(whole.data(), whole.size());
          BOOST_REQUIRE(frames.has_value());
          BOOST_REQUIRE_EQUAL(frames->size(), 1u);
          BOOST_TEST(same((*frames)[0].envelope, e));
          BOOST_TEST((*frames)[0].returned == returned);
        }
      }
    }
  }
  // A reduction partial's data too.
  wire::reduce_partial p{banyan::collective_kind::static_reduce, 7, 2, {banyan::reduce_kind::sum, banyan::element_type::int32, 0},
                         tree_kind::bandwidth, vnode_set::range(0, 8), false, 1, all.slice(0, 1u << 20)};
  const wire::envelope e{1, 2, p};
  auto f = bs::encode_frame(e);
  BOOST_TEST(f.tail.data() == all.data());
  auto d = decode_frame(joined(f));
  BOOST_REQUIRE(d.has_value());
  BOOST_TEST(same(*d, e));
}

BOOST_AUTO_TEST_CASE(the_collective_kind_travels_in_the_frame_at_no_cost) {
  // Every kind a collective's message may carry comes back, and the frame is as long as
  // the size model says (which has no room for it: it sits in the Frame's free bits).
  for (std::size_t k = 0; k < banyan::collective_kind_count; ++k) {
    const auto kind = static_cast<banyan::collective_kind>(k);
    wire::bcast_offer offer{{3, 9, kind}, vnode_set{1, 2}, 4, 0};
    wire::reduce_partial part;
    part.collective = kind;
    wire::reduce_handoff handoff{kind, {{vnode_set{5}, 2}}, 1, {}};
    for (wire::message m : {wire::message{offer}, wire::message{part}, wire::message{handoff}}) {
      BOOST_TEST_CONTEXT(wire::name_of(m) << " of kind " << banyan::to_string(kind)) {
        const wire::envelope e{1, 2, m};
        const bytes frame = bs::encode(e);
        BOOST_TEST(frame.size() == wire::wire_size(m));
        const auto d = decode_frame(frame);
        BOOST_REQUIRE_MESSAGE(d.has_value(), describe(d));
        BOOST_TEST((wire::kind_of(d->body) == kind));
        BOOST_TEST(same(*d, e));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_supervisor_message_of_a_collective_kind_is_malformed) {
  const auto ok = raw_frame([](cs::Frame::Builder f) { f.getBody().initPing().setSeq(4); });
  BOOST_TEST(bs::decode_body(ok.data(), ok.size()).has_value());
  const auto bad = raw_frame([](cs::Frame::Builder f) {
    f.getBody().initPing().setSeq(4);
    f.setCollective(cs::Collective::REDUCE);
  });
  auto d = bs::decode_body(bad.data(), bad.size());
  BOOST_REQUIRE(!d.has_value());
  BOOST_TEST(d.err().code == errc::malformed_frame);
  const auto unknown = raw_frame([](cs::Frame::Builder f) {
    f.getBody().initReduceHandoff().setHops(1);
    f.setCollective(static_cast<cs::Collective>(banyan::collective_kind_count));
  });
  auto u = bs::decode_body(unknown.data(), unknown.size());
  BOOST_REQUIRE(!u.has_value());
  BOOST_TEST(u.err().code == errc::malformed_frame);
}

// Receive-in-place: frame_decoder with a payload_sink reads a large broadcast segment's
// head first, asks the sink where the payload goes and receives it there; a sink that
// declines, or a frame of another shape, takes the frame's own buffer; malformed heads
// are still rejected.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <vector>

#include "banyan/schema/codec.hpp"

#include "frame_test_support.hpp"

using frame_test::receive;

namespace {

constexpr std::size_t seg_bytes = 40000; // a multiple of 8: sent as the last segment

wire::envelope segment(std::uint32_t index) { return frame_test::segment(seg_bytes, index, 3); }

/// What `encode_frame` puts on the wire: head, then the payload left in place.
bytes wire_bytes(const wire::envelope& e) {
  auto f = bs::encode_frame(e);
  BOOST_REQUIRE(f.tail.size() == seg_bytes); // the payload really is the last segment
  bytes out = f.head;
  out.insert(out.end(), f.tail.begin(), f.tail.end());
  return out;
}

/// A sink placing every segment of a message at index * seg_bytes in one buffer.
struct test_sink {
  std::shared_ptr<std::vector<std::uint8_t>> buf =
      std::make_shared<std::vector<std::uint8_t>>(3 * seg_bytes);
  std::vector<bs::payload_head> asked;
  bool decline = false;
  bs::payload_sink fn() {
    return [this](const bs::payload_head& h) -> std::optional<bs::payload_place> {
      asked.push_back(h);
      const std::size_t at = std::size_t{h.index} * seg_bytes;
      if (decline || at + h.length > buf->size())
        return std::nullopt;
      return bs::payload_place{
          shared_bytes(std::shared_ptr<const std::vector<std::uint8_t>>(buf)).slice(at, h.length),
          buf->data() + at};
    };
  }
  bool inside(const shared_bytes& b) const {
    return b.data() >= buf->data() && b.data() + b.size() <= buf->data() + buf->size();
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_large_segment_lands_in_the_sinks_buffer) {
  std::vector<wire::envelope> sent;
  bytes stream;
  for (std::uint32_t i : {2u, 0u, 1u}) {
    sent.push_back(segment(i));
    auto w = wire_bytes(sent.back());
    stream.insert(stream.end(), w.begin(), w.end());
    sent.push_back({3, 9, wire::ping{i}});
    auto p = bs::encode(sent.back());
    stream.insert(stream.end(), p.begin(), p.end());
  }
  for (std::size_t chunk : {std::size_t{7}, std::size_t{1000}, std::size_t{16384},
                            std::size_t{65536}, stream.size()}) {
    test_sink sink;
    const auto fn = sink.fn();
    bs::frame_decoder dec;
    dec.set_sink(&fn);
    auto got = receive(dec, stream, chunk, 16u << 10);
    BOOST_REQUIRE(got.size() == sent.size());
    for (std::size_t k = 0; k < sent.size(); ++k)
      BOOST_TEST((got[k].envelope.body == sent[k].body));
    BOOST_REQUIRE(sink.asked.size() == 3u);
    BOOST_TEST(sink.asked[0].index == 2u);
    BOOST_TEST(sink.asked[0].count == 3u);
    BOOST_TEST(sink.asked[0].total == 3 * seg_bytes);
    BOOST_TEST(sink.asked[0].length == seg_bytes);
    BOOST_TEST(sink.asked[0].op.origin == 3u);
    BOOST_TEST(sink.asked[0].op.seq == 77u);
    BOOST_TEST(sink.asked[0].from == 3u);
    BOOST_TEST(sink.asked[0].to == 9u);
    // Each payload is the sink's slice, and the three make the message in one buffer.
    shared_bytes whole;
    for (std::size_t k : {2u, 4u, 0u}) {
      const auto& pl = std::get<wire::bcast_segment>(got[k].envelope.body).payload;
      BOOST_TEST(sink.inside(pl));
      if (whole.empty())
        whole = pl;
      else
        BOOST_TEST(whole.extend(pl));
    }
    BOOST_TEST(whole.data() == sink.buf->data());
    BOOST_TEST(whole.size() == 3 * seg_bytes);
    BOOST_TEST(dec.buffered() == 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_declining_sink_leaves_the_frame_its_own_buffer) {
  test_sink sink;
  sink.decline = true;
  const auto fn = sink.fn();
  bs::frame_decoder dec;
  dec.set_sink(&fn);
  const auto e = segment(1);
  auto got = receive(dec, wire_bytes(e), 65536, 16u << 10);
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST((got[0].envelope.body == e.body));
  BOOST_TEST(sink.asked.size() == 1u);
  BOOST_TEST(!sink.inside(std::get<wire::bcast_segment>(got[0].envelope.body).payload));
}

BOOST_AUTO_TEST_CASE(frames_of_another_shape_are_not_offered) {
  test_sink sink;
  const auto fn = sink.fn();
  bs::frame_decoder dec;
  dec.set_sink(&fn);
  // One segment (`encode`): the payload is not a segment of its own.
  const auto e = segment(0);
  const bytes single = bs::encode(e);
  // A large message that is not a broadcast segment.
  wire::reduce_partial rp;
  rp.op = 4;
  rp.vnodes = vnode_set::range(0, 3);
  rp.data = shared_bytes(bytes(seg_bytes, 7));
  const wire::envelope re{3, 9, rp};
  auto rf = bs::encode_frame(re);
  BOOST_REQUIRE(!rf.tail.empty());
  bytes stream = single;
  stream.insert(stream.end(), rf.head.begin(), rf.head.end());
  stream.insert(stream.end(), rf.tail.begin(), rf.tail.end());
  auto got = receive(dec, stream, 4096, 16u << 10);
  BOOST_REQUIRE(got.size() == 2u);
  BOOST_TEST((got[0].envelope.body == e.body));
  BOOST_TEST((got[1].envelope.body == re.body));
  BOOST_TEST(sink.asked.empty());
}

BOOST_AUTO_TEST_CASE(malformed_heads_are_still_rejected) {
  // (segment table offset in the stream: byte 4 = segment count - 1, then the sizes)
  struct corruption {
    std::size_t at;
    std::uint8_t value;
  };
  for (corruption c : {corruption{4, 0xff},  // segment count far beyond the body
                       corruption{8, 0xff},  // first segment larger than the body
                       corruption{12, 0x01}}) { // payload segment size wrong
    test_sink sink;
    const auto fn = sink.fn();
    bs::frame_decoder dec;
    dec.set_sink(&fn);
    bytes frame = wire_bytes(segment(0));
    frame[c.at] = c.value;
    auto r = dec.feed_frames(frame.data(), frame.size());
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.err().code == errc::malformed_frame);
    BOOST_TEST(dec.failed());
    BOOST_TEST(sink.asked.empty());
  }
  // A corrupt root struct in a well-shaped head: same outcome as without a sink, and the
  // sink is asked only if the frame decodes.
  {
    test_sink sink;
    const auto fn = sink.fn();
    bs::frame_decoder dec;
    dec.set_sink(&fn);
    bytes frame = wire_bytes(segment(0));
    bs::frame_decoder plain;
    const std::size_t table = 16; // two segments: count word + two sizes + padding
    for (std::size_t i = 0; i < 8; ++i)
      frame[4 + table + 8 + i] = 0xee;
    auto a = dec.feed_frames(frame.data(), frame.size());
    auto b = plain.feed_frames(frame.data(), frame.size());
    BOOST_TEST(a.has_value() == b.has_value());
    if (!a.has_value() && !b.has_value())
      BOOST_TEST(a.err().code == b.err().code);
    BOOST_TEST(sink.asked.empty() != a.has_value());
  }
  // An oversized prefix is refused before anything is read.
  {
    test_sink sink;
    const auto fn = sink.fn();
    bs::frame_decoder dec(1u << 16);
    dec.set_sink(&fn);
    const std::uint8_t prefix[4] = {0x00, 0x00, 0x10, 0x00}; // 1 MiB
    auto r = dec.feed_frames(prefix, 4);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST(r.err().code == errc::oversized_frame);
    BOOST_TEST(sink.asked.empty());
  }
}

BOOST_AUTO_TEST_CASE(corrupt_heads_decode_as_without_a_sink) {
  // Any byte of the head (prefix, segment table, head segment) changed: the decoder with
  // a sink returns exactly what one without a sink returns (the same envelope or the
  // same error code), whatever the sink was asked.
  const bytes good = wire_bytes(segment(1));
  const std::size_t head = good.size() - seg_bytes;
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    bytes frame = good;
    const std::size_t at = rng() % head;
    frame[at] = static_cast<std::uint8_t>(frame[at] ^ (1u << (rng() % 8)));
    test_sink sink;
    const auto fn = sink.fn();
    bs::frame_decoder with(1u << 20);
    with.set_sink(&fn);
    bs::frame_decoder without(1u << 20);
    // The same bytes, in random chunks for the one with a sink.
    std::vector<bs::frame> got;
    bool failed = false;
    banyan::errc code{};
    for (std::size_t i = 0; i < frame.size() && !failed;) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 3000, frame.size() - i);
      auto r = with.feed_frames(frame.data() + i, n);
      if (!r) {
        failed = true;
        code = r.err().code;
      } else {
        for (auto& f : *r)
          got.push_back(std::move(f));
      }
      i += n;
    }
    auto ref = without.feed_frames(frame.data(), frame.size());
    BOOST_REQUIRE(ref.has_value() != failed);
    if (failed) {
      BOOST_TEST(code == ref.err().code);
      continue;
    }
    BOOST_REQUIRE(got.size() == ref->size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      BOOST_TEST((got[k].envelope.body == (*ref)[k].envelope.body));
      BOOST_TEST(got[k].envelope.from == (*ref)[k].envelope.from);
      BOOST_TEST(got[k].returned == (*ref)[k].returned);
    }
  }
}

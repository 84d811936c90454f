// frame_decoder: large frames decoded in place (payloads slice the frame's own buffer)
// and received straight into it (direct_buffer / commit_direct), mixed with `feed`.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "banyan/schema/codec.hpp"

#include "frame_test_support.hpp"

using frame_test::receive;
using frame_test::segment;

namespace {

bool same(const wire::envelope& a, const wire::envelope& b) {
  return a.from == b.from && a.to == b.to && a.body == b.body;
}

} // namespace

BOOST_AUTO_TEST_CASE(small_frames_offer_no_direct_buffer) {
  bs::frame_decoder dec;
  BOOST_TEST(dec.direct_buffer().second == 0u); // nothing in progress
  const bytes ping = bs::encode({1, 2, wire::ping{4}});
  auto r = dec.feed(ping.data(), 6); // prefix and 2 body bytes of a small frame
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(dec.direct_buffer().second == 0u);
  r = dec.feed(ping.data() + 6, ping.size() - 6);
  BOOST_REQUIRE(r.has_value());
  BOOST_REQUIRE(r->size() == 1u);
  BOOST_TEST(std::get<wire::ping>((*r)[0].body).seq == 4u);

  // A large frame offers one only once its prefix is complete.
  const bytes big = bs::encode(segment(100000, 0));
  r = dec.feed(big.data(), 3);
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(dec.direct_buffer().second == 0u);
  r = dec.feed(big.data() + 3, 1);
  BOOST_REQUIRE(r.has_value());
  const auto [p, n] = dec.direct_buffer();
  BOOST_TEST(p != nullptr);
  BOOST_TEST(n >= bs::frame_decoder::zero_copy_min);
  BOOST_TEST(n <= big.size() - 4);
}

BOOST_AUTO_TEST_CASE(large_frames_received_directly_decode_exactly) {
  // Large and small frames interleaved, received in several chunkings.
  std::vector<wire::envelope> sent;
  bytes stream;
  for (std::uint32_t i = 0; i < 4; ++i) {
    sent.push_back(segment(70000 + 8 * i + i, i)); // odd sizes: padding inside the frame
    sent.push_back({3, 9, wire::ping{i}});
  }
  for (auto& e : sent) {
    auto f = bs::encode(e);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  for (std::size_t chunk : {std::size_t{1000}, std::size_t{16384}, std::size_t{65536}, std::size_t{1} << 20}) {
    bs::frame_decoder dec;
    std::vector<std::pair<const std::uint8_t*, std::size_t>> direct;
    auto got = receive(dec, stream, chunk, 1, &direct);
    BOOST_REQUIRE(got.size() == sent.size());
    for (std::size_t k = 0; k < sent.size(); ++k) {
      BOOST_TEST(same(got[k].envelope, sent[k]));
      BOOST_TEST(!got[k].returned);
    }
    BOOST_TEST(dec.buffered() == 0u);
    BOOST_TEST(direct.empty() == (chunk >= stream.size())); // one feed took it all
    // Zero copy: each large payload's last byte is where it was received directly.
    for (std::size_t k = 0; chunk < stream.size() && k < sent.size(); k += 2) {
      const auto& pl = std::get<wire::bcast_segment>(got[k].envelope.body).payload;
      const auto* last = pl.data() + pl.size() - 1;
      const bool inside = std::any_of(direct.begin(), direct.end(), [&](auto& d) {
        return last >= d.first && last < d.first + d.second;
      });
      BOOST_TEST(inside);
    }
  }
}

BOOST_AUTO_TEST_CASE(large_frames_fed_in_random_chunks_decode_exactly) {
  std::mt19937_64 rng(7);
  bytes stream;
  std::vector<wire::envelope> sent;
  for (std::uint32_t i = 0; i < 3; ++i) {
    sent.push_back(segment(bs::frame_decoder::zero_copy_min + 1000 * i, i));
    auto f = bs::encode(sent.back(), i == 1);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  bs::frame_decoder dec;
  std::vector<bs::frame> got;
  std::size_t at = 0;
  while (at < stream.size()) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 9000, stream.size() - at);
    auto r = dec.feed_frames(stream.data() + at, n);
    BOOST_REQUIRE(r.has_value());
    for (auto& f : *r)
      got.push_back(std::move(f));
    at += n;
  }
  BOOST_REQUIRE(got.size() == 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    BOOST_TEST(same(got[k].envelope, sent[k]));
    BOOST_TEST(got[k].returned == (k == 1));
  }
  // The payloads outlive the decoder (they own the frame buffer they slice).
  const auto kept = std::get<wire::bcast_segment>(got[2].envelope.body).payload;
  got.clear();
  BOOST_TEST(kept == std::get<wire::bcast_segment>(sent[2].body).payload);
}

BOOST_AUTO_TEST_CASE(a_corrupt_large_frame_received_directly_fails_and_stays_failed) {
  bytes frame = bs::encode(segment(50000, 0));
  // Break the segment table: a claimed segment count far beyond the body.
  frame[4] = 0xff;
  frame[5] = 0xff;
  bs::frame_decoder dec;
  auto r = dec.feed(frame.data(), 4);
  BOOST_REQUIRE(r.has_value());
  std::size_t at = 4;
  while (at < frame.size()) {
    auto [p, n] = dec.direct_buffer();
    BOOST_REQUIRE(n > 0);
    const std::size_t take = std::min(n, frame.size() - at);
    std::memcpy(p, frame.data() + at, take);
    auto c = dec.commit_direct(take);
    at += take;
    if (at < frame.size()) {
      BOOST_REQUIRE(c.has_value());
      BOOST_TEST(c->empty());
    } else {
      BOOST_REQUIRE(!c.has_value());
      BOOST_TEST(c.err().code == errc::malformed_frame);
    }
  }
  BOOST_TEST(dec.failed());
  BOOST_TEST(dec.direct_buffer().second == 0u);
  const bytes ping = bs::encode({1, 2, wire::ping{1}});
  const auto again = dec.feed(ping.data(), ping.size());
  BOOST_REQUIRE(!again.has_value());
  BOOST_TEST(again.err().code == errc::malformed_frame);
}

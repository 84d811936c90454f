#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "banyan.capnp.h"
#include "banyan/schema/handshake.hpp"

namespace bs = banyan::schema;
namespace cs = banyan::capnp_schema;
using banyan::errc;
using bytes = std::vector<std::uint8_t>;

namespace banyan {
std::ostream& operator<<(std::ostream& os, errc e) {
  return os << to_string(e);
}
} // namespace banyan

namespace {

bs::nonce filled(std::uint8_t seed) {
  bs::nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i)
    n[i] = static_cast<std::uint8_t>(seed + i);
  return n;
}

bs::hello sample_hello() {
  return bs::hello{bs::protocol_version, 7, filled(1), 40123, false, 0xabcdef0123u};
}

// The body of a whole message (the bytes after the 4-byte prefix).
bytes body_of(const bytes& msg) {
  return bytes(msg.begin() + bs::frame_prefix_bytes, msg.end());
}

bytes frame_of(capnp::MessageBuilder& b) {
  auto words = capnp::messageToFlatArray(b);
  auto raw = words.asBytes();
  bytes out(4 + raw.size(), 0);
  out[0] = static_cast<std::uint8_t>(raw.size());
  out[1] = static_cast<std::uint8_t>(raw.size() >> 8);
  std::copy(raw.begin(), raw.end(), out.begin() + 4);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(handshake)

BOOST_AUTO_TEST_CASE(hello_round_trips) {
  const auto h = sample_hello();
  const auto msg = bs::encode(h);
  BOOST_TEST(msg.size() < 128u);
  const auto b = body_of(msg);
  auto back = bs::decode_hello(b.data(), b.size());
  BOOST_TEST_REQUIRE(back.has_value());
  BOOST_TEST((*back == h));
  auto plain = h;
  plain.plaintext = true;
  const auto pb = body_of(bs::encode(plain));
  auto plain_back = bs::decode_hello(pb.data(), pb.size());
  BOOST_TEST_REQUIRE(plain_back.has_value());
  BOOST_TEST(plain_back->plaintext);
  BOOST_TEST(!back->plaintext);
}

BOOST_AUTO_TEST_CASE(hello_ack_round_trips_in_all_three_shapes) {
  bs::proof mac{};
  mac.fill(0xab);
  const bs::hello_ack acceptor{bs::protocol_version, 3, filled(9), mac};
  const bs::hello_ack initiator{bs::protocol_version, 7, std::nullopt, mac};
  const bs::hello_ack refusal{5, 3, std::nullopt, std::nullopt}; // a version-mismatch answer
  const bs::hello_ack plain{bs::protocol_version, 3, std::nullopt, std::nullopt, true}; // mode
  // An acceptor's answer with its session; a refusal of the initiator's id, in the answer
  // (with a nonce) and after the initiator's proof (without).
  const bs::hello_ack with_session{bs::protocol_version, 3, filled(9), mac, false, 0xfeedu};
  const bs::hello_ack in_use{bs::protocol_version, 3,     filled(9),
                             mac,                  false, 0xfeedu,
                             bs::refusal::id_in_use};
  const bs::hello_ack in_use_later{bs::protocol_version, 3,     std::nullopt,
                                   mac,                  false, 0xfeedu,
                                   bs::refusal::id_in_use};
  for (const auto& a : {acceptor, initiator, refusal, plain, with_session, in_use, in_use_later}) {
    const auto b = body_of(bs::encode(a));
    auto back = bs::decode_hello_ack(b.data(), b.size());
    BOOST_TEST_REQUIRE(back.has_value());
    BOOST_TEST((*back == a));
  }
}

BOOST_AUTO_TEST_CASE(an_unknown_refusal_is_malformed) {
  capnp::MallocMessageBuilder b;
  auto root = b.initRoot<cs::HelloAck>();
  root.setVersion(1);
  root.setProcId(3);
  root.setRefusal(static_cast<cs::Refusal>(9));
  const auto body = body_of(frame_of(b));
  auto r = bs::decode_hello_ack(body.data(), body.size());
  BOOST_TEST_REQUIRE(!r.has_value());
  BOOST_TEST(r.err().code == errc::malformed_frame);
  BOOST_TEST(r.err().message.find("unknown refusal 9") != std::string::npos, r.err().message);
}

BOOST_AUTO_TEST_CASE(decode_reports_a_foreign_version_instead_of_failing) {
  auto h = sample_hello();
  h.version = 2;
  const auto b = body_of(bs::encode(h));
  auto back = bs::decode_hello(b.data(), b.size());
  BOOST_TEST_REQUIRE(back.has_value());
  BOOST_TEST(back->version == 2);
}

BOOST_AUTO_TEST_CASE(wrong_nonce_length_is_malformed) {
  capnp::MallocMessageBuilder b;
  auto root = b.initRoot<cs::Hello>();
  root.setVersion(1);
  root.setProcId(1);
  const std::uint8_t short_nonce[5] = {1, 2, 3, 4, 5};
  root.setNonce(capnp::Data::Reader(short_nonce, sizeof short_nonce));
  const auto body = body_of(frame_of(b));
  auto r = bs::decode_hello(body.data(), body.size());
  BOOST_TEST_REQUIRE(!r.has_value());
  BOOST_TEST(r.err().code == errc::malformed_frame);
  BOOST_TEST(r.err().message.find("nonce") != std::string::npos);

  capnp::MallocMessageBuilder b2;
  auto ack = b2.initRoot<cs::HelloAck>();
  ack.setProof(capnp::Data::Reader(short_nonce, sizeof short_nonce));
  const auto body2 = body_of(frame_of(b2));
  auto r2 = bs::decode_hello_ack(body2.data(), body2.size());
  BOOST_TEST_REQUIRE(!r2.has_value());
  BOOST_TEST(r2.err().message.find("proof") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(garbage_truncation_and_oversize_never_throw) {
  const auto good = body_of(bs::encode(sample_hello()));
  // Every truncation of a valid body.
  for (std::size_t n = 0; n < good.size(); ++n) {
    auto r = bs::decode_hello(good.data(), n);
    BOOST_TEST(!r.has_value());
  }
  // Trailing bytes.
  bytes longer = good;
  longer.resize(good.size() + 8, 0);
  BOOST_TEST(!bs::decode_hello(longer.data(), longer.size()).has_value());
  // Random bodies (fixed seed).
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    bytes junk(8 * (1 + rng() % 16));
    for (auto& x : junk)
      x = static_cast<std::uint8_t>(rng());
    (void)bs::decode_hello(junk.data(), junk.size());
    (void)bs::decode_hello_ack(junk.data(), junk.size());
  }
  // Above the limit.
  bytes big(bs::max_handshake_bytes + 8, 0);
  auto r = bs::decode_hello(big.data(), big.size());
  BOOST_TEST_REQUIRE(!r.has_value());
  BOOST_TEST(r.err().code == errc::oversized_frame);
}

BOOST_AUTO_TEST_CASE(reader_splits_one_message_whatever_the_chunking) {
  const auto msg = bs::encode(sample_hello());
  bytes stream = msg;
  const bytes after = {0xde, 0xad, 0xbe, 0xef};
  stream.insert(stream.end(), after.begin(), after.end());
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{7}, stream.size()}) {
    bs::handshake_reader r;
    std::size_t pos = 0;
    while (!r.complete()) {
      BOOST_TEST_REQUIRE(pos < stream.size());
      const std::size_t n = std::min(chunk, stream.size() - pos);
      auto used = r.feed(stream.data() + pos, n);
      BOOST_TEST_REQUIRE(used.has_value());
      pos += *used;
    }
    BOOST_TEST(pos == msg.size()); // the bytes after the message were left alone
    auto h = bs::decode_hello(r.body(), r.body_size());
    BOOST_TEST_REQUIRE(h.has_value());
    BOOST_TEST((*h == sample_hello()));
    BOOST_TEST(*r.feed(stream.data() + pos, stream.size() - pos) == 0u);
    r.reset();
    BOOST_TEST(!r.complete());
  }
}

BOOST_AUTO_TEST_CASE(reader_refuses_huge_and_empty_prefixes_for_good) {
  bs::handshake_reader r;
  const bytes huge = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
  auto e = r.feed(huge.data(), huge.size());
  BOOST_TEST_REQUIRE(!e.has_value());
  BOOST_TEST(e.err().code == errc::oversized_frame);
  const bytes good = bs::encode(sample_hello());
  BOOST_TEST(!r.feed(good.data(), good.size()).has_value()); // sticky
  r.reset();
  const bytes empty = {0, 0, 0, 0};
  auto e2 = r.feed(empty.data(), empty.size());
  BOOST_TEST_REQUIRE(!e2.has_value());
  BOOST_TEST(e2.err().code == errc::malformed_frame);
}

BOOST_AUTO_TEST_CASE(transcript_binds_role_nonces_ids_port_mode_sessions_and_refusal) {
  const auto h = sample_hello();
  const auto n = filled(100);
  const auto base = bs::proof_transcript(bs::proof_role::acceptor, h, 3, n);
  BOOST_TEST(base.size() == 9u + 1 + 2 + 32 + 32 + 4 + 4 + 2 + 1 + 8 + 8 + 1);
  BOOST_TEST(std::string(base.begin(), base.begin() + 9) == "banyan-v1");
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h, 3, n) == base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::initiator, h, 3, n) != base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h, 4, n) != base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h, 3, filled(101)) != base));
  auto h2 = h;
  h2.id = 8;
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h2, 3, n) != base));
  h2 = h;
  h2.challenge[0] ^= 1;
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h2, 3, n) != base));
  h2 = h;
  h2.listen_port = 1;
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h2, 3, n) != base));
  h2 = h;
  h2.plaintext = !h.plaintext;
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h2, 3, n) != base));
  h2 = h;
  h2.session = 0x1234;
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h2, 3, n) != base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h, 3, n, 0x1234) != base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::acceptor, h, 3, n, 0, bs::refusal::id_in_use)
              != base));
  BOOST_TEST((bs::proof_transcript(bs::proof_role::refusal, h, 3, n) != base));
}

BOOST_AUTO_TEST_SUITE_END()

// Writes the fuzz targets' seed corpora (docs/wire-protocol.md, "Fuzzing"):
//
//   corpus_gen FRAME_DIR HANDSHAKE_DIR
//
// FRAME_DIR (tests/schema/fuzz_corpus, for fuzz_frame_decoder): the body of a frame of
// every message type (two each, one of them handed back where the type is a
// collective's), the same frames as Cap'n Proto messages of several segments, and
// streams of whole frames behind the chunk-size byte the target reads first.
// HANDSHAKE_DIR (tests/net/fuzz_handshake_corpus, for fuzz_handshake): behind the
// target's two control bytes, each shape of Hello and HelloAck, whole handshakes
// followed by records, and record headers at the limits.
//
// Deterministic (fixed seeds): running it again rewrites the same files.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "banyan.capnp.h"
#include "banyan/net/record_cipher.hpp"
#include "banyan/schema/codec.hpp"
#include "banyan/schema/handshake.hpp"
#include "../schema/message_gen.hpp"

namespace {

namespace bs = banyan::schema;
namespace cs = banyan::capnp_schema;
namespace net = banyan::net;
namespace wire = banyan::wire;
using bytes = std::vector<std::uint8_t>;

std::size_t written = 0;

void put(const std::filesystem::path& dir, const std::string& name, const bytes& b) {
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) {
    std::cerr << "corpus_gen: cannot write " << (dir / name).string() << "\n";
    std::exit(1);
  }
  ++written;
}

bytes body_of(const bytes& frame) {
  return bytes(frame.begin() + bs::frame_prefix_bytes, frame.end());
}

/// The same message laid out in segments of at most `words` words each.
bytes resegmented(const bytes& body, unsigned words) {
  std::vector<capnp::word> aligned(body.size() / sizeof(capnp::word));
  std::memcpy(aligned.data(), body.data(), body.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(aligned.data(), aligned.size()));
  capnp::MallocMessageBuilder builder(words, capnp::AllocationStrategy::FIXED_SIZE);
  builder.setRoot(reader.getRoot<cs::Frame>());
  auto flat = capnp::messageToFlatArray(builder);
  auto b = flat.asBytes();
  return bytes(b.begin(), b.end());
}

bool collective(const wire::message& m) {
  return wire::kind_of(m) != banyan::collective_kind::none;
}

void frame_corpus(const std::filesystem::path& dir) {
  using banyan::test::gen;
  std::vector<bytes> frames; // whole frames, for the streams
  for (std::size_t type = 0; type < banyan::test::message_type_count; ++type)
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
      gen g(seed * 100 + type);
      g.max_list = 2;
      g.max_data = 40;
      const auto e = g.envelope(type);
      const bool returned = seed == 2 && collective(e.body);
      const auto frame = bs::encode(e, returned);
      const std::string name = std::string(wire::name_of(e.body)) + "-" + std::to_string(seed);
      put(dir, "body-" + name + ".bin", body_of(frame));
      if (seed == 1)
        put(dir, "segments-" + name + ".bin", resegmented(body_of(frame), 3));
      frames.push_back(frame);
    }
  // Streams: a chunk-size byte, then whole frames back to back.
  gen pick(7);
  for (std::uint8_t s = 0; s < 6; ++s) {
    bytes stream{static_cast<std::uint8_t>(s * 11)};
    for (int i = 0; i < 4; ++i) {
      const auto& f = frames[pick.upto(frames.size() - 1)];
      stream.insert(stream.end(), f.begin(), f.end());
    }
    put(dir, "stream-" + std::to_string(s) + ".bin", stream);
  }
  // A stream whose last frame is cut short.
  bytes cut{3};
  cut.insert(cut.end(), frames[0].begin(), frames[0].end());
  cut.insert(cut.end(), frames[1].begin(), frames[1].end() - 5);
  put(dir, "stream-truncated.bin", cut);
}

bs::nonce filled(std::uint8_t seed) {
  bs::nonce n{};
  for (auto& x : n)
    x = seed++;
  return n;
}

bytes with_controls(std::uint8_t chunk, std::uint8_t record, const bytes& stream) {
  bytes b{chunk, record};
  b.insert(b.end(), stream.begin(), stream.end());
  return b;
}

void handshake_corpus(const std::filesystem::path& dir) {
  const bs::hello h{bs::protocol_version, 7, filled(1), 40123, false, 0x1122334455667788u};
  bs::hello plain = h;
  plain.plaintext = true;
  bs::proof mac{};
  mac.fill(0xab);
  const std::vector<std::pair<std::string, bytes>> messages{
      {"hello", bs::encode(h)},
      {"hello-plaintext", bs::encode(plain)},
      {"hello-version-7", bs::encode(bs::hello{7, 5, filled(3), 0})},
      {"ack-acceptor", bs::encode(bs::hello_ack{bs::protocol_version, 3, filled(9), mac, false,
                                                0x99aabbccu})},
      {"ack-initiator", bs::encode(bs::hello_ack{bs::protocol_version, 7, std::nullopt, mac})},
      {"ack-version-mismatch", bs::encode(bs::hello_ack{5, 3, std::nullopt, std::nullopt})},
      {"ack-mode-mismatch",
       bs::encode(bs::hello_ack{bs::protocol_version, 3, std::nullopt, std::nullopt, true})},
      {"ack-refusal", bs::encode(bs::hello_ack{bs::protocol_version, 7, filled(9), mac, false,
                                               0x99aabbccu, bs::refusal::id_in_use})},
      {"ack-refusal-after-proof",
       bs::encode(bs::hello_ack{bs::protocol_version, 3, std::nullopt, mac, false, 0x99aabbccu,
                                bs::refusal::id_in_use})},
  };
  std::uint8_t chunk = 0;
  for (auto& [name, msg] : messages)
    put(dir, name + ".bin", with_controls(chunk += 5, 17, msg));

  // Whole handshakes (Hello, the answer, the proof), then records as a sender seals them.
  const auto key = net::derive_record_key("corpus secret", h, 3, filled(9),
                                          net::record_direction::initiator_to_acceptor);
  for (int i = 0; i < 3; ++i) {
    bytes stream = messages[0].second;
    stream.insert(stream.end(), messages[3].second.begin(), messages[3].second.end());
    stream.insert(stream.end(), messages[4].second.begin(), messages[4].second.end());
    net::record_sealer sealer(key);
    const auto frame = bs::encode(wire::envelope{7, 3, wire::ping{static_cast<std::uint64_t>(i)}});
    for (std::size_t at = 0; at < frame.size(); at += 20 + 10 * i) {
      const std::size_t len = std::min<std::size_t>(20 + 10 * i, frame.size() - at);
      bytes rec(len + net::record_overhead);
      sealer.seal(frame.data() + at, len, rec.data());
      stream.insert(stream.end(), rec.begin(), rec.end());
    }
    put(dir, "handshake-and-records-" + std::to_string(i) + ".bin",
        with_controls(static_cast<std::uint8_t>(1 + 30 * i), static_cast<std::uint8_t>(i), stream));
  }
  // Record headers at the limits: 0, 1, max_record, max_record + 1.
  for (std::uint32_t len : {0u, 1u, static_cast<std::uint32_t>(net::max_record),
                            static_cast<std::uint32_t>(net::max_record) + 1}) {
    bytes rec{static_cast<std::uint8_t>(len), static_cast<std::uint8_t>(len >> 8),
              static_cast<std::uint8_t>(len >> 16), static_cast<std::uint8_t>(len >> 24)};
    rec.resize(rec.size() + std::min<std::size_t>(len, 64) + net::record_tag_bytes, 0x42);
    put(dir, "record-length-" + std::to_string(len) + ".bin", with_controls(4, 200, rec));
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: corpus_gen FRAME_DIR HANDSHAKE_DIR\n";
    return 2;
  }
  const std::filesystem::path frames = argv[1], handshakes = argv[2];
  std::filesystem::create_directories(frames);
  std::filesystem::create_directories(handshakes);
  frame_corpus(frames);
  const auto in_frames = written;
  handshake_corpus(handshakes);
  std::cout << "corpus_gen: " << in_frames << " files in " << frames.string() << ", "
            << written - in_frames << " in " << handshakes.string() << "\n";
  return 0;
}

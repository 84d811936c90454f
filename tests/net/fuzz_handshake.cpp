// libFuzzer entry point for what a connection reads before and around its frames: the
// handshake messages (schema/handshake.hpp) and the record layer (net/record_cipher.hpp).
// Built and replayed like the frame decoder's target (tests/fuzz/fuzz.cmake; seed corpus
// tests/net/fuzz_handshake_corpus; docs/wire-protocol.md, "Fuzzing").
//
// Input: byte 0 sets the chunk size the handshake reader is fed with, byte 1 the record
// size, the rest is the stream. Checked, aborting otherwise:
// - the handshake reader splits messages whatever the chunking; every Hello or HelloAck
//   that decodes re-encodes to one that decodes to the same value, and its proof
//   transcript has the documented length; a reader error is sticky;
// - the stream sealed into records (keys derived from the input) opens again to the same
//   bytes, in order; with one bit flipped, the record holding it fails authentication
//   and the records before it still open;
// - the raw stream read as records under a key nobody used never authenticates.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "banyan/net/record_cipher.hpp"
#include "banyan/schema/handshake.hpp"

namespace {

namespace bs = banyan::schema;
namespace net = banyan::net;
using bytes = std::vector<std::uint8_t>;

void require(bool ok) {
  if (!ok)
    std::abort();
}

constexpr std::size_t transcript_bytes = 9 + 1 + 2 + 32 + 32 + 4 + 4 + 2 + 1 + 8 + 8 + 1;

void check_message(const std::uint8_t* body, std::size_t n) {
  if (auto h = bs::decode_hello(body, n)) {
    const auto again = bs::encode(*h);
    auto back = bs::decode_hello(again.data() + bs::frame_prefix_bytes,
                                 again.size() - bs::frame_prefix_bytes);
    require(back.has_value() && *back == *h);
    for (auto role : {bs::proof_role::acceptor, bs::proof_role::initiator, bs::proof_role::refusal})
      require(bs::proof_transcript(role, *h, h->id ^ 1, h->challenge, h->session,
                                   bs::refusal::id_in_use)
                  .size()
              == transcript_bytes);
  }
  if (auto a = bs::decode_hello_ack(body, n)) {
    const auto again = bs::encode(*a);
    auto back = bs::decode_hello_ack(again.data() + bs::frame_prefix_bytes,
                                     again.size() - bs::frame_prefix_bytes);
    require(back.has_value() && *back == *a);
  }
}

void handshake_messages(const std::uint8_t* p, std::size_t n, std::size_t chunk) {
  bs::handshake_reader reader;
  std::size_t at = 0;
  while (at < n) {
    const std::size_t k = std::min(chunk, n - at);
    auto used = reader.feed(p + at, k);
    if (!used) {
      require(!reader.complete());
      require(!reader.feed(p, n).has_value()); // sticky
      return;
    }
    require(*used <= k);
    at += *used;
    if (reader.complete()) {
      check_message(reader.body(), reader.body_size());
      require(*reader.feed(p + at, n - at) == 0); // a complete reader takes nothing
      reader.reset();
    } else {
      require(*used == k); // an incomplete message takes all it is given
    }
  }
}

net::record_key key_from(const std::uint8_t* p, std::size_t n) {
  bs::hello h;
  bs::nonce theirs{};
  for (std::size_t i = 0; i < n; ++i) {
    h.challenge[i % bs::nonce_bytes] ^= p[i];
    theirs[(i * 7) % bs::nonce_bytes] += p[i];
  }
  h.id = n > 0 ? p[0] : 0;
  const std::string_view secret(reinterpret_cast<const char*>(p), std::min<std::size_t>(n, 40));
  return net::derive_record_key(secret, h, 3, theirs, net::record_direction::initiator_to_acceptor);
}

void records(const std::uint8_t* p, std::size_t n, std::size_t record, std::size_t flip) {
  const auto k = key_from(p, n);
  // Sealed as the sender cuts them, then opened in order.
  bytes sealed;
  std::vector<std::size_t> starts;
  {
    net::record_sealer sealer(k);
    for (std::size_t at = 0; at < n; at += record) {
      const std::size_t len = std::min(record, n - at);
      starts.push_back(sealed.size());
      sealed.resize(sealed.size() + len + net::record_overhead);
      sealer.seal(p + at, len, sealed.data() + starts.back());
    }
  }
  auto open_all = [&](bytes stream, std::size_t expect_fail_at) {
    net::record_opener opener(k);
    std::size_t plain = 0;
    for (std::size_t r = 0; r < starts.size(); ++r) {
      std::uint8_t* rec = stream.data() + starts[r];
      const std::size_t len = std::min(record, n - plain);
      auto said = net::record_length(rec);
      const bool ok = opener.open(rec, rec + net::record_header_bytes, len,
                                  rec + net::record_header_bytes + len);
      if (r == expect_fail_at) {
        require(!ok);
        return;
      }
      require(ok && said && *said == len);
      require(std::memcmp(rec + net::record_header_bytes, p + plain, len) == 0);
      plain += len;
    }
    require(plain == n);
  };
  open_all(sealed, starts.size());
  if (sealed.empty())
    return;
  const std::size_t bit = flip % (sealed.size() * 8);
  bytes altered = sealed;
  altered[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  const std::size_t hit =
      static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), bit / 8) - starts.begin()) - 1;
  open_all(std::move(altered), hit);
}

void forged_records(const std::uint8_t* p, std::size_t n) {
  net::record_key k;
  k.key.fill(0x5a);
  net::record_opener opener(k);
  bytes stream(p, p + n);
  std::size_t at = 0;
  while (n - at >= net::record_header_bytes) {
    auto len = net::record_length(stream.data() + at);
    if (!len)
      return; // a receiver closes here
    if (n - at < net::record_overhead + *len)
      return; // incomplete: a receiver waits for more
    std::uint8_t* rec = stream.data() + at;
    require(!opener.open(rec, rec + net::record_header_bytes, *len,
                         rec + net::record_header_bytes + *len));
    at += net::record_overhead + *len;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  const std::size_t chunk = 1 + data[0] % 64;
  const std::size_t record = 1 + (std::size_t{data[1]} * 37) % 4096;
  const std::uint8_t* p = data + 2;
  const std::size_t n = size - 2;
  handshake_messages(p, n, chunk);
  records(p, n, record, std::size_t{data[0]} * 8191 + data[1]);
  forged_records(p, n);
  return 0;
}

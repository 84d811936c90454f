// Records as docs/transport.md defines them, checked against an independent AES-256-GCM:
// OpenSSL's EVP computes each record from the documented nonce (IV xor k) and associated
// data (the length header), and the sealer must produce the same bytes, the opener accept
// them, and refuse them when altered, reordered or opened under another key.

#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <openssl/evp.h>

#include "banyan/net/record_cipher.hpp"

namespace net = banyan::net;
using bytes = std::vector<std::uint8_t>;

namespace {

net::record_key test_key(std::uint8_t seed) {
  net::record_key k;
  for (std::size_t i = 0; i < k.key.size(); ++i)
    k.key[i] = static_cast<std::uint8_t>(seed + 7 * i);
  for (std::size_t i = 0; i < k.iv.size(); ++i)
    k.iv[i] = static_cast<std::uint8_t>(seed ^ (31 * i + 1));
  return k;
}

bytes pattern(std::size_t n, std::uint8_t seed) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(seed + i * 131 + (i >> 9));
  return b;
}

// Record `index` of a direction keyed `k`, sealed with OpenSSL's EVP as the docs say.
bytes evp_record(const net::record_key& k, std::uint64_t index, const bytes& plain) {
  std::array<std::uint8_t, 12> nonce = k.iv;
  for (int i = 0; i < 8; ++i)
    nonce[11 - i] ^= static_cast<std::uint8_t>(index >> (8 * i));
  const std::size_t n = plain.size();
  bytes out(net::record_header_bytes + n + net::record_tag_bytes);
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  const bool ok =
      ctx != nullptr
      && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, k.key.data(), nonce.data()) == 1
      && EVP_EncryptUpdate(ctx, nullptr, &len, out.data(), 4) == 1
      && EVP_EncryptUpdate(ctx, out.data() + 4, &len, plain.data(), static_cast<int>(n)) == 1
      && EVP_EncryptFinal_ex(ctx, out.data() + 4 + n, &len) == 1
      && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out.data() + 4 + n) == 1;
  EVP_CIPHER_CTX_free(ctx);
  BOOST_TEST_REQUIRE(ok);
  return out;
}

bytes sealed(net::record_sealer& s, const bytes& plain) {
  bytes out(plain.size() + net::record_overhead);
  s.seal(plain.data(), plain.size(), out.data());
  return out;
}

// Opens `record` (as on the wire) with `o`; the plaintext, or nothing if refused.
std::optional<bytes> opened(net::record_opener& o, bytes record) {
  const std::size_t n = record.size() - net::record_overhead;
  if (!o.open(record.data(), record.data() + 4, n, record.data() + 4 + n))
    return std::nullopt;
  return bytes(record.begin() + 4, record.begin() + 4 + static_cast<std::ptrdiff_t>(n));
}

// Sizes across GCM's block and the implementations' bulk boundaries, up to max_record.
const std::vector<std::size_t> sizes{
    1, 15, 16, 17, 95, 96, 97, 255, 4096, 65537, 262144, net::max_record};

} // namespace

BOOST_AUTO_TEST_CASE(sealed_records_equal_aes_256_gcm_with_the_documented_nonce_and_header) {
  const auto k = test_key(3);
  net::record_sealer s(k);
  net::record_sealer in_place(k);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const bytes plain = pattern(sizes[i], static_cast<std::uint8_t>(i));
    const bytes want = evp_record(k, i, plain);
    BOOST_TEST((sealed(s, plain) == want), "record " << i << " of " << sizes[i] << " bytes");
    // Sealed in place (the plaintext already where the ciphertext goes): the same bytes.
    bytes buf(plain.size() + net::record_overhead);
    std::copy(plain.begin(), plain.end(), buf.begin() + 4);
    in_place.seal(buf.data() + 4, plain.size(), buf.data());
    BOOST_TEST((buf == want), "record " << i << " sealed in place");
  }
  BOOST_TEST(s.count() == sizes.size());
}

BOOST_AUTO_TEST_CASE(opener_accepts_aes_256_gcm_records_in_order_and_nothing_else) {
  const auto k = test_key(9);
  { // in order: every record opens to its plaintext
    net::record_opener o(k);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const bytes plain = pattern(sizes[i], static_cast<std::uint8_t>(40 + i));
      const auto got = opened(o, evp_record(k, i, plain));
      BOOST_TEST_REQUIRE(got.has_value(), "record " << i << " refused");
      BOOST_TEST((*got == plain), "record " << i);
    }
  }
  const bytes plain = pattern(1000, 5);
  const bytes good = evp_record(k, 0, plain);
  // One bit altered anywhere: in the length header (associated data), the ciphertext or
  // the tag.
  for (std::size_t at : {std::size_t{0}, std::size_t{4}, std::size_t{500}, good.size() - 1}) {
    bytes bad = good;
    bad[at] ^= 0x10;
    net::record_opener o(k);
    BOOST_TEST(!opened(o, bad).has_value(), "bit flipped at byte " << at);
  }
  { // out of order: record 1 offered as the first
    net::record_opener o(k);
    BOOST_TEST(!opened(o, evp_record(k, 1, plain)).has_value());
  }
  { // replayed: record 0 twice
    net::record_opener o(k);
    BOOST_TEST(opened(o, good).has_value());
    BOOST_TEST(!opened(o, good).has_value());
  }
  { // under another key
    net::record_opener o(test_key(10));
    BOOST_TEST(!opened(o, good).has_value());
  }
}

BOOST_AUTO_TEST_CASE(a_sealer_and_an_opener_moved_keep_their_place_in_the_stream) {
  const auto k = test_key(17);
  net::record_sealer s(k);
  net::record_opener o(k);
  const bytes a = pattern(300, 1), b = pattern(70000, 2);
  BOOST_TEST((opened(o, sealed(s, a)) == std::optional<bytes>(a)));
  net::record_sealer s2(std::move(s));
  net::record_opener o2(std::move(o));
  BOOST_TEST(s2.count() == 1u);
  BOOST_TEST(o2.count() == 1u);
  BOOST_TEST((opened(o2, sealed(s2, b)) == std::optional<bytes>(b)));
}

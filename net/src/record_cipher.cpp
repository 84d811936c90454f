// Record sealing and opening with libgcrypt's AES-256-GCM; the key schedule (HKDF with
// OpenSSL's HMAC-SHA256). See record_cipher.hpp and docs/transport.md, "Security".
//
// libgcrypt rather than OpenSSL's EVP for the records: on this project's machines (OpenSSL
// 3.0, libgcrypt 1.10, a CPU with VAES) it seals and opens large records some 1.2x as fast
// and a small record in half the time (docs/decisions.md).

#include "banyan/net/record_cipher.hpp"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gcrypt.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace banyan::net {

namespace {

using mac = std::array<std::uint8_t, 32>;

mac hmac(const std::uint8_t* key, std::size_t key_len, const std::uint8_t* data, std::size_t n) {
  static const unsigned char no_key = 0;
  mac out{};
  unsigned len = 0;
  const void* k = key_len == 0 ? static_cast<const void*>(&no_key) : key;
  [[maybe_unused]] const unsigned char* r =
      HMAC(EVP_sha256(), k, static_cast<int>(key_len), data, n, out.data(), &len);
  assert(r != nullptr && len == out.size());
  return out;
}

void put_le32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// The nonce of record `k`: the IV with k (big-endian) xored into its last 8 bytes.
std::array<std::uint8_t, 12> nonce_of(const std::array<std::uint8_t, 12>& iv, std::uint64_t k) {
  auto n = iv;
  for (int i = 0; i < 8; ++i)
    n[11 - i] ^= static_cast<std::uint8_t>(k >> (8 * i));
  return n;
}

// Failure here means the cipher library itself is unusable (older at run time than at
// build time, no memory, no AES-GCM): a process that cannot encrypt must not talk.
[[noreturn]] void no_cipher() {
  std::fputs("banyan: libgcrypt's AES-256-GCM failed; a processor that cannot encrypt "
             "stops\n",
             stderr);
  std::abort();
}

gcry_cipher_handle* new_handle(const record_key& k) {
  // libgcrypt initializes itself on its first version check; a library calls it too.
  static const bool ready = gcry_check_version(GCRYPT_VERSION) != nullptr;
  gcry_cipher_hd_t h = nullptr;
  if (!ready || gcry_cipher_open(&h, GCRY_CIPHER_AES256, GCRY_CIPHER_MODE_GCM, 0) != 0)
    no_cipher();
  if (gcry_cipher_setkey(h, k.key.data(), k.key.size()) != 0) {
    gcry_cipher_close(h);
    no_cipher();
  }
  return h;
}

} // namespace

record_key derive_record_key(std::string_view secret, const schema::hello& h, proc_id acceptor,
                             const schema::nonce& acceptor_nonce, record_direction d) {
  std::vector<std::uint8_t> salt(h.challenge.begin(), h.challenge.end());
  salt.insert(salt.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  const mac prk = hmac(salt.data(), salt.size(),
                       reinterpret_cast<const std::uint8_t*>(secret.data()), secret.size());
  const std::string label = d == record_direction::initiator_to_acceptor ? "banyan-v1 records i>a"
                                                                         : "banyan-v1 records a>i";
  std::vector<std::uint8_t> info(label.begin(), label.end());
  put_le32(info, h.id);
  put_le32(info, acceptor);
  // HKDF-Expand: T(1) = HMAC(PRK, info | 1), T(2) = HMAC(PRK, T(1) | info | 2).
  std::vector<std::uint8_t> t1_in = info;
  t1_in.push_back(1);
  const mac t1 = hmac(prk.data(), prk.size(), t1_in.data(), t1_in.size());
  std::vector<std::uint8_t> t2_in(t1.begin(), t1.end());
  t2_in.insert(t2_in.end(), info.begin(), info.end());
  t2_in.push_back(2);
  const mac t2 = hmac(prk.data(), prk.size(), t2_in.data(), t2_in.size());
  record_key k;
  std::copy(t1.begin(), t1.end(), k.key.begin());
  std::copy(t2.begin(), t2.begin() + static_cast<std::ptrdiff_t>(k.iv.size()), k.iv.begin());
  return k;
}

std::optional<std::size_t> record_length(const std::uint8_t* header) {
  const std::size_t n = std::size_t{header[0]} | std::size_t{header[1]} << 8
                        | std::size_t{header[2]} << 16 | std::size_t{header[3]} << 24;
  if (n == 0 || n > max_record)
    return std::nullopt;
  return n;
}

record_cipher::record_cipher(const record_key& k) : hd_(new_handle(k)), iv_(k.iv) {}
record_cipher::~record_cipher() {
  if (hd_ != nullptr)
    gcry_cipher_close(hd_);
}
record_cipher::record_cipher(record_cipher&& o) noexcept : hd_(o.hd_), iv_(o.iv_), next_(o.next_) {
  o.hd_ = nullptr;
}

std::array<std::uint8_t, 12> record_cipher::next_nonce() {
  return nonce_of(iv_, next_++);
}

void record_sealer::seal(const std::uint8_t* in, std::size_t n, std::uint8_t* out) {
  assert(n > 0 && n <= max_record);
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  const auto nonce = next_nonce();
  std::uint8_t* body = out + record_header_bytes;
  // A key set once; each record sets its nonce, then the length (associated data), then
  // the body (one call: GCM's last call may end off a 16-byte boundary), then the tag.
  // GCM cannot fail on valid sizes; if the library does, nothing half-sealed (or, sealed
  // in place, still plain) may leave.
  const bool ok = gcry_cipher_setiv(hd_, nonce.data(), nonce.size()) == 0
                  && gcry_cipher_authenticate(hd_, out, record_header_bytes) == 0
                  && (in == body ? gcry_cipher_encrypt(hd_, body, n, nullptr, 0)
                                 : gcry_cipher_encrypt(hd_, body, n, in, n))
                         == 0
                  && gcry_cipher_gettag(hd_, body + n, record_tag_bytes) == 0;
  if (!ok)
    no_cipher();
}

bool record_opener::open(const std::uint8_t* header, std::uint8_t* p, std::size_t n,
                         const std::uint8_t* tag) {
  const auto nonce = next_nonce();
  // checktag compares in constant time; GPG_ERR_CHECKSUM when the record is not authentic.
  return gcry_cipher_setiv(hd_, nonce.data(), nonce.size()) == 0
         && gcry_cipher_authenticate(hd_, header, record_header_bytes) == 0
         && gcry_cipher_decrypt(hd_, p, n, nullptr, 0) == 0
         && gcry_cipher_checktag(hd_, tag, record_tag_bytes) == 0;
}

} // namespace banyan::net

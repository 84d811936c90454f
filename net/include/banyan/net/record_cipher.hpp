#pragma once
/// Authenticated encryption of a connection's byte stream (docs/transport.md, "Security").
///
/// After the handshake, the initiator's bytes travel as records:
///
///     | length L (LE32, clear) | L bytes of AES-256-GCM ciphertext | 16-byte tag |
///
/// The plaintext inside the records is exactly the plaintext stream (length-prefixed
/// Frames); the sender chooses where records begin and end (the transport cuts them at a
/// frame's head and its payload, so that a receiver can decrypt a payload in its final
/// place). Each direction of a connection has its own key and IV, derived from the shared
/// secret and both handshake nonces (`derive_record_key`); record k of a direction is
/// sealed with nonce IV xor k (k as a 64-bit big-endian number in the IV's last 8 bytes,
/// as in TLS 1.3) and the length as associated data. So a record that is altered,
/// forged, replayed, dropped or moved fails authentication at the receiver.
///
/// The cipher is libgcrypt's AES-256-GCM; the key schedule uses OpenSSL's HMAC-SHA256.
/// No sockets here: the transport hands bytes to a sealer and an opener.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "banyan/core/types.hpp"
#include "banyan/schema/handshake.hpp"

struct gcry_cipher_handle; // libgcrypt's cipher handle (gcry_cipher_hd_t)

namespace banyan::net {

inline constexpr std::size_t record_header_bytes = 4;
inline constexpr std::size_t record_tag_bytes = 16;
inline constexpr std::size_t record_overhead = record_header_bytes + record_tag_bytes;
/// Most plaintext bytes in one record; a header announcing more (or 0) is refused.
inline constexpr std::size_t max_record = 1u << 20;

/// The key and IV of one direction of one connection.
struct record_key {
  std::array<std::uint8_t, 32> key{};
  std::array<std::uint8_t, 12> iv{};
};

enum class record_direction : std::uint8_t { initiator_to_acceptor, acceptor_to_initiator };

/// HKDF-SHA256 (RFC 5869) of the shared secret:
///
///     PRK  = HMAC-SHA256(salt = nonce_i | nonce_a, secret)
///     info = "banyan-v1 records " + ("i>a" | "a>i") | id_i (LE32) | id_a (LE32)
///     key | iv = the first 44 bytes of HKDF-Expand(PRK, info)
///
/// `h` is the initiator's Hello (its id and nonce), `acceptor` and `acceptor_nonce` the
/// acceptor's. Fresh nonces on both sides make every connection's keys new.
record_key derive_record_key(std::string_view secret, const schema::hello& h, proc_id acceptor,
                             const schema::nonce& acceptor_nonce, record_direction d);

/// The length a record header announces, or nothing when it is 0 or above `max_record`.
std::optional<std::size_t> record_length(const std::uint8_t* header);

/// What a sealer and an opener of one direction share: its AES-256-GCM handle, its IV
/// and the number of the next record. Not thread-safe; movable.
class record_cipher {
public:
  ~record_cipher();
  record_cipher(record_cipher&& o) noexcept;
  record_cipher& operator=(record_cipher&&) = delete;
  record_cipher(const record_cipher&) = delete;

  /// Records sealed or opened so far (the next record's number).
  std::uint64_t count() const noexcept { return next_; }

protected:
  explicit record_cipher(const record_key& k);
  /// The nonce of the next record, which it counts.
  std::array<std::uint8_t, 12> next_nonce();

  gcry_cipher_handle* hd_ = nullptr;

private:
  std::array<std::uint8_t, 12> iv_{};
  std::uint64_t next_ = 0;
};

/// Seals one direction's records, in order.
class record_sealer : public record_cipher {
public:
  explicit record_sealer(const record_key& k) : record_cipher(k) {}

  /// Seals `n` (1..max_record) bytes at `in` into `out`, which must hold
  /// `n + record_overhead` bytes: header, ciphertext, tag. `in` may be
  /// `out + record_header_bytes` (in place); otherwise the ranges must not overlap.
  void seal(const std::uint8_t* in, std::size_t n, std::uint8_t* out);
};

/// Opens one direction's records, in order.
class record_opener : public record_cipher {
public:
  explicit record_opener(const record_key& k) : record_cipher(k) {}

  /// Decrypts the record with header `header` (as received), ciphertext `p` (`n` bytes,
  /// decrypted in place) and tag `tag`, as the next record of the stream. False when it
  /// fails authentication (the bytes at `p` are then garbage); the stream is then
  /// broken and the connection must close.
  bool open(const std::uint8_t* header, std::uint8_t* p, std::size_t n, const std::uint8_t* tag);
};

} // namespace banyan::net

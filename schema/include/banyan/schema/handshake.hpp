#pragma once
/// The connection handshake's messages (`Hello`, `HelloAck` in schema/banyan.capnp): their
/// values, their encoding, and the bytes a proof is computed over. No sockets, no
/// clocks, no randomness and no cryptography here: the transport supplies nonces and the
/// MAC (`net::hmac_sha256`), so this layer stays testable and free of crypto libraries.
///
/// Flow on every TCP connection (the initiator is the side that connected and the only
/// side that sends Frames on it; see docs/transport.md):
///
///     initiator                                           acceptor
///       | Hello{version, id_i, nonce_i, listen_port, session_i} ---> |
///       | <-- HelloAck{version, id_a, nonce_a, proof_a, session_a}   |  proof_a: role acceptor
///       | HelloAck{version, id_i, proof_i} ------------------------> |  proof_i: role initiator
///       | Frame, Frame, ... ---------------------------------------> |
///
/// An acceptor refuses an initiator that claims a processor id another process holds
/// (docs/transport.md, "One process per id"): in its HelloAck (`refusal` set, covered by
/// proof_a) when the claimed id is its own, or, after checking proof_i, with a further
/// HelloAck{version, id_a, proof_r, session_a, refusal} (proof_r: role refusal); then it
/// closes.
///
/// Each message travels in the frame layout of codec.hpp (4-byte little-endian length,
/// then one unpacked Cap'n Proto message), with `Hello` or `HelloAck` as root; the
/// connection's state says which root comes next.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/types.hpp"
#include "banyan/schema/codec.hpp"

namespace banyan::schema {

/// Length of a handshake nonce and of a proof (an HMAC-SHA256 tag), in bytes.
inline constexpr std::size_t nonce_bytes = 32;
inline constexpr std::size_t proof_bytes = 32;

/// Largest body a handshake message may announce; real ones are under 100 bytes, so a
/// stray or hostile length prefix is refused before anything is buffered.
inline constexpr std::size_t max_handshake_bytes = 1024;

using nonce = std::array<std::uint8_t, nonce_bytes>;
using proof = std::array<std::uint8_t, proof_bytes>;

/// Why an acceptor refuses an initiator that proved the secret (`HelloAck.refusal`).
enum class refusal : std::uint8_t {
  none = 0,
  id_in_use = 1, ///< another process runs under the initiator's processor id
};

/// Initiator -> acceptor: who I am, and a fresh challenge.
struct hello {
  std::uint16_t version = protocol_version;
  proc_id id = no_proc;
  nonce challenge{};
  std::uint16_t listen_port = 0; ///< where the initiator accepts connections; 0: nowhere
  /// The initiator sends its Frames unencrypted; both sides must run the same mode.
  bool plaintext = false;
  /// The initiator's process: random per transport, so that two processes claiming one
  /// id are told apart.
  std::uint64_t session = 0;
  friend bool operator==(const hello& a, const hello& b) {
    return a.version == b.version && a.id == b.id && a.challenge == b.challenge
           && a.listen_port == b.listen_port && a.plaintext == b.plaintext
           && a.session == b.session;
  }
};

/// The answer to a `hello` (acceptor -> initiator: `challenge`, `mac` and `session`
/// set) and the initiator's proof (`mac` only). An acceptor that does not speak the
/// initiator's version, or runs the other mode (`plaintext`), answers with neither, so
/// the initiator can report the mismatch. A refusal (`verdict` set) comes in the answer
/// itself or in a further message after the initiator's proof (`mac` and `session`, no
/// `challenge`).
struct hello_ack {
  std::uint16_t version = protocol_version;
  proc_id id = no_proc;
  std::optional<nonce> challenge;
  std::optional<proof> mac;
  bool plaintext = false;    ///< the sender's mode
  std::uint64_t session = 0; ///< acceptor: its process (see `hello::session`)
  refusal verdict = refusal::none;
  friend bool operator==(const hello_ack& a, const hello_ack& b) {
    return a.version == b.version && a.id == b.id && a.challenge == b.challenge && a.mac == b.mac
           && a.plaintext == b.plaintext && a.session == b.session && a.verdict == b.verdict;
  }
};

/// "id in use", "none"
const char* to_string(refusal r);

/// The whole message (length prefix included), ready for the socket.
std::vector<std::uint8_t> encode(const hello& h);
std::vector<std::uint8_t> encode(const hello_ack& a);

/// Decode one message body (the bytes after the prefix). Never throws. The version is
/// reported, not checked (the transport decides what to answer). Errors:
/// `oversized_frame` above `max_handshake_bytes`; `malformed_frame` for anything that is
/// not exactly one valid message of that root type, a nonce or proof of the wrong
/// length, or an unknown refusal.
expected<hello> decode_hello(const std::uint8_t* p, std::size_t n);
expected<hello_ack> decode_hello_ack(const std::uint8_t* p, std::size_t n);

/// Which side a proof speaks for. Part of the MACed bytes, so that a proof one side
/// produced can never be replayed as the other side's. `refusal`: the acceptor's further
/// HelloAck that refuses an initiator after its proof.
enum class proof_role : std::uint8_t { acceptor = 'A', initiator = 'I', refusal = 'R' };

/// The bytes a proof is the MAC of:
///
///     "banyan-v1" | role (1 byte) | version (LE16) | h.challenge (32) |
///     acceptor_challenge (32) | h.id (LE32) | acceptor (LE32) | h.listen_port (LE16) |
///     h.plaintext (1 byte: 1 plaintext, 0 encrypted) | h.session (LE64) |
///     acceptor_session (LE64) | verdict (1 byte)
///
/// Both nonces make a proof fresh and bound to this connection; both ids bind it to the
/// pair; the listen port is covered because the acceptor may remember it as the
/// initiator's address; the mode, so that nobody on the path can turn encryption off;
/// the sessions and the verdict, so that nobody on the path can forge a refusal or the
/// session that decides one.
std::vector<std::uint8_t> proof_transcript(proof_role role, const hello& h, proc_id acceptor,
                                           const nonce& acceptor_challenge,
                                           std::uint64_t acceptor_session = 0,
                                           refusal verdict = refusal::none);

/// Splits one handshake message off a byte stream, whatever the chunking.
/// Bytes after the message are not consumed: they belong to what follows (for the
/// acceptor, the initiator's proof and then its Frames may arrive in one read).
class handshake_reader {
public:
  /// Consumes bytes of the current message; returns how many it took (fewer than `n`
  /// once the message is complete), or an error: `oversized_frame` as soon as the prefix
  /// announces more than `max_handshake_bytes`, `malformed_frame` for an empty body.
  /// Errors are sticky. Feeding a complete reader consumes nothing.
  expected<std::size_t> feed(const std::uint8_t* p, std::size_t n);

  /// True once a whole message has been read.
  bool complete() const noexcept {
    return !failure_ && prefix_len_ == frame_prefix_bytes && body_.size() == body_len_;
  }
  /// The complete message's body (valid while `complete()`).
  const std::uint8_t* body() const noexcept { return body_.data(); }
  std::size_t body_size() const noexcept { return body_.size(); }

  /// Prepares for the next message.
  void reset();

private:
  std::uint8_t prefix_[frame_prefix_bytes] = {};
  std::size_t prefix_len_ = 0;
  std::size_t body_len_ = 0; // announced body length, valid once the prefix is complete
  std::vector<std::uint8_t> body_;
  std::optional<error> failure_;
};

} // namespace banyan::schema

#pragma once
/// Converts `banyan::wire` messages to and from frames: the bytes the TCP transport sends.
///
/// A frame is a 4-byte little-endian length N, then N bytes of an unpacked Cap'n Proto
/// flat-array message whose root is `Frame` (schema/banyan.capnp). `encode` always
/// writes a single segment, so its frame's size is exactly `wire::wire_size(body)`;
/// `encode_frame` (what the TCP transport sends) may add a second segment that
/// references a large payload in place, so that it is not copied.
/// Decoding never throws: malformed, oversized or foreign input is an `error`.
/// See docs/wire-protocol.md.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/schema/payload_sink.hpp"

namespace banyan::schema {

/// The version written into every frame; a decoder rejects any other.
inline constexpr std::uint16_t protocol_version = 1;

/// Largest frame body (N, the length after the prefix) a decoder accepts by default.
inline constexpr std::size_t default_max_frame = 512u << 20;

/// Bytes of the length prefix that precedes every frame body.
inline constexpr std::size_t frame_prefix_bytes = 4;

/// The whole frame for `e`: length prefix, then the Cap'n Proto message.
/// `e` must fit in a frame (well under 4 GiB); anything larger is a programming error.
/// `returned`: the frame is handed back to its sender (`Frame.returned`; `e.from` is the
/// processor handing it back, `e.to` the original sender); the size does not change.
std::vector<std::uint8_t> encode(const wire::envelope& e, bool returned = false);

/// A frame in two pieces, sent one after the other: `head` (length prefix, segment table
/// and the message's own segments) and `tail`, a payload the message references in place
/// as its last segment (empty when everything is in `head`).
struct frame_bytes {
  std::vector<std::uint8_t> head;
  shared_bytes tail;
  std::size_t size() const noexcept { return head.size() + tail.size(); }
};

/// Payloads at least this large may be left in place by `encode_frame`.
inline constexpr std::size_t external_min_bytes = 16u << 10;

/// The frame for `e`, like `encode`, except that the payload of a broadcast segment or a
/// reduction partial of at least `external_min_bytes` (8-byte aligned, a whole number of
/// words) is not copied: it becomes the message's second and last segment, `tail`. Such a
/// frame is a few words longer than `encode(e)` (one more segment size in the table, a far
/// pointer's landing pad); any decoder reads it the same (standard Cap'n Proto framing).
frame_bytes encode_frame(const wire::envelope& e, bool returned = false);

/// A decoded frame: the envelope and whether it is handed back (`Frame.returned`).
struct frame {
  wire::envelope envelope;
  bool returned = false;
};

/// Equals `encode(e).size()`, measured on a built message without the final copy.
/// `wire::wire_size(e.body)` is the allocation-free model of the same number.
std::size_t encoded_size(const wire::envelope& e);

/// Decodes one frame body (the N bytes after the prefix). Copies into word-aligned
/// storage first unless `p` is already 8-byte aligned.
/// Errors: `oversized_frame` when n > max_frame; `version_mismatch` when the frame's
/// version is not `protocol_version`; `malformed_frame` for anything else that is not
/// exactly one valid Frame (truncation, trailing bytes, out-of-bounds pointers, an
/// unknown message type or enum value, a vnode set that is not canonical, exceeded
/// traversal or nesting limits).
expected<wire::envelope> decode_body(const std::uint8_t* p, std::size_t n,
                                     std::size_t max_frame = default_max_frame);
/// As `decode_body`, with the `returned` flag.
expected<frame> decode_frame_body(const std::uint8_t* p, std::size_t n,
                                  std::size_t max_frame = default_max_frame);

/// Incremental decoder for a byte stream (TCP): splits it into frames and decodes them,
/// whatever the chunking. Bytes are copied once, into word-aligned storage that grows
/// as a frame's bytes arrive (an announced length alone allocates nothing).
///
/// Large frames (bodies of at least `zero_copy_min` bytes) get a buffer of their own,
/// which the decoded envelope keeps: its payloads (`bcast_segment::payload`,
/// `reduce_partial::data`) are slices of it, not copies. The reader may also receive
/// straight into that buffer (`direct_buffer` / `commit_direct`), so a large payload
/// crosses user space once: from the kernel into the buffer the receiver keeps.
///
///     socket --read--> direct_buffer() --commit_direct(n)--> envelope (payload slices it)
///
/// With a `payload_sink` (set_sink), a large frame whose last Cap'n Proto segment is a
/// broadcast segment's payload (as `encode_frame` sends it) is read in two steps: its
/// head (segment table and the other segments, at most `max_sink_head` bytes) into the
/// decoder's own storage, then, if the sink gives a place, the payload straight into it:
/// the decoded segment's payload is then the sink's `region`. Anything else about the
/// frame (another message, other segment layout, a sink that declines) takes the path
/// above; errors are the same either way.
///
/// Errors are sticky: after the first one, every `feed` returns it again, because the
/// stream has lost its framing. The owner should close the connection.
class frame_decoder {
public:
  /// `max_frame` bounds N, the body length a prefix may announce.
  explicit frame_decoder(std::size_t max_frame = default_max_frame);

  /// Consumes bytes; returns the envelopes completed by them, in stream order, or the
  /// first error (`oversized_frame` as soon as a prefix announces more than
  /// `max_frame`; otherwise what `decode_body` reports). On error, envelopes completed
  /// earlier in the same chunk are dropped with the stream.
  expected<std::vector<wire::envelope>> feed(const std::uint8_t* p, std::size_t n);
  /// As `feed`, with each frame's `returned` flag (what a transport must look at).
  expected<std::vector<frame>> feed_frames(const std::uint8_t* p, std::size_t n);

  /// Where the next bytes of the stream may be received without a copy: the rest of a
  /// large frame's body that is in progress (its prefix is complete). Empty (null, 0)
  /// otherwise; the caller then uses its own buffer and `feed`. Its size grows as bytes
  /// arrive (at most doubling); the whole body's address space is reserved at once.
  /// Valid until the next call of any other member.
  std::pair<std::uint8_t*, std::size_t> direct_buffer();
  /// `n` bytes were written at the start of the last `direct_buffer()` (n <= its size).
  /// Returns the frame they completed, if any, or the error (as `feed_frames`).
  expected<std::vector<frame>> commit_direct(std::size_t n);

  /// Asks `sink` (may be null or empty: none) where large broadcast payloads go; it must
  /// outlive the decoder. Takes effect from the next frame.
  void set_sink(const payload_sink* sink) noexcept { sink_ = sink; }

  /// Bytes held for the frame in progress (prefix and body).
  std::size_t buffered() const noexcept { return prefix_len_ + body_len_; }

  /// True once `feed` has returned an error.
  bool failed() const noexcept { return failure_.has_value(); }

  /// Bodies at least this long are decoded in place (see above).
  static constexpr std::size_t zero_copy_min = 16u << 10;
  /// Largest head (segment table and the segments before the payload) read ahead of a
  /// payload to ask the sink; a larger one takes the plain path.
  static constexpr std::size_t max_sink_head = 64u << 10;
  /// Most Cap'n Proto segments such a frame may have.
  static constexpr std::size_t max_sink_segments = 16;

private:
  void reset_frame();
  /// The current frame is complete: decodes it into `out`, or records the failure.
  bool finish_frame(std::vector<frame>& out);
  bool large() const noexcept { return frame_len_ >= zero_copy_min; }
  /// Makes `big_` hold at least `n` bytes (n <= frame_len_) without moving them later.
  void grow_big(std::size_t n);
  /// Where the body's next bytes go, and how many may go there before the decoder must
  /// look at them (the rest of the body, or of the head being probed).
  std::pair<std::uint8_t*, std::size_t> target(std::size_t at_least);
  /// `n` bytes were written at `target()`: counts them, probes the head, finishes the
  /// frame. False on error (recorded).
  bool wrote(std::size_t n, std::vector<frame>& out);
  /// The head read so far is complete up to `want_`: reads the table, or asks the sink.
  void look();
  /// Gives up on the sink for this frame: the head read so far moves to `big_`.
  void to_plain();

  enum class mode : std::uint8_t {
    plain, ///< small frames, and large ones into `big_`
    probe, ///< reading a large frame's head into `head_`
    sunk,  ///< the head is in `head_`, the payload goes to `place_`
  };
  const payload_sink* sink_ = nullptr;
  mode mode_ = mode::plain;
  int stage_ = 0;            // probe: 0 the first word, 1 the segment table, 2 the head
  std::size_t want_ = 0;     // probe: the head bytes needed before the next look
  std::size_t head_bytes_ = 0; // sunk: where the payload begins in the body
  std::vector<std::uint32_t> seg_words_; // probe/sunk: the segments' sizes in words
  std::vector<std::uint64_t> head_;      // probe/sunk: the body's first bytes, aligned
  payload_place place_;

  std::size_t max_frame_;
  std::uint8_t prefix_[frame_prefix_bytes] = {};
  std::size_t prefix_len_ = 0;      // prefix bytes received for the current frame
  std::size_t frame_len_ = 0;       // N, valid once the prefix is complete
  std::size_t body_len_ = 0;        // body bytes received so far
  std::vector<std::uint64_t> body_; // word-aligned, as Cap'n Proto requires
  std::vector<std::uint8_t> big_;   // a large frame's body; handed to its envelope
  std::optional<error> failure_;
};

} // namespace banyan::schema

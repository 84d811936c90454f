#pragma once
/// Where the received segments of a long broadcast go: into one buffer per message, each
/// at its place, so that the message is whole when the last segment lands (the broadcast
/// engine's `assemble` then only joins slices) and a forwarded segment is sent from there.
/// The TCP transport asks before it reads a segment's payload (schema::payload_sink):
///
///   segment head (op, index, count, total, length) --place--> slice of the message buffer
///                                                   --nullopt--> the frame's own buffer
///
/// Segments are cut as the origin cuts them (broadcast_engine::originate): all but the
/// last `L` bytes long, at index * L; the last one ends the message. `L` is learnt from
/// the first segment placed and every later one must agree; a segment already placed,
/// one that does not fit, or a message above `max_message` is declined (the engine then
/// copies as before, so a decline costs speed, never correctness).
/// Buffers come from a `buffer_pool`, not zeroed: announcing a message of `total` bytes
/// reserves address space only, and memory is used as its segments arrive. Loop thread
/// only (the pool is thread-safe).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "banyan/core/buffer_pool.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/shared_bytes.hpp"

namespace banyan {

/// A segment's place: `region` (the slice the segment's payload becomes) and `dest`, the
/// same bytes, writable, until the payload has been received.
struct segment_slot {
  shared_bytes region;
  std::uint8_t* dest = nullptr;
};

class segment_placement {
public:
  /// `pool` must outlive this. At most `max_open` messages are being assembled at once;
  /// a new one beyond that forgets the oldest (whose later segments are then declined
  /// into a new buffer, i.e. copied at assembly).
  segment_placement(buffer_pool& pool, std::size_t max_message, std::size_t max_open = 8);

  /// The place of segment `index` of `count` (of `length` bytes) of message `op` of
  /// `total` bytes, or nullopt (see above). The place is 8-byte aligned when `L` is a
  /// multiple of 8.
  std::optional<segment_slot> place(wire::collective_id op, std::uint32_t index,
                                    std::uint32_t count, std::uint64_t total,
                                    std::size_t length);

  /// Messages with segments still to come.
  std::size_t open() const noexcept { return open_.size(); }

private:
  struct message {
    pooled_block buf;
    std::uint32_t count = 0;
    std::uint64_t total = 0;
    std::uint64_t seg = 0; ///< L; 0 while unknown
    std::vector<bool> placed;
    std::uint32_t placed_count = 0;
    std::uint64_t age = 0; ///< order of creation
  };

  buffer_pool& pool_;
  std::size_t max_message_;
  std::size_t max_open_;
  std::uint64_t next_age_ = 0;
  std::map<wire::collective_id, message> open_;
};

} // namespace banyan

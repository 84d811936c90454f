#pragma once
/// Receive-in-place: a stream decoder (frame_decoder) that meets a large broadcast
/// segment first reads its small head (the Cap'n Proto segment table and every segment
/// but the last, i.e. everything but the payload, which `encode_frame` sends as the last
/// segment) and asks the sink where the payload should go. The sink answers with a
/// place (a slice of a buffer it owns, e.g. the whole message's, see
/// core/segment_placement.hpp), into which the reader then receives the payload straight
/// from the kernel, or declines (nullopt): the frame then gets a buffer of its own, as
/// without a sink. Called on the decoding thread (the transport's loop thread).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "banyan/core/messages.hpp"
#include "banyan/core/shared_bytes.hpp"

namespace banyan::schema {

/// What the head of a large `bcast_segment` frame says.
struct payload_head {
  proc_id from = no_proc;
  proc_id to = no_proc;
  wire::collective_id op;
  std::uint32_t index = 0;
  std::uint32_t count = 0;
  std::uint64_t total = 0;
  std::size_t length = 0; ///< the payload's bytes
};

/// Where the payload goes: `region` (what the decoded `bcast_segment::payload` will be)
/// and `dest`, its first byte, writable. `region.size()` must equal the head's `length`
/// and `dest` must be 8-byte aligned, or the decoder declines it itself.
struct payload_place {
  shared_bytes region;
  std::uint8_t* dest = nullptr;
};

using payload_sink = std::function<std::optional<payload_place>(const payload_head&)>;

} // namespace banyan::schema

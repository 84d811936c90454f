#pragma once
/// What the schema suites share: a broadcast segment to encode, and a reader that feeds a
/// frame_decoder the way the TCP transport does.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "banyan/schema/codec.hpp"

namespace bs = banyan::schema;
namespace wire = banyan::wire;
using banyan::errc;
using banyan::shared_bytes;
using banyan::vnode_set;
using bytes = std::vector<std::uint8_t>;

// For Boost.Test's messages.
namespace banyan {
inline std::ostream& operator<<(std::ostream& os, errc e) { return os << to_string(e); }
} // namespace banyan

namespace frame_test {

/// Segment `index` of `count` of a broadcast, `payload_bytes` of a pattern that differs
/// per segment.
inline wire::envelope segment(std::size_t payload_bytes, std::uint32_t index,
                              std::uint32_t count = 4) {
  wire::bcast_segment s;
  s.op = wire::collective_id{3, 77};
  s.kind = banyan::tree_kind::bandwidth;
  s.vnodes = vnode_set::range(0, 63);
  s.stream = 5;
  s.first = index == 0;
  s.index = index;
  s.count = count;
  s.total = count * payload_bytes;
  bytes p(payload_bytes);
  for (std::size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::uint8_t>(i * 31 + index);
  s.payload = shared_bytes(std::move(p));
  return {3, 9, s};
}

/// Feeds `stream` to `dec` as the transport reads: straight into the decoder's buffer
/// when it offers one of at least `min_direct` bytes (at most `chunk` bytes per read;
/// each such read noted in `direct`), else through `feed_frames`.
inline std::vector<bs::frame>
receive(bs::frame_decoder& dec, const bytes& stream, std::size_t chunk, std::size_t min_direct = 1,
        std::vector<std::pair<const std::uint8_t*, std::size_t>>* direct = nullptr) {
  std::vector<bs::frame> out;
  std::size_t at = 0;
  while (at < stream.size()) {
    auto [p, n] = dec.direct_buffer();
    const bool into = n > 0 && n >= min_direct;
    const std::size_t take = std::min({chunk, stream.size() - at, into ? n : chunk});
    if (into) {
      std::memcpy(p, stream.data() + at, take);
      if (direct)
        direct->emplace_back(p, take);
    }
    auto r = into ? dec.commit_direct(take) : dec.feed_frames(stream.data() + at, take);
    BOOST_REQUIRE(r.has_value());
    for (auto& f : *r)
      out.push_back(std::move(f));
    at += take;
  }
  return out;
}

} // namespace frame_test

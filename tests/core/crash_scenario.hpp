#pragma once
// Shared by the virtual-time suites of broadcasts through crashes and false suspicions
// (broadcast_crash_test.cpp, false_crash_test.cpp, lagging_suspect_test.cpp): the grid
// they run on, a broadcast started at one processor's rider, and the ways a processor
// taken for crashed can be slow.

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstdint>

#include "core/collective_rider.hpp"
#include "core/message_bytes.hpp"

namespace banyan::test {

/// The builtin tiny-2c8: two clusters of four.
inline topology tiny_grid() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

/// Starts a broadcast of `bytes` bytes of pattern `salt` at `from`'s collective rider.
inline wire::collective_id broadcast_from(mini_grid& g, proc_id from, std::size_t bytes,
                                          std::uint64_t salt) {
  wire::collective_id id;
  g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    id = dynamic_cast<collective_rider&>(r).broadcast(now, message_bytes(bytes, salt), out);
  });
  return id;
}

/// How a live processor taken for crashed is slow: it does not run without noticing
/// (frozen), or its frames are late both ways, only those to it, or only those from it.
enum class slowness { frozen, both_ways, inbound, outbound };

inline const char* name_of(slowness s) {
  switch (s) {
  case slowness::frozen: return "frozen";
  case slowness::both_ways: return "both ways";
  case slowness::inbound: return "inbound";
  case slowness::outbound: return "outbound";
  }
  return "?";
}

} // namespace banyan::test

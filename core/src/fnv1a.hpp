#pragma once
// FNV-1a over 64 bits, fed field by field: the same bytes give the same hash on every
// processor and platform (unlike std::hash), which the view digests compared between
// processors need (view_digest.hpp, view_buckets.hpp).

#include <cstdint>
#include <string>

namespace banyan::sup {

struct fnv1a {
  std::uint64_t h = 14695981039346656037ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 1099511628211ull;
  }
  /// Little-endian, whatever the platform's order.
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i)
      byte(static_cast<unsigned char>(v >> (8 * i)));
  }
  /// Led by its length, so that two strings in a row cannot run together.
  void text(const std::string& s) {
    u64(s.size());
    for (unsigned char c : s)
      byte(c);
  }
};

} // namespace banyan::sup

#pragma once
// Test payloads: `n` bytes that differ from one message to the next.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "banyan/core/shared_bytes.hpp"

namespace banyan::test {

/// `n` pseudo-random bytes drawn from `salt`: every message of a test its own content.
inline shared_bytes message_bytes(std::size_t n, std::uint64_t salt) {
  std::vector<std::uint8_t> b(n);
  std::mt19937_64 rng(salt);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(rng());
  return shared_bytes(std::move(b));
}

} // namespace banyan::test

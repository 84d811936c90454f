#pragma once
/// At most one log line per key (a peer's address) per interval, with a count of the lines
/// held back in between, so that hostile input is reported without flooding the log.
/// Time is passed in; nothing here reads a clock.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

#include "banyan/core/types.hpp"

namespace banyan::net {

class log_limiter {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `max_keys` bounds the memory: when that many keys are remembered, those whose last
  /// line is an interval old are forgotten (with their count of lines held back); if none
  /// is, a new key is not remembered, so its lines are not limited until room is made.
  explicit log_limiter(duration interval, std::size_t max_keys = 4096)
      : interval_(interval), max_keys_(max_keys) {}

  /// Whether a line about `key` may be written at `now`. If it may: the number of lines
  /// about `key` held back since the last one written; if not: nothing (the line counts
  /// as held back).
  std::optional<std::size_t> admit(const std::string& key, time_point now);

  duration interval() const noexcept { return interval_; }

private:
  struct entry {
    time_point last{};    ///< when the last line was written
    std::size_t held = 0; ///< lines held back since
  };
  duration interval_;
  std::size_t max_keys_;
  std::unordered_map<std::string, entry> keys_;
};

} // namespace banyan::net

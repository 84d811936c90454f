#include "banyan/net/log_limiter.hpp"

namespace banyan::net {

std::optional<std::size_t> log_limiter::admit(const std::string& key, time_point now) {
  auto it = keys_.find(key);
  if (it != keys_.end()) {
    if (now - it->second.last < interval_) {
      ++it->second.held;
      return std::nullopt;
    }
    const std::size_t held = it->second.held;
    it->second = entry{now, 0};
    return held;
  }
  if (keys_.size() >= max_keys_)
    for (auto i = keys_.begin(); i != keys_.end();)
      i = now - i->second.last >= interval_ ? keys_.erase(i) : std::next(i);
  if (keys_.size() < max_keys_)
    keys_.emplace(key, entry{now, 0});
  return std::size_t{0};
}

} // namespace banyan::net

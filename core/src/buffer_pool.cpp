#include "banyan/core/buffer_pool.hpp"

namespace banyan {

buffer_pool::buffer_pool(std::size_t max_idle_bytes) : st_(std::make_shared<state>()) {
  st_->max_idle_bytes = max_idle_bytes;
}

buffer_pool::~buffer_pool() {
  std::lock_guard<std::mutex> lock(st_->m);
  st_->open = false;
  st_->idle.clear();
  st_->counts.idle_bytes = 0;
}

void buffer_pool::give_back(const std::shared_ptr<state>& st, std::vector<std::uint8_t>* v) {
  std::unique_ptr<std::vector<std::uint8_t>> owned(v);
  std::lock_guard<std::mutex> lock(st->m);
  if (!st->open || st->counts.idle_bytes + v->size() > st->max_idle_bytes)
    return; // freed with `owned`
  st->counts.idle_bytes += v->size();
  st->idle.push_back(std::move(owned));
}

std::shared_ptr<std::vector<std::uint8_t>> buffer_pool::take(std::size_t n) {
  std::unique_ptr<std::vector<std::uint8_t>> buf;
  {
    std::lock_guard<std::mutex> lock(st_->m);
    std::size_t best = st_->idle.size();
    for (std::size_t i = 0; i < st_->idle.size(); ++i)
      if (st_->idle[i]->size() >= n
          && (best == st_->idle.size() || st_->idle[i]->size() < st_->idle[best]->size()))
        best = i;
    if (best < st_->idle.size()) {
      buf = std::move(st_->idle[best]);
      st_->idle.erase(st_->idle.begin() + static_cast<std::ptrdiff_t>(best));
      st_->counts.idle_bytes -= buf->size();
      ++st_->counts.reused;
    } else {
      ++st_->counts.allocated;
    }
  }
  if (!buf)
    buf = std::make_unique<std::vector<std::uint8_t>>(n);
  auto st = st_;
  return std::shared_ptr<std::vector<std::uint8_t>>(
      buf.release(), [st](std::vector<std::uint8_t>* v) { give_back(st, v); });
}

buffer_pool::stats buffer_pool::counters() const {
  std::lock_guard<std::mutex> lock(st_->m);
  return st_->counts;
}

} // namespace banyan

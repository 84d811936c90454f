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

void buffer_pool::give_back(const std::shared_ptr<state>& st, std::uint8_t* p, std::size_t n) {
  std::unique_ptr<std::uint8_t[]> owned(p);
  std::lock_guard<std::mutex> lock(st->m);
  if (!st->open || st->counts.idle_bytes + n > st->max_idle_bytes)
    return; // freed with `owned`
  st->counts.idle_bytes += n;
  st->idle.push_back({std::move(owned), n});
}

pooled_block buffer_pool::take(std::size_t n) {
  idle_block blk;
  {
    std::lock_guard<std::mutex> lock(st_->m);
    std::size_t best = st_->idle.size();
    for (std::size_t i = 0; i < st_->idle.size(); ++i)
      if (st_->idle[i].size >= n
          && (best == st_->idle.size() || st_->idle[i].size < st_->idle[best].size))
        best = i;
    if (best < st_->idle.size()) {
      blk = std::move(st_->idle[best]);
      st_->idle.erase(st_->idle.begin() + static_cast<std::ptrdiff_t>(best));
      st_->counts.idle_bytes -= blk.size;
      ++st_->counts.reused;
    } else {
      ++st_->counts.allocated;
    }
  }
  if (!blk.bytes) {
    // Default-initialized: no byte is written here, so no page is touched.
    blk.bytes.reset(new std::uint8_t[n == 0 ? 1 : n]);
    blk.size = n;
  }
  auto st = st_;
  const std::size_t size = blk.size;
  pooled_block out;
  out.size = size;
  out.bytes = std::shared_ptr<std::uint8_t>(
      blk.bytes.release(), [st, size](std::uint8_t* p) { give_back(st, p, size); });
  return out;
}

buffer_pool::stats buffer_pool::counters() const {
  std::lock_guard<std::mutex> lock(st_->m);
  return st_->counts;
}

} // namespace banyan

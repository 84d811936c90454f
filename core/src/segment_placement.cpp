#include "banyan/core/segment_placement.hpp"

#include <algorithm>

namespace banyan {

segment_placement::segment_placement(buffer_pool& pool, std::size_t max_message,
                                     std::size_t max_open)
  : pool_(pool), max_message_(max_message), max_open_(std::max<std::size_t>(max_open, 1)) {}

std::optional<segment_slot> segment_placement::place(wire::collective_id op, std::uint32_t index,
                                                     std::uint32_t count, std::uint64_t total,
                                                     std::size_t length) {
  if (count == 0 || index >= count || length == 0 || length > total || total > max_message_)
    return std::nullopt;
  const bool last = index + 1 == count;
  // The segment length L this segment implies (0: it does not say).
  std::uint64_t seg = 0;
  if (!last) {
    seg = length;
    // All but the last are L long, the last 1..L bytes.
    if ((count - 1) * seg >= total || total - (count - 1) * seg > seg)
      return std::nullopt;
  } else if (count == 1) {
    if (length != total)
      return std::nullopt;
  } else {
    const std::uint64_t rest = total - length;
    if (rest % (count - 1) != 0 || rest / (count - 1) < length)
      return std::nullopt;
    seg = rest / (count - 1);
  }
  auto it = open_.find(op);
  if (it != open_.end()) {
    auto& m = it->second;
    if (m.count != count || m.total != total || (seg != 0 && m.seg != 0 && m.seg != seg)
        || m.placed[index])
      return std::nullopt;
  } else {
    if (open_.size() >= max_open_) {
      auto oldest = std::min_element(open_.begin(), open_.end(), [](auto& a, auto& b) {
        return a.second.age < b.second.age;
      });
      open_.erase(oldest);
    }
    message m;
    m.buf = pool_.take(static_cast<std::size_t>(total));
    m.count = count;
    m.total = total;
    m.placed.assign(count, false);
    m.age = next_age_++;
    it = open_.emplace(op, std::move(m)).first;
  }
  auto& m = it->second;
  if (m.seg == 0)
    m.seg = seg;
  const std::uint64_t offset = last ? total - length : index * m.seg;
  m.placed[index] = true;
  segment_slot slot;
  slot.region = m.buf.slice(static_cast<std::size_t>(offset), length);
  slot.dest = m.buf.data() + offset;
  if (++m.placed_count == m.count)
    open_.erase(it); // the slices keep the buffer
  return slot;
}

} // namespace banyan

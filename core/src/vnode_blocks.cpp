#include "banyan/core/vnode_blocks.hpp"

#include <cstring>
#include <string>

namespace banyan {

namespace {

/// The number of members of `vs` below `v`.
std::size_t rank_of(const vnode_set& vs, vnode_id v) {
  std::size_t r = 0;
  for (auto [lo, hi] : vs.intervals()) {
    if (v < lo)
      break;
    if (v < hi)
      return r + (v - lo);
    r += hi - lo;
  }
  return r;
}

} // namespace

std::size_t block_size_of(const vnode_set& vs, std::size_t bytes) {
  const auto n = vs.size();
  if (n == 0 || bytes % n != 0)
    return 0;
  return bytes / n;
}

shared_bytes slice_blocks(const shared_bytes& bytes, const vnode_set& vs, const vnode_set& part,
                          std::size_t block) {
  if (part == vs)
    return bytes;
  std::vector<std::pair<std::size_t, std::size_t>> runs; // (first block, blocks)
  for (auto [lo, hi] : part.intervals()) {
    const auto at = rank_of(vs, lo);
    const std::size_t n = hi - lo;
    if (!runs.empty() && runs.back().first + runs.back().second == at)
      runs.back().second += n; // adjacent in `vs` (a gap of vnodes not in `vs`)
    else
      runs.push_back({at, n});
  }
  if (runs.size() == 1)
    return bytes.slice(runs[0].first * block, runs[0].second * block);
  std::vector<std::uint8_t> out;
  out.reserve(part.size() * block);
  for (auto [at, n] : runs)
    out.insert(out.end(), bytes.begin() + at * block, bytes.begin() + (at + n) * block);
  return shared_bytes(std::move(out));
}

std::vector<std::uint8_t> merge_blocks(const vnode_set& a, const std::uint8_t* da,
                                       const vnode_set& b, const std::uint8_t* db,
                                       std::size_t block) {
  std::vector<std::uint8_t> out((a.size() + b.size()) * block);
  auto* o = out.data();
  const auto& ra = a.intervals();
  const auto& rb = b.intervals();
  std::size_t i = 0, j = 0;
  while (i < ra.size() || j < rb.size()) {
    const bool take_a = j == rb.size() || (i < ra.size() && ra[i].lo < rb[j].lo);
    const auto& run = take_a ? ra[i++] : rb[j++];
    auto& src = take_a ? da : db;
    const auto n = static_cast<std::size_t>(run.hi - run.lo) * block;
    if (n)
      std::memcpy(o, src, n);
    o += n;
    src += n;
  }
  return out;
}

std::map<vnode_id, shared_bytes> split_blocks(const vnode_set& vs, const shared_bytes& bytes) {
  std::map<vnode_id, shared_bytes> r;
  const auto block = block_size_of(vs, bytes.size());
  if (block == 0)
    return r;
  std::size_t at = 0;
  vs.for_each([&](vnode_id v) {
    r.emplace(v, bytes.slice(at, block));
    at += block;
  });
  return r;
}

expected<shared_bytes> join_blocks(const std::map<vnode_id, shared_bytes>& blocks,
                                   const char* what) {
  if (blocks.empty())
    return make_error(errc::invalid_argument, std::string(what) + ": no blocks");
  const auto block = blocks.begin()->second.size();
  std::vector<std::uint8_t> out;
  out.reserve(block * blocks.size());
  for (auto& [v, b] : blocks) {
    if (b.size() != block || block == 0)
      return make_error(errc::invalid_argument,
                        std::string(what) + ": the block of vnode " + std::to_string(v) +
                          " is " + std::to_string(b.size()) + " bytes, not " +
                          std::to_string(block) + " like vnode " +
                          std::to_string(blocks.begin()->first) + "'s" +
                          (block == 0 ? " (blocks may not be empty)" : ""));
    out.insert(out.end(), b.begin(), b.end());
  }
  return shared_bytes(std::move(out));
}

} // namespace banyan

#include "banyan/core/pairwise_alltoall.hpp"

#include <cstring>
#include <string>

namespace banyan {

namespace {

/// v's place among the vnodes of `vs` (vs must contain v).
std::size_t index_in(const vnode_set& vs, vnode_id v) {
  std::size_t below = 0;
  for (auto [lo, hi] : vs.intervals()) {
    if (v < hi)
      return below + (v - lo);
    below += hi - lo;
  }
  return below;
}

} // namespace

pairwise_alltoall_engine::pairwise_alltoall_engine(proc_id self, std::vector<vnode_set> owners)
  : self_(self), owners_(std::move(owners)) {
  for (auto& vs : owners_)
    all_ |= vs;
}

bool pairwise_alltoall_engine::handles(const wire::message& m) {
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  return seg && seg->op.kind == collective_kind::pairwise_alltoall;
}

pairwise_alltoall_engine::op_state& pairwise_alltoall_engine::state(std::uint64_t op) {
  auto [i, fresh] = ops_.try_emplace(op);
  if (fresh) {
    i->second.from.resize(owners_.size());
    i->second.have.assign(owners_.size(), false);
  }
  return i->second;
}

void pairwise_alltoall_engine::send(std::uint64_t op, std::size_t step, op_state& s,
                                    alltoall_outbox& out) {
  const auto k = owners_.size();
  const auto dst = static_cast<proc_id>((self_ + step) % k);
  const auto& mine = owners_[self_];
  const auto& theirs = owners_[dst];
  const auto n = all_.size();
  const auto b = s.block;
  const auto& src = mine_.at(op);
  std::vector<std::uint8_t> bytes(mine.size() * theirs.size() * b);
  std::size_t at = 0;
  for (std::size_t a = 0; a < mine.size(); ++a)
    theirs.for_each([&](vnode_id w) {
      std::memcpy(bytes.data() + at, src.data() + (a * n + index_in(all_, w)) * b, b);
      at += b;
    });
  wire::bcast_segment seg;
  seg.op = {0, op, collective_kind::pairwise_alltoall, 0};
  seg.kind = tree_kind::bandwidth;
  seg.direct = true;
  seg.first = true;
  seg.vnodes = mine;
  seg.index = static_cast<std::uint32_t>(step);
  seg.count = static_cast<std::uint32_t>(k);
  seg.total = bytes.size();
  seg.payload = shared_bytes(std::move(bytes));
  ++stats_.frames;
  out.sends.push_back({self_, dst, wire::message{std::move(seg)}});
}

std::optional<error> pairwise_alltoall_engine::start(timestamp, std::uint64_t op,
                                                     std::size_t block,
                                                     const contribution_fn& values,
                                                     alltoall_outbox& out) {
  if (self_ >= owners_.size())
    return make_error(errc::invalid_argument, "pairwise alltoall: processor " +
                                                std::to_string(self_) + " is not among its " +
                                                std::to_string(owners_.size()) + " processors");
  if (block == 0)
    return make_error(errc::invalid_argument, "pairwise alltoall: blocks of 0 bytes");
  if (auto i = ops_.find(op); (i != ops_.end() && i->second.step > 0) || mine_.count(op))
    return make_error(errc::invalid_argument,
                      "pairwise alltoall " + std::to_string(op) + " started here already");
  const auto n = all_.size();
  std::vector<std::uint8_t> mine;
  std::optional<error> bad;
  owners_[self_].for_each([&](vnode_id v) {
    if (bad)
      return;
    auto b = values ? values(v) : std::vector<std::uint8_t>{};
    if (b.size() != n * block)
      bad = make_error(errc::invalid_argument,
                       "pairwise alltoall " + std::to_string(op) + ": the contribution of vnode " +
                         std::to_string(v) + " is " + std::to_string(b.size()) + " bytes, not " +
                         std::to_string(n * block) + " (a block of " + std::to_string(block) +
                         " bytes for each of the " + std::to_string(n) + " vnodes)");
    mine.insert(mine.end(), b.begin(), b.end());
  });
  if (bad)
    return bad;
  mine_[op] = std::move(mine);
  auto& s = state(op);
  s.block = block;
  s.step = 1;
  if (owners_.size() > 1)
    send(op, 1, s, out);
  advance(op, out);
  return std::nullopt;
}

bool pairwise_alltoall_engine::on_message(timestamp, proc_id from, const wire::message& m,
                                          alltoall_outbox& out) {
  if (!handles(m))
    return false;
  auto& seg = std::get<wire::bcast_segment>(m);
  const auto k = owners_.size();
  if (from >= k || from == self_ || seg.vnodes != owners_[from] ||
      (self_ + k - from) % k != seg.index) {
    ++stats_.malformed;
    return true;
  }
  auto& s = state(seg.op.seq);
  if (s.have[from]) {
    ++stats_.malformed;
    return true;
  }
  s.from[from] = seg.payload;
  s.have[from] = true;
  advance(seg.op.seq, out);
  return true;
}

void pairwise_alltoall_engine::advance(std::uint64_t op, alltoall_outbox& out) {
  auto i = ops_.find(op);
  if (i == ops_.end() || i->second.step == 0)
    return;
  auto& s = i->second;
  const auto k = owners_.size();
  // Step `step` is done once the message from (self - step) mod k is here.
  while (s.step < k && s.have[(self_ + k - s.step) % k]) {
    ++s.step;
    if (s.step < k)
      send(op, s.step, s, out);
  }
  if (s.step < k)
    return;
  const auto& own = owners_[self_];
  const auto n = all_.size();
  const auto b = s.block;
  const auto& mine = mine_.at(op);
  for (proc_id p = 0; p < k; ++p)
    if (p != self_ && s.from[p].size() != owners_[p].size() * own.size() * b) {
      ++stats_.malformed;
      ops_.erase(i);
      mine_.erase(op);
      return;
    }
  alltoall_delivery d;
  d.op = op;
  d.vnodes = own;
  d.from = all_;
  d.block = b;
  // The owner of every vnode, and its place among that owner's vnodes.
  std::vector<std::pair<proc_id, std::size_t>> where;
  where.reserve(n);
  all_.for_each([&](vnode_id v) {
    for (proc_id p = 0; p < k; ++p)
      if (owners_[p].contains(v)) {
        where.emplace_back(p, index_in(owners_[p], v));
        return;
      }
  });
  std::size_t c = 0;
  own.for_each([&](vnode_id w) {
    std::vector<std::uint8_t> got(n * b);
    const auto wi = index_in(all_, w);
    for (std::size_t j = 0; j < n; ++j) {
      auto [p, a] = where[j];
      const std::uint8_t* src = p == self_ ? mine.data() + (a * n + wi) * b
                                           : s.from[p].data() + (a * own.size() + c) * b;
      std::memcpy(got.data() + j * b, src, b);
    }
    d.blocks.emplace(w, shared_bytes(std::move(got)));
    ++c;
  });
  out.deliveries.push_back(std::move(d));
  ++stats_.delivered;
  ops_.erase(i);
  mine_.erase(op);
}

} // namespace banyan

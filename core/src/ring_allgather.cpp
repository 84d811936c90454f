#include "banyan/core/ring_allgather.hpp"

#include <string>

#include "banyan/core/vnode_blocks.hpp"

namespace banyan {

ring_allgather_engine::ring_allgather_engine(proc_id self, std::vector<vnode_set> owners)
  : self_(self), owners_(std::move(owners)) {
  for (auto& vs : owners_)
    all_ |= vs;
}

bool ring_allgather_engine::handles(const wire::message& m) {
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  return seg && seg->op.kind == collective_kind::ring_allgather;
}

ring_allgather_engine::op_state& ring_allgather_engine::state(std::uint64_t op) {
  auto [i, fresh] = ops_.try_emplace(op);
  if (fresh) {
    i->second.chunks.resize(owners_.size());
    i->second.have.assign(owners_.size(), false);
  }
  return i->second;
}

void ring_allgather_engine::send(std::uint64_t op, std::size_t chunk, const shared_bytes& payload,
                                 allgather_outbox& out) {
  wire::bcast_segment seg;
  seg.op = {0, op, collective_kind::ring_allgather, 0};
  seg.kind = tree_kind::bandwidth;
  seg.direct = true;
  seg.first = true;
  seg.vnodes = owners_[chunk];
  seg.index = static_cast<std::uint32_t>(chunk);
  seg.count = static_cast<std::uint32_t>(owners_.size());
  seg.total = payload.size();
  seg.payload = payload;
  const auto right = static_cast<proc_id>((self_ + 1) % owners_.size());
  ++stats_.frames;
  out.sends.push_back({self_, right, wire::message{std::move(seg)}});
}

std::optional<error> ring_allgather_engine::start(timestamp, std::uint64_t op, std::size_t block,
                                                  const contribution_fn& values,
                                                  allgather_outbox& out) {
  if (self_ >= owners_.size())
    return make_error(errc::invalid_argument, "ring allgather: processor " +
                                                std::to_string(self_) + " is not among its " +
                                                std::to_string(owners_.size()) + " processors");
  if (block == 0)
    return make_error(errc::invalid_argument, "ring allgather: blocks of 0 bytes");
  if (auto i = ops_.find(op); i != ops_.end() && i->second.started)
    return make_error(errc::invalid_argument,
                      "ring allgather " + std::to_string(op) + " started here already");
  std::vector<std::uint8_t> mine;
  std::optional<error> bad;
  owners_[self_].for_each([&](vnode_id v) {
    if (bad)
      return;
    auto b = values ? values(v) : std::vector<std::uint8_t>{};
    if (b.size() != block)
      bad = make_error(errc::invalid_argument, "ring allgather " + std::to_string(op) +
                                                 ": the block of vnode " + std::to_string(v) +
                                                 " is " + std::to_string(b.size()) +
                                                 " bytes, not " + std::to_string(block));
    mine.insert(mine.end(), b.begin(), b.end());
  });
  if (bad)
    return bad;
  auto& s = state(op);
  s.started = true;
  s.chunks[self_] = shared_bytes(std::move(mine));
  s.have[self_] = true;
  ++s.count;
  if (owners_.size() > 1)
    send(op, self_, s.chunks[self_], out);
  maybe_deliver(op, out);
  return std::nullopt;
}

bool ring_allgather_engine::on_message(timestamp, proc_id, const wire::message& m,
                                       allgather_outbox& out) {
  if (!handles(m))
    return false;
  auto& seg = std::get<wire::bcast_segment>(m);
  const auto k = owners_.size();
  const std::size_t j = seg.index;
  if (j >= k || j == self_ || seg.vnodes != owners_[j]) {
    ++stats_.malformed;
    return true;
  }
  auto& s = state(seg.op.seq);
  if (s.have[j]) {
    ++stats_.malformed;
    return true;
  }
  s.chunks[j] = seg.payload;
  s.have[j] = true;
  ++s.count;
  if ((self_ + 1) % k != j) // the right neighbour is not where it began
    send(seg.op.seq, j, seg.payload, out);
  maybe_deliver(seg.op.seq, out);
  return true;
}

void ring_allgather_engine::maybe_deliver(std::uint64_t op, allgather_outbox& out) {
  auto i = ops_.find(op);
  if (i == ops_.end() || !i->second.started || i->second.count < owners_.size())
    return;
  auto& s = i->second;
  // The chunks side by side in vnode order.
  vnode_set have;
  std::vector<std::uint8_t> acc;
  std::size_t block = 0;
  for (std::size_t j = 0; j < owners_.size(); ++j)
    if (!owners_[j].empty() && s.chunks[j].size()) {
      block = s.chunks[j].size() / owners_[j].size();
      break;
    }
  for (std::size_t j = 0; j < owners_.size(); ++j) {
    if (owners_[j].empty())
      continue;
    if (s.chunks[j].size() != owners_[j].size() * block) {
      ++stats_.malformed;
      ops_.erase(i);
      return;
    }
    acc = merge_blocks(have, acc.data(), owners_[j], s.chunks[j].data(), block);
    have |= owners_[j];
  }
  allgather_delivery d;
  d.op = op;
  d.vnodes = owners_[self_];
  d.all = have;
  d.blocks = shared_bytes(std::move(acc));
  out.deliveries.push_back(std::move(d));
  ++stats_.delivered;
  ops_.erase(i);
}

} // namespace banyan

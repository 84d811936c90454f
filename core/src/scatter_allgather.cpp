#include "banyan/core/scatter_allgather.hpp"

#include <algorithm>

namespace banyan {

namespace {

std::size_t lowbit(std::size_t r) {
  return r & (~r + 1);
}

} // namespace

scatter_allgather_engine::scatter_allgather_engine(proc_id self, std::size_t procs,
                                                   std::function<vnode_set()> own_vnodes,
                                                   scatter_allgather_config cfg)
  : self_(self), n_(procs), own_(std::move(own_vnodes)), cfg_(cfg),
    next_seq_(cfg.first_seq) {
}

bool scatter_allgather_engine::handles(const wire::message& m) {
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  return seg && seg->op.kind == collective_kind::scatter_allgather;
}

std::size_t scatter_allgather_engine::rank_of(proc_id p, proc_id origin) const {
  return (static_cast<std::size_t>(p) + n_ - origin) % n_;
}

proc_id scatter_allgather_engine::proc_of(std::size_t rank, proc_id origin) const {
  return static_cast<proc_id>((rank + origin) % n_);
}

std::size_t scatter_allgather_engine::chunk_size(std::uint64_t total) const {
  return static_cast<std::size_t>((total + n_ - 1) / n_);
}

std::size_t scatter_allgather_engine::chunk_bytes(std::uint64_t total, std::size_t j) const {
  auto cs = chunk_size(total);
  auto begin = static_cast<std::uint64_t>(j) * cs;
  if (begin >= total)
    return 0;
  return static_cast<std::size_t>(std::min<std::uint64_t>(cs, total - begin));
}

std::pair<std::size_t, std::size_t> scatter_allgather_engine::subtree(std::size_t rank) const {
  if (rank == 0)
    return {0, n_};
  return {rank, std::min(n_, rank + lowbit(rank))};
}

void scatter_allgather_engine::send(const wire::collective_id& op, proc_id to, bool ring,
                                    std::uint32_t index, std::uint32_t count,
                                    std::uint64_t total, shared_bytes payload,
                                    broadcast_outbox& out) {
  wire::bcast_segment seg;
  seg.op = op;
  seg.kind = tree_kind::bandwidth;
  seg.direct = ring;
  seg.first = index == 0;
  seg.index = index;
  seg.count = count;
  seg.total = total;
  seg.payload = std::move(payload);
  (count == 1 ? stats_.whole_frames : ring ? stats_.ring_frames : stats_.scatter_frames)++;
  out.sends.push_back({self_, to, wire::message{std::move(seg)}});
}

/// The children of `rank`, largest subtree first: rank + mask for the masks below its
/// lowest set bit (below n for the origin).
static std::vector<std::pair<std::size_t, std::size_t>> children_of(std::size_t rank,
                                                                    std::size_t n) {
  std::vector<std::pair<std::size_t, std::size_t>> kids; // {child, mask}
  std::size_t top = rank == 0 ? 1 : lowbit(rank);
  if (rank == 0)
    while (top < n)
      top <<= 1;
  for (std::size_t mask = top >> 1; mask > 0; mask >>= 1)
    if (rank + mask < n)
      kids.push_back({rank + mask, mask});
  return kids;
}

void scatter_allgather_engine::whole_to_children(const wire::collective_id& op, std::size_t rank,
                                                 std::uint64_t total, const shared_bytes& payload,
                                                 broadcast_outbox& out) {
  for (auto [child, mask] : children_of(rank, n_)) {
    (void)mask;
    send(op, proc_of(child, op.origin), false, 0, 1, total, payload, out);
  }
}

void scatter_allgather_engine::scatter_to_children(const wire::collective_id& op,
                                                   std::size_t rank, op_state& s,
                                                   broadcast_outbox& out) {
  // The origin only: every chunk of each child's range, largest subtree first.
  auto count = static_cast<std::uint32_t>(n_);
  for (auto [child, mask] : children_of(rank, n_))
    for (auto j = child; j < std::min(n_, child + mask); ++j)
      if (!s.chunks[j].empty())
        send(op, proc_of(child, op.origin), false, static_cast<std::uint32_t>(j), count, s.total,
             s.chunks[j], out);
}

void scatter_allgather_engine::start_ring(const wire::collective_id& op, std::size_t rank,
                                          op_state& s, broadcast_outbox& out) {
  if (s.ring_started)
    return;
  s.ring_started = true;
  if (n_ > 1 && !s.chunks[rank].empty())
    send(op, proc_of((rank + 1) % n_, op.origin), true, static_cast<std::uint32_t>(rank),
         static_cast<std::uint32_t>(n_), s.total, s.chunks[rank], out);
}

void scatter_allgather_engine::maybe_deliver(const wire::collective_id& op, op_state& s,
                                             broadcast_outbox& out) {
  if (s.delivered)
    return;
  for (std::size_t j = 0; j < n_; ++j)
    if (!s.have[j] && chunk_bytes(s.total, j) > 0)
      return;
  s.delivered = true;
  std::vector<std::uint8_t> whole;
  whole.reserve(static_cast<std::size_t>(s.total));
  for (auto& c : s.chunks)
    whole.insert(whole.end(), c.begin(), c.end());
  auto vs = own_();
  if (vs.empty())
    return;
  stats_.delivered += vs.size();
  out.deliveries.push_back({op, std::move(vs), shared_bytes(std::move(whole))});
}

expected<wire::collective_id> scatter_allgather_engine::broadcast(timestamp, shared_bytes message,
                                                                  broadcast_outbox& out) {
  if (self_ >= n_)
    return make_error(errc::invalid_argument, "processor " + std::to_string(self_) +
                                                " is not among the " + std::to_string(n_) +
                                                " processors of the scatter-allgather");
  wire::collective_id op{self_, next_seq_++, collective_kind::scatter_allgather, cfg_.life};
  auto total = static_cast<std::uint64_t>(message.size());
  if (auto vs = own_(); !vs.empty()) {
    stats_.delivered += vs.size();
    out.deliveries.push_back({op, std::move(vs), message});
  }
  if (n_ < 2)
    return op;
  if (message.size() < cfg_.long_threshold) {
    whole_to_children(op, 0, total, message, out);
    return op;
  }
  op_state s;
  s.total = total;
  s.chunks.resize(n_);
  s.have.assign(n_, true);
  for (std::size_t j = 0; j < n_; ++j) {
    auto b = chunk_bytes(total, j);
    if (b > 0) {
      s.chunks[j] = message.slice(j * chunk_size(total), b);
      if (j != 0)
        ++s.ring_left;
    }
  }
  s.delivered = true;
  scatter_to_children(op, 0, s, out);
  start_ring(op, 0, s, out);
  if (s.ring_left > 0)
    ops_.emplace(op, std::move(s));
  return op;
}

bool scatter_allgather_engine::on_message(timestamp, proc_id, const wire::message& m,
                                          broadcast_outbox& out) {
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  auto bad = [this] {
    ++stats_.malformed;
    return false;
  };
  if (!seg || seg->op.kind != collective_kind::scatter_allgather || seg->op.origin >= n_ ||
      self_ >= n_)
    return bad();
  auto rank = rank_of(self_, seg->op.origin);
  if (seg->count == 1 && !seg->direct) {
    // A short message, whole, down the binomial tree.
    if (seg->index != 0 || seg->payload.size() != seg->total)
      return bad();
    whole_to_children(seg->op, rank, seg->total, seg->payload, out);
    if (auto vs = own_(); !vs.empty()) {
      stats_.delivered += vs.size();
      out.deliveries.push_back({seg->op, std::move(vs), seg->payload});
    }
    return true;
  }
  if (seg->count != n_ || seg->index >= n_ ||
      seg->payload.size() != chunk_bytes(seg->total, seg->index) || seg->payload.empty())
    return bad();
  std::size_t j = seg->index;
  auto it = ops_.find(seg->op);
  if (it == ops_.end()) {
    op_state s;
    s.total = seg->total;
    s.chunks.resize(n_);
    s.have.assign(n_, false);
    auto [lo, hi] = subtree(rank);
    for (std::size_t k = 0; k < n_; ++k) {
      if (chunk_bytes(s.total, k) == 0)
        continue;
      if (k >= lo && k < hi)
        ++s.scatter_left;
      if (k != rank)
        ++s.ring_left;
    }
    it = ops_.emplace(seg->op, std::move(s)).first;
  }
  auto& s = it->second;
  if (s.total != seg->total)
    return bad();
  if (!seg->direct) {
    // Scatter: a chunk of our range from the binomial parent.
    auto [lo, hi] = subtree(rank);
    if (j < lo || j >= hi || s.scatter_left == 0)
      return bad();
    --s.scatter_left;
    if (!s.have[j]) {
      s.have[j] = true;
      s.chunks[j] = seg->payload;
    }
    for (auto [child, mask] : children_of(rank, n_))
      if (j >= child && j < std::min(n_, child + mask)) {
        send(seg->op, proc_of(child, seg->op.origin), false, static_cast<std::uint32_t>(j),
             seg->count, seg->total, seg->payload, out);
        break;
      }
    if (s.scatter_left == 0)
      start_ring(seg->op, rank, s, out);
  } else {
    // Ring: chunk j from the left neighbour; pass it on unless the right one owns it.
    if (j == rank || s.ring_left == 0)
      return bad();
    --s.ring_left;
    if (!s.have[j]) {
      s.have[j] = true;
      s.chunks[j] = seg->payload;
    }
    auto right = (rank + 1) % n_;
    if (right != j)
      send(seg->op, proc_of(right, seg->op.origin), true, static_cast<std::uint32_t>(j),
           seg->count, seg->total, seg->payload, out);
  }
  maybe_deliver(seg->op, s, out);
  if (s.scatter_left == 0 && s.ring_left == 0)
    ops_.erase(it);
  return true;
}

} // namespace banyan

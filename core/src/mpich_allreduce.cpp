#include "banyan/core/mpich_allreduce.hpp"

#include <algorithm>
#include <cstring>

namespace banyan {

collective_kind kind_of(mpich_algorithm a) {
  switch (a) {
  case mpich_algorithm::recursive_doubling: return collective_kind::recursive_doubling;
  case mpich_algorithm::ring: return collective_kind::ring_allreduce;
  case mpich_algorithm::dissemination: return collective_kind::dissemination_barrier;
  }
  return collective_kind::none;
}

const char* to_string(mpich_algorithm a) {
  switch (a) {
  case mpich_algorithm::recursive_doubling: return "recursive_doubling";
  case mpich_algorithm::ring: return "ring";
  case mpich_algorithm::dissemination: return "dissemination";
  }
  return "unknown";
}

mpich_allreduce_collective::mpich_allreduce_collective(proc_id self, std::size_t procs,
                                                       std::function<vnode_set()> own_vnodes,
                                                       const reduce_op_table& ops,
                                                       mpich_algorithm algo, std::uint32_t life)
  : self_(self), n_(procs), own_(std::move(own_vnodes)), ops_(ops), algo_(algo), life_(life) {
  while (pof2_ * 2 <= n_)
    pof2_ *= 2;
  rem_ = n_ - pof2_;
}

std::optional<error> mpich_allreduce_collective::start(timestamp, const allreduce_spec& spec,
                                                       contribution_fn values) {
  auto refuse = [&](const std::string& why) {
    return make_error(errc::invalid_argument, std::string(to_string(algo_)) + " " +
                                                std::to_string(spec.op) + " at processor " +
                                                std::to_string(self_) + ": " + why);
  };
  if (self_ >= n_)
    return refuse("not one of the processors 0.." + std::to_string(n_ - 1));
  if (spec.op <= last_started_)
    return refuse("started after " + std::to_string(last_started_) + ": they start in increasing order");
  if (algo_ == mpich_algorithm::dissemination && spec.count != 0)
    return refuse("a barrier takes no array");
  const auto bytes = spec.count * element_size(spec.fn.type);
  if (auto e = ops_.check(spec.fn, bytes))
    return e;
  if (bytes != 0 && !values)
    return refuse("no values function");
  std::vector<std::uint8_t> acc;
  if (bytes != 0) {
    const auto own = own_();
    if (own.empty())
      return refuse("it owns no vnodes (nothing to start its buffer with)");
    bool first = true;
    std::optional<error> bad;
    own.for_each([&](vnode_id v) {
      if (bad)
        return;
      auto x = values(v);
      if (x.size() != bytes) {
        bad = refuse("the contribution of vnode " + std::to_string(v) + " has " +
                     std::to_string(x.size()) + " bytes, not " + std::to_string(bytes));
        return;
      }
      if (first) {
        acc = std::move(x);
        first = false;
      } else if (auto e = ops_.combine(spec.fn, acc, x.data(), x.size())) {
        bad = e;
      }
    });
    if (bad)
      return bad;
  }
  last_started_ = spec.op;
  auto& s = state_[spec.op];
  s.started = true;
  s.spec = spec;
  s.acc = std::move(acc);
  advance(spec.op, s);
  return std::nullopt;
}

bool mpich_allreduce_collective::on_message(timestamp, proc_id, const wire::message& m) {
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  if (!seg || seg->op.kind != kind_of(algo_) || seg->op.origin >= n_ || self_ >= n_ ||
      finished_.count(seg->op.seq) != 0 || seg->payload.size() != seg->total) {
    ++stats_.malformed;
    return true;
  }
  const auto op = seg->op.seq;
  auto& s = state_[op];
  if (!s.inbox.emplace(seg->index, seg->payload).second) {
    ++stats_.malformed; // a step this processor already has
    return true;
  }
  if (s.started)
    advance(op, s);
  return true;
}

bool mpich_allreduce_collective::holding() const {
  for (auto& [op, s] : state_)
    if (s.started && !s.done)
      return true;
  return false;
}

void mpich_allreduce_collective::send(std::uint64_t op, std::size_t to_rank, std::uint32_t step,
                                      shared_bytes data) {
  wire::bcast_segment seg;
  seg.op = {self_, op, kind_of(algo_), life_};
  seg.kind = tree_kind::latency;
  seg.first = step == 0;
  seg.index = step;
  seg.count = 1;
  seg.total = data.size();
  seg.payload = std::move(data);
  ++stats_.frames;
  stats_.bytes += seg.total;
  out_.sends.push_back({self_, static_cast<proc_id>(to_rank), wire::message{std::move(seg)}});
}

void mpich_allreduce_collective::advance(std::uint64_t op, op_state& s) {
  if (s.done)
    return;
  switch (algo_) {
  case mpich_algorithm::recursive_doubling: advance_doubling(op, s); break;
  case mpich_algorithm::ring: advance_ring(op, s); break;
  case mpich_algorithm::dissemination: advance_dissemination(op, s); break;
  }
}

bool mpich_allreduce_collective::combine(op_state& s, std::size_t offset, const shared_bytes& in) {
  if (offset + in.size() > s.acc.size()) {
    ++stats_.malformed;
    return false;
  }
  std::vector<std::uint8_t> part(s.acc.begin() + static_cast<std::ptrdiff_t>(offset),
                                 s.acc.begin() + static_cast<std::ptrdiff_t>(offset + in.size()));
  if (ops_.combine(s.spec.fn, part, in.data(), in.size())) {
    ++stats_.malformed;
    return false;
  }
  std::copy(part.begin(), part.end(), s.acc.begin() + static_cast<std::ptrdiff_t>(offset));
  return true;
}

std::size_t mpich_allreduce_collective::real_rank(std::size_t newrank) const {
  return newrank < rem_ ? newrank * 2 + 1 : newrank + rem_;
}

std::uint32_t mpich_allreduce_collective::doubling_steps() const {
  std::uint32_t l = 0;
  while ((std::size_t{1} << l) < pof2_)
    ++l;
  return l;
}

void mpich_allreduce_collective::advance_doubling(std::uint64_t op, op_state& s) {
  const std::size_t r = self_;
  const auto last = doubling_steps();
  const bool low = r < 2 * rem_;
  auto whole = [&] { return shared_bytes(s.acc); };
  if (low && r % 2 == 0) {
    // Sits the exchanges out: its buffer to r + 1, then the result back from it.
    if (s.next == 0) {
      send(op, r + 1, 0, whole());
      s.next = last + 1;
    }
    auto it = s.inbox.find(last + 1);
    if (it == s.inbox.end())
      return;
    if (it->second.size() != s.acc.size()) {
      ++stats_.malformed;
      s.inbox.erase(it);
      return;
    }
    s.acc = it->second.to_vector();
    s.inbox.erase(it);
    finish(op, s);
    return;
  }
  const std::size_t newrank = low ? r / 2 : r - rem_;
  for (;;) {
    const auto k = s.next;
    if (k == 0) {
      if (low) { // odd: takes in the buffer of r - 1 first
        auto it = s.inbox.find(0);
        if (it == s.inbox.end())
          return;
        auto data = it->second;
        s.inbox.erase(it);
        if (!combine(s, 0, data))
          return;
      }
      s.next = 1;
      if (last >= 1)
        send(op, real_rank(newrank ^ 1), 1, whole());
      continue;
    }
    if (k <= last) {
      auto it = s.inbox.find(k);
      if (it == s.inbox.end())
        return;
      auto data = it->second;
      s.inbox.erase(it);
      if (!combine(s, 0, data))
        return;
      s.next = k + 1;
      if (k + 1 <= last)
        send(op, real_rank(newrank ^ (std::size_t{1} << k)), k + 1, whole());
      continue;
    }
    if (low)
      send(op, r - 1, last + 1, whole());
    finish(op, s);
    return;
  }
}

std::pair<std::size_t, std::size_t> mpich_allreduce_collective::chunk(const op_state& s,
                                                                      std::size_t j) const {
  const auto es = element_size(s.spec.fn.type);
  const auto count = s.spec.count;
  const auto per = (count + n_ - 1) / n_;
  const auto lo = std::min(count, j * per), hi = std::min(count, (j + 1) * per);
  return {lo * es, hi * es};
}

void mpich_allreduce_collective::advance_ring(std::uint64_t op, op_state& s) {
  const std::size_t r = self_;
  const std::size_t n = n_;
  if (n == 1) {
    finish(op, s);
    return;
  }
  const auto right = (r + 1) % n;
  auto slice = [&](std::size_t j) {
    auto [lo, hi] = chunk(s, j);
    return shared_bytes(std::vector<std::uint8_t>(s.acc.begin() + static_cast<std::ptrdiff_t>(lo),
                                                  s.acc.begin() + static_cast<std::ptrdiff_t>(hi)));
  };
  if (!s.opened) { // step 0: its own chunk r, once
    s.opened = true;
    send(op, right, 0, slice(r));
  }
  for (;;) {
    const auto k = s.next;
    auto it = s.inbox.find(k);
    if (it == s.inbox.end())
      return;
    auto data = it->second;
    s.inbox.erase(it);
    if (k < n - 1) { // reduce-scatter: chunk r - 1 - k from the left
      const auto c = (r + 2 * n - 1 - k) % n;
      auto [lo, hi] = chunk(s, c);
      if (data.size() != hi - lo || !combine(s, lo, data)) {
        ++stats_.malformed;
        return;
      }
      send(op, right, static_cast<std::uint32_t>(k + 1), slice(c));
    } else { // allgather: the complete chunk r - j
      const auto j = k - (n - 1);
      const auto c = (r + n - j) % n;
      auto [lo, hi] = chunk(s, c);
      if (data.size() != hi - lo) {
        ++stats_.malformed;
        return;
      }
      std::copy(data.begin(), data.end(), s.acc.begin() + static_cast<std::ptrdiff_t>(lo));
      if (j + 2 < n) {
        send(op, right, static_cast<std::uint32_t>(k + 1), slice(c));
      } else {
        finish(op, s);
        return;
      }
    }
    s.next = k + 1;
  }
}

void mpich_allreduce_collective::advance_dissemination(std::uint64_t op, op_state& s) {
  std::uint32_t rounds = 0;
  while ((std::size_t{1} << rounds) < n_)
    ++rounds;
  if (!s.opened && rounds > 0) { // round 0, once
    s.opened = true;
    send(op, (self_ + 1) % n_, 0, {});
  }
  for (;;) {
    const auto k = s.next;
    if (k >= rounds) {
      finish(op, s);
      return;
    }
    auto it = s.inbox.find(k);
    if (it == s.inbox.end())
      return;
    s.inbox.erase(it);
    s.next = k + 1;
    if (k + 1 < rounds)
      send(op, (self_ + (std::size_t{1} << (k + 1))) % n_, k + 1, {});
  }
}

void mpich_allreduce_collective::finish(std::uint64_t op, op_state& s) {
  s.done = true;
  ++stats_.completed;
  if (auto own = own_(); !own.empty())
    out_.deliveries.push_back({op, std::move(own), shared_bytes(std::move(s.acc))});
  state_.erase(op);
  finished_.insert(op);
  while (finished_.size() > 64)
    finished_.erase(finished_.begin());
}

} // namespace banyan

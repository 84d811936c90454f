#include "banyan/core/alltoall.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "banyan/core/gather.hpp"
#include "banyan/core/scatter.hpp"

namespace banyan {

namespace {

reduce_config up_config(reduce_config rc) {
  rc = gather_config(rc, collective_kind::alltoall);
  rc.stride = alltoall_max_ranges; // the ranges of one all-to-all: one operation
  return rc;
}

broadcast_config down_config(broadcast_config bc) {
  return scatter_config(bc, collective_kind::alltoall);
}

} // namespace

std::size_t alltoall_ranges(std::size_t n, std::size_t block, const alltoall_config& cfg) {
  if (n <= 1 || block == 0)
    return 1;
  // T(m) = 2 d L + 2 n^2 b / (m B) + m c is least at m = sqrt(2 n^2 b / (B c)).
  const double bps = cfg.rate;
  const double cost = std::chrono::duration<double>(cfg.range_cost).count();
  const double whole = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(block);
  if (!(bps > 0) || !(cost > 0))
    return n;
  const double m = std::round(std::sqrt(2 * whole / (bps * cost)));
  if (!(m >= 1))
    return 1;
  const auto most = std::min(n, alltoall_max_ranges);
  return m >= static_cast<double>(most) ? most : static_cast<std::size_t>(m);
}

vnode_set alltoall_range(const vnode_set& all, std::size_t m, std::size_t g) {
  const auto n = all.size();
  if (m == 0 || g >= m)
    return {};
  // Range g holds the vnodes of ranks [g n / m, (g + 1) n / m) of `all`.
  const auto lo = g * n / m;
  const auto hi = (g + 1) * n / m;
  vnode_set out;
  std::size_t rank = 0;
  for (auto [a, b] : all.intervals()) {
    const std::size_t len = b - a;
    if (rank + len > lo && rank < hi) {
      const auto from = std::max(rank, lo) - rank;
      const auto to = std::min(rank + len, hi) - rank;
      out.append(static_cast<vnode_id>(a + from), static_cast<vnode_id>(a + to));
    }
    rank += len;
    if (rank >= hi)
      break;
  }
  return out;
}

std::vector<std::uint8_t> alltoall_transpose(std::uint64_t op, vnode_id root,
                                             const vnode_set& all, std::size_t block,
                                             const std::uint8_t* gathered) {
  return alltoall_transpose(op, root, all, all.size(), block, gathered);
}

std::vector<std::uint8_t> alltoall_transpose(std::uint64_t op, vnode_id root,
                                             const vnode_set& all, std::size_t destinations,
                                             std::size_t block, const std::uint8_t* gathered) {
  const std::size_t n = all.size();
  const std::size_t row = destinations * block;            // one source's blocks
  const std::size_t out_block = alltoall_head_bytes + n * block; // one destination's share
  std::vector<std::uint8_t> out(destinations * out_block);
  const std::uint32_t r = root;
  for (std::size_t j = 0; j < destinations; ++j) {
    auto* dst = out.data() + j * out_block;
    std::memcpy(dst, &op, 8);
    std::memcpy(dst + 8, &r, 4);
    dst += alltoall_head_bytes;
    for (std::size_t i = 0; i < n; ++i)
      std::memcpy(dst + i * block, gathered + i * row + j * block, block);
  }
  return out;
}

alltoall_collective::alltoall_collective(tree_view& view, const reduce_op_table& ops,
                                         reduce_config rc, broadcast_config bc,
                                         vnode_set settled, alltoall_config ac)
  : gather_then_broadcast(view, ops, up_config(rc), down_config(bc), std::move(settled)),
    cfg_(ac), first_op_(rc.first_op) {}

namespace {

/// The contributions of one all-to-all cut into ranges: each vnode's is asked for once
/// and sliced for every range (range g's gather takes the blocks for range g), and
/// dropped once every range took its slice.
struct range_contributions {
  contribution_fn values;
  std::size_t bytes = 0;  ///< a whole contribution: n x block
  std::size_t ranges = 1;
  std::map<vnode_id, std::pair<std::vector<std::uint8_t>, std::size_t>> held; ///< and taken
  std::optional<std::pair<vnode_id, std::size_t>> bad; ///< a vnode whose contribution was
                                                       ///< of another size, and its size

  std::vector<std::uint8_t> slice(vnode_id v, std::size_t at, std::size_t len) {
    auto i = held.find(v);
    if (i == held.end())
      i = held.emplace(v, std::make_pair(values ? values(v) : std::vector<std::uint8_t>{},
                                         std::size_t{0}))
            .first;
    auto& [whole, taken] = i->second;
    std::vector<std::uint8_t> out;
    if (whole.size() != bytes)
      bad = std::make_pair(v, whole.size()); // nothing: the gather refuses it, naming v
    else
      out.assign(whole.begin() + static_cast<std::ptrdiff_t>(at),
                 whole.begin() + static_cast<std::ptrdiff_t>(at + len));
    if (++taken >= ranges)
      held.erase(i);
    return out;
  }
};

} // namespace

std::optional<error> alltoall_collective::start(timestamp now, std::uint64_t op, vnode_id root,
                                                std::size_t block, contribution_fn values) {
  view_.refresh();
  const auto all = view_.all_vnodes();
  const auto n = all.size();
  if (block == 0)
    return make_error(errc::invalid_argument,
                      "alltoall " + std::to_string(op) + ": blocks of 0 bytes");
  if (n != 0 && block > (std::size_t{1} << 40) / n)
    return make_error(errc::invalid_argument, "alltoall " + std::to_string(op) + ": blocks of " +
                                                std::to_string(block) + " bytes for " +
                                                std::to_string(n) + " vnodes are too many bytes");
  if (op < first_op_)
    return make_error(errc::invalid_argument, "alltoall " + std::to_string(op) +
                                                ": all-to-alls are numbered from " +
                                                std::to_string(first_op_));
  const auto m = alltoall_ranges(n, block, cfg_);
  const auto number = [&](std::size_t g) { return alltoall_gather_number(first_op_, op, g); };
  std::shared_ptr<range_contributions> shared;
  std::optional<error> e;
  if (m == 1) {
    e = up_.start(now, gather_spec(number(0), root, block * n, n), std::move(values), ro_);
  } else if (!all.contains(root)) {
    e = make_error(errc::invalid_argument,
                   "reduction " + std::to_string(number(0)) + ": root vnode " +
                     std::to_string(root) +
                     " does not exist (vnodes are " + all.to_string() + ")");
  } else {
    shared = std::make_shared<range_contributions>();
    shared->values = std::move(values);
    shared->bytes = n * block;
    shared->ranges = m;
    // Range g: a gather (number `alltoall_gather_number`) of every vnode's blocks for the
    // range, to the range's first vnode. The first start checks everything the others would (the
    // order, this processor's contributions); the others cannot fail where it did not.
    std::size_t at = 0;
    for (std::size_t g = 0; g < m && !e; ++g) {
      const auto range = alltoall_range(all, m, g);
      const auto len = range.size() * block;
      contribution_fn slice = [shared, at, len](vnode_id v) { return shared->slice(v, at, len); };
      auto err = up_.start(now, gather_spec(number(g), range.front(), len, n), std::move(slice),
                           ro_);
      if (err && g == 0)
        e = std::move(err);
      else if (err)
        out_.problems.push_back({reduce_problem::kind::bad_data, op, range,
                                 "range " + std::to_string(g) + " of alltoall " +
                                   std::to_string(op) + " did not start: " + err->to_string()});
      at += len;
    }
  }
  if (!e) {
    calls_[op] = {m, root};
    while (calls_.size() > kept_calls)
      calls_.erase(calls_.begin());
  }
  absorb(now);
  if (e) {
    if (shared && shared->bad) {
      e->message = "alltoall " + std::to_string(op) + ": the contribution of vnode " +
                   std::to_string(shared->bad->first) + " is " +
                   std::to_string(shared->bad->second) + " bytes, not " +
                   std::to_string(block * n) + " (a contribution is one block of " +
                   std::to_string(block) + " bytes for each of the " + std::to_string(n) +
                   " vnodes)";
      return e;
    }
    // The gather's words ("reduction 7: ..., not 96 (96 bytes elements)") in ours.
    auto why = e->message;
    const auto prefix = "reduction " + std::to_string(number(0)) + ": ";
    if (why.compare(0, prefix.size(), prefix) == 0)
      why.erase(0, prefix.size());
    const auto elements = " (" + std::to_string(block * n) + " bytes elements)";
    if (auto at = why.find(elements); at != std::string::npos)
      why.erase(at, elements.size());
    e->message = "alltoall " + std::to_string(op) + ": " + why;
    if (why.find("contribution of vnode") != std::string::npos)
      e->message += " (a contribution is one block of " + std::to_string(block) +
                    " bytes for each of the " + std::to_string(n) + " vnodes)";
  }
  return e;
}

reduce_abandoned alltoall_collective::abandon(timestamp now, std::uint64_t op) {
  auto c = calls_.find(op);
  const std::size_t m = c != calls_.end() ? c->second.ranges : 1;
  reduce_abandoned all;
  for (std::size_t g = 0; g < m; ++g) {
    auto r = up_.abandon(now, op < first_op_ ? op : alltoall_gather_number(first_op_, op, g), ro_);
    if (g == 0) {
      all = std::move(r);
      continue;
    }
    all.known = all.known || r.known;
    all.gathered |= r.gathered;
    all.missing |= r.missing;
    for (auto& [p, vs] : r.missing_owners)
      all.missing_owners[p] |= vs;
    for (auto p : r.waiting_for)
      if (std::find(all.waiting_for.begin(), all.waiting_for.end(), p) == all.waiting_for.end())
        all.waiting_for.push_back(p);
    all.part_sent = all.part_sent && r.part_sent;
    if (r.at_root && !all.at_root) {
      all.at_root = true;
      all.root = r.root;
    }
  }
  all.op = op;
  if (c != calls_.end() && !all.at_root)
    all.root = c->second.root;
  absorb(now);
  return all;
}

void alltoall_collective::absorb(timestamp now) {
  // The gather's results: at the root's owner, the transpose goes down to every vnode.
  for (auto& r : ro_.results) {
    const auto n = r.vnodes.size();
    // Which range of which call: one range (the whole namespace) unless it was cut.
    const std::uint64_t op = call_number(r.op);
    vnode_id root = r.root;
    vnode_set to = r.vnodes;
    if (auto c = calls_.find(op); c != calls_.end() && c->second.ranges > 1) {
      root = c->second.root;
      to = alltoall_range(r.vnodes, c->second.ranges,
                          static_cast<std::size_t>(r.op - alltoall_gather_number(first_op_, op, 0)));
    }
    const auto d = to.size();
    const auto block = n == 0 || d == 0 ? 0 : r.value.size() / (n * d);
    if (n == 0 || block == 0 || r.value.size() != n * d * block) {
      out_.problems.push_back({reduce_problem::kind::bad_data, op, r.vnodes,
                               "a gathered all-to-all of " + std::to_string(r.value.size()) +
                                 " bytes is not " + std::to_string(n) + " x " +
                                 std::to_string(d) + " blocks"});
    } else {
      auto msg = alltoall_transpose(op, root, r.vnodes, d, block, r.value.data());
      auto id = down_.broadcast_to(now, shared_bytes(std::move(msg)), to, bo_);
      if (!id)
        out_.problems.push_back({reduce_problem::kind::bad_data, op, r.vnodes,
                                 "the transposed blocks could not go down: " +
                                   id.err().to_string()});
    }
    out_.gathered.push_back(std::move(r));
  }
  ro_.results.clear();
  for (auto& s : ro_.sends) {
    if (auto* p = std::get_if<wire::reduce_partial>(&s.body))
      out_.partials_sent.push_back(*p);
    out_.sends.push_back(std::move(s));
  }
  for (auto& t : ro_.timers)
    out_.timers.push_back({t.after, t.token * 2});
  for (auto& p : ro_.problems) {
    p.op = call_number(p.op);
    out_.problems.push_back(std::move(p));
  }
  ro_.clear();
  for (auto& s : bo_.sends)
    out_.sends.push_back(std::move(s));
  for (auto& t : bo_.timers)
    out_.timers.push_back({t.after, t.token * 2 + 1});
  for (auto& d : bo_.deliveries) {
    const auto all = view_.all_vnodes();
    const auto per = d.vnodes.empty() ? 0 : d.payload.size() / d.vnodes.size();
    if (all.empty() || per <= alltoall_head_bytes ||
        per * d.vnodes.size() != d.payload.size() ||
        (per - alltoall_head_bytes) % all.size() != 0) {
      out_.problems.push_back({reduce_problem::kind::bad_data, 0, d.vnodes,
                               "an all-to-all block of " + std::to_string(per) +
                                 " bytes: not a head and one block per vnode"});
      continue;
    }
    alltoall_delivery a;
    std::memcpy(&a.op, d.payload.data(), 8);
    std::uint32_t root = 0;
    std::memcpy(&root, d.payload.data() + 8, 4);
    a.root = root;
    a.from = all;
    a.block = (per - alltoall_head_bytes) / all.size();
    std::size_t k = 0;
    d.vnodes.for_each([&](vnode_id w) {
      a.blocks.emplace(w, d.payload.slice(k * per + alltoall_head_bytes,
                                          per - alltoall_head_bytes));
      ++k;
    });
    a.vnodes = std::move(d.vnodes);
    out_.deliveries.push_back(std::move(a));
  }
  bo_.clear();
}

} // namespace banyan

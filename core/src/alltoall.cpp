#include "banyan/core/alltoall.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "banyan/core/gather.hpp"
#include "banyan/core/scatter.hpp"

namespace banyan {

namespace {

reduce_config up_config(reduce_config rc) { return gather_config(rc, collective_kind::alltoall); }

broadcast_config down_config(broadcast_config bc) {
  return scatter_config(bc, collective_kind::alltoall);
}

} // namespace

std::vector<std::uint8_t> alltoall_transpose(std::uint64_t op, vnode_id root,
                                             const vnode_set& all, std::size_t block,
                                             const std::uint8_t* gathered) {
  const std::size_t n = all.size();
  const std::size_t row = n * block;                    // one source's contribution
  const std::size_t out_block = alltoall_head_bytes + row; // one destination's share
  std::vector<std::uint8_t> out(n * out_block);
  const std::uint32_t r = root;
  for (std::size_t j = 0; j < n; ++j) {
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
                                         vnode_set settled)
  : gather_then_broadcast(view, ops, up_config(rc), down_config(bc), std::move(settled)) {}

std::optional<error> alltoall_collective::start(timestamp now, std::uint64_t op, vnode_id root,
                                                std::size_t block, contribution_fn values) {
  view_.refresh();
  const auto n = view_.all_vnodes().size();
  if (block == 0)
    return make_error(errc::invalid_argument,
                      "alltoall " + std::to_string(op) + ": blocks of 0 bytes");
  if (n != 0 && block > (std::size_t{1} << 40) / n)
    return make_error(errc::invalid_argument, "alltoall " + std::to_string(op) + ": blocks of " +
                                                std::to_string(block) + " bytes for " +
                                                std::to_string(n) + " vnodes are too many bytes");
  auto e = up_.start(now, gather_spec(op, root, block * n, n), std::move(values), ro_);
  absorb(now);
  if (e) {
    // The gather's words ("reduction 7: ..., not 96 (96 bytes elements)") in ours.
    auto why = e->message;
    const auto prefix = "reduction " + std::to_string(op) + ": ";
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

void alltoall_collective::absorb(timestamp now) {
  // The gather's results: at the root's owner, the transpose goes down to every vnode.
  for (auto& r : ro_.results) {
    const auto n = r.vnodes.size();
    const auto block = n == 0 ? 0 : r.value.size() / (n * n);
    if (n == 0 || block == 0 || r.value.size() != n * n * block) {
      out_.problems.push_back({reduce_problem::kind::bad_data, r.op, r.vnodes,
                               "a gathered all-to-all of " + std::to_string(r.value.size()) +
                                 " bytes is not n x n blocks"});
    } else {
      auto msg = alltoall_transpose(r.op, r.root, r.vnodes, block, r.value.data());
      auto id = down_.broadcast(now, shared_bytes(std::move(msg)), bo_);
      if (!id)
        out_.problems.push_back({reduce_problem::kind::bad_data, r.op, r.vnodes,
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
  for (auto& p : ro_.problems)
    out_.problems.push_back(std::move(p));
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

#include "banyan/core/allgather.hpp"

#include <algorithm>
#include <cstring>

#include "banyan/core/gather.hpp"

namespace banyan {

namespace {

/// What goes down: op (8 bytes), root (4 bytes), then every vnode's block.
constexpr std::size_t head_bytes = 12;

reduce_config up_config(reduce_config rc) { return gather_config(rc, collective_kind::allgather); }

broadcast_config down_config(broadcast_config bc, const reduce_config& rc) {
  bc.kind = collective_kind::allgather;
  bc.message_kind = collective_kind::none;
  bc.blocks = false;
  // Gathered blocks of at most the star's bytes (reduce_config::star_bytes) go from the
  // root's owner straight to its LAN (broadcast_config::shallow_bytes), the star's way
  // back.
  bc.shallow_bytes = rc.star_bytes == 0 ? 0 : rc.star_bytes + head_bytes;
  bc.shallow_max_procs = rc.star_max_procs;
  return bc;
}

} // namespace

allgather_collective::allgather_collective(tree_view& view, const reduce_op_table& ops,
                                           reduce_config rc, broadcast_config bc,
                                           vnode_set settled)
  : gather_then_broadcast(view, ops, up_config(rc), down_config(bc, rc), std::move(settled)) {}

std::optional<error> allgather_collective::start(timestamp now, std::uint64_t op, vnode_id root,
                                                 std::size_t block, contribution_fn values) {
  view_.refresh();
  auto e = up_.start(now, gather_spec(op, root, block, view_.all_vnodes().size()),
                     std::move(values), ro_);
  absorb(now);
  return e;
}

void allgather_collective::absorb(timestamp now) {
  // The gather's results: at the root's owner, the blocks go down to every vnode.
  for (auto& r : ro_.results) {
    std::vector<std::uint8_t> msg(head_bytes + r.value.size());
    const std::uint64_t op = r.op;
    const std::uint32_t root = r.root;
    std::memcpy(msg.data(), &op, 8);
    std::memcpy(msg.data() + 8, &root, 4);
    if (!r.value.empty())
      std::memcpy(msg.data() + head_bytes, r.value.data(), r.value.size());
    auto id = down_.broadcast(now, shared_bytes(std::move(msg)), bo_);
    if (!id)
      out_.problems.push_back({reduce_problem::kind::bad_data, r.op, r.vnodes,
                               "the gathered blocks could not go down: " + id.err().to_string()});
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
    if (d.payload.size() < head_bytes) {
      out_.problems.push_back({reduce_problem::kind::bad_data, 0, d.vnodes,
                               "an allgather broadcast without its head"});
      continue;
    }
    allgather_delivery a;
    std::memcpy(&a.op, d.payload.data(), 8);
    std::uint32_t root = 0;
    std::memcpy(&root, d.payload.data() + 8, 4);
    a.root = root;
    a.vnodes = std::move(d.vnodes);
    a.all = view_.all_vnodes();
    a.blocks = d.payload.slice(head_bytes, d.payload.size() - head_bytes);
    out_.deliveries.push_back(std::move(a));
  }
  bo_.clear();
}

} // namespace banyan

// banyan::node's all-to-all: its engine (core/alltoall.hpp, one per membership,
// registered in the membership's engine_host next to the others), its start, and the
// answers its deliveries give (node_machine.hpp). Time limits and cancellation are the
// reductions' (`fail_reduction`, `open_reduction`): an all-to-all is an open reduction
// of kind `alltoall`.

#include "node_machine.hpp"

namespace banyan::actors::node_internal {

void add_alltoall_engine(node_ptr self, const vnode_set& settled) {
  auto& st = self->state;
  auto bc = st.bcast_cfg;
  // Its scatters are named (origin, kind, life, seq), numbered on from the node's count
  // (`take_alltoalls`); their streams apart per membership.
  bc.life = st.life;
  bc.first_seq = st.next_seq;
  bc.first_tag = (std::uint64_t{st.membership} << 32) + 1;
  st.host.add(std::make_unique<alltoall_collective>(*st.view, st.ops, st.reduce_cfg, bc, settled));
  st.alltoall_parts.clear();
}

namespace {

/// Answers all-to-all `op` here if the blocks for every vnode this node owns are here:
/// `value` their blocks (each vnode's, from every vnode) in vnode order.
void maybe_answer(node_ptr self, std::uint64_t op) {
  auto& st = self->state;
  auto it = st.reductions.find({collective_kind::alltoall, op});
  auto part = st.alltoall_parts.find(op);
  if (it == st.reductions.end() || part == st.alltoall_parts.end())
    return;
  const auto own = st.sup->own_vnodes();
  // The blocks may reach this node's vnodes in several deliveries (parts of the scatter
  // come by different paths while trees heal): answered once they reached every vnode
  // the node owns, with all of them.
  if (own.empty() || !part->second.vnodes.includes(own))
    return;
  auto& d = part->second;
  std::vector<std::uint8_t> value;
  value.reserve(d.vnodes.size() * d.from.size() * d.block);
  for (auto& [w, b] : d.blocks)
    value.insert(value.end(), b.begin(), b.end());
  it->second.req->answer(expected<reduce_result>(
    reduce_result{op, d.root, d.vnodes, shared_bytes(std::move(value))}));
  st.reductions.erase(it);
  st.alltoall_parts.erase(part);
}

} // namespace

void take_alltoalls(node_ptr self, alltoall_collective& a2a) {
  auto& st = self->state;
  auto& out = a2a.out();
  for (auto& d : out.deliveries) {
    const bool open = st.reductions.count({collective_kind::alltoall, d.op}) != 0;
    if (!open && d.op <= a2a.last_started())
      continue; // answered already, or given up here
    auto [i, fresh] = st.alltoall_parts.try_emplace(d.op);
    auto& acc = i->second;
    if (fresh) {
      acc.op = d.op;
      acc.root = d.root;
      acc.from = d.from;
      acc.block = d.block;
    }
    acc.vnodes |= d.vnodes;
    for (auto& [w, b] : d.blocks)
      acc.blocks[w] = b;
    maybe_answer(self, d.op);
  }
  // Kept for all-to-alls not started here yet: the last few only.
  while (st.alltoall_parts.size() > 16)
    st.alltoall_parts.erase(st.alltoall_parts.begin());
  for (auto& p : out.problems)
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                "alltoall " + std::to_string(p.op) + ": problem with vnodes "
                  + p.vnodes.to_string() + ": " + p.detail, {}});
  st.next_seq = std::max(st.next_seq, a2a.down().next_seq());
  a2a.down().number_from(st.next_seq);
}

void start_alltoall(node_ptr self, const collective_request_ptr& r) {
  auto& st = self->state;
  auto& nr = r->reduction;
  auto refuse = [&](errc code, const std::string& why) {
    r->answer(expected<reduce_result>(make_error(code, "alltoall " + std::to_string(nr.seq)
                                                         + " at processor "
                                                         + std::to_string(st.sup->self())
                                                         + ": " + why)));
  };
  const auto state = st.sup->state();
  const bool in = state == supervisor::status::member || state == supervisor::status::leaving;
  auto* eng = in ? st.host.get<alltoall_collective>(collective_kind::alltoall) : nullptr;
  if (!eng) {
    refuse(errc::invalid_argument, "not a member");
    return;
  }
  if (nr.count == 0 || !nr.values || nr.timeout.count() < 0) {
    refuse(errc::invalid_argument, nr.count == 0 ? "blocks of 0 bytes"
                                   : !nr.values  ? "no values function"
                                                 : "negative timeout");
    return;
  }
  const reduction_key key{collective_kind::alltoall, nr.seq};
  if (st.reductions.count(key) != 0) {
    refuse(errc::invalid_argument, "already running here");
    return;
  }
  auto counted = std::make_shared<vnode_set>();
  contribution_fn values = [counted, fn = nr.values](vnode_id v) {
    counted->insert(v);
    return fn(v);
  };
  if (auto err = eng->start(now_of(), nr.seq, nr.root, nr.count, std::move(values))) {
    eng->clear_outbox();
    r->answer(expected<reduce_result>(*err));
    return;
  }
  open_reduction o;
  o.req = r;
  o.contributed = counted;
  o.serial = ++st.next_serial;
  o.timeout = nr.timeout.count() > 0 ? nr.timeout : st.op_timeout;
  o.owners = st.sup->routes().partition(st.sup->routes().all());
  self->later(o.timeout, deadline_atom::value, static_cast<std::uint8_t>(nr.over), nr.seq,
              o.serial);
  st.reductions[key] = std::move(o);
  maybe_answer(self, nr.seq); // its blocks may have come before it started here
  run_engines(self);
}

} // namespace banyan::actors::node_internal

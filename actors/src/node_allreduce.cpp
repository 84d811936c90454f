// banyan::node's allreduces and barriers: their engines (core/allreduce.hpp, one per
// kind per membership, registered in the membership's engine_host next to the broadcast
// and reduction engines), their starts, and the answers their deliveries give
// (node_machine.hpp). Time limits and cancellation are the reductions' (`fail_reduction`,
// `open_reduction`): an allreduce is an open reduction of kind `allreduce` or `barrier`.

#include "node_machine.hpp"

namespace banyan::actors::node_internal {

bool is_allreduce(collective_kind k) {
  return k == collective_kind::allreduce || k == collective_kind::barrier;
}

void add_allreduce_engines(node_ptr self, const vnode_set& settled) {
  auto& st = self->state;
  for (auto kind : {collective_kind::allreduce, collective_kind::barrier}) {
    allreduce_config cfg;
    cfg.kind = kind;
    cfg.reduce = st.reduce_cfg;
    cfg.bcast = st.bcast_cfg;
    // Releases are named (origin, kind, life, seq), numbered on across memberships;
    // their streams apart per membership.
    auto& next = kind == collective_kind::barrier ? st.next_barrier_release
                                                  : st.next_allreduce_release;
    cfg.bcast.life = st.life;
    cfg.bcast.first_seq = next;
    cfg.bcast.first_tag = (std::uint64_t{st.membership} << 32) + 1;
    st.host.add(std::make_unique<allreduce_collective>(*st.view, st.ops, cfg, settled));
  }
}

void start_allreduce(node_ptr self, const collective_request_ptr& r) {
  auto& st = self->state;
  auto now = now_of();
  auto& nr = r->reduction;
  const char* what = to_string(nr.over);
  auto refuse = [&](errc code, const std::string& why) {
    r->answer(expected<reduce_result>(make_error(code, std::string(what) + " " + std::to_string(nr.seq)
                                                         + " at processor "
                                                         + std::to_string(st.sup->self())
                                                         + ": " + why)));
  };
  const auto state = st.sup->state();
  const bool in = state == supervisor::status::member || state == supervisor::status::leaving;
  auto* eng = in ? st.host.get<allreduce_collective>(nr.over) : nullptr;
  if (!eng) {
    refuse(errc::invalid_argument, "not a member");
    return;
  }
  const bool barrier = nr.over == collective_kind::barrier;
  if (nr.timeout.count() < 0) {
    refuse(errc::invalid_argument, "negative timeout");
    return;
  }
  if (!barrier && (nr.count == 0 || !nr.values)) {
    refuse(errc::invalid_argument, nr.count == 0 ? "count is 0" : "no values function");
    return;
  }
  const reduction_key key{nr.over, nr.seq};
  if (st.reductions.count(key) != 0) {
    refuse(errc::invalid_argument, "already running here");
    return;
  }
  auto counted = std::make_shared<vnode_set>();
  contribution_fn values;
  if (!barrier)
    values = [counted, fn = nr.values](vnode_id v) {
      counted->insert(v);
      return fn(v);
    };
  allreduce_spec spec{nr.seq, barrier ? vnode_id{0} : nr.root, nr.op, barrier ? 0 : nr.count};
  if (barrier)
    spec.fn = {reduce_kind::sum, element_type::int32, 0};
  if (auto err = eng->start(now, spec, std::move(values))) {
    r->answer(expected<reduce_result>(*err));
    run_engines(self); // a refused start changes nothing, but may have synced histories
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
  run_engines(self); // may answer it at once (its result was kept here)
}

void take_allreduce(node_ptr self, collective_kind kind, allreduce_outbox& out) {
  auto& st = self->state;
  if (auto* ar = st.host.get<allreduce_collective>(kind))
    if (auto next = ar->releaser().next_seq(); next > 0) {
      auto& keep = kind == collective_kind::barrier ? st.next_barrier_release
                                                    : st.next_allreduce_release;
      keep = std::max(keep, next);
    }
  for (auto& d : out.deliveries) {
    auto it = st.reductions.find({kind, d.op});
    if (it == st.reductions.end())
      continue; // it gave up (timeout, cancel)
    // The result may reach this node's vnodes in several deliveries (parts of the
    // release come by different paths while trees heal): answered once it has reached
    // every vnode the node owns, with all of them.
    it->second.reached |= d.vnodes;
    if (!it->second.reached.includes(st.sup->own_vnodes()))
      continue;
    auto& nr = it->second.req->reduction;
    it->second.req->answer(expected<reduce_result>(
      reduce_result{d.op, kind == collective_kind::barrier ? vnode_id{0} : nr.root,
                    std::move(it->second.reached), std::move(d.value)}));
    st.reductions.erase(it);
  }
  for (auto& p : out.problems) {
    const auto line = std::string(to_string(kind)) + " " + std::to_string(p.op)
                      + ": problem with vnodes " + p.vnodes.to_string() + ": " + p.detail;
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc, line, {}});
    if (p.what != reduce_problem::kind::bad_data)
      continue;
    if (auto it = st.reductions.find({kind, p.op}); it != st.reductions.end()) {
      it->second.req->answer(expected<reduce_result>(make_error(errc::invalid_argument, line)));
      st.reductions.erase(it);
    }
  }
}

} // namespace banyan::actors::node_internal

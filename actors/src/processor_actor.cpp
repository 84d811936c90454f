#include "broadcast_glue.hpp"

#include "banyan/core/broadcast.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"

namespace banyan::actors {

namespace {

/// Broadcasts over static trees are numbered with the top bit set, so that their frames
/// (and bounces) find the static engine.
constexpr std::uint64_t static_bit = std::uint64_t{1} << 63;

/// How often a processor that has left asks its engines whether they have drained.
constexpr auto drain_poll = std::chrono::milliseconds(100);

struct processor_state {
  std::shared_ptr<supervisor> sup;
  caf::actor net;
  cluster_monitor* mon = nullptr;
  std::shared_ptr<broadcast_ledger> ledger;
  std::uint32_t incarnation = 0;
  outbox out;
  // The broadcast engine over the adaptive trees (the supervisor's view).
  std::unique_ptr<supervisor_view> view;
  std::unique_ptr<broadcast_engine> bcast;
  broadcast_outbox bo;
  // A broadcast engine over a static tree (installed by the harness; emulation only).
  std::unique_ptr<routing_table> static_routes;
  std::unique_ptr<static_tree_view> static_view;
  std::unique_ptr<broadcast_engine> static_bcast;
  std::uint32_t static_installs = 0;
  bool left = false;
  static inline const char* name = "banyan.processor";
};

using processor_ptr = caf::stateful_actor<processor_state>*;

bool is_static(const wire::collective_id& op) {
  return (op.seq & static_bit) != 0;
}

broadcast_engine* engine_for(processor_ptr self, const wire::message& m) {
  auto& st = self->state;
  auto* seg = std::get_if<wire::bcast_segment>(&m);
  if (!seg)
    return nullptr;
  return is_static(seg->op) ? st.static_bcast.get() : st.bcast.get();
}

void carry_out_engine(processor_ptr self, bool static_engine) {
  auto& st = self->state;
  auto& bo = st.bo;
  if (!bo.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(bo.sends)));
  for (auto& t : bo.timers)
    self->delayed_send(self, t.after, bctimer_atom::value, static_engine, t.token);
  if (st.ledger && !bo.deliveries.empty()) {
    auto now = now_of(self);
    std::lock_guard<std::mutex> guard{st.ledger->mtx};
    for (auto& d : bo.deliveries) {
      auto& per = st.ledger->deliveries[d.op];
      d.vnodes.for_each([&](vnode_id v) { per[v].push_back(now); });
    }
  }
  bo.clear();
}

bool drained(processor_ptr self) {
  auto& st = self->state;
  auto now = now_of(self);
  return st.bcast->drained(now) && (!st.static_bcast || st.static_bcast->drained(now));
}

void stop(processor_ptr self) {
  auto& st = self->state;
  self->send(st.net, detach_atom::value, st.sup->self(), caf::actor_cast<caf::actor>(self));
  self->quit();
}

/// Carries out a supervisor event: its frames first (routes travel ahead), then the
/// engine's reaction to the view change.
void carry_out(processor_ptr self) {
  auto& st = self->state;
  if (!st.out.sends.empty())
    self->send(st.net, send_atom::value, envelope_batch(std::move(st.out.sends)));
  for (auto& t : st.out.timers)
    self->delayed_send(self, t.after, timer_atom::value, t.token);
  bool left = false;
  for (auto& e : st.out.events) {
    if (st.mon)
      st.mon->on_event(st.sup->self(), e);
    left = left || e.what == tree_event::kind::left;
  }
  st.out.clear();
  st.bcast->on_view_change(now_of(self), st.bo);
  carry_out_engine(self, false);
  if (left && !st.left) {
    // Stay reachable, feeding the engines, until they have drained.
    st.left = true;
    if (drained(self))
      stop(self);
    else
      self->delayed_send(self, drain_poll, drain_atom::value);
  }
}

caf::behavior processor_actor(processor_ptr self, std::shared_ptr<supervisor> sup,
                              caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                              std::shared_ptr<broadcast_ledger> ledger) {
  auto& init = self->state;
  init.sup = std::move(sup);
  init.net = std::move(net);
  init.mon = mon;
  init.ledger = std::move(ledger);
  init.incarnation = incarnation;
  init.view = std::make_unique<supervisor_view>(*init.sup);
  broadcast_config dynamic_cfg;
  dynamic_cfg.first_seq = (std::uint64_t{incarnation} << 32) + 1;
  init.bcast = std::make_unique<broadcast_engine>(*init.view, dynamic_cfg);
  return {
    [=](deliver_atom, const wire::envelope& e) {
      auto& st = self->state;
      auto now = now_of(self);
      if (broadcast_engine::handles(e.body)) {
        auto* eng = engine_for(self, e.body);
        bool taken = eng && eng->on_message(now, e.from, e.body, st.bo);
        carry_out_engine(self, eng == st.static_bcast.get() && eng);
        if (!taken)
          self->send(st.net, refuse_atom::value, e);
        return;
      }
      st.sup->on_message(now, e.from, e.body, st.out);
      carry_out(self);
    },
    [=](unreachable_atom, proc_id p) {
      self->state.sup->on_unreachable(now_of(self), p, self->state.out);
      carry_out(self);
    },
    [=](bounced_atom, const wire::envelope& e) {
      auto& st = self->state;
      if (auto* eng = engine_for(self, e.body)) {
        eng->on_undeliverable(now_of(self), e.to, e.body, st.bo);
        carry_out_engine(self, eng == st.static_bcast.get());
      }
    },
    [=](timer_atom, std::uint64_t token) {
      self->state.sup->on_timer(now_of(self), token, self->state.out);
      carry_out(self);
    },
    [=](bctimer_atom, bool static_engine, std::uint64_t token) {
      auto& st = self->state;
      auto* eng = static_engine ? st.static_bcast.get() : st.bcast.get();
      if (!eng)
        return;
      eng->on_timer(now_of(self), token, st.bo);
      carry_out_engine(self, static_engine);
    },
    [=](drain_atom) {
      if (drained(self))
        stop(self);
      else
        self->delayed_send(self, drain_poll, drain_atom::value);
    },
    [=](static_tree_atom, const tree_ptr& t) {
      // Emulation only: every processor is handed the same tree, and owns what its
      // supervisor's routing table says now. A broadcast still under way on the
      // previous static tree would be cut off: install between broadcasts.
      auto& st = self->state;
      st.static_bcast.reset();
      st.static_view.reset();
      st.static_routes = std::make_unique<routing_table>(st.sup->routes());
      tree copy = *t;
      st.static_view = std::make_unique<static_tree_view>(
        st.sup->self(), *st.static_routes, [copy](tree_key) { return copy; });
      broadcast_config bc;
      bc.first_seq = static_bit | (std::uint64_t{st.incarnation} << 32) |
                     (std::uint64_t{++st.static_installs} << 20);
      st.static_bcast = std::make_unique<broadcast_engine>(*st.static_view, bc);
    },
    [=](bcast_atom, const bcast_request_ptr& req) {
      auto& st = self->state;
      auto* eng = req->use_static ? st.static_bcast.get() : st.bcast.get();
      if (!eng || st.left) {
        req->result.set_value(std::nullopt);
        return;
      }
      auto now = now_of(self);
      auto id = eng->broadcast(now, shared_bytes(std::vector<std::uint8_t>(req->bytes, 0x5a)),
                               st.bo);
      if (!id) {
        req->result.set_value(std::nullopt);
        st.bo.clear();
        return;
      }
      if (st.ledger) {
        std::lock_guard<std::mutex> guard{st.ledger->mtx};
        st.ledger->started[*id] = now;
      }
      carry_out_engine(self, req->use_static);
      req->result.set_value(*id);
    },
    [=](found_atom, const found_args_ptr& args) {
      self->state.sup->found(now_of(self), args->members, args->routes, self->state.out);
      carry_out(self);
    },
    [=](join_atom, proc_id contact, const vnode_set& wanted) {
      self->state.sup->join(now_of(self), contact, wanted, self->state.out);
      carry_out(self);
    },
    [=](leave_atom, proc_id recipient) {
      auto err = self->state.sup->leave(now_of(self), recipient, self->state.out);
      if (err)
        caf::aout(self) << "processor " << self->state.sup->self()
                        << " cannot leave: " << err->to_string() << std::endl;
      carry_out(self);
    },
  };
}

} // namespace

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                           std::shared_ptr<broadcast_ledger> ledger) {
  return sys.spawn(processor_actor, std::move(sup), std::move(net), mon, incarnation,
                   std::move(ledger));
}

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon) {
  return spawn_processor(sys, std::move(sup), std::move(net), mon, 0, nullptr);
}

} // namespace banyan::actors

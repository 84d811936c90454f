#include "processor_actor.hpp"

namespace banyan::actors {

namespace {

struct processor_state {
  std::shared_ptr<supervisor> sup;
  caf::actor net;
  cluster_monitor* mon = nullptr;
  outbox out;
  static inline const char* name = "banyan.processor";
};

using processor_ptr = caf::stateful_actor<processor_state>*;

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
  if (left) {
    self->send(st.net, detach_atom::value, st.sup->self(), caf::actor_cast<caf::actor>(self));
    self->quit();
  }
}

caf::behavior processor_actor(processor_ptr self, std::shared_ptr<supervisor> sup,
                              caf::actor net, cluster_monitor* mon) {
  self->state.sup = std::move(sup);
  self->state.net = std::move(net);
  self->state.mon = mon;
  return {
    [=](deliver_atom, const wire::envelope& e) {
      self->state.sup->on_message(now_of(self), e.from, e.body, self->state.out);
      carry_out(self);
    },
    [=](unreachable_atom, proc_id p) {
      self->state.sup->on_unreachable(now_of(self), p, self->state.out);
      carry_out(self);
    },
    [=](timer_atom, std::uint64_t token) {
      self->state.sup->on_timer(now_of(self), token, self->state.out);
      carry_out(self);
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
                           caf::actor net, cluster_monitor* mon) {
  return sys.spawn(processor_actor, std::move(sup), std::move(net), mon);
}

} // namespace banyan::actors

// The emulated wide-area network as an actor. EMULATED: messages never leave the
// process. The actor owns a wan_model; every message a processor sends is
// submitted to the model with its modelled wire size, and the actor wakes itself
// (a delayed message on the actor clock, so virtual time works) whenever the model
// says the next delivery is due.

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "banyan/net/wan_model.hpp"
#include "collective_glue.hpp"

namespace banyan::actors {

namespace {

struct network_state {
  std::unique_ptr<net::wan_model> model;
  std::unordered_map<std::uint64_t, wire::envelope> flying;
  std::vector<caf::actor> procs;
  /// A rejoining incarnation whose id is still held by its draining predecessor, with
  /// the join it makes once the predecessor detaches: (actor, contact, wanted).
  std::map<proc_id, std::tuple<caf::actor, proc_id, vnode_set>> waiting;
  std::multiset<timestamp> ticks;
  std::shared_ptr<shared_counters> ctr;
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> trace;
  static inline const char* name = "banyan.emulated_network";
};

using network_ptr = caf::stateful_actor<network_state>*;

/// Carries `e` back to its sender after `back`; counted in flight meanwhile, so that a
/// cluster is not quiet while a frame is on its way back.
void bounce(network_ptr self, wire::envelope e, duration back) {
  ++self->state.ctr->in_flight;
  self->delayed_send(self, back, bounced_atom::value, std::move(e));
}

void pump(network_ptr self) {
  auto& st = self->state;
  auto now = now_of(self);
  for (auto& d : st.model->advance(now)) {
    auto i = st.flying.find(d.id);
    if (i == st.flying.end())
      continue;
    auto e = std::move(i->second);
    st.flying.erase(i);
    --st.ctr->in_flight;
    const bool running = d.to < st.procs.size() && st.procs[d.to];
    if (st.trace)
      st.trace(running ? frame_trace::kind::delivered : frame_trace::kind::undeliverable, now,
               e, d.bytes);
    if (running) {
      self->send(st.procs[d.to], deliver_atom::value, std::move(e));
    } else {
      // Nobody runs there: the sender hears of it one way later, as it would from
      // a refused connection.
      ++st.ctr->dropped;
      if (e.from < st.procs.size() && st.procs[e.from]) {
        auto back = st.model->topo().one_way(e.to, e.from);
        self->delayed_send(st.procs[e.from], back, unreachable_atom::value, e.to);
        // The engines need the frame itself back (the supervisor, the notice above).
        if (std::holds_alternative<wire::bcast_segment>(e.body) ||
            std::holds_alternative<wire::bcast_offer>(e.body) ||
            std::holds_alternative<wire::reduce_partial>(e.body) ||
            std::holds_alternative<wire::reduce_handoff>(e.body))
          bounce(self, std::move(e), back);
      }
    }
  }
  if (auto next = st.model->next_event()) {
    if (st.ticks.empty() || *next < *st.ticks.begin()) {
      auto delay = std::max(*next - now, duration{0});
      st.ticks.insert(*next);
      self->delayed_send(self, delay, tick_atom::value, next->count());
    }
  }
}

caf::behavior network_actor(
  network_ptr self, banyan::topology topo, std::shared_ptr<shared_counters> ctr,
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> trace) {
  self->state.trace = std::move(trace);
  self->state.procs.resize(topo.proc_count());
  self->state.model = std::make_unique<net::wan_model>(std::move(topo));
  self->state.ctr = std::move(ctr);
  return {
    [=](send_atom, envelope_batch& batch) {
      auto& st = self->state;
      auto now = now_of(self);
      for (auto& e : batch) {
        if (e.to >= st.procs.size()) {
          ++st.ctr->dropped;
          continue;
        }
        auto bytes = wire::wire_size(e.body);
        auto id = st.model->submit(now, e.from, e.to, bytes);
        if (st.trace)
          st.trace(frame_trace::kind::sent, now, e, bytes);
        st.flying.emplace(id, std::move(e));
        ++st.ctr->in_flight;
        ++st.ctr->messages;
        st.ctr->bytes += bytes;
      }
      pump(self);
    },
    [=](tick_atom, std::int64_t at) {
      auto& ticks = self->state.ticks;
      if (auto i = ticks.find(timestamp{at}); i != ticks.end())
        ticks.erase(i);
      pump(self);
    },
    [=](refuse_atom, wire::envelope& e) {
      // The engine at e.to did not take the frame: it goes back as if nobody ran there.
      ++self->state.ctr->dropped;
      auto back = self->state.model->topo().one_way(e.to, e.from);
      bounce(self, std::move(e), back);
    },
    [=](bounced_atom, wire::envelope& e) {
      auto& st = self->state;
      --st.ctr->in_flight;
      if (e.from < st.procs.size() && st.procs[e.from])
        self->send(st.procs[e.from], bounced_atom::value, std::move(e));
    },
    [=](attach_atom, proc_id p, caf::actor a) {
      if (p < self->state.procs.size())
        self->state.procs[p] = std::move(a);
    },
    [=](attach_atom, proc_id p, caf::actor a, proc_id contact, const vnode_set& wanted) {
      // A processor that joins again: while its earlier incarnation is still attached
      // (it left but is draining its engines), frames for p and bounces of the frames it
      // sent must keep reaching it; a stream split between two incarnations would never
      // complete. So the new incarnation attaches, and joins, once the old one detaches.
      auto& st = self->state;
      if (p >= st.procs.size())
        return;
      if (st.procs[p]) {
        if (st.waiting.count(p)) // replaced before it could join: that join is off
          --st.ctr->joining;
        st.waiting[p] = {std::move(a), contact, wanted};
        return;
      }
      st.procs[p] = a;
      --st.ctr->joining;
      self->send(a, join_atom::value, contact, wanted);
    },
    [=](detach_atom, proc_id p, const caf::actor& who) {
      // Only the processor attached now.
      auto& st = self->state;
      if (p >= st.procs.size() || st.procs[p] != who)
        return;
      st.procs[p] = nullptr;
      if (auto i = st.waiting.find(p); i != st.waiting.end()) {
        auto [next, contact, wanted] = std::move(i->second);
        st.waiting.erase(i);
        st.procs[p] = next;
        --st.ctr->joining;
        self->send(next, join_atom::value, contact, wanted);
      }
    },
  };
}

} // namespace

caf::actor spawn_emulated_network(
  caf::actor_system& sys, const banyan::topology& topo, std::shared_ptr<shared_counters> counters,
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> on_frame) {
  return sys.spawn(network_actor, topo, std::move(counters), std::move(on_frame));
}

} // namespace banyan::actors

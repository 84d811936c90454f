// banyan::node's side of the TCP transport: frames delivered (to the supervisor or the
// engine of their kind; refused ones back to their sender) and transport events
// (node_machine.hpp).

#include "node_machine.hpp"

namespace banyan::actors::node_internal {

// --- transport events -------------------------------------------------------------------

namespace {

/// The node event reporting transport event `ev` (as `line`, about `peer`).
node_event transport_line(const net::transport_event& ev, proc_id peer, std::string line) {
  node_event e{node_event::kind::transport, {}, no_proc, no_proc, peer, std::move(line), {}};
  e.hostile = ev.hostile;
  e.failure = ev.failure;
  return e;
}

} // namespace

void on_net_event(node_ptr self, const net::transport_event& ev) {
  auto& st = self->state;
  using kind = net::transport_event::kind;
  if (ev.what == kind::undeliverable) {
    // Engine frames back from the transport: the peer is unreachable, was removed, or
    // its engine refused them. Their engine routes them again.
    for (auto& e : ev.returned)
      bounce_to_engine(self, e.to, e.body);
    if (ev.peer != discovery_id)
      emit(self, transport_line(ev, ev.peer, net::to_string(ev)));
    after(self, false, false);
    return;
  }
  const bool failed = ev.what == kind::rejected || ev.what == kind::error;
  if (ev.peer == discovery_id) {
    // Learning a contact's id: say "the contact", not the reserved id.
    auto line = net::to_string(ev);
    auto id = "to " + std::to_string(discovery_id) + " at ";
    if (auto at = line.find(id); at != std::string::npos)
      line.replace(at, id.size(), "to the contact at ");
    emit(self, transport_line(ev, no_proc, std::move(line)));
  } else {
    emit(self, transport_line(ev, ev.peer, net::to_string(ev)));
  }
  if (ev.id_in_use && st.joining
      && ev.peer == (st.joining->discovering ? discovery_id : st.joining->current.id)) {
    // The contact refused us: another process runs under our id. No contact will
    // take us while it does: the join fails now.
    refused_id(self, ev);
    after(self);
    return;
  }
  if (st.joining && st.joining->discovering && ev.peer == discovery_id) {
    if (failed) {
      auto& j = *st.joining;
      st.tp->remove_peer(discovery_id);
      auto id = ev.what == kind::rejected && ev.reached <= max_node_id
                  ? std::optional<proc_id>(ev.reached)
                  : std::nullopt;
      if (id) {
        begin_join(self, *id);
      } else {
        j.reasons.push_back(j.current.address + ": " + gist(ev.detail, j.current.address));
        try_next_contact(self);
      }
    }
    after(self);
    return;
  }
  if (failed && ev.peer != no_proc)
    st.complaints[ev.peer] = ev.detail;
  else if (ev.what == kind::peer_up)
    st.complaints.erase(ev.peer);
  auto& sup = *st.sup;
  if (ev.what == kind::peer_down && sup.state() == supervisor::status::member
      && sup.is_member(ev.peer) && ev.peer != sup.self())
    st.tp->send({sup.self(), ev.peer, wire::ping{0}}); // is it still there?
  if (ev.what == kind::peer_up)
    st.unreachable_peers.erase(ev.peer);
  bool refresh = false;
  if (unreachable(ev)) {
    st.unreachable_peers.insert(ev.peer);
    if (st.departed.count(ev.peer) != 0)
      forget_peer(self, ev.peer);
    sup.on_unreachable(now_of(), ev.peer, st.out);
    refresh = true;
  }
  after(self, refresh, refresh);
}

/// Queues an engine frame this node refused to go back to its sender's engine.
void refuse(node_ptr self, const wire::envelope& e) {
  auto& st = self->state;
  net::send_options opt;
  opt.returned = true;
  auto sent = st.tp->send({st.sup->self(), e.from, e.body}, opt);
  if (sent != net::send_status::queued && sent != net::send_status::stopped)
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, e.from,
                std::string("cannot hand a refused frame back to processor ")
                    + std::to_string(e.from) + ": " + net::to_string(sent), {}});
}

void on_deliver(node_ptr self, const wire::envelope& e) {
  auto& st = self->state;
  check_stall(self, false);
  if (wire::kind_of(e.body) != collective_kind::none) {
    // An acknowledgement is taken even so: it tells of a delivery made, and an origin
    // that dropped it would send the vnodes to their adopter, a second delivery.
    if (st.sup->buried(e.from) && st.sup->state() == supervisor::status::member &&
        !std::holds_alternative<wire::bcast_ack>(e.body)) {
      // From a processor taken for crashed (the supervisor's verdict, or a crash notice
      // it took; never a graceful leaver, which drains its streams), sent before it
      // learnt it (a stalled connection delivers it when a partition heals): its side
      // served the vnodes it was for, or will (adoption, resends on acknowledgements).
      // Dropped, not handed back: its engine would send it on to the vnodes' owners of
      // the moment, a second delivery.
      node_counters::add(st.shared->counters->frames_from_buried);
      after(self, false, false);
      return;
    }
    auto now = now_of();
    st.sup->heard_from(now, e.from);
    if (!st.host.on_message(now, e.from, e.body)) // back to its sender's engine
      refuse(self, e);
    after(self, false, false);
    return;
  }
  // The probes' small messages change nothing worth a new snapshot.
  const bool hot = std::holds_alternative<wire::ping>(e.body)
                   || std::holds_alternative<wire::pong>(e.body)
                   || std::holds_alternative<wire::bw_request>(e.body)
                   || std::holds_alternative<wire::ping_req>(e.body)
                   || std::holds_alternative<wire::ping_ack>(e.body);
  if (auto* offer = std::get_if<wire::merge_offer>(&e.body))
    for (auto& m : offer->members) // the other side: we may have to join through them
      if (!m.address.empty() && !st.sup->is_member(m.id) && m.id != st.sup->self())
        st.merge_addresses[m.id] = m.address;
  st.sup->on_message(now_of(), e.from, e.body, st.out);
  after(self, !hot, true);
}

} // namespace banyan::actors::node_internal

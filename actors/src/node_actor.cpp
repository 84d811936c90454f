// The actor behind banyan::node: it feeds the supervisor with what the TCP transport
// delivers and reports, and carries out what the supervisor asks (see node_actor.hpp).
//
// Joining through an address alone: the transport only connects to a processor whose id
// it knows, and its handshake names the acceptor before anything is authenticated. So
// the node first sends a ping to a reserved id (`discovery_id`) at the contact's address;
// the handshake fails with "reached processor N, expected <discovery_id>", which tells us
// N, and the join proper goes to N.
//
// Unreachable: a processor is taken to be gone only when a connection to it cannot be
// established (refused, bad address, another processor answers there), never because it
// is slow. When an established connection closes, the node sends the peer a ping, so
// that a dead peer is found at once by the connection attempt that follows.

#include "node_actor.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

namespace banyan::actors {

namespace {

timestamp now_of(caf::local_actor* self) {
  return std::chrono::duration_cast<timestamp>(self->clock().now().time_since_epoch());
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// "to 4294967296 at 127.0.0.1:4000: reached processor 3, expected ..." -> 3.
std::optional<proc_id> reached_processor(const std::string& detail) {
  static const std::string key = "reached processor ";
  auto at = detail.find(key);
  if (at == std::string::npos)
    return std::nullopt;
  const char* begin = detail.c_str() + at + key.size();
  char* end = nullptr;
  auto v = std::strtoul(begin, &end, 10);
  if (end == begin || v > max_node_id)
    return std::nullopt;
  return static_cast<proc_id>(v);
}

/// A connection to `e.peer` could not be established: nobody (or somebody else) runs
/// at its address. Slowness (a connect or handshake timing out) does not count.
bool unreachable(const net::transport_event& e) {
  using kind = net::transport_event::kind;
  if (e.peer > max_node_id || e.detail.rfind("to ", 0) != 0) // outbound connections only
    return false;
  if (e.what == kind::error)
    return contains(e.detail, ": cannot connect: ") || contains(e.detail, ": bad address")
           || contains(e.detail, ": cannot resolve: ");
  return e.what == kind::rejected && contains(e.detail, ": reached processor ");
}

error join_error(const std::vector<std::string>& reasons) {
  std::string why = "cannot join";
  auto code = errc::unknown_peer;
  for (auto& r : reasons) {
    why += (&r == &reasons.front() ? ": " : "; ") + r;
    if (contains(r, "wrong shared secret"))
      code = errc::auth_failed;
    else if (code == errc::unknown_peer && contains(r, "no answer"))
      code = errc::timeout;
  }
  if (reasons.empty())
    why += ": no contact given";
  return make_error(code, why);
}

struct join_attempt {
  node_request_ptr req;
  std::size_t next = 0;      ///< the next contact to try
  std::uint64_t attempt = 0; ///< contacts tried so far; names discovery timeouts
  bool discovering = false;  ///< learning the current contact's id
  node_contact current;
  std::vector<std::string> reasons; ///< why each contact tried so far failed
};

struct node_state {
  std::unique_ptr<supervisor> sup;
  std::shared_ptr<net::tcp_transport> tp;
  std::shared_ptr<node_shared> shared;
  outbox out;
  std::string address;
  duration discover_timeout{0}; ///< how long a contact may take to name itself
  std::map<proc_id, std::string> peers; ///< the addresses given to the transport
  std::vector<proc_id> members;         ///< as last reported in events
  std::optional<join_attempt> joining;
  node_request_ptr leaving;
  std::map<proc_id, std::string> complaints; ///< the last refusal or error, per peer
  std::vector<node_event> pending_events;    ///< handed to the handler after each step
  std::vector<std::pair<node_request_ptr, node::result>> answers; ///< given after each step
  static inline const char* name = "banyan.node";
};

using node_ptr = caf::stateful_actor<node_state>*;

/// Answers `r` (and forgets it) at the end of the current step, once the snapshot and
/// the events show what the answer says.
void complete(node_ptr self, node_request_ptr& r, const node::result& res) {
  if (r)
    self->state.answers.emplace_back(std::move(r), res);
  r = nullptr;
}

void emit(node_ptr self, node_event e) {
  self->state.pending_events.push_back(std::move(e));
}

void after(node_ptr self, bool refresh = true);

// --- joining ----------------------------------------------------------------------------

void finish_join(node_ptr self, const node::result& res) {
  auto& st = self->state;
  if (!st.joining)
    return;
  auto req = std::move(st.joining->req);
  st.joining.reset();
  complete(self, req, res);
}

void try_next_contact(node_ptr self);

void begin_join(node_ptr self, proc_id contact) {
  auto& st = self->state;
  auto& j = *st.joining;
  j.discovering = false;
  j.current.id = contact;
  if (contact == st.sup->self()) {
    j.reasons.push_back(j.current.address + ": that is this processor");
    try_next_contact(self);
    return;
  }
  st.tp->add_peer(contact, j.current.address);
  st.peers[contact] = j.current.address;
  st.sup->join(now_of(self), contact, j.req->vnodes, st.out);
}

void try_next_contact(node_ptr self) {
  auto& st = self->state;
  auto& j = *st.joining;
  if (j.next >= j.req->contacts.size()) {
    auto err = join_error(j.reasons);
    emit(self, {node_event::kind::join_failed, {}, no_proc, no_proc, no_proc, err.message});
    finish_join(self, err);
    return;
  }
  j.current = j.req->contacts[j.next++];
  ++j.attempt;
  if (j.current.id != no_proc) {
    begin_join(self, j.current.id);
    return;
  }
  j.discovering = true;
  st.tp->add_peer(discovery_id, j.current.address);
  st.tp->send({st.sup->self(), discovery_id, wire::ping{0}});
  self->delayed_send(self, st.discover_timeout, discover_atom::value, j.attempt);
}

/// The gist of a transport line about `address`: "to 7 at 10.0.0.1:7000: cannot
/// connect: connection refused; retrying in 50 ms" -> "cannot connect: connection refused".
std::string gist(const std::string& detail, const std::string& address) {
  auto begin = detail.find(address + ": ");
  begin = begin == std::string::npos ? 0 : begin + address.size() + 2;
  auto end = detail.find("; retrying", begin);
  return detail.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// --- membership and sending -------------------------------------------------------------

/// Gives the transport the address of every member, forgets departed ones, and reports
/// membership changes. After leaving, peers are kept: `member_left` frames may still be
/// queued for them.
void sync_members(node_ptr self) {
  auto& st = self->state;
  auto state = st.sup->state();
  if (state == supervisor::status::idle || state == supervisor::status::left) {
    st.members.clear();
    return;
  }
  const auto& now = st.sup->members();
  const auto me = st.sup->self();
  for (auto p : now) {
    if (p == me)
      continue;
    auto* info = st.sup->member_info(p);
    std::string addr = info ? info->address : std::string{};
    if (!addr.empty()) {
      auto& known = st.peers[p];
      if (known != addr) {
        known = addr;
        st.tp->add_peer(p, addr);
      }
    }
    if (!std::binary_search(st.members.begin(), st.members.end(), p))
      emit(self, {node_event::kind::member_joined, {}, no_proc, no_proc, p, addr});
  }
  for (auto p : st.members) {
    if (p == me || std::binary_search(now.begin(), now.end(), p))
      continue;
    emit(self, {node_event::kind::member_left, {}, no_proc, no_proc, p, {}});
    if (st.peers.erase(p) != 0)
      st.tp->remove_peer(p);
  }
  st.members = now;
}

void send_one(node_ptr self, wire::envelope e) {
  auto& st = self->state;
  auto to = e.to;
  if (st.tp->send(std::move(e)) == net::send_status::unknown_peer && st.sup->is_member(to))
    self->send(self, unreachable_atom::value, to); // no address: as good as refused
  // backpressure: the frame is lost, which the protocol tolerates (probes time out,
  // updates are resent with the next change).
}

void on_tree_event(node_ptr self, const tree_event& e) {
  auto& st = self->state;
  using k = tree_event::kind;
  switch (e.what) {
  case k::parent_changed:
    emit(self, {node_event::kind::parent_changed, e.tree, e.old_parent, e.new_parent, no_proc, {}});
    break;
  case k::cycle_broken:
    emit(self, {node_event::kind::cycle_broken, e.tree, e.old_parent, no_proc, no_proc, {}});
    break;
  case k::busy:
    emit(self, {node_event::kind::busy, {}, no_proc, no_proc, no_proc, {}});
    break;
  case k::idle:
    emit(self, {node_event::kind::idle, {}, no_proc, no_proc, no_proc, {}});
    break;
  case k::joined:
    if (st.joining) {
      auto& c = st.joining->current;
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, c.id,
                  "through " + c.address + " (processor " + std::to_string(c.id) + ")"});
      finish_join(self, std::nullopt);
    } else {
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, no_proc,
                  "founded the computation with vnodes " + st.sup->own_vnodes().to_string()});
    }
    break;
  case k::join_failed:
    if (st.joining && !st.joining->discovering) {
      auto& j = *st.joining;
      std::string why = j.current.address + " (processor " + std::to_string(j.current.id)
                        + "): no answer to the join request";
      if (auto c = st.complaints.find(j.current.id); c != st.complaints.end())
        why += " (" + gist(c->second, j.current.address) + ")";
      j.reasons.push_back(why);
      // Not a member of ours: stop the transport from retrying the join request.
      if (st.peers.erase(j.current.id) != 0)
        st.tp->remove_peer(j.current.id);
      try_next_contact(self);
    }
    break;
  case k::left:
    emit(self, {node_event::kind::left, {}, no_proc, no_proc, no_proc, {}});
    complete(self, st.leaving, std::nullopt);
    break;
  }
}

void publish(node_ptr self) {
  auto& st = self->state;
  auto& sup = *st.sup;
  node_status s;
  s.id = sup.self();
  s.address = st.address;
  s.state = sup.state();
  const bool in = s.state == supervisor::status::member || s.state == supervisor::status::leaving;
  for (auto p : sup.members()) {
    if (auto* m = sup.member_info(p))
      s.members.push_back(*m);
    else
      s.members.push_back({p, {}, 0});
    for (auto kind : {tree_kind::latency, tree_kind::bandwidth}) {
      node_tree t{{p, kind}, no_proc, 0};
      if (auto* ts = sup.tree({p, kind})) {
        t.parent = ts->parent();
        t.children = static_cast<std::uint32_t>(ts->children().size());
      }
      s.trees.push_back(t);
    }
  }
  s.own_vnodes = sup.own_vnodes();
  s.all_parented = in && sup.all_parented();
  s.busy = sup.busy();
  s.probes_completed = sup.probes_completed();
  s.probes_abandoned = sup.probes_abandoned();
  std::lock_guard<std::mutex> lk(st.shared->mtx);
  st.shared->status = std::move(s);
}

void dispatch(node_ptr self) {
  auto& st = self->state;
  if (st.pending_events.empty())
    return;
  node::event_handler h;
  {
    std::lock_guard<std::mutex> lk(st.shared->mtx);
    h = st.shared->on_event;
  }
  auto events = std::move(st.pending_events);
  st.pending_events.clear();
  if (h)
    for (auto& e : events)
      h(e);
}

/// Carries out what the last supervisor call asked for (and what that causes), then
/// publishes the snapshot (unless `refresh` is false and nothing happened) and events.
void after(node_ptr self, bool refresh) {
  auto& st = self->state;
  bool changed = refresh;
  if (refresh)
    sync_members(self);
  while (!st.out.sends.empty() || !st.out.timers.empty() || !st.out.events.empty()) {
    outbox batch;
    std::swap(batch, st.out);
    if (!batch.events.empty())
      sync_members(self); // before sending: the sends may go to members just learnt
    for (auto& e : batch.sends)
      send_one(self, std::move(e));
    for (auto& t : batch.timers)
      self->delayed_send(self, t.after, timer_atom::value, t.token);
    for (auto& e : batch.events) {
      changed = true;
      on_tree_event(self, e); // may call the supervisor again (st.out)
    }
  }
  if (changed)
    sync_members(self);
  if (st.leaving && st.sup->state() == supervisor::status::member)
    complete(self, st.leaving, make_error(errc::timeout, "every member refused our vnodes: still a member"));
  if (changed)
    publish(self);
  dispatch(self);
  auto answers = std::move(st.answers);
  st.answers.clear();
  for (auto& [r, res] : answers)
    if (auto done = std::move(r->done)) {
      r->done = nullptr;
      done(res);
    }
}

// --- transport events -------------------------------------------------------------------

void on_net_event(node_ptr self, const net::transport_event& ev) {
  auto& st = self->state;
  using kind = net::transport_event::kind;
  const bool failed = ev.what == kind::rejected || ev.what == kind::error;
  if (ev.peer == discovery_id) {
    // Learning a contact's id: say "the contact", not the reserved id.
    auto line = net::to_string(ev);
    auto id = "to " + std::to_string(discovery_id) + " at ";
    if (auto at = line.find(id); at != std::string::npos)
      line.replace(at, id.size(), "to the contact at ");
    emit(self, {node_event::kind::transport, {}, no_proc, no_proc, no_proc, line});
  } else {
    emit(self, {node_event::kind::transport, {}, no_proc, no_proc, ev.peer, net::to_string(ev)});
  }
  if (st.joining && st.joining->discovering && ev.peer == discovery_id) {
    if (failed) {
      auto& j = *st.joining;
      st.tp->remove_peer(discovery_id);
      auto id = ev.what == kind::rejected ? reached_processor(ev.detail) : std::nullopt;
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
  bool refresh = false;
  if (unreachable(ev)) {
    sup.on_unreachable(now_of(self), ev.peer, st.out);
    refresh = true;
  }
  after(self, refresh);
}

// --- requests ---------------------------------------------------------------------------

void on_request(node_ptr self, node_request_ptr r) {
  auto& st = self->state;
  auto& sup = *st.sup;
  auto now = now_of(self);
  const auto state = sup.state();
  const bool outside = !st.joining
                       && (state == supervisor::status::idle || state == supervisor::status::left);
  auto busy_error = [&] {
    return make_error(errc::invalid_argument,
                      "processor " + std::to_string(sup.self()) + " is already "
                          + (st.joining ? "joining" : "a member"));
  };
  switch (r->what) {
  case node_request::kind::found:
    if (!outside) {
      complete(self, r, busy_error());
      break;
    }
    {
      routing_table routes;
      if (!r->vnodes.empty())
        routes.assign(r->vnodes, sup.self(), 0);
      sup.found(now, {wire::member{sup.self(), st.address, 0}}, routes, st.out);
    }
    complete(self, r, std::nullopt);
    break;
  case node_request::kind::join:
    if (!outside) {
      complete(self, r, busy_error());
    } else if (r->contacts.empty()) {
      complete(self, r, make_error(errc::invalid_argument, "cannot join: no contact given"));
    } else {
      st.joining = join_attempt{};
      st.joining->req = std::move(r);
      try_next_contact(self);
    }
    break;
  case node_request::kind::leave:
    if (st.leaving) {
      complete(self, r, make_error(errc::invalid_argument, "already leaving"));
    } else if (auto err = sup.leave(now, no_proc, st.out)) {
      complete(self, r, *err);
    } else {
      st.leaving = std::move(r);
    }
    break;
  }
  after(self); // answers once the snapshot shows the outcome
}

caf::behavior node_actor(node_ptr self, proc_id id, supervisor_config cfg, std::uint64_t seed,
                         std::shared_ptr<net::tcp_transport> tp,
                         std::shared_ptr<node_shared> shared) {
  auto& st = self->state;
  st.discover_timeout = 3 * cfg.probe_timeout;
  st.sup = std::make_unique<supervisor>(id, cfg, seed);
  st.tp = std::move(tp);
  st.shared = std::move(shared);
  publish(self);
  return {
    [=](deliver_atom, const wire::envelope& e) {
      // The probes' small messages change nothing worth a new snapshot.
      const bool hot = std::holds_alternative<wire::ping>(e.body)
                       || std::holds_alternative<wire::pong>(e.body)
                       || std::holds_alternative<wire::bw_request>(e.body);
      self->state.sup->on_message(now_of(self), e.from, e.body, self->state.out);
      after(self, !hot);
    },
    [=](net_event_atom, const net::transport_event& ev) { on_net_event(self, ev); },
    [=](unreachable_atom, proc_id p) {
      self->state.sup->on_unreachable(now_of(self), p, self->state.out);
      after(self);
    },
    [=](timer_atom, std::uint64_t token) {
      self->state.sup->on_timer(now_of(self), token, self->state.out);
      after(self);
    },
    [=](discover_atom, std::uint64_t attempt) {
      auto& s = self->state;
      if (!s.joining || !s.joining->discovering || s.joining->attempt != attempt)
        return;
      s.tp->remove_peer(discovery_id);
      s.joining->reasons.push_back(s.joining->current.address + ": no answer");
      try_next_contact(self);
      after(self);
    },
    [=](address_atom, const std::string& a) {
      self->state.address = a;
      self->state.sup->set_address(a);
      publish(self);
    },
    [=](request_atom, const node_request_ptr& r) { on_request(self, r); },
  };
}

} // namespace

caf::actor spawn_node_actor(caf::actor_system& sys, proc_id self, supervisor_config cfg,
                            std::uint64_t seed, std::shared_ptr<net::tcp_transport> transport,
                            std::shared_ptr<node_shared> shared) {
  return sys.spawn(node_actor, self, std::move(cfg), seed, std::move(transport),
                   std::move(shared));
}

} // namespace banyan::actors

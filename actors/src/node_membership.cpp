// banyan::node's membership: joining through contacts, the members' addresses in the
// transport, the supervisor's events as node events, and found / join / leave / install
// requests (node_machine.hpp).

#include "node_machine.hpp"

namespace banyan::actors::node_internal {

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

// --- joining ----------------------------------------------------------------------------

void finish_join(node_ptr self, const node::result& res) {
  auto& st = self->state;
  if (!st.joining)
    return;
  auto req = std::move(st.joining->req);
  st.joining.reset();
  complete(self, req, res);
}

/// A join let in resolves once it owns what it asked for, with the reduction histories
/// (the supervisor waits for no giver any more, and every vnode it owns has settled in
/// the reduction engine), or once it is no longer a plain member (it left, say).
void check_join(node_ptr self) {
  auto& st = self->state;
  if (!st.joining || !st.joining->accepted)
    return;
  auto& sup = *st.sup;
  if (sup.state() != supervisor::status::member
      || (!sup.awaiting_vnodes() && settled_here(self).includes(sup.own_vnodes())))
    finish_join(self, std::nullopt);
}

/// Answers the pending found or join with `why` (cancelled, or its time is up) and winds
/// it down: a deferred one is dropped; one learning its contact's id stops; one whose
/// join request is out tries no further contact (and leaves should it be let in); one
/// already let in leaves again. Returns whether one was pending.
bool give_up_join(node_ptr self, const error& why, std::uint64_t serial) {
  auto& st = self->state;
  for (auto it = st.deferred.begin(); it != st.deferred.end(); ++it)
    if (serial == 0 || (*it)->serial == serial) {
      auto r = std::move(*it);
      st.deferred.erase(it);
      complete(self, r, why);
      return true;
    }
  if (!st.joining || st.joining->abandoned || (serial != 0 && st.joining->serial != serial))
    return false;
  auto& j = *st.joining;
  complete(self, j.req, why);
  j.abandoned = true;
  if (j.discovering) {
    st.tp->remove_peer(discovery_id);
    st.joining.reset();
  } else if (j.accepted) {
    st.joining.reset();
    (void)st.sup->leave(now_of(), no_proc, st.out); // hands back what arrived
  }
  return true;
}

/// The time limit of a found or join (`op_timeout`), from when it was asked.
void arm_deadline(node_ptr self, node_request& r) {
  auto& st = self->state;
  if (r.serial != 0)
    return;
  r.serial = ++st.next_serial;
  self->later(st.op_timeout, join_end_atom::value, r.serial);
}

void on_join_deadline(node_ptr self, std::uint64_t serial) {
  auto& st = self->state;
  const auto why = make_error(errc::timeout, "processor " + std::to_string(st.sup->self())
                                               + " could not become a member within "
                                               + std::to_string(std::chrono::duration_cast<
                                                                std::chrono::milliseconds>(
                                                                st.op_timeout).count())
                                               + " ms");
  auto full = why;
  if (st.joining && st.joining->serial == serial && !st.joining->reasons.empty())
    full.message += ": " + join_error(st.joining->reasons).message;
  give_up_join(self, full, serial);
}

void on_settle_timer(node_ptr self, std::uint64_t serial) {
  auto& st = self->state;
  if (st.joining && st.joining->accepted && st.joining->serial == serial)
    finish_join(self, std::nullopt); // an owner with nothing to give: what arrived is ours
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
  st.sup->join(now_of(), contact, j.req->vnodes, st.out);
}

void try_next_contact(node_ptr self) {
  auto& st = self->state;
  auto& j = *st.joining;
  if (j.abandoned) {
    st.joining.reset(); // answered already: no further contact
    return;
  }
  if (j.next >= j.req->contacts.size()) {
    auto err = join_error(j.reasons);
    emit(self, {node_event::kind::join_failed, {}, no_proc, no_proc, no_proc, err.message, {}});
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
  self->later(st.discover_timeout, discover_atom::value, j.attempt);
}

/// The gist of a transport line about `address`: "to 7 at 10.0.0.1:7000: cannot
/// connect: connection refused; retrying in 50 ms" -> "cannot connect: connection refused".
std::string gist(const std::string& detail, const std::string& address) {
  auto begin = detail.find(address + ": ");
  begin = begin == std::string::npos ? 0 : begin + address.size() + 2;
  auto end = detail.find("; retrying", begin);
  return detail.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

void refused_id(node_ptr self, const net::transport_event& ev) {
  auto& st = self->state;
  auto& j = *st.joining;
  j.reasons.push_back(j.current.address
                      + (j.discovering ? std::string()
                                       : " (processor " + std::to_string(j.current.id) + ")")
                      + ": " + gist(ev.detail, j.current.address));
  if (j.discovering) {
    st.tp->remove_peer(discovery_id);
  } else {
    st.sup->abandon_join(now_of(), st.out);
    if (st.peers.erase(j.current.id) != 0)
      st.tp->remove_peer(j.current.id);
  }
  auto err = make_error(errc::id_in_use, join_error(j.reasons).message);
  emit(self, {node_event::kind::join_failed, {}, no_proc, no_proc, no_proc, err.message, {}});
  finish_join(self, err);
}

// --- membership and sending -------------------------------------------------------------

/// Forgets the address of a member that left (`remove_peer`), unless it is a member
/// again; once it is forgotten, frames still queued for it come back undeliverable.
void forget_peer(node_ptr self, proc_id p) {
  auto& st = self->state;
  st.departed.erase(p);
  if (st.sup->is_member(p))
    return;
  if (st.peers.erase(p) != 0)
    st.tp->remove_peer(p);
}

/// Gives the transport the address of every member, and reports membership changes.
/// After leaving, peers are kept: `member_left` frames may still be queued for them.
///
/// A member that leaves gracefully stays reachable until its engines drained, and it
/// must get the rest of every stream whose first frame it took (docs/collectives.md,
/// "Exactly once"). Removing its address at once would hand back the frames queued for
/// it (and cancel those being written), splitting such a stream between it and the
/// sender's held stream, so that neither ever completes. So a departed member's address
/// is forgotten only once it is found unreachable, or when at least `forget_after` has
/// passed and nothing is queued for it any more (at most `forget_max`).
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
    auto info = st.sup->member_info(p);
    std::string addr = info ? info->address : std::string{};
    if (!addr.empty()) {
      auto& known = st.peers[p];
      if (known != addr) {
        known = addr;
        st.tp->add_peer(p, addr);
      }
    }
    st.departed.erase(p);
    if (!std::binary_search(st.members.begin(), st.members.end(), p)) {
      node_counters::add(st.shared->counters->members_joined);
      emit(self, {node_event::kind::member_joined, {}, no_proc, no_proc, p, addr, {}});
    }
  }
  for (auto p : st.members) {
    if (p == me || std::binary_search(now.begin(), now.end(), p))
      continue;
    node_counters::add(st.shared->counters->members_left);
    emit(self, {node_event::kind::member_left, {}, no_proc, no_proc, p, {}, {}});
    if (st.unreachable_peers.count(p) != 0) {
      forget_peer(self, p); // nothing runs there: what is queued comes back now
    } else if (st.peers.count(p) != 0 && st.departed.count(p) == 0) {
      st.departed[p] = now_of();
      self->later(forget_after, forget_atom::value, p);
    }
  }
  st.members = now;
}

void send_one(node_ptr self, wire::envelope e) {
  auto& st = self->state;
  auto to = e.to;
  // A merge offer to a processor we buried, or a join through the side that offered one:
  // their address was forgotten with their membership.
  const bool merging = std::holds_alternative<wire::merge_offer>(e.body)
                       || std::holds_alternative<wire::join_request>(e.body);
  std::optional<wire::envelope> again;
  if (merging)
    again = e;
  // A join the supervisor starts itself: our side yielded to another after a partition.
  // What our earlier incarnation queued for anyone (crash notices, adoption claims,
  // broadcast segments for vnodes its side served already) must not reach them once we
  // are back among them as a new one: every peer is forgotten and its queue dropped
  // (not handed back to the engines, which would send it to the vnodes' new owners);
  // members get new connections. Broadcasts left incomplete are sent again on their
  // acknowledgements, to the owners of the vnodes not covered.
  if (std::holds_alternative<wire::join_request>(e.body) && !st.joining)
    for (auto it = st.peers.begin(); it != st.peers.end();) {
      if (st.sup->is_member(it->first)) {
        ++it;
        continue;
      }
      st.tp->drop_peer(it->first);
      st.departed.erase(it->first);
      it = st.peers.erase(it);
    }
  // Over a partition that healed, the connection we had to it before holds what we sent
  // while the link was down, and TCP sends it again only when its backed-off timer fires
  // (seconds after the heal): the offer or the join would wait behind it, and the join
  // give up. So a merge starts on a connection of its own (what was queued comes back).
  if (merging && !st.sup->is_member(to) && st.departed.count(to) != 0)
    forget_peer(self, to);
  auto sent = st.tp->send(std::move(e));
  if (sent == net::send_status::unknown_peer && st.sup->is_member(to)) {
    self->tell(unreachable_atom::value, to); // no address: as good as refused
  } else if (sent == net::send_status::unknown_peer && again) {
    if (auto a = st.merge_addresses.find(to); a != st.merge_addresses.end()) {
      st.peers[to] = a->second;
      st.tp->add_peer(to, a->second);
      st.tp->send(std::move(*again));
    }
  }
  // backpressure: the frame is lost, which the protocol tolerates (probes time out,
  // updates are resent with the next change).
}

void on_tree_event(node_ptr self, const tree_event& e) {
  auto& st = self->state;
  using k = tree_event::kind;
  switch (e.what) {
  case k::parent_changed:
    ++st.parent_changes[e.tree];
    emit(self, {node_event::kind::parent_changed, e.tree, e.old_parent, e.new_parent, no_proc, {}, {}});
    break;
  case k::cycle_broken:
    emit(self, {node_event::kind::cycle_broken, e.tree, e.old_parent, no_proc, no_proc, {}, {}});
    break;
  case k::busy:
    emit(self, {node_event::kind::busy, {}, no_proc, no_proc, no_proc, {}, {}});
    break;
  case k::idle:
    emit(self, {node_event::kind::idle, {}, no_proc, no_proc, no_proc, {}, {}});
    break;
  case k::joined:
    if (st.joining) {
      auto& j = *st.joining;
      auto& c = j.current;
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, c.id,
                  "through " + c.address + " (processor " + std::to_string(c.id) + ")", {}});
      if (j.abandoned) {
        // Given up while the contact was answering: leave again at once.
        st.joining.reset();
        (void)st.sup->leave(e.at, no_proc, st.out);
        break;
      }
      // Resolved once the vnodes asked for are here (`check_join`), or at the latest
      // when the supervisor stops waiting for its givers and as long again has passed.
      j.accepted = true;
      self->later(st.settle_wait, settle_atom::value, j.serial);
    } else if (e.peer != no_proc) {
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, e.peer,
                  "rejoined through processor " + std::to_string(e.peer)
                    + " (our side of a partition yielded to its side)", {}});
    } else {
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, no_proc,
                  "founded the computation with vnodes " + st.sup->own_vnodes().to_string(), {}});
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
    emit(self, {node_event::kind::left, {}, no_proc, no_proc, no_proc, {}, {}});
    complete(self, st.leaving, std::nullopt);
    break;
  case k::crash_detected:
    if (auto a = st.peers.find(e.peer); a != st.peers.end())
      st.merge_addresses[e.peer] = a->second; // offered a merge while it stays away
    node_counters::add(st.shared->counters->crashes_detected);
    emit(self, {node_event::kind::member_crashed, {}, no_proc, no_proc, e.peer,
                "processor " + std::to_string(e.peer) + " taken to have crashed (unreachable, "
                "or silent for the crash timeout); its vnodes go to its successor", {}});
    break;
  case k::adopted:
    st.adopted |= e.vnodes;
    node_counters::add(st.shared->counters->vnodes_adopted, e.vnodes.size());
    emit(self, {node_event::kind::vnodes_adopted, {}, no_proc, no_proc, e.peer,
                "now owns vnodes " + e.vnodes.to_string() + ", adopted from crashed processor "
                  + std::to_string(e.peer), e.vnodes});
    break;
  case k::disowned:
    node_counters::add(st.shared->counters->vnodes_disowned, e.vnodes.size());
    emit(self, {node_event::kind::vnodes_disowned, {}, no_proc, no_proc, e.peer,
                "taken for crashed (heard from "
                  + (e.peer == no_proc ? std::string("a member") : "processor " + std::to_string(e.peer))
                  + "): vnodes "
                  + e.vnodes.to_string() + " are no longer ours (rejoined as a new incarnation)",
                e.vnodes});
    break;
  case k::gained:
    emit(self, {node_event::kind::vnodes_gained, {}, no_proc, no_proc, e.peer,
                "now owns vnodes " + e.vnodes.to_string() + ", handed over by processor "
                  + std::to_string(e.peer), e.vnodes});
    break;
  case k::released:
    emit(self, {node_event::kind::vnodes_released, {}, no_proc, no_proc, e.peer,
                "handed vnodes " + e.vnodes.to_string() + " over to processor "
                  + std::to_string(e.peer), e.vnodes});
    break;
  case k::member_buried:
    break; // its engine frames are dropped from now on (on_deliver asks supervisor::buried)
  case k::suspected:
  case k::suspicion_cleared: {
    const bool cleared = e.what == k::suspicion_cleared;
    node_counters::add(cleared ? st.shared->counters->suspicions_cleared
                               : st.shared->counters->suspicions);
    const auto peer = std::to_string(e.peer);
    auto held = st.suspicion_log.admit((cleared ? "cleared " : "suspected ") + peer,
                                       std::chrono::steady_clock::now());
    if (!held)
      break;
    std::string line = cleared ? "processor " + peer + " answered: no longer suspected"
                               : "processor " + peer + " suspected of having crashed "
                                 "(unreachable, or silent); it or a member asked to ping "
                                 "it must answer, or it is taken for crashed";
    if (*held > 0)
      line += " [" + std::to_string(*held) + " more such lines about processor " + peer
              + " held back]";
    emit(self, {cleared ? node_event::kind::suspicion_cleared : node_event::kind::member_suspected,
                {}, no_proc, no_proc, e.peer, std::move(line), {}});
    break;
  }
  case k::member_returned:
    // Back as a new incarnation through a contact (another member's member_joined told
    // us): after a partition, its side yielded and it joined ours on new connections.
    // What its earlier incarnation sent us on the old one and the partition held (crash
    // notices about us, adoption claims) must not be read now that it is a member again:
    // that connection is reset (TCP RST). A processor that announced its new incarnation
    // itself (woken, it refuted a crash notice) keeps its connection.
    if (e.via != no_proc && e.via != e.peer)
      st.tp->reset_inbound(e.peer);
    break;
  }
}

// --- requests ---------------------------------------------------------------------------

void on_request(node_ptr self, node_request_ptr r) {
  auto& st = self->state;
  auto& sup = *st.sup;
  auto now = now_of();
  const auto state = sup.state();
  const bool outside = !st.joining
                       && (state == supervisor::status::idle || state == supervisor::status::left);
  auto busy_error = [&] {
    return make_error(errc::invalid_argument,
                      "processor " + std::to_string(sup.self()) + " is already "
                          + (st.joining ? "joining" : "a member"));
  };
  if (r->what == node_request::kind::plan) {
    complete(self, r, install_plan(self, *r));
    after(self, false, false);
    return;
  }
  if (r->what == node_request::kind::found && r->vnodes.empty()) {
    complete(self, r, make_error(errc::invalid_argument, "cannot found: no vnodes given"));
    after(self, false, false);
    return;
  }
  if (outside && r->what != node_request::kind::leave && !engines_drained(self)) {
    // The engines of the last membership still hold something: begin afresh after
    // (within the request's time limit).
    arm_deadline(self, *r);
    st.deferred.push_back(std::move(r));
    linger(self);
    return;
  }
  switch (r->what) {
  case node_request::kind::found:
    if (!outside) {
      complete(self, r, busy_error());
      break;
    }
    new_engines(self, r->vnodes);
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
      new_engines(self, {});
      arm_deadline(self, *r);
      st.joining = join_attempt{};
      st.joining->serial = r->serial;
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
  case node_request::kind::plan: // handled above
    break;
  case node_request::kind::prepare:
    if (sup.state() != supervisor::status::member) {
      complete(self, r, make_error(errc::invalid_argument, "not a member"));
    } else {
      sup.prepare(now, st.out);
      complete(self, r, std::nullopt);
    }
    break;
  }
  after(self); // answers once the snapshot shows the outcome
}

} // namespace banyan::actors::node_internal

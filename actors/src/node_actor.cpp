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
//
// Collectives (docs/collectives.md, "Driving an engine"): per membership (found or join)
// the machine hosts, in an engine_host, a broadcast and a reduction engine over a
// supervisor_view, and the baselines once their plans are installed (a static tree,
// scatter-allgather's processors). Their
// frames go out with `return_undeliverable`, so the transport hands back those that
// cannot reach an unreachable peer (or one removed with them queued); a frame an engine
// here refuses goes back to its sender marked `returned`, and comes out of the sender's
// transport the same way. Either way the sending engine gets `on_undeliverable`. Every
// supervisor event is followed by `on_view_change` of both engines, after the
// supervisor's own frames. A new membership waits until the previous one's engines
// have drained, and `stop` of a node that has left waits for it too (at most
// `linger_timeout`). Conversely, the others keep the address of a member that left
// while anything is on its way to it (`sync_members`): removing it would return the
// queued rest of a stream whose first frames it already took, and lose that stream.

#include "node_actor.hpp"

#include "banyan/core/broadcast_collective.hpp"
#include "banyan/core/engine_host.hpp"
#include "banyan/core/reduce_collective.hpp"
#include "banyan/core/scatter_allgather_collective.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>

namespace banyan::actors {

namespace {

/// The real clock, as CAF's actor clock reads it (steady).
timestamp now_of() {
  return std::chrono::duration_cast<timestamp>(
    std::chrono::steady_clock::now().time_since_epoch());
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// A connection to `e.peer` could not be established: nobody (or somebody else) runs
/// at its address. Slowness (a connect or handshake timing out) does not count.
bool unreachable(const net::transport_event& e) {
  using kind = net::transport_event::kind;
  return e.peer <= max_node_id && e.unreachable
         && (e.what == kind::error || e.what == kind::rejected);
}

/// How often a node whose engines still hold something polls whether they drained.
constexpr auto linger_poll = std::chrono::milliseconds(50);
/// A member that left keeps its address in the transport at least this long (and while
/// anything is queued for it), at most `forget_max`: see `sync_members`.
constexpr auto forget_after = std::chrono::seconds(2);
constexpr auto forget_max = std::chrono::seconds(60);
/// How soon frames held back by backpressure are offered to the transport again.
constexpr auto overflow_retry = std::chrono::milliseconds(2);

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

/// A reduction started here whose future is not answered yet, by engine and number.
using reduction_key = std::pair<collective_kind, std::uint64_t>;
struct open_reduction {
  collective_request_ptr req;
  std::shared_ptr<vnode_set> contributed; ///< vnodes counted here so far
};

struct node_state {
  std::unique_ptr<supervisor> sup;
  // The collective engines of the current (or last) membership.
  broadcast_config bcast_cfg;
  reduce_config reduce_cfg;
  double drain_rtts = 4;       ///< node_config
  duration drain_floor{0};     ///< node_config
  /// Peers the engines of this membership handed frames to (any may refuse one).
  std::set<proc_id> written_to;
  /// Since when nothing the engines sent has been queued in the transport (as a linger
  /// poll found it), if so since their last send.
  std::optional<timestamp> flushed_at;
  reduce_op_table ops;
  /// The views the engines read (declared before `host`: they outlive the engines).
  std::unique_ptr<supervisor_view> view;
  std::unique_ptr<routing_table> static_routes; ///< the static plan's copy of the routes
  std::unique_ptr<static_tree_view> static_view;
  /// The engines of this membership, routed to by kind; `bcast` and `red` are the
  /// adaptive ones (null before the first membership).
  engine_host host;
  broadcast_collective* bcast = nullptr;
  reduce_collective* red = nullptr;
  std::uint32_t plans = 0; ///< baselines' plans installed in this membership
  /// Numbers the engines' broadcasts (from membership << 32) and timers. It starts from
  /// the wall clock's seconds (mod 2^30), so that a restarted process with the same id
  /// names its broadcasts apart from its earlier life's; bit 63 stays clear.
  std::uint32_t membership = 0;
  std::map<reduction_key, open_reduction> reductions;
  std::vector<node_delivery> pending_deliveries; ///< handed to the handler after each step
  /// Engine frames the transport refused for backpressure, per peer, in order.
  std::map<proc_id, std::deque<wire::envelope>> overflow;
  bool overflow_armed = false;
  std::vector<node_request_ptr> deferred; ///< found/join waiting for the engines to drain
  bool lingering = false;                 ///< a linger poll is scheduled
  std::vector<drained_ptr> drain_waiters;
  std::shared_ptr<net::tcp_transport> tp;
  std::shared_ptr<node_shared> shared;
  outbox out;
  std::string address;
  duration discover_timeout{0}; ///< how long a contact may take to name itself
  std::map<proc_id, std::string> peers; ///< the addresses given to the transport
  /// Members that left whose address the transport keeps until nothing is on its way to
  /// them (see `sync_members`), and since when.
  std::map<proc_id, timestamp> departed;
  std::set<proc_id> unreachable_peers; ///< found unreachable, not up since
  std::vector<proc_id> members;         ///< as last reported in events
  std::optional<join_attempt> joining;
  node_request_ptr leaving;
  std::map<proc_id, std::string> complaints; ///< the last refusal or error, per peer
  std::vector<node_event> pending_events;    ///< handed to the handler after each step
  vnode_set adopted; ///< adopted from crashed members, for the reduction engine
  std::vector<std::pair<node_request_ptr, node::result>> answers; ///< given after each step
};

} // namespace

/// The state machine and what runs it (node_actor.hpp).
struct node_machine {
  node_state state; ///< guarded by `mtx`
  std::mutex mtx;
  caf::actor handle; ///< the actor: timers, and handlers owed to callers' threads

  std::mutex q_mtx;                        ///< guards the three below
  std::deque<std::function<void()>> queue; ///< handlers to run, in order
  bool draining = false;                   ///< some thread is running them
  bool posted = false; ///< a dispatch is on its way to the actor or the loop (`loop`)
  /// Set once, before any thread runs the machine: the transport, when its loop polls
  /// (tcp_transport::busy_polling). Then the handlers a caller's thread leaves behind
  /// run on that awake loop instead of waking the actor's thread.
  net::tcp_transport* loop = nullptr;
  bool stopped = false; ///< under `mtx`: `shutdown` ran; nothing runs the machine any more

  template <class... Ts>
  void later(duration d, Ts&&... xs) {
    caf::delayed_anon_send(handle, d, std::forward<Ts>(xs)...);
  }
  template <class... Ts>
  void tell(Ts&&... xs) {
    caf::anon_send(handle, std::forward<Ts>(xs)...);
  }
  /// Queues `fn` to run after the state lock is released (under `mtx`).
  void defer(std::function<void()> fn) {
    std::lock_guard<std::mutex> lk(q_mtx);
    queue.push_back(std::move(fn));
  }
};

namespace {

using node_ptr = node_machine*;

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

/// `view`: the supervisor handled an event, so the engines look at it again (after its
/// frames went out).
void after(node_ptr self, bool refresh = true, bool view = true);
void run_engines(node_ptr self);
void on_request(node_ptr self, node_request_ptr r);

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
  st.sup->join(now_of(), contact, j.req->vnodes, st.out);
}

void try_next_contact(node_ptr self) {
  auto& st = self->state;
  auto& j = *st.joining;
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
    auto* info = st.sup->member_info(p);
    std::string addr = info ? info->address : std::string{};
    if (!addr.empty()) {
      auto& known = st.peers[p];
      if (known != addr) {
        known = addr;
        st.tp->add_peer(p, addr);
      }
    }
    st.departed.erase(p);
    if (!std::binary_search(st.members.begin(), st.members.end(), p))
      emit(self, {node_event::kind::member_joined, {}, no_proc, no_proc, p, addr, {}});
  }
  for (auto p : st.members) {
    if (p == me || std::binary_search(now.begin(), now.end(), p))
      continue;
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
  if (st.tp->send(std::move(e)) == net::send_status::unknown_peer && st.sup->is_member(to))
    self->tell(unreachable_atom::value, to); // no address: as good as refused
  // backpressure: the frame is lost, which the protocol tolerates (probes time out,
  // updates are resent with the next change).
}

// --- collectives ------------------------------------------------------------------------

/// Whether the engines of the last membership have drained (core/send_fates.hpp): they
/// hold nothing, nothing they sent waits in the transport (or in `overflow`), and a frame
/// written to the kernel has had time to be refused and come back: `drain_rtts` round
/// trips to the slowest peer written to (the supervisor's measurements, kept after a
/// leave), at least `drain_floor`, from when the queues were found empty or the last
/// send, whichever is later. A peer never measured: the blind `drain_linger`.
bool engines_drained(node_ptr self) {
  auto& st = self->state;
  if (st.host.empty())
    return true;
  auto now = now_of();
  if (st.host.holding())
    return false;
  auto busy = [&] {
    st.flushed_at.reset();
    return false;
  };
  for (auto& [p, q] : st.overflow)
    if (!q.empty())
      return busy();
  duration worst{0};
  bool unmeasured = false;
  for (auto p : st.written_to) {
    if (st.tp->queued_bytes(p) != 0)
      return busy();
    if (auto rtt = st.sup->measured_rtt(p))
      worst = std::max(worst, *rtt);
    else
      unmeasured = true;
  }
  const auto last = st.host.last_send();
  if (!st.flushed_at || *st.flushed_at < last)
    st.flushed_at = now;
  const auto bound = std::chrono::duration_cast<duration>(worst * st.drain_rtts);
  const auto fates = unmeasured ? send_fates::blind(st.bcast_cfg.drain_linger)
                                : send_fates::bounded(*st.flushed_at, std::max(st.drain_floor, bound));
  return st.host.drained(now, fates);
}

/// New engines for a membership that is about to begin (`settled`: a founder's vnodes).
void new_engines(node_ptr self, const vnode_set& settled) {
  auto& st = self->state;
  ++st.membership;
  st.host.clear(); // before the views they read
  st.bcast = nullptr;
  st.red = nullptr;
  st.plans = 0;
  st.static_view.reset();
  st.static_routes.reset();
  st.view = std::make_unique<supervisor_view>(*st.sup);
  auto bc = st.bcast_cfg;
  // Broadcasts are named (origin, seq): a later membership, or a later process with the
  // same id, must not reuse the numbers of an earlier one.
  st.membership &= 0x7fffffff;
  bc.first_seq = (std::uint64_t{st.membership} << 32) + 1;
  st.bcast = &st.host.add(std::make_unique<broadcast_collective>(*st.view, bc));
  st.red = &st.host.add(std::make_unique<reduce_collective>(*st.view, st.ops, st.reduce_cfg,
                                                            settled));
  st.written_to.clear();
  st.flushed_at.reset();
}

/// Hands `e`, from an engine, to the transport; what cannot go now waits in `overflow`
/// (in order behind what waits already), and a frame with no address bounces at once.
/// Returns false for a frame that bounced (the caller hands it to its engine).
bool send_engine_frame(node_ptr self, wire::envelope& e) {
  auto& st = self->state;
  auto held = st.overflow.find(e.to);
  if (held != st.overflow.end() && !held->second.empty()) {
    held->second.push_back(std::move(e));
    return true;
  }
  net::send_options opt;
  opt.return_undeliverable = true;
  st.written_to.insert(e.to);
  switch (st.tp->send(e, opt)) {
  case net::send_status::queued:
  case net::send_status::stopped:
    return true;
  case net::send_status::backpressure:
    st.overflow[e.to].push_back(std::move(e));
    if (!st.overflow_armed) {
      st.overflow_armed = true;
      self->later(overflow_retry, overflow_atom::value);
    }
    return true;
  case net::send_status::unknown_peer:
  case net::send_status::oversized:
    return false;
  }
  return true;
}

void bounce_to_engine(node_ptr self, proc_id to, const wire::message& m) {
  self->state.host.on_undeliverable(now_of(), to, m);
}

/// Whether `p`, sent by this node's reduce engine, carries this node's part of an open
/// reduction: it covers every vnode counted here (or, with none counted, it is the
/// reduction's first partial sent from here).
void check_part_sent(node_ptr self, const wire::reduce_partial& p) {
  auto& st = self->state;
  auto it = st.reductions.find({p.collective, p.op});
  if (it == st.reductions.end() || !p.vnodes.includes(*it->second.contributed))
    return;
  it->second.req->answer(expected<reduce_result>(reduce_result{p.op, p.root, {}, {}}));
  st.reductions.erase(it);
}

/// Hands what a broadcast-like engine delivered to the delivery handler.
void take_deliveries(node_ptr self, broadcast_outbox& bo) {
  for (auto& d : bo.deliveries) {
    node_delivery nd;
    nd.what = d.p2p ? node_delivery::kind::message : node_delivery::kind::broadcast;
    nd.op = d.op;
    nd.vnodes = std::move(d.vnodes);
    nd.payload = std::move(d.payload);
    self->state.pending_deliveries.push_back(std::move(nd));
  }
}

/// Answers the reductions a reduction engine (of kind `kind`) completed; reports problems.
void take_results(node_ptr self, collective_kind kind, reduce_outbox& ro) {
  auto& st = self->state;
  for (auto& r : ro.results) {
    auto it = st.reductions.find({kind, r.op});
    if (it == st.reductions.end()) {
      emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                  "reduction " + std::to_string(r.op)
                      + " completed here after this node's part was answered; result dropped", {}});
      continue;
    }
    it->second.req->answer(expected<reduce_result>(std::move(r)));
    st.reductions.erase(it);
  }
  for (auto& p : ro.problems)
    emit(self, {node_event::kind::collective, {}, no_proc, no_proc, no_proc,
                "reduction " + std::to_string(p.op) + ": problem with vnodes "
                    + p.vnodes.to_string() + ": " + p.detail, {}});
}

/// Carries out what the engines asked for, until they ask for nothing more: timers to
/// the actor (named by engine kind and membership), results to their handlers, then the
/// frames to the transport (a frame that bounces at once goes back to its engine, whose
/// reaction the next round carries out).
void run_engines(node_ptr self) {
  auto& st = self->state;
  const auto m = st.membership;
  for (bool more = true; more;) {
    more = false;
    std::vector<wire::envelope> sends;
    st.host.for_each([&](collective_engine& e) {
      auto& out = e.outbox();
      const auto kind = static_cast<std::uint8_t>(e.kind());
      for (auto& t : out.timers)
        self->later(t.after, engine_timer_atom::value, kind, m, t.token);
      if (auto* b = dynamic_cast<broadcast_collective*>(&e))
        take_deliveries(self, b->out());
      else if (auto* sag = dynamic_cast<scatter_allgather_collective*>(&e))
        take_deliveries(self, sag->out());
      else if (auto* r = dynamic_cast<reduce_collective*>(&e))
        take_results(self, e.kind(), r->out());
      std::move(out.sends.begin(), out.sends.end(), std::back_inserter(sends));
      e.clear_outbox();
    });
    for (auto& e : sends) {
      if (auto* p = std::get_if<wire::reduce_partial>(&e.body))
        check_part_sent(self, *p);
      if (!send_engine_frame(self, e)) {
        bounce_to_engine(self, e.to, e.body);
        more = true;
      }
    }
  }
}

/// The engines over the supervisor's view look at it again (after every supervisor
/// event); vnodes adopted from a crashed member go with it (their history died there).
void view_changed(node_ptr self) {
  auto& st = self->state;
  if (st.host.empty())
    return;
  st.host.on_view_change(now_of(), view_change{st.adopted});
  st.adopted.clear();
  run_engines(self);
}

/// A linger poll: answers `stop` and deferred memberships once the engines drained.
void linger(node_ptr self) {
  auto& st = self->state;
  if (!engines_drained(self)) {
    if (!st.lingering) {
      st.lingering = true;
      self->later(linger_poll, linger_atom::value);
    }
    return;
  }
  for (auto& w : st.drain_waiters)
    w->set_value();
  st.drain_waiters.clear();
  auto deferred = std::move(st.deferred);
  st.deferred.clear();
  for (auto& r : deferred)
    on_request(self, std::move(r));
}

/// Starts broadcast or message `r` on the engine it names.
expected<wire::collective_id> start_broadcast(node_ptr self, const collective_request& r) {
  auto& st = self->state;
  auto now = now_of();
  auto missing = [&](const char* what) {
    return make_error(errc::invalid_argument,
                      std::string("no ") + what + " installed on processor " +
                        std::to_string(st.sup->self()));
  };
  if (r.what == collective_request::kind::send)
    return st.bcast->send(now, vnode_set{r.to}, r.message);
  switch (r.over) {
  case collective_kind::broadcast:
    return st.bcast->broadcast(now, r.message);
  case collective_kind::static_broadcast:
    if (auto* b = st.host.get<broadcast_collective>(collective_kind::static_broadcast))
      return b->broadcast(now, r.message);
    return missing("static tree");
  case collective_kind::scatter_allgather:
    if (auto* sag = st.host.get<scatter_allgather_collective>(collective_kind::scatter_allgather))
      return sag->broadcast(now, r.message);
    return missing("scatter-allgather");
  default:
    return make_error(errc::invalid_argument,
                      std::string("not a broadcast: ") + to_string(r.over));
  }
}

void on_collective(node_ptr self, const collective_request_ptr& r) {
  auto& st = self->state;
  auto now = now_of();
  const auto state = st.sup->state();
  const bool member = st.bcast && state == supervisor::status::member;
  using kind = collective_request::kind;
  switch (r->what) {
  case kind::broadcast:
  case kind::send: {
    if (!member) {
      r->answer(expected<wire::collective_id>(make_error(
        errc::invalid_argument, "processor " + std::to_string(st.sup->self()) + " is not a member")));
      break;
    }
    r->answer(start_broadcast(self, *r));
    run_engines(self);
    break;
  }
  case kind::reduce: {
    auto& nr = r->reduction;
    auto* red = st.host.get<reduce_collective>(nr.over);
    if (!red) {
      auto err = nr.over == collective_kind::static_reduce
                   ? make_error(errc::invalid_argument, "no static tree installed on processor "
                                                          + std::to_string(st.sup->self()))
                 : nr.over == collective_kind::reduce
                   ? make_error(errc::stopped, "processor " + std::to_string(st.sup->self())
                                                 + " is not a member")
                   : make_error(errc::invalid_argument,
                                std::string("not a reduction: ") + to_string(nr.over));
      r->answer(expected<reduce_result>(err));
      break;
    }
    auto counted = std::make_shared<vnode_set>();
    contribution_fn values = [counted, fn = nr.values](vnode_id v) {
      counted->insert(v);
      return fn ? fn(v) : std::vector<std::uint8_t>{};
    };
    reduce_spec spec{nr.seq, nr.root, nr.op, nr.count};
    const reduction_key key{nr.over, nr.seq};
    if (st.reductions.count(key) != 0) {
      r->answer(expected<reduce_result>(make_error(
        errc::invalid_argument, "reduction " + std::to_string(nr.seq) + " is already running here")));
      break;
    }
    if (auto err = red->start(now, spec, std::move(values))) {
      red->clear_outbox();
      r->answer(expected<reduce_result>(*err));
      break;
    }
    st.reductions[key] = open_reduction{r, counted};
    run_engines(self);
    break;
  }
  }
  after(self, false, false);
}

/// Installs a baseline's plan (`r.plan`: a static tree, or scatter-allgather over
/// `r.procs` processors) for this membership, replacing the one installed before.
node::result install_plan(node_ptr self, const node_request& r) {
  auto& st = self->state;
  auto& sup = *st.sup;
  if (!st.bcast || sup.state() != supervisor::status::member)
    return make_error(errc::invalid_argument,
                      "processor " + std::to_string(sup.self()) + " is not a member");
  const auto n = r.plan ? r.plan->size() : r.procs;
  for (auto p : sup.members())
    if (p >= n)
      return make_error(errc::invalid_argument,
                        "the plan covers processors 0.." + std::to_string(n) + ", not member "
                          + std::to_string(p));
  // Numbered apart from earlier memberships and plans (like the adaptive engines).
  const auto first_seq = (std::uint64_t{st.membership} << 32) | (std::uint64_t{++st.plans} << 20);
  if (!r.plan) {
    scatter_allgather_config cfg;
    cfg.first_seq = first_seq | 1;
    auto* owner = st.sup.get();
    st.host.add(std::make_unique<scatter_allgather_collective>(
                  sup.self(), r.procs, [owner] { return owner->own_vnodes(); }, cfg),
                false);
    return std::nullopt;
  }
  st.host.remove(collective_kind::static_broadcast); // before the view they read
  st.host.remove(collective_kind::static_reduce);
  st.static_view.reset();
  st.static_routes = std::make_unique<routing_table>(sup.routes());
  auto plan = r.plan;
  st.static_view = std::make_unique<static_tree_view>(sup.self(), *st.static_routes,
                                                      [plan](tree_key) { return *plan; });
  auto bc = st.bcast_cfg;
  bc.kind = collective_kind::static_broadcast;
  bc.message_kind = collective_kind::none;
  bc.first_seq = first_seq | 1;
  st.host.add(std::make_unique<broadcast_collective>(*st.static_view, bc), false);
  auto rc = st.reduce_cfg;
  rc.kind = collective_kind::static_reduce;
  rc.first_op = 1;
  st.host.add(std::make_unique<reduce_collective>(*st.static_view, st.ops, rc,
                                                  st.static_view->own_vnodes()),
              false);
  return std::nullopt;
}

void on_tree_event(node_ptr self, const tree_event& e) {
  auto& st = self->state;
  using k = tree_event::kind;
  switch (e.what) {
  case k::parent_changed:
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
      auto& c = st.joining->current;
      emit(self, {node_event::kind::joined, {}, no_proc, no_proc, c.id,
                  "through " + c.address + " (processor " + std::to_string(c.id) + ")", {}});
      finish_join(self, std::nullopt);
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
    emit(self, {node_event::kind::member_crashed, {}, no_proc, no_proc, e.peer,
                "processor " + std::to_string(e.peer) + " taken to have crashed (unreachable, "
                "or silent for the crash timeout); its vnodes go to its successor", {}});
    break;
  case k::adopted:
    st.adopted |= e.vnodes;
    emit(self, {node_event::kind::vnodes_adopted, {}, no_proc, no_proc, e.peer,
                "now owns vnodes " + e.vnodes.to_string() + ", adopted from crashed processor "
                  + std::to_string(e.peer), e.vnodes});
    break;
  case k::disowned:
    emit(self, {node_event::kind::vnodes_disowned, {}, no_proc, no_proc, e.peer,
                "taken for crashed (heard from "
                  + (e.peer == no_proc ? std::string("a member") : "processor " + std::to_string(e.peer))
                  + "): vnodes "
                  + e.vnodes.to_string() + " are no longer ours (rejoined as a new incarnation)",
                e.vnodes});
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
        if (ts->connected()) {
          t.dist = ts->dist();
          t.est = ts->est();
        }
      }
      s.trees.push_back(t);
    }
  }
  s.own_vnodes = sup.own_vnodes();
  if (in)
    s.routes = sup.routes();
  s.all_parented = in && sup.all_parented();
  s.busy = sup.busy();
  s.probes_completed = sup.probes_completed();
  s.probes_abandoned = sup.probes_abandoned();
  std::lock_guard<std::mutex> lk(st.shared->mtx);
  st.shared->status = std::move(s);
}

/// Queues the handler calls of this step (deliveries, then events) to run once the state
/// lock is released.
void dispatch(node_ptr self) {
  auto& st = self->state;
  if (!st.pending_deliveries.empty()) {
    auto deliveries = std::make_shared<std::vector<node_delivery>>(std::move(st.pending_deliveries));
    st.pending_deliveries.clear();
    self->defer([shared = st.shared, deliveries] {
      node::delivery_handler h;
      {
        std::lock_guard<std::mutex> lk(shared->mtx);
        h = shared->on_deliver;
      }
      if (h)
        for (auto& d : *deliveries)
          h(d);
    });
  }
  if (st.pending_events.empty())
    return;
  auto events = std::make_shared<std::vector<node_event>>(std::move(st.pending_events));
  st.pending_events.clear();
  self->defer([shared = st.shared, events] {
    node::event_handler h;
    {
      std::lock_guard<std::mutex> lk(shared->mtx);
      h = shared->on_event;
    }
    if (h)
      for (auto& e : *events)
        h(e);
  });
}

/// Carries out what the last supervisor call asked for (and what that causes), then
/// publishes the snapshot (unless `refresh` is false and nothing happened) and events.
void after(node_ptr self, bool refresh, bool view) {
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
      self->later(t.after, timer_atom::value, t.token);
    for (auto& e : batch.events) {
      changed = true;
      on_tree_event(self, e); // may call the supervisor again (st.out)
    }
  }
  if (changed)
    sync_members(self);
  if (view || changed)
    view_changed(self); // the supervisor's frames went first: routes travel ahead
  else
    run_engines(self);
  if (st.sup->state() == supervisor::status::left && !st.drain_waiters.empty())
    linger(self);
  if (st.leaving && st.sup->state() == supervisor::status::member)
    complete(self, st.leaving, make_error(errc::timeout, "every member refused our vnodes: still a member"));
  if (changed)
    publish(self);
  dispatch(self);
  for (auto& [r, res] : st.answers)
    self->defer([r = std::move(r), res = std::move(res)] {
      if (auto done = std::move(r->done)) {
        r->done = nullptr;
        done(res);
      }
    });
  st.answers.clear();
}

// --- transport events -------------------------------------------------------------------

void on_net_event(node_ptr self, const net::transport_event& ev) {
  auto& st = self->state;
  using kind = net::transport_event::kind;
  if (ev.what == kind::undeliverable) {
    // Engine frames back from the transport: the peer is unreachable, was removed, or
    // its engine refused them. Their engine routes them again.
    for (auto& e : ev.returned)
      bounce_to_engine(self, e.to, e.body);
    if (ev.peer != discovery_id)
      emit(self, {node_event::kind::transport, {}, no_proc, no_proc, ev.peer, net::to_string(ev), {}});
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
    emit(self, {node_event::kind::transport, {}, no_proc, no_proc, no_proc, line, {}});
  } else {
    emit(self, {node_event::kind::transport, {}, no_proc, no_proc, ev.peer, net::to_string(ev), {}});
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
  if (outside && r->what != node_request::kind::leave && !engines_drained(self)) {
    // The engines of the last membership still hold something: begin afresh after.
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
  case node_request::kind::plan: // handled above
    break;
  }
  after(self); // answers once the snapshot shows the outcome
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
  if (wire::kind_of(e.body) != collective_kind::none) {
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
                   || std::holds_alternative<wire::bw_request>(e.body);
  st.sup->on_message(now_of(), e.from, e.body, st.out);
  after(self, !hot, true);
}

void on_linger(node_ptr self, const drained_ptr& w) {
  auto& st = self->state;
  if (st.sup->state() != supervisor::status::left) {
    w->set_value(); // a member stops abruptly: nothing to wait for
    return;
  }
  st.drain_waiters.push_back(w);
  linger(self);
}

/// Who asks `drain` to run the queued handlers.
enum class runner {
  caller, ///< a program's thread: handlers never run inside its call
  actor,  ///< the actor, after a timer: runs them, unless the loop polls (then the loop does)
  here,   ///< the loop's callbacks, a dispatch that arrived, `shutdown`: runs them
};

void drain(node_ptr self, runner who);

/// A dispatch posted by `drain` arrived (on the polling loop, or on the actor).
void dispatched(node_ptr self) {
  {
    std::lock_guard<std::mutex> lk(self->q_mtx);
    self->posted = false;
  }
  drain(self, runner::here);
}

/// Runs the queued handlers, one at a time and in order, unless some thread does already.
/// Handlers run on a node thread: the loop's callbacks run them at once; what a caller's
/// thread leaves behind goes to the transport's loop when it polls (it is awake: no
/// thread wakes up for them), else to the actor. When the loop polls, the actor hands
/// what its timers produce to the loop as well, so that every handler runs on the loop.
void drain(node_ptr self, runner who) {
  std::unique_lock<std::mutex> lk(self->q_mtx);
  if (self->queue.empty() || self->draining)
    return;
  if (who == runner::caller || (who == runner::actor && self->loop)) {
    if (self->posted)
      return;
    self->posted = true;
    lk.unlock();
    if (!self->loop || !self->loop->post([self] { dispatched(self); }))
      self->tell(dispatch_atom::value); // the actor runs them (`here`)
    return;
  }
  self->draining = true;
  while (!self->queue.empty()) {
    auto fn = std::move(self->queue.front());
    self->queue.pop_front();
    lk.unlock();
    fn(); // may call the node again: what that queues runs in this loop
    lk.lock();
  }
  self->draining = false;
}

/// Runs `f` on the state machine, then the handlers it queued.
template <class F>
void run(node_ptr self, runner who, F&& f) {
  {
    std::lock_guard<std::mutex> lk(self->mtx);
    if (self->stopped)
      return; // what `f` would have taken answers `stopped` from its destructor
    f(self);
  }
  drain(self, who);
}

/// The actor: the machine's timers, and the handlers callers' threads left behind.
caf::behavior node_actor(caf::event_based_actor*, std::shared_ptr<node_machine> m) {
  auto* self = m.get();
  return {
    [m, self](unreachable_atom, proc_id p) {
      run(self, runner::actor, [p](node_ptr n) {
        n->state.unreachable_peers.insert(p);
        n->state.sup->on_unreachable(now_of(), p, n->state.out);
        after(n);
      });
    },
    [self](timer_atom, std::uint64_t token) {
      run(self, runner::actor, [token](node_ptr n) {
        n->state.sup->on_timer(now_of(), token, n->state.out);
        after(n);
      });
    },
    [self](discover_atom, std::uint64_t attempt) {
      run(self, runner::actor, [attempt](node_ptr n) {
        auto& s = n->state;
        if (!s.joining || !s.joining->discovering || s.joining->attempt != attempt)
          return;
        s.tp->remove_peer(discovery_id);
        s.joining->reasons.push_back(s.joining->current.address + ": no answer");
        try_next_contact(n);
        after(n);
      });
    },
    [self](engine_timer_atom, std::uint8_t engine, std::uint32_t membership,
           std::uint64_t token) {
      run(self, runner::actor, [=](node_ptr n) {
        auto& st = n->state;
        if (membership != st.membership)
          return; // an earlier membership's engine
        st.host.on_timer(now_of(), static_cast<collective_kind>(engine), token);
        after(n, false, false);
      });
    },
    [self](overflow_atom) {
      run(self, runner::actor, [](node_ptr n) {
        auto& st = n->state;
        st.overflow_armed = false;
        auto held = std::move(st.overflow);
        st.overflow.clear();
        for (auto& [to, frames] : held)
          for (auto& e : frames)
            if (!send_engine_frame(n, e))
              bounce_to_engine(n, e.to, e.body);
        after(n, false, false);
      });
    },
    [self](forget_atom, proc_id p) {
      run(self, runner::actor, [p](node_ptr n) {
        auto& st = n->state;
        auto it = st.departed.find(p);
        if (it == st.departed.end())
          return; // a member again, or forgotten already
        auto held = st.overflow.find(p);
        const bool pending = st.tp->queued_bytes(p) != 0
                             || (held != st.overflow.end() && !held->second.empty());
        if (pending && now_of() - it->second < forget_max) {
          n->later(forget_after, forget_atom::value, p);
          return;
        }
        forget_peer(n, p);
        after(n, false, false);
      });
    },
    [self](linger_atom) {
      run(self, runner::actor, [](node_ptr n) {
        n->state.lingering = false;
        linger(n);
        after(n, false, false);
      });
    },
    [self](dispatch_atom) {
      dispatched(self);
    },
  };
}

} // namespace

node_core::node_core(caf::actor_system& sys, const node_config& cfg, std::uint64_t seed,
                     std::shared_ptr<net::tcp_transport> tp, std::shared_ptr<node_shared> shared)
  : m_(std::make_shared<node_machine>()), sys_(sys) {
  auto& init = m_->state;
  init.discover_timeout = 3 * cfg.sup.probe_timeout;
  // A fixed seed must not make this life's incarnations those of an earlier one.
  auto sup_cfg = cfg.sup;
  sup_cfg.crash_timeout = cfg.crash_timeout;
  sup_cfg.incarnation_salt = (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()
                             ^ static_cast<std::uint64_t>(
                                 std::chrono::steady_clock::now().time_since_epoch().count());
  init.sup = std::make_unique<supervisor>(cfg.id, sup_cfg, seed);
  init.membership = static_cast<std::uint32_t>(
    std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch()).count() & 0x3fffffff);
  init.bcast_cfg = cfg.bcast;
  init.reduce_cfg = cfg.reduce;
  init.drain_rtts = cfg.drain_rtts;
  init.drain_floor = cfg.drain_floor;
  init.ops = cfg.ops;
  if (tp && tp->busy_polling())
    m_->loop = tp.get();
  init.tp = std::move(tp);
  init.shared = std::move(shared);
  publish(m_.get());
  // Detached: a thread of its own that sleeps on its mailbox, so that a timer or a
  // handler left behind runs at once (a pooled worker may be in a 50 us polling sleep).
  actor_ = sys.spawn<caf::detached>(node_actor, m_);
  m_->handle = actor_;
}

node_core::~node_core() {
  shutdown();
}

void node_core::shutdown() {
  if (!actor_)
    return;
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  {
    caf::scoped_actor waiter{sys_};
    waiter->wait_for(actor_);
  }
  actor_ = nullptr;
  // What is still pending answers `stopped` from its destructor, outside the lock.
  std::optional<join_attempt> joining;
  node_request_ptr leaving;
  std::vector<node_request_ptr> deferred;
  std::map<reduction_key, open_reduction> reductions;
  std::vector<drained_ptr> waiters;
  {
    std::lock_guard<std::mutex> lk(m_->mtx);
    m_->stopped = true;
    auto& st = m_->state;
    std::swap(joining, st.joining);
    std::swap(leaving, st.leaving);
    std::swap(deferred, st.deferred);
    std::swap(reductions, st.reductions);
    std::swap(waiters, st.drain_waiters);
  }
  for (auto& w : waiters)
    w->set_value();
  drain(m_.get(), runner::here); // handlers still owed (answers given before the stop)
}

void node_core::deliver(wire::envelope&& e) {
  run(m_.get(), runner::here, [&e](node_ptr n) { on_deliver(n, e); });
}

void node_core::net_event(const net::transport_event& ev) {
  run(m_.get(), runner::here, [&ev](node_ptr n) { on_net_event(n, ev); });
}

void node_core::request(node_request_ptr r) {
  run(m_.get(), runner::caller, [&r](node_ptr n) { on_request(n, std::move(r)); });
}

void node_core::collective(const collective_request_ptr& r) {
  run(m_.get(), runner::caller, [&r](node_ptr n) { on_collective(n, r); });
}

void node_core::set_address(const std::string& a) {
  run(m_.get(), runner::caller, [&a](node_ptr n) {
    n->state.address = a;
    n->state.sup->set_address(a);
    publish(n);
  });
}

void node_core::linger(drained_ptr w) {
  run(m_.get(), runner::caller, [&w](node_ptr n) { on_linger(n, w); });
}

} // namespace banyan::actors

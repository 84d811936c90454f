#pragma once
// Internal: the state behind `banyan::node` (node_actor.hpp) and the steps that run it,
// one concept per file:
//
//   node_membership.cpp   joining, members and their addresses, supervisor events,
//                         found / join / leave / install requests
//   node_collectives.cpp  the collective engines (an engine_host per membership),
//                         their frames, timers, results, and draining
//   node_transport.cpp    frames and events from the TCP transport
//   node_actor.cpp        the actor (timers, handlers owed to callers' threads), the
//                         snapshot, `after` (what every step ends with), node_core
//
// Every step runs under the machine's lock (`node_machine::mtx`).

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/allreduce.hpp"
#include "banyan/core/broadcast_collective.hpp"
#include "banyan/core/engine_host.hpp"
#include "banyan/core/allgather.hpp"
#include "banyan/core/alltoall.hpp"
#include "banyan/core/gather.hpp"
#include "banyan/core/reduce_collective.hpp"
#include "banyan/core/scatter.hpp"
#include "banyan/core/scatter_allgather_collective.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/net/log_limiter.hpp"
#include "node_actor.hpp"

namespace banyan::actors {

namespace node_internal {

/// The real clock, as CAF's actor clock reads it (steady).
inline timestamp now_of() {
  return std::chrono::duration_cast<timestamp>(
    std::chrono::steady_clock::now().time_since_epoch());
}

inline bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

/// A connection to `e.peer` could not be established: nobody (or somebody else) runs
/// at its address. Slowness (a connect or handshake timing out) does not count.
inline bool unreachable(const net::transport_event& e) {
  using kind = net::transport_event::kind;
  return e.peer <= max_node_id && e.unreachable
         && (e.what == kind::error || e.what == kind::rejected);
}

/// How often a node whose engines still hold something polls whether they drained.
inline constexpr auto linger_poll = std::chrono::milliseconds(50);
/// A member that left keeps its address in the transport at least this long (and while
/// anything is queued for it), at most `forget_max`: see `sync_members`.
inline constexpr auto forget_after = std::chrono::seconds(2);
inline constexpr auto forget_max = std::chrono::seconds(60);
/// How soon frames held back by backpressure are offered to the transport again.
inline constexpr auto overflow_retry = std::chrono::milliseconds(2);
/// At most one `member_suspected` and one `suspicion_cleared` event per peer this often
/// (a link that flaps would otherwise make two lines per watch period); the next one
/// says how many were held back. The counters count every one.
inline constexpr auto suspicion_log_interval = std::chrono::seconds(10);

struct join_attempt {
  node_request_ptr req;
  std::size_t next = 0;      ///< the next contact to try
  std::uint64_t attempt = 0; ///< contacts tried so far; names discovery timeouts
  bool discovering = false;  ///< learning the current contact's id
  node_contact current;
  std::vector<std::string> reasons; ///< why each contact tried so far failed
  /// A contact let us in: waiting for the vnodes asked for (`check_join`).
  bool accepted = false;
  /// Given up (cancelled, or its time is up; `req` answered): the attempt under way
  /// winds down, trying no further contact, and leaves again should it be let in.
  bool abandoned = false;
  std::uint64_t serial = 0; ///< the request's, naming its deadline and settle timers
};

/// A reduction started here whose future is not answered yet, by engine and number.
using reduction_key = std::pair<collective_kind, std::uint64_t>;
struct open_reduction {
  collective_request_ptr req;
  std::shared_ptr<vnode_set> contributed; ///< vnodes counted here so far
  std::uint64_t serial = 0; ///< names its deadline timer
  duration timeout{0};
  /// Who owned which vnodes when it started here, as this node knew it: the error of a
  /// reduction that never completes names the processors that did not contribute.
  std::map<proc_id, vnode_set> owners;
  /// At the root: a check is armed for missing vnodes whose owner left (`lost_grace`).
  bool lost_armed = false;
  /// An allreduce or barrier: the vnodes of this node its result has reached so far (it
  /// may reach them in several deliveries; the future waits for all of them).
  vnode_set reached;
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
  /// Numbers the memberships: names the engines' timers, and their stream and offer
  /// numbers (from membership << 32). It starts at random, so that a restarted process
  /// with the same id numbers its streams apart from its earlier life's.
  std::uint32_t membership = 0;
  /// The broadcasts and messages started here are numbered 1, 2, 3, ... across engines
  /// and memberships (`next_seq`), and carry this process's `life` (random, nonzero), so
  /// that a restarted process with the same id names its operations apart from its
  /// earlier life's (wire::collective_id).
  std::uint32_t life = 1;
  std::uint64_t next_seq = 1;
  /// Names requests and reductions for their timers.
  std::uint64_t next_serial = 0;
  duration op_timeout{0}; ///< node_config
  /// How long a joiner let in waits for its share at most: the supervisor's wait for
  /// its givers, and as long again for the histories to follow.
  duration settle_wait{0};
  std::map<reduction_key, open_reduction> reductions;
  /// Allgathers whose blocks reached this node's vnodes before it started them here
  /// (its own vnodes had been counted elsewhere): answered when it starts them. The last
  /// few only.
  std::map<std::uint64_t, reduce_result> early_allgathers;
  /// All-to-alls whose blocks reached vnodes of this node and are not answered yet (those
  /// not started here: the last few only), by number (node_alltoall.cpp).
  std::map<std::uint64_t, alltoall_delivery> alltoall_parts;
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
  /// Addresses of processors that are not members but may merge with us after a
  /// partition: those we took for crashed, and the members of a side that offered us a
  /// merge (`merge_offer`). Merge offers and a join through the offer's sender use them.
  std::map<proc_id, std::string> merge_addresses;
  /// Members that left whose address the transport keeps until nothing is on its way to
  /// them (see `sync_members`), and since when.
  std::map<proc_id, timestamp> departed;
  std::set<proc_id> unreachable_peers; ///< found unreachable, not up since
  /// Limits the suspicion events (`suspicion_log_interval`), by kind and peer.
  net::log_limiter suspicion_log{suspicion_log_interval};
  std::vector<proc_id> members;         ///< as last reported in events
  std::optional<join_attempt> joining;
  node_request_ptr leaving;
  std::map<proc_id, std::string> complaints; ///< the last refusal or error, per peer
  std::vector<node_event> pending_events;    ///< handed to the handler after each step
  vnode_set adopted; ///< adopted from crashed members, for the reduction engine
  std::map<tree_key, std::uint64_t> parent_changes; ///< node_metrics::parent_changes
  /// The next release numbers of the allreduce and barrier engines, going on across
  /// memberships (their broadcasts are named apart from the node's own, by kind).
  std::uint64_t next_allreduce_release = 1;
  std::uint64_t next_barrier_release = 1;
  std::vector<std::pair<node_request_ptr, node::result>> answers; ///< given after each step
  /// Broadcasts started here (`bcast_cfg.acknowledge`): the outcomes known (the last
  /// `kept_outcomes`; an empty string: complete, else why it failed), and the requests
  /// waiting for one.
  std::map<wire::collective_id, std::pair<broadcast_completion, std::string>> outcomes;
  std::deque<wire::collective_id> outcome_order;
  std::map<wire::collective_id, std::vector<collective_request_ptr>> outcome_waiters;
  /// Stalls (crash_timeout > 0): a heartbeat every `stall_period`; a heartbeat or a frame
  /// more than `stall_limit` after the last heartbeat means this process did not run (it
  /// was stopped): the broadcast engine delivers nothing for `stall_fence`, while news
  /// of an adoption of our vnodes arrives (`broadcast_engine::fence`).
  duration stall_period{0};
  duration stall_limit{0};
  duration stall_fence{0};
  timestamp last_beat{0};
  timestamp fenced_until{0};
  /// A reduction whose root still misses vnodes of a member that has left (crashed)
  /// fails this long after the root learnt of it, naming them, rather than at its time
  /// limit (0: only at the limit).
  duration lost_grace{0};
};
inline constexpr std::size_t kept_outcomes = 4096;

} // namespace node_internal

/// The state machine and what runs it (node_actor.hpp).
struct node_machine {
  node_internal::node_state state; ///< guarded by `mtx`
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

namespace node_internal {

using node_ptr = node_machine*;

/// Answers `r` (and forgets it) at the end of the current step, once the snapshot and
/// the events show what the answer says.
inline void complete(node_ptr self, node_request_ptr& r, const node::result& res) {
  if (r)
    self->state.answers.emplace_back(std::move(r), res);
  r = nullptr;
}

inline void emit(node_ptr self, node_event e) {
  self->state.pending_events.push_back(std::move(e));
}

/// `view`: the supervisor handled an event, so the engines look at it again (after its

// --- node_actor.cpp ---------------------------------------------------------------------
/// Carries out what the last supervisor call asked for (and what that causes), then
/// publishes the snapshot (unless `refresh` is false and nothing happened) and events.
/// `view`: the supervisor handled an event, so the engines look at it again (after its
/// frames went out).
void after(node_ptr self, bool refresh = true, bool view = true);
void publish(node_ptr self);
void dispatch(node_ptr self);

// --- node_membership.cpp ----------------------------------------------------------------
error join_error(const std::vector<std::string>& reasons);
void finish_join(node_ptr self, const node::result& res);
void check_join(node_ptr self);
/// `serial` 0: the pending one, whichever it is.
bool give_up_join(node_ptr self, const error& why, std::uint64_t serial = 0);
void arm_deadline(node_ptr self, node_request& r);
void on_join_deadline(node_ptr self, std::uint64_t serial);
void on_settle_timer(node_ptr self, std::uint64_t serial);
void begin_join(node_ptr self, proc_id contact);
void try_next_contact(node_ptr self);
/// Our contact refused us because another process runs under our id: the join fails.
void refused_id(node_ptr self, const net::transport_event& ev);
std::string gist(const std::string& detail, const std::string& address);
void forget_peer(node_ptr self, proc_id p);
void sync_members(node_ptr self);
void send_one(node_ptr self, wire::envelope e);
void on_tree_event(node_ptr self, const tree_event& e);
void on_request(node_ptr self, node_request_ptr r);

// --- node_collectives.cpp ---------------------------------------------------------------
bool engines_drained(node_ptr self);
void new_engines(node_ptr self, const vnode_set& settled);
bool send_engine_frame(node_ptr self, wire::envelope& e);
void bounce_to_engine(node_ptr self, proc_id to, const wire::message& m);
void check_part_sent(node_ptr self, const wire::reduce_partial& p);
void take_deliveries(node_ptr self, broadcast_outbox& bo);
/// The outcomes of broadcasts started here: kept, answered to their waiters, logged.
void take_completions(node_ptr self, broadcast_outbox& bo);
void on_outcome_request(node_ptr self, const collective_request_ptr& r);
/// A heartbeat (`beat`) or a frame: fences the broadcast engine after a stall.
void check_stall(node_ptr self, bool beat);
void take_results(node_ptr self, collective_kind kind, reduce_outbox& ro);
void take_allgathers(node_ptr self, allgather_collective& ag);
void run_engines(node_ptr self);
void view_changed(node_ptr self);
void linger(node_ptr self);
expected<wire::collective_id> start_broadcast(node_ptr self, const collective_request& r);
void on_collective(node_ptr self, const collective_request_ptr& r);
node::result install_plan(node_ptr self, const node_request& r);
void on_linger(node_ptr self, const drained_ptr& w);
bool fail_reduction(node_ptr self, const reduction_key& key, errc code,
                    const std::string& reason = {});
/// At the root: arms `lost_grace` checks for reductions missing vnodes of departed owners.
void check_lost_contributors(node_ptr self);
void on_reduction_lost(node_ptr self, collective_kind kind, std::uint64_t seq,
                       std::uint64_t serial);
void on_reduction_deadline(node_ptr self, collective_kind kind, std::uint64_t seq,
                           std::uint64_t serial);
vnode_set settled_here(node_ptr self);
std::uint64_t next_reduction_seq(node_ptr self, collective_kind over);

// --- node_allreduce.cpp -----------------------------------------------------------------
bool is_allreduce(collective_kind k);
/// Adds the allreduce and barrier engines of a new membership (`settled`: a founder's).
void add_allreduce_engines(node_ptr self, const vnode_set& settled);
/// Starts allreduce or barrier `r` (a `reduce` request over `allreduce` or `barrier`).
void start_allreduce(node_ptr self, const collective_request_ptr& r);
/// Answers the allreduces and barriers an engine (of kind `kind`) delivered here.
void take_allreduce(node_ptr self, collective_kind kind, allreduce_outbox& out);

// --- node_alltoall.cpp ------------------------------------------------------------------
/// Adds the all-to-all engine of a new membership (`settled`: a founder's).
void add_alltoall_engine(node_ptr self, const vnode_set& settled);
/// Starts all-to-all `r` (a `reduce` request over `alltoall`).
void start_alltoall(node_ptr self, const collective_request_ptr& r);
/// Answers the all-to-alls whose blocks reached this node's vnodes; reports problems.
void take_alltoalls(node_ptr self, alltoall_collective& a2a);

// --- node_transport.cpp -----------------------------------------------------------------
void on_net_event(node_ptr self, const net::transport_event& ev);
void refuse(node_ptr self, const wire::envelope& e);
void on_deliver(node_ptr self, const wire::envelope& e);

} // namespace node_internal

} // namespace banyan::actors

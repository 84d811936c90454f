#pragma once
// Internal: the machine behind `banyan::node`, the glue between a supervisor, its
// collective engines and the TCP transport.
//
// The node's state (supervisor, engines, membership bookkeeping) is one state machine
// guarded by a mutex and run by whichever thread has something for it, so that a frame
// crosses no thread on its way through a processor:
//
//   libuv loop thread:  frame --> node_core::deliver --> engine / supervisor --> tcp_transport::send
//                       transport event --> node_core::net_event
//   caller's thread:    broadcast / send / reduce / found / join / leave --> node_core (inline)
//   node actor:         timers (delayed_anon_send to itself) --> node_core
//                       handlers owed to a caller's thread (see below)
//
// Handlers (deliveries, events, completion callbacks) run after the state lock is
// released, one at a time and in order, on the loop thread or the actor, never on a
// caller's thread: what a caller's call produced is handed to the actor to run, or, when
// the transport's loop polls (node_config::busy_poll), to the loop, which is awake and
// then runs every handler (the actor hands what its timers produce to it too). A handler
// may call the node again (on the same thread); what that produces runs after it.
// Everybody else sees the snapshot in `node_shared`.

#include <array>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "banyan/actors/node.hpp"
#include "caf_glue.hpp"

namespace banyan::actors {

using discover_atom = caf::atom_constant<caf::atom("bdiscover")>;
/// Retry frames held back by the transport's backpressure.
using overflow_atom = caf::atom_constant<caf::atom("boverflow")>;
/// Poll whether the engines of the last membership have drained.
using linger_atom = caf::atom_constant<caf::atom("blinger")>;
/// Forget a departed member's address once nothing is on its way to it: (forget_atom, id).
using forget_atom = caf::atom_constant<caf::atom("bforget")>;
/// Run the handlers a caller's thread left behind.
using dispatch_atom = caf::atom_constant<caf::atom("bdispatch")>;
/// The stall heartbeat (`node_state::stall_period`).
using beat_atom = caf::atom_constant<caf::atom("bbeat")>;
/// A reduction may miss a departed member's vnodes: (lost_atom, kind, seq, serial).
using lost_atom = caf::atom_constant<caf::atom("blost")>;
/// A reduction's time is up: (deadline_atom, kind, seq, serial).
using deadline_atom = caf::atom_constant<caf::atom("bdeadline")>;
/// A found or join's time is up: (join_end_atom, serial).
using join_end_atom = caf::atom_constant<caf::atom("bjoinend")>;
/// A joiner let in stops waiting for its share: (settle_atom, serial).
using settle_atom = caf::atom_constant<caf::atom("bsettle")>;
/// Tell `stop` when the engines have drained.
using drained_ptr = std::shared_ptr<std::promise<void>>;

/// What the node's public methods ask of the actor.
struct node_request {
  /// `plan`: install a baseline's plan (`plan` below, or scatter-allgather over `procs`).
  /// `prepare`: this node's own trees are to be used (trees on demand).
  enum class kind { found, join, leave, plan, prepare } what = kind::found;
  vnode_set vnodes; ///< found: owned; join: wanted
  std::vector<node_contact> contacts;
  std::shared_ptr<const banyan::tree> plan; ///< plan: a static tree (null: scatter-allgather)
  std::size_t procs = 0;                    ///< plan: scatter-allgather's processors
  std::uint64_t serial = 0; ///< found, join: names its deadline (0: none set yet)
  /// Called once, on the actor; a request dropped unanswered (the node stopped) calls
  /// it from its destructor with `stopped`.
  std::function<void(const node::result&)> done;

  node_request() = default;
  node_request(const node_request&) = delete;
  node_request& operator=(const node_request&) = delete;
  ~node_request() {
    if (done)
      done(make_error(errc::stopped, "the node stopped"));
  }
};
using node_request_ptr = std::shared_ptr<node_request>;

/// The counters of `node_metrics` that are not read from the supervisor or the transport:
/// relaxed atomics, counted under the state lock, or (collective outcomes) wherever a
/// future is answered.
struct node_counters {
  using counter = std::atomic<std::uint64_t>;
  enum outcome { started, completed, failed };
  /// [node_delivery::kind][events, vnodes, bytes]
  std::array<std::array<counter, 3>, 3> deliveries{};
  /// [collective_kind][outcome]
  std::array<std::array<counter, 3>, collective_kind_count> collectives{};
  counter members_joined{0};
  counter members_left{0};
  counter crashes_detected{0};
  counter vnodes_adopted{0};
  counter vnodes_disowned{0};
  counter frames_from_buried{0};
  counter suspicions{0};
  counter suspicions_cleared{0};

  static void add(counter& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
  void collective(collective_kind k, outcome o) {
    const auto i = static_cast<std::size_t>(k);
    if (i < collectives.size())
      add(collectives[i][o]);
  }
};

/// A broadcast, send or reduction asked of the actor. A request dropped unanswered (the
/// node stopped) answers `stopped` from its destructor.
struct collective_request {
  enum class kind { broadcast, send, reduce, outcome } what = kind::broadcast;
  shared_bytes message; ///< broadcast, send
  vnode_id to = 0;      ///< send
  vnode_id root = 0;    ///< scatter (`over`): the root vnode
  std::map<vnode_id, shared_bytes> blocks; ///< scatter: every vnode's block
  collective_kind over = collective_kind::broadcast; ///< broadcast: which engine
  node_reduction reduction;
  std::promise<expected<wire::collective_id>> started; ///< broadcast, send
  std::promise<expected<reduce_result>> reduced;       ///< reduce
  wire::collective_id op;                               ///< outcome: the broadcast
  std::promise<expected<broadcast_completion>> finished; ///< outcome
  bool answered = false;
  /// Where the outcome is counted (none: not counted).
  std::shared_ptr<node_counters> counters;

  /// The kind of operation asked for (what its outcome is counted under).
  collective_kind counted_kind() const {
    return what == kind::send ? collective_kind::message
           : what == kind::reduce ? reduction.over
                                  : over;
  }
  void answer(expected<wire::collective_id> r) {
    if (!answered) {
      count(r.has_value());
      started.set_value(std::move(r));
    }
    answered = true;
  }
  /// reduce: `node_reduction::done` (null: none).
  std::function<void(const expected<reduce_result>&)> on_reduced;
  /// Queues a handler to run once the state lock is released (the machine's `defer`, set
  /// when the machine takes the request); null: `on_reduced` runs at once.
  std::function<void(std::function<void()>)> defer;

  void answer(expected<reduce_result> r) {
    if (!answered) {
      count(r.has_value());
      if (auto cb = std::move(on_reduced)) {
        on_reduced = nullptr;
        if (defer)
          defer([cb = std::move(cb), r]() { cb(r); });
        else
          cb(r);
      }
      reduced.set_value(std::move(r));
    }
    answered = true;
  }
  void answer(expected<broadcast_completion> r) {
    if (!answered)
      finished.set_value(std::move(r));
    answered = true;
  }
  void count(bool ok) {
    if (counters)
      counters->collective(counted_kind(), ok ? node_counters::completed : node_counters::failed);
  }
  collective_request() = default;
  collective_request(const collective_request&) = delete;
  collective_request& operator=(const collective_request&) = delete;
  ~collective_request() {
    if (answered)
      return;
    auto err = make_error(errc::stopped, "the node stopped");
    defer = nullptr; // the machine may be going away: the callback runs here
    if (what == kind::reduce)
      answer(expected<reduce_result>(err));
    else if (what == kind::outcome)
      answer(expected<broadcast_completion>(err));
    else
      answer(expected<wire::collective_id>(err));
  }
};
using collective_request_ptr = std::shared_ptr<collective_request>;

/// Shared by the node (any thread) and its actor.
struct node_shared {
  /// Read by `node::metrics`; each counted where it happens (no lock needed).
  std::shared_ptr<node_counters> counters = std::make_shared<node_counters>();
  mutable std::mutex mtx;
  node_status status;            ///< guarded by mtx
  node::event_handler on_event;  ///< guarded by mtx; called without it
  node::delivery_handler on_deliver; ///< guarded by mtx; called without it
};

struct node_machine; // node_machine.hpp

/// The node's state machine and the actor that runs its timers. Created before the
/// transport starts; the transport's callbacks call `deliver` and `net_event` on its
/// loop thread; the node's public methods call the rest from any thread.
class node_core {
public:
  node_core(caf::actor_system& sys, const node_config& cfg, std::uint64_t seed,
            std::shared_ptr<net::tcp_transport> transport, std::shared_ptr<node_shared> shared);
  /// Stops the actor (see `shutdown`).
  ~node_core();
  node_core(const node_core&) = delete;
  node_core& operator=(const node_core&) = delete;

  // The transport's loop thread.
  void deliver(wire::envelope&& e);
  void net_event(const net::transport_event& ev);

  // Any thread.
  void request(node_request_ptr r);
  void collective(const collective_request_ptr& r);
  void set_address(const std::string& a);
  /// Fills what `m` takes from the state machine: state, incarnation, membership, the
  /// parents and their measurements, probes, parent changes.
  void fill_metrics(node_metrics& m) const;
  bool cancel_reduction(collective_kind over, std::uint64_t seq);
  bool cancel_join();
  std::uint64_t next_reduction_seq(collective_kind over);
  /// Sets `w` once a node that has left has drained its engines (at once otherwise).
  void linger(drained_ptr w);

  /// Stops the actor and waits for it; only once the transport has stopped (no callback
  /// can run). Requests still pending complete with `stopped`. Idempotent.
  void shutdown();

private:
  std::shared_ptr<node_machine> m_;
  caf::actor actor_;
  caf::actor_system& sys_;
};

/// Processor ids used while learning a contact's id: no member ever has one.
inline constexpr proc_id discovery_id = max_node_id + 1;

} // namespace banyan::actors


#pragma once
// Internal: the actor behind `banyan::node`, the glue between a supervisor and the TCP
// transport.
//
//   libuv loop thread                      node actor (detached: a thread of its own)
//   tcp_transport --deliver--anon_send-->  supervisor.on_message --> outbox
//                 --events---anon_send-->  (unreachable? learn a contact's id?)
//                                          outbox.sends --> tcp_transport::send (thread-safe)
//                                          outbox.timers --> delayed_send to itself
//                                          member addresses --> tcp_transport::add_peer
//                                          snapshot + events --> node_shared (mutex)
//
// The actor owns the supervisor; everybody else sees the snapshot in `node_shared`.

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "banyan/actors/node.hpp"
#include "caf_glue.hpp"

namespace banyan::actors {

using net_event_atom = caf::atom_constant<caf::atom("bnetevent")>;
using request_atom = caf::atom_constant<caf::atom("bnodereq")>;
using discover_atom = caf::atom_constant<caf::atom("bdiscover")>;
using address_atom = caf::atom_constant<caf::atom("baddress")>;
/// Start a collective: (collective_atom, collective_request_ptr).
using collective_atom = caf::atom_constant<caf::atom("bcollect")>;
/// An engine's timer: (engine_timer_atom, reduce engine?, membership, token).
using engine_timer_atom = caf::atom_constant<caf::atom("bengtimer")>;
/// Retry frames held back by the transport's backpressure.
using overflow_atom = caf::atom_constant<caf::atom("boverflow")>;
/// Poll whether the engines of the last membership have drained.
using linger_atom = caf::atom_constant<caf::atom("blinger")>;
/// Forget a departed member's address once nothing is on its way to it: (forget_atom, id).
using forget_atom = caf::atom_constant<caf::atom("bforget")>;
/// `stop` asks to be told when the engines have drained: (linger_atom, drained_ptr).
using drained_ptr = std::shared_ptr<std::promise<void>>;

/// What the node's public methods ask of the actor.
struct node_request {
  enum class kind { found, join, leave } what = kind::found;
  vnode_set vnodes; ///< found: owned; join: wanted
  std::vector<node_contact> contacts;
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

/// A broadcast, send or reduction asked of the actor. A request dropped unanswered (the
/// node stopped) answers `stopped` from its destructor.
struct collective_request {
  enum class kind { broadcast, send, reduce } what = kind::broadcast;
  shared_bytes message; ///< broadcast, send
  vnode_id to = 0;      ///< send
  node_reduction reduction;
  std::promise<expected<wire::collective_id>> started; ///< broadcast, send
  std::promise<expected<reduce_result>> reduced;       ///< reduce
  bool answered = false;

  void answer(expected<wire::collective_id> r) {
    if (!answered)
      started.set_value(std::move(r));
    answered = true;
  }
  void answer(expected<reduce_result> r) {
    if (!answered)
      reduced.set_value(std::move(r));
    answered = true;
  }
  collective_request() = default;
  collective_request(const collective_request&) = delete;
  collective_request& operator=(const collective_request&) = delete;
  ~collective_request() {
    if (answered)
      return;
    auto err = make_error(errc::stopped, "the node stopped");
    if (what == kind::reduce)
      answer(expected<reduce_result>(err));
    else
      answer(expected<wire::collective_id>(err));
  }
};
using collective_request_ptr = std::shared_ptr<collective_request>;

/// Shared by the node (any thread) and its actor.
struct node_shared {
  mutable std::mutex mtx;
  node_status status;            ///< guarded by mtx
  node::event_handler on_event;  ///< guarded by mtx; called without it
  node::delivery_handler on_deliver; ///< guarded by mtx; called without it
};

/// Spawns the actor. `transport` must not be started yet; the actor sends through it.
caf::actor spawn_node_actor(caf::actor_system& sys, const node_config& cfg, std::uint64_t seed,
                            std::shared_ptr<net::tcp_transport> transport,
                            std::shared_ptr<node_shared> shared);

/// Processor ids used while learning a contact's id: no member ever has one.
inline constexpr proc_id discovery_id = max_node_id + 1;

} // namespace banyan::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::net::transport_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::node_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::collective_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::drained_ptr)

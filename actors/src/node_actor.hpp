#pragma once
// Internal: the actor behind `banyan::node`, the glue between a supervisor and the TCP
// transport.
//
//   libuv loop thread                      node actor (CAF worker)
//   tcp_transport --deliver--anon_send-->  supervisor.on_message --> outbox
//                 --events---anon_send-->  (unreachable? learn a contact's id?)
//                                          outbox.sends --> tcp_transport::send (thread-safe)
//                                          outbox.timers --> delayed_send to itself
//                                          member addresses --> tcp_transport::add_peer
//                                          snapshot + events --> node_shared (mutex)
//
// The actor owns the supervisor; everybody else sees the snapshot in `node_shared`.

#include <functional>
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

/// Shared by the node (any thread) and its actor.
struct node_shared {
  mutable std::mutex mtx;
  node_status status;            ///< guarded by mtx
  node::event_handler on_event;  ///< guarded by mtx; called without it
};

/// Spawns the actor. `transport` must not be started yet; the actor sends through it.
caf::actor spawn_node_actor(caf::actor_system& sys, proc_id self, supervisor_config cfg,
                            std::uint64_t seed, std::shared_ptr<net::tcp_transport> transport,
                            std::shared_ptr<node_shared> shared);

/// Processor ids used while learning a contact's id: no member ever has one.
inline constexpr proc_id discovery_id = max_node_id + 1;

} // namespace banyan::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::net::transport_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::node_request_ptr)

#pragma once
// Internal: what the processor actors, the network actor and the emulated cluster
// exchange for broadcasts (the broadcast engine each processor hosts next to its
// supervisor). In-process only, like caf_glue.hpp.

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "banyan/core/tree.hpp"
#include "processor_actor.hpp"

namespace banyan::actors {

/// A frame that could not be delivered, carried back to its sender (the engines need
/// the frame itself; the supervisor still gets the (unreachable_atom, proc_id) notice).
using bounced_atom = caf::atom_constant<caf::atom("bbounced")>;
/// A processor hands a frame its engine refused to the network, to go back to its sender.
using refuse_atom = caf::atom_constant<caf::atom("brefuse")>;
/// Broadcast engine timers: (bctimer_atom, static engine?, token), a token space apart
/// from the supervisor's timer_atom.
using bctimer_atom = caf::atom_constant<caf::atom("bbctimer")>;
/// A processor that has left polls whether its engines have drained.
using drain_atom = caf::atom_constant<caf::atom("bdrain")>;
/// Start a broadcast: (bcast_atom, request).
using bcast_atom = caf::atom_constant<caf::atom("bbcast")>;
/// Install a static tree on a processor (in-process emulation only).
using static_tree_atom = caf::atom_constant<caf::atom("bstatic")>;

/// Broadcast deliveries as the processors report them (instrumentation, like the
/// monitor): per broadcast, per vnode, every time it was delivered (more than one
/// entry would be a duplicate), and when each broadcast started.
struct broadcast_ledger {
  std::mutex mtx;
  std::map<wire::collective_id, std::map<vnode_id, std::vector<timestamp>>> deliveries;
  std::map<wire::collective_id, timestamp> started;
};

/// A request to start a broadcast at a processor; the answer comes through `result`.
struct bcast_request {
  std::size_t bytes = 0;
  bool use_static = false;
  std::promise<std::optional<wire::collective_id>> result;
};
using bcast_request_ptr = std::shared_ptr<bcast_request>;
using tree_ptr = std::shared_ptr<const banyan::tree>;

/// A processor that also hosts a broadcast engine reporting to `ledger`. `incarnation`
/// numbers the broadcasts it starts apart from those of its earlier incarnations.
caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon, std::uint32_t incarnation,
                           std::shared_ptr<broadcast_ledger> ledger);

} // namespace banyan::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::bcast_request_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(banyan::actors::tree_ptr)

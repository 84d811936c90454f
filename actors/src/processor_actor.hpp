#pragma once
// Internal: a processor as a CAF actor. It owns its supervisor (the pure state
// machine of core/), feeds it every message and timer with the actor clock's time,
// and carries out what the supervisor asks: messages go to the network actor in
// one batch per event, timers become delayed messages to itself, tree events go
// to the monitor. It also hosts the collective engines (broadcast with point-to-point,
// reduction, and in emulation MPICH's scatter-allgather; collective_glue.hpp). A processor that left stays attached until its
// engines have drained, then detaches and quits.

#include <atomic>
#include <functional>
#include <memory>

#include "banyan/actors/cluster_monitor.hpp"
#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/supervisor.hpp"
#include "caf_glue.hpp"

namespace banyan::actors {

/// Counters shared between the actors and the harness.
struct shared_counters {
  std::atomic<std::uint64_t> in_flight{0};
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> dropped{0};
  /// Frames that came back (bounced or refused) when the incarnation that sent them was
  /// no longer attached: a crashed one's, or a leaver detached too early (a bug).
  std::atomic<std::uint64_t> stray_returns{0};
  /// Processors whose collective engines hold something (a stream, a partial waiting
  /// for children, a frame waiting for a retry): the cluster is not quiet meanwhile.
  std::atomic<std::int64_t> holding{0};
  /// Joins asked of the network that it has not handed to their processor yet (a
  /// rejoining incarnation waits until its predecessor has drained and detached): the
  /// cluster is not quiet meanwhile.
  std::atomic<std::int64_t> joining{0};
};

caf::actor spawn_processor(caf::actor_system& sys, std::shared_ptr<supervisor> sup,
                           caf::actor net, cluster_monitor* mon);

/// The network actor that owns the emulated wide-area network model.
/// `on_frame` (may be empty) hears of every frame sent, delivered or undeliverable, with
/// the actor clock's time. `share_quantum`: net::wan_options::share_quantum (0: exact).
caf::actor spawn_emulated_network(
  caf::actor_system& sys, const banyan::topology& topo,
  std::shared_ptr<shared_counters> counters,
  std::function<void(frame_trace::kind, timestamp, const wire::envelope&, std::size_t)> on_frame = {},
  duration share_quantum = duration{0});

inline timestamp now_of(caf::local_actor* self) {
  return std::chrono::duration_cast<timestamp>(self->clock().now().time_since_epoch());
}

} // namespace banyan::actors

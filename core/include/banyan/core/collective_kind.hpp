#pragma once
/// The kind of a collective operation: which engine its frames belong to. Every
/// collective message carries it (`wire::collective_id::kind`, `reduce_partial::collective`,
/// `reduce_handoff::collective`), and so does every frame on the wire (`Frame.collective`,
/// docs/wire-protocol.md). A runtime's engine host routes frames, bounces and timers by
/// it (core/engine_host.hpp).

#include <cstddef>
#include <cstdint>

namespace banyan {

/// Values are those of the wire's `Collective` enum (schema/banyan.capnp); append only.
enum class collective_kind : std::uint8_t {
  none = 0,              ///< not a collective: the supervisor's messages
  broadcast = 1,         ///< broadcast over the adaptive trees (core/broadcast.hpp)
  message = 2,           ///< point-to-point message, through the broadcast engine
  reduce = 3,            ///< reduction over the adaptive trees (core/reduce.hpp)
  static_broadcast = 4,  ///< broadcast over a fixed tree, a baseline (static_tree_view)
  static_reduce = 5,     ///< reduction over a fixed tree, a baseline
  scatter_allgather = 6, ///< MPICH's long broadcast, a baseline (core/scatter_allgather.hpp)
  allreduce = 7,         ///< allreduce over the adaptive trees (core/allreduce.hpp)
  barrier = 8,           ///< barrier over the adaptive trees: an allreduce of nothing
  recursive_doubling = 9,    ///< MPICH's recursive-doubling allreduce, a baseline (core/mpich_allreduce.hpp)
  ring_allreduce = 10,       ///< MPICH's ring allreduce, a baseline
  dissemination_barrier = 11, ///< MPICH's dissemination barrier, a baseline
  gather = 12,           ///< per-vnode blocks to a root vnode (core/gather.hpp)
  scatter = 13,          ///< per-vnode blocks from a root vnode (core/scatter.hpp)
  allgather = 14,        ///< every vnode's block to every vnode (core/allgather.hpp)
  ring_allgather = 15,   ///< MPICH's ring allgather, a baseline (core/ring_allgather.hpp)
  alltoall = 16,         ///< every vnode's block for every vnode (core/alltoall.hpp)
  pairwise_alltoall = 17, ///< MPICH's pairwise all-to-all, a baseline (core/pairwise_alltoall.hpp)
};

/// One past the largest kind.
inline constexpr std::size_t collective_kind_count = 18;

/// "broadcast", "static_reduce", ...; "unknown" for a value outside the enum.
constexpr const char* to_string(collective_kind k) noexcept {
  switch (k) {
  case collective_kind::none: return "none";
  case collective_kind::broadcast: return "broadcast";
  case collective_kind::message: return "message";
  case collective_kind::reduce: return "reduce";
  case collective_kind::static_broadcast: return "static_broadcast";
  case collective_kind::static_reduce: return "static_reduce";
  case collective_kind::scatter_allgather: return "scatter_allgather";
  case collective_kind::allreduce: return "allreduce";
  case collective_kind::barrier: return "barrier";
  case collective_kind::recursive_doubling: return "recursive_doubling";
  case collective_kind::ring_allreduce: return "ring_allreduce";
  case collective_kind::dissemination_barrier: return "dissemination_barrier";
  case collective_kind::gather: return "gather";
  case collective_kind::scatter: return "scatter";
  case collective_kind::allgather: return "allgather";
  case collective_kind::ring_allgather: return "ring_allgather";
  case collective_kind::alltoall: return "alltoall";
  case collective_kind::pairwise_alltoall: return "pairwise_alltoall";
  }
  return "unknown";
}

} // namespace banyan

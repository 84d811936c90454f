#pragma once
/// The long-message ceiling of a topology: the fastest steady rate at which a broadcast
/// from a root (or a reduction into it) can move its bytes through the bandwidth
/// resources of the emulated network model (topology.hpp, net/wan_model.hpp), whatever
/// the algorithm: any tree, pipelined or not, scatter-allgather, anything that relays
/// whole or partial copies through processors.
///
/// The resources form a flow network. Every route the model allows is a path in it, and
/// every path in it is a route the model allows, possibly relayed by processors:
///
///            p --nic out--> S_out(leaf) --uplink out--> X(leaf) ... X(c) --link c->d--> E(d)
///   S_out(leaf) --> S_in(leaf)             (inside a leaf: the two NICs only)
///   X(c) --> O(g) --uplink out of g--> X(g)     (c a child of g: leaving g)
///   E(g) --uplink in of g--> I(g) --> E(c)       (entering g, then one of its children)
///            E(leaf) --uplink in--> S_in(leaf) --nic in--> q
///
/// A processor q receives the whole message; every byte of it crossed every cut that
/// separates the root from q, so q's rate is at most the minimum cut, i.e. the maximum
/// flow from the root to q (reduction: from q to the root, since the root's result
/// determines q's contribution given the others', and an int32 sum's partial results are
/// as long as one contribution). The ceiling is the smallest over processors.
/// Assumptions: the sender CPU (send_overhead) and frame headers are ignored (they only
/// slow a real run down), and every message is longer than wan_options::squeeze_bytes
/// (short ones are charged their uncontended time and would not share).

#include <vector>

#include "banyan/core/topology.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

struct stream_ceiling {
  /// Bytes per second (infinite when no finite capacity separates anyone from the root).
  rate ceiling = infinite_rate;
  /// The processor with the smallest maximum flow (lowest id on ties); no_proc for a
  /// topology of one processor.
  proc_id bottleneck = no_proc;
  /// The maximum flow per processor (bytes per second); the root's is infinite.
  std::vector<rate> per_proc;
};

/// Broadcast: maximum flow from `root` to every other processor.
stream_ceiling broadcast_ceiling(const topology& topo, proc_id root);

/// Reduction: maximum flow from every other processor to `root`.
stream_ceiling reduce_ceiling(const topology& topo, proc_id root);

/// The tree ceiling: the fastest steady rate of any *single* tree, every byte of the
/// message following the tree's one path from the root to each processor (a pipelined
/// broadcast down one tree, or a reduction up one; several trees at once or
/// scatter-allgather are not bounded by it). A tree's path from the root to q, relays
/// included, is a path of the network above, and the whole message crosses each of its
/// resources, so q's rate is at most that path's narrowest capacity, at most the widest
/// path's: the ceiling is min over q of the widest path from the root to q (reduction:
/// from q to the root). Never above the maximum-flow ceiling (a path is one flow).
/// What it leaves out, so it is a bound and not a tree: a parent's NIC, an uplink or a
/// link shared by several of the tree's edges (the best tree may have to share), and the
/// assumptions above. It is the rate of the widest-path tree if those shares were free.
stream_ceiling broadcast_tree_ceiling(const topology& topo, proc_id root);
stream_ceiling reduce_tree_ceiling(const topology& topo, proc_id root);

/// The steady rate of a stream pipelined down the tree `t` (bytes per second): every
/// edge parent -> child carries the whole stream, so a resource used by k edges' routes
/// gives each at most capacity / k; the tree's rate is the smallest such share (infinite
/// when nothing is limited). Same assumptions as above (no CPU, no headers). One
/// algorithm among those the ceilings bound, so never above `broadcast_tree_ceiling`.
rate tree_stream_rate(const topology& topo, const tree& t);

} // namespace banyan

#pragma once
/// Short-message oracles computed from a topology: a lower bound on a 1-byte broadcast
/// (or reduction) from a root, and the best static broadcast tree found offline, both
/// under the send-overhead model of the emulated network (net/wan_model.hpp): every
/// message costs its sender `topology::send_overhead` of CPU, one message after another,
/// then travels the one-way latency. Transmission of a 1-byte frame is left out (it
/// only adds time), so the bound holds for the emulated network.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/topology.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/tree_builders.hpp"

namespace banyan {

/// Shortest paths from `root` (ms) where each hop a -> b costs send_overhead plus
/// one_way(a, b): a processor cannot have a message sooner, since every copy reaching
/// it went through a chain of sends, each started by its sender after its own receipt.
/// `towards_root`: the paths from every processor to `root` instead (a reduction's).
std::vector<double> short_message_bounds(const topology& topo, proc_id root,
                                         bool towards_root = false);

/// The largest of `short_message_bounds`: no broadcast from `root` (reduction into it)
/// completes sooner.
double short_message_bound(const topology& topo, proc_id root, bool towards_root = false);

/// MPICH-G levels of a topology: for each processor the chain of groups above it, the
/// top-level group first, the leaf last; shorter chains are padded with their leaf so
/// that every processor has the same number of levels (multilevel_tree's contract).
std::vector<std::vector<int>> group_levels(const topology& topo);

/// One candidate of `best_static_tree`.
struct static_candidate {
  std::string name;
  tree t;
  double completion_ms = 0; ///< completion_time_with_overhead over the topology's latencies
};

struct static_tree_result {
  std::vector<static_candidate> candidates; ///< in the order tried
  std::size_t best = 0;                     ///< index of the fastest (first on ties)
  const static_candidate& winner() const { return candidates[best]; }
};

/// The best broadcast tree from `root` that the offline search finds under
/// `completion_time_with_overhead` (the topology's one-way latencies and send overhead):
/// binomial, MST, HLOT, MagPIe (leaf groups as clusters), multilevel (`group_levels`),
/// simulated annealing (`sa_tree`, when `with_sa`), and then "descent": from the best of
/// these, moves of one processor on the path to the latest one under another parent, kept
/// while they lower (completion, sum of arrivals), at most about 5e6 / n evaluations.
/// Deterministic for `seed`.
static_tree_result best_static_tree(const topology& topo, proc_id root, std::uint64_t seed,
                                    bool with_sa = true);

} // namespace banyan

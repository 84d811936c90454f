#pragma once
/// Tree builders: the baseline shapes banyan is compared against, and the postal model
/// that predicts how long a broadcast down a tree takes. Every builder returns a
/// `banyan::tree` over processors 0..n-1 rooted at `root`; collectives, benchmarks and
/// `banyan plan` consume them.
///
/// Matrices are `m[from][to]`, square, one row per processor: one-way latencies in
/// milliseconds, bandwidths in bytes per second. Diagonals are never read.
///
///   shape        from                       idea
///   binomial     n                          MPICH: parent clears the lowest set bit
///   flat         n                          root sends to everyone
///   chain        an order                   pipelined list
///   widest_chain bandwidths                 list whose narrowest link is wide
///   mst          latencies                  Prim, directed weights
///   hlot         latencies                  Prim, relays only where faster than direct
///   magpie       clusters                   flat between clusters, binomial inside
///   multilevel   groups per level           MPICH-G: one master per group per level
///   sa           latencies (+ bandwidths)   simulated annealing (paper 002)
///   adaptive     latencies                  what banyan's own protocol converges to
///
/// Preconditions (asserted): `root` < n, matrices square with one row per processor,
/// per-processor vectors of length n. Input from files is checked before it gets here
/// (see latency_matrix.hpp).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "banyan/core/supervisor.hpp"
#include "banyan/core/tree.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

/// A square matrix indexed `[from][to]`: one-way latencies (ms) or bandwidths (B/s).
using cost_matrix = std::vector<std::vector<double>>;

// --- shapes that need no measurements ---------------------------------------------

/// MPICH's binomial tree: relative rank r = (p - root + n) % n; the parent of r > 0 is
/// r with its lowest set bit cleared. For n = 8, root 0:
///
///   0 +-- 1                     relative rank in binary: a parent is its
///     +-- 2 +-- 3               child with the lowest set bit cleared
///     +-- 4 +-- 5                 011 -> 010,  110 -> 100,  111 -> 110
///           +-- 6 +-- 7
tree binomial_tree(std::size_t n, proc_id root);

/// The root is everybody's parent.
tree flat_tree(std::size_t n, proc_id root);

/// A pipelined chain: `order[0]` is the root, `order[i]`'s parent is `order[i-1]`.
/// `order` must be a permutation of 0..order.size()-1.
tree chain_tree(const std::vector<proc_id>& order);

/// An order for `chain_tree` starting at `root` whose narrowest link (bandwidth from a
/// processor to the next) is as wide as the search finds. Finding the best order is
/// NP-hard (a bottleneck Hamiltonian path), so:
///   1. greedy widest-next: from the tail, the unvisited processor with the widest link
///      (ties to the lower id); its bottleneck is the floor;
///   2. binary search over the distinct link widths above the floor for the widest
///      threshold at which a depth-first search (Warnsdorff's rule: fewest onward links
///      first) finds a path through everyone on links at least that wide. The search is
///      bounded (about 2*10^7 / n^2 steps per threshold): exact on small inputs,
///      a heuristic on large ones;
///   3. local search moving one processor at a time while that leaves fewer links at
///      the bottleneck (or raises it).
std::vector<proc_id> widest_chain(const cost_matrix& bandwidth, proc_id root);

/// The narrowest link of the chain `order` (infinity for fewer than two processors).
double chain_bottleneck(const std::vector<proc_id>& order, const cost_matrix& bandwidth);

// --- latency-driven shapes ---------------------------------------------------------

/// Minimum spanning tree by Prim's algorithm from `root`, on the directed one-way
/// latency parent -> child: repeatedly adds the processor with the cheapest link from
/// the tree; a link replaces the best known one only when strictly cheaper, and ties
/// between processors go to the lower id. This reproduces paper 001's MST (Fig. 2b).
tree mst_tree(const cost_matrix& latency, proc_id root);

/// MPICH-GX's hierarchical latency-optimal tree (paper 001, Fig. 3). Prim-like: grows
/// from the root by the cheapest link (c, x), but a link from c != root is admissible
/// only when the relayed path is strictly faster than the root's direct link:
/// D[c] + W[c][x] < W[root][x], D being the path latency from the root. The root's
/// direct link is always admissible, so every processor arrives no later than in the
/// flat tree. (The paper's pseudo-code reads "choose fastest link e(c,n); if D[n] is
/// higher than W[0][n], try again".) On the paper's 8-site matrix it gives Fig. 2(d):
/// completion 600.
tree hlot_tree(const cost_matrix& latency, proc_id root);

// --- cluster-aware shapes ------------------------------------------------------------

/// MagPIe's broadcast tree (paper 003): the root sends to one coordinator per other
/// cluster (a flat tree across the wide area), and each cluster runs a binomial tree
/// rooted at its coordinator over its members in id order. The root coordinates its
/// own cluster; another cluster's coordinator is the processor listed for it in
/// `coordinators` (one processor per cluster, any order), else its lowest id.
/// `cluster_of[p]` is p's cluster (any ints); it must have n entries.
///
///   clusters {0,1,2,3} {4,5,6,7}, root 1:
///   1 -> 4 (WAN);  1 -> 2, 1 -> 3, 3 -> 0;  4 -> 5, 4 -> 6, 6 -> 7
tree magpie_tree(std::size_t n, proc_id root, const std::vector<int>& cluster_of,
                 const std::vector<proc_id>& coordinators = {});

/// MPICH-G's multilevel tree (paper 004). `levels[p][l]` is p's group at level l, the
/// slowest level first (site, then machine, ...); every processor has the same number
/// of levels and a group at level l is read within its group at level l-1. Each group
/// has one master: the root for the groups that hold it, else the lowest id. At each
/// level the master of a group sends directly (flat) to the masters of its other
/// subgroups; inside a group of the last level a binomial tree runs from its master:
///
///   site 0: machines {0,1} {2,3}    site 1: machines {4,5} {6,7}    root 0
///   0 -> 4 (site masters)   0 -> 2, 4 -> 6 (machine masters)   0->1 2->3 4->5 6->7
///
/// With no levels (every row empty) this is one binomial tree. MPICH-G2 itself used
/// binomial trees among the masters below the wide-area level; with two machines per
/// site both are the same.
tree multilevel_tree(proc_id root, const std::vector<std::vector<int>>& levels);

// --- searched and emergent shapes ------------------------------------------------------

/// Simulated annealing over trees (paper 002), deterministic for a `seed`.
///
/// Objective: `completion_time_with_bandwidth` (the postal model plus, when `bandwidth`
/// is not empty, the serialized transmission of `message_bytes` on each sender's link).
///
/// basicSA as in the paper's Fig. 1: temperature 100 down to 1 by a factor 0.8, up to
/// 80 transformations per temperature (a step ends after 20 acceptances; annealing
/// stops after a step with fewer than 3% accepted and no new best). A transformation
/// moves a random non-root processor on the path to the latest-arriving one under
/// another random processor outside its subtree. Costs are compared in percent of the
/// starting tree's cost, so that the temperatures mean the same for any unit.
/// driverSA as in Fig. 2 without a time budget: basicSA from 50 starting trees (flat,
/// binomial, MST and HLOT, then random ones), then 25 refinements cycling through the
/// good list (trees within 10% of the best). Above 16 processors, clusteredSA (Fig. 4)
/// is approximated: pools are the groups linked by latencies (the larger of the two
/// directions) at most 10, 25, 50 or 75% of the largest latency; pool sets with a pool
/// above 16 processors are dropped unless all have one; driverSA runs per pool from the
/// pool's member nearest the root and then over the pool roots; a final basicSA
/// polishes the best combined tree.
///
/// The result is never worse, under the objective, than any of the starting trees
/// (flat, binomial, MST, HLOT on all processors).
tree sa_tree(const cost_matrix& latency, const cost_matrix& bandwidth, proc_id root,
             double message_bytes, std::uint64_t seed);

/// The latency tree banyan's own protocol converges to for `root`: every processor runs
/// a `supervisor` (with `cfg`) on a `matrix_grid` over `latency` until no processor
/// measures any more. Contention-free and with infinite bandwidth (see matrix_grid.hpp),
/// so the result depends on latencies and on `seed` only. `cfg.probe_timeout` is raised
/// to at least 4x the largest RTT in the matrix (a probe is three round trips), since
/// nothing is lost on this grid and a timeout would only cut off far processors.
tree adaptive_tree(const cost_matrix& latency, proc_id root, std::uint64_t seed,
                   const supervisor_config& cfg = {});

// --- the postal model ----------------------------------------------------------------

/// Arrival time of a broadcast at every processor in the postal model without send
/// overhead: the root at 0, every other processor at its parent's time plus the one-way
/// latency parent -> child. A parent sends to all its children at once. Processors the
/// root does not reach (absent ones) get +infinity.
std::vector<double> arrival_times(const tree& t, const cost_matrix& latency);

/// The largest arrival time over the processors the root reaches (0 for a lone root or
/// an empty tree).
double completion_time(const tree& t, const cost_matrix& latency);
/// The shortest-path one-way latency from `root` to every processor (Dijkstra over the
/// matrix): no broadcast from `root` can reach processor p sooner.
std::vector<double> shortest_path_latencies(const cost_matrix& latency, proc_id root);
/// The lower bound of any broadcast from `root`: the largest shortest-path one-way
/// latency from it.
double farthest_shortest_path(const cost_matrix& latency, proc_id root);

/// Each processor's children in the order it sends to them in the overhead-aware model:
/// more descendants first, ties to the lower id.
std::vector<std::vector<proc_id>> send_order(const tree& t);

/// The postal model with a per-send overhead `overhead` (ms): a parent sends to its
/// children one after another in `send_order`; child i (0-based) leaves at
/// parent_time + (i + 1) * overhead and arrives one-way latency later.
std::vector<double> arrival_times_with_overhead(const tree& t, const cost_matrix& latency,
                                                double overhead);

/// The largest arrival time over the processors the root reaches, with overhead.
double completion_time_with_overhead(const tree& t, const cost_matrix& latency,
                                     double overhead);

/// The objective of `sa_tree`. Each parent pushes the `message_bytes` to its children
/// one after another over its own link: child i arrives at
/// parent_time + sum over k <= i of message_bytes / bandwidth[parent][child_k] (in ms)
/// + latency[parent][child_i]. Children go in the order that serves the longest
/// remaining subtree first (latency to the child plus the time the child's subtree takes
/// after its arrival; ties to the lower id). An empty `bandwidth` means infinite
/// bandwidth: the plain postal model. A zero bandwidth makes the link unusable (+inf).
std::vector<double> arrival_times_with_bandwidth(const tree& t, const cost_matrix& latency,
                                                 const cost_matrix& bandwidth,
                                                 double message_bytes);

/// The largest arrival time over the processors the root reaches under
/// `arrival_times_with_bandwidth`; +infinity when one of them hangs below an unusable
/// link.
double completion_time_with_bandwidth(const tree& t, const cost_matrix& latency,
                                      const cost_matrix& bandwidth, double message_bytes);

} // namespace banyan

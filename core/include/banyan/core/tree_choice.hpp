#pragma once
/// Which tree a broadcast takes: the latency tree (the message whole, store-and-forward
/// at every hop) or the bandwidth tree (cut into segments, pipelined). The paper switched
/// at a fixed 256 KiB and planned to choose "from the measured values of latency and
/// bandwidth" (Section IV-D): every processor knows, for each root's trees, its `dist`
/// (RTT sum to the root along the tree) and `est` (the rate it receives at along the
/// tree), which give the time a message of N bytes takes to reach it along either tree.
///
/// Predicted arrival at a processor at depth d (o: send overhead per message, h: the
/// share of its parent's sending its own hop gets, e = est: the bandwidth tree's
/// bottleneck, s: the segment, k = ceil(N/s) segments):
///
///   latency tree    dist/2 + d (o + N/h)                  every hop carries all of N,
///                                                          shared among the parent's
///                                                          children (h stands for each)
///   bandwidth tree  dist/2 + d o + (d-1) s/h + N/e + (k-1) o
///                                                          one segment fills each other
///   hop:  root --s0-->  A  --s0-->  B  --s0-->  C         hop, then the narrowest hop
///         root  s1 ...                                     sets the pace
///
/// (The latency trees' own `est` is the paper's rule, the path bandwidth split among a
/// parent's children without the sender's capacity: it underrates a WAN hop many times
/// over, and a store-and-forward message pays every hop, not only the narrowest.)
///
/// The origin of a broadcast is the root of its own trees and knows nothing of them
/// beyond its children, but for the summaries they send up (subtree_summary.hpp): in
/// each of its two trees, the largest RTT/2 sum, the largest sum of 1/hop rate and the
/// smallest hop rate over the paths down it, and the largest depth. From those (maxima
/// taken apart: an upper envelope of the farthest receiver's arrival, A = depth, RTT)
///
///   latency tree    half_rtt + depth o + N per_byte
///   bandwidth tree  half_rtt + depth o + s' per_byte + (N - s') / bottleneck + (k-1) o
///                   (s' = min(s, N): the first segment crosses every hop, the rest
///                   follow at the narrowest hop's pace)
///
/// When the origin has complete summaries for both of its trees and they put one tree
/// more than `summary_margin` times above the other, they decide. Else (a child has not
/// reported yet, the paper's rule variant, which sends none, or summaries that are not
/// decisive) it uses its own place in every other root's trees instead (its worst predicted arrival over
/// the roots stands for its farthest receiver's, by symmetry of the links: the paper
/// sizes reduction timeouts the same way, IV-E), which misses a narrow hop deep in its
/// own trees that its place in other trees never crosses. The tree with the lower
/// prediction wins. Without figures (no trees yet, static trees) the choice falls back
/// on the threshold.
///
/// Pure: no clock, no I/O; the figures come from the supervisor's `tree_state`s
/// (`position_of`, `fold_children`) through a `tree_view` (`tree_view::positions`,
/// `tree_view::own_summary`).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "banyan/core/subtree_summary.hpp"
#include "banyan/core/types.hpp"

namespace banyan {

class tree_state;
class tree_view;

/// How a broadcast picks its tree.
enum class tree_rule : std::uint8_t {
  threshold, ///< the paper's: latency tree below `long_threshold` bytes, bandwidth tree from it on
  model,     ///< the lower predicted completion time (the threshold when figures are missing)
};

inline const char* to_string(tree_rule r) {
  return r == tree_rule::model ? "model" : "threshold";
}

/// One processor's place in one tree, as its supervisor knows it.
struct tree_position {
  proc_id root = no_proc;
  duration dist{0};        ///< RTT sum to the root along the tree
  rate est = 0;            ///< the rate it receives at along the tree (`tree_state::est`)
  std::uint32_t depth = 0; ///< hops to the root
  /// The rate of its own hop: the bandwidth measured to its parent, or the parent's
  /// sending capacity split among its children if that is less (the bandwidth rule's
  /// share, `bandwidth_rule.hpp`).
  rate hop = 0;
};

/// The figures of a tree at a processor that has a parent in it; nothing for a root, an
/// orphan, or a tree without measurements. `capacity`: what a parent can send in all
/// (the widest rate this processor measured, standing for its parent's; 0: unknown, the
/// hop's bandwidth is split then), used where the tree itself keeps none (latency trees).
std::optional<tree_position> position_of(const tree_state& t, rate capacity = 0);

/// The cost terms the prediction needs besides the positions.
struct tree_cost {
  duration overhead = std::chrono::microseconds(20); ///< sender CPU per message (per hop)
  std::size_t segment = 64 * 1024; ///< the bandwidth tree's segment (broadcast_config)
};

/// Predicted arrival of `bytes` at the processor at `p`, whole and store-and-forward
/// along a latency tree.
duration predict_latency_tree(const tree_position& p, std::size_t bytes, const tree_cost& c);
/// Predicted arrival of `bytes` at the processor at `p`, in segments pipelined along a
/// bandwidth tree.
duration predict_bandwidth_tree(const tree_position& p, std::size_t bytes, const tree_cost& c);

/// Both trees' predicted completion for one message: the worst over the positions given.
struct tree_prediction {
  duration latency{0};
  duration bandwidth{0};
  /// Positions were given for both kinds (otherwise the prediction means nothing).
  bool known = false;
  /// From the root's summaries of its own trees (else from its places in other roots').
  bool from_summaries = false;
  tree_kind faster() const noexcept {
    return bandwidth < latency ? tree_kind::bandwidth : tree_kind::latency;
  }
};

tree_prediction predict(const std::vector<tree_position>& latency,
                        const std::vector<tree_position>& bandwidth, std::size_t bytes,
                        const tree_cost& c);

/// Worst arrival of `bytes` over a root's own latency tree, from its summary (an upper
/// envelope: the maxima may come from different paths).
duration predict_latency_tree(const subtree_summary& s, std::size_t bytes, const tree_cost& c);
/// The same over a root's own bandwidth tree, in pipelined segments.
duration predict_bandwidth_tree(const subtree_summary& s, std::size_t bytes, const tree_cost& c);
/// Both trees' predicted completion from the root's summaries of its own two trees
/// (`known` when both are complete).
tree_prediction predict(const subtree_summary& latency, const subtree_summary& bandwidth,
                        std::size_t bytes, const tree_cost& c);

/// How much slower one tree must be predicted than the other, from the origin's
/// summaries of its own trees, for the summaries to decide (`predict(view, ...)`): an
/// upper envelope may stand up to twice above the worst path's own prediction, and the
/// lowest of all the hops' measurements rules a summary (a probe that crossed a WAN link
/// while others did measured a share of it: paper-3c201's latency trees hold hops
/// measured at 0.8 MB/s over a 25 MB/s link, which made the summaries 2.2 times for the
/// bandwidth tree on a 32 KiB message that the latency tree delivered in 15 ms, not 53).
inline constexpr double summary_margin = 3.0;

/// The prediction `choose_tree` decides on for the processor of `view` as an origin:
/// from its complete summaries of both of its own trees where one tree is predicted more
/// than `summary_margin` times slower than the other; else from its positions (from the
/// summaries when it has no positions).
tree_prediction predict(const tree_view& view, std::size_t bytes, const tree_cost& c);

/// What a broadcast engine is configured with.
struct tree_choice {
  tree_rule rule = tree_rule::model;
  /// The threshold rule's switch (the paper's 256 KiB); the model's fallback.
  std::size_t long_threshold = 256 * 1024;
  tree_cost cost;
};

/// The paper's rule.
inline tree_kind threshold_tree(std::size_t bytes, std::size_t long_threshold) noexcept {
  return bytes >= long_threshold ? tree_kind::bandwidth : tree_kind::latency;
}

/// The tree for a broadcast of `bytes` from the processor of `view` (the origin).
tree_kind choose_tree(const tree_view& view, std::size_t bytes, const tree_choice& choice);

} // namespace banyan

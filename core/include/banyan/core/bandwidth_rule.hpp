#pragma once
/// The bandwidth-aware parent rule.
///
/// Paper (IV-C): the rate p would receive from cand is
///   est(p,cand) = min(est(cand), bw(p,cand) / n)
/// with n the number of children cand would have with p among them; p adopts cand
/// when est(p,cand) > est(p,parent). banyan adds a relative hysteresis `bw_margin`
/// (adopt when better by more than the margin: measurements are noisy) and, in the
/// banyan variant, a locality tie-break: a processor whose parent is remote moves
/// to a local candidate whose estimate is within the margin of its current one.
/// Why: est() cannot see that several streams share one WAN link; left alone, many
/// processors of a cluster keep parents across the same WAN link, each estimating
/// the link's full rate, and a broadcast then divides the link among them all.
///
/// Fan-out shares the sender, not the path (banyan variant): a candidate's children
/// share its NIC, while a WAN path's rate is the WAN link's, used by one child only. So
/// the banyan variant estimates
///   est(p,cand) = min(est(cand), bw(p,cand), max(bw(p,cand), capacity) / n)
/// with `capacity` the sender's total rate (rule_context::sender_capacity). The paper's
/// bw / n charged a WAN candidate that already feeds one LAN child half of the WAN
/// link, so a cluster behind a slow direct link (paper-4c137: A->D 100 Mbit) kept it
/// rather than a parent behind a link twice as wide (C->D 200 Mbit).
///
/// A local parent's remote parent (banyan variant): a processor whose parent is in
/// its LAN gets the data across the wide-area link once, for the whole LAN, and its
/// parent's parent on the far side already sends that stream over the link. Adopting
/// that processor directly would put a second stream of the same data on the same link
/// and halve both, so it is judged at half the measured path rate
/// (shares_parents_link). On tiny-2c8 after the leave, 4 (under 6, in its LAN) probed
/// 6's parent 2 with the link idle, measured its full 100 Mbit against 6's estimate
/// taken under load, and moved: 2 then fed 4 and 6 across the one 100 Mbit link for the
/// rest of the run, at half the bandwidth. Further remote ancestors are not counted:
/// they may reach the LAN over another link, and counting them (tried) changed the
/// paper grids' churn runs both ways without a net gain (docs/benchmarks.md).
///
/// Loops are prevented explicitly: the distance condition that protects latency
/// trees does not exist here.

#include "banyan/core/latency_rule.hpp"

namespace banyan {

/// The rate p would receive from cand (cand_info.children counts p if it is already
/// one of cand's children); `capacity` as rule_context::sender_capacity (0: bw / n).
rate estimate_rate(rate bw, const wire::tree_info& cand_info, bool p_is_child_of_cand,
                   rate capacity = 0);

/// Whether cand is remote, our parent local, and cand our parent's parent: cand's
/// stream to us would cross the wide-area link that already carries our parent's copy
/// of the same data.
bool shares_parents_link(const tree_state& self, proc_id cand, duration rtt,
                         const rule_context& ctx);

/// `rtt` is RTT(p,cand); the current parent's RTT is in `self`.
verdict bandwidth_rule(const tree_state& self, proc_id p, proc_id cand, rate bw, duration rtt,
                       const wire::tree_info& cand_info, const rule_context& ctx = {});

} // namespace banyan

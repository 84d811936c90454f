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
/// Loops are prevented explicitly: the distance condition that protects latency
/// trees does not exist here.

#include "banyan/core/latency_rule.hpp"

namespace banyan {

/// The rate p would receive from cand (cand_info.children counts p if it is already
/// one of cand's children); `capacity` as rule_context::sender_capacity (0: bw / n).
rate estimate_rate(rate bw, const wire::tree_info& cand_info, bool p_is_child_of_cand,
                   rate capacity = 0);

/// `rtt` is RTT(p,cand); the current parent's RTT is in `self`.
verdict bandwidth_rule(const tree_state& self, proc_id p, proc_id cand, rate bw, duration rtt,
                       const wire::tree_info& cand_info, const rule_context& ctx = {});

} // namespace banyan

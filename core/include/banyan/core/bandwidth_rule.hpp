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
/// Loops are prevented explicitly: the distance condition that protects latency
/// trees does not exist here.

#include "banyan/core/latency_rule.hpp"

namespace banyan {

/// The rate p would receive from cand (cand_info.children counts p if it is already
/// one of cand's children).
rate estimate_rate(rate bw, const wire::tree_info& cand_info, bool p_is_child_of_cand);

/// `rtt` is RTT(p,cand); the current parent's RTT is in `self`.
verdict bandwidth_rule(const tree_state& self, proc_id p, proc_id cand, rate bw, duration rtt,
                       const wire::tree_info& cand_info, const rule_context& ctx = {});

} // namespace banyan

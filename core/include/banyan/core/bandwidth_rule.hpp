#pragma once
/// The bandwidth-aware parent rule.
///
/// Paper (IV-C): the rate p would receive from cand is
///   est(p,cand) = min(est(cand), bw(p,cand) / n)
/// with n the number of children cand would have with p among them; p adopts cand
/// when est(p,cand) > est(p,parent). banyan adds a relative hysteresis `bw_margin`
/// (adopt when better by more than the margin: measurements are noisy) and, in the
/// banyan variant, a locality tie-break: a processor whose parent is remote moves
/// to a local candidate within the rules' margin of its estimate (rule_context::tie_margin).
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
/// A LAN already fed (banyan variant): a processor whose parent is in its LAN gets the
/// data across a wide-area link once, for the whole LAN. Adopting a remote candidate
/// would bring a second copy of every segment into the LAN across a wide-area link, the
/// same one when the candidate is the parent's parent (or anyone on the far side of a
/// two-cluster grid), so such a candidate is judged at half the measured path rate
/// (second_copy_into_lan). On tiny-2c8 after the leave, 4 (under 6, in its LAN) probed
/// 6's parent 2 with the link idle, measured its full 100 Mbit against 6's estimate
/// taken under load, and moved: 2 then fed 4 and 6 across the one 100 Mbit link for the
/// rest of the run, at half the bandwidth. Halving only the parent's parent is not
/// enough: after a mass rejoin processor 7 moved from 4 (its LAN) to 1 (remote, not its
/// parent's parent) the same way. Halving every remote candidate brings the demo grid
/// back within 1 s after both events on 5 seeds of 5, paper-3c128's leave on 5 of 5,
/// with the 64 MiB headline unchanged (docs/decisions.md). A link twice as wide still
/// wins.
///
/// Loops are prevented explicitly: the distance condition that protects latency
/// trees does not exist here.

#include "banyan/core/latency_rule.hpp"

namespace banyan {

/// The rate p would receive from cand (cand_info.children counts p if it is already
/// one of cand's children); `capacity` as rule_context::sender_capacity (0: bw / n).
rate estimate_rate(rate bw, const wire::tree_info& cand_info, bool p_is_child_of_cand,
                   rate capacity = 0);

/// Whether our parent is local and a candidate at `rtt` remote: its stream to us would
/// bring a second copy of the data into a LAN our parent already feeds.
bool second_copy_into_lan(const tree_state& self, duration rtt, const rule_context& ctx);

/// `rtt` is RTT(p,cand); the current parent's RTT is in `self`.
verdict bandwidth_rule(const tree_state& self, proc_id p, proc_id cand, rate bw, duration rtt,
                       const wire::tree_info& cand_info, const rule_context& ctx = {});

} // namespace banyan

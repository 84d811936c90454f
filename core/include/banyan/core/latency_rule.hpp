#pragma once
/// The latency-aware parent rule.
///
/// Paper (IV-B): p adopts cand when cand is closer than the current parent AND
/// nearer the root:
///   (I)  RTT(p,cand) < RTT(p,parent)     (II) dist(cand,root) < dist(p,root)
///
/// banyan, for a move between two LAN parents (both local, see rule_context): adopt
/// when the message would arrive sooner through cand, counting forwarding overhead o
/// per child (the paper's planned improvement):
///   dist(cand) + RTT(p,cand) + o (children(cand) + 1) + margin < dist(p) + o children(parent)
/// (the margin damps moves that gain little). In a LAN all RTTs are
/// alike, so (I) would freeze the first, random attachments; this instead builds
/// shallow trees whose fan-out balances latency against overhead.
/// Otherwise banyan keeps (I) and replaces (II) by
///   (II-local)  cand is local (in p's LAN, see rule_context) and dist(cand) <= dist(p)
///   or (II-escape)  dist(cand) + RTT(p,cand) <= dist(p) + (RTT(p,parent) - RTT(p,cand)) / 2
/// Why: under the paper's (II) a processor whose parent is across the WAN but shallow
/// (a child of the root, say) never finds a LAN candidate nearer the root, so many
/// such "gateways" stay and a tree crosses each WAN link many times. (II-escape)
/// lets it trade a little distance for a much shorter hop; limiting (II) to local
/// candidates stops chains of WAN hops that are slower than the direct one (A->B->C
/// when A->C is shorter). (II-local) takes a LAN peer exactly as far from the root
/// too: two entrants of one LAN at the same distance (fed by one parent at one RTT)
/// would otherwise both stay, and the tree cross the wide area twice into that LAN.
/// Every switch still needs (I), a strictly shorter RTT to
/// the parent, so each processor changes parents finitely often.
///
/// Without a parent, any connected candidate will do. A candidate that is p itself
/// or one of p's descendants (p on cand's path to the root) is never adopted.

#include "banyan/core/messages.hpp"
#include "banyan/core/rule_context.hpp"
#include "banyan/core/tree_state.hpp"

namespace banyan {

enum class verdict {
  keep,    ///< cand is no better than the current parent
  adopt,   ///< switch to cand
  refresh, ///< cand is the current parent: take its fresh figures
};

/// Decides about `cand` for the latency tree `self` describes. `rtt` was measured
/// to cand; `cand_info` is cand's own place in the tree.
verdict latency_rule(const tree_state& self, proc_id p, proc_id cand, duration rtt,
                     const wire::tree_info& cand_info, const rule_context& ctx = {});

/// True when cand may never be p's parent: p itself, unconnected, or p's descendant.
bool forbidden_parent(proc_id p, proc_id cand, const wire::tree_info& cand_info);

} // namespace banyan

#pragma once
/// Entry hints: the processors that bring one tree's data into one LAN find each other.
///
/// A processor whose parent in a bandwidth tree is remote is that tree's *entry* into
/// its LAN: the data crosses a wide-area link to reach it. One entry per LAN and tree is
/// what a good tree has; two mean every segment crosses the link into the LAN twice, and
/// max-min sharing gives the broadcast half of it. The bandwidth rule merges two entries
/// when one probes the other (a processor with a remote parent moves to a local
/// candidate within `bw_margin`, bandwidth_rule.hpp), but once measuring has ended
/// nothing makes them probe each other: after a leave or a mass join, trees kept two or
/// three entries into one cluster for seconds (docs/benchmarks.md).
///
/// So an entry tells the peers it measured in its LAN, in one batched `entry_notice`
/// (the paper's Section VI "hints": tell processors whom to probe):
///
///     entry S (parent remote)          LAN peer R
///       | entry_notice(trees, S's place) --> |  R: respond_to_entry per tree
///       |                                    |   - R fed through S: ignore
///       |                                    |   - R an entry too, its est the lower
///       | <------------------ probe -------- |     (a tie: the higher id): R probes S
///       | <--- entry_notice(answer, R's place)  - otherwise (R fed in the LAN, S fed
///       |  S: probe_answerer per tree             through R, or R the better entry):
///       | probe -------------------------->  |     R answers
///
/// and the ordinary probe and bandwidth rule do the merge; so only one side of a pair
/// moves, the other stays. A move that would close a cycle is refused by the
/// candidate's path check as for any probe. Answers are never answered.

#include "banyan/core/messages.hpp"
#include "banyan/core/rule_context.hpp"
#include "banyan/core/tree_state.hpp"

namespace banyan {

/// Whether t is a bandwidth tree in which this processor brings the data into its LAN:
/// it has a parent, and the parent is not local.
bool is_entry(const tree_state& t, const rule_context& ctx);

enum class entry_response : std::uint8_t {
  ignore, ///< nothing to gain (fed through the sender, or the sender through us, ...)
  probe,  ///< probe the sender: we are the entry that should move under it
  answer, ///< tell the sender our place: it should probe us
};

/// What processor `self_id`, in tree `self`, does about a LAN peer `sender` that says it
/// enters that tree with `sender_info` (see the diagram above).
entry_response respond_to_entry(const tree_state& self, proc_id self_id, proc_id sender,
                                const wire::tree_info& sender_info, const rule_context& ctx);

/// Whether an entry `self_id` that told its LAN should probe `answerer`, which answered
/// with its place `answerer_info` in tree `self`: it is still an entry, the answerer is
/// not fed through it, and the answerer's rate is one the bandwidth rule could take.
bool probe_answerer(const tree_state& self, proc_id self_id, proc_id answerer,
                    const wire::tree_info& answerer_info, const rule_context& ctx);

} // namespace banyan

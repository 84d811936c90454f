#pragma once
/// What a named rule variant implies for the supervisor, beyond the parent rules
/// themselves (latency_rule.hpp, bandwidth_rule.hpp), decided in one function.
///
///   variant | parent rules         | probe candidates       | extra measurements  | sender capacity | subtree summaries  | fan-out updates
///   --------+----------------------+------------------------+---------------------+-----------------+--------------------+----------------
///   paper   | IV-B, IV-C exactly   | uniform                | from all parented   | none            | none               | none
///   banyan  | plus locality terms  | LAN with `local_bias`  | from the last move  | widest measured | sent up every tree | bandwidth trees

#include "banyan/core/rule_context.hpp"

namespace banyan {

struct variant_decision {
  rule_variant rules = rule_variant::banyan;
  /// Chance that a probe goes to a known LAN peer (0: the paper's uniform choice).
  double local_bias = 0;
  /// The extra measurements count again from every probe that changed a parent, so that
  /// measuring ends after that many probes in a row that changed nothing (false: from the
  /// moment every tree had a parent, as the paper does).
  bool extra_from_last_change = false;
  /// The bandwidth rule takes the widest rate measured to anyone as what a parent can send
  /// in all (shared by its children); false: it splits the path rate, as the paper does.
  bool sender_capacity = false;
  /// Every processor sends its parent in each tree a summary of its subtree when it
  /// changes (`wire::tree_summary`, subtree_summary.hpp), for the root's choice of tree;
  /// false: nothing beyond the paper's messages.
  bool subtree_summaries = false;
  /// A bandwidth-tree parent tells its children (tree_update) when its number of children
  /// changes, since their est is its capacity shared among them; false: they hear it only
  /// with other changes of its place, or when they probe it again.
  bool fan_out_updates = false;
};

/// The decision for variant `v`; `local_bias` is the configured chance, which the paper
/// variant overrides.
variant_decision decide(rule_variant v, double local_bias);

} // namespace banyan

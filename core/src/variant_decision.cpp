#include "banyan/core/variant_decision.hpp"

namespace banyan {

variant_decision decide(rule_variant v, double local_bias) {
  variant_decision d;
  d.rules = v;
  switch (v) {
    case rule_variant::paper:
      d.local_bias = 0;
      d.extra_from_last_change = false;
      d.sender_capacity = false;
      d.subtree_summaries = false;
      d.fan_out_updates = false;
      break;
    case rule_variant::banyan:
      d.local_bias = local_bias;
      d.extra_from_last_change = true;
      d.sender_capacity = true;
      d.subtree_summaries = true;
      d.fan_out_updates = true;
      break;
  }
  return d;
}

} // namespace banyan

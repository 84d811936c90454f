#include <algorithm>

#include "banyan/core/bandwidth_rule.hpp"
#include "banyan/core/latency_rule.hpp"

namespace banyan {

bool forbidden_parent(proc_id p, proc_id cand, const wire::tree_info& cand_info) {
  if (cand == p || !cand_info.connected)
    return true;
  return std::find(cand_info.path.begin(), cand_info.path.end(), p) != cand_info.path.end();
}

verdict latency_rule(const tree_state& self, proc_id p, proc_id cand, duration rtt,
                     const wire::tree_info& cand_info, const rule_context& ctx) {
  if (self.is_root() || forbidden_parent(p, cand, cand_info))
    return verdict::keep;
  if (self.parent() == cand)
    return verdict::refresh;
  if (self.parent() == no_proc)
    return verdict::adopt;
  if (ctx.variant == rule_variant::banyan && ctx.local(rtt) && ctx.local(self.rtt_parent())) {
    // A move inside the LAN: take the parent under which the message would arrive
    // soonest, counting the overhead of the children each parent serves (we would be
    // the candidate's last child; we are one of our parent's). Better by more than
    // `lan_margin`, so that small differences do not keep processors moving.
    auto via_cand = cand_info.dist + rtt + ctx.per_child * (cand_info.children + 1);
    auto via_parent = self.dist() + ctx.per_child * self.parent_info().children;
    return via_cand + ctx.lan_margin < via_parent ? verdict::adopt : verdict::keep;
  }
  if (!(rtt < self.rtt_parent())) // (I)
    return verdict::keep;
  if (ctx.variant == rule_variant::paper)
    return cand_info.dist < self.dist() ? verdict::adopt : verdict::keep; // (II)
  // (II-local), ties included: a LAN peer as far from the root as we are is an entry
  // into our LAN over a path no longer than ours (two entrants fed from the same
  // parent at the same RTT, say). Relaying through it costs one LAN hop, which
  // (II-local) accepts anyway, and saves a wide-area crossing; with `<`, neither of two
  // such entrants ever moves. Assumes what `local` assumes (a LAN's RTTs are alike and
  // far below the wide area's); once one of the two has moved their dists differ, so
  // they cannot move under each other in turn.
  if (ctx.local(rtt) && cand_info.dist <= self.dist())
    return verdict::adopt;
  auto saved = self.rtt_parent() - rtt;
  if (cand_info.dist + rtt <= self.dist() + saved / 2) // (II-escape)
    return verdict::adopt;
  return verdict::keep;
}

rate estimate_rate(rate bw, const wire::tree_info& cand_info, bool p_is_child_of_cand,
                   rate capacity) {
  auto n = std::max(cand_info.children + (p_is_child_of_cand ? 0u : 1u), 1u);
  auto sendable = capacity > 0 ? std::max(bw, capacity) : bw;
  return std::min({cand_info.est, bw, sendable / n});
}

bool second_copy_into_lan(const tree_state& self, duration rtt, const rule_context& ctx) {
  return self.parent() != no_proc && ctx.local(self.rtt_parent()) && !ctx.local(rtt);
}

verdict bandwidth_rule(const tree_state& self, proc_id p, proc_id cand, rate bw, duration rtt,
                       const wire::tree_info& cand_info, const rule_context& ctx) {
  if (self.is_root() || forbidden_parent(p, cand, cand_info))
    return verdict::keep;
  if (self.parent() == cand)
    return verdict::refresh;
  if (self.parent() == no_proc)
    return verdict::adopt;
  auto candidate = estimate_rate(
    bw, cand_info, false, ctx.variant == rule_variant::banyan ? ctx.sender_capacity : 0);
  auto current = self.est();
  if (ctx.variant == rule_variant::paper)
    return candidate > current * (1.0 + ctx.bw_margin) ? verdict::adopt : verdict::keep;
  if (second_copy_into_lan(self, rtt, ctx))
    candidate = std::min(candidate, bw / 2);
  if (candidate > current * (1.0 + ctx.bw_margin))
    return verdict::adopt;
  if (ctx.local(rtt) && !ctx.local(self.rtt_parent()) && rtt < self.rtt_parent()
      && candidate >= current * (1.0 - ctx.tie_margin.value_or(ctx.bw_margin)))
    return verdict::adopt;
  return verdict::keep;
}

} // namespace banyan

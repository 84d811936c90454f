#pragma once
/// What the parent rules may know beyond one candidate's figures, and which
/// variant of the rules to apply.

#include <optional>

#include "banyan/core/types.hpp"

namespace banyan {

enum class rule_variant : std::uint8_t {
  paper,  ///< the paper's rules exactly (IV-B, IV-C)
  banyan, ///< the paper's rules plus locality (see latency_rule.hpp, bandwidth_rule.hpp)
};

struct rule_context {
  rule_variant variant = rule_variant::banyan;
  /// The smallest RTT this processor has measured to anyone: its LAN's RTT, once it
  /// has met a neighbour. duration::max() when nothing was measured yet.
  duration min_rtt = duration::max();
  /// A peer is "local" when its RTT is at most this multiple of min_rtt.
  double local_factor = 2.0;
  /// Bandwidth hysteresis (relative): an estimate must improve by this much.
  double bw_margin = 0.05;
  /// The loss of estimate the bandwidth rule's locality tie-break accepts for a move from
  /// a remote parent to a local candidate (unset: bw_margin). A hysteresis that widens
  /// bw_margin (background probes) keeps this at the rules' margin: a tie-break that
  /// accepts a loss as large as the gain a move needs lets two moves undo each other,
  /// down by up to the margin to a local parent and back up by more than it.
  std::optional<double> tie_margin = std::nullopt;
  /// What a parent can send in all, shared by its children (bandwidth rule): the widest
  /// rate this processor has measured to anyone, taken as every processor's NIC (the
  /// grids here have one NIC speed). 0: unknown, the paper's rule (split the path rate).
  rate sender_capacity = 0;
  /// Forwarding overhead per child, for comparing LAN parents (latency rule).
  duration per_child{0};
  /// How much sooner a LAN parent must deliver before the latency rule switches.
  duration lan_margin{0};

  bool local(duration rtt) const noexcept {
    return min_rtt != duration::max()
           && static_cast<double>(rtt.count()) <= local_factor * static_cast<double>(min_rtt.count());
  }
};

} // namespace banyan

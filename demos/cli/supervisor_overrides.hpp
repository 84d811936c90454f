#pragma once
/// Supervisor rules a `bench` command can switch on or off for one run
/// (--hold-reattaching, --entry-hints), to compare a rule with and without in one build.
/// Empty: the rule's default (supervisor_config).

#include <optional>

#include "banyan/core/supervisor.hpp"

namespace banyan::cli {

struct supervisor_overrides {
  std::optional<bool> hold_reattaching; ///< supervisor_config::hold_while_reattaching
  std::optional<bool> entry_hints;      ///< supervisor_config::entry_hints

  void apply_to(supervisor_config& cfg) const {
    if (hold_reattaching)
      cfg.hold_while_reattaching = *hold_reattaching;
    if (entry_hints)
      cfg.entry_hints = *entry_hints;
  }
};

} // namespace banyan::cli

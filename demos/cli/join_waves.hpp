#pragma once
/// The order in which `banyan cluster` starts its joiners: in waves, each through
/// several members that were ready before it (docs/cluster.md, "Joins in waves").

#include <cstddef>
#include <vector>

namespace banyan::cli {

struct join_wave_limits {
  /// Joiners per member ready before the wave: a contact handles each join on its own
  /// loop (a share handed over, a member_joined to every member).
  std::size_t per_contact = 4;
  /// Joiners in one wave at most: every joiner asks the owner of the vnodes not yet
  /// handed out (process 0) for its own, whoever its contact.
  std::size_t per_owner = 16;
  /// Contacts given to each joiner (it tries the next when one does not answer).
  std::size_t contacts_each = 3;
};

/// One joiner: its process index and its contacts (process indices, in the order tried).
struct planned_join {
  std::size_t proc = 0;
  std::vector<std::size_t> contacts;
};

/// Processes 1 .. procs-1 in waves; process 0 founds. Wave w may use as contacts every
/// process of the waves before it (and process 0); joiner j of a wave gets the ready
/// processes j, j+1, ... (mod their number), so a wave spreads over all of them.
std::vector<std::vector<planned_join>> plan_join_waves(std::size_t procs,
                                                       const join_wave_limits& lim = {});

} // namespace banyan::cli

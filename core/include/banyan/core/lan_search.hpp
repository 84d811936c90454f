#pragma once
/// How long a round of measuring searches for the processor's LAN when only a few trees
/// exist (trees on demand, supervisor_config::lan_search).
///
/// With every member rooting trees, almost every probe moves a parent in some tree, so
/// the extra probes (measurement_schedule) keep counting again until the processor has
/// met the peers near it. With a few trees, few probes move a parent and a round ends
/// after a few dozen probes, before most processors met a LAN peer: they attach across
/// the wide area. This rule makes the round search for the LAN itself.
///
/// What it assumes of the network: the members sit in LANs (clusters, or hosts of a
/// site), a LAN being the peers within `local_factor` of the nearest RTT
/// (rule_context::local); probes draw members uniformly; and a nearer LAN not met yet
/// would be no smaller than the local group met so far. A processor that has measured
/// `local` peers as local puts that size at L = `local` + 1 (itself included). A group
/// of L among the N - 1 others is met by a uniform draw with chance L / (N - 1), so
/// after (N - 1) / L distinct members measured such a group is left unmet with chance
/// under 1/e. Until then the round's extra probes do not count down. Nothing is tuned
/// to a grid: a processor in a LAN of 60 among 200 stops after a few dozen distinct
/// peers, one in a pair among 300 measures half of them (about what every member
/// rooting trees makes it do), one that has seen no second class of RTTs (nothing
/// local yet) keeps measuring, at most every member once.

#include <cstddef>

namespace banyan {

/// Whether a processor that knows `members` members (itself included) and has measured
/// `measured` distinct ones, `local` of them local, has searched long enough for its LAN.
inline bool lan_search_done(std::size_t members, std::size_t measured,
                            std::size_t local) noexcept {
  if (members < 2)
    return true;
  const auto others = members - 1;
  if (measured >= others)
    return true;
  // measured >= others / (local + 1), in integers: measured * (local + 1) >= others.
  return measured * (local + 1) >= others;
}

} // namespace banyan

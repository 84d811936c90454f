#pragma once
/// How many times a tree enters each group of a topology.
///
/// A group (a cluster, a machine, a site: any node of the topology's hierarchy) is
/// "entered" by every tree edge whose child lies inside it and whose parent lies outside.
/// A spanning tree enters every group that holds live processors but not the root at
/// least once; each further entry sends the stream over the group's wide-area link or
/// uplink once more (a 64 MiB broadcast then shares that link between the copies). A
/// tree is "entry-minimal" when every such group is entered exactly once and the group
/// holding the root never.

#include <cstdint>
#include <vector>

#include "banyan/core/topology.hpp"
#include "banyan/core/tree.hpp"

namespace banyan {

struct group_entries {
  /// Entries per group, indexed like `topology::groups`.
  std::vector<std::uint32_t> per_group;
  /// Entries beyond the minimum, summed over the groups (0: entry-minimal).
  std::uint32_t excess = 0;
  /// Groups entered more than their minimum.
  std::uint32_t groups_over = 0;
  bool minimal() const noexcept { return excess == 0; }
};

/// Counts the entries of `t` into every group of `topo`, over the processors with
/// `live[p]` (a processor outside `live`, or without a parent, enters nothing). A group
/// with no live processor has minimum 0, as has the group holding the root.
group_entries count_group_entries(const tree& t, const topology& topo,
                                  const std::vector<bool>& live);

} // namespace banyan

#pragma once
/// The point-to-point part of a broadcast step (III) as a tree of direct streams rather
/// than one stream per owner.
///
/// While trees heal (after processors leave or join) the vnodes a processor must reach
/// outside its tree children can be spread over dozens of owners. One 4 MiB stream per
/// owner from one processor saturates its NIC, and its WAN links, for seconds. Instead
/// the owners are grouped and each group goes to one of them, its head, with the group's
/// vnodes in the header; the head delivers its own, passes what its tree children cover
/// down the tree, and groups the rest again by what it knows:
///
///              sender (in cluster A)
///            /         |          +
///     A-head 1     A-head 2     B-head: the nearest remote owner, with B's, C's
///     (half of     (the other   |       and D's vnodes
///      A's)         half)       +-- B-heads (B's), C-head (C's and D's) -- D-head
///
/// - local owners (the sender's LAN, as it measured) split into `fanout` groups of
///   consecutive owners nearest first, the nearest of each group its head;
/// - remote owners this processor measured go in one group to the nearest of them: it
///   is in the next cluster, where it splits its LAN's share and passes the rest on, so
///   a cluster is entered once, from the cluster nearest to it (increasing RTT);
/// - owners not measured whose latency tree reaches this processor along a path at
///   least as long as the shortest wide-area RTT it measured (`tree_view::
///   tree_distance`, `smallest_remote_rtt`) are beyond its LAN too: they join that
///   group, after the measured ones, nearest (shortest path) first. After churn the new
///   owners of moved vnodes are mostly unmeasured: on paper-3c128 (seed 3) three
///   processors of B sent seven 4 MiB streams across the one link to C, one per pair of
///   unmeasured owners there, for a single broadcast;
/// - owners never measured (all of them over static trees) may be anywhere, next door
///   too: they split into `fanout` groups of consecutive ids (where ids follow the
///   clusters, groups stay together), never joined to the remote group (that carried
///   LAN vnodes across the WAN and back again on paper-3c128).
///
/// - a peer standing in for owners that are unknown or unreachable gets their part
///   alone (it forwards by its own, better, knowledge).
///
/// `fanout` 0 keeps one group per owner (the plain point-to-point step).

#include <cstddef>
#include <map>
#include <vector>

#include "banyan/core/tree_view.hpp"

namespace banyan {

struct owner_group {
  proc_id head = no_proc;
  vnode_set vnodes; ///< the head's own part and the parts it passes on
};

/// Groups `parts` (owner -> vnodes, as `route_to_owners` returns them; no entry for
/// `view.self()`) for direct streams, by what `view` knows of distances. The groups'
/// vnode sets partition the union of `parts`; every head is an owner in `parts`.
std::vector<owner_group> group_owners(const tree_view& view,
                                      const std::map<proc_id, vnode_set>& parts,
                                      std::size_t fanout);

} // namespace banyan

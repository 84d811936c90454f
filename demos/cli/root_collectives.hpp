#pragma once
// `banyan sim trees --collectives`: once the trees have formed, a broadcast and a reduction
// from each root, one after the other, each checked to have completed exactly once.

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"

namespace banyan::cli {

/// What the collectives from the roots gave.
struct root_collectives {
  std::size_t broadcasts = 0;       ///< started
  std::size_t broadcasts_once = 0;  ///< every vnode delivered exactly once, in time
  std::size_t reductions = 0;       ///< started
  std::size_t reductions_once = 0;  ///< one result, at the root, of every vnode counted
                                    ///< once, with the right value, in time
  double broadcast_ms_max = 0;      ///< the slowest broadcast: start to last delivery
  double reduction_ms_max = 0;      ///< the slowest reduction: start to its result
  bool ok() const noexcept {
    return broadcasts_once == broadcasts && reductions_once == reductions;
  }
  nlohmann::json to_json() const;
};

/// From each of `roots` in turn: a broadcast of `bytes` bytes, then a reduction (int32 sum
/// of 4 elements per vnode) into the root's first vnode (`vnodes_per_proc` vnodes per
/// processor, as the cluster was started). Each is given `limit` of emulated time, or
/// less once it has completed and the cluster is quiet; all are judged once the last
/// has run, from what the processors delivered (a cluster still measuring is never
/// quiet, so a limit reached is no failure by itself). Virtual time only.
root_collectives run_root_collectives(actors::emulated_cluster& c, const std::vector<proc_id>& roots,
                                      std::size_t bytes, std::uint32_t vnodes_per_proc,
                                      duration limit);

} // namespace banyan::cli

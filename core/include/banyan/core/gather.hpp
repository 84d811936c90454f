#pragma once
/// Gather: every vnode's block (the same size for all) to the owner of a root vnode, up
/// the tree rooted there, the blocks of a subtree side by side as they rise
/// (core/vnode_blocks.hpp). It is the reduction engine (core/reduce.hpp) in block mode
/// (`reduce_config::blocks`), registered under its own kind: partials name the vnodes
/// they carry and meet only when disjoint, histories (one number per vnode) move with
/// the vnodes in handoffs, and a vnode contributes to gather k only where it is settled
/// and has not yet contributed to k. So every vnode's block arrives exactly once while
/// vnodes migrate and processors join and leave, as for a reduction.
///
///            root owner: [b0 b1 b2 b3 b4 b5 b6 b7]
///             |                     |
///   A: [b1 b2 b5]           B: [b3 b4 b6 b7]        each partial: the blocks of the
///     |       |                   |                 vnodes that have reached it, in
///   C: [b2] D: [b5]           E: [b6 b7]            vnode order
///
/// Gathers are numbered 1, 2, 3, ... like reductions, apart from them (their own
/// engine, their own histories). The tree: always the latency tree (`gather_config`);
/// timeouts count the whole result's transfer (block x vnodes, `gather_spec`).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>

#include "banyan/core/reduce_collective.hpp"
#include "banyan/core/vnode_blocks.hpp"

namespace banyan {

/// The operator gather frames carry (not applied: blocks are merged, not combined).
inline constexpr reduce_op gather_fn{reduce_kind::user, element_type::bytes, 0};

/// The reduction configuration of a gather engine of kind `kind` (`gather`, or the up
/// phase of `allgather`), from a reduction's.
inline reduce_config gather_config(reduce_config base,
                                   collective_kind kind = collective_kind::gather) {
  base.kind = kind;
  base.blocks = true;
  // Always the latency tree: partials are stored and forwarded whole, growing on the way
  // up, and the bandwidth trees are deep (docs/decisions.md).
  base.long_threshold = std::numeric_limits<std::size_t>::max();
  return base;
}

/// Gather `op` to `root` of `block` bytes per vnode, over a namespace of `vnodes`
/// vnodes (what sizes its timeouts: the whole result).
inline reduce_spec gather_spec(std::uint64_t op, vnode_id root, std::size_t block,
                               std::size_t vnodes) {
  reduce_spec s{op, root, gather_fn, block};
  s.whole_bytes = block * vnodes;
  return s;
}

/// A gather engine: the reduction engine in block mode under `kind`, configured
/// otherwise like `cfg`. `settled` as for `reduce_engine`: a founder's vnodes, none for
/// a joiner. `view` and `ops` must outlive it (`ops` is not consulted).
inline std::unique_ptr<reduce_collective>
make_gather_collective(tree_view& view, const reduce_op_table& ops, reduce_config cfg,
                       vnode_set settled, collective_kind kind = collective_kind::gather) {
  return std::make_unique<reduce_collective>(view, ops, gather_config(cfg, kind),
                                             std::move(settled));
}

/// A gather's result as one block per vnode.
inline std::map<vnode_id, shared_bytes> gathered_blocks(const reduce_result& r) {
  return split_blocks(r.vnodes, r.value);
}

} // namespace banyan

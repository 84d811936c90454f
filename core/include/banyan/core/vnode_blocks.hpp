#pragma once
/// Per-vnode blocks: the data of gather, scatter and allgather (core/gather.hpp,
/// core/scatter.hpp). A set of vnodes V and its blocks travel as one byte string, every
/// vnode's block the same size, laid out in increasing vnode order:
///
///   V = {2,3,7}, block 4:   [ block of 2 | block of 3 | block of 7 ]   12 bytes
///
/// Splitting (down a tree: scatter) takes the blocks of a part of V; merging (up a tree:
/// gather) interleaves the blocks of two disjoint sets.

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/shared_bytes.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

/// The block size of `bytes` laid out for `vs`: bytes.size() / |vs|, or 0 when that is
/// not whole (or `vs` is empty).
std::size_t block_size_of(const vnode_set& vs, std::size_t bytes);

/// The blocks of `part` (a subset of `vs`) out of `bytes`, laid out for `vs` with blocks
/// of `block` bytes. A part that is one run of `vs` is a slice (no copy).
shared_bytes slice_blocks(const shared_bytes& bytes, const vnode_set& vs, const vnode_set& part,
                          std::size_t block);

/// The blocks of `a` and of `b` (disjoint sets), laid out for a | b.
std::vector<std::uint8_t> merge_blocks(const vnode_set& a, const std::uint8_t* da,
                                       const vnode_set& b, const std::uint8_t* db,
                                       std::size_t block);

/// `bytes`, laid out for `vs`, as one block per vnode.
std::map<vnode_id, shared_bytes> split_blocks(const vnode_set& vs, const shared_bytes& bytes);

/// One block per vnode laid out for their set (the keys), or `invalid_argument` when the
/// blocks differ in size or are empty; `what` names the operation in the message.
expected<shared_bytes> join_blocks(const std::map<vnode_id, shared_bytes>& blocks,
                                   const char* what);

} // namespace banyan

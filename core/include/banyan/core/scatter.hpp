#pragma once
/// Scatter: one block per vnode, from the owner of a root vnode to every vnode, down the
/// trees rooted at that owner; every child gets only the blocks of the vnodes it is to
/// reach (its subtree set, less what earlier children got). It is the broadcast engine
/// (core/broadcast.hpp) in block mode (`broadcast_config::blocks`), registered under its
/// own kind: a frame carries the blocks of the vnodes in its header, and the header
/// splitting that makes a broadcast exactly-once (each (operation, vnode) the
/// responsibility of one stream or one frame in flight, bounces routed again, vnodes
/// that moved sent on) splits the blocks with it.
///
///   root owner R: [b0 .. b7]  delivers b0
///      |-- A: [b1 b2 b5]      delivers b1, passes [b2] to C, [b5] to D
///      `-- B: [b3 b4 b6 b7]   delivers b3 b4, passes [b6 b7] to E
///
/// A frame is never cut into segments (what it carries shrinks at every hop), so it
/// always takes the latency tree (`broadcast_config::blocks`): down a deep bandwidth
/// tree every hop would store and forward its whole share. Bounded by the transport's
/// largest frame (tcp_config::max_frame) at the root's first hops.

#include <map>
#include <memory>

#include "banyan/core/broadcast_collective.hpp"
#include "banyan/core/vnode_blocks.hpp"

namespace banyan {

/// The broadcast configuration of a scatter engine of kind `kind`, from a broadcast's.
inline broadcast_config scatter_config(broadcast_config base,
                                       collective_kind kind = collective_kind::scatter) {
  base.kind = kind;
  base.message_kind = collective_kind::none;
  base.blocks = true;
  base.offer_handoff = false;
  return base;
}

/// A scatter engine (`view` must outlive it).
inline std::unique_ptr<broadcast_collective>
make_scatter_collective(tree_view& view, broadcast_config cfg,
                        collective_kind kind = collective_kind::scatter) {
  return std::make_unique<broadcast_collective>(view, scatter_config(cfg, kind));
}

/// The bytes a scatter from `root` of `blocks` starts with at this processor, or
/// `invalid_argument`: the root vnode is not owned here (or does not exist), a vnode of
/// the namespace has no block or a block names a vnode outside it, the blocks differ in
/// size or are empty.
expected<shared_bytes> scatter_payload(const tree_view& view, vnode_id root,
                                       const std::map<vnode_id, shared_bytes>& blocks);

} // namespace banyan

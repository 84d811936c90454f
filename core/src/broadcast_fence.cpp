// The broadcast engine's fence (docs/collectives.md, "Fence"): deliveries held while the
// runtime found its process stalled (`fence`, a time) or while the view says they may
// not be made (tree_view::may_deliver: the delivery lease, docs/architecture.md). Held
// deliveries are made once both allow it, to the vnodes still owned here; the vnodes
// no longer owned are handed on like any that moved (offered to their new owner, which
// has them and acknowledges a repeat), at once, lease or not: handing on is no delivery.
#include "banyan/core/broadcast.hpp"

namespace banyan {

void broadcast_engine::fence(timestamp now, timestamp until, broadcast_outbox& out) {
  fence_until_ = std::max(fence_until_, until);
  arm(now, fence_until_, out);
}

void broadcast_engine::hold(timestamp now, const whole& msg, const shared_bytes& bytes,
                            const vnode_set& vnodes, std::uint32_t hops,
                            broadcast_outbox& out) {
  stats_.fenced += vnodes.size();
  if (now >= fence_until_)
    stats_.unleased += vnodes.size();
  fenced_.push_back({msg, bytes, vnodes, hops});
  if (now < fence_until_)
    arm(now, fence_until_, out);
  // Held for want of a lease: the supervisor event that renews it, or that takes the
  // vnodes away, reaches us through on_view_change.
}

void broadcast_engine::release_held(timestamp now, broadcast_outbox& out) {
  if (fenced_.empty() || now < fence_until_)
    return;
  auto waiting = std::move(fenced_);
  fenced_.clear();
  const bool may = view_.may_deliver(now);
  const auto own = view_.participating() ? view_.own_vnodes() : vnode_set{};
  for (auto& f : waiting) {
    if (may) {
      settle(now, f.msg, f.bytes, f.vnodes, f.hops, out);
      continue;
    }
    const auto ours = f.vnodes & own;
    const auto gone = f.vnodes - ours;
    if (!gone.empty())
      settle(now, f.msg, f.bytes, gone, f.hops, out); // handed on (none is ours)
    if (!ours.empty()) {
      f.vnodes = ours;
      fenced_.push_back(std::move(f));
    }
  }
}

} // namespace banyan

#pragma once
/// The broadcast engine (core/broadcast.hpp) as a hosted `collective_engine`: it owns the
/// engine and its outbox, takes frames of the engine's broadcast and message kinds, and
/// starts broadcasts and messages into that outbox.

#include <memory>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/hosted_engine.hpp"

namespace banyan {

class broadcast_collective final : public hosted_engine<broadcast_engine, broadcast_outbox> {
public:
  /// `view` must outlive it.
  broadcast_collective(tree_view& view, broadcast_config cfg) : hosted_engine(view, cfg) {}

  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message) {
    return eng_.broadcast(now, std::move(message), out_);
  }
  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message,
                                          const tree_choice& choice) {
    return eng_.broadcast(now, std::move(message), choice, out_);
  }
  expected<wire::collective_id> send(timestamp now, vnode_set to, shared_bytes message) {
    return eng_.send(now, std::move(to), std::move(message), out_);
  }

  std::vector<collective_kind> kinds() const override {
    const auto& c = eng_.config();
    if (c.message_kind == collective_kind::none)
      return {c.kind};
    return {c.kind, c.message_kind};
  }
  collective_kind kind() const override { return eng_.config().kind; }
  void on_view_change(timestamp now, const view_change&) override {
    eng_.on_view_change(now, out_);
  }
};

} // namespace banyan

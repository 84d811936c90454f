#pragma once
/// The broadcast engine (core/broadcast.hpp) as a hosted `collective_engine`: it owns the
/// engine and its outbox, takes frames of the engine's broadcast and message kinds, and
/// starts broadcasts and messages into that outbox.

#include <memory>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/collective_engine.hpp"

namespace banyan {

class broadcast_collective final : public collective_engine {
public:
  /// `view` must outlive it.
  broadcast_collective(tree_view& view, broadcast_config cfg) : eng_(view, cfg) {}

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

  broadcast_engine& engine() noexcept { return eng_; }
  const broadcast_engine& engine() const noexcept { return eng_; }
  broadcast_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override {
    const auto& c = eng_.config();
    if (c.message_kind == collective_kind::none)
      return {c.kind};
    return {c.kind, c.message_kind};
  }
  collective_kind kind() const override { return eng_.config().kind; }
  bool on_message(timestamp now, proc_id from, const wire::message& m) override {
    return eng_.on_message(now, from, m, out_);
  }
  void on_timer(timestamp now, std::uint64_t token) override { eng_.on_timer(now, token, out_); }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m) override {
    eng_.on_undeliverable(now, to, m, out_);
  }
  void on_view_change(timestamp now, const view_change&) override {
    eng_.on_view_change(now, out_);
  }
  bool holding() const override { return eng_.holding(); }
  bool drained(timestamp now, const send_fates& fates) const override {
    return eng_.drained(now, fates);
  }
  std::uint64_t frames_sent() const override { return eng_.frames_sent(); }
  timestamp last_send() const override { return eng_.last_send(); }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  broadcast_engine eng_;
  broadcast_outbox out_;
};

} // namespace banyan

#pragma once
/// MPICH's scatter-allgather broadcast (core/scatter_allgather.hpp) as a hosted
/// `collective_engine`. A static baseline without recovery: a frame it cannot use is
/// counted (`stats().malformed`) and dropped, never handed back; it sets no timers and
/// ignores bounces and view changes; nothing it sent comes back, so it has drained as
/// soon as it expects no more chunks.

#include <functional>
#include <vector>

#include "banyan/core/collective_engine.hpp"
#include "banyan/core/scatter_allgather.hpp"

namespace banyan {

class scatter_allgather_collective final : public collective_engine {
public:
  scatter_allgather_collective(proc_id self, std::size_t procs,
                               std::function<vnode_set()> own_vnodes,
                               scatter_allgather_config cfg = {})
    : eng_(self, procs, std::move(own_vnodes), cfg) {}

  expected<wire::collective_id> broadcast(timestamp now, shared_bytes message) {
    return eng_.broadcast(now, std::move(message), out_);
  }

  scatter_allgather_engine& engine() noexcept { return eng_; }
  broadcast_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override {
    return {collective_kind::scatter_allgather};
  }
  collective_kind kind() const override { return collective_kind::scatter_allgather; }
  bool on_message(timestamp now, proc_id from, const wire::message& m) override {
    eng_.on_message(now, from, m, out_);
    return true; // taken, or counted and dropped: nobody would resend it
  }
  void on_timer(timestamp, std::uint64_t) override {}
  void on_undeliverable(timestamp, proc_id, const wire::message&) override {}
  void on_view_change(timestamp, const view_change&) override {}
  bool holding() const override { return eng_.in_progress() > 0; }
  bool drained(timestamp, const send_fates&) const override { return !holding(); }
  std::uint64_t frames_sent() const override { return 0; }
  timestamp last_send() const override { return timestamp::min() / 2; }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

private:
  scatter_allgather_engine eng_;
  broadcast_outbox out_;
};

} // namespace banyan

#pragma once
/// The part of a `collective_engine` adapter that is the same for every engine built on
/// the `on_*(..., outbox&)` pattern (core/broadcast.hpp, core/reduce.hpp): it owns the
/// engine `Engine` and its outbox `Outbox`, passes each event to the engine with that
/// outbox, and answers the runtime's questions from the engine. An adapter derives from
/// it and adds its kinds, its view-change handling and what its engine starts.

#include <cstdint>
#include <utility>

#include "banyan/core/collective_engine.hpp"

namespace banyan {

template <class Engine, class Outbox>
class hosted_engine : public collective_engine {
public:
  Engine& engine() noexcept { return eng_; }
  const Engine& engine() const noexcept { return eng_; }
  Outbox& out() noexcept { return out_; }

  bool on_message(timestamp now, proc_id from, const wire::message& m) override {
    return eng_.on_message(now, from, m, out_);
  }
  void on_timer(timestamp now, std::uint64_t token) override { eng_.on_timer(now, token, out_); }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m) override {
    eng_.on_undeliverable(now, to, m, out_);
  }
  bool holding() const override { return eng_.holding(); }
  bool drained(timestamp now, const send_fates& fates) const override {
    return eng_.drained(now, fates);
  }
  std::uint64_t frames_sent() const override { return eng_.frames_sent(); }
  timestamp last_send() const override { return eng_.last_send(); }
  engine_outbox& outbox() override { return out_; }
  void clear_outbox() override { out_.clear(); }

protected:
  /// Constructs the engine from `args`.
  template <class... Args>
  explicit hosted_engine(Args&&... args) : eng_(std::forward<Args>(args)...) {}

  Engine eng_;
  Outbox out_;
};

} // namespace banyan

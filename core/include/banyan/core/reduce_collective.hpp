#pragma once
/// The reduction engine (core/reduce.hpp) as a hosted `collective_engine`: it owns the
/// engine and its outbox, takes frames of the engine's kind, and passes vnodes adopted
/// from a crashed processor (`view_change::adopted`) to `reduce_engine::adopt` after
/// the view change.

#include <vector>

#include "banyan/core/collective_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

class reduce_collective final : public collective_engine {
public:
  /// See `reduce_engine`: `view` and `ops` must outlive it.
  reduce_collective(tree_view& view, const reduce_op_table& ops, reduce_config cfg,
                    vnode_set settled)
    : eng_(view, ops, cfg, std::move(settled)), kind_(cfg.kind) {}

  std::optional<error> start(timestamp now, const reduce_spec& spec, contribution_fn values) {
    return eng_.start(now, spec, std::move(values), out_);
  }

  reduce_engine& engine() noexcept { return eng_; }
  const reduce_engine& engine() const noexcept { return eng_; }
  reduce_outbox& out() noexcept { return out_; }

  std::vector<collective_kind> kinds() const override { return {kind_}; }
  collective_kind kind() const override { return kind_; }
  bool on_message(timestamp now, proc_id from, const wire::message& m) override {
    return eng_.on_message(now, from, m, out_);
  }
  void on_timer(timestamp now, std::uint64_t token) override { eng_.on_timer(now, token, out_); }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m) override {
    eng_.on_undeliverable(now, to, m, out_);
  }
  void on_view_change(timestamp now, const view_change& change) override {
    eng_.on_view_change(now, out_);
    if (!change.adopted.empty())
      eng_.adopt(now, change.adopted, out_);
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
  reduce_engine eng_;
  reduce_outbox out_;
  collective_kind kind_;
};

} // namespace banyan

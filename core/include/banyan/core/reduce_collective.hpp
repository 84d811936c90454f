#pragma once
/// The reduction engine (core/reduce.hpp) as a hosted `collective_engine`: it owns the
/// engine and its outbox, takes frames of the engine's kind, and passes vnodes adopted
/// from a crashed processor (`view_change::adopted`) to `reduce_engine::adopt` after
/// the view change.

#include <vector>

#include "banyan/core/hosted_engine.hpp"
#include "banyan/core/reduce.hpp"

namespace banyan {

class reduce_collective final : public hosted_engine<reduce_engine, reduce_outbox> {
public:
  /// See `reduce_engine`: `view` and `ops` must outlive it.
  reduce_collective(tree_view& view, const reduce_op_table& ops, reduce_config cfg,
                    vnode_set settled)
    : hosted_engine(view, ops, cfg, std::move(settled)), kind_(cfg.kind) {}

  std::optional<error> start(timestamp now, const reduce_spec& spec, contribution_fn values) {
    return eng_.start(now, spec, std::move(values), out_);
  }

  std::vector<collective_kind> kinds() const override { return {kind_}; }
  collective_kind kind() const override { return kind_; }
  void on_view_change(timestamp now, const view_change& change) override {
    eng_.on_view_change(now, out_);
    if (!change.adopted.empty())
      eng_.adopt(now, change.adopted, out_);
  }

private:
  collective_kind kind_;
};

} // namespace banyan

#pragma once
// One `collective_engine` (core/collective_engine.hpp) riding along a mini_grid
// processor's supervisor, as `engine_host` carries one in a runtime: frames of the
// engine's kinds go to it, its timers and bounces come back to it, every supervisor
// step is a view change (an adoption carries the adopted vnodes), and the processor
// stays reachable until the engine has drained. What the engine produced beyond frames
// and timers (deliveries, results, problems) is the suite's to check: `record()` reads
// the engine's own outbox before it is cleared.

#include <algorithm>
#include <chrono>
#include <vector>

#include "banyan/core/collective_engine.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/send_fates.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "core/mini_grid.hpp"

namespace banyan::test {

class engine_rider : public mini_grid::rider {
public:
  bool on_message(timestamp now, proc_id from, const wire::message& m, outbox& out) override {
    const auto ks = engine().kinds();
    bool taken = std::find(ks.begin(), ks.end(), wire::kind_of(m)) != ks.end() &&
                 engine().on_message(now, from, m);
    take(out);
    return taken;
  }
  void on_timer(timestamp now, std::uint64_t token, outbox& out) override {
    engine().on_timer(now, token);
    take(out);
  }
  void after_supervisor(timestamp now, outbox& out) override {
    engine().on_view_change(now, {});
    take(out);
  }
  void on_supervisor_events(timestamp now, const std::vector<tree_event>& events,
                            outbox& out) override {
    for (auto& e : events)
      if (e.what == tree_event::kind::adopted) { // as the runtimes do
        engine().on_view_change(now, view_change{e.vnodes});
        take(out);
      }
  }
  void on_undeliverable(timestamp now, proc_id to, const wire::message& m, outbox& out) override {
    engine().on_undeliverable(now, to, m);
    take(out);
  }
  /// A processor that left stays until its engine has drained.
  bool active(timestamp now) const override {
    return !engine().drained(now, send_fates::blind(std::chrono::seconds(2)));
  }

protected:
  explicit engine_rider(const supervisor& s) : sup_(s), view_(s) {}

  virtual collective_engine& engine() = 0;
  virtual const collective_engine& engine() const = 0;
  /// Checks and counts the engine's own results (its outbox beyond frames and timers).
  virtual void record() = 0;

  /// What this processor owns now (nothing unless it is a member or leaving).
  vnode_set own_now() const {
    if (sup_.state() != supervisor::status::member && sup_.state() != supervisor::status::leaving)
      return {};
    return sup_.own_vnodes();
  }
  /// What a founder's engine starts with: its vnodes, if it is a member already.
  static vnode_set founded(const supervisor& s) {
    return s.state() == supervisor::status::member ? s.own_vnodes() : vnode_set{};
  }

  /// Carries out the engine's outbox: frames and timers to the grid, the rest to
  /// `record()`, then clears it.
  void take(outbox& out) {
    auto& o = engine().outbox();
    for (auto& e : o.sends)
      out.sends.push_back(std::move(e));
    for (auto& t : o.timers)
      out.timers.push_back(t);
    record();
    engine().clear_outbox();
  }

  const supervisor& sup_;
  supervisor_view view_;
};

} // namespace banyan::test

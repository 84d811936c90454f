#pragma once
/// The collective engines one processor runs, and the routing of events to them: the
/// part both runtimes (the emulated processor actor and `banyan::node`) share. Frames
/// and bounces go to the engine registered for their kind (`wire::kind_of`), timers to
/// the engine they name, view changes to every engine that follows the processor's view.
/// After each event an engine handled, the host hands that engine to the runtime's
/// `carry_out`, which sends its frames, sets its timers and takes its results.
///
///   frame / bounce --kind_of--> engine_for(kind) --> engine --> carry_out(engine)
///   timer (kind, token) ------> engine_for(kind) --> engine --> carry_out(engine)
///   view change --------------> each engine that follows the view, in registration order
///
/// Adding a collective: its engine (a `collective_engine`), its messages in the schema,
/// and one `add` per runtime; the host needs no change.
///
///   engine_host host{[&](collective_engine& e) { send(e.outbox().sends); ... }};
///   auto& bcast = host.add(std::make_unique<broadcast_collective>(view, cfg));
///   host.on_message(now, from, frame);   // false: hand the frame back to its sender

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "banyan/core/collective_engine.hpp"

namespace banyan {

class engine_host {
public:
  using carry_out_fn = std::function<void(collective_engine&)>;

  explicit engine_host(carry_out_fn carry_out = {}) : carry_out_(std::move(carry_out)) {}
  engine_host(const engine_host&) = delete;
  engine_host& operator=(const engine_host&) = delete;

  /// Who carries out an engine's outbox after each event it handled.
  void set_carry_out(carry_out_fn f) { carry_out_ = std::move(f); }

  /// Registers `e` for its kinds and returns it. An engine already registered for any
  /// of them is replaced, in its place in the order. `follows_view`: it gets view
  /// changes (engines over the supervisor's view); engines over a fixed plan do not.
  template <class E>
  E& add(std::unique_ptr<E> e, bool follows_view = true) {
    E& ref = *e;
    insert(std::unique_ptr<collective_engine>(std::move(e)), follows_view);
    return ref;
  }
  /// Removes the engine registered for `k`, if any.
  void remove(collective_kind k);
  /// Removes every engine.
  void clear() { slots_.clear(); }
  bool empty() const noexcept { return slots_.empty(); }

  /// The engine registered for `k`, or null.
  collective_engine* find(collective_kind k) const;
  /// The same, as its concrete type (null if it is another).
  template <class E>
  E* get(collective_kind k) const {
    return dynamic_cast<E*>(find(k));
  }

  /// A frame from `from`, to the engine of its kind. False when it is nobody's (no engine
  /// for its kind, or not a collective's) or its engine refused it: the runtime then
  /// hands it back to its sender as undeliverable.
  bool on_message(timestamp now, proc_id from, const wire::message& m);
  /// `m`, sent to `to`, came back. False when no engine is registered for its kind.
  bool on_undeliverable(timestamp now, proc_id to, const wire::message& m);
  /// A timer of the engine registered for `engine` fired. False when there is none.
  bool on_timer(timestamp now, collective_kind engine, std::uint64_t token);
  /// Every engine that follows the view, in registration order.
  void on_view_change(timestamp now, const view_change& change = {});

  /// Some engine is still responsible for something.
  bool holding() const;
  /// Every engine has drained under `fates`.
  bool drained(timestamp now, const send_fates& fates) const;
  /// The frames each engine had sent at one moment.
  using send_marks = std::vector<std::pair<const collective_engine*, std::uint64_t>>;
  send_marks frames_sent() const;
  /// Every engine holds nothing and has sent nothing since `marks` were taken, and the
  /// frames it had sent then can no longer come back (the runtime knows; an engine
  /// registered since counts from zero).
  bool drained_since(timestamp now, const send_marks& marks) const;
  /// The latest `last_send` of any engine (timestamp::min() / 2 with none).
  timestamp last_send() const;

  /// Calls `f(engine)` for every engine, in registration order.
  template <class F>
  void for_each(F&& f) const {
    for (auto& s : slots_)
      f(*s.engine);
  }

private:
  struct slot {
    std::unique_ptr<collective_engine> engine;
    std::vector<collective_kind> kinds;
    bool follows_view = true;
  };
  void insert(std::unique_ptr<collective_engine> e, bool follows_view);
  void carry_out(collective_engine& e) {
    if (carry_out_)
      carry_out_(e);
  }

  std::vector<slot> slots_;
  carry_out_fn carry_out_;
};

} // namespace banyan

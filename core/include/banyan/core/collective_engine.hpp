#pragma once
/// What every collective engine is to the runtime that hosts it: a state machine fed
/// events (a frame arrived, one of its timers fired, a frame it sent bounced, the view
/// changed) that leaves what to do in its outbox (frames, timers, and its own results:
/// deliveries, reduction results). The runtimes (the emulated processor, `banyan::node`)
/// own engines through an `engine_host` (core/engine_host.hpp), which routes frames,
/// bounces and timers to them by the operation's kind (core/collective_kind.hpp).
///
///   runtime ---- on_message / on_timer / on_undeliverable / on_view_change ----> engine
///   runtime <--- outbox(): sends, timers (+ the engine's own results) ---------- engine
///
/// An engine handles the kinds it names (`kinds()`); its timers are routed by its main
/// kind (`kind()`). Time is an argument; an engine reads no clock.

#include <cstdint>
#include <vector>

#include "banyan/core/collective_kind.hpp"
#include "banyan/core/messages.hpp"
#include "banyan/core/send_fates.hpp"
#include "banyan/core/supervisor.hpp"
#include "banyan/core/types.hpp"
#include "banyan/core/vnode_set.hpp"

namespace banyan {

/// The part of an engine's outbox every runtime carries out the same way: frames to send
/// (in order) and timers to set (handed back to the engine through `on_timer(token)`).
/// Engines derive their outboxes from it and add their own results.
struct engine_outbox {
  std::vector<wire::envelope> sends;
  std::vector<timer_request> timers;
  bool empty() const noexcept { return sends.empty() && timers.empty(); }
};

/// What changed in the processor's view, beyond what the engine reads from it.
struct view_change {
  /// Vnodes adopted from a crashed processor in this event (their history went down with
  /// it; core/reduce.hpp, `adopt`).
  vnode_set adopted;
};

class collective_engine {
public:
  virtual ~collective_engine() = default;

  /// The kinds of operation this engine takes frames of, `kind()` first.
  virtual std::vector<collective_kind> kinds() const = 0;
  /// Its main kind: the one its timers are routed by.
  virtual collective_kind kind() const = 0;

  /// A frame of one of its kinds arrived from `from`. False: the engine does not take
  /// it, and the runtime hands it back to its sender as undeliverable.
  virtual bool on_message(timestamp now, proc_id from, const wire::message& m) = 0;
  /// A timer it asked for fired.
  virtual void on_timer(timestamp now, std::uint64_t token) = 0;
  /// `m`, sent by this engine to `to`, could not be delivered there (nobody runs there,
  /// or its engine refused it).
  virtual void on_undeliverable(timestamp now, proc_id to, const wire::message& m) = 0;
  /// The processor's view (routes, trees, membership) may have changed.
  virtual void on_view_change(timestamp now, const view_change& change) = 0;

  /// Still responsible for something (a stream, a partial, a held frame).
  virtual bool holding() const = 0;
  /// Holds nothing and none of the frames it sent can come back, by what the runtime
  /// knows of their fates (core/send_fates.hpp).
  virtual bool drained(timestamp now, const send_fates& fates) const = 0;
  /// Frames sent so far, and when the last one was (what `send_fates` counts against).
  virtual std::uint64_t frames_sent() const = 0;
  virtual timestamp last_send() const = 0;

  /// What the events so far produced; the runtime carries it out and clears it.
  virtual engine_outbox& outbox() = 0;
  /// Clears the outbox (everything in it, the engine's own results included).
  virtual void clear_outbox() = 0;
};

} // namespace banyan

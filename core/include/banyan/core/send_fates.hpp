#pragma once
/// When a processor that has left may stop its collective engines.
///
/// An engine that holds nothing has finished its own work, but a frame it sent may still
/// come back: the network bounces it when nobody runs at its destination, and the engine
/// there refuses it when it does not take it. Either way the frame's vnodes are the
/// sender's again (`on_undeliverable`), so the sender must still be there. How long that
/// can take is what the runtime knows, not the engine:
///
///   runtime            what it knows                       `send_fates` it passes
///   -----------------  ----------------------------------  ------------------------------
///   emulated network   every frame's fate: in flight,      settled = the engine's
///                      delivered and taken or refused,      frames_sent() when the network
///                      on its way back (and to the leaver:  said none of them can come back
///                      it stays to relay those)
///   TCP transport      what is still queued per peer; a     written = when the queues were
///                      written frame's refusal returns      found empty, linger = a few
///                      within about a round trip            round trips to those peers
///   nothing            -                                    linger = drain_linger (blind)
///
///   drained(now, f) = holds nothing
///                     and (frames_sent() <= f.settled
///                          or now >= max(last send, f.written) + f.linger)
///
/// `settled` counts frames, not time: a fact about the first k frames says nothing of a
/// frame sent after it was established, so such an engine is not drained by it.

#include <cstdint>
#include <optional>

#include "banyan/core/types.hpp"

namespace banyan {

struct send_fates {
  /// The first `settled` frames the engine sent (`frames_sent()`) can no longer come
  /// back: each was delivered and taken, or has come back already.
  std::uint64_t settled = 0;
  /// Every frame handed over up to this time has left the runtime's own queues: the
  /// linger counts from the later of this and the engine's last send.
  timestamp written{timestamp::min() / 2};
  /// How long after that a frame may still come back; nothing: no bound in time, only
  /// `settled` decides.
  std::optional<duration> linger;

  /// What the network knows: the first `settled` frames can no longer come back.
  static send_fates known(std::uint64_t settled) {
    send_fates f;
    f.settled = settled;
    return f;
  }
  /// A bound in time: a frame may come back until `linger` after it left the runtime's
  /// queues (at `written` at the latest) or was sent, whichever is later.
  static send_fates bounded(timestamp written, duration linger) {
    send_fates f;
    f.written = written;
    f.linger = linger;
    return f;
  }
  /// The blind rule: nothing known but a bound on the time a bounce takes.
  static send_fates blind(duration linger) {
    send_fates f;
    f.linger = linger;
    return f;
  }

  /// The rule itself, for an engine that holds nothing, has sent `sent` frames and last
  /// sent at `last_send`.
  bool none_can_return(std::uint64_t sent, timestamp last_send, timestamp now) const {
    if (sent <= settled)
      return true;
    if (!linger)
      return false;
    const auto from = last_send > written ? last_send : written;
    return now >= from + *linger;
  }
};

} // namespace banyan

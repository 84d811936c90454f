#pragma once
// Suspicion (SWIM's indirect probes, as in SWIM and Lifeguard): one failed connection,
// `probe_strikes` unanswered probes or the crash watch's silence make a member a suspect,
// not a crashed one. The suspector pings the suspect itself and asks `indirect_probes`
// other members to ping it (ping_req); each helper that gets a pong answers ping_ack. An
// answer to any of these pings within `suspect_timeout` clears the suspicion; without one
// the suspect is declared crashed (crash_watch::declare_crashed).
//
//   suspector D                 helper H (k of them)             suspect S
//     | ping{n} ------------------------------------------------> |
//     | ping_req{n, S} --------> |                                |
//     |                          | ping{m} ---------------------> |
//     |                          | <--------------------- pong{m} |
//     | <------- ping_ack{n, S}  |                                |
//     | <------------------------------------------------ pong{n} |
//   (either answer clears S; none within suspect_timeout: S is declared crashed)
//
// Only answers to pings sent after the suspicion began count: a frame S sent before it
// crashed, arriving late, proves nothing. A helper that cannot connect to S says so
// (ping_ack, not reached); once our own ping failed too and every helper asked said so,
// S is declared at once rather than at the timeout (a killed process: its port refuses).
//
// Local health (local_health.hpp): the suspector also pings each helper itself. At the
// timeout S is declared only if some member answered a ping of that round (or a
// connection was refused): otherwise the suspector, not S, may be the one cut off, and a
// new round starts (S and fresh helpers pinged again) lasting suspect_timeout x
// (1 + local health score). A round whose timer fired late (we did not run) starts
// over the same way.

#include <cstdint>
#include <map>
#include <set>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class suspicion {
public:
  explicit suspicion(parts& s) : s_(s) {}

  /// Evidence that member p may have crashed: suspect it (a `suspected` event; or, with
  /// suspicion off, declare it crashed at once). Nothing when it is already suspected.
  void suspect(timestamp now, proc_id p, outbox& out);
  bool suspected(proc_id p) const { return suspects_.count(p) != 0; }
  /// Nothing could be delivered to p (a refused connection). For the pings we sent as a
  /// helper, the askers are told (they decide; returns true, and we do not suspect p
  /// ourselves); for our own suspicion of p, it counts towards the verdict.
  bool unreachable(timestamp now, proc_id p, outbox& out);

  void on(timestamp now, proc_id from, const wire::ping_req& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::ping_ack& m, outbox& out);
  /// A pong: returns whether it answered one of our pings (a suspicion's or a helper's).
  bool on(timestamp now, proc_id from, const wire::pong& m, outbox& out);
  void on_timer(timestamp now, std::uint64_t seq, outbox& out);

  /// p left the membership: no suspicion of it, no helping about it.
  void forget(proc_id p);
  void reset();

private:
  struct suspect_entry {
    std::uint64_t seq = 0; ///< our ping's, and the helpers' ping_req's
    std::uint64_t incarnation = 0;
    timestamp since{0};
    timestamp round{0};            ///< the current round began (local health)
    timestamp due{0};              ///< its timer is due
    /// The first answer to a ping of this round from another member (or a refused
    /// connection) arrived (timestamp::max(): none yet).
    timestamp heard = timestamp::max();
    bool helped = false;           ///< this round asked some helper
    std::set<proc_id> asked;       ///< helpers asked, every round
    std::set<proc_id> unreached;   ///< helpers that could not connect to it
    bool direct_failed = false;    ///< our own connection was refused since
  };
  /// Every way to reach it failed: declared now.
  bool hopeless(const suspect_entry& e) const;
  /// A member answered a ping of e's suspicion sent at `sent` (a refusal: sent = now):
  /// evidence for e's round if it began by then.
  void heard(timestamp now, timestamp sent, suspect_entry& e);
  /// Pings p, asks fresh helpers about it and pings them too; arms the round's timer.
  void start_round(timestamp now, proc_id p, suspect_entry& e, outbox& out);
  void declare(timestamp now, proc_id p, outbox& out);
  struct help_entry {
    proc_id asker = no_proc;
    std::uint64_t asker_seq = 0;
    proc_id target = no_proc;
    timestamp since{0};
  };
  /// The suspicion of p is over: p answered (a `suspicion_cleared` event).
  void clear(timestamp now, proc_id p, outbox& out);
  /// Reports `what` about p as a tree_event.
  void report(timestamp now, tree_event::kind what, proc_id p, outbox& out) const;

  parts& s_;
  std::map<proc_id, suspect_entry> suspects_;
  std::map<std::uint64_t, help_entry> helping_; ///< by the seq of our ping to the target
  struct health_ping {
    proc_id to = no_proc;    ///< a helper (or a member we suspect too)
    proc_id about = no_proc; ///< the suspect whose round sent it
    timestamp sent{0};
  };
  /// Our own pings to helpers (local health), by seq.
  std::map<std::uint64_t, health_ping> health_pings_;
};

} // namespace banyan::sup

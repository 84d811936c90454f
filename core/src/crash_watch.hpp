#pragma once
// Crashes: every member watches its successor in id order (the ring of members), pings
// it every `crash_timeout / 4`, and takes it for crashed after `crash_timeout` of
// silence (a refused connection and `probe_strikes` need no timeout). The vnodes a
// crashed processor held become orphans, which the adopter (the crashed one's successor)
// claims `adopt_delay` later under a higher epoch. A processor taken for crashed while
// alive refutes it: it comes back as a new incarnation and gives its vnodes up.

#include <cstdint>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class crash_watch {
public:
  explicit crash_watch(parts& s) : s_(s) {}

  /// Starts the watch's ticks (when crash detection is on and they are not running).
  void start(outbox& out);
  void on_timer(timestamp now, std::uint64_t gen, outbox& out);
  /// Anything at all from p shows it alive.
  void heard_from(timestamp now, proc_id p) {
    if (p == watched_)
      heard_ = now;
  }
  /// Takes member p for crashed: tells every member, departs it.
  void declare_crashed(timestamp now, proc_id p, outbox& out);
  /// We were taken for crashed (by `by`; no_proc: a view said so): come back as a new
  /// incarnation, and give up our vnodes, which the adopter claims.
  void refute(timestamp now, proc_id by, outbox& out);
  /// Member `who` departed: the vnodes the routes still name it owner of are orphans.
  void note_orphans(timestamp now, proc_id who, outbox& out);
  /// Claims, as the adopter, the orphans whose `adopt_delay` (and any delivery lease we
  /// granted their owner) has passed and whose entries
  /// still name the crashed owner at the recorded epoch; forgets resolved ones.
  void adopt_orphans(timestamp now, outbox& out);
  /// We left: nobody watched, no orphans (the ticks' generation goes on).
  void end_life();

private:
  /// Pings the watched successor, or takes it for crashed.
  void tick(timestamp now, outbox& out);

  struct orphan_entry {
    wire::route_entry route;
    timestamp since{0};
    timestamp not_before{0}; ///< since + adopt_delay, or later: a lease we granted
  };

  parts& s_;
  std::vector<orphan_entry> orphans_;
  proc_id watched_ = no_proc;
  timestamp heard_{0};      ///< when we last heard from the watched successor
  timestamp last_watch_{0}; ///< the last tick (a late one: we did not run)
  std::uint64_t watch_gen_ = 0;
  bool watching_ = false;
};

} // namespace banyan::sup

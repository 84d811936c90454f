#pragma once
// Local health (Lifeguard's "Local Health Aware Suspicion", as in memberlist's
// awareness): before a member declares another crashed it asks whether it is itself the
// unhealthy one. A processor whose own frames wait in a backlog (inbound, outbound or
// both), or that did not run, sees every peer fall silent at once; left alone it would
// suspect and bury them in turn, adopt their vnodes and deliver on its side, a split
// made by one sick processor. So a suspicion (suspicion.cpp) declares its suspect only
// with evidence that this processor's own network works now:
//
//   evidence   in the suspicion's current round, a member other than the suspect answered
//              a ping of that round (the suspicion pings its helpers directly, beside the
//              ping_reqs; a helper's ping_ack counts too), or a connection of ours was
//              refused (an answer from the network: nothing runs there, so our path
//              works). It must come half a `suspect_timeout` before the round's end:
//              a helper answers our ping as soon as our ping_req reached it (the same
//              connection, in order), and needs a round trip to the suspect more for
//              its ping_ack.
//   no evidence, or the round's timer fired late (we did not run): the score rises by
//              one (at most `max_score`), and a new round begins, with fresh helpers and
//              pings, lasting suspect_timeout x (1 + score). Nobody is declared while
//              nobody answers. Evidence later than that: a new round, score kept.
//   each answer to a request of ours (the lease's pongs too) lowers the score by one;
//              every suspicion lasts suspect_timeout x (1 + score) from the start. Being
//              taken for crashed ourselves (a refute) and a crash-watch tick overdue raise
//              it by one, as in Lifeguard. The score outlives a rejoin: the same process
//              is as sick.
//
// A member that hears from most others has score 0 and evidence within a round trip:
// it declares one real crash exactly as fast as before. What it assumes about the
// network: a live member answers a ping within `suspect_timeout` (the assumption
// suspicion already makes of the suspect), a helper reaches the suspect and back within
// half of it; and when every member asked falls silent at once, this processor is the likelier cause (a backlog, a starved or stopped process,
// its own link cut without refusals), not a simultaneous crash of all of them. A
// processor whose every peer crashed at the same instant without refusing connections
// (power lost everywhere else) therefore declares none of them: its collectives end in
// explicit failures (`complete_within`) rather than a membership of one. With nobody to
// ask (no other member than the suspect, or `indirect_probes` = 0) the timeout decides,
// as before: no evidence can come. Correlated crashes that take every helper drawn cost
// one more round (fresh helpers are drawn).
//
// Why the lease's absence is not a signal of its own: a member loses its lease exactly
// when its successor (the grantor) stops answering, which is what a crash of that
// successor looks like too; it would slow the detection of the one crash it must find.
// Its answers lower the score; they are no evidence in a round, since one connection
// that drained (to the successor) says nothing of another still queued (to the suspect).

#include <cstdint>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

class local_health {
public:
  /// Lifeguard's cap on the awareness multiplier (memberlist: 8).
  static constexpr int max_score = 8;

  /// A member answered a request of ours (a ping's pong, a ping_ack, a lease grant).
  void answered(timestamp) {
    if (score_ > 0)
      --score_;
  }
  /// Evidence that we were the silent one: a suspicion round with nobody answering, a
  /// timer of ours that fired late (we did not run), our own burial.
  void worsen() {
    if (score_ < max_score)
      ++score_;
  }
  int score() const noexcept { return score_; }
  /// The factor on suspicion timeouts.
  int multiplier() const noexcept { return 1 + score_; }

private:
  int score_ = 0;
};

} // namespace banyan::sup

#pragma once
// Measurement that never quite stops (supervisor_config::background_period): once no
// round of measuring runs, a processor spends a small budget of probes on the trees it
// already has, so that it notices a network that changed while nobody measured.
//
//   budget      one probe per period (jittered by up to a quarter), and no more
//   order       slot 0: a remote parent, slot 1: a local parent, slot 2: one of the best
//               alternatives (highest bandwidth figure among members that are no parent
//               of ours), each list taken in turn
//   wide area   a probe to a remote peer waits until the probes of its whole LAN would
//               stay under 1% of the path's rate: at least
//               (LAN size) x 128 KiB / (1% x bandwidth figure) after the previous one,
//               the LAN's size estimated as the local share of the members measured,
//               scaled to all members
//
// A background probe is an ordinary probe (the prober's), except that its
// candidate's figures are checked for drift (drift_watch) when it is a parent, and it
// moves a tree only for a gain of `adapt_margin` (hysteresis, so that noise on an
// unchanged network does not make trees flap), judging an alternative by the rate it
// gives now. An unanswered one is no strike against
// its candidate: under a running broadcast its reply may queue behind the segments.

#include <cstdint>
#include <limits>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class background_probing {
public:
  explicit background_probing(parts& s) : s_(s) {}

  /// Arms the next tick if background measurement is on, we are a member and none is
  /// armed (called after every event).
  void arm(outbox& out);
  void on_timer(timestamp now, std::uint64_t gen, outbox& out);
  std::uint64_t probes() const noexcept { return probes_; }
  /// The best alternatives: members that are no parent of ours, widest figure first.
  std::vector<proc_id> alternatives(std::size_t count) const;
  /// A new round of life.
  void reset();

private:
  /// The candidate for this slot, or no_proc (none allowed now).
  proc_id next_candidate(timestamp now);
  /// Whether a probe to remote peer p now keeps the LAN's probes under 1% of the path.
  bool remote_allowed(timestamp now, proc_id p) const;

  parts& s_;
  std::uint64_t gen_ = 0;
  bool armed_ = false;
  std::uint64_t slot_ = 0;
  std::size_t next_remote_ = 0, next_local_ = 0, next_alt_ = 0;
  timestamp last_remote_{std::numeric_limits<timestamp::rep>::min() / 2};
  std::uint64_t probes_ = 0;
};

} // namespace banyan::sup

#pragma once
// The RTT of remote parent edges, watched with pings (only with
// supervisor_config::background_period): a latency tree assumes the RTT of its parent
// edge, and a short broadcast's completion is the sum of such RTTs along its slowest
// path, so an edge whose RTT grew slows every broadcast until the tree leaves it. A
// background probe of that parent (128 KiB, one per period, a remote one at most once
// per many seconds) would find it only after tens of seconds; a ping is one small frame.
// Bandwidth trees' parents are watched too: their dist (RTT sum) is what the choice of
// tree compares (tree_choice.hpp), and a stale one makes a short broadcast take the
// bandwidth tree over the slowed link.
//
//   tick       every `rtt_watch_period` (jittered by up to a quarter), a ping to each
//              remote parent (of any tree) that has none in flight (a ping unanswered
//              within probe_timeout is dropped, no strike)
//   sample     the pong's RTT, trusted only when the stream from that parent lately was
//              too small for the pong to queue noticeably behind it (drift_watch::
//              rtt_trusted). Drifted: above (1 + drift) x the RTT a tree with that
//              parent assumed, plus lan_margin; three ticks in a row, each sample
//              within 10% of the first high one (a link whose RTT grew gives the same
//              figure again; a pong that waited behind a burst on the pair, such as
//              probes' 128 KiB replies on a narrow link, a varying one). Then drift_watch takes it as any drift
//              of an RTT: the trees with that parent take the figure and re-examine.
//
// Assumes remote RTTs measured by a 1-byte ping on a quiet pair vary by less than the
// drift margin (as the probes' RTTs do), and that the pings' traffic (a frame per remote
// parent per period) is negligible beside the wide-area links' capacity.

#include <cstdint>
#include <map>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class rtt_watch {
public:
  explicit rtt_watch(parts& s) : s_(s) {}

  /// Arms the next tick if background measurement is on, we are a member and none is armed.
  void arm(outbox& out);
  void on_timer(timestamp now, std::uint64_t gen, outbox& out);
  /// A pong: true when it answers one of our pings (then it is taken here).
  bool on(timestamp now, proc_id from, const wire::pong& m, outbox& out);
  std::uint64_t pings() const noexcept { return pings_; }
  void forget(proc_id p);
  /// A new round of life.
  void reset();

private:
  void ping(timestamp now, proc_id p, outbox& out);

  struct in_flight {
    proc_id to = no_proc;
    timestamp sent{0};
  };
  parts& s_;
  std::uint64_t gen_ = 0;
  bool armed_ = false;
  std::map<std::uint64_t, in_flight> pending_; ///< by ping seq
  struct strikes {
    int count = 0;
    duration first{0}; ///< the first high sample of the run
  };
  std::map<proc_id, strikes> strikes_; ///< high samples in a row
  std::uint64_t pings_ = 0;
};

} // namespace banyan::sup

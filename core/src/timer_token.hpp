#pragma once
// What a supervisor timer is for, and its payload. The outbox carries a timer as one
// uint64 (timer_request::token); encode and decode are the only places that know how
// the two are packed.

#include <cstdint>
#include <optional>

namespace banyan::sup {

struct timer_token {
  enum class kind : std::uint8_t {
    reply_due,    ///< seq: a probe's or an adoption request's answer is overdue
    probe_start,  ///< seq: a probe's random pause is over
    offer_due,    ///< seq: an offer of vnodes was not answered
    flush,        ///< held tree and subtree updates are due
    join_attempt, ///< seq: the join request of this attempt (1, 2, 3) was not answered
    giver_wait,   ///< joined, and no giver has placed us yet
    watch,        ///< seq: the crash watch's tick of this generation
    adopt,        ///< orphaned vnodes may be due for adoption
    seed,         ///< seq: the newcomer whose trees were not seeded in time
    lend,         ///< seq: vnodes lent to a newcomer are no longer reported
    suspect,      ///< seq: a suspicion's indirect probes had their time
    background,   ///< seq: the background measurement's tick of this generation
    rtt_watch,    ///< seq: the RTT watch's tick of this generation
    summary,      ///< held subtree summaries are due
    retire,       ///< seq: our own trees may have gone unused for `retire_after` (on demand)
    lease,        ///< seq: the delivery lease's renewal tick of this generation
  };
  kind what = kind::flush;
  std::uint64_t seq = 0;

  static timer_token reply_due(std::uint64_t seq) { return {kind::reply_due, seq}; }
  static timer_token probe_start(std::uint64_t seq) { return {kind::probe_start, seq}; }
  static timer_token offer_due(std::uint64_t seq) { return {kind::offer_due, seq}; }
  static timer_token flush() { return {kind::flush, 0}; }
  static timer_token join_attempt(std::uint64_t n) { return {kind::join_attempt, n}; }
  static timer_token giver_wait() { return {kind::giver_wait, 0}; }
  static timer_token watch(std::uint64_t gen) { return {kind::watch, gen}; }
  static timer_token adopt() { return {kind::adopt, 0}; }
  static timer_token seed(std::uint64_t newcomer) { return {kind::seed, newcomer}; }
  static timer_token lend(std::uint64_t seq) { return {kind::lend, seq}; }
  static timer_token suspect(std::uint64_t seq) { return {kind::suspect, seq}; }
  static timer_token background(std::uint64_t gen) { return {kind::background, gen}; }
  static timer_token rtt_watch(std::uint64_t gen) { return {kind::rtt_watch, gen}; }
  static timer_token summary() { return {kind::summary, 0}; }
  static timer_token retire(std::uint64_t gen) { return {kind::retire, gen}; }
  static timer_token lease(std::uint64_t gen) { return {kind::lease, gen}; }

  std::uint64_t encode() const;
  /// nullopt: not a token of ours.
  static std::optional<timer_token> decode(std::uint64_t token);
};

} // namespace banyan::sup

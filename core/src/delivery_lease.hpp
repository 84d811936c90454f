#pragma once
// The delivery lease (docs/architecture.md, "Delivery lease"; supervisor_config::lease):
// a processor delivers to its vnodes only while the member that would adopt them, were
// it taken for crashed, has promised not to claim them yet. The adopter of a processor
// is its successor in id order (supervisor::adopter_of), so the lease is asked of the
// successor, and the promise is kept where claims are made (crash_watch::adopt_orphans).
//
//   holder X   every `lease / 4`, and at once when its successor changes, pings its
//              successor A with a lease seq, sent at t. A's pong makes the lease valid
//              until t + lease - lease / 8 (the eighth: a margin for clock rates), as a
//              Raft leader's lease counts from the send time of its heartbeat. X may
//              deliver while the lease from its current successor is valid.
//   grantor A  answers a lease ping only from a processor it holds for a member, and
//              records when (A's clock, at or after X's t). Should it take X's vnodes as
//              orphans, it claims them no earlier than that + lease.
//
// So every delivery X makes to a vnode comes before A's claim of it, and A delivers to
// it only after the claim: X never delivers after its adopter did, however long X lags
// (a backlog of unread frames, a starved or stopped process), and nothing X delivers
// falls between the claim and X hearing of its burial. Deliveries due while the lease
// is not valid wait in the engine (tree_view::may_deliver) and are made when it is
// again, or handed on once the vnodes are no longer ours. Assumes clock rates differ
// by less than an eighth, and that the claimant is the successor X knows: a member that
// joined between them and that X has not heard of yet, or the next member adopting X's
// vnodes together with those of a successor that crashed, granted X nothing and claims
// after `adopt_delay` (a window of at most `lease`).

#include <cstdint>
#include <map>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class delivery_lease {
public:
  explicit delivery_lease(parts& s) : s_(s) {}

  /// Lease pings carry this bit in their seq (the other pings' seqs are counters).
  static constexpr std::uint64_t lease_bit = std::uint64_t{1} << 62;
  static bool is_lease_seq(std::uint64_t seq) noexcept { return (seq & lease_bit) != 0; }

  /// After every event: renews at once when the successor changed, and keeps the
  /// renewals ticking while we are a member (lease on).
  void arm(timestamp now, outbox& out);
  void on_timer(timestamp now, std::uint64_t gen, outbox& out);
  /// Grantor: a lease ping from `from`.
  void on_ping(timestamp now, proc_id from, const wire::ping& m, outbox& out);
  /// Holder: the answer to one of our lease pings.
  void on_pong(timestamp now, proc_id from, const wire::pong& m);
  /// Whether deliveries to our own vnodes may be made now.
  bool may_deliver(timestamp now) const;
  /// Until when the lease from our current successor is valid (timestamp::min(): none).
  timestamp valid_until() const;
  /// Grantor: the earliest time at which vnodes of `p` may be claimed here (the last
  /// lease granted to it + lease; timestamp::min() when none was).
  timestamp claim_after(proc_id p) const;
  std::uint64_t pings() const noexcept { return pings_; }
  /// A new round of life: no lease held, none asked.
  void end_life();

private:
  bool on() const;
  proc_id successor() const;
  void renew(timestamp now, outbox& out);

  parts& s_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, std::pair<proc_id, timestamp>> asked_; ///< seq -> (to, sent)
  proc_id asking_ = no_proc;  ///< the successor we last pinged
  proc_id grantor_ = no_proc; ///< who granted the lease we hold
  timestamp until_ = timestamp::min();
  std::map<proc_id, timestamp> granted_; ///< grantor: when we last granted each
  std::uint64_t gen_ = 0;
  bool ticking_ = false;
  std::uint64_t pings_ = 0;
};

} // namespace banyan::sup

#pragma once
// Who owns which vnodes: the routing table, our own vnodes, the offers of ours in
// flight (owners move vnodes only once the recipient has taken them) with the epochs of
// those moves, and vnodes handed to newcomers but still reported below us (lent).

#include <cstdint>
#include <map>
#include <vector>

#include "banyan/core/routing_table.hpp"
#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class ownership {
public:
  explicit ownership(parts& s) : s_(s) {}

  const routing_table& routes() const noexcept { return routes_; }
  routing_table& routes() noexcept { return routes_; }
  const vnode_set& own() const noexcept { return own_; }
  /// What our subtrees report of our own: own and what is lent.
  vnode_set reported_own() const;
  const std::vector<wire::route_entry>& farewell() const noexcept { return farewell_; }
  void set_farewell(std::vector<wire::route_entry> routes) { farewell_ = std::move(routes); }

  /// Our vnodes by the routing table now.
  void take_own_from_routes();
  /// Returns whether anything changed.
  bool apply_routes(const std::vector<wire::route_entry>& routes);
  /// `apply_routes` for routes another processor told us of (`by`; no_proc: a probe's
  /// view). A vnode of ours they name as another's, and not on offer by us, was claimed
  /// over us (we were taken for crashed, and the adopter's claim came first): reported
  /// as `disowned`.
  bool apply_told_routes(timestamp now, proc_id by, const std::vector<wire::route_entry>& routes,
                         outbox& out);
  /// A `disowned` event for `lost` (none when empty): `by` told us.
  void report_disowned(timestamp now, proc_id by, vnode_set lost, outbox& out) const;
  /// Routes from someone else's snapshot, with entries naming us made harmless.
  std::vector<wire::route_entry> foreign_routes(std::vector<wire::route_entry> routes) const;
  /// The epoch of a new move of `vnodes` by us (above all before it).
  std::uint64_t next_epoch(const vnode_set& vnodes);
  /// Gives up every vnode of ours at once (we were taken for crashed).
  void give_up_own();

  /// Offers every vnode of ours to `to`, as we leave.
  void offer_all(proc_id to, outbox& out);
  /// Whether an offer of ours to a newcomer is unanswered.
  bool offering_to_newcomer() const;
  /// An offer to p is taken as refused (p crashed).
  void drop_offer_to(timestamp now, proc_id p, outbox& out);
  void on(timestamp now, proc_id from, const wire::handover_request& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::vnode_handover_ack& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::routing_update& m, outbox& out);
  void on_offer_timer(timestamp now, std::uint64_t seq, outbox& out);
  void on_lend_timer(std::uint64_t seq, outbox& out);
  bool lending() const noexcept { return !lent_.empty(); }

  /// Forgets routes, own vnodes, offers and loans (the counters that keep epochs and
  /// timers apart go on).
  void reset();

private:
  struct vnode_offer {
    vnode_set vnodes;
    proc_id to = no_proc;
    std::uint64_t epoch = 0;
    bool leaving = false; ///< all our vnodes, offered because we leave
    bool share = false;   ///< a share of ours to a newcomer that asked for none
  };
  void set_own(vnode_set own);
  /// Offers vnodes to a newcomer that asked for them (those not already on offer).
  void hand_over(const vnode_set& vnodes, proc_id to, outbox& out, bool share);
  void offer(const vnode_set& vnodes, proc_id to, bool leaving, outbox& out, bool share = false);
  vnode_set share_of_own() const;
  /// An offer was answered (or timed out: not accepted).
  void offer_resolved(timestamp now, std::uint64_t seq, bool accepted, outbox& out);

  parts& s_;
  routing_table routes_;
  vnode_set own_;
  std::vector<wire::route_entry> farewell_;
  std::map<std::uint64_t, vnode_offer> offers_; ///< by offer number
  std::uint64_t offer_seq_ = 0;
  std::uint64_t last_offer_epoch_ = 0;
  std::map<std::uint64_t, vnode_set> lent_; ///< by timer number
  std::uint64_t lend_seq_ = 0;
};

} // namespace banyan::sup

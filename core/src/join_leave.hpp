#pragma once
// Becoming a member and ceasing to be one. Joining: ask a contact (three times, a
// `probe_timeout` apart), get the member list and routes, announce ourselves, ask the
// owners of the vnodes we want (givers) to hand them over; each giver places us under it
// in every tree still without parent. Leaving: offer every vnode to the nearest member
// that stays (the next on refusal), then hand the trees over (repair) and tell everyone.
// A contact that is leaving passes newcomers on.

#include <vector>

#include "banyan/core/error.hpp"
#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class join_leave {
public:
  explicit join_leave(parts& s) : s_(s) {}

  void found(timestamp now, const std::vector<wire::member>& members,
             const routing_table& routes, outbox& out);
  void join(timestamp now, proc_id contact, const vnode_set& wanted, outbox& out);
  std::optional<error> leave(timestamp now, proc_id recipient, outbox& out);

  void on(timestamp now, proc_id from, const wire::join_request& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::join_accept& m, outbox& out);
  void on(timestamp now, proc_id from, const wire::vnode_handover& m, outbox& out);
  /// Gives the join under way up (supervisor::abandon_join).
  void abandon_join();
  /// Join attempt n was not answered.
  void on_join_timer(timestamp now, std::uint64_t n, outbox& out);
  /// No giver placed us in time: measure.
  void on_giver_timer(timestamp now, outbox& out);

  /// Our vnodes were refused by `p` (leaving itself).
  void refused_by(proc_id p) { refused_.push_back(p); }
  /// Offers our vnodes to the next recipient, or finishes leaving.
  void offer_vnodes(timestamp now, outbox& out);
  /// Our vnodes were taken (`routes`: where they went): tell everyone and stop.
  void finish_leave(timestamp now, std::vector<wire::route_entry> routes, outbox& out);
  /// Our side lost a partition merge: end this membership without a word to its members
  /// (they yield too) and join the winner's side through `contact`.
  void rejoin(timestamp now, proc_id contact, outbox& out);

  void reset();

  /// Joined, and some owner asked for vnodes has not handed them over yet (at most
  /// `probe_timeout` after the join was accepted).
  bool awaiting_givers() const noexcept { return givers_due_ && !givers_.empty(); }

private:
  /// Forgets everything of this membership but the paths measured (and what lets us point
  /// those who still ask us for adoption on).
  void end_life();
  /// Ranks the members for our vnodes as we leave, nearest first.
  void rank_nearest();
  /// Asks `giver` for vnodes: a share of its own (the contact, when nothing in particular
  /// is wanted) or the wanted vnodes it owns.
  void ask(proc_id giver, outbox& out);

  parts& s_;
  /// Joining: the contact, what we asked for, and how many times we asked.
  proc_id contact_ = no_proc;
  vnode_set wanted_;
  int join_attempts_ = 0;
  /// Joining: the owners asked for vnodes; the first trees go under them.
  std::vector<proc_id> givers_;
  bool await_giver_ = false; ///< joined; measuring waits for the first giver's handover
  bool givers_due_ = false;  ///< joined; the givers' handovers are still expected
  int asks_left_ = 0;        ///< joined; how many more times givers that gave nothing are asked
  /// Leaving: the recipient we are trying, those that refused, and the members nearest
  /// first, ranked when the leave began (our trees, which place the members we never
  /// measured, are gone after the first handover).
  proc_id offered_to_ = no_proc;
  std::vector<proc_id> refused_;
  std::vector<proc_id> nearest_;
};

} // namespace banyan::sup

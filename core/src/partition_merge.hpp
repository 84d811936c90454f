#pragma once
// Partitions that heal. While a partition lasts, each side takes the other's members for
// crashed and adopts their vnodes, so each side owns every vnode. When it heals, the
// sides merge back into one membership with one owner per vnode:
//
// - Finding each other: a member keeps, for `merge_window`, the processors it declared
//   crashed itself, and sends each a `merge_offer` (its side's members) every watch
//   period (crash_timeout / 4). A processor that really crashed never answers; one on
//   the other side of a healed partition receives it.
// - Who wins: the side with more members, then the side with the lowest processor id.
//   The receiver of an offer, if the sender is not a member of its side, compares its
//   own member list with the offer's: both ends compare the same two lists, so exactly
//   one of them yields. The winner answers with an offer of its own (the loser may never
//   have buried it, and so would never send it one).
// - The loser yields: it reports its vnodes `disowned`, forgets its side (members,
//   routes, trees), lifts the tombstones it holds for the winner's members, and joins
//   the winner's side through the offer's sender as a new incarnation (a normal join:
//   the contact's member list and routing table, a share of the contact's vnodes). Its
//   old side's members yield in turn, each when an offer reaches it; until then their
//   membership and ownership news (member_joined, member_left, routing_update) is not
//   taken by the one that moved on, so the loser side's tables never leak into the
//   winner's. The winner's table covers every vnode (its side adopted all of the loser's
//   while the partition lasted), so after the merge every vnode has one owner: the
//   winner side's.

#include <cstdint>
#include <map>
#include <set>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class partition_merge {
public:
  explicit partition_merge(parts& s) : s_(s) {}

  /// We declared p (incarnation inc) crashed: offer it a merge for a while.
  void buried(timestamp now, proc_id p, std::uint64_t inc);
  /// Every watch period: a merge offer to each processor we buried within merge_window
  /// that has not come back.
  void tick(timestamp now, outbox& out);
  void on(timestamp now, proc_id from, const wire::merge_offer& m, outbox& out);
  /// `m` from `from` is membership or ownership news from the side we left when we
  /// yielded (from a processor that has not joined our side since): not to be taken.
  bool from_old_side(proc_id from, const wire::message& m) const;
  /// `m` from `from` is membership or ownership news (member_left, routing_update, a
  /// member_joined about another processor) from a processor we hold for departed (an
  /// incarnation of it is tombstoned and it is no member now): over TCP, what the other
  /// side of a partition sent while it lasted arrives when it heals (the connection kept
  /// it). Taken, it would bury our side's members, us among them, and move our vnodes to
  /// the other side's adopters; not taken, the merge decides.
  bool from_buried(proc_id from, const wire::message& m) const;
  /// A new life (a join): forgets the processors buried in the old one.
  void reset();

private:
  struct burial {
    std::uint64_t incarnation = 0;
    timestamp since{0};
  };
  wire::merge_offer my_side() const;

  parts& s_;
  std::map<proc_id, burial> buried_;
  std::set<proc_id> old_side_; ///< members of the side we yielded from
};

} // namespace banyan::sup

#pragma once
// A newcomer's trees are seeded, not measured. Newcomer j takes vnodes from member g (a
// rejoiner its own back, from the member that held them while it was away); j's trees
// are then g's with the edge g-j turned round:
//
//     g's tree:  g -> a -> {b, c},  g -> j       (parent -> children)
//     j's tree:  j -> g -> a -> {b, c}
//
// Every member asks, in j's tree, its parent in g's tree (g asks j); a parent not yet
// placed itself holds the request until it is (as a step-parent does), so the tree grows
// from j down. Nobody probes: the edges are those of g's tree, with their figures.
// Trees still without parent `seed_wait` after hearing of j are measured for.
//
// The joiners one member gives vnodes to hang, in bandwidth trees, in a chain below it
// (giver -> j1 -> j2 -> ...: the giver redirects each to the last one placed) rather
// than all from the giver's NIC; latency trees keep the star (one hop each).

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "banyan/core/supervisor.hpp"

namespace banyan::sup {

struct parts;

class newcomer_seeding {
public:
  explicit newcomer_seeding(parts& s) : s_(s) {}

  /// Whether the trees rooted at p wait for their seed.
  bool waiting(proc_id p) const { return unseeded_.count(p) > 0; }
  bool any_waiting() const noexcept { return !unseeded_.empty(); }

  /// We heard of newcomer j: seed its trees once its giver is known, or measure after
  /// `seed_wait`.
  void expect_seed(timestamp now, proc_id j, outbox& out);
  /// Notes, before `routes` are applied, which members hand vnodes to whom.
  void note_givers(timestamp now, const std::vector<wire::route_entry>& routes, outbox& out);
  /// We gave vnodes to newcomer j (`share`: a share of ours it did not ask for).
  void gave_to(proc_id j, timestamp now, bool share);
  /// ... and now go under it in its trees (or will, once we hear of it).
  void after_giving(timestamp now, proc_id j, outbox& out);
  /// No seed for newcomer j in time.
  void on_seed_timer(timestamp now, proc_id j, outbox& out);
  /// A joiner `from` we gave vnodes to asks for its first place in bandwidth tree k: the
  /// last joiner placed there, to redirect it to (no_proc: adopt it here).
  proc_id chain_ahead(proc_id from, tree_key k);
  /// Whether j is a joiner we handed vnodes to within `sponsor_window` (being placed).
  bool placing(proc_id j) const;

  void forget(proc_id p);
  void reset();

private:
  /// Member g gave vnodes to newcomer j: ask, in j's trees, our parent in g's.
  void seed(timestamp now, proc_id j, proc_id g, outbox& out);

  parts& s_;
  /// Newcomers whose trees wait for their seed, and the givers of newcomers learnt from
  /// routing updates (which may arrive before the newcomer's notice).
  std::set<proc_id> unseeded_;
  std::map<proc_id, proc_id> giver_of_;
  /// Newcomers we gave a share of our vnodes (they asked for none): not necessarily near
  /// us, so our edge under them in their seeded trees is measured.
  std::set<proc_id> shared_to_;
  /// Newcomers we handed vnodes to, and when; per bandwidth tree, the last of them placed
  /// below us and all placed.
  std::map<proc_id, timestamp> given_to_;
  std::map<tree_key, std::pair<proc_id, std::set<proc_id>>> chain_tail_;
};

} // namespace banyan::sup

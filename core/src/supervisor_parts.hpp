#pragma once
// The parts a supervisor is made of, and what they share. The supervisor (the facade in
// supervisor.cpp) hands each event to the part it concerns; parts call on one another
// through this aggregate. Each part owns its state and resets it itself.
//
//   part              owns
//   ----------------  ---------------------------------------------------------------
//   tree_table        the tree_state of every tree (a latency and a bandwidth per root)
//   tree_set          which roots have trees (all members, or those open on demand)
//   update_batching   which trees' info and subtrees changed; the held flush
//   membership        members, incarnations, tombstones, sponsored newcomers
//   path_memory       figures measured per peer, kept across memberships; the rule context
//   ownership         routes, own vnodes, offers and their epochs, vnodes lent
//   prober            the measuring schedule, the probe in flight, candidate choice
//   parent_selection  the rules' verdicts, adoption, holding while reattaching
//   repair            step-parents: asked, deferred, handed over when leaving
//   newcomer_seeding  newcomers' trees seeded from their giver's; joiners chained
//   crash_watch       the watched successor, orphaned vnodes, refuting our own burial
//   suspicion         suspects and the indirect probes about them; pinging for others
//   partition_merge   processors we buried, offered a merge; yielding to a larger side
//   join_leave        joining (contact, attempts, givers) and leaving (recipients)
//   background_probing  the background budget once trees are stable; its candidates
//   drift_watch       parent edges that no longer give what the trees assumed
//   rtt_watch         pings to the remote parents of latency trees (background only)
//   delivery_lease    the lease our successor granted us; the leases we granted
//   local_health      whether we ourselves seem the silent one (Lifeguard's score)

#include <cstdint>
#include <random>

#include "banyan/core/supervisor.hpp"
#include "background_probing.hpp"
#include "crash_watch.hpp"
#include "delivery_lease.hpp"
#include "drift_watch.hpp"
#include "rtt_watch.hpp"
#include "join_leave.hpp"
#include "local_health.hpp"
#include "membership.hpp"
#include "newcomer_seeding.hpp"
#include "ownership.hpp"
#include "parent_selection.hpp"
#include "path_memory.hpp"
#include "prober.hpp"
#include "partition_merge.hpp"
#include "repair.hpp"
#include "suspicion.hpp"
#include "timer_token.hpp"
#include "tree_set.hpp"
#include "tree_table.hpp"
#include "update_batching.hpp"

namespace banyan::sup {

struct parts {
  parts(proc_id self, supervisor_config cfg, supervisor_test_hooks hooks, std::uint64_t seed);
  parts(const parts&) = delete;
  parts& operator=(const parts&) = delete;

  const proc_id self;
  const supervisor_config cfg;
  const supervisor_test_hooks hooks;
  const variant_decision decision;
  std::mt19937_64 rng;
  supervisor::status status = supervisor::status::idle;
  /// Numbers probes and adoption requests to step-parents (one space: a reply names one).
  std::uint64_t next_seq = 1;
  timestamp now{0}; ///< of the message being handled
  bool reported_busy = false;

  tree_table trees;
  tree_set roots;
  update_batching updates;
  membership members;
  path_memory paths;
  ownership owners;
  prober probes;
  parent_selection parents;
  repair repairs;
  newcomer_seeding seeding;
  crash_watch watch;
  suspicion suspects;
  partition_merge merges;
  join_leave life;
  background_probing background;
  drift_watch drift;
  rtt_watch rtts;
  delivery_lease lease;
  local_health health;

  void send(outbox& out, proc_id to, wire::message m) const;
  void start_timer(outbox& out, duration after, timer_token t) const;
  void event(outbox& out, tree_event::kind what, timestamp now, tree_key k = {},
             proc_id old_parent = no_proc, proc_id new_parent = no_proc) const;
  /// Measuring, holding updates, waiting for a seed, lending, joining or leaving.
  bool busy() const;
};

} // namespace banyan::sup

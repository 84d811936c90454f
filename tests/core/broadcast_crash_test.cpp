// Broadcasts through crashes (`broadcast_config::acknowledge`, docs/collectives.md,
// "Through crashes"): a processor crashes in the middle of a broadcast, before anyone
// noticed, or stops and comes back after its vnodes were adopted. Every broadcast then
// reaches every vnode exactly once and its origin learns so, or the origin reports it
// failed, naming the vnodes it did not reach. Virtual time, fixed seeds.
#include <boost/test/unit_test.hpp>

#include "banyan/core/tree_builders.hpp"
#include "core/crash_scenario.hpp"
#include "core/random_topology.hpp"

#include <random>

using namespace banyan;
using banyan::test::adaptive_riders;
using banyan::test::broadcast_from;
using banyan::test::collective_rider;
using banyan::test::message_bytes;
using banyan::test::mini_grid;
using banyan::test::tiny_grid;
using banyan::test::rider;
using namespace std::chrono_literals;

namespace {

broadcast_config acked() {
  broadcast_config c;
  c.acknowledge = true;
  c.resend_grace = 50ms;
  c.resend_after = 2s;
  c.complete_within = 20s;
  c.stale_stream = 1s;
  return c;
}

/// The processor below `root` in its bandwidth tree with the most processors under it.
proc_id busiest_relay(const mini_grid& g, proc_id root) {
  const auto t = g.tree_of({root, tree_kind::bandwidth});
  const auto& parent = t.parents();
  std::vector<int> below(parent.size(), 0);
  for (proc_id p = 0; p < parent.size(); ++p)
    for (proc_id q = parent[p]; q != no_proc && q != root; q = parent[q])
      ++below[q];
  proc_id best = no_proc;
  for (proc_id p = 0; p < parent.size(); ++p)
    if (p != root && (best == no_proc || below[p] > below[best]))
      best = p;
  return best;
}

/// Every outcome reported once, complete.
std::string outcomes_complete(const adaptive_riders& r) {
  std::string out;
  for (auto& [op, msg] : r.ledger.sent) {
    auto i = r.ledger.outcomes.find(op);
    if (i == r.ledger.outcomes.end())
      out += "no outcome for " + wire::to_string(op) + "; ";
    else if (!i->second.complete)
      out += wire::to_string(op) + " failed, missing " + i->second.missing.to_string() + "; ";
    else if (r.ledger.outcome_count.at(op) != 1)
      out += wire::to_string(op) + " reported " + std::to_string(r.ledger.outcome_count.at(op)) +
             " times; ";
  }
  return out;
}

broadcast_stats sum(mini_grid& g) {
  broadcast_stats t;
  for (proc_id p = 0; p < 8; ++p)
    if (g.rider_of(p)) {
      auto& s = rider(g, p).bcast().stats();
      t.acks_sent += s.acks_sent;
      t.repeats += s.repeats;
      t.resends += s.resends;
      t.completed += s.completed;
      t.stale_dropped += s.stale_dropped;
      t.fenced += s.fenced;
    }
  return t;
}

} // namespace

// Stable trees, no crash: every broadcast completes at its origin without a resend, and
// every other processor acknowledged once per broadcast.
BOOST_AUTO_TEST_CASE(acknowledged_broadcasts_complete_without_resends) {
  adaptive_riders riders;
  riders.cfg = acked();
  mini_grid g{tiny_grid(), 3};
  riders.install(g);
  g.start(8);
  g.run();
  broadcast_from(g, 0, 1, 1);
  broadcast_from(g, 5, 1 << 20, 2);
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  BOOST_TEST(outcomes_complete(riders) == "");
  auto t = sum(g);
  BOOST_TEST(t.resends == 0u);
  BOOST_TEST(t.repeats == 0u);
  BOOST_TEST(t.acks_sent == 2u * 7u);
}

// The processor with the most below it in the origin's bandwidth tree crashes while a
// 4 MiB broadcast streams through it; another member finds it unreachable. The dead
// relay's subtree and its own adopted vnode still get the message exactly once: the
// origin sends the uncovered vnodes again after the adoption.
BOOST_AUTO_TEST_CASE(a_relay_crashing_mid_broadcast_loses_nothing) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      adaptive_riders riders;
      riders.cfg = acked();
      mini_grid g{tiny_grid(), seed};
      riders.install(g);
      g.start(8);
      g.run();
      const proc_id origin = static_cast<proc_id>(seed % 2 == 0 ? 0 : 4);
      const auto relay = busiest_relay(g, origin);
      BOOST_REQUIRE(relay != no_proc);
      broadcast_from(g, origin, 4 << 20, seed);
      g.run_for(20ms);
      BOOST_REQUIRE(riders.ledger.count.size() < 8u); // not everybody has it yet
      g.crash(relay);
      g.suspect(origin, relay);
      g.run();
      BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
      BOOST_TEST(outcomes_complete(riders) == "");
      BOOST_TEST(sum(g).resends >= 1u);
    }
  }
}

// Broadcasts started after a processor died but before anyone noticed: they all reach
// every vnode exactly once, the dead one's at its adopter, and complete at their origins.
BOOST_AUTO_TEST_CASE(broadcasts_before_the_crash_is_detected_complete) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      adaptive_riders riders;
      riders.cfg = acked();
      mini_grid g{tiny_grid(), seed};
      riders.install(g);
      g.start(8);
      g.run();
      g.crash(3);
      for (std::uint64_t k = 0; k < 6; ++k) {
        broadcast_from(g, static_cast<proc_id>(k % 2 == 0 ? 0 : 6), k == 2 ? 1 << 20 : 100, 10 + k);
        g.run_for(10ms);
      }
      g.suspect(2, 3);
      g.run();
      BOOST_REQUIRE((g.sup(4)->own_vnodes() == vnode_set::range(3, 5)));
      BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
      BOOST_TEST(outcomes_complete(riders) == "");
    }
  }
}

// Shallow starts (broadcast_config::shallow_bytes) through a crash: a processor of the
// origin's LAN below one of its children in the latency tree (so the origin sends to it
// straight) dies before anyone noticed; the short broadcast sent straight to it bounces
// and is routed again (and the dead one is avoided for a while). Every vnode still gets
// each broadcast once (the dead one's at its adopter) and every origin completes.
BOOST_AUTO_TEST_CASE(shallow_broadcasts_through_a_crash_in_the_origins_lan_complete) {
  int scenarios = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      adaptive_riders riders;
      riders.cfg = acked();
      riders.cfg.shallow_bytes = 4096;
      mini_grid g{tiny_grid(), seed};
      riders.install(g);
      g.start(8);
      g.run();
      // tiny-2c8: LANs {0-3} and {4-7}; an origin and a grandchild of it in its LAN.
      proc_id origin = no_proc, dead = no_proc;
      for (proc_id o : {proc_id{0}, proc_id{4}})
        for (proc_id q = o + 1; q < o + 4 && dead == no_proc; ++q) {
          const auto parent = g.tree_of({o, tree_kind::latency}).parents()[q];
          if (parent != o && parent != no_proc) {
            origin = o;
            dead = q;
          }
        }
      if (dead == no_proc)
        continue; // every LAN member a child of its origin here: nothing goes straight
      ++scenarios;
      g.crash(dead);
      for (std::uint64_t k = 0; k < 6; ++k) {
        broadcast_from(g, origin, k == 2 ? 1 << 20 : 100, 10 + k);
        g.run_for(10ms);
      }
      g.suspect(origin, dead);
      g.run();
      BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
      BOOST_TEST(outcomes_complete(riders) == "");
      BOOST_TEST(rider(g, origin).bcast().stats().shallow_frames > 0u);
      // The frame sent straight to the dead processor bounced and was routed again.
      BOOST_TEST(rider(g, origin).bcast().stats().bounces >= 1u);
    }
  }
  BOOST_TEST(scenarios > 0);
}

// Nobody ever notices the crash (no watch, nothing refused): the dead processor's vnode
// is never adopted, and the broadcast fails at its origin after `complete_within`,
// naming that vnode and its owner. Every other vnode has it exactly once.
BOOST_AUTO_TEST_CASE(a_broadcast_that_cannot_reach_a_vnode_fails_naming_it) {
  adaptive_riders riders;
  riders.cfg = acked();
  riders.cfg.complete_within = 3s;
  mini_grid g{tiny_grid(), 5};
  riders.install(g);
  g.start(8);
  g.run();
  g.crash(6);
  const auto id = broadcast_from(g, 1, 1000, 7);
  g.run_for(10s);
  auto i = riders.ledger.outcomes.find(id);
  BOOST_REQUIRE(i != riders.ledger.outcomes.end());
  BOOST_TEST(!i->second.complete);
  BOOST_TEST(i->second.missing.to_string() == vnode_set{6}.to_string());
  BOOST_TEST(i->second.owners.size() == 1u);
  BOOST_TEST(i->second.owners.begin()->first == 6u);
  for (vnode_id v = 0; v < 8; ++v) {
    auto c = riders.ledger.count.find({id, v});
    BOOST_TEST((c == riders.ledger.count.end() ? 0 : c->second) == (v == 6 ? 0 : 1));
  }
}

// A processor stops (frozen past crash_timeout) while a broadcast is under way; the watch
// takes it for crashed and its vnode is adopted, and the origin sends the broadcast to
// the adopter. When it runs again its runtime finds the stall and fences its deliveries:
// what it held for the vnode it lost goes to the adopter (which already has it), and
// nothing is delivered to a vnode it no longer owns. Without the fence it delivers its
// stale copy to vnode 2, and the origin's resend goes to it, the vnode's owner at the
// start, which acknowledges it rather than sending it on to the adopter: once as well.
// The fence alone (no acknowledgements, so no repeat check) also delivers vnode 2 once:
// at the adopter, from the woken processor's copy.
BOOST_AUTO_TEST_CASE(a_stopped_processor_does_not_deliver_to_vnodes_adopted_meanwhile) {
  for (int variant : {0, 1, 2}) {
    const bool fence = variant != 1;
    const bool acks = variant != 2;
    BOOST_TEST_CONTEXT("fence " << fence << ", acknowledgements " << acks) {
      adaptive_riders riders;
      riders.cfg = acked();
      riders.cfg.acknowledge = acks;
      supervisor_config sc;
      sc.crash_timeout = 400ms;
      mini_grid g{tiny_grid(), 2, sc};
      riders.install(g);
      g.start(8);
      g.run_for(3s);
      const proc_id stopped = 2;
      g.freeze(stopped, 2s);
      const auto id = broadcast_from(g, 0, 300, 3);
      g.run_for(2s - 1ms);
      BOOST_REQUIRE(!g.sup(4)->own_vnodes().empty());
      BOOST_REQUIRE(g.sup(3)->own_vnodes().contains(2)); // adopted by 2's successor
      if (fence) // what the runtime does at its first event after the stall
        g.with_rider(stopped, [&](mini_grid::rider& r, timestamp now, outbox& out) {
          broadcast_outbox bo;
          auto& c = dynamic_cast<collective_rider&>(r);
          c.bcast().fence(now, now + 500ms, bo);
          for (auto& t : bo.timers)
            out.timers.push_back({t.after, t.token * 2});
          for (auto& e : bo.sends)
            out.sends.push_back(std::move(e));
        });
      g.run_for(3s);
      auto c = riders.ledger.count.find({id, 2});
      const int at_vnode_2 = c == riders.ledger.count.end() ? 0 : c->second;
      if (fence) {
        BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
        if (acks)
          BOOST_TEST(outcomes_complete(riders) == "");
        BOOST_TEST(at_vnode_2 == 1);
        BOOST_TEST(rider(g, stopped).bcast().stats().fenced >= 1u);
      } else {
        BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
        BOOST_TEST(outcomes_complete(riders) == "");
        BOOST_TEST(at_vnode_2 == 1); // the stale one, at the processor taken for crashed
        BOOST_TEST(rider(g, 0).bcast().stats().past_owner_resends >= 1u);
        BOOST_TEST(rider(g, stopped).bcast().stats().delivered_before >= 1u);
      }
    }
  }
}

// Graceful churn with acknowledgements on: processors join and leave at random while
// broadcasts start from random members (the churn rounds of broadcast_test). Owners
// change all the time, so origins send uncovered vnodes again; every vnode still gets
// every broadcast exactly once, and every outcome reported is complete. The resend waits
// `resend_grace` (1 s here) for the acknowledgement of a delivery its old owner made
// before handing the vnode on: with 50 ms, 3 of these 20 rounds delivered a vnode twice.
BOOST_AUTO_TEST_CASE(graceful_churn_with_acknowledgements_stays_exactly_once) {
  std::mt19937 rng{5151};
  std::uint64_t resends = 0, outcomes = 0;
  for (int round = 0; round < 20; ++round) {
    auto topo = banyan::test::random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg = acked();
    riders.cfg.resend_grace = std::chrono::seconds(1);
    riders.cfg.segment_size = 32 * 1024;
    mini_grid g{topo, static_cast<std::uint64_t>(8100 + round)};
    riders.install(g);
    g.start();
    if (round % 2)
      g.run();
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 30; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int what) {
        broadcast_from(g, p, what == 0 ? 400 * 1024 : 1 + step, round * 1000 + step);
      });
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      for (auto& [op, c] : riders.ledger.outcomes) {
        BOOST_TEST(c.complete, wire::to_string(op) << " failed, missing " << c.missing.to_string());
        BOOST_TEST(riders.ledger.outcome_count.at(op) == 1);
      }
      outcomes += riders.ledger.outcomes.size();
      for (proc_id p = 0; p < n; ++p)
        if (g.rider_of(p))
          resends += rider(g, p).bcast().stats().resends;
    }
  }
  BOOST_TEST(outcomes > 0u);
  BOOST_TEST_MESSAGE("graceful churn: " << outcomes << " outcomes, " << resends << " resends");
}

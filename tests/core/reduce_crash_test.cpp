// Reductions through crashes (docs/collectives.md, "Reductions through crashes"): a
// processor that relays partials up the root's tree crashes in the middle of a
// reduction. Its children send what it had not passed on again, tentatively; the
// adopter of its vnodes contributes them when the root's owner asks; the root's owner
// counts every vnode exactly once, whichever copy comes first. When the data is really
// gone (two crashes on one path), the reduction still does not complete, and giving it
// up names the vnodes that never arrived. Virtual time, fixed seeds.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

#include "banyan/core/tree_builders.hpp"
#include "core/collective_rider.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::collective_rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::reduction_ledger;
using banyan::test::rider;
using namespace std::chrono_literals;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

/// Small integers: a sum counts a vnode twice visibly.
std::vector<std::uint8_t> contribution(std::uint64_t op, vnode_id v) {
  std::vector<std::int64_t> xs = {static_cast<std::int64_t>(1000 * op + v + 1),
                                  static_cast<std::int64_t>((v + 3) * (v + 3))};
  std::vector<std::uint8_t> b(xs.size() * sizeof(std::int64_t));
  std::memcpy(b.data(), xs.data(), b.size());
  return b;
}

struct fixture {
  delivery_ledger deliveries;
  reduction_ledger reductions;
  reduce_config cfg;

  fixture() { reductions.value = contribution; }

  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id, const supervisor& s) {
      return std::make_unique<collective_rider>(s, deliveries, broadcast_config{}, &reductions, cfg);
    });
  }

  /// Reduction `op` has exactly one result, over every vnode of [0, n), each counted once
  /// (the sum proves it), and no engine reported a problem.
  std::string counted_once(std::uint64_t op, vnode_id n) const {
    std::string r;
    auto res = reductions.results.find(op);
    if (res == reductions.results.end() || res->second.size() != 1)
      return "reduction " + std::to_string(op) + " has " +
             std::to_string(res == reductions.results.end() ? 0 : res->second.size()) +
             " results";
    auto& got = res->second.front();
    if (got.vnodes != vnode_set::range(0, n))
      r += "covers " + got.vnodes.to_string() + "; ";
    if (got.value.to_vector() != reductions.expected(op, n))
      r += "wrong value (a vnode missing or counted twice); ";
    for (auto& p : reductions.problems)
      r += p + "; ";
    return r;
  }
};

/// No suspicion: one refused connection declares a crash (the detection is not the point).
supervisor_config eager() {
  supervisor_config c;
  c.suspect_timeout = duration{0};
  return c;
}

reduce_spec sum_spec(std::uint64_t op) {
  return reduce_spec{op, 0, {reduce_kind::sum, element_type::int64, 0}, 2};
}

void start(mini_grid& g, proc_id p, const reduce_spec& spec) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto e = dynamic_cast<collective_rider&>(r).reduce(now, spec, out);
    if (e)
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

/// Processors below `p` in tree `t` (p excluded).
std::vector<proc_id> below(const banyan::tree& t, proc_id p) {
  std::vector<proc_id> r;
  const auto& parent = t.parents();
  for (proc_id q = 0; q < parent.size(); ++q)
    for (proc_id a = parent[q]; a != no_proc; a = parent[a])
      if (a == p) {
        r.push_back(q);
        break;
      }
  return r;
}

/// The processor other than the root with the most processors below it in root 0's
/// latency tree.
proc_id busiest_relay(const mini_grid& g) {
  const auto t = g.tree_of({0, tree_kind::latency});
  proc_id best = no_proc;
  std::size_t most = 0;
  for (proc_id p = 1; p < t.parents().size(); ++p)
    if (auto n = below(t, p).size(); n > most) {
      most = n;
      best = p;
    }
  return best;
}

reduce_stats total(mini_grid& g, std::size_t n) {
  reduce_stats t;
  for (proc_id p = 0; p < n; ++p)
    if (g.rider_of(p)) {
      auto& s = rider(g, p).reducer().stats();
      t.acks += s.acks;
      t.resent += s.resent;
      t.asks += s.asks;
      t.adopted_tentative += s.adopted_tentative;
      t.tentative_counted += s.tentative_counted;
      t.superseded += s.superseded;
      t.tree_partials += s.tree_partials;
      t.passed_on += s.passed_on;
    }
  return t;
}

/// Runs `body(f, g)` for seeds 1-4, each on a tiny-2c8 grid of 8 processors whose trees
/// have formed, the fixture installed. Returns how many seeds ran `body` to its end.
template <class Body>
int on_formed_grids(Body body) {
  int done = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      fixture f;
      mini_grid g{tiny(), seed, eager()};
      f.install(g);
      g.start(8);
      g.run();
      body(f, g);
      ++done;
    }
  }
  return done;
}

/// The busiest relay R of root 0's latency tree (it has processors below it) and a late
/// processor outside R's subtree, neither R nor R's adopter (the next processor), counted
/// down from 7.
std::pair<proc_id, proc_id> relay_and_late(const mini_grid& g) {
  const auto relay = busiest_relay(g);
  BOOST_REQUIRE(relay != no_proc);
  const auto under = below(g.tree_of({0, tree_kind::latency}), relay);
  BOOST_REQUIRE(!under.empty());
  proc_id late = no_proc;
  for (proc_id p = 7; p > 0 && late == no_proc; --p)
    if (p != relay && p != relay + 1 && std::find(under.begin(), under.end(), p) == under.end())
      late = p;
  BOOST_REQUIRE(late != no_proc);
  return {relay, late};
}

/// No processor among 1-7 but `gone` holds a partial or a copy of one.
void check_nothing_held(mini_grid& g, proc_id gone) {
  for (proc_id p = 1; p < 8; ++p)
    if (p != gone)
      BOOST_TEST(!rider(g, p).reducer().holding(),
                 "processor " << p << ":\n" << rider(g, p).reducer().describe());
}

} // namespace

// No crash: every partial sent up the tree is acknowledged once, nothing is sent again,
// and nothing tentative is counted.
BOOST_AUTO_TEST_CASE(acknowledged_partials_without_a_crash_send_nothing_again) {
  fixture f;
  mini_grid g{tiny(), 2, eager()};
  f.install(g);
  g.start(8);
  g.run();
  for (proc_id p = 0; p < 8; ++p)
    start(g, p, sum_spec(1));
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
  auto s = total(g, 8);
  // One of its own from each non-root processor, and those a processor of a star
  // (reduce_config::star_bytes) passed on as they came.
  BOOST_TEST(s.tree_partials == 7u + s.passed_on);
  BOOST_TEST(s.acks == s.tree_partials);
  BOOST_TEST(s.resent == 0u);
  BOOST_TEST(s.asks == 0u);
  BOOST_TEST(s.tentative_counted == 0u);
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(rider(g, p).reducer().describe().find("unacked") == std::string::npos);
}

// The relay with the most below it never starts reduction 1 (a stopped process) and is
// then killed: its children's partials, which it held, are sent again once the tree heals
// around it, its own vnode is contributed by its adopter when the root's owner asks, and
// the reduction completes with every vnode counted exactly once (each contribution taken
// once: nobody asked the dead relay's application).
BOOST_AUTO_TEST_CASE(a_relay_crashing_mid_reduction_completes_counting_each_vnode_once) {
  on_formed_grids([](fixture& f, mini_grid& g) {
    const auto relay = busiest_relay(g);
    BOOST_REQUIRE(relay != no_proc);
    BOOST_REQUIRE(!below(g.tree_of({0, tree_kind::latency}), relay).empty());
    for (proc_id p = 0; p < 8; ++p)
      if (p != relay)
        start(g, p, sum_spec(1));
    g.run_for(100ms); // far beyond every timeout: the relay holds its children's partials
    BOOST_REQUIRE(f.reductions.results.empty());
    g.crash(relay);
    g.suspect(0, relay);
    g.run();
    BOOST_TEST(f.counted_once(1, 8) == "");
    BOOST_TEST(f.reductions.check(8) == ""); // every contribution taken once
    auto s = total(g, 8);
    BOOST_TEST(s.resent >= 1u);
    BOOST_TEST(s.adopted_tentative == 1u);
    BOOST_TEST(s.tentative_counted >= 2u); // a child's partial and the adopted vnode
    // The next reduction counts the adopted vnode through its new owner's history.
    for (proc_id p = 0; p < 8; ++p)
      if (p != relay)
        start(g, p, sum_spec(2));
    g.run();
    BOOST_TEST(f.counted_once(2, 8) == "");
  });
}

// The relay's partial had gone up before it crashed, but its acknowledgements to its
// children had not arrived (they are slowed down): the children send their partials
// again, and the root's owner, which holds the relay's partial covering them, drops the
// copies. The root waits for a late processor meanwhile; each vnode counts once.
BOOST_AUTO_TEST_CASE(a_partial_sent_again_that_reached_the_root_already_is_dropped) {
  on_formed_grids([](fixture& f, mini_grid& g) {
    const auto picked = relay_and_late(g);
    const proc_id relay = picked.first, late = picked.second;
    g.slow([relay](const wire::envelope& e) {
      return e.from == relay && std::holds_alternative<wire::reduce_ack>(e.body);
    }, 30s);
    for (proc_id p = 0; p < 8; ++p)
      if (p != late)
        start(g, p, sum_spec(1));
    g.run_for(100ms);
    BOOST_REQUIRE(f.reductions.results.empty());
    BOOST_REQUIRE(rider(g, 0).reducer().gathered_at_root(1)->includes(vnode_set{relay}));
    g.crash(relay);
    g.suspect(0, relay);
    g.run_for(5s);
    BOOST_REQUIRE(!g.sup(late)->own_vnodes().contains(relay)); // another adopted it
    start(g, late, sum_spec(1));
    g.run();
    BOOST_TEST(f.counted_once(1, 8) == "");
    BOOST_TEST(f.reductions.check(8) == "");
    auto s = total(g, 8);
    BOOST_TEST(s.resent >= 1u);
    BOOST_TEST(s.superseded >= 1u);
    BOOST_TEST(s.tentative_counted == 0u);
    BOOST_TEST(s.adopted_tentative == 0u); // the relay's own vnode was there: not asked
  });
}

// The overlap the other way round: the relay's partial is slow to arrive (in flight when
// it crashes), so its children's partials sent again and its adopter's contribution reach
// the root's owner first and wait there, apart. The relay's partial then arrives and
// covers them: they are dropped, it is counted. Its vnode's contribution was taken twice
// (at the relay, and at the adopter when asked), but the result counts it once.
BOOST_AUTO_TEST_CASE(tentative_partials_covered_by_one_that_comes_later_are_dropped) {
  on_formed_grids([](fixture& f, mini_grid& g) {
    const auto picked = relay_and_late(g);
    const proc_id relay = picked.first, late = picked.second;
    g.slow([relay](const wire::envelope& e) {
      return e.from == relay && (std::holds_alternative<wire::reduce_partial>(e.body) ||
                                 std::holds_alternative<wire::reduce_ack>(e.body));
    }, 3s);
    for (proc_id p = 0; p < 8; ++p)
      if (p != late)
        start(g, p, sum_spec(1));
    g.run_for(100ms);
    g.crash(relay); // its partial is on its way
    g.suspect(0, relay);
    g.run_for(2s);
    BOOST_REQUIRE(!g.sup(late)->own_vnodes().contains(relay)); // another adopted it
    BOOST_TEST(f.reductions.results.empty());
    {
      auto at_root = rider(g, 0).reducer().gathered_at_root(1);
      BOOST_REQUIRE(at_root.has_value());
      BOOST_TEST(at_root->includes(vnode_set{relay})); // the adopter's, held apart
      auto s = total(g, 8);
      BOOST_TEST(s.resent >= 1u);
      BOOST_TEST(s.adopted_tentative == 1u);
    }
    g.run_for(5s); // the relay's partial arrives
    start(g, late, sum_spec(1));
    g.run();
    BOOST_TEST(f.counted_once(1, 8) == "");
    auto s = total(g, 8);
    BOOST_TEST(s.superseded >= 2u);
    BOOST_TEST(s.tentative_counted == 0u);
  });
}

// Data really gone: the relay's parent G (not the root) and the relay R both crash after
// R's partial went up to G and R acknowledged its children (G had not passed it on: it
// waits for a processor that never starts). The children's partials lived only in R's
// partial, held by G: lost with both. The dead processors' own vnodes are contributed by
// their adopters, the other subtrees arrive, but the reduction does not complete; given
// up at the root's owner, it names exactly the vnodes of R's children's subtrees.
BOOST_AUTO_TEST_CASE(a_reduction_whose_partials_died_with_two_relays_fails_naming_them) {
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 12 && checked < 2; ++seed) {
    fixture f;
    mini_grid g{tiny(), seed, eager()};
    f.install(g);
    g.start(8);
    g.run();
    const auto t = g.tree_of({0, tree_kind::latency});
    const auto& parent = t.parents();
    // R with a child, whose parent G is not the root.
    proc_id relay = no_proc;
    for (proc_id p = 1; p < 8 && relay == no_proc; ++p)
      if (parent[p] != no_proc && parent[p] != 0 && !below(t, p).empty())
        relay = p;
    if (relay == no_proc)
      continue;
    ++checked;
    BOOST_TEST_CONTEXT("seed " << seed << ", relay " << relay) {
      const proc_id up = parent[relay];
      vnode_set lost;
      for (auto q : below(t, relay))
        lost.insert(q); // vnode v is processor v's in tiny-2c8
      // G never starts: it holds R's partial (and acknowledges nothing), while R, which
      // sent it, has acknowledged its children's.
      for (proc_id p = 0; p < 8; ++p)
        if (p != up)
          start(g, p, sum_spec(1));
      g.run_for(100ms);
      for (auto q : below(t, relay))
        if (parent[q] == relay)
          BOOST_REQUIRE(rider(g, q).reducer().describe().find("unacked") == std::string::npos);
      g.crash(relay);
      g.crash(up);
      g.suspect(0, relay);
      g.suspect(0, up);
      g.run();
      BOOST_TEST(f.reductions.results.empty());
      reduce_abandoned rep;
      g.with_rider(0, [&](mini_grid::rider& rd, timestamp now, outbox& out) {
        rep = dynamic_cast<collective_rider&>(rd).abandon(now, 1, out);
      });
      BOOST_TEST(rep.at_root);
      BOOST_TEST(rep.missing.to_string() == lost.to_string());
      BOOST_TEST(f.reductions.problems.empty());
    }
  }
  BOOST_TEST(checked >= 1);
}

// No crash, two graceful leaves. A relay R holds its child C's partial (R has not
// started reduction 1, so its own partial waits) when the root's owner leaves and hands
// the root vnode to R: what R held becomes the root's, and the reduction completes at R.
// C's partial is gathered at the root's owner and must be acknowledged then, as one that
// reached the root directly is. Unacknowledged, C resends it tentatively once R leaves in
// turn (C's parent changes), and the next owner of the root vnode, where the reduction
// is long complete elsewhere, holds that copy for good.
BOOST_AUTO_TEST_CASE(a_partial_taken_as_the_roots_when_the_root_vnode_moves_is_acknowledged) {
  BOOST_TEST(on_formed_grids([](fixture& f, mini_grid& g) {
    const auto relay = busiest_relay(g);
    BOOST_REQUIRE(relay != no_proc);
    const auto t = g.tree_of({0, tree_kind::latency});
    proc_id child = no_proc;
    for (proc_id p = 1; p < 8 && child == no_proc; ++p)
      if (t.parents()[p] == relay)
        child = p;
    BOOST_REQUIRE(child != no_proc);
    for (proc_id p = 0; p < 8; ++p)
      if (p != relay)
        start(g, p, sum_spec(1));
    g.run_for(100ms);
    BOOST_REQUIRE(f.reductions.results.empty());
    // C's partial waits at R, unacknowledged.
    BOOST_REQUIRE(rider(g, child).reducer().describe().find("unacked") != std::string::npos);
    g.leave(0, relay); // the root vnode moves to R
    g.run_for(1s);
    BOOST_REQUIRE(g.sup(relay)->own_vnodes().contains(0));
    start(g, relay, sum_spec(1));
    g.run_for(1s);
    BOOST_TEST(f.counted_once(1, 8) == "");
    BOOST_TEST(rider(g, child).reducer().describe().find("unacked") == std::string::npos,
               rider(g, child).reducer().describe());
    proc_id next = no_proc; // takes the root vnode from R
    for (proc_id p = 1; p < 8 && next == no_proc; ++p)
      if (p != relay && p != child)
        next = p;
    g.leave(relay, next);
    g.run();
    BOOST_TEST(f.counted_once(1, 8) == "");
    BOOST_TEST(total(g, 8).resent == 0u);
    check_nothing_held(g, relay);
  }) == 4);
}

// No crash, two graceful leaves. A child C of the root's owner sends its partial and
// leaves before the acknowledgement arrives (it is slowed down); the reduction completes
// at the root's owner, which then leaves too and hands the root vnode on. C's own leave
// orphans its kept partial (it has no parent any more); the acknowledgement that reaches
// it during `resend_grace` must be taken although C no longer takes part. Refused, C
// resends the partial tentatively to the next owner of the root vnode, which holds that
// copy for good (the result completed elsewhere).
BOOST_AUTO_TEST_CASE(a_leaver_takes_the_acknowledgement_of_a_partial_it_sent) {
  BOOST_TEST(on_formed_grids([](fixture& f, mini_grid& g) {
    const auto t = g.tree_of({0, tree_kind::latency});
    proc_id leaf = no_proc; // a child of the root's owner with no children of its own
    for (proc_id p = 1; p < 8 && leaf == no_proc; ++p)
      if (t.parents()[p] == 0 && below(t, p).empty())
        leaf = p;
    BOOST_REQUIRE(leaf != no_proc);
    g.slow([leaf](const wire::envelope& e) {
      return e.from == 0 && e.to == leaf && std::holds_alternative<wire::reduce_ack>(e.body);
    }, 100ms);
    for (proc_id p = 0; p < 8; ++p)
      start(g, p, sum_spec(1));
    g.run_for(50ms);
    BOOST_REQUIRE(f.counted_once(1, 8) == "");
    BOOST_REQUIRE(rider(g, leaf).reducer().describe().find("unacked") != std::string::npos);
    g.leave(leaf);
    g.run_for(20ms);
    proc_id next = no_proc; // takes the root vnode from 0
    for (proc_id p = 1; p < 8 && next == no_proc; ++p)
      if (p != leaf)
        next = p;
    g.leave(0, next);
    g.run();
    BOOST_TEST(f.counted_once(1, 8) == "");
    BOOST_TEST(total(g, 8).resent == 0u);
    check_nothing_held(g, leaf);
  }) == 4);
}

// A crash, then a graceful move of the root vnode. The relay R passes its partial on (it
// is counted at the root's owner, 0, and the result completes there) and crashes before
// its acknowledgements to its children get out. The children's partials survive in the
// result, but their senders cannot know it: their parent changed, so they send them
// again, tentatively (slowed down here), and meanwhile 0 leaves and hands the root vnode
// to N. The copies reach N, where reduction 1 never completed: N learns from 0's handoff
// that it completed at 0, and drops them (`superseded`). Nothing is held at the end, and
// the result was counted once.
BOOST_AUTO_TEST_CASE(a_copy_sent_after_a_crash_is_not_held_at_a_later_owner_of_the_root) {
  BOOST_TEST(on_formed_grids([](fixture& f, mini_grid& g) {
    const auto relay = busiest_relay(g);
    BOOST_REQUIRE(relay != no_proc);
    const auto t = g.tree_of({0, tree_kind::latency});
    std::vector<proc_id> kids;
    for (proc_id p = 1; p < 8; ++p)
      if (t.parents()[p] == relay)
        kids.push_back(p);
    BOOST_REQUIRE(!kids.empty());
    proc_id next = no_proc; // takes the root vnode from 0: not R, not one of R's children
    for (proc_id p = 1; p < 8 && next == no_proc; ++p)
      if (p != relay && std::find(kids.begin(), kids.end(), p) == kids.end())
        next = p;
    BOOST_REQUIRE(next != no_proc);
    g.slow([relay](const wire::envelope& e) {
      if (e.from == relay && std::holds_alternative<wire::reduce_ack>(e.body))
        return true; // never gets out: R crashes first
      auto* p = std::get_if<wire::reduce_partial>(&e.body);
      return p && p->tentative; // the copies arrive after the root vnode moved
    }, 3s);
    for (proc_id p = 0; p < 8; ++p)
      start(g, p, sum_spec(1));
    g.run_for(100ms);
    BOOST_REQUIRE(f.counted_once(1, 8) == ""); // complete at 0, R's partial counted
    for (auto k : kids)
      BOOST_REQUIRE(rider(g, k).reducer().describe().find("unacked") != std::string::npos);
    g.crash(relay);
    g.suspect(0, relay);
    for (auto k : kids)
      g.suspect(k, relay);
    g.run_for(400ms); // the tree heals; after `resend_grace` the children send copies
    g.leave(0, next);
    g.run();
    BOOST_REQUIRE(g.sup(next)->own_vnodes().contains(0));
    BOOST_TEST(f.counted_once(1, 8) == "");
    auto s = total(g, 8);
    BOOST_TEST(s.resent >= 1u);
    BOOST_TEST(s.superseded >= 1u);
    check_nothing_held(g, relay);
  }) == 4);
}

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "banyan/core/supervisor_view.hpp"
#include "core/mini_grid.hpp"
#include "core/scripted_peers.hpp"
#include "core/random_topology.hpp"
#include "core/supervisor_checks.hpp"

using namespace banyan;
using banyan::test::mini_grid;

using namespace banyan::test::supervisor_checks;

namespace {

supervisor_config crash_cfg() {
  supervisor_config cfg;
  cfg.crash_timeout = std::chrono::seconds(2);
  return cfg;
}

/// Without suspicion: the first evidence declares a member crashed, as a suspicion does
/// when neither the suspect nor any helper answers (the suspect frozen, or cut off).
supervisor_config eager_cfg(supervisor_config cfg = {}) {
  cfg.suspect_timeout = duration{0};
  return cfg;
}

/// The crash events of kind `k` reported so far.
std::vector<std::pair<proc_id, tree_event>> crash_events(const mini_grid& g, tree_event::kind k) {
  std::vector<std::pair<proc_id, tree_event>> r;
  for (auto& e : g.crash_events())
    if (e.second.what == k)
      r.push_back(e);
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_silent_crash_is_detected_and_the_successor_adopts_its_vnodes) {
  // Nobody sends to the crashed processor: only the watch of its predecessor finds it.
  mini_grid g{tiny(), 11, crash_cfg()};
  g.start(0, 4);
  g.run_for(std::chrono::seconds(30));
  BOOST_TEST_REQUIRE(crash_events(g, tree_event::kind::crash_detected).empty());
  const auto crashed_at = g.now();
  g.crash(3);
  g.run_for(std::chrono::seconds(10));
  auto detected = crash_events(g, tree_event::kind::crash_detected);
  BOOST_TEST_REQUIRE(!detected.empty());
  BOOST_TEST(detected.front().first == 2u); // its predecessor watches it
  BOOST_TEST(detected.front().second.peer == 3u);
  auto adopted = crash_events(g, tree_event::kind::adopted);
  BOOST_TEST_REQUIRE(adopted.size() == 1u);
  BOOST_TEST(adopted[0].first == 4u); // the next member after 3
  BOOST_TEST(adopted[0].second.peer == 3u);
  BOOST_TEST((adopted[0].second.vnodes == vnode_set::range(12, 16)));
  // Bounded: the timeout, one watch period, the suspicion, the adoption delay, and a few
  // WAN trips.
  auto cfg = crash_cfg();
  BOOST_TEST((adopted[0].second.at - crashed_at
              <= cfg.crash_timeout + cfg.crash_timeout / 4 + cfg.suspect_timeout +
                   cfg.adopt_delay + std::chrono::milliseconds(500)));
  for (proc_id p = 0; p < 8; ++p)
    if (p != 3)
      BOOST_TEST(!g.sup(p)->is_member(3));
  check_routing(g, 32);
  BOOST_TEST((g.sup(4)->own_vnodes() == vnode_set::range(12, 20)));
}

BOOST_AUTO_TEST_CASE(concurrent_detections_converge_to_one_owner) {
  // Every member finds processor 5 unreachable at the same moment (each sends the notice
  // to all): one adoption, and every table names the same owner. Without suspicion all
  // seven declare it, each before hearing another's notice; with it, seven suspicions
  // (each asking helpers that are suspectors too) end in at least one verdict.
  for (bool suspicion : {false, true}) {
    mini_grid g{tiny(), 12, suspicion ? supervisor_config{} : eager_cfg()};
    g.start(0, 4);
    g.run();
    g.crash(5);
    for (proc_id p = 0; p < 8; ++p)
      if (p != 5)
        g.suspect(p, 5);
    g.run();
    const auto detected = crash_events(g, tree_event::kind::crash_detected).size();
    if (suspicion)
      BOOST_TEST(detected >= 1u);
    else
      BOOST_TEST(detected == 7u);
    auto adopted = crash_events(g, tree_event::kind::adopted);
    BOOST_TEST_REQUIRE(adopted.size() == 1u, "suspicion " << suspicion);
    BOOST_TEST(adopted[0].first == 6u);
    check_routing(g, 32);
    check_trees(g);
  }
}

BOOST_AUTO_TEST_CASE(members_with_different_views_claim_and_the_higher_epoch_wins) {
  // 3 and 4 crash together; 2 learns of 4 first, 6 only of 3: each computes a different
  // adopter for 3 at first (5 and 4), the claims may race, and the tables converge.
  for (std::uint64_t seed = 20; seed < 25; ++seed) {
    mini_grid g{tiny(), seed};
    g.start(0, 4);
    g.run();
    g.crash(3);
    g.crash(4);
    g.suspect(2, 4);
    g.suspect(6, 3);
    g.suspect(0, 3);
    g.run();
    BOOST_TEST_REQUIRE(!crash_events(g, tree_event::kind::adopted).empty());
    check_routing(g, 32);
    check_trees(g);
    // 3's and 4's vnodes ended with 5, the next live member after both.
    BOOST_TEST((g.sup(5)->own_vnodes() == vnode_set::range(12, 24)), "seed " << seed);
  }
}

BOOST_AUTO_TEST_CASE(a_wrongly_suspected_processor_learns_it_lost_its_vnodes) {
  // 2 takes 3 for crashed although it runs: 3 hears it, comes back as a new incarnation
  // without vnodes (a `disowned` event), 4 adopts them, and nobody owns them twice.
  // (Without suspicion, one refused connection is enough to take it for crashed.)
  mini_grid g{tiny(), 13, eager_cfg()};
  g.start(0, 4);
  g.run();
  g.suspect(2, 3);
  g.run();
  auto disowned = crash_events(g, tree_event::kind::disowned);
  BOOST_TEST_REQUIRE(disowned.size() == 1u);
  BOOST_TEST(disowned[0].first == 3u);
  BOOST_TEST((disowned[0].second.vnodes == vnode_set::range(12, 16)));
  auto adopted = crash_events(g, tree_event::kind::adopted);
  BOOST_TEST_REQUIRE(adopted.size() == 1u);
  BOOST_TEST(adopted[0].first == 4u);
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(g.sup(p)->is_member(3), "processor " << p << " lost 3");
  BOOST_TEST(g.sup(3)->own_vnodes().empty());
  check_routing(g, 32);
  check_trees(g);
}

BOOST_AUTO_TEST_CASE(a_suspect_that_hears_the_adopters_claim_first_reports_the_loss_once) {
  // As above, but the notice from 2 to 3 is slow (over TCP: the suspect, waking, reads
  // the adopter's connection first), so 4's claim over 3's vnodes reaches 3 before it
  // knows it was taken for crashed. The vnodes are gone the moment the claim lands:
  // that is when 3 must report them lost, once, and not again when the notice follows.
  mini_grid g{tiny(), 13, eager_cfg()};
  g.start(0, 4);
  g.run();
  g.slow([](const wire::envelope& e) {
    return e.from == 2 && e.to == 3 && std::holds_alternative<wire::member_left>(e.body);
  }, std::chrono::seconds(1));
  g.suspect(2, 3);
  g.run_for(std::chrono::milliseconds(900)); // claimed (adopt_delay 100 ms), not yet told
  BOOST_TEST_REQUIRE(crash_events(g, tree_event::kind::adopted).size() == 1u);
  BOOST_TEST_REQUIRE(g.sup(3)->own_vnodes().empty()); // the claim has landed
  auto disowned = crash_events(g, tree_event::kind::disowned);
  BOOST_TEST_REQUIRE(disowned.size() == 1u);
  BOOST_TEST(disowned[0].first == 3u);
  BOOST_TEST(disowned[0].second.peer == 4u); // the adopter told us
  BOOST_TEST((disowned[0].second.vnodes == vnode_set::range(12, 16)));
  g.run(); // the notice: 3 comes back as a new incarnation, nothing more to report
  BOOST_TEST(crash_events(g, tree_event::kind::disowned).size() == 1u);
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(g.sup(p)->is_member(3), "processor " << p << " lost 3");
  BOOST_TEST(g.sup(3)->own_vnodes().empty());
  BOOST_TEST((g.sup(4)->own_vnodes() == vnode_set::range(12, 20)));
  check_routing(g, 32);
  check_trees(g);
}

BOOST_AUTO_TEST_CASE(one_refused_connection_does_not_evict_a_live_member) {
  // 2 cannot reach 3 at all (as when strangers hold every handshake slot of 3 against
  // it), but the others can. 2's suspicions of 3, from the refused connection and then
  // from its watch (3 is its successor), are each cleared by the helpers it asks: 3 stays
  // a member with its vnodes for as long as the link stays cut. Without suspicion the
  // same cut evicts it.
  for (bool suspicion : {true, false}) {
    mini_grid g{tiny(), 13, suspicion ? crash_cfg() : eager_cfg(crash_cfg())};
    g.start(0, 4);
    g.run_for(std::chrono::seconds(20));
    g.cut({2}, {3});
    g.suspect(2, 3);
    g.run_for(std::chrono::seconds(30));
    auto detected = crash_events(g, tree_event::kind::crash_detected);
    if (!suspicion) {
      BOOST_TEST(!detected.empty()); // what suspicion prevents
      continue;
    }
    for (auto& [p, e] : detected)
      BOOST_TEST(false, "processor " << p << " took " << e.peer << " for crashed");
    // Each suspicion was reported, and so was its end.
    std::size_t suspected = 0, cleared = 0;
    for (auto& [p, e] : g.suspicion_events()) {
      BOOST_TEST(p == 2u);
      BOOST_TEST(e.peer == 3u);
      (e.what == tree_event::kind::suspected ? suspected : cleared) += 1;
    }
    BOOST_TEST(suspected >= 2u); // the refused connection's, and the watch's
    BOOST_TEST(cleared == suspected);
    BOOST_TEST(crash_events(g, tree_event::kind::disowned).empty());
    for (proc_id p = 0; p < 8; ++p)
      BOOST_TEST(g.sup(p)->is_member(3), "processor " << p << " lost 3");
    BOOST_TEST((g.sup(3)->own_vnodes() == vnode_set::range(12, 16)));
    check_routing(g, 32);
  }
}

BOOST_AUTO_TEST_CASE(a_crash_is_declared_once_the_suspect_answers_nobody) {
  // 0 finds 5 unreachable. Crashed: 0's own ping and every helper's connection are
  // refused, and the helpers say so, so 0 declares it at once, long before the timeout.
  // Frozen (a stopped process: its connections stay open, nothing answers): nobody can
  // tell, and the timeout decides. Either way 6 adopts 5's vnodes.
  for (bool frozen : {false, true}) {
    mini_grid g{tiny(), 12};
    g.start(0, 4);
    g.run();
    if (frozen)
      g.freeze(5, std::chrono::seconds(5));
    else
      g.crash(5);
    const auto suspected_at = g.now();
    g.suspect(0, 5);
    g.run_for(std::chrono::seconds(3));
    auto detected = crash_events(g, tree_event::kind::crash_detected);
    BOOST_TEST_REQUIRE(detected.size() == 1u, "frozen " << frozen);
    BOOST_TEST(detected[0].first == 0u);
    BOOST_TEST(detected[0].second.peer == 5u);
    // Suspected first, at the refused connection; never cleared.
    BOOST_TEST_REQUIRE(!g.suspicion_events().empty());
    BOOST_TEST(g.suspicion_events()[0].first == 0u);
    BOOST_TEST(g.suspicion_events()[0].second.peer == 5u);
    BOOST_TEST((g.suspicion_events()[0].second.what == tree_event::kind::suspected));
    BOOST_TEST((g.suspicion_events()[0].second.at == suspected_at));
    for (auto& [p, e] : g.suspicion_events())
      BOOST_TEST((e.what != tree_event::kind::suspicion_cleared), "processor " << p);
    const supervisor_config cfg;
    const auto took = detected[0].second.at - suspected_at;
    if (frozen)
      BOOST_TEST((took == cfg.suspect_timeout));
    else
      BOOST_TEST((took < cfg.suspect_timeout / 10), "took " << to_ms(took) << " ms");
    auto adopted = crash_events(g, tree_event::kind::adopted);
    BOOST_TEST_REQUIRE(adopted.size() == 1u);
    BOOST_TEST(adopted[0].first == 6u);
    BOOST_TEST((adopted[0].second.vnodes == vnode_set::range(20, 24)));
    if (frozen)
      continue; // (it wakes later and yields: a_watcher_that_did_not_run_...)
    g.run();
    for (proc_id p = 0; p < 8; ++p)
      if (p != 5)
        BOOST_TEST(!g.sup(p)->is_member(5));
    check_routing(g, 32);
    check_trees(g);
  }
}

BOOST_AUTO_TEST_CASE(a_suspect_cut_off_from_the_suspector_and_every_helper_is_declared) {
  // 3 runs, but is cut off from 2 and from every member 2 could ask: nobody can vouch for
  // it, and 2 declares it crashed (the bound's assumption does not hold).
  mini_grid g{tiny(), 15};
  g.start(0, 4);
  g.run();
  g.cut({3}, {0, 1, 2, 4, 5, 6, 7});
  g.suspect(2, 3);
  g.run_for(std::chrono::seconds(2));
  auto detected = crash_events(g, tree_event::kind::crash_detected);
  BOOST_TEST_REQUIRE(!detected.empty());
  BOOST_TEST(detected[0].first == 2u);
  BOOST_TEST(detected[0].second.peer == 3u);
}

BOOST_AUTO_TEST_CASE(a_healed_partition_merges_into_one_membership_with_one_owner_per_vnode) {
  // The grid splits in two for 30 s: each side takes the other's members for crashed and
  // adopts their vnodes, so both own every vnode. Then the links come back. The side with
  // fewer members (equal: the one without processor 0) yields: its members report their
  // vnodes disowned and join the other side; in the end every processor is a member of
  // one membership, every table names the same owner for each vnode, and each vnode has
  // exactly one owner.
  struct split {
    std::vector<proc_id> loser, winner;
  };
  for (const auto& s : {split{{0, 1, 2}, {3, 4, 5, 6, 7}}, split{{3}, {0, 1, 2, 4, 5, 6, 7}},
                        split{{4, 5, 6, 7}, {0, 1, 2, 3}}}) {
    mini_grid g{tiny(), 30 + s.loser.size(), crash_cfg()};
    g.start(0, 4);
    g.run_for(std::chrono::seconds(20));
    g.cut(s.loser, s.winner);
    g.run_for(std::chrono::seconds(30));
    for (auto side : {&s.loser, &s.winner})
      for (auto p : *side) {
        BOOST_TEST_REQUIRE(g.sup(p)->members() == *side, "processor " << p << " before the heal");
        vnode_set side_owns; // the side adopted the other's vnodes: it owns them all
        for (auto q : *side)
          side_owns |= g.sup(p)->routes().owned_by(q);
        BOOST_TEST_REQUIRE((side_owns == vnode_set::range(0, 32)), "processor " << p);
      }
    // Each side holds the other's members buried (taken for crashed, its own verdict or
    // a notice).
    for (auto p : s.loser)
      for (auto q : s.winner)
        BOOST_TEST_REQUIRE(g.sup(p)->buried(q), "processor " << p << " of " << q);
    for (auto p : s.winner)
      for (auto q : s.loser)
        BOOST_TEST_REQUIRE(g.sup(p)->buried(q), "processor " << p << " of " << q);
    const auto healed_at = g.now();
    g.heal();
    g.run_for(std::chrono::seconds(60));
    for (proc_id p = 0; p < 8; ++p) {
      BOOST_TEST_REQUIRE((g.sup(p)->state() == supervisor::status::member), "processor " << p);
      BOOST_TEST(g.sup(p)->members().size() == 8u, "processor " << p << " knows "
                                                                << g.sup(p)->members().size());
      for (proc_id q = 0; q < 8; ++q)
        BOOST_TEST(!g.sup(p)->buried(q), "processor " << p << " still buries " << q);
    }
    // The winners saw every loser return; the losers every winner.
    std::map<proc_id, std::set<proc_id>> returned;
    for (auto& [p, e] : g.burial_events())
      if (e.what == tree_event::kind::member_returned && e.at >= healed_at)
        returned[p].insert(e.peer);
    for (auto p : s.winner)
      BOOST_TEST((returned[p] == std::set<proc_id>(s.loser.begin(), s.loser.end())),
                 "processor " << p);
    for (auto p : s.loser)
      BOOST_TEST((returned[p] == std::set<proc_id>(s.winner.begin(), s.winner.end())),
                 "processor " << p);
    check_routing(g, 32);
    check_trees(g);
    // The losers learnt that they lost their vnodes; the winners lost none.
    std::set<proc_id> disowned_after;
    for (auto& [p, e] : crash_events(g, tree_event::kind::disowned))
      if (e.at >= healed_at && !e.vnodes.empty())
        disowned_after.insert(p);
    BOOST_TEST((disowned_after == std::set<proc_id>(s.loser.begin(), s.loser.end())));
  }
}

BOOST_AUTO_TEST_CASE(a_healed_partition_merges_when_what_was_sent_during_it_arrives_late) {
  // As over TCP: the links between the sides stall (nothing arrives, nothing is
  // refused) and, at the heal, everything sent over them while the partition lasted
  // arrives: each side's crash notices about the other's members (the buried members
  // among their recipients), adoption claims, probes. That news is from processors the
  // recipients hold for crashed, and must not be taken: the merge rule alone decides,
  // so the side with fewer members (equal: the one without processor 0) yields, and
  // only its members report their vnodes disowned.
  struct split {
    std::vector<proc_id> loser, winner;
  };
  for (const auto& s : {split{{0, 1, 2}, {3, 4, 5, 6, 7}}, split{{0, 1}, {2, 3, 4}},
                        split{{4, 5, 6, 7}, {0, 1, 2, 3}}}) {
    const auto n = s.loser.size() + s.winner.size();
    mini_grid g{tiny(), 50 + s.loser.size(), crash_cfg()};
    g.start(n, 4);
    g.run_for(std::chrono::seconds(20));
    for (proc_id p = 0; p < n; ++p)
      BOOST_TEST_REQUIRE(g.sup(p)->members().size() == n);
    g.stall(s.loser, s.winner);
    g.run_for(std::chrono::seconds(30));
    for (auto side : {&s.loser, &s.winner})
      for (auto p : *side)
        BOOST_TEST_REQUIRE(g.sup(p)->members() == *side, "processor " << p << " before the heal");
    const auto healed_at = g.now();
    g.heal();
    g.run_for(std::chrono::seconds(60));
    for (proc_id p = 0; p < n; ++p) {
      BOOST_TEST_REQUIRE((g.sup(p)->state() == supervisor::status::member), "processor " << p << ": " << g.sup(p)->describe());
      BOOST_TEST(g.sup(p)->members().size() == n, "processor " << p << " knows "
                                                              << g.sup(p)->members().size());
    }
    check_routing(g, 4 * n);
    check_trees(g);
    std::set<proc_id> disowned_after;
    for (auto& [p, e] : crash_events(g, tree_event::kind::disowned))
      if (e.at >= healed_at && !e.vnodes.empty())
        disowned_after.insert(p);
    BOOST_TEST((disowned_after == std::set<proc_id>(s.loser.begin(), s.loser.end())));
  }
}

BOOST_AUTO_TEST_CASE(a_watcher_that_did_not_run_does_not_bury_its_successor) {
  // Processor 2 is frozen (SIGSTOP) for 10 s, far beyond crash_timeout: its own watch of
  // 3 fires late, and must not take 3's silence, which was its own, for a crash.
  mini_grid g{tiny(), 14, crash_cfg()};
  g.start(0, 4);
  // Watch ticks of 2 fall on multiples of 500 ms here: freeze it between two, after the
  // answer to the last ping came, so that the late tick comes before anything from 3.
  g.run_for(std::chrono::milliseconds(30250));
  g.freeze(2, std::chrono::seconds(10));
  g.run_for(std::chrono::seconds(20));
  for (auto& [p, e] : crash_events(g, tree_event::kind::crash_detected))
    BOOST_TEST(e.peer == 2u, "processor " << p << " took " << e.peer << " for crashed");
  for (auto& [p, e] : crash_events(g, tree_event::kind::adopted))
    BOOST_TEST(e.peer == 2u);
  // 2 itself was taken for crashed by 1, and yielded when it woke.
  BOOST_TEST(crash_events(g, tree_event::kind::disowned).size() == 1u);
  BOOST_TEST(g.sup(2)->own_vnodes().empty());
  BOOST_TEST((g.sup(3)->own_vnodes() == vnode_set::range(8, 16)));
  check_routing(g, 32);
}

// --- burials: who was taken for crashed ---------------------------------------------

namespace {

/// The burial events (member_buried, member_returned) of kind `k` reported so far.
std::vector<std::pair<proc_id, tree_event>> burial_events(const mini_grid& g,
                                                          tree_event::kind k) {
  std::vector<std::pair<proc_id, tree_event>> r;
  for (auto& e : g.burial_events())
    if (e.second.what == k)
      r.push_back(e);
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_crash_verdict_and_a_crash_notice_bury_and_a_return_lifts_it) {
  // 0 takes 5 for crashed (its own verdict); the others hear it from 0's crash notice.
  // Every member holds 5 buried, and reports it once. Then 5 starts again as a new
  // incarnation and joins through 6: every member reports it returned, and none holds
  // it buried any more.
  mini_grid g{tiny(), 12, eager_cfg()};
  g.start(0, 4);
  g.run();
  std::vector<wire::member_left> notices;
  g.slow([&](const wire::envelope& e) {
    if (auto* l = std::get_if<wire::member_left>(&e.body); l && e.from == 0 && l->who == 5)
      notices.push_back(*l);
    return false;
  }, duration{0});
  g.crash(5);
  g.suspect(0, 5);
  g.run();
  auto detected = crash_events(g, tree_event::kind::crash_detected);
  BOOST_TEST_REQUIRE(!detected.empty());
  BOOST_TEST(detected[0].first == 0u);
  BOOST_TEST_REQUIRE(!notices.empty()); // 0's crash notice, to every member
  for (auto& n : notices) {
    BOOST_TEST(n.crashed);
    BOOST_TEST(n.routes.empty());
  }
  std::map<proc_id, int> buried_at;
  for (auto& [p, e] : burial_events(g, tree_event::kind::member_buried)) {
    BOOST_TEST(e.peer == 5u, "processor " << p << " buried " << e.peer);
    ++buried_at[p];
  }
  for (proc_id p = 0; p < 8; ++p) {
    if (p == 5)
      continue;
    BOOST_TEST(g.sup(p)->buried(5), "processor " << p);
    BOOST_TEST(buried_at[p] == 1, "processor " << p << " reported " << buried_at[p]);
    for (proc_id q = 0; q < 8; ++q)
      if (q != 5)
        BOOST_TEST(!g.sup(p)->buried(q), "processor " << p << " buried " << q);
  }
  BOOST_TEST(burial_events(g, tree_event::kind::member_returned).empty());

  g.join(5, 6, {});
  g.run();
  BOOST_TEST_REQUIRE((g.sup(5)->state() == supervisor::status::member));
  std::map<proc_id, proc_id> returned_via;
  for (auto& [p, e] : burial_events(g, tree_event::kind::member_returned)) {
    BOOST_TEST(e.peer == 5u);
    BOOST_TEST(returned_via.count(p) == 0u, "processor " << p << " reported it twice");
    returned_via[p] = e.via;
  }
  for (proc_id p = 0; p < 8; ++p) {
    BOOST_TEST(!g.sup(p)->buried(5), "processor " << p);
    if (p == 5)
      continue;
    BOOST_TEST(g.sup(p)->is_member(5), "processor " << p);
    BOOST_TEST_REQUIRE(returned_via.count(p) == 1u, "processor " << p);
    if (p == 6)
      BOOST_TEST(returned_via[p] == 5u); // it asked 6 itself to be let in
    else
      BOOST_TEST((returned_via[p] == 6u || returned_via[p] == 5u)); // 6 told it, or 5 did
  }
}

BOOST_AUTO_TEST_CASE(a_graceful_leave_never_buries_the_leaver) {
  // Processors 0-2 (cluster A) are members; 4 (cluster B, across the wide-area link)
  // joins through 0, with vnodes (0 owns 2 and gives it a share) or without (0 owns 1 and
  // has none to give). Then 3 (cluster A) joins through 1 at the moment 4 leaves. 4 does
  // not hear of 3 before it is gone (the news is held on the way to it), so its
  // `member_left` reaches 3 only as a relay from 1, its sponsor: a notice from a third
  // party about a member 3 knows, without routes when 4 owned nothing: the shape of a
  // crash notice. Nobody may take 4 for crashed: a leaver drains its streams after it
  // left, and what it sends then is to be taken.
  for (vnode_id per_proc : {1u, 2u}) {
    mini_grid g{tiny(), 17};
    g.start(3, per_proc);
    g.run();
    g.join(4, 0, {});
    g.run();
    BOOST_TEST_REQUIRE((g.sup(4)->state() == supervisor::status::member));
    const bool with_vnodes = per_proc == 2;
    BOOST_TEST_REQUIRE(g.sup(4)->own_vnodes().empty() == !with_vnodes, "per_proc " << per_proc);
    std::vector<wire::member_left> relayed; // 4's notice, on its way to 3 from another
    g.slow([&](const wire::envelope& e) {
      if (auto* l = std::get_if<wire::member_left>(&e.body); l && l->who == 4 && e.to == 3
                                                              && e.from != 4)
        relayed.push_back(*l);
      return e.to == 4 && std::holds_alternative<wire::member_joined>(e.body);
    }, std::chrono::milliseconds(50));
    g.join(3, 1, {});
    g.leave(4);
    g.run();
    BOOST_TEST_REQUIRE((g.sup(4)->state() == supervisor::status::left), "per_proc " << per_proc);
    BOOST_TEST_REQUIRE((g.sup(3)->state() == supervisor::status::member), "per_proc " << per_proc);
    BOOST_TEST_REQUIRE(!relayed.empty(), "per_proc " << per_proc);
    for (auto& l : relayed) {
      BOOST_TEST(!l.crashed, "per_proc " << per_proc);
      BOOST_TEST(l.routes.empty() == !with_vnodes);
    }
    for (proc_id p = 0; p < 4; ++p) {
      BOOST_TEST(!g.sup(p)->is_member(4), "processor " << p << ", per_proc " << per_proc);
      BOOST_TEST(!g.sup(p)->buried(4), "processor " << p << ", per_proc " << per_proc);
    }
    for (auto& [p, e] : g.burial_events())
      BOOST_TEST(false, "processor " << p << " reported a burial of " << e.peer);
    check_routing(g, 3 * per_proc);
  }
}

BOOST_AUTO_TEST_CASE(a_leave_announced_after_a_crash_notice_lifts_the_burial) {
  // 2 takes 3 for crashed while 3 leaves (eager: one refused connection suffices), and
  // 2's notice reaches 0 before 3's own `member_left`: 0 buries 3, then hears that the
  // same incarnation left of its own accord. A graceful leaver is not buried.
  mini_grid g{tiny(), 13, eager_cfg()};
  g.start(0, 4);
  g.run();
  g.slow([](const wire::envelope& e) {
    return e.from == 3 && e.to == 0 && std::holds_alternative<wire::member_left>(e.body);
  }, std::chrono::seconds(1));
  g.leave(3);
  g.run_for(std::chrono::microseconds(1)); // 3 has offered its vnodes, not yet left
  BOOST_TEST_REQUIRE((g.sup(3)->state() == supervisor::status::leaving));
  g.suspect(2, 3);
  g.run_for(std::chrono::milliseconds(500)); // 2's notice is in, 3's is not
  BOOST_TEST_REQUIRE(!g.sup(0)->is_member(3));
  BOOST_TEST_REQUIRE(g.sup(0)->buried(3));
  g.run();
  BOOST_TEST(!g.sup(0)->buried(3));
  BOOST_TEST(!g.sup(0)->is_member(3));
}

// --- structure-preserving repair (step-parents) -----------------------------------


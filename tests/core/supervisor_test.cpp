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

BOOST_AUTO_TEST_CASE(trees_form_span_and_stop_measuring) {
  mini_grid g{tiny(), 1};
  g.start();
  g.run();
  check_settled(g, 8);
  for (proc_id p = 0; p < 8; ++p) {
    BOOST_TEST(g.sup(p)->all_parented());
    // at least the 10 extra probes, and not endlessly many
    auto probes = g.sup(p)->probes_completed() + g.sup(p)->probes_abandoned();
    BOOST_TEST(probes >= 10u);
    BOOST_TEST(probes < 200u);
  }
}

// A probe reply leaves the candidate's view out only when the prober held that very view
// when it asked (view_digest.hpp); views that differ still reach the prober (checked by
// the trees and routing tables converging after churn).
BOOST_AUTO_TEST_CASE(probe_replies_leave_out_only_a_view_the_prober_holds) {
  mini_grid g{tiny(), 4};
  struct seen_view {
    std::vector<wire::member> members;
    routing_table routes;
    bool same_as(const seen_view& b) const { return members == b.members && routes == b.routes; }
  };
  auto view_of = [&](proc_id p) {
    seen_view v;
    auto s = g.sup(p);
    for (auto m : s->members())
      v.members.push_back(*s->member_info(m));
    v.routes = s->routes();
    return v;
  };
  std::map<std::pair<proc_id, std::uint64_t>, seen_view> asked; // (prober, seq)
  std::size_t omitted = 0, carried = 0, wrongly_omitted = 0;
  g.slow([&](const wire::envelope& e) { // sees every message as it is sent; slows none
    if (auto* q = std::get_if<wire::bw_request>(&e.body))
      asked[{e.from, q->seq}] = view_of(e.from);
    if (auto* r = std::get_if<wire::bw_reply>(&e.body)) {
      if (!r->view_omitted) {
        ++carried;
        return false;
      }
      ++omitted;
      BOOST_TEST((r->members.empty() && r->departed.empty() && r->routes.empty()));
      auto it = asked.find({e.to, r->seq});
      if (it == asked.end() || !it->second.same_as(view_of(e.from)))
        ++wrongly_omitted;
    }
    return false;
  }, duration{0});
  g.start();
  g.run();
  check_settled(g, 8);
  // Founded with one view, and nothing changed it: every reply leaves it out.
  BOOST_TEST(omitted > 0u);
  BOOST_TEST(carried == 0u);
  g.leave(3, 2);
  g.leave(6);
  g.run();
  g.join_again(6, 1, vnode_set::range(6, 7));
  g.run();
  check_settled(g, 8);
  BOOST_TEST(wrongly_omitted == 0u);
}

BOOST_AUTO_TEST_CASE(a_download_is_timed_from_its_mark_not_from_an_inflated_rtt) {
  // Two processors joined by a 100 Mbit (12.5 MB/s) link of 2 ms RTT. Every ping from 0
  // waits 8 ms more (queued behind a broadcast's segments), so each of 0's RTT samples,
  // the best one too, is 10 ms. Subtracting that from a download of 12.5 ms left 2.5 ms
  // for 128 KiB: 52 MB/s, four times the link, kept for good as the best figure.
  // Timed from the candidate's mark, the download measures the link.
  auto topo = parse_topology("topology two\nsend_overhead 0us\ndefault nic 1Gbit\n"
                             "group A procs 1 rtt 0.2ms\ngroup B procs 1 rtt 0.2ms\n"
                             "link A B rtt 2ms bw 100Mbit\n");
  BOOST_TEST_REQUIRE(topo.has_value());
  mini_grid g{*topo, 5};
  g.slow([](const wire::envelope& e) {
    return e.from == 0 && std::holds_alternative<wire::ping>(e.body);
  }, std::chrono::milliseconds(8));
  g.start();
  g.run();
  auto rtt = g.sup(0)->measured_rtt(1);
  BOOST_TEST_REQUIRE(rtt.has_value());
  BOOST_TEST(rtt->count() >= std::chrono::nanoseconds(std::chrono::milliseconds(10)).count());
  auto bw = g.sup(0)->measured_bw(1);
  BOOST_TEST_REQUIRE(bw.has_value());
  BOOST_TEST(*bw <= 12.5e6 * 1.01, "measured " << *bw / 1e6 << " MB/s");
  BOOST_TEST(*bw >= 12.5e6 * 0.95, "measured " << *bw / 1e6 << " MB/s");
}

BOOST_AUTO_TEST_CASE(same_seed_same_trees_other_seed_other_trees) {
  auto build = [](std::uint64_t seed) {
    mini_grid g{tiny(), seed};
    g.start();
    g.run();
    std::vector<std::vector<proc_id>> all;
    for (proc_id r = 0; r < 8; ++r)
      for (auto k : {tree_kind::latency, tree_kind::bandwidth})
        all.push_back(g.tree_of({r, k}).parents());
    return all;
  };
  BOOST_TEST((build(3) == build(3)));
  BOOST_TEST((build(3) != build(4)));
}

BOOST_AUTO_TEST_CASE(latency_trees_cross_the_wan_rarely) {
  mini_grid g{tiny(), 2};
  g.start();
  g.run();
  auto cl = g.topo().cluster_of();
  double total = 0;
  for (proc_id r = 0; r < 8; ++r)
    total += static_cast<double>(g.tree_of({r, tree_kind::latency}).cross_edges(cl));
  // 2 clusters: one WAN edge is the minimum; the rule allows a few stragglers.
  BOOST_TEST(total / 8 <= 2.0);
}

BOOST_AUTO_TEST_CASE(leave_hands_vnodes_over_and_trees_heal) {
  mini_grid g{tiny(), 5};
  g.start();
  g.run();
  g.leave(3, 2);
  g.leave(6);
  g.run();
  check_settled(g, 8);
  BOOST_TEST(g.sup(2)->own_vnodes().contains(3));
  BOOST_TEST(!g.live()[3]);
}

// A processor that has left still passes on broadcast frames for its former vnodes
// (engines drain after the supervisor left): its view must name the member that took
// them, not itself (which made engines fall back on a guessed peer, and every leaver
// funnelled whole 4 MiB messages through the same one).
BOOST_AUTO_TEST_CASE(a_left_processor_s_view_names_the_recipient_of_its_vnodes) {
  mini_grid g{tiny(), 5};
  g.start();
  g.run();
  supervisor_view named{*g.sup(3)};
  supervisor_view nearest{*g.sup(6)};
  BOOST_TEST(named.owner(3) == proc_id{3});
  g.leave(3, 2);
  g.leave(6);
  g.run();
  named.refresh();
  nearest.refresh();
  BOOST_TEST(!named.participating());
  BOOST_TEST(named.own_vnodes().empty());
  BOOST_TEST(named.owner(3) == proc_id{2});
  BOOST_TEST(g.sup(2)->own_vnodes().contains(3));
  BOOST_REQUIRE_EQUAL(g.sup(6)->farewell_routes().size(), 1u);
  const auto took = g.sup(6)->farewell_routes().front().owner;
  BOOST_TEST(took != proc_id{6});
  BOOST_TEST(nearest.owner(6) == took);
  BOOST_TEST(g.sup(took)->own_vnodes().contains(6));
  // Its knowledge of the others is frozen: everything goes through the member that
  // took its vnodes, which knows where they are now.
  BOOST_TEST(named.owner(0) == proc_id{2});
  auto parts = named.owners(vnode_set::range(0, 8));
  BOOST_REQUIRE_EQUAL(parts.size(), 1u);
  BOOST_TEST(parts.begin()->first == proc_id{2});
  BOOST_TEST((parts.begin()->second == vnode_set::range(0, 8)));
  BOOST_TEST(named.peers().front() == proc_id{2});
}

BOOST_AUTO_TEST_CASE(join_takes_wanted_vnodes_and_new_trees_form) {
  mini_grid g{tiny(), 6};
  g.start(6); // processors 6 and 7 are not running yet
  g.run();
  g.join(6, 0, {});        // a share of processor 0's vnodes (it has only one: none)
  g.join(7, 1, vnode_set{4, 5});
  g.run();
  check_settled(g, 6);
  BOOST_TEST((g.sup(7)->own_vnodes() == vnode_set{4, 5}));
  BOOST_TEST(g.sup(4)->own_vnodes().empty());
}

// A joiner's request for vnodes can vanish without a trace (over TCP: frames written
// behind a handshake that the peer then refused). The joiner asks its givers again after
// `probe_timeout` and gets its share, or the vnodes it wanted, exactly as without the loss.
BOOST_AUTO_TEST_CASE(a_joiner_whose_request_for_vnodes_vanished_asks_again) {
  for (int wanted = 0; wanted < 2; ++wanted) {
    BOOST_TEST_CONTEXT((wanted ? "the vnodes it wanted" : "a share of the contact's")) {
      mini_grid g{tiny(), 6};
      g.start(6, 2); // processor p owns vnodes 2p and 2p+1; 6 and 7 are not running yet
      g.run();
      g.lose([](const wire::envelope& e) {
        return std::holds_alternative<wire::handover_request>(e.body);
      }, 1);
      if (wanted)
        g.join(7, 1, vnode_set{4, 5}); // owned by processor 2
      else
        g.join(7, 0, {}); // a share of processor 0's {0, 1}
      g.run();
      BOOST_TEST(g.lost() == 1);
      if (wanted) {
        BOOST_TEST((g.sup(7)->own_vnodes() == vnode_set{4, 5}));
        BOOST_TEST(g.sup(2)->own_vnodes().empty());
      } else {
        BOOST_TEST(g.sup(7)->own_vnodes().size() == 1u);
        BOOST_TEST(g.sup(0)->own_vnodes().size() == 1u);
      }
      BOOST_TEST(!g.sup(7)->awaiting_vnodes());
      check_settled(g, 12);
    }
  }
}

namespace {

/// The handover event of kind `k` processor `at` reported about `peer` (none: empty).
std::optional<tree_event> handover(const mini_grid& g, proc_id at, tree_event::kind k, proc_id peer) {
  std::optional<tree_event> found;
  for (auto& [p, e] : g.handover_events())
    if (p == at && e.what == k && e.peer == peer) {
      BOOST_TEST(!found.has_value(), "two such events at " << at);
      found = e;
    }
  return found;
}

} // namespace

// Vnodes that move by handover are reported on both sides: a joiner's share (gained by
// the joiner, released by its giver), and a leaver's vnodes (released by the leaver,
// gained by the member that took them). A joiner whose contact has nothing to give
// (fewer than two vnodes) waits for its share only `probe_timeout`.
BOOST_AUTO_TEST_CASE(handovers_are_reported_on_both_sides) {
  mini_grid g{tiny(), 6};
  g.start(2, 4); // 0 owns 0-3, 1 owns 4-7
  g.run();
  BOOST_TEST(g.handover_events().empty());
  g.join(2, 0, {});          // a share of 0's: the upper half
  g.join(3, 1, vnode_set{7}); // asked for by name
  g.run();
  for (auto [joiner, giver, vs] : {std::tuple{proc_id{2}, proc_id{0}, vnode_set{2, 3}},
                                   std::tuple{proc_id{3}, proc_id{1}, vnode_set{7}}}) {
    BOOST_TEST_CONTEXT("joiner " << joiner) {
      BOOST_TEST((g.sup(joiner)->own_vnodes() == vs));
      auto got = handover(g, joiner, tree_event::kind::gained, giver);
      BOOST_REQUIRE(got.has_value());
      BOOST_TEST((got->vnodes == vs));
      auto gave = handover(g, giver, tree_event::kind::released, joiner);
      BOOST_REQUIRE(gave.has_value());
      BOOST_TEST((gave->vnodes == vs));
      BOOST_TEST(!g.sup(joiner)->awaiting_vnodes());
    }
  }
  BOOST_TEST(g.handover_events().size() == 4u);

  // Processor 3 owns one vnode: it gives none to a joiner, which stops waiting for it
  // after probe_timeout (1 s), owning nothing.
  g.join(4, 3, {});
  g.run_for(std::chrono::milliseconds(300));
  BOOST_TEST_REQUIRE((g.sup(4)->state() == supervisor::status::member));
  BOOST_TEST(g.sup(4)->awaiting_vnodes());
  g.run();
  BOOST_TEST(!g.sup(4)->awaiting_vnodes());
  BOOST_TEST(g.sup(4)->own_vnodes().empty());
  BOOST_TEST(g.handover_events().size() == 4u);

  g.leave(2);
  g.run();
  const auto took = g.sup(2)->farewell_routes().at(0).owner;
  auto gave = handover(g, 2, tree_event::kind::released, took);
  BOOST_REQUIRE(gave.has_value());
  BOOST_TEST((gave->vnodes == vnode_set{2, 3}));
  auto got = handover(g, took, tree_event::kind::gained, 2);
  BOOST_REQUIRE(got.has_value());
  BOOST_TEST((got->vnodes == vnode_set{2, 3}));
  BOOST_TEST(g.sup(took)->own_vnodes().includes(vnode_set{2, 3}));
}

BOOST_AUTO_TEST_CASE(leaving_the_last_member_is_refused) {
  mini_grid g{tiny(), 1};
  g.start(1);
  g.run();
  outbox out;
  supervisor s{0, {}, 1};
  BOOST_TEST(s.leave(timestamp{0}, no_proc, out).has_value()); // not a member
}

BOOST_AUTO_TEST_CASE(random_topologies_and_churn_keep_every_tree_spanning) {
  std::mt19937 rng{2024};
  for (int round = 0; round < 25; ++round) {
    auto topo = random_topology(rng);
    auto n = topo.proc_count();
    mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
    g.start();
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      check_trees(g);
      check_subtrees(g);
      // half leave (odd ids) at once, then rejoin with their vnodes
      for (proc_id p = 1; p < n; p += 2)
        g.leave(p);
      g.run();
      check_trees(g);
      check_subtrees(g);
      BOOST_TEST_MESSAGE("after leaving");
      check_routing(g, n);
      for (proc_id p = 1; p < n; p += 2)
        g.join(p, 0, vnode_set{p});
      g.run();
      check_settled(g, n);
      for (proc_id p = 0; p < n; ++p)
        BOOST_TEST((g.sup(p)->own_vnodes() == vnode_set{p}));
    }
  }
}

BOOST_AUTO_TEST_CASE(random_interleaved_joins_and_leaves_converge) {
  // Leaves and joins at random moments, while trees are still forming or healing,
  // through random contacts. Whatever the interleaving, once things settle every
  // tree spans exactly the live processors, every subtree set is exact and every
  // routing table agrees.
  std::mt19937 rng{77};
  for (int round = 0; round < 200; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    mini_grid g{topo, static_cast<std::uint64_t>(1000 + round)};
    g.start();
    std::vector<bool> up(n, true);
    std::uniform_int_distribution<proc_id> any(0, n - 1);
    std::uniform_int_distribution<int> gap_us(0, round % 2 ? 20000 : 3000);
    for (int step = 0; step < 24; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      auto p = any(rng);
      auto live = g.live();
      const std::size_t members = g.live_count();
      if (live[p] && members > 2) {
        g.leave(p);
        up[p] = false;
      } else if (!up[p] && g.sup(p)->state() == supervisor::status::left) {
        g.rejoin_randomly(p, n, rng);
        up[p] = true;
      }
    }
    auto events_run = g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(!g.busy(), "after " << events_run << " events: " << g.busy_report());
      check_trees(g);
      check_subtrees(g);
      check_routing(g, n);
    }
  }
}

// Several processors join at once through one member, none asking for particular vnodes:
// each gets a share of the contact's, none is left with nothing (a share used to be the
// upper half of the contact's own vnodes, including those already on offer to an earlier
// joiner, so a second request at the same moment got nothing: seen in the docker cluster).
BOOST_AUTO_TEST_CASE(racing_joins_without_wanted_vnodes_each_get_a_share) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    mini_grid g{tiny(), seed};
    g.start(1, 64); // processor 0 owns 0..63
    for (proc_id p = 1; p < 6; ++p)
      g.join(p, 0, {});
    g.run();
    vnode_set all;
    std::size_t owned = 0;
    for (proc_id p = 0; p < 6; ++p) {
      BOOST_TEST_REQUIRE((g.sup(p)->state() == supervisor::status::member));
      BOOST_TEST(!g.sup(p)->own_vnodes().empty(), "seed " << seed << ": processor " << p << " owns nothing");
      all |= g.sup(p)->own_vnodes();
      owned += g.sup(p)->own_vnodes().size();
    }
    BOOST_TEST(all.to_string() == vnode_set::range(0, 64).to_string());
    BOOST_TEST(owned == 64u); // each once
  }
}

// --- crash recovery ------------------------------------------------------------------

namespace {

using banyan::test::scripted_peers;

tree_key bw_tree(proc_id root) { return {root, tree_kind::bandwidth}; }

wire::tree_info bw_info(proc_id root, rate est, std::vector<proc_id> path, bool connected = true) {
  wire::tree_info i;
  i.tree = bw_tree(root);
  i.connected = connected;
  i.est = connected ? est : 0;
  i.path = connected ? std::move(path) : std::vector<proc_id>{};
  return i;
}

/// The (0, bandwidth) infos the supervisor sent `to` in tree updates, in order.
std::vector<wire::tree_info> told(const scripted_peers& s, proc_id to) {
  std::vector<wire::tree_info> result;
  for (auto& [at, e] : s.sent)
    if (auto* u = std::get_if<wire::tree_update>(&e.body); u && e.to == to)
      for (auto& i : u->trees)
        if (i.tree == bw_tree(0))
          result.push_back(i);
  return result;
}

} // namespace

// Processor 1 has parent 3 and child 2 in 0's bandwidth tree; 3 leaves, orphaning it
// without a step-parent. 1 tells 2 at once that it has no path (connected false), and
// tells it of its new path once it has one.
BOOST_AUTO_TEST_CASE(a_processor_that_loses_its_parent_tells_its_children) {
  scripted_peers s{1, 4, supervisor_config{}, 7};
  using std::chrono::milliseconds;
  using std::chrono::microseconds;
  s.peers[0] = {milliseconds(10), 2e6, {}};      // the root, behind a narrow link
  s.peers[2] = {microseconds(200), 100e6, {}};   // the child, in the LAN
  s.peers[3] = {microseconds(300), 50e6, {}};    // the parent, in the LAN
  s.default_trees(0, 0);
  s.default_trees(2, 1e6);
  s.default_trees(3, 40e6);
  s.peers[2].trees[bw_tree(0)] = bw_info(0, 1e6, {1, 3, 0});
  s.start();
  s.run();
  BOOST_TEST_REQUIRE(s.sup.parent(bw_tree(0)) == 3u);
  s.deliver(2, wire::adopt_request{1000, {{bw_tree(0), vnode_set::range(2, 3)}}});
  BOOST_TEST_REQUIRE(s.sup.tree(bw_tree(0))->has_child(2));
  s.run();
  const auto before = told(s, 2).size();
  s.peers[3].trees[bw_tree(0)] = bw_info(0, 0, {}, false); // leaving
  s.deliver(3, wire::orphan{{bw_tree(0)}, {}});
  BOOST_TEST_REQUIRE(s.sup.parent(bw_tree(0)) == no_proc);
  s.run_until(s.now() + std::chrono::milliseconds(2)); // update_delay: 1 ms
  auto now_told = told(s, 2);
  BOOST_TEST_REQUIRE(now_told.size() == before + 1);
  BOOST_TEST(!now_told.back().connected);
  s.run(); // 1 measures and goes under 0, the only way left
  BOOST_TEST_REQUIRE(s.sup.parent(bw_tree(0)) == 0u);
  BOOST_TEST_REQUIRE(!told(s, 2).empty());
  BOOST_TEST(told(s, 2).back().connected);
  BOOST_TEST(!told(s, 2).back().reattaching);
}

// Processor 1 has a parent and child 2 in 0's bandwidth tree. A second child, 4, is
// adopted: 2's est is 1's capacity shared between two now, and 1 tells it its new number
// of children (tree_update), not only when its own place changes. 4 releases 1: 2 hears
// it is alone again. (Without it, 2 keeps the est of an only child and judges every
// candidate against a share it no longer gets.)
BOOST_AUTO_TEST_CASE(a_parent_tells_its_children_its_new_fan_out) {
  scripted_peers s{1, 5, supervisor_config{}, 7};
  using std::chrono::milliseconds;
  using std::chrono::microseconds;
  s.peers[0] = {milliseconds(10), 2e6, {}};      // the root, behind a narrow link
  s.peers[2] = {microseconds(200), 100e6, {}};   // the first child, in the LAN
  s.peers[3] = {microseconds(300), 50e6, {}};    // a parent, in the LAN
  s.peers[4] = {microseconds(250), 100e6, {}};   // the second child, in the LAN
  s.default_trees(0, 0);
  s.default_trees(2, 1e6);
  s.default_trees(3, 40e6);
  s.default_trees(4, 1e6);
  s.peers[2].trees[bw_tree(0)] = bw_info(0, 1e6, {1, 3, 0});
  s.peers[4].trees[bw_tree(0)] = bw_info(0, 1e6, {1, 3, 0});
  s.start();
  s.run();
  BOOST_TEST_REQUIRE(s.sup.parent(bw_tree(0)) != no_proc);
  s.deliver(2, wire::adopt_request{1000, {{bw_tree(0), vnode_set::range(2, 3)}}});
  s.run();
  BOOST_TEST_REQUIRE(s.sup.tree(bw_tree(0))->has_child(2));
  const auto before = told(s, 2).size();
  s.deliver(4, wire::adopt_request{1001, {{bw_tree(0), vnode_set::range(4, 5)}}});
  BOOST_TEST_REQUIRE(s.sup.tree(bw_tree(0))->has_child(4));
  s.run_until(s.now() + milliseconds(2)); // update_delay: 1 ms
  auto to_2 = told(s, 2);
  BOOST_TEST_REQUIRE(to_2.size() == before + 1);
  BOOST_TEST(to_2.back().children == 2u);
  BOOST_TEST(to_2.back().est == s.sup.tree(bw_tree(0))->est()); // our own est is unchanged
  s.deliver(4, wire::release{{bw_tree(0)}});
  BOOST_TEST_REQUIRE(!s.sup.tree(bw_tree(0))->has_child(4));
  s.run_until(s.now() + milliseconds(2));
  to_2 = told(s, 2);
  BOOST_TEST_REQUIRE(to_2.size() == before + 2);
  BOOST_TEST(to_2.back().children == 1u);
}

// Processor 2's parent 1 (in its LAN) tells it of a narrow path (3 MB/s) and loses that
// path right after; 2 then probes 3, across the wide-area link (12 MB/s, judged at 6 as a
// second copy into the LAN). Against 1's last figure 3 would win; but 1's path is gone,
// and once 1 finds one again (20 MB/s), 2 would not have moved. 2 is told, keeps 1's
// figures marked reattaching (and tells its own child 4 so), holds the move, and is still
// under 1 when 1's new path is told.
BOOST_AUTO_TEST_CASE(a_child_holds_remote_moves_while_its_parent_reattaches) {
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      supervisor_config cfg;
      cfg.reattach_hold = std::chrono::seconds(1);
      cfg.local_bias = 0;
      scripted_peers s{2, 5, cfg, seed};
      using std::chrono::milliseconds;
      using std::chrono::microseconds;
      s.peers[0] = {milliseconds(10), 5e6, {}};     // the root, remote
      s.peers[1] = {microseconds(200), 100e6, {}};  // the parent, in the LAN
      s.peers[3] = {milliseconds(20), 12e6, {}};    // the remote candidate
      s.peers[4] = {microseconds(300), 100e6, {}};  // the child, in the LAN
      s.default_trees(0, 0);
      s.default_trees(1, 20e6);
      s.default_trees(3, 40e6);
      s.default_trees(4, 1e6);
      s.peers[4].trees[bw_tree(0)] = bw_info(0, 1e6, {2, 1, 0});
      // Once 2 is under 1: 4 comes under 2, then 1 tells of its narrow path, then loses
      // it, telling 2 so.
      timestamp lost{-1};
      bool under_1 = false, probed_3 = false;
      proc_id parent_when_back = no_proc;
      s.on_send = [&](const wire::envelope& e) {
        auto* a = std::get_if<wire::adopt_request>(&e.body);
        if (!under_1 && a && e.to == 1
            && std::any_of(a->trees.begin(), a->trees.end(),
                           [](auto& t) { return t.tree == bw_tree(0); })) {
          under_1 = true;
          auto t0 = s.now() + milliseconds(1);
          s.at(t0, [&] {
            s.tell(4, wire::adopt_request{1000, {{bw_tree(0), vnode_set::range(4, 5)}}});
          });
          s.at(t0 + milliseconds(1), [&] {
            s.peers[1].trees[bw_tree(0)] = bw_info(0, 3e6, {0});
            s.tell(1, wire::tree_update{{bw_info(0, 3e6, {0})}});
          });
          s.at(t0 + milliseconds(2), [&] {
            lost = s.now();
            s.peers[1].trees[bw_tree(0)] = bw_info(0, 0, {}, false);
            s.tell(1, wire::tree_update{{bw_info(0, 0, {}, false)}});
          });
        }
        // 2's first probe of 3 after the loss: 1 has a path again once it is over.
        if (std::holds_alternative<wire::bw_request>(e.body) && e.to == 3 && lost.count() >= 0
            && !probed_3 && s.now() - lost < milliseconds(500)) {
          probed_3 = true;
          s.at(s.now() + milliseconds(70), [&] {
            parent_when_back = s.sup.parent(bw_tree(0));
            s.peers[1].trees[bw_tree(0)] = bw_info(0, 20e6, {0});
            s.tell(1, wire::tree_update{{bw_info(0, 20e6, {0})}});
          });
        }
      };
      s.start();
      s.run();
      if (!probed_3)
        continue; // 3 was not probed in time after the loss
      ++checked;
      BOOST_TEST(parent_when_back == 1u);
      BOOST_TEST(s.sup.held_moves() > 0u);
      // 4, below 2, was told that the figures are of a lost path, then of the new one.
      auto to_4 = told(s, 4);
      BOOST_TEST(std::any_of(to_4.begin(), to_4.end(), [](auto& i) { return i.reattaching; }));
      BOOST_TEST_REQUIRE(!to_4.empty());
      BOOST_TEST(!to_4.back().reattaching);
    }
  }
  BOOST_TEST(checked >= 3, checked << " seeds");
}

// Two neighbours leave at once, the first offering its vnodes to the second, whose own
// leave is over before the offer arrives (gen-111-3l-15p under `bench churn`: processor 7
// offered to 11, which had left). The second's farewell (member_left) reaches the first
// before anything else could answer the offer; it is as good as a refusal, and the first
// offers to another member at once, not after probe_timeout: a leaver that stays a
// member that long keeps relaying, and the broadcasts behind it wait.
BOOST_AUTO_TEST_CASE(an_offer_to_a_member_that_left_counts_as_refused_at_its_farewell) {
  supervisor_config cfg;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      mini_grid g{tiny(), seed, cfg};
      g.start();
      g.run();
      // 1's offer to 2 arrives after 2 is gone (2 hands its vnode to 3 over the LAN).
      g.slow(
        [](const wire::envelope& e) {
          return std::holds_alternative<wire::vnode_handover>(e.body) && e.from == 1 && e.to == 2;
        },
        std::chrono::milliseconds(20));
      const auto t0 = g.now();
      g.leave(2, 3);
      g.leave(1, 2);
      g.run();
      check_settled(g, 8);
      BOOST_TEST(!g.live()[1]);
      BOOST_TEST(!g.live()[2]);
      std::optional<tree_event> gave;
      for (auto& [p, e] : g.handover_events())
        if (p == 1 && e.what == tree_event::kind::released)
          gave = e;
      BOOST_TEST_REQUIRE(gave.has_value());
      BOOST_TEST(gave->peer != proc_id{2});
      BOOST_TEST(g.sup(gave->peer) != nullptr);
      BOOST_TEST(g.sup(gave->peer)->own_vnodes().contains(1));
      // Released on the farewell, long before the offer's timer could have run out.
      BOOST_TEST((gave->at - t0 < cfg.probe_timeout / 4),
                 "released " << to_ms(gave->at - t0) << " ms after the leave");
    }
  }
}

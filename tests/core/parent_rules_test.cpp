#include <boost/test/unit_test.hpp>

#include "banyan/core/bandwidth_rule.hpp"
#include "banyan/core/latency_rule.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

wire::tree_info info(tree_key k, duration dist, rate est, std::uint32_t children,
                     std::vector<proc_id> path, bool connected = true) {
  wire::tree_info i;
  i.tree = k;
  i.connected = connected;
  i.dist = dist;
  i.est = est;
  i.children = children;
  i.path = std::move(path);
  return i;
}

constexpr proc_id p = 5;
const tree_key lat{0, tree_kind::latency};
const tree_key bw{0, tree_kind::bandwidth};

} // namespace

BOOST_AUTO_TEST_SUITE(latency)

BOOST_AUTO_TEST_CASE(without_a_parent_any_connected_candidate_is_adopted) {
  tree_state t{lat, p};
  BOOST_TEST((latency_rule(t, p, 7, 10ms, info(lat, 50ms, 0, 0, {0})) == verdict::adopt));
  BOOST_TEST((latency_rule(t, p, 7, 10ms, info(lat, 0ms, 0, 0, {}, false)) == verdict::keep));
}

BOOST_AUTO_TEST_CASE(both_conditions_are_needed) {
  tree_state t{lat, p};
  // parent 3 at dist 4 ms, RTT 2 ms: our dist is 6 ms.
  t.set_parent(3, 2ms, 1e8, info(lat, 4ms, 0, 1, {0}));
  BOOST_TEST(t.dist().count() == duration{6ms}.count());
  // closer and nearer the root
  BOOST_TEST((latency_rule(t, p, 7, 1ms, info(lat, 5ms, 0, 0, {0})) == verdict::adopt));
  // closer but not nearer the root
  BOOST_TEST((latency_rule(t, p, 7, 1ms, info(lat, 6ms, 0, 0, {0})) == verdict::keep));
  // nearer the root but not closer
  BOOST_TEST((latency_rule(t, p, 7, 2ms, info(lat, 1ms, 0, 0, {0})) == verdict::keep));
}

BOOST_AUTO_TEST_CASE(descendants_and_self_are_never_adopted) {
  tree_state t{lat, p};
  t.set_parent(3, 2ms, 1e8, info(lat, 4ms, 0, 1, {0}));
  // 7's path runs through p: 7 is p's descendant
  BOOST_TEST((latency_rule(t, p, 7, 1ms, info(lat, 1ms, 0, 0, {p, 3, 0})) == verdict::keep));
  BOOST_TEST((latency_rule(t, p, p, 0ms, info(lat, 0ms, 0, 0, {3, 0})) == verdict::keep));
  BOOST_TEST(forbidden_parent(p, 7, info(lat, 1ms, 0, 0, {9, p, 0})));
  BOOST_TEST(!forbidden_parent(p, 7, info(lat, 1ms, 0, 0, {9, 0})));
}

BOOST_AUTO_TEST_CASE(banyan_escape_lets_a_wan_gateway_move_under_a_lan_peer) {
  // p is in cluster B with a parent across the WAN (RTT 4 ms) at dist 0.25 ms:
  // dist(p) = 4.25 ms. A LAN peer (RTT 0.3 ms) at dist 4.55 ms is not nearer the
  // root, so the paper's rule keeps the WAN edge; banyan's escape allows the move:
  // 4.55 + 0.3 <= 4.25 + (4 - 0.3) / 2.
  tree_state t{lat, p};
  t.set_parent(3, 4ms, 1e8, info(lat, 250us, 0, 1, {0}));
  auto cand = info(lat, 4550us, 0, 0, {9, 0});
  rule_context paper{rule_variant::paper};
  BOOST_TEST((latency_rule(t, p, 7, 300us, cand, paper) == verdict::keep));
  rule_context ctx;
  ctx.min_rtt = 300us;
  BOOST_TEST((latency_rule(t, p, 7, 300us, cand, ctx) == verdict::adopt));
}

BOOST_AUTO_TEST_CASE(banyan_does_not_chain_wan_hops_slower_than_the_direct_one) {
  // p in C, parent in A (RTT 7 ms, dist 7.25 ms). A candidate in B (RTT 5 ms) at dist
  // 4.3 ms would make p's dist 9.3 ms. The paper's rule takes it (4.3 < 7.25);
  // banyan does not (B is not p's LAN, and the escape needs 9.3 <= 7.25 + 1).
  tree_state t{lat, p};
  t.set_parent(3, 7ms, 1e8, info(lat, 250us, 0, 1, {0}));
  auto cand = info(lat, 4300us, 0, 0, {8, 0});
  rule_context paper{rule_variant::paper};
  BOOST_TEST((latency_rule(t, p, 7, 5ms, cand, paper) == verdict::adopt));
  rule_context ctx;
  ctx.min_rtt = 400us;
  BOOST_TEST((latency_rule(t, p, 7, 5ms, cand, ctx) == verdict::keep));
}

BOOST_AUTO_TEST_CASE(locality_needs_evidence) {
  rule_context ctx;
  BOOST_TEST(!ctx.local(1ms)); // nothing measured: nobody is local
  ctx.min_rtt = 300us;
  BOOST_TEST(ctx.local(500us));
  BOOST_TEST(!ctx.local(700us));
}

BOOST_AUTO_TEST_CASE(current_parent_is_refreshed_and_root_keeps_no_parent) {
  tree_state t{lat, p};
  t.set_parent(3, 2ms, 1e8, info(lat, 4ms, 0, 1, {0}));
  BOOST_TEST((latency_rule(t, p, 3, 1ms, info(lat, 3ms, 0, 1, {0})) == verdict::refresh));
  tree_state root{{p, tree_kind::latency}, p};
  BOOST_TEST(root.connected());
  BOOST_TEST(root.dist().count() == 0);
  BOOST_TEST((latency_rule(root, p, 7, 1ms, info({p, tree_kind::latency}, 0ms, 0, 0, {p}))
              == verdict::keep));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(bandwidth)

BOOST_AUTO_TEST_CASE(estimate_divides_by_the_children_cand_would_have) {
  // cand receives at 100 MB/s, link 90 MB/s, cand has 2 children: p would be the third.
  BOOST_TEST(estimate_rate(90e6, info(bw, 0ms, 100e6, 2, {0}), false) == 30e6);
  BOOST_TEST(estimate_rate(90e6, info(bw, 0ms, 100e6, 2, {0}), true) == 45e6);
  // the candidate's own rate bounds the estimate
  BOOST_TEST(estimate_rate(900e6, info(bw, 0ms, 100e6, 0, {0}), false) == 100e6);
}

BOOST_AUTO_TEST_CASE(adopts_only_a_better_estimate_beyond_the_margin) {
  tree_state t{bw, p};
  // parent: est 100 MB/s, 1 child (us), link 50 MB/s: we get 50 MB/s.
  t.set_parent(3, 2ms, 50e6, info(bw, 0ms, 100e6, 1, {0}));
  BOOST_TEST(t.est() == 50e6);
}

BOOST_AUTO_TEST_CASE(banyan_variant_prefers_a_local_parent_at_about_the_same_rate) {
  rule_context ctx; // banyan
  ctx.min_rtt = 300us;  // our LAN: 0.3 ms
  tree_state t{bw, p};
  // a remote parent (4 ms) giving us 50 MB/s
  t.set_parent(3, 4ms, 50e6, info(bw, 0ms, 100e6, 1, {0}));
  // a LAN candidate that would give 49 MB/s (within the margin): moves in banyan...
  BOOST_TEST((bandwidth_rule(t, p, 7, 98e6, 300us, info(bw, 0ms, 49e6, 1, {0}), ctx)
              == verdict::adopt));
  // ...but not with the paper's rule
  rule_context paper{rule_variant::paper};
  paper.min_rtt = 300us;
  BOOST_TEST((bandwidth_rule(t, p, 7, 98e6, 300us, info(bw, 0ms, 49e6, 1, {0}), paper)
              == verdict::keep));
  // a remote candidate at the same rate does not attract it either
  BOOST_TEST((bandwidth_rule(t, p, 7, 98e6, 3ms, info(bw, 0ms, 49e6, 1, {0}), ctx)
              == verdict::keep));
  // The paper's rule with banyan's 5% margin (the same tree: est 50 MB/s).
  rule_context strict{rule_variant::paper};
  BOOST_TEST((bandwidth_rule(t, p, 7, 120e6, 2ms, info(bw, 0ms, 200e6, 1, {0}), strict)
              == verdict::adopt)); // 60 MB/s > 52.5
  BOOST_TEST((bandwidth_rule(t, p, 7, 104e6, 2ms, info(bw, 0ms, 200e6, 1, {0}), strict)
              == verdict::keep)); // 52 MB/s is within the margin
  strict.bw_margin = 0;
  BOOST_TEST((bandwidth_rule(t, p, 7, 104e6, 2ms, info(bw, 0ms, 200e6, 1, {0}), strict)
              == verdict::adopt));
}

BOOST_AUTO_TEST_CASE(fan_out_shares_the_sender_not_the_wan_path) {
  // With a sender capacity (1 Gbit NICs, 125 MB/s), a WAN candidate behind 25 MB/s
  // that already feeds one LAN child still offers 25 MB/s: min(est, bw, 125 / 2).
  BOOST_TEST(estimate_rate(25e6, info(bw, 0ms, 37.5e6, 1, {0}), false, 125e6) == 25e6);
  // Without one (the paper's rule) the path rate is split: 25 / 2.
  BOOST_TEST(estimate_rate(25e6, info(bw, 0ms, 37.5e6, 1, {0}), false) == 12.5e6);
  // Many children do share the sender: 125 / 6 < 25.
  BOOST_TEST(estimate_rate(25e6, info(bw, 0ms, 37.5e6, 5, {0}), false, 125e6) ==
             125e6 / 6);

  // paper-4c137's cluster D: its gateway's parent is in A behind 100 Mbit (12.5 MB/s);
  // a processor in C (behind 200 Mbit, 25 MB/s) that has one LAN child is better.
  rule_context ctx; // banyan
  ctx.min_rtt = 400us;
  ctx.sender_capacity = 125e6;
  tree_state t{bw, p};
  t.set_sender_capacity(125e6);
  t.set_parent(3, 18ms, 12.5e6, info(bw, 0ms, 62.5e6, 1, {0}));
  BOOST_TEST(t.est() == 12.5e6);
  BOOST_TEST((bandwidth_rule(t, p, 7, 25e6, 10ms, info(bw, 0ms, 37.5e6, 1, {0}), ctx)
              == verdict::adopt));
  // The paper's rule sees 12.5 against 12.5 and keeps the slow link.
  rule_context paper{rule_variant::paper};
  paper.min_rtt = 400us;
  tree_state q{bw, p};
  q.set_parent(3, 18ms, 12.5e6, info(bw, 0ms, 62.5e6, 1, {0}));
  BOOST_TEST((bandwidth_rule(q, p, 7, 25e6, 10ms, info(bw, 0ms, 37.5e6, 1, {0}), paper)
              == verdict::keep));
}

BOOST_AUTO_TEST_CASE(a_remote_candidate_of_a_processor_fed_in_its_lan_is_judged_at_half) {
  // tiny-2c8 after the leave: p (5) gets the data from 6 in its LAN (0.2 ms), and 6
  // from 2 across the 100 Mbit (12.5 MB/s) WAN link; 6's estimate, measured while two
  // streams crossed that link, is 7 MB/s. p probes 2 with the link idle: 12.5 MB/s.
  rule_context ctx; // banyan
  ctx.min_rtt = 200us;
  ctx.sender_capacity = 125e6;
  tree_state t{bw, p};
  t.set_sender_capacity(125e6);
  t.set_parent(6, 200us, 125e6, info(bw, 0ms, 7e6, 1, {2, 0}));
  BOOST_TEST(t.est() == 7e6);
  BOOST_TEST(second_copy_into_lan(t, 2ms, ctx));
  // Adopting 2 would put a second stream on the link that feeds 6: judged at 6.25.
  BOOST_TEST((bandwidth_rule(t, p, 2, 12.5e6, 2ms, info(bw, 0ms, infinite_rate, 1, {0}), ctx)
              == verdict::keep));
  // A link twice as wide wins even shared (12.5 > 7 + 5%).
  BOOST_TEST((bandwidth_rule(t, p, 2, 25e6, 2ms, info(bw, 0ms, infinite_rate, 1, {0}), ctx)
              == verdict::adopt));
  // Any other remote processor (the root 0, or 4 on the far side) would bring a second
  // copy into the LAN too (after a mass rejoin on tiny-2c8, 7 moved from its LAN to 1
  // that way): judged at half as well, 6.25 against 7.
  BOOST_TEST((bandwidth_rule(t, p, 4, 12.5e6, 2ms, info(bw, 0ms, 50e6, 0, {0}), ctx)
              == verdict::keep));
  BOOST_TEST((bandwidth_rule(t, p, 0, 12.5e6, 2ms, info(bw, 0ms, infinite_rate, 0, {}), ctx)
              == verdict::keep));
  // A local candidate shares the sender's NIC, which the estimate already counts.
  BOOST_TEST(!second_copy_into_lan(t, 300us, ctx));
  BOOST_TEST((bandwidth_rule(t, p, 7, 12.5e6, 300us, info(bw, 0ms, 12.5e6, 0, {2, 0}), ctx)
              == verdict::adopt));
  // With a remote parent there is no LAN copy to share with: the full rate counts.
  tree_state r{bw, p};
  r.set_sender_capacity(125e6);
  r.set_parent(6, 2ms, 125e6, info(bw, 0ms, 7e6, 1, {2, 0}));
  BOOST_TEST(!second_copy_into_lan(r, 2ms, ctx));
  BOOST_TEST((bandwidth_rule(r, p, 4, 12.5e6, 2ms, info(bw, 0ms, 50e6, 0, {0}), ctx)
              == verdict::adopt));
}

BOOST_AUTO_TEST_CASE(loops_are_prevented_explicitly) {
  // Without a distance condition, a descendant with a great estimate would be
  // adopted; the path check forbids it.
  tree_state t{bw, p};
  t.set_parent(3, 2ms, 10e6, info(bw, 0ms, 100e6, 1, {0}));
  BOOST_TEST((bandwidth_rule(t, p, 7, 1e9, 1ms, info(bw, 0ms, 1e9, 0, {p, 3, 0}))
              == verdict::keep));
}

BOOST_AUTO_TEST_CASE(root_estimate_is_infinite) {
  tree_state root{{p, tree_kind::bandwidth}, p};
  BOOST_TEST(root.est() == infinite_rate);
  tree_state orphan{bw, p};
  BOOST_TEST(orphan.est() == 0);
  BOOST_TEST(!orphan.connected());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(latency_ties)

// Two processors of one LAN, both fed across the wide area by the same parent at the
// same RTT, are equally far from the root. banyan's (II-local) takes the peer at the
// same distance, so one of them relays to the other and the tree enters their LAN once;
// the paper's (II) needs it strictly nearer, and both keep their wide-area edges. The
// wide-area hop (1 ms) is short beside the LAN's RTT (0.4 ms), so (II-escape), which
// needs dist(cand) + 0.4 <= dist(p) + (1 - 0.4) / 2, does not take it either.
BOOST_AUTO_TEST_CASE(an_entrant_moves_under_a_lan_peer_as_far_from_the_root) {
  tree_state t{lat, p};
  t.set_parent(3, 1ms, 1e8, info(lat, 11ms, 0, 2, {0})); // dist(p) = 12 ms
  auto twin = info(lat, 12ms, 0, 0, {3, 0});               // 7: also under 3, 12 ms
  rule_context ctx;
  ctx.min_rtt = 400us;
  BOOST_TEST((latency_rule(t, p, 7, 400us, twin, ctx) == verdict::adopt));
  // Once p is under 7, 7 finds p farther from the root than itself (and its descendant).
  tree_state moved{lat, 7};
  moved.set_parent(3, 1ms, 1e8, info(lat, 11ms, 0, 1, {0}));
  BOOST_TEST((latency_rule(moved, 7, p, 400us, info(lat, 12400us, 0, 0, {7, 3, 0}), ctx)
              == verdict::keep));
  BOOST_TEST((latency_rule(moved, 7, p, 400us, info(lat, 12400us, 0, 0, {3, 0}), ctx)
              == verdict::keep));
  // A LAN peer farther from the root than p is still not taken.
  BOOST_TEST((latency_rule(t, p, 7, 400us, info(lat, 12100us, 0, 0, {4, 0}), ctx)
              == verdict::keep));
  // The paper's rule keeps the tie.
  rule_context paper{rule_variant::paper};
  BOOST_TEST((latency_rule(t, p, 7, 400us, twin, paper) == verdict::keep));
}

BOOST_AUTO_TEST_SUITE_END()

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "banyan/core/subtree_summary.hpp"
#include "banyan/core/topology_generator.hpp"
#include "banyan/core/tree_choice.hpp"
#include "banyan/core/tree_state.hpp"
#include "core/collective_rider.hpp"
#include "core/message_bytes.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::adaptive_riders;
using banyan::test::collective_rider;
using banyan::test::message_bytes;
using banyan::test::mini_grid;
using banyan::test::rider;

namespace {

double ms(duration d) { return to_ms(d); }

const tree_cost cost{20us, 65536};

/// Processor `self` in root 3's tree of kind k, attached to `parent` over a hop of
/// `rtt` and `bw`, the parent having `siblings` children in all.
tree_state attached(proc_id self, tree_kind k, proc_id parent, duration rtt, rate bw,
                    std::uint32_t siblings) {
  tree_state t{{3, k}, self};
  wire::tree_info info;
  info.tree = {3, k};
  info.connected = true;
  info.est = infinite_rate;
  info.children = siblings;
  info.path = {3};
  t.set_parent(parent, rtt, bw, info);
  return t;
}

/// Broadcasts from `from` and returns the kind of the tree its first frame follows.
std::optional<tree_kind> broadcast_kind(mini_grid& g, proc_id from, std::size_t bytes,
                                        std::uint64_t salt) {
  std::optional<tree_kind> kind;
  g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    dynamic_cast<collective_rider&>(r).broadcast(now, message_bytes(bytes, salt), out);
    for (auto& e : out.sends)
      if (auto* s = std::get_if<wire::bcast_segment>(&e.body); s && !kind)
        kind = s->kind;
  });
  return kind;
}

/// The worst path below root `k.root` in the trees the supervisors of `g` built: its
/// largest RTT/2 sum and depth.
std::pair<duration, int> worst_path(const mini_grid& g, tree_key k) {
  auto t = g.tree_of(k);
  auto depths = t.depths();
  duration far{0};
  int deepest = 0;
  for (proc_id p = 0; p < depths.size(); ++p) {
    if (p == k.root || depths[p] <= 0)
      continue;
    duration d{0};
    for (proc_id q = p; q != k.root; q = t.parent(q))
      d += g.sup(q)->tree(k)->rtt_parent() / 2;
    far = std::max(far, d);
    deepest = std::max(deepest, depths[p]);
  }
  return {far, deepest};
}

} // namespace

// The folding of subtree_summary.hpp on figures worked out by hand:
//
//   root --(2 ms, 10 MB/s)-- a --(4 ms, 1 MB/s)--  b
//                             \--(1 ms, 50 MB/s)-- c --(6 ms, 20 MB/s)-- d
BOOST_AUTO_TEST_CASE(a_summary_folds_the_worst_of_every_path) {
  auto b = through_hop(empty_summary(), 4ms, 1e6);
  auto d = through_hop(empty_summary(), 6ms, 2e7);
  auto c = through_hop(d, 1ms, 5e7);
  BOOST_TEST(c.depth == 2u);
  BOOST_TEST(ms(c.half_rtt) == 3.5, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(c.per_byte == 1 / 5e7 + 1 / 2e7, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.bottleneck == 2e7);
  auto a = through_hop(fold(b, c), 2ms, 1e7);
  BOOST_TEST(a.complete);
  BOOST_TEST(a.depth == 3u);                                             // via c to d
  BOOST_TEST(ms(a.half_rtt) == 1 + 3.5, boost::test_tools::tolerance(1e-9)); // via c to d
  BOOST_TEST(a.per_byte == 1 / 1e7 + 1 / 1e6, boost::test_tools::tolerance(1e-12)); // to b
  BOOST_TEST(a.bottleneck == 1e6);                                        // a -> b
  // An unmeasured hop makes the whole summary incomplete, and stays so up the tree.
  auto unknown = through_hop(empty_summary(), 1ms, 0);
  BOOST_TEST(!unknown.complete);
  BOOST_TEST(!through_hop(fold(a, unknown), 1ms, 1e8).complete);
  BOOST_TEST(std::isfinite(unknown.per_byte));
}

// Predictions from a root's summaries: latency tree half_rtt + depth o + N per_byte,
// bandwidth tree the first segment over every hop and the rest at the bottleneck.
BOOST_AUTO_TEST_CASE(predictions_from_a_summary_worked_out_by_hand) {
  subtree_summary s;
  s.half_rtt = 5ms;
  s.depth = 3;
  s.per_byte = 3 / 1e8; // three hops at 100 MB/s
  s.bottleneck = 1e7;
  // 5 + 3 x 0.02 + 1e6 x 3e-8 s (30 ms) = 35.06 ms.
  BOOST_TEST(ms(predict_latency_tree(s, 1'000'000, cost)) == 35.06,
             boost::test_tools::tolerance(1e-6));
  // 5 + 0.06 + 65536 x 3e-8 s (1.96608 ms) + (1e6 - 65536) / 1e7 s (93.4464 ms)
  // + 15 x 0.02 (16 segments) = 100.77248 ms.
  BOOST_TEST(ms(predict_bandwidth_tree(s, 1'000'000, cost)) == 100.77248,
             boost::test_tools::tolerance(1e-6));
  auto r = predict(s, s, 1'000'000, cost);
  BOOST_TEST(r.known);
  BOOST_CHECK(r.faster() == tree_kind::latency);
  // A narrow hop (1 MB/s) on a path of the latency tree: every byte pays it whole.
  auto narrow = s;
  narrow.per_byte += 1 / 1e6;
  r = predict(narrow, s, 4 * 1024 * 1024, cost);
  BOOST_CHECK(r.faster() == tree_kind::bandwidth);
  // Incomplete summaries predict nothing.
  narrow.complete = false;
  BOOST_TEST(!predict(narrow, s, 1, cost).known);
}

// A child sends a new summary only on a real change.
BOOST_AUTO_TEST_CASE(hysteresis_lets_small_changes_go_untold) {
  auto s = through_hop(empty_summary(), 10ms, 1e7);
  auto t = s;
  t.half_rtt = 10ms / 2 + 400us; // +8 %
  t.bottleneck = 1.05e7;
  BOOST_TEST(!differs(s, t, summary_hysteresis));
  t.half_rtt = 10ms / 2 + 600us; // +12 %
  BOOST_TEST(differs(s, t, summary_hysteresis));
  t = s;
  t.per_byte *= 1.2;
  BOOST_TEST(differs(s, t, summary_hysteresis));
  t = s;
  t.depth = 2;
  BOOST_TEST(differs(s, t, summary_hysteresis));
  t = s;
  t.complete = false;
  BOOST_TEST(differs(s, t, summary_hysteresis));
  t = s;
  t.bottleneck = infinite_rate;
  BOOST_TEST(differs(s, t, summary_hysteresis));
  BOOST_TEST(!differs(s, s, 0));
}

// subtree_summary_of reads a tree_state: its own hop above the fold of its children's
// summaries, incomplete while a child has sent none; a child's summary goes with it.
BOOST_AUTO_TEST_CASE(summary_of_a_tree_state) {
  // Latency tree; the parent has 4 children and can send 2e8 B/s in all: the hop gets
  // min(1e8, 2e8 / 4) = 5e7.
  auto t = attached(9, tree_kind::latency, 5, 2ms, 1e8, 4);
  BOOST_CHECK(!subtree_summary_of(tree_state{{9, tree_kind::latency}, 9}).has_value()); // a root
  auto leaf = subtree_summary_of(t, 2e8);
  BOOST_REQUIRE(leaf.has_value());
  BOOST_TEST(leaf->complete);
  BOOST_TEST(leaf->depth == 1u);
  BOOST_TEST(leaf->bottleneck == 5e7);
  BOOST_TEST(ms(leaf->half_rtt) == 1.0, boost::test_tools::tolerance(1e-9));
  // Without a capacity the path rate is split: 1e8 / 4.
  BOOST_TEST(subtree_summary_of(t)->bottleneck == 2.5e7);

  t.set_child(11, vnode_set{11});
  BOOST_TEST(!subtree_summary_of(t, 2e8)->complete); // child 11 has sent nothing yet
  BOOST_TEST(!t.set_child_summary(12, through_hop(empty_summary(), 1ms, 1e6))); // no child
  BOOST_TEST(t.set_child_summary(11, through_hop(empty_summary(), 8ms, 1e6)));
  auto two = subtree_summary_of(t, 2e8);
  BOOST_TEST(two->complete);
  BOOST_TEST(two->depth == 2u);
  BOOST_TEST(two->bottleneck == 1e6);
  BOOST_TEST(ms(two->half_rtt) == 5.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(two->per_byte == 1 / 5e7 + 1 / 1e6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(fold_children(t).depth == 1u);
  t.remove_child(11);
  BOOST_TEST(t.child_summaries().empty());
  BOOST_TEST(subtree_summary_of(t, 2e8)->depth == 1u);

  // A new parent (or the same one adopting us again) has heard nothing from us.
  t.set_summary_sent(5, *leaf);
  BOOST_TEST(t.summary_sent_to() == 5u);
  t.set_parent(6, 2ms, 1e8, t.parent_info());
  BOOST_TEST(t.summary_sent_to() == no_proc);
}

// On converged trees every root holds complete summaries of both of its trees, as deep
// as the trees and with their farthest RTT/2 sum (within the hysteresis per level). The
// paper's rule variant sends none.
BOOST_AUTO_TEST_CASE(roots_hold_summaries_of_their_own_trees) {
  auto topo = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(topo.has_value());
  for (auto rules : {rule_variant::banyan, rule_variant::paper}) {
    supervisor_config cfg;
    cfg.rules = rules;
    mini_grid g{*topo, 2, cfg};
    g.start();
    g.run();
    BOOST_REQUIRE(!g.busy());
    for (proc_id r = 0; r < 8; ++r)
      for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
        BOOST_TEST_CONTEXT(to_string(k) << " tree of " << r << (rules == rule_variant::paper ? ", paper" : ", banyan")) {
          supervisor_view view{*g.sup(r)};
          auto s = view.own_summary(k);
          BOOST_REQUIRE(s.has_value()); // every root has a child here
          if (rules == rule_variant::paper) {
            BOOST_TEST(!s->complete); // its children sent nothing
            continue;
          }
          BOOST_TEST(s->complete);
          auto [far, deepest] = worst_path(g, {r, k});
          BOOST_TEST(static_cast<int>(s->depth) == deepest);
          const double slack = std::pow(1 + summary_hysteresis, deepest);
          BOOST_TEST(ms(s->half_rtt) <= ms(far) * slack + 1e-9);
          BOOST_TEST(ms(s->half_rtt) >= ms(far) / slack - 1e-9);
          BOOST_TEST(s->bottleneck > 0);
          BOOST_TEST(s->bottleneck < infinite_rate);
          BOOST_TEST(s->per_byte * s->bottleneck >= 1 / slack); // a path crosses the bottleneck
        }
      }
  }
}

// gen-106-3l-15p (`banyan topology generate --seed 106 --min-procs 6 --max-procs 16`):
// root 0's latency tree (with this seed) reaches one site over the 25 Mbit/s link, deep
// in the tree. From its own trees' summaries the origin sees it and sends a long message
// in segments down its bandwidth tree; a short one still goes whole down the latency
// tree. Every vnode gets both once.
BOOST_AUTO_TEST_CASE(a_narrow_hop_deep_in_the_latency_tree_sends_a_long_message_down_the_bandwidth_tree) {
  topology_generator_options opt;
  opt.seed = 106;
  opt.min_procs = 6;
  opt.max_procs = 16;
  auto topo = generate_topology(opt);
  BOOST_REQUIRE(topo.has_value());
  BOOST_REQUIRE(topo->proc_count() == 15u);
  adaptive_riders riders;
  riders.cfg.rule = tree_rule::model;
  mini_grid g{*topo, 2};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  supervisor_view view{*g.sup(0)};
  const auto c = rider(g, 0).bcast().configured_choice().cost;
  const std::size_t long_message = 4 * 1024 * 1024;
  auto ls = view.own_summary(tree_kind::latency);
  auto bs = view.own_summary(tree_kind::bandwidth);
  BOOST_REQUIRE(ls.has_value());
  BOOST_REQUIRE(bs.has_value());
  BOOST_TEST(ls->complete);
  BOOST_TEST(bs->complete);
  auto r = predict(view, long_message, c);
  auto places = predict(view.positions(tree_kind::latency), view.positions(tree_kind::bandwidth),
                        long_message, c);
  BOOST_TEST_MESSAGE("4 MiB from 0: decided on latency " << ms(r.latency) << " ms, bandwidth "
                     << ms(r.bandwidth) << " ms; places latency " << ms(places.latency)
                     << " ms, bandwidth " << ms(places.bandwidth) << " ms; latency tree's "
                     << "narrowest hop " << ls->bottleneck * 8 / 1e6 << " Mbit/s at depth up to "
                     << ls->depth);
  // The scenario: a hop of at most 25 Mbit/s below the first level of the latency tree.
  BOOST_TEST(ls->bottleneck * 8 <= 25.1e6);
  BOOST_TEST(ls->depth >= 2u);
  // The summaries see it, and are decisive (more than summary_margin apart).
  BOOST_TEST(r.known);
  BOOST_TEST(r.from_summaries);
  BOOST_TEST(ms(r.latency) > summary_margin * ms(r.bandwidth));
  BOOST_CHECK(r.faster() == tree_kind::bandwidth);
  BOOST_CHECK(broadcast_kind(g, 0, long_message, 1) == tree_kind::bandwidth);
  BOOST_CHECK(broadcast_kind(g, 0, 100, 2) == tree_kind::latency);
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(15) == "");
}


#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include "banyan/core/tree_choice.hpp"
#include "banyan/core/tree_state.hpp"
#include "core/collective_rider.hpp"
#include "core/random_topology.hpp"
#include "core/message_bytes.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::adaptive_riders;
using banyan::test::collective_rider;
using banyan::test::rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::random_topology;

namespace {

double ms(duration d) {
  return to_ms(d);
}

/// 10 ms RTT to the root over 3 hops, a 10 MB/s bottleneck, 100 MB/s for the own hop.
tree_position three_hops() {
  tree_position p;
  p.root = 7;
  p.dist = 10ms;
  p.est = 1e7;
  p.depth = 3;
  p.hop = 1e8;
  return p;
}

/// `three_hops` at 1 MB/s a hop: a wide, slow latency tree.
tree_position slow_three_hops() {
  auto p = three_hops();
  p.hop = 1e6;
  return p;
}

/// `three_hops` with a 100 MB/s estimate: a fast bandwidth tree.
tree_position fast_three_hops() {
  auto p = three_hops();
  p.est = 1e8;
  return p;
}

const tree_cost cost{20us, 65536};

// A tree_view with hand-made figures: processor 0 owning vnode 0, children 1 and 2 in
// both of its trees (owning vnodes 1 and 2), and the positions a test gives.
class figures_view final : public tree_view {
public:
  std::vector<tree_position> latency, bandwidth;

  proc_id self() const override { return 0; }
  bool participating() const override { return true; }
  vnode_set own_vnodes() const override { return vnode_set{0}; }
  vnode_set all_vnodes() const override { return vnode_set::range(0, 3); }
  proc_id owner(vnode_id v) const override { return v; }
  std::map<proc_id, vnode_set> owners(const vnode_set& vs) const override {
    std::map<proc_id, vnode_set> r;
    vs.for_each([&](vnode_id v) { r[v].insert(v); });
    return r;
  }
  std::vector<tree_child> children(tree_key) const override {
    return {{1, vnode_set{1}, 1}, {2, vnode_set{2}, 1}};
  }
  proc_id parent(tree_key) const override { return no_proc; }
  duration max_root_distance() const override { return 10ms; }
  rate min_root_rate() const override { return infinite_rate; }
  std::vector<proc_id> peers() const override { return {1, 2}; }
  std::vector<tree_position> positions(tree_kind k) const override {
    return k == tree_kind::latency ? latency : bandwidth;
  }
};

/// The frames a broadcast of `bytes` from the figures view sends: their kind, and how
/// many there are per child.
struct sent_frames {
  tree_kind kind = tree_kind::latency;
  std::size_t frames = 0;
  std::uint32_t count = 0;
};

sent_frames broadcast_from(figures_view& view, broadcast_config cfg, std::size_t bytes) {
  broadcast_engine eng{view, cfg};
  broadcast_outbox out;
  auto id = eng.broadcast(0ns, shared_bytes(std::vector<std::uint8_t>(bytes, 1)), out);
  BOOST_REQUIRE(id.has_value());
  sent_frames r;
  for (auto& e : out.sends) {
    auto* s = std::get_if<wire::bcast_segment>(&e.body);
    BOOST_REQUIRE(s != nullptr);
    BOOST_TEST(!s->direct); // down the tree
    r.kind = s->kind;
    r.count = s->count;
    ++r.frames;
  }
  return r;
}

broadcast_config model_config() {
  broadcast_config c;
  c.rule = tree_rule::model;
  return c;
}


using banyan::test::message_bytes;

/// Broadcasts from `from` and returns the kind of the tree its first frame follows
/// (nothing if it sent none at once).
std::optional<tree_kind> start_broadcast(mini_grid& g, proc_id from, std::size_t bytes,
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

tree_kind broadcast_kind(mini_grid& g, proc_id from, std::size_t bytes, std::uint64_t salt) {
  auto kind = start_broadcast(g, from, bytes, salt);
  BOOST_REQUIRE(kind.has_value());
  return *kind;
}

topology parse(const char* text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE(t.has_value());
  return *t;
}

} // namespace

// The formulas of tree_choice.hpp on figures worked out by hand.
BOOST_AUTO_TEST_CASE(predictions_worked_out_by_hand) {
  auto p = three_hops();
  // Latency tree: 5 ms + 3 x (20 us + 1e6 B / 1e8 B/s = 10 ms) = 35.06 ms.
  BOOST_TEST(ms(predict_latency_tree(p, 1'000'000, cost)) == 35.06,
             boost::test_tools::tolerance(1e-6));
  // Bandwidth tree: 5 ms + 3 x 20 us + 2 x 65536 B / 1e8 B/s (1.31072 ms) + 1e6 B / 1e7
  // B/s (100 ms) + 15 x 20 us (16 segments) = 106.67072 ms.
  BOOST_TEST(ms(predict_bandwidth_tree(p, 1'000'000, cost)) == 106.67072,
             boost::test_tools::tolerance(1e-6));
  // A message shorter than a segment is one segment: 5 + 0.06 + 2 x 0.01 + 0.1 = 5.18 ms;
  // the latency tree: 5 + 3 x (0.02 + 0.01) = 5.09 ms.
  BOOST_TEST(ms(predict_bandwidth_tree(p, 1000, cost)) == 5.18, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(ms(predict_latency_tree(p, 1000, cost)) == 5.09, boost::test_tools::tolerance(1e-6));
  // The hops above the bottleneck are never taken to be slower than it.
  p.hop = 1e6;
  BOOST_TEST(ms(predict_bandwidth_tree(p, 65536, cost)) == 5.0 + 0.06 + 2 * 6.5536 + 6.5536,
             boost::test_tools::tolerance(1e-6));
  // An unknown rate costs "never", without overflowing.
  p.hop = 0;
  BOOST_TEST(ms(predict_latency_tree(p, 1, cost)) > 1e9);
}

// The prediction is the worst over the positions (the farthest receiver); the faster
// tree wins, a tie goes to the latency tree, and without both kinds nothing is known.
BOOST_AUTO_TEST_CASE(prediction_takes_the_worst_position_and_the_faster_tree) {
  auto near = three_hops();
  near.dist = 1ms;
  auto far = three_hops();
  auto r = predict({near, far}, {near, far}, 1'000'000, cost);
  BOOST_TEST(r.known);
  BOOST_TEST(ms(r.latency) == 35.06, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(ms(r.bandwidth) == 106.67072, boost::test_tools::tolerance(1e-6));
  BOOST_CHECK(r.faster() == tree_kind::latency);
  // A long message over a deep latency tree with a wide fan-out: the bandwidth tree.
  auto wide = far;
  wide.hop = 2e6; // 3 hops at 2 MB/s: 1.5 s
  r = predict({wide}, {far}, 1'000'000, cost);
  BOOST_CHECK(r.faster() == tree_kind::bandwidth);
  BOOST_CHECK(predict({}, {far}, 1, cost).known == false);
  BOOST_CHECK(predict({far}, {}, 1, cost).known == false);
  tree_prediction tie;
  tie.latency = tie.bandwidth = 1ms;
  BOOST_CHECK(tie.faster() == tree_kind::latency);
}

// position_of reads a tree_state as the supervisor keeps it.
BOOST_AUTO_TEST_CASE(positions_from_tree_states) {
  tree_state t{{3, tree_kind::bandwidth}, 9};
  BOOST_CHECK(!position_of(t).has_value()); // no parent
  wire::tree_info parent;
  parent.tree = {3, tree_kind::bandwidth};
  parent.connected = true;
  parent.dist = 4ms;
  parent.est = 5e7;
  parent.children = 4;
  parent.path = {3};
  t.set_parent(5, 1ms, 1e8, parent);
  // Without a sender capacity the path rate is split: 1e8 / 4.
  auto p = position_of(t);
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->root == 3u);
  BOOST_TEST(ms(p->dist) == 5.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(p->depth == 2u);
  BOOST_TEST(p->hop == 2.5e7);
  BOOST_TEST(p->est == 2.5e7);
  // With one, the parent's capacity is split, never beyond the path: min(1e8, 2e8 / 4).
  p = position_of(t, 2e8);
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->hop == 5e7);
  BOOST_CHECK(!position_of(tree_state{{9, tree_kind::latency}, 9}).has_value()); // the root
}

// supervisor_view::positions: on converged trees, one position per other root and kind,
// with the depth of the trees the supervisors built and the RTT sum along them.
BOOST_AUTO_TEST_CASE(a_supervisor_view_gives_its_place_in_every_other_root_s_trees) {
  auto topo = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(topo.has_value());
  mini_grid g{*topo, 2};
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  const proc_id me = 3;
  supervisor_view view{*g.sup(me)};
  for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
    auto ps = view.positions(k);
    BOOST_TEST(ps.size() == 7u);
    for (auto& p : ps) {
      BOOST_TEST_CONTEXT(to_string(k) << " tree of " << p.root) {
        BOOST_TEST(p.root != me);
        auto t = g.tree_of({p.root, k});
        BOOST_TEST(p.depth == static_cast<std::uint32_t>(t.depths()[me]));
        duration rtt{0};
        for (proc_id q = me; q != p.root; q = t.parent(q))
          rtt += g.sup(q)->tree({p.root, k})->rtt_parent();
        BOOST_TEST(p.dist.count() == rtt.count());
        BOOST_TEST(p.est > 0);
        BOOST_TEST(p.hop >= p.est);
      }
    }
  }
}

// The engine follows the model: a long message whole down the latency tree when the
// model says so, a short one in segments down the bandwidth tree when it says that; the
// threshold rule ignores the figures, and the model without figures falls back on it.
BOOST_AUTO_TEST_CASE(the_engine_takes_the_tree_the_model_predicts) {
  figures_view view;
  auto shallow = three_hops();
  shallow.depth = 1;        // a latency tree of one hop at 100 MB/s
  auto deep = three_hops(); // a bandwidth tree 3 hops deep at 10 MB/s
  view.latency = {shallow};
  view.bandwidth = {deep};
  auto f = broadcast_from(view, model_config(), 1024 * 1024);
  BOOST_CHECK(f.kind == tree_kind::latency);
  BOOST_TEST(f.frames == 2u); // one whole frame per child
  BOOST_TEST(f.count == 1u);
  // Beyond max_whole a message is never one frame: the bandwidth tree, in segments,
  // whatever the model predicts (a transport bounds its frames).
  auto capped = model_config();
  capped.max_whole = 512 * 1024;
  f = broadcast_from(view, capped, 1024 * 1024);
  BOOST_CHECK(f.kind == tree_kind::bandwidth);
  BOOST_TEST(f.count == 16u);
  broadcast_config threshold;
  threshold.rule = tree_rule::threshold;
  f = broadcast_from(view, threshold, 1024 * 1024);
  BOOST_CHECK(f.kind == tree_kind::bandwidth);
  BOOST_TEST(f.frames == 2u * 16u);
  BOOST_TEST(f.count == 16u);

  // A wide, slow latency tree (3 hops at 1 MB/s) against a fast bandwidth tree.
  view.latency = {slow_three_hops()};
  view.bandwidth = {fast_three_hops()};
  f = broadcast_from(view, model_config(), 100 * 1024); // below the 256 KiB threshold
  BOOST_CHECK(f.kind == tree_kind::bandwidth);
  BOOST_TEST(f.count == 2u); // 64 KiB segments
  BOOST_TEST(f.frames == 2u * 2u);
  f = broadcast_from(view, threshold, 100 * 1024);
  BOOST_CHECK(f.kind == tree_kind::latency);

  view.latency.clear(); // nothing measured: the threshold decides
  f = broadcast_from(view, model_config(), 100 * 1024);
  BOOST_CHECK(f.kind == tree_kind::latency);
  f = broadcast_from(view, model_config(), 300 * 1024);
  BOOST_CHECK(f.kind == tree_kind::bandwidth);

  // The per-call choice overrides the configuration.
  view.latency = {slow_three_hops()};
  broadcast_engine eng{view, threshold};
  broadcast_outbox out;
  tree_choice model;
  model.rule = tree_rule::model;
  BOOST_REQUIRE(
      eng.broadcast(0ns, shared_bytes(std::vector<std::uint8_t>(100 * 1024, 1)), model, out)
          .has_value());
  BOOST_REQUIRE(!out.sends.empty());
  BOOST_CHECK(std::get<wire::bcast_segment>(out.sends.front().body).kind == tree_kind::bandwidth);
}

// Point-to-point messages follow no tree: the model does not change how they travel.
BOOST_AUTO_TEST_CASE(point_to_point_ignores_the_model) {
  figures_view view;
  view.latency = {slow_three_hops()};
  view.bandwidth = {fast_three_hops()};
  broadcast_engine eng{view, model_config()};
  broadcast_outbox out;
  BOOST_REQUIRE(
      eng.send(0ns, vnode_set{2}, shared_bytes(std::vector<std::uint8_t>(100 * 1024, 1)), out)
          .has_value());
  BOOST_REQUIRE(out.sends.size() == 1u);
  auto& s = std::get<wire::bcast_segment>(out.sends.front().body);
  BOOST_TEST(s.direct);
  BOOST_TEST(s.count == 1u); // below long_threshold: whole
}

// Two processors: both trees are the one link, so segments only add send overheads and
// the model sends even a long message whole, along the latency tree; it arrives once.
BOOST_AUTO_TEST_CASE(on_a_single_link_a_long_message_goes_whole) {
  adaptive_riders riders;
  riders.cfg = model_config();
  mini_grid g{parse("topology pair\nsend_overhead 20us\ndefault nic 1Gbit\n"
                    "group A procs 2 rtt 0.2ms\n"),
              3};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  supervisor_view view{*g.sup(0)};
  auto r = predict(view.positions(tree_kind::latency), view.positions(tree_kind::bandwidth),
                   1024 * 1024, rider(g, 0).bcast().configured_choice().cost);
  BOOST_TEST(r.known);
  BOOST_TEST(ms(r.latency) < ms(r.bandwidth));
  BOOST_CHECK(broadcast_kind(g, 0, 1024 * 1024, 1) == tree_kind::latency);
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(2) == "");
  BOOST_TEST(rider(g, 1).bcast().stats().delivered == 1u);
}

// One LAN of eight: the latency tree fans out wide, the bandwidth tree is a chain, so a
// 200 KiB message (below the paper's threshold) is predicted faster in segments down the
// bandwidth tree; the engine sends it so, and every vnode gets it once. A small one
// still takes the latency tree.
BOOST_AUTO_TEST_CASE(below_the_threshold_the_model_may_take_the_bandwidth_tree) {
  adaptive_riders riders;
  riders.cfg = model_config();
  mini_grid g{parse("topology lan8\nsend_overhead 20us\ndefault nic 1Gbit\n"
                    "group A procs 8 rtt 0.2ms\n"),
              5};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  supervisor_view view{*g.sup(0)};
  auto cost_of = rider(g, 0).bcast().configured_choice().cost;
  auto big = predict(view.positions(tree_kind::latency), view.positions(tree_kind::bandwidth),
                     200 * 1024, cost_of);
  auto small = predict(view.positions(tree_kind::latency), view.positions(tree_kind::bandwidth),
                       100, cost_of);
  BOOST_TEST_MESSAGE("200 KiB: latency " << ms(big.latency) << " ms, bandwidth "
                                         << ms(big.bandwidth) << " ms");
  BOOST_TEST(big.known);
  BOOST_CHECK(big.faster() == tree_kind::bandwidth);
  BOOST_CHECK(small.faster() == tree_kind::latency);
  BOOST_CHECK(broadcast_kind(g, 0, 200 * 1024, 1) == tree_kind::bandwidth);
  BOOST_CHECK(broadcast_kind(g, 0, 100, 2) == tree_kind::latency);
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
}

// Exactly once is the engine's, whatever the rule: processors join and leave at random
// while broadcasts of every size start under the model.
BOOST_AUTO_TEST_CASE(model_broadcasts_under_churn_reach_every_vnode_exactly_once) {
  std::mt19937 rng{777};
  int all_kinds[2] = {0, 0};
  for (int round = 0; round < 20; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg = model_config();
    riders.cfg.segment_size = 32 * 1024;
    mini_grid g{topo, static_cast<std::uint64_t>(9100 + round)};
    riders.install(g);
    g.start();
    g.run();
    std::uniform_int_distribution<proc_id> any(0, n - 1);
    std::uniform_int_distribution<int> gap_us(0, 5000);
    const std::size_t sizes[] = {1, 20 * 1024, 100 * 1024, 400 * 1024};
    int kinds[2] = {0, 0};
    for (int step = 0; step < 24; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      auto p = any(rng);
      auto live = g.live();
      auto what = std::uniform_int_distribution<int>(0, 3)(rng);
      if (what <= 1) {
        if (live[p])
          if (auto k = start_broadcast(g, p, sizes[step % 4], round * 100 + step))
            ++kinds[static_cast<int>(*k)];
      } else if (live[p] && std::count(live.begin(), live.end(), true) > 2) {
        g.leave(p);
      } else if (!g.reachable(p) && g.sup(p)->state() == supervisor::status::left) {
        g.rejoin_randomly(p, n, rng);
      }
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors, " << kinds[0]
                                << " latency and " << kinds[1] << " bandwidth broadcasts") {
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
    }
    all_kinds[0] += kinds[0];
    all_kinds[1] += kinds[1];
  }
  // Both trees were taken (the model does not pick one tree for everything).
  BOOST_TEST(all_kinds[0] > 0);
  BOOST_TEST(all_kinds[1] > 0);
}

#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>

#include "banyan/core/tree_builders.hpp"
#include "core/collective_rider.hpp"
#include "core/random_topology.hpp"
#include "core/message_bytes.hpp"

using namespace banyan;
using banyan::test::adaptive_riders;
using banyan::test::collective_rider;
using banyan::test::rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::random_topology;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

using banyan::test::message_bytes;

/// Riders over each processor's supervisor; every incarnation numbers its broadcasts
/// from its own range.

void broadcast(mini_grid& g, proc_id from, std::size_t bytes, std::uint64_t salt) {
  g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    dynamic_cast<collective_rider&>(r).broadcast(now, message_bytes(bytes, salt), out);
  });
}

broadcast_stats total_stats(mini_grid& g, std::size_t n) {
  broadcast_stats t;
  for (proc_id p = 0; p < n; ++p)
    if (g.rider_of(p)) {
      auto& s = rider(g, p).bcast().stats();
      t.started += s.started;
      t.sent += s.sent;
      t.tree_frames += s.tree_frames;
      t.direct_frames += s.direct_frames;
      t.shallow_frames += s.shallow_frames;
      t.delivered += s.delivered;
      t.redirected += s.redirected;
      t.holds += s.holds;
      t.bounces += s.bounces;
      t.malformed += s.malformed;
      t.offered += s.offered;
      t.offers_taken += s.offers_taken;
      t.offers_refused += s.offers_refused;
      t.offer_fallbacks += s.offer_fallbacks;
    }
  return t;
}

} // namespace

// Once trees have converged, headers match the trees: every frame goes parent -> child,
// every processor receives every segment exactly once, nothing goes point-to-point.
BOOST_AUTO_TEST_CASE(stable_broadcasts_use_tree_edges_only) {
  adaptive_riders riders;
  riders.cfg.rule = tree_rule::threshold; // frame counts per tree kind: fix the kind by size
  mini_grid g{tiny(), 3};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  const std::size_t long_bytes = 1 << 20; // 16 segments of 64 KiB
  for (proc_id p = 0; p < 8; ++p) {
    broadcast(g, p, 10 + p, p);
    broadcast(g, p, long_bytes + 1 + p, 100 + p); // 17 segments
  }
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  auto t = total_stats(g, 8);
  BOOST_TEST(t.started == 16u);
  BOOST_TEST(t.direct_frames == 0u);
  BOOST_TEST(t.holds == 0u);
  BOOST_TEST(t.bounces == 0u);
  BOOST_TEST(t.malformed == 0u);
  BOOST_TEST(t.redirected == 0u);
  // Each of the 7 other processors receives each segment once: 8 * 7 * (1 + 17).
  BOOST_TEST(t.tree_frames == 8u * 7u * 18u);
  BOOST_TEST(t.delivered == 16u * 8u);
  for (proc_id p = 0; p < 8; ++p)
    BOOST_TEST(!rider(g, p).bcast().holding());
}

// A shallow start (broadcast_config::shallow_bytes): a short message goes from its
// origin straight to the processors of the origin's LAN that are not its children, down
// the tree to the rest; every vnode once, nothing point-to-point otherwise. A processor
// sent to straight that has children of its own in the tree (tiny-2c8: the one that
// passes it to the other LAN) also gets their part from its tree parent: at most one
// frame more per frame sent straight. Long messages are not shallow.
BOOST_AUTO_TEST_CASE(shallow_broadcasts_reach_the_origins_lan_in_one_hop) {
  adaptive_riders riders;
  riders.cfg.rule = tree_rule::threshold;
  riders.cfg.shallow_bytes = 4096;
  mini_grid g{tiny(), 3};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  for (proc_id p = 0; p < 8; ++p) {
    std::vector<std::uint64_t> before_at(8);
    for (proc_id q = 0; q < 8; ++q)
      before_at[q] = rider(g, q).bcast().stats().shallow_frames;
    const auto before = total_stats(g, 8);
    broadcast(g, p, 10 + p, p);
    g.run();
    const auto after = total_stats(g, 8);
    const auto shallow = after.shallow_frames - before.shallow_frames;
    const auto frames = after.tree_frames - before.tree_frames + shallow;
    BOOST_TEST(frames >= 7u);
    BOOST_TEST(frames <= 7u + shallow);
    // Only the origin sends them, and only to its LAN (tiny-2c8: 4 processors each).
    BOOST_TEST(rider(g, p).bcast().stats().shallow_frames - before_at[p] == shallow);
    BOOST_TEST(shallow <= 3u);
    for (proc_id q = 0; q < 8; ++q)
      if (q != p)
        BOOST_TEST(rider(g, q).bcast().stats().shallow_frames == before_at[q]);
  }
  broadcast(g, 0, 1 << 20, 99); // long: segments down the bandwidth tree
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  auto t = total_stats(g, 8);
  BOOST_TEST(t.shallow_frames > 0u);
  BOOST_TEST(t.direct_frames == 0u);
  BOOST_TEST(t.bounces == 0u);
  BOOST_TEST(t.redirected == 0u);
  BOOST_TEST(t.tree_frames + t.shallow_frames >= 8u * 7u + 7u * 16u);
  BOOST_TEST(t.tree_frames <= 8u * 7u + 7u * 16u);
}

// The threshold rule: a short message is one frame down the latency tree; a long one is
// pipelined down the bandwidth tree, so its completion is far below store-and-forward of
// the whole message at every hop.
BOOST_AUTO_TEST_CASE(long_messages_follow_the_bandwidth_tree_in_segments) {
  adaptive_riders riders;
  riders.cfg.rule = tree_rule::threshold; // the threshold's own test (the model: tree_choice_test)
  mini_grid g{tiny(), 4};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  broadcast(g, 5, 256 * 1024, 1); // exactly the threshold: long, 4 segments
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  auto t = total_stats(g, 8);
  BOOST_TEST(t.tree_frames == 7u * 4u);
  broadcast(g, 5, 256 * 1024 - 1, 2); // short: one frame each
  g.run();
  BOOST_TEST(total_stats(g, 8).tree_frames == 7u * 4u + 7u);
}

// Every message, whatever its size (empty, one byte, segment boundaries), arrives whole.
BOOST_AUTO_TEST_CASE(message_sizes_at_the_edges) {
  adaptive_riders riders;
  riders.cfg.long_threshold = 1000;
  riders.cfg.segment_size = 100;
  mini_grid g{tiny(), 5};
  riders.install(g);
  g.start();
  g.run();
  std::uint64_t salt = 0;
  for (std::size_t n : {0, 1, 99, 100, 999, 1000, 1001, 1099, 1100, 1101, 5000})
    broadcast(g, static_cast<proc_id>(n % 8), n, ++salt);
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  BOOST_TEST(total_stats(g, 8).direct_frames == 0u);
}

// Broadcasts while trees are still forming: headers and trees disagree, point-to-point
// fills the gaps, and still every vnode gets every broadcast once.
BOOST_AUTO_TEST_CASE(broadcasts_during_tree_formation) {
  std::mt19937 rng{31};
  std::size_t direct = 0;
  for (int round = 0; round < 30; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg.segment_size = 16 * 1024;
    mini_grid g{topo, static_cast<std::uint64_t>(500 + round)};
    riders.install(g);
    g.start();
    std::uniform_int_distribution<proc_id> any(0, n - 1);
    for (int step = 0; step < 12; ++step) {
      broadcast(g, any(rng), step % 3 == 0 ? 300 * 1024 : 64, round * 100 + step);
      g.run_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 4000)(rng)));
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      direct += total_stats(g, n).direct_frames;
    }
  }
  BOOST_TEST(direct > 0u); // the fallback was exercised
}

// Processors join and leave at random, vnodes move (joins ask for specific vnodes),
// while broadcasts short and long start from random processors. Every broadcast reaches
// every vnode exactly once, at the processor owning it at delivery time.
namespace {

/// `rounds` rounds of random churn and broadcasts (docs above), with the broadcasts'
/// `shallow_bytes` as given; the engines' counts summed.
broadcast_stats broadcasts_under_churn(int rounds, std::size_t shallow_bytes) {
  std::mt19937 rng{4242};
  broadcast_stats all;
  for (int round = 0; round < rounds; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg.segment_size = 32 * 1024;
    riders.cfg.shallow_bytes = shallow_bytes;
    mini_grid g{topo, static_cast<std::uint64_t>(7000 + round)};
    riders.install(g);
    g.start();
    if (round % 2)
      g.run(); // half the rounds start from converged trees
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    int broadcasts = 0;
    for (int step = 0; step < 30; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int what) { // a broadcast from p
        broadcast(g, p, what == 0 ? 400 * 1024 : 1 + step, round * 1000 + step);
        ++broadcasts;
      });
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors, " << broadcasts
                                << " broadcasts") {
      BOOST_TEST(!g.busy());
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p)
        if (g.rider_of(p))
          BOOST_TEST(!rider(g, p).bcast().holding(),
                     "processor " << p << " still holds:\n" << rider(g, p).bcast().describe());
      auto t = total_stats(g, n);
      BOOST_TEST(t.malformed == 0u);
      all.redirected += t.redirected;
      all.bounces += t.bounces;
      all.holds += t.holds;
      all.direct_frames += t.direct_frames;
      all.offered += t.offered;
      all.offers_taken += t.offers_taken;
      all.offer_fallbacks += t.offer_fallbacks;
      all.shallow_frames += t.shallow_frames;
    }
  }
  return all;
}

} // namespace

BOOST_AUTO_TEST_CASE(broadcasts_under_churn_reach_every_vnode_exactly_once) {
  auto all = broadcasts_under_churn(60, 0);
  BOOST_TEST(all.shallow_frames == 0u);
  // The hard paths were all taken somewhere: handovers without the bytes, and with them.
  BOOST_TEST(all.direct_frames > 0u);
  BOOST_TEST(all.redirected > 0u);
  BOOST_TEST(all.bounces > 0u);
  BOOST_TEST(all.offered > 0u);
  BOOST_TEST(all.offers_taken > 0u);
  BOOST_TEST(all.offer_fallbacks > 0u);
}

// The same churn with shallow starts (broadcast_config::shallow_bytes): every vnode
// still gets every broadcast once, also when the origin's LAN members it sends to
// straight move, leave or are taken for crashed.
BOOST_AUTO_TEST_CASE(shallow_broadcasts_under_churn_reach_every_vnode_exactly_once) {
  auto all = broadcasts_under_churn(60, 4096);
  BOOST_TEST(all.shallow_frames > 0u);
  BOOST_TEST(all.direct_frames > 0u);
  BOOST_TEST(all.redirected > 0u);
  BOOST_TEST(all.bounces > 0u);
  BOOST_TEST(all.offered > 0u);
}

// A processor in the middle of the bandwidth tree leaves while segments stream through
// it: it goes on forwarding along the plan it made, stays reachable until it drained,
// and every vnode (those it handed over included) gets the message once.
BOOST_AUTO_TEST_CASE(a_processor_leaving_while_it_forwards) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    adaptive_riders riders;
    riders.cfg.rule = tree_rule::threshold; // a long message in segments, whatever the model says
    mini_grid g{tiny(), seed};
    riders.install(g);
    g.start();
    g.run();
    const proc_id origin = 0;
    // A processor with children in the origin's bandwidth tree.
    auto t = g.tree_of({origin, tree_kind::bandwidth});
    auto kids = t.children();
    proc_id mid = no_proc;
    for (proc_id p = 1; p < 8 && mid == no_proc; ++p)
      if (!kids[p].empty())
        mid = p;
    if (mid == no_proc)
      continue; // a flat tree this time
    BOOST_TEST_CONTEXT("seed " << seed << ", processor " << mid << " leaves") {
      broadcast(g, origin, 4 << 20, seed); // 64 segments
      // Until mid has passed some segments on, but not all.
      auto sent = [&] { return rider(g, mid).bcast().stats().tree_frames; };
      for (int i = 0; i < 10000 && sent() == 0; ++i)
        g.run_for(std::chrono::microseconds(100));
      BOOST_REQUIRE(rider(g, mid).bcast().holding());
      g.leave(mid);
      g.run();
      BOOST_TEST((g.sup(mid)->state() == supervisor::status::left));
      g.run_for(riders.cfg.drain_linger); // nothing bounces: it may stop
      BOOST_TEST(!g.reachable(mid));
      BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      // It forwarded every segment to every child it had planned for.
      BOOST_TEST(sent() >= 64u * kids[mid].size());
    }
  }
}

// A vnode moves to a newcomer while the segments of a long message stream to its old
// owner: the old owner sends the assembled message on to the new one.
BOOST_AUTO_TEST_CASE(a_vnode_moving_mid_broadcast_gets_the_message_at_its_new_owner) {
  std::size_t redirected = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    adaptive_riders riders;
    riders.cfg.rule = tree_rule::threshold; // a long message in segments
    mini_grid g{tiny(), seed};
    riders.install(g);
    g.start(7); // processor 7 joins later
    g.run();
    broadcast(g, 0, 4 << 20, seed);
    for (int i = 0; i < 10000 && !rider(g, 3).bcast().holding(); ++i)
      g.run_for(std::chrono::microseconds(100));
    BOOST_REQUIRE(rider(g, 3).bcast().holding());
    g.join(7, 1, vnode_set{3});
    g.run();
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_TEST((g.sup(7)->own_vnodes() == vnode_set{3}));
      BOOST_TEST(riders.ledger.check_exactly_once(7) == "");
      redirected += rider(g, 3).bcast().stats().redirected;
    }
  }
  BOOST_TEST(redirected > 0u);
}

// The baselines run on the same engine: static trees through static_tree_view.
BOOST_AUTO_TEST_CASE(static_baseline_trees_deliver_exactly_once_over_tree_edges) {
  std::mt19937 rng{99};
  for (int round = 0; round < 12; ++round) {
    auto topo = round == 0 ? tiny() : random_topology(rng);
    auto n = topo.proc_count();
    auto clusters = topo.cluster_of();
    routing_table routes;
    for (proc_id p = 0; p < n; ++p)
      routes.assign(vnode_set{p}, p, 0);
    for (int shape = 0; shape < 3; ++shape) {
      delivery_ledger ledger;
      mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
      g.set_rider_factory([&](proc_id p, const supervisor&) {
        auto trees = [shape, n, clusters](tree_key k) {
          if (shape == 0)
            return binomial_tree(n, k.root);
          if (shape == 1)
            return magpie_tree(n, k.root, clusters);
          return flat_tree(n, k.root);
        };
        return std::make_unique<collective_rider>(
          std::make_unique<static_tree_view>(p, routes, trees), ledger, broadcast_config{});
      });
      g.start();
      for (proc_id p = 0; p < n; ++p)
        broadcast(g, p, p % 2 ? 700 * 1024 : 5, round * 100 + p);
      g.run();
      BOOST_TEST_CONTEXT("round " << round << ", shape " << shape) {
        BOOST_TEST(ledger.check_exactly_once(static_cast<vnode_id>(n)) == "");
        auto t = total_stats(g, n);
        BOOST_TEST(t.direct_frames == 0u);
        BOOST_TEST(t.holds == 0u);
      }
    }
  }
}

// Broadcasting needs a processor that takes part.
BOOST_AUTO_TEST_CASE(a_processor_that_left_cannot_broadcast) {
  adaptive_riders riders;
  mini_grid g{tiny(), 2};
  riders.install(g);
  g.start();
  g.run();
  g.leave(4);
  g.run();
  broadcast_outbox out;
  auto r = rider(g, 4).bcast().broadcast(g.now(), message_bytes(3, 1), out);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.err().code == errc::stopped));
  BOOST_TEST(out.sends.empty());
}

namespace {

wire::collective_id send_to(mini_grid& g, proc_id from, const vnode_set& to, std::size_t bytes,
                         std::uint64_t salt) {
  wire::collective_id id;
  g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    id = dynamic_cast<collective_rider&>(r).send(now, to, message_bytes(bytes, salt), out);
  });
  return id;
}

/// A random non-empty set of at most 3 vnodes of [0, n).
template <class Rng> vnode_set some_vnodes(vnode_id n, Rng& rng) {
  vnode_set r;
  std::uniform_int_distribution<vnode_id> any(0, n - 1);
  const int k = std::uniform_int_distribution<int>(1, 3)(rng);
  for (int i = 0; i < k; ++i)
    r |= vnode_set{any(rng)};
  return r;
}

} // namespace

// Point-to-point on stable trees: each message reaches exactly its vnodes, in one hop
// from the sender to each owner (no tree frames), short and long, self included.
BOOST_AUTO_TEST_CASE(point_to_point_reaches_exactly_its_vnodes) {
  adaptive_riders riders;
  mini_grid g{tiny(), 3};
  riders.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  std::mt19937 rng{5};
  for (proc_id p = 0; p < 8; ++p) {
    send_to(g, p, vnode_set{(p + 3) % 8}, 10 + p, p);                  // one vnode elsewhere
    send_to(g, p, vnode_set{p}, 3, 50 + p);                            // its own vnode
    send_to(g, p, some_vnodes(8, rng), 300 * 1024 + p, 100 + p);      // long, several owners
  }
  g.run();
  BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
  auto t = total_stats(g, 8);
  BOOST_TEST(t.sent == 24u);
  BOOST_TEST(t.started == 0u);
  BOOST_TEST(t.tree_frames == 0u);
  BOOST_TEST(t.holds == 0u);
  BOOST_TEST(t.bounces == 0u);
  BOOST_TEST(t.redirected == 0u);
  std::size_t deliveries = 0;
  for (auto& [key, n] : riders.ledger.count)
    deliveries += static_cast<std::size_t>(n);
  std::size_t expected = 0;
  for (auto& [op, to] : riders.ledger.targets)
    expected += to.size();
  BOOST_TEST(deliveries == expected);
}

// Bad destinations are refused with a clear error, and nothing is sent.
BOOST_AUTO_TEST_CASE(point_to_point_refuses_bad_destinations) {
  adaptive_riders riders;
  mini_grid g{tiny(), 2};
  riders.install(g);
  g.start();
  g.run();
  broadcast_outbox out;
  auto none = rider(g, 1).bcast().send(g.now(), vnode_set{}, message_bytes(3, 1), out);
  BOOST_REQUIRE(!none.has_value());
  BOOST_TEST((none.err().code == errc::invalid_argument));
  auto beyond = rider(g, 1).bcast().send(g.now(), vnode_set{42}, message_bytes(3, 1), out);
  BOOST_REQUIRE(!beyond.has_value());
  BOOST_TEST((beyond.err().code == errc::invalid_argument));
  BOOST_TEST(beyond.err().message.find("42") != std::string::npos);
  BOOST_TEST(out.sends.empty());
  g.leave(4);
  g.run();
  auto left = rider(g, 4).bcast().send(g.now(), vnode_set{1}, message_bytes(3, 1), out);
  BOOST_REQUIRE(!left.has_value());
  BOOST_TEST((left.err().code == errc::stopped));
}

// A vnode moves (to a newcomer, or away from a processor that leaves) while
// point-to-point messages to it are in flight, short and long: each is delivered exactly
// once, at the vnode's owner at delivery time.
BOOST_AUTO_TEST_CASE(point_to_point_follows_vnodes_that_migrate_in_flight) {
  std::size_t moved_on = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    adaptive_riders riders;
    mini_grid g{tiny(), seed};
    riders.install(g);
    g.start(7); // processor 7 joins later
    g.run();
    const vnode_id v = static_cast<vnode_id>(1 + seed % 6);
    const proc_id from = v == 5 ? 0 : 5;
    send_to(g, from, vnode_set{v}, 4 << 20, seed);  // 64 segments
    send_to(g, from, vnode_set{v, 0}, 17, 100 + seed);
    g.run_for(std::chrono::microseconds(200 * (seed % 5)));
    g.join(7, 0, vnode_set{v});
    for (int i = 0; i < 8; ++i) {
      send_to(g, from, vnode_set{v}, 1 + i * 1000, 1000 * seed + i);
      g.run_for(std::chrono::microseconds(300));
    }
    // and away again: the newcomer leaves, handing v over, while more is in flight
    send_to(g, from, vnode_set{v}, 2 << 20, 7000 + seed);
    g.run_for(std::chrono::microseconds(100 * (seed % 7)));
    g.leave(7);
    send_to(g, from, vnode_set{v}, 33, 8000 + seed);
    g.run();
    BOOST_TEST_CONTEXT("seed " << seed << ", vnode " << v) {
      BOOST_TEST(!g.busy());
      BOOST_TEST(riders.ledger.check_exactly_once(8) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      auto t = total_stats(g, 8);
      moved_on += t.redirected + t.bounces + t.holds;
    }
  }
  BOOST_TEST(moved_on > 0u); // some messages had to follow their vnode
}

// Random churn (joins, leaves, vnode moves) with point-to-point messages and broadcasts
// mixed, over many seeds: each message reaches each of its vnodes exactly once.
BOOST_AUTO_TEST_CASE(point_to_point_under_churn_is_exactly_once) {
  std::mt19937 rng{777};
  broadcast_stats all;
  for (int round = 0; round < 40; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg.segment_size = 32 * 1024;
    mini_grid g{topo, static_cast<std::uint64_t>(9000 + round)};
    riders.install(g);
    g.start();
    if (round % 2)
      g.run();
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    int messages = 0;
    for (int step = 0; step < 30; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 6, 4, [&](proc_id p, int what) {
        if (what == 3) {
          broadcast(g, p, 1 + step, round * 1000 + 500 + step);
          return;
        }
        send_to(g, p, some_vnodes(n, rng), what == 0 ? 300 * 1024 : 1 + step, round * 1000 + step);
        ++messages;
      });
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors, " << messages
                                << " messages") {
      BOOST_TEST(!g.busy());
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      auto t = total_stats(g, n);
      BOOST_TEST(t.malformed == 0u);
      all.redirected += t.redirected;
      all.bounces += t.bounces;
      all.holds += t.holds;
      all.sent += t.sent;
    }
  }
  BOOST_TEST(all.sent > 300u);
  BOOST_TEST(all.redirected + all.bounces + all.holds > 0u);
}

// The small-message path allocates little (docs/decisions.md): on two
// shared cores a hop's latency is the CPU it spends, and heap allocations are a large
// part of the broadcast engine's. This suite counts every `operator new` of its own
// executable, so it lives alone.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <memory>
#include <new>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/topology.hpp"
#include "core/counting_new.hpp"
#include "core/mini_grid.hpp"


using namespace banyan;

namespace {

template <class F>
std::uint64_t allocations(F&& f) {
  const auto before = banyan::test::allocations_so_far();
  f();
  return banyan::test::allocations_so_far() - before;
}

/// Eight processors on one LAN (processes on one host), one vnode each, their trees
/// settled in a mini_grid (virtual time, fixed seed); an engine over each one's
/// `supervisor_view`, as a node runs it.
struct grid {
  static constexpr std::size_t n = 8;
  test::mini_grid g{*parse_topology("group A procs 8 rtt 0.05ms\n"), 11};
  std::vector<std::unique_ptr<supervisor_view>> views;
  std::vector<std::unique_ptr<broadcast_engine>> engines;
  grid() {
    g.start();
    g.run_for(std::chrono::seconds(20));
    for (proc_id p = 0; p < n; ++p) {
      views.push_back(std::make_unique<supervisor_view>(*g.sup(p)));
      broadcast_config cfg;
      cfg.first_seq = (std::uint64_t{p} + 1) << 32;
      engines.push_back(std::make_unique<broadcast_engine>(*views[p], cfg));
    }
  }
  /// Whether `p` has children in processor 0's latency tree.
  bool forwards(proc_id p) const { return !views[p]->children({0, tree_kind::latency}).empty(); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(engine_allocations)

// A set of a few intervals lives inside the vnode_set: copying and combining such sets
// allocates nothing (each took a vector of its own before).
BOOST_AUTO_TEST_CASE(sets_of_a_few_intervals_are_copied_and_combined_without_allocating) {
  const auto a = vnode_set::from_intervals({{0, 2}, {4, 6}, {8, 10}});
  const auto b = vnode_set::from_intervals({{1, 5}, {9, 12}});
  vnode_set r;
  const auto n = allocations([&] {
    vnode_set c = a;
    r = (c & b) | (a - b);
    r -= vnode_set{4};
    r |= vnode_set::range(20, 30);
  });
  BOOST_TEST(n == 0u);
  BOOST_TEST(r.to_string() == "{0-1,5,8-9,20-29}");
}

// One whole-message frame (a 1-byte broadcast) at a leaf, at a forwarder, and the
// acknowledgement a receiver sends back: the allocations of each step, after a warm-up.
// The single-segment path keeps no stream (no map node, no per-segment vectors, no
// tag entries) and the sets involved live inline; before (7263ca6), the same steps took
// 13 (leaf), 21 (forwarder) and 23 (ack) allocations, and the set operations above 15.
BOOST_AUTO_TEST_CASE(a_whole_message_costs_few_allocations_per_step) {
  grid g;
  BOOST_REQUIRE(!g.g.busy());
  // A leaf and a forwarder of processor 0's latency tree.
  proc_id leaf_id = no_proc, fwd_id = no_proc;
  for (proc_id p = 1; p < grid::n; ++p)
    (g.forwards(p) ? fwd_id : leaf_id) = p;
  BOOST_REQUIRE(leaf_id != no_proc);
  BOOST_REQUIRE(fwd_id != no_proc);
  const shared_bytes one(std::vector<std::uint8_t>{7});
  std::uint64_t leaf = 0, forwarder = 0, ack = 0;
  for (int round = 0; round < 20; ++round) {
    broadcast_outbox out;
    const auto now = g.g.now() + std::chrono::milliseconds(round);
    (void) g.engines[0]->broadcast(now, one, out);
    std::deque<wire::envelope> q(out.sends.begin(), out.sends.end());
    std::size_t delivered = out.deliveries.size();
    while (!q.empty()) {
      auto e = std::move(q.front());
      q.pop_front();
      broadcast_outbox o;
      bool taken = false;
      const auto n = allocations([&] {
        taken = g.engines[e.to]->on_message(now, e.from, e.body, o);
      });
      BOOST_REQUIRE(taken);
      if (e.to == leaf_id)
        leaf = n;
      if (e.to == fwd_id)
        forwarder = n;
      for (auto& s : o.sends)
        q.push_back(std::move(s));
      delivered += o.deliveries.size();
      if (e.to == leaf_id) {
        broadcast_outbox a;
        ack = allocations(
            [&] { (void) g.engines[leaf_id]->send(now, vnode_set{0}, {}, a); });
        BOOST_REQUIRE(a.sends.size() == 1u);
        broadcast_outbox r;
        BOOST_REQUIRE(g.engines[0]->on_message(now, leaf_id, a.sends.front().body, r));
        BOOST_REQUIRE(r.deliveries.size() == 1u);
        BOOST_TEST(r.deliveries.front().p2p);
      }
    }
    BOOST_TEST(delivered == grid::n); // every vnode, once
    for (auto& e : g.engines)
      BOOST_TEST(!e->holding());
  }
  BOOST_TEST_MESSAGE("allocations: leaf " << leaf << ", forwarder " << forwarder << ", ack "
                                          << ack);
  // What a leaf still allocates: the payload's list for the copy kept for offers and
  // the delivery's place in a fresh outbox. A forwarder adds its children's list, its
  // forwards and the frames; an ack the owner map of its destination.
  BOOST_TEST(leaf <= 2u);
  BOOST_TEST(forwarder <= 6u);
  BOOST_TEST(ack <= 5u);
}

BOOST_AUTO_TEST_SUITE_END()

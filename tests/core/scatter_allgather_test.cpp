#include <boost/test/unit_test.hpp>

#include <deque>
#include <memory>
#include <random>

#include "banyan/core/scatter_allgather.hpp"

using namespace banyan;

namespace {

/// n engines, one vnode each (processor p owns vnode p), and a network that delivers
/// frames in a random order (seeded): the engine may not rely on any order.
struct grid {
  std::vector<std::unique_ptr<scatter_allgather_engine>> engines;
  std::vector<wire::envelope> wire_frames;
  std::map<vnode_id, std::vector<shared_bytes>> got;
  std::size_t frames = 0;
  std::mt19937 rng;

  grid(std::size_t n, std::size_t threshold, std::uint64_t seed) : rng(seed) {
    scatter_allgather_config cfg;
    cfg.long_threshold = threshold;
    for (proc_id p = 0; p < n; ++p)
      engines.push_back(std::make_unique<scatter_allgather_engine>(
        p, n, [p] { return vnode_set::range(p, p + 1); }, cfg));
  }
  void take(broadcast_outbox& out) {
    for (auto& e : out.sends)
      wire_frames.push_back(e);
    for (auto& d : out.deliveries)
      d.vnodes.for_each([&](vnode_id v) { got[v].push_back(d.payload); });
    out.clear();
  }
  void run() {
    broadcast_outbox out;
    while (!wire_frames.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, wire_frames.size() - 1);
      auto i = pick(rng);
      auto e = wire_frames[i];
      wire_frames.erase(wire_frames.begin() + static_cast<std::ptrdiff_t>(i));
      ++frames;
      BOOST_REQUIRE(scatter_allgather_engine::handles(e.body));
      BOOST_REQUIRE(engines[e.to]->on_message(timestamp{}, e.from, e.body, out));
      take(out);
    }
  }
  /// Starts a broadcast of `msg` at `origin` and runs until no frame is left.
  expected<wire::collective_id> broadcast(proc_id origin, const shared_bytes& msg) {
    broadcast_outbox out;
    auto op = engines[origin]->broadcast(timestamp{}, msg, out);
    take(out);
    run();
    return op;
  }
};

shared_bytes pattern(std::size_t size, std::uint8_t salt) {
  std::vector<std::uint8_t> v(size);
  for (std::size_t i = 0; i < size; ++i)
    v[i] = static_cast<std::uint8_t>(i * 131 + salt);
  return shared_bytes(std::move(v));
}

} // namespace

BOOST_AUTO_TEST_SUITE(scatter_allgather)

BOOST_AUTO_TEST_CASE(every_processor_gets_the_message_once_from_any_origin) {
  // Sizes: below the threshold (binomial, whole), chunks that divide evenly, a short
  // last chunk, and fewer bytes than processors (trailing chunks empty).
  for (std::size_t n : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (std::size_t size : {std::size_t{100}, std::size_t{3}, std::size_t{4096},
                             std::size_t{4097}, std::size_t{10007}}) {
      for (proc_id origin : {proc_id{0}, static_cast<proc_id>(n - 1), static_cast<proc_id>(n / 2)}) {
        BOOST_TEST_CONTEXT("n " << n << " size " << size << " origin " << origin) {
          grid g{n, 1000, n * 1000 + size + origin};
          auto msg = pattern(size, static_cast<std::uint8_t>(origin));
          auto op = g.broadcast(origin, msg);
          BOOST_REQUIRE(op.has_value());
          BOOST_TEST((op->kind == collective_kind::scatter_allgather));
          BOOST_TEST(g.got.size() == n);
          for (auto& [v, copies] : g.got) {
            BOOST_TEST(copies.size() == 1u);
            BOOST_TEST((copies.front() == msg));
          }
          for (auto& e : g.engines) {
            BOOST_TEST(e->in_progress() == 0u);
            BOOST_TEST(e->stats().malformed == 0u);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(long_messages_scatter_then_ring_with_mpich_frame_counts) {
  // n = 6, 6000 bytes: 6 chunks of 1000. Scatter from rank 0 over the binomial tree
  // (0 -> 4 [4,5], 0 -> 2 [2,3], 0 -> 1 [1]; 4 -> 5, 2 -> 3): every chunk but the
  // origin's travels as many hops as its rank's depth: 1+1+2+1+2 = 7 frames. Ring: each
  // of the 6 chunks makes n-1 = 5 hops: 30 frames.
  grid g{6, 1000, 1};
  BOOST_REQUIRE(g.broadcast(0, pattern(6000, 9)).has_value());
  std::uint64_t scatter = 0, ring = 0, whole = 0;
  for (auto& e : g.engines) {
    scatter += e->stats().scatter_frames;
    ring += e->stats().ring_frames;
    whole += e->stats().whole_frames;
  }
  BOOST_TEST(scatter == 7u);
  BOOST_TEST(ring == 30u);
  BOOST_TEST(whole == 0u);
  BOOST_TEST(g.frames == 37u);
  // Every ring frame goes to the right neighbour.
  BOOST_TEST(g.got.size() == 6u);
}

BOOST_AUTO_TEST_CASE(short_messages_go_whole_down_the_binomial_tree) {
  grid g{7, 1000, 2};
  BOOST_REQUIRE(g.broadcast(3, pattern(999, 1)).has_value());
  BOOST_TEST(g.frames == 6u); // one per non-origin processor
  BOOST_TEST(g.got.size() == 7u);
}

BOOST_AUTO_TEST_CASE(malformed_frames_are_refused_and_counted) {
  grid g{4, 100, 3};
  broadcast_outbox out;
  wire::bcast_segment seg;
  seg.op = {0, 1, collective_kind::scatter_allgather};
  seg.count = 4;
  seg.total = 400;
  seg.index = 1;
  seg.payload = pattern(99, 0); // chunk 1 has 100 bytes
  BOOST_TEST(!g.engines[1]->on_message(timestamp{}, 0, wire::message{seg}, out));
  seg.payload = pattern(100, 0);
  seg.index = 3; // not in rank 1's scatter range [1, 2)
  BOOST_TEST(!g.engines[1]->on_message(timestamp{}, 0, wire::message{seg}, out));
  seg.op.kind = collective_kind::broadcast; // not this engine's
  BOOST_TEST(!scatter_allgather_engine::handles(wire::message{seg}));
  BOOST_TEST(g.engines[1]->stats().malformed == 2u);
  BOOST_TEST(out.sends.empty());
  BOOST_TEST(out.deliveries.empty());
}

BOOST_AUTO_TEST_SUITE_END()

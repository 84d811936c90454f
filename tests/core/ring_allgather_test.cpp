// MPICH's ring allgather (core/ring_allgather.hpp), the baseline of banyan's allgather:
// k engines driven by hand through a FIFO network. Every processor ends with every
// vnode's block, after k - 1 steps of one chunk per link.

#include <boost/test/unit_test.hpp>

#include <deque>
#include <random>

#include "banyan/core/ring_allgather.hpp"
#include "banyan/core/vnode_blocks.hpp"

using namespace banyan;
using bytes = std::vector<std::uint8_t>;

namespace {

bytes block_of(std::uint64_t op, vnode_id v, std::size_t n) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(op * 3 + v * 17 + i);
  return b;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_processor_gets_every_block_once_in_k_minus_1_steps) {
  std::mt19937 rng{9};
  for (std::size_t k : {1u, 2u, 3u, 5u, 8u}) {
    // 23 vnodes dealt out unevenly (one processor may own none).
    std::vector<vnode_set> owners(k);
    for (vnode_id v = 0; v < 23; ++v)
      owners[k == 1 ? 0 : (v * 7 + rng() % 2) % k].insert(v);
    std::vector<ring_allgather_engine> engines;
    for (proc_id p = 0; p < k; ++p)
      engines.emplace_back(p, owners);
    std::deque<wire::envelope> net;
    std::vector<allgather_delivery> got;
    auto take = [&](allgather_outbox& out) {
      for (auto& e : out.sends)
        net.push_back(std::move(e));
      for (auto& d : out.deliveries)
        got.push_back(std::move(d));
      out.clear();
    };
    const std::uint64_t op = 4;
    const std::size_t block = 6;
    allgather_outbox out;
    for (proc_id p = 0; p < k; ++p) {
      auto e = engines[p].start(timestamp{}, op, block,
                                [](vnode_id v) { return block_of(4, v, 6); }, out);
      BOOST_REQUIRE(!e);
      take(out);
    }
    std::size_t frames = 0;
    while (!net.empty()) {
      auto e = std::move(net.front());
      net.pop_front();
      ++frames;
      BOOST_TEST(e.to == (e.from + 1) % k); // always to the right neighbour
      BOOST_TEST(engines[e.to].on_message(timestamp{}, e.from, e.body, out));
      take(out);
    }
    BOOST_TEST_CONTEXT(k << " processors") {
      BOOST_TEST(frames == k * (k - 1));
      BOOST_REQUIRE_EQUAL(got.size(), k);
      for (auto& d : got) {
        BOOST_TEST((d.all == vnode_set::range(0, 23)));
        auto blocks = split_blocks(d.all, d.blocks);
        for (vnode_id v = 0; v < 23; ++v)
          BOOST_TEST((blocks.at(v).to_vector() == block_of(op, v, block)));
      }
      for (auto& e : engines) {
        BOOST_TEST(e.in_progress() == 0u);
        BOOST_TEST(e.stats().malformed == 0u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(wrong_starts_and_frames_are_refused) {
  std::vector<vnode_set> owners{vnode_set::range(0, 2), vnode_set::range(2, 4)};
  ring_allgather_engine a(0, owners), stranger(5, owners);
  allgather_outbox out;
  auto values = [](vnode_id v) { return block_of(1, v, 4); };
  BOOST_TEST(stranger.start(timestamp{}, 1, 4, values, out).has_value());
  BOOST_TEST(a.start(timestamp{}, 1, 0, values, out).has_value());
  auto wrong = a.start(timestamp{}, 1, 5, values, out);
  BOOST_REQUIRE(wrong.has_value());
  BOOST_TEST(wrong->message.find("vnode 0") != std::string::npos, wrong->message);
  BOOST_TEST(!a.start(timestamp{}, 1, 4, values, out).has_value());
  BOOST_TEST(a.start(timestamp{}, 1, 4, values, out).has_value()); // twice
  // A chunk that claims to be processor 0's own, at processor 0: dropped, counted.
  auto forged = std::get<wire::bcast_segment>(out.sends.front().body);
  BOOST_TEST(a.on_message(timestamp{}, 1, forged, out));
  BOOST_TEST(a.stats().malformed == 1u);
}

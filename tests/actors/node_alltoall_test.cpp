// banyan::node's all-to-all over loopback TCP in one process: every member gets, for
// each vnode it owns, the block every vnode had for it, before and after a member leaves;
// what the node can tell is wrong fails at once with `invalid_argument` (a contribution of
// the wrong size names the vnode), an all-to-all a member never starts times out naming
// its vnodes, a cancelled one fails with `cancelled`, and the one after is exact. Every
// wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <future>
#include <map>
#include <mutex>

#include "banyan/actors/node.hpp"
#include "banyan/core/alltoall.hpp"
#include "node_check.hpp"
#include "node_forming.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::contains;
using banyan::test::failed;
using banyan::test::form;
using banyan::test::check_converged;
using banyan::test::poll_until;
using banyan::test::ready;

namespace {

node_config config(proc_id id) {
  return banyan::test::loopback_config(id, "alltoall test", 3000);
}

/// The block vnode v has for vnode w in all-to-all `seq`.
std::vector<std::uint8_t> block_of(std::uint64_t seq, vnode_id v, vnode_id w, std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(seq * 29 + v * 11 + w * 5 + i);
  return b;
}

node_gather alltoall_of(std::uint64_t seq, vnode_id root, std::size_t block, vnode_id vnodes) {
  node_gather g;
  g.seq = seq;
  g.root = root;
  g.block = block;
  g.values = [seq, block, vnodes](vnode_id v) {
    std::vector<std::uint8_t> all;
    for (vnode_id w = 0; w < vnodes; ++w) {
      auto b = block_of(seq, v, w, block);
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  };
  return g;
}

/// Every member of `ns` runs all-to-all `g`: each gets, for each vnode it owns, the block
/// every vnode of `all` has for it; together they cover every vnode once.
void alltoall_everywhere(const std::vector<node*>& ns, const node_gather& g, const vnode_set& all) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->alltoall(g));
  vnode_set covered;
  for (std::size_t k = 0; k < fs.size(); ++k) {
    auto& f = fs[k];
    BOOST_REQUIRE_MESSAGE(ready(f, 20s), "alltoall " << g.seq << " did not resolve");
    auto res = f.get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    BOOST_TEST(res->op == g.seq);
    BOOST_TEST(res->vnodes.to_string() == ns[k]->own_vnodes().to_string());
    BOOST_TEST(!covered.intersects(res->vnodes));
    covered |= res->vnodes;
    const auto row = all.size() * g.block;
    BOOST_REQUIRE_EQUAL(res->value.size(), res->vnodes.size() * row);
    std::size_t at = 0;
    res->vnodes.for_each([&](vnode_id w) {
      all.for_each([&](vnode_id v) {
        auto want = block_of(g.seq, v, w, g.block);
        BOOST_TEST(std::equal(want.begin(), want.end(), res->value.data() + at),
                   "the block of vnode " << v << " for vnode " << w);
        at += g.block;
      });
    });
  }
  BOOST_TEST(covered.to_string() == all.to_string());
}

} // namespace

BOOST_AUTO_TEST_CASE(alltoall_gives_every_vnode_its_blocks_before_and_after_a_leave) {
  const auto all = vnode_set::range(0, 24);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  alltoall_everywhere({&a, &b, &c}, alltoall_of(1, c.own_vnodes().front(), 8, 24), all);
  alltoall_everywhere({&a, &b, &c}, alltoall_of(2, a.own_vnodes().front(), 500, 24), all); // 288 KB
  BOOST_TEST(a.next_reduction_seq(collective_kind::alltoall) == 3u);
  // c leaves: its vnodes (and their histories) move; the next one is exact.
  auto l = c.leave();
  BOOST_REQUIRE(ready(l, 10s));
  BOOST_REQUIRE(!l.get().has_value());
  BOOST_REQUIRE(poll_until(15s, [&] { return (a.own_vnodes() | b.own_vnodes()) == all; }));
  alltoall_everywhere({&a, &b}, alltoall_of(3, b.own_vnodes().front(), 16, 24), all);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

BOOST_AUTO_TEST_CASE(wrong_alltoalls_fail_at_once_a_missing_member_times_out_and_the_next_works) {
  const auto all = vnode_set::range(0, 12);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  const auto mine = a.own_vnodes().front();
  // One block per vnode is 12 x 8 bytes; a contribution of 8 is refused, naming the vnode.
  auto g = alltoall_of(1, mine, 8, 12);
  g.values = [](vnode_id) { return std::vector<std::uint8_t>(8); };
  auto f = a.alltoall(g);
  auto e = failed(f, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "is 8 bytes, not 96"), e.message);
  BOOST_TEST(contains(e.message, "vnode " + std::to_string(mine)), e.message);
  BOOST_TEST(contains(e.message, "for each of the 12 vnodes"), e.message);
  auto zero = a.alltoall(alltoall_of(1, mine, 0, 12));
  failed(zero, errc::invalid_argument);
  auto outside = a.alltoall(alltoall_of(1, 99, 4, 12));
  e = failed(outside, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "does not exist"), e.message);
  BOOST_TEST(a.next_reduction_seq(collective_kind::alltoall) == 1u);
  // c never starts number 1: it times out at the root naming c's vnodes, and at b
  // (whose part went up) while it waits for its blocks.
  const auto missing = c.own_vnodes();
  auto t = alltoall_of(1, mine, 4, 12);
  t.timeout = 1500ms;
  auto at_root = a.alltoall(t);
  auto at_b = b.alltoall(t);
  e = failed(at_root, errc::timeout, 10s);
  BOOST_TEST(contains(e.message, "alltoall 1 timed out after 1500 ms at processor 0"), e.message);
  BOOST_TEST(contains(e.message, missing.to_string() + " (processor 2)"), e.message);
  e = failed(at_b, errc::timeout, 10s);
  BOOST_TEST(contains(e.message, "waiting for the result"), e.message);
  // Cancelled where it waits for c.
  auto f2 = a.alltoall(alltoall_of(2, mine, 4, 12));
  BOOST_TEST(!ready(f2, 300ms));
  BOOST_TEST(a.cancel_reduction(2, collective_kind::alltoall));
  e = failed(f2, errc::cancelled, 1s);
  BOOST_TEST(contains(e.message, "cancelled at processor 0"), e.message);
  auto b2 = b.alltoall(alltoall_of(2, mine, 4, 12));
  b.cancel_reduction(2, collective_kind::alltoall);
  BOOST_REQUIRE(ready(b2, 5s));
  // c catches up with the next one: every vnode gets its blocks once.
  alltoall_everywhere({&a, &b, &c}, alltoall_of(3, c.own_vnodes().front(), 6, 12), all);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

BOOST_AUTO_TEST_CASE(an_alltoall_cut_into_ranges_times_out_as_one_and_the_next_works) {
  // 12 vnodes, blocks of 400 bytes: cut into several ranges (core/alltoall.hpp), each its
  // own gather to its first vnode. c never starts number 1: every range misses c's vnodes.
  const auto all = vnode_set::range(0, 12);
  const std::size_t block = 400;
  const auto m = alltoall_ranges(12, block);
  BOOST_REQUIRE(m > 1u);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  const auto missing = c.own_vnodes();
  auto t = alltoall_of(1, a.own_vnodes().front(), block, 12);
  t.timeout = 1500ms;
  auto at_a = a.alltoall(t);
  auto at_b = b.alltoall(t);
  for (auto* n : {&a, &b}) {
    auto e = failed(n == &a ? at_a : at_b, errc::timeout, 10s);
    BOOST_TEST(contains(e.message, "alltoall 1 timed out after 1500 ms at processor " +
                                     std::to_string(n->id())), e.message);
    // A member owning the first vnode of some range gathered it: it names c's vnodes.
    bool roots = false;
    for (std::size_t g = 0; g < m; ++g)
      roots = roots || n->own_vnodes().contains(alltoall_range(all, m, g).front());
    if (roots)
      BOOST_TEST(contains(e.message, missing.to_string() + " (processor 2)"), e.message);
    else
      BOOST_TEST(contains(e.message, "waiting for the result"), e.message);
  }
  BOOST_TEST(a.next_reduction_seq(collective_kind::alltoall) == 2u);
  // The next one, cut alike, reaches every vnode once with the right blocks.
  alltoall_everywhere({&a, &b, &c}, alltoall_of(2, c.own_vnodes().front(), block, 12), all);
  BOOST_TEST(a.next_reduction_seq(collective_kind::alltoall) == 3u);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

// banyan::node's gather, scatter and allgather over loopback TCP in one process: every vnode's block
// reaches the root once, every vnode gets its own block once, before and after a member
// leaves; what the node can tell is wrong fails at once with `invalid_argument`, a gather
// a member never joins times out naming the missing vnodes, a cancelled one fails with
// `cancelled`, and the gather after a failed one is exact. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <future>
#include <map>
#include <mutex>

#include "banyan/actors/node.hpp"
#include "banyan/core/gather.hpp"
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
  return banyan::test::loopback_config(id, "gather test", 3000);
}

std::vector<std::uint8_t> block_of(std::uint64_t seq, vnode_id v, std::size_t n) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(seq * 29 + v * 11 + i);
  return b;
}

node_gather gather_of(std::uint64_t seq, vnode_id root, std::size_t block) {
  node_gather g;
  g.seq = seq;
  g.root = root;
  g.block = block;
  g.values = [seq, block](vnode_id v) { return block_of(seq, v, block); };
  return g;
}

/// Every member of `ns` runs gather `g`: the root's owner gets every block of `all` once.
void gather_everywhere(const std::vector<node*>& ns, const node_gather& g, const vnode_set& all) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->gather(g));
  int roots = 0;
  for (auto& f : fs) {
    BOOST_REQUIRE_MESSAGE(ready(f, 20s), "gather " << g.seq << " did not resolve");
    auto res = f.get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    if (res->value.size() == 0)
      continue;
    ++roots;
    BOOST_TEST(res->vnodes.to_string() == all.to_string());
    auto blocks = gathered_blocks(*res);
    BOOST_REQUIRE_EQUAL(blocks.size(), all.size());
    all.for_each([&](vnode_id v) {
      BOOST_TEST((blocks.at(v).to_vector() == block_of(g.seq, v, g.block)), "vnode " << v);
    });
  }
  BOOST_TEST(roots == 1);
}

/// Every member of `ns` runs allgather `g`: each gets every block of `all`, right.
void allgather_everywhere(const std::vector<node*>& ns, const node_gather& g, const vnode_set& all) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->allgather(g));
  for (auto& f : fs) {
    BOOST_REQUIRE_MESSAGE(ready(f, 20s), "allgather " << g.seq << " did not resolve");
    auto res = f.get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    BOOST_TEST(res->vnodes.to_string() == all.to_string());
    auto blocks = gathered_blocks(*res);
    BOOST_REQUIRE_EQUAL(blocks.size(), all.size());
    all.for_each([&](vnode_id v) {
      BOOST_TEST((blocks.at(v).to_vector() == block_of(g.seq, v, g.block)), "vnode " << v);
    });
  }
}

/// Scatter deliveries, per scatter and vnode, with their bytes checked.
struct scatter_log {
  std::mutex mtx;
  std::map<std::pair<wire::collective_id, vnode_id>, int> count;
  int wrong = 0;
  std::size_t block = 0;
  std::uint64_t seq = 0;
  node::delivery_handler handler() {
    return [this](const node_delivery& d) {
      if (d.what != node_delivery::kind::scatter)
        return;
      std::lock_guard<std::mutex> lk(mtx);
      std::size_t at = 0;
      d.vnodes.for_each([&](vnode_id v) {
        ++count[{d.op, v}];
        auto want = block_of(seq, v, block);
        if (d.payload.size() < at + block ||
            !std::equal(want.begin(), want.end(), d.payload.begin() + at))
          ++wrong;
        at += block;
      });
    };
  }
  std::size_t reached(const wire::collective_id& op) {
    std::lock_guard<std::mutex> lk(mtx);
    std::size_t n = 0;
    for (auto& [k, c] : count)
      n += k.first == op;
    return n;
  }
  bool exactly_once(const wire::collective_id& op, const vnode_set& all) {
    std::lock_guard<std::mutex> lk(mtx);
    bool ok = true;
    all.for_each([&](vnode_id v) {
      auto i = count.find({op, v});
      ok = ok && i != count.end() && i->second == 1;
    });
    return ok;
  }
};

std::map<vnode_id, shared_bytes> blocks_for(std::uint64_t seq, const vnode_set& all, std::size_t n) {
  std::map<vnode_id, shared_bytes> m;
  all.for_each([&](vnode_id v) { m[v] = shared_bytes(block_of(seq, v, n)); });
  return m;
}

} // namespace

BOOST_AUTO_TEST_CASE(gather_and_scatter_reach_every_vnode_once_before_and_after_a_leave) {
  const auto all = vnode_set::range(0, 48);
  scatter_log log; // outlives the nodes whose handlers write to it
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c}) {
    BOOST_REQUIRE(n->start().has_value());
    n->on_deliver(log.handler());
  }
  form(a, {&b, &c}, all);
  gather_everywhere({&a, &b, &c}, gather_of(1, c.own_vnodes().front(), 16), all);
  gather_everywhere({&a, &b, &c}, gather_of(2, a.own_vnodes().front(), 9000), all); // long
  allgather_everywhere({&a, &b, &c}, gather_of(1, b.own_vnodes().front(), 8), all);
  allgather_everywhere({&a, &b, &c}, gather_of(2, c.own_vnodes().front(), 7000), all); // long

  std::uint64_t seq = 10;
  for (std::size_t block : {std::size_t{8}, std::size_t{12000}}) {
    log.block = block;
    log.seq = ++seq;
    auto s = b.scatter(b.own_vnodes().front(), blocks_for(seq, all, block));
    BOOST_REQUIRE(ready(s, 5s));
    auto id = s.get();
    BOOST_REQUIRE_MESSAGE(id.has_value(), (id ? "" : id.err().to_string()));
    BOOST_REQUIRE(poll_until(20s, [&] { return log.reached(*id) == all.size(); }));
    std::this_thread::sleep_for(200ms); // nothing more arrives
    BOOST_TEST(log.exactly_once(*id, all));
  }
  BOOST_TEST(a.metrics().deliveries[2].vnodes + b.metrics().deliveries[2].vnodes +
               c.metrics().deliveries[2].vnodes == 2 * all.size());

  // c leaves: its vnodes (and their gather histories) move; the next ones are exact.
  auto l = c.leave();
  BOOST_REQUIRE(ready(l, 10s));
  BOOST_REQUIRE(!l.get().has_value());
  BOOST_REQUIRE(poll_until(15s, [&] { return (a.own_vnodes() | b.own_vnodes()) == all; }));
  gather_everywhere({&a, &b}, gather_of(3, b.own_vnodes().front(), 32), all);
  allgather_everywhere({&a, &b}, gather_of(3, a.own_vnodes().front(), 16), all);
  log.block = 5;
  log.seq = ++seq;
  auto s = a.scatter(a.own_vnodes().front(), blocks_for(seq, all, 5));
  BOOST_REQUIRE(ready(s, 5s));
  auto id = s.get();
  BOOST_REQUIRE(id.has_value());
  BOOST_REQUIRE(poll_until(20s, [&] { return log.reached(*id) == all.size(); }));
  std::this_thread::sleep_for(200ms);
  BOOST_TEST(log.exactly_once(*id, all));
  BOOST_TEST(log.wrong == 0);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

BOOST_AUTO_TEST_CASE(wrong_gathers_and_scatters_fail_at_once_and_the_next_works) {
  const auto all = vnode_set::range(0, 20);
  node a(config(0));
  node b(config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  form(a, {&b}, all);
  const auto mine = a.own_vnodes().front();
  const auto theirs = b.own_vnodes().front();
  // A block of the wrong size (vnodes owned here are counted at the start).
  auto g = gather_of(1, mine, 8);
  g.values = [](vnode_id) { return std::vector<std::uint8_t>(7); };
  auto f = a.gather(g);
  auto e = failed(f, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "is 7 bytes, not 8"), e.message);
  auto zero = a.gather(gather_of(1, mine, 0));
  failed(zero, errc::invalid_argument);
  auto outside = a.gather(gather_of(1, 99, 4));
  e = failed(outside, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "does not exist"), e.message);
  // Scatters: a root owned elsewhere, a vnode without a block, uneven blocks.
  auto s1 = a.scatter(theirs, blocks_for(1, all, 4));
  e = failed(s1, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "is not owned by processor 0"), e.message);
  auto partial = blocks_for(1, all, 4);
  partial.erase(3);
  auto s2 = a.scatter(mine, partial);
  e = failed(s2, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "none for {3}"), e.message);
  auto uneven = blocks_for(1, all, 4);
  uneven[5] = shared_bytes(std::vector<std::uint8_t>(6));
  auto s3 = a.scatter(mine, uneven);
  e = failed(s3, errc::invalid_argument);
  BOOST_TEST(contains(e.message, "vnode 5"), e.message);
  // The refused gather changed nothing: number 1 is still the next one.
  BOOST_TEST(a.next_reduction_seq(collective_kind::gather) == 1u);
  gather_everywhere({&a, &b}, gather_of(1, theirs, 4), all);
  a.stop();
  b.stop();
}

BOOST_AUTO_TEST_CASE(a_gather_a_member_never_joins_times_out_naming_it_or_is_cancelled) {
  const auto all = vnode_set::range(0, 30);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  const auto missing = c.own_vnodes();
  auto g = gather_of(1, a.own_vnodes().front(), 4);
  g.timeout = 1500ms;
  auto at_root = a.gather(g);
  auto at_b = b.gather(g);
  BOOST_REQUIRE(ready(at_b, 5s));
  BOOST_TEST(at_b.get().has_value());
  auto e = failed(at_root, errc::timeout, 10s);
  BOOST_TEST(contains(e.message, "timed out after 1500 ms at processor 0"), e.message);
  BOOST_TEST(contains(e.message, missing.to_string() + " (processor 2)"), e.message);
  // Cancelled where it waits for c.
  auto f = a.gather(gather_of(2, a.own_vnodes().front(), 4));
  BOOST_TEST(!ready(f, 300ms));
  BOOST_TEST(a.cancel_reduction(2, collective_kind::gather));
  e = failed(f, errc::cancelled, 1s);
  BOOST_TEST(contains(e.message, "cancelled at processor 0"), e.message);
  // c catches up with the next one: every block once.
  auto b2 = b.gather(gather_of(2, a.own_vnodes().front(), 4));
  BOOST_REQUIRE(ready(b2, 5s));
  gather_everywhere({&a, &b, &c}, gather_of(3, c.own_vnodes().front(), 6), all);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

// banyan::node's allreduce and barrier over loopback TCP in one process: every member
// gets the exact result for its vnodes (every vnode of the computation reached once
// across the members), with every element type and operator; barriers resolve only once
// every member has arrived; what the node can tell is wrong fails at once, a member that
// never starts one makes it time out naming what was missing, a cancel fails it, and the
// next one works; joins and leaves between them. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <future>

#include "actors/reduction_values.hpp"
#include "banyan/actors/node.hpp"
#include "node_check.hpp"
#include "node_forming.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::contribution;
using banyan::test::same;
using banyan::test::truth;
using banyan::test::contains;
using banyan::test::failed;
using banyan::test::form;
using banyan::test::require_converged;
using banyan::test::succeeded;
using banyan::test::check_converged;
using banyan::test::poll_until;
using banyan::test::ready;

namespace {

node_config config(proc_id id) {
  return banyan::test::loopback_config(id, "allreduce test", 3000);
}

template <class T>
node_reduction allreduce_of(std::uint64_t seq, vnode_id root, reduce_kind k, element_type t,
                            std::size_t count) {
  node_reduction r;
  r.seq = seq;
  r.root = root;
  r.op = {k, t};
  r.count = count;
  r.values = [count, seq](vnode_id v) { return contribution<T>(v, count, seq); };
  return r;
}

/// Every member of `ns` runs allreduce `r`: each resolves with the true value, and the
/// vnodes they report partition `all`.
template <class T>
void allreduce_everywhere(const std::vector<node*>& ns, const node_reduction& r, const vnode_set& all) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->allreduce(r));
  vnode_set reached;
  const auto want = truth<T>(r.op.kind, all, r.count, r.seq);
  for (std::size_t i = 0; i < fs.size(); ++i) {
    BOOST_REQUIRE_MESSAGE(ready(fs[i], 20s), "allreduce " << r.seq << " did not resolve at " << ns[i]->id());
    auto res = fs[i].get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    BOOST_TEST(res->op == r.seq);
    BOOST_TEST((res->vnodes & reached).empty(), "vnodes " << res->vnodes.to_string() << " reached twice");
    BOOST_TEST(ns[i]->own_vnodes().includes(res->vnodes));
    reached |= res->vnodes;
    BOOST_TEST(same(res->value, want), "a wrong value at node " << ns[i]->id());
  }
  BOOST_TEST(reached.to_string() == all.to_string());
}

void barrier_everywhere(const std::vector<node*>& ns, std::uint64_t seq) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->barrier(seq));
  for (auto& f : fs) {
    BOOST_REQUIRE_MESSAGE(ready(f, 20s), "barrier " << seq << " did not resolve");
    auto res = f.get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    BOOST_TEST(res->value.size() == 0u);
  }
}

vnode_id one_of(const node& n) {
  auto vs = n.own_vnodes();
  BOOST_REQUIRE(!vs.empty());
  return vs.front();
}

} // namespace

// Three nodes: every element type and operator, long arrays (bandwidth trees, the
// release in segments), barriers; then a fourth joins and one leaves between them.
BOOST_AUTO_TEST_CASE(allreduces_and_barriers_over_tcp_with_joins_and_leaves) {
  auto all = vnode_set::range(0, 48);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  node d(config(3));
  for (auto* n : {&a, &b, &c, &d})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  std::vector<node*> ns{&a, &b, &c};
  std::uint64_t seq = 0;
  for (auto k : {reduce_kind::sum, reduce_kind::min, reduce_kind::max, reduce_kind::product}) {
    BOOST_TEST_CONTEXT(to_string(k)) {
      allreduce_everywhere<std::int32_t>(ns, allreduce_of<std::int32_t>(++seq, 5, k, element_type::int32, 7), all);
      allreduce_everywhere<std::int64_t>(ns, allreduce_of<std::int64_t>(++seq, 20, k, element_type::int64, 3), all);
      allreduce_everywhere<float>(ns, allreduce_of<float>(++seq, 33, k, element_type::float32, 5), all);
      allreduce_everywhere<double>(ns, allreduce_of<double>(++seq, 47, k, element_type::float64, 2), all);
    }
  }
  // 400 KiB per vnode: up the bandwidth tree, released in segments.
  allreduce_everywhere<std::int32_t>(ns, allreduce_of<std::int32_t>(++seq, 1, reduce_kind::sum, element_type::int32, 100 * 1024), all);
  barrier_everywhere(ns, 1);
  // A barrier does not resolve until the last member arrives.
  auto fa = a.barrier(2);
  auto fb = b.barrier(2);
  BOOST_TEST(!ready(fa, 500ms));
  BOOST_TEST(!ready(fb, 10ms));
  auto fc = c.barrier(2);
  for (auto* f : {&fa, &fb, &fc}) {
    BOOST_REQUIRE(ready(*f, 20s));
    auto r = f->get();
    BOOST_TEST(r.has_value(), (r ? "" : r.err().to_string()));
  }
  // A fourth node joins: it learns the numbers to go on with.
  auto j = d.join({{b.address()}});
  succeeded(j, 10s);
  require_converged({&a, &b, &c, &d}, all);
  BOOST_TEST(d.next_reduction_seq(collective_kind::allreduce) == seq + 1);
  BOOST_TEST(d.next_reduction_seq(collective_kind::barrier) == 3u);
  ns.push_back(&d);
  allreduce_everywhere<std::int64_t>(ns, allreduce_of<std::int64_t>(++seq, one_of(d), reduce_kind::sum, element_type::int64, 4), all);
  barrier_everywhere(ns, 3);
  // One leaves (its vnodes and their histories go to the others).
  auto l = b.leave();
  succeeded(l, 10s);
  ns = {&a, &c, &d};
  require_converged({&a, &c, &d}, all);
  allreduce_everywhere<double>(ns, allreduce_of<double>(++seq, 0, reduce_kind::max, element_type::float64, 6), all);
  barrier_everywhere(ns, 4);
  for (auto* n : {&a, &b, &c, &d})
    n->stop();
}

// What the node can tell is wrong fails at once with invalid_argument and starts
// nothing; a member that never starts one makes it time out, naming its vnodes at the
// root; a cancelled one fails with cancelled; the next works.
BOOST_AUTO_TEST_CASE(allreduce_errors_timeouts_and_cancels) {
  const auto all = vnode_set::range(0, 30);
  node a(config(0));
  node b(config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  auto r0 = a.allreduce(allreduce_of<std::int64_t>(1, 0, reduce_kind::sum, element_type::int64, 2));
  BOOST_TEST(contains(failed(r0, errc::invalid_argument).message, "not a member"));
  auto b0 = a.barrier(1);
  failed(b0, errc::invalid_argument);
  BOOST_TEST(a.next_reduction_seq(collective_kind::allreduce) == 0u);
  form(a, {&b}, all);
  const auto root = one_of(a);
  // A contribution of the wrong size, no elements, no values, a root outside.
  auto wrong = allreduce_of<std::int64_t>(1, root, reduce_kind::sum, element_type::int64, 2);
  wrong.values = [](vnode_id) { return std::vector<std::uint8_t>(5); };
  auto rw = a.allreduce(wrong);
  BOOST_TEST(contains(failed(rw, errc::invalid_argument, 1s).message, "5 bytes, not 16"));
  auto zero = allreduce_of<std::int64_t>(1, root, reduce_kind::sum, element_type::int64, 0);
  auto rz = a.allreduce(zero);
  BOOST_TEST(contains(failed(rz, errc::invalid_argument, 1s).message, "count is 0"));
  auto none = allreduce_of<std::int64_t>(1, root, reduce_kind::sum, element_type::int64, 2);
  none.values = nullptr;
  auto rv = a.allreduce(none);
  failed(rv, errc::invalid_argument, 1s);
  auto rn = a.allreduce(allreduce_of<std::int64_t>(1, 30, reduce_kind::sum, element_type::int64, 2));
  BOOST_TEST(contains(failed(rn, errc::invalid_argument, 1s).message, "root vnode 30 does not exist"));
  BOOST_TEST(a.next_reduction_seq(collective_kind::allreduce) == 1u);
  // The same number, right this time.
  allreduce_everywhere<std::int64_t>({&a, &b}, allreduce_of<std::int64_t>(1, root, reduce_kind::sum, element_type::int64, 2), all);
  auto twice = a.allreduce(allreduce_of<std::int64_t>(1, root, reduce_kind::sum, element_type::int64, 2));
  failed(twice, errc::invalid_argument, 1s); // out of order

  // b never starts allreduce 2: a (the root's owner) times out naming b's vnodes.
  auto r2 = allreduce_of<std::int64_t>(2, root, reduce_kind::sum, element_type::int64, 2);
  r2.timeout = 1500ms;
  auto f2 = a.allreduce(r2);
  auto e2 = failed(f2, errc::timeout, 10s);
  BOOST_TEST(contains(e2.message, "allreduce 2 timed out after 1500 ms at processor 0"), e2.message);
  BOOST_TEST(contains(e2.message, "missing vnodes " + b.own_vnodes().to_string() + " (processor 1)"),
             e2.message);
  // b starts it late; the root gave it up, so b times out waiting for the result.
  auto late = r2;
  late.timeout = 800ms;
  auto fl = b.allreduce(late);
  auto el = failed(fl, errc::timeout, 10s);
  BOOST_TEST(contains(el.message, "allreduce 2 timed out after 800 ms at processor 1"), el.message);
  // A barrier b never starts, cancelled at a: cancelled, naming what was missing.
  auto fb = a.barrier(1);
  BOOST_TEST(!ready(fb, 300ms));
  BOOST_TEST(a.cancel_reduction(1, collective_kind::barrier));
  auto eb = failed(fb, errc::cancelled, 1s);
  BOOST_TEST(contains(eb.message, "barrier 1 cancelled at processor 0"), eb.message);
  BOOST_TEST(contains(eb.message, "missing vnodes " + b.own_vnodes().to_string() + " (processor 1)"),
             eb.message);
  BOOST_TEST(!a.cancel_reduction(1, collective_kind::barrier));
  // b's late barrier 1 times out; the next ones of both kinds count everyone once.
  auto fb1 = b.barrier(1, 500ms);
  failed(fb1, errc::timeout, 10s);
  allreduce_everywhere<std::int64_t>({&a, &b}, allreduce_of<std::int64_t>(3, one_of(b), reduce_kind::sum, element_type::int64, 3), all);
  barrier_everywhere({&a, &b}, 2);
  a.stop();
  b.stop();
}

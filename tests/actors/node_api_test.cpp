// banyan::node's contract with the program that embeds it, over loopback TCP in one
// process: every future completes (at once for what the node can tell is wrong, with
// `timeout` or `cancelled` otherwise, naming what was missing), and the operation after
// a failed one still works; joins resolve owning their share, handovers are events;
// operations are named origin:seq with small numbers. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "banyan/actors/node.hpp"
#include "banyan/core/tree_builders.hpp"
#include "node_check.hpp"
#include "node_forming.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::contains;
using banyan::test::failed;
using banyan::test::form;
using banyan::test::recorder;
using banyan::test::require_converged;
using banyan::test::succeeded;
using banyan::test::check_converged;
using banyan::test::poll_until;
using banyan::test::ready;

namespace {

node_config config(proc_id id) {
  return banyan::test::loopback_config(id, "api test", 2000);
}

/// An int64 sum of one element per vnode, the vnode's number times `seq`.
node_reduction sum_of_vnodes(std::uint64_t seq, vnode_id root) {
  node_reduction r;
  r.seq = seq;
  r.root = root;
  r.op = {reduce_kind::sum, element_type::int64};
  r.count = 1;
  r.values = [seq](vnode_id v) {
    std::vector<std::uint8_t> b(8);
    const auto x = static_cast<std::int64_t>(v * seq);
    std::memcpy(b.data(), &x, 8);
    return b;
  };
  return r;
}

std::int64_t expected_sum(const vnode_set& all, std::uint64_t seq) {
  std::int64_t s = 0;
  all.for_each([&](vnode_id v) { s += static_cast<std::int64_t>(v * seq); });
  return s;
}

/// Every member of `ns` runs `r`; the root's owner's result must be the exact sum over
/// `all`, the others' parts sent.
void reduce_everywhere(const std::vector<node*>& ns, const node_reduction& r, const vnode_set& all) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->reduce(r));
  int roots = 0;
  for (auto& f : fs) {
    BOOST_REQUIRE_MESSAGE(ready(f, 20s), "reduction " << r.seq << " did not resolve");
    auto res = f.get();
    BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
    if (res->value.size() == 0)
      continue;
    ++roots;
    BOOST_TEST(res->vnodes.to_string() == all.to_string());
    std::int64_t got = 0;
    std::memcpy(&got, res->value.data(), 8);
    BOOST_TEST(got == expected_sum(all, r.seq));
  }
  BOOST_TEST(roots == 1);
}

/// A vnode of `n`'s.
vnode_id one_of(const node& n) {
  auto vs = n.own_vnodes();
  BOOST_REQUIRE(!vs.empty());
  return vs.front();
}

/// A TCP port on 127.0.0.1 that accepts connections (the kernel does, from its backlog)
/// and never says a word: a contact that never answers.
class silent_port {
public:
  silent_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    BOOST_REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    BOOST_REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~silent_port() { ::close(fd_); }
  silent_port(const silent_port&) = delete;
  silent_port& operator=(const silent_port&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
  int fd_ = -1;
  unsigned port_ = 0;
};

} // namespace

// What the node can tell is wrong is answered at once with `invalid_argument`, nothing
// is started, and the right call right after it works.
BOOST_AUTO_TEST_CASE(local_errors_complete_at_once_and_the_next_call_works) {
  const auto all = vnode_set::range(0, 40);
  node a(config(0));
  node b(config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());

  // Not a member yet.
  auto r0 = a.reduce(sum_of_vnodes(1, 0));
  BOOST_TEST(contains(failed(r0, errc::invalid_argument).message, "not a member"));
  auto b0 = a.broadcast(shared_bytes(std::vector<std::uint8_t>(3)));
  failed(b0, errc::invalid_argument);
  auto s0 = a.send(0, shared_bytes{});
  failed(s0, errc::invalid_argument);
  auto l0 = a.leave();
  failed(l0, errc::invalid_argument);
  auto i0 = a.install_static_tree(binomial_tree(2, 0));
  failed(i0, errc::invalid_argument);
  auto f0 = a.found({});
  failed(f0, errc::invalid_argument);
  auto j0 = b.join({{"no port here"}});
  BOOST_TEST(contains(failed(j0, errc::invalid_argument).message, "no port here"));
  auto j1 = b.join({});
  failed(j1, errc::invalid_argument);
  BOOST_TEST(!a.cancel_join()); // nothing pending
  BOOST_TEST(!a.cancel_reduction(1));
  BOOST_TEST(a.next_reduction_seq() == 0u);

  form(a, {&b}, all);
  const auto root = one_of(a);

  // A contribution of the wrong size: refused at once, naming the vnode; nothing started.
  auto wrong = sum_of_vnodes(1, root);
  wrong.values = [](vnode_id) { return std::vector<std::uint8_t>(5); };
  auto rw = a.reduce(wrong);
  auto ew = failed(rw, errc::invalid_argument, 1s);
  BOOST_TEST(contains(ew.message, "5 bytes, not 8"), ew.message);
  BOOST_TEST(a.next_reduction_seq() == 1u);
  // A root vnode outside the namespace, no elements, no contribution function.
  auto rn = a.reduce(sum_of_vnodes(1, 40));
  BOOST_TEST(contains(failed(rn, errc::invalid_argument, 1s).message, "root vnode 40 does not exist"));
  auto zero = sum_of_vnodes(1, root);
  zero.count = 0;
  auto rz = a.reduce(zero);
  failed(rz, errc::invalid_argument, 1s);
  auto none = sum_of_vnodes(1, root);
  none.values = nullptr;
  auto rv = a.reduce(none);
  failed(rv, errc::invalid_argument, 1s);
  auto bad_kind = sum_of_vnodes(1, root);
  bad_kind.over = collective_kind::broadcast;
  auto rk = a.reduce(bad_kind);
  failed(rk, errc::invalid_argument, 1s);
  // The same number, right this time, completes everywhere.
  reduce_everywhere({&a, &b}, sum_of_vnodes(1, root), all);
  BOOST_TEST(a.next_reduction_seq() == 2u);
  BOOST_TEST(b.next_reduction_seq() == 2u);
  // Out of order: refused; the next in order works.
  auto old = a.reduce(sum_of_vnodes(1, root));
  failed(old, errc::invalid_argument, 1s);

  // Sends and broadcasts the node can tell are wrong; baselines' plans that do not fit.
  auto sv = a.send(40, shared_bytes{});
  failed(sv, errc::invalid_argument, 1s);
  auto bk = a.broadcast(shared_bytes{}, collective_kind::reduce);
  failed(bk, errc::invalid_argument, 1s);
  auto bs = a.broadcast(shared_bytes{}, collective_kind::static_broadcast);
  failed(bs, errc::invalid_argument, 1s);
  auto it = a.install_static_tree(banyan::tree(0, {no_proc, no_proc})); // 1 is an orphan
  BOOST_TEST(contains(failed(it, errc::invalid_argument, 1s).message, "does not span"));
  auto is = a.install_scatter_allgather(3); // processor 2 is not a member
  failed(is, errc::invalid_argument, 1s);
  auto f1 = a.found(all);
  failed(f1, errc::invalid_argument, 1s);
  auto j2 = a.join({{b.address()}});
  failed(j2, errc::invalid_argument, 1s);

  reduce_everywhere({&a, &b}, sum_of_vnodes(2, one_of(b)), all);
  auto ok = b.broadcast(shared_bytes(std::vector<std::uint8_t>(10, 1)));
  BOOST_REQUIRE(ready(ok, 5s));
  BOOST_TEST(ok.get().has_value());
  a.stop();
  b.stop();
}

// A reduction one member never starts: at the root vnode's owner it fails with
// `timeout` after its time, naming the vnodes that never arrived and their processor;
// the others' futures resolved when their parts went up; the next reduction is exact.
BOOST_AUTO_TEST_CASE(a_reduction_a_member_never_joins_times_out_naming_it) {
  const auto all = vnode_set::range(0, 60);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  const auto missing = c.own_vnodes();
  auto r = sum_of_vnodes(1, one_of(a));
  r.timeout = 1500ms;
  auto at_root = a.reduce(r);
  auto at_b = b.reduce(r);
  BOOST_REQUIRE(ready(at_b, 5s));
  BOOST_TEST(at_b.get().has_value()); // its part went up
  BOOST_TEST(!ready(at_root, 500ms));
  auto e = failed(at_root, errc::timeout, 10s);
  BOOST_TEST(contains(e.message, "reduction 1 timed out after 1500 ms at processor 0"), e.message);
  // c's vnodes never arrived (nor b's, when b's partial went up through c, which never
  // started the reduction and so never passed anything on).
  BOOST_TEST(contains(e.message, "; missing vnodes "), e.message);
  BOOST_TEST(contains(e.message, missing.to_string() + " (processor 2)"), e.message);
  BOOST_TEST(!contains(e.message, "(processor 0)"), e.message);
  BOOST_TEST(!a.cancel_reduction(1)); // answered already

  // c catches up with the next reduction: its vnodes count there, every one once.
  BOOST_TEST(c.next_reduction_seq() == 1u); // it never started one
  reduce_everywhere({&a, &b, &c}, sum_of_vnodes(2, one_of(b)), all);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

// A reduction cancelled where it waits fails with `cancelled`, naming what was missing,
// once; the next one completes.
BOOST_AUTO_TEST_CASE(a_cancelled_reduction_fails_with_cancelled_and_the_next_works) {
  const auto all = vnode_set::range(0, 30);
  node a(config(0));
  node b(config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  form(a, {&b}, all);
  auto f = a.reduce(sum_of_vnodes(1, one_of(a))); // b never starts it
  BOOST_TEST(!ready(f, 300ms));
  BOOST_TEST(a.cancel_reduction(1));
  auto e = failed(f, errc::cancelled, 1s);
  BOOST_TEST(contains(e.message, "reduction 1 cancelled at processor 0"), e.message);
  BOOST_TEST(contains(e.message, "missing vnodes " + b.own_vnodes().to_string() + " (processor 1)"),
             e.message);
  BOOST_TEST(!a.cancel_reduction(1));
  BOOST_TEST(!a.cancel_reduction(7));
  // b starts 1 late: its part reaches a, which gave 1 up and drops it.
  auto late = b.reduce(sum_of_vnodes(1, one_of(a)));
  BOOST_REQUIRE(ready(late, 5s));
  BOOST_TEST(late.get().has_value());
  reduce_everywhere({&a, &b}, sum_of_vnodes(2, one_of(a)), all);
  a.stop();
  b.stop();
}

// A member stops (as if it crashed) in the middle of a reduction it never contributed
// to: the member that adopts its vnodes contributes them when the root's owner asks, and
// the reduction completes over every vnode, each counted once (the sum proves it); the
// next reduction counts them through the adopter's history, and is exact.
BOOST_AUTO_TEST_CASE(a_reduction_whose_member_is_gone_completes_through_its_adopter) {
  const auto all = vnode_set::range(0, 45);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  BOOST_REQUIRE(!c.own_vnodes().empty());
  auto r = sum_of_vnodes(1, one_of(a));
  r.timeout = 15s;
  auto at_root = a.reduce(r);
  auto at_b = b.reduce(r);
  c.stop();
  BOOST_REQUIRE_MESSAGE(ready(at_root, 20s), "reduction 1 did not resolve at the root");
  auto res = at_root.get();
  BOOST_REQUIRE_MESSAGE(res.has_value(), (res ? "" : res.err().to_string()));
  BOOST_TEST(res->vnodes.to_string() == all.to_string());
  std::int64_t got = 0;
  BOOST_REQUIRE(res->value.size() == 8u);
  std::memcpy(&got, res->value.data(), 8);
  BOOST_TEST(got == expected_sum(all, 1));
  BOOST_REQUIRE(ready(at_b, 5s));
  BOOST_TEST(at_b.get().has_value());
  BOOST_REQUIRE(poll_until(15s, [&] {
    return a.members() == std::vector<proc_id>{0, 1} && b.members() == std::vector<proc_id>{0, 1}
           && (a.own_vnodes() | b.own_vnodes()) == all;
  }));
  reduce_everywhere({&a, &b}, sum_of_vnodes(2, one_of(b)), all);
  a.stop();
  b.stop();
}

// `join` resolves once the joiner owns its share, with the histories its next
// reduction needs; both sides report the handover, on joining and on leaving. A late
// joiner learns which reduction comes next. A contact with nothing to give: the join
// resolves after the supervisor stops waiting, owning nothing.
BOOST_AUTO_TEST_CASE(join_resolves_owning_its_share_and_handovers_are_events) {
  const auto all = vnode_set::range(0, 64);
  recorder ra, rb, rc; // before the nodes: they outlive them, whose handlers write to them
  node a(config(0));
  node b(config(1));
  node c(config(2));
  a.on_event(ra.handler());
  b.on_event(rb.handler());
  c.on_event(rc.handler());
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  auto f = a.found(all);
  succeeded(f, 5s);
  auto jb = b.join({{a.address()}});
  succeeded(jb);
  // Owning, at the moment the future is ready.
  const auto share = b.own_vnodes();
  BOOST_TEST(share.size() == 32u);
  BOOST_TEST(((share | a.own_vnodes()) == all));
  BOOST_TEST(b.next_reduction_seq() == 1u);
  BOOST_REQUIRE(poll_until(5s, [&] {
    return rb.of(node_event::kind::vnodes_gained).size() == 1
           && ra.of(node_event::kind::vnodes_released).size() == 1;
  }));
  auto gained = rb.of(node_event::kind::vnodes_gained).front();
  BOOST_TEST(gained.peer == 0u);
  BOOST_TEST((gained.vnodes == share));
  BOOST_TEST(contains(to_string(gained), "vnodes_gained: now owns vnodes " + share.to_string()),
             to_string(gained));
  auto released = ra.of(node_event::kind::vnodes_released).front();
  BOOST_TEST(released.peer == 1u);
  BOOST_TEST((released.vnodes == share));
  require_converged({&a, &b}, all);

  // Two reductions before c joins, asking for some of b's vnodes: it starts at 3.
  reduce_everywhere({&a, &b}, sum_of_vnodes(1, 0), all);
  reduce_everywhere({&a, &b}, sum_of_vnodes(2, 0), all);
  const auto wanted = vnode_set::range(40, 50);
  auto jc = c.join({{a.address()}}, wanted);
  succeeded(jc);
  BOOST_TEST((c.own_vnodes() == wanted));
  BOOST_TEST(c.next_reduction_seq() == 3u);
  BOOST_REQUIRE(poll_until(5s, [&] {
    return rc.of(node_event::kind::vnodes_gained).size() == 1
           && rb.of(node_event::kind::vnodes_released).size() == 1;
  }));
  BOOST_TEST(rc.of(node_event::kind::vnodes_gained).front().peer == 1u);
  BOOST_TEST((rc.of(node_event::kind::vnodes_gained).front().vnodes == wanted));
  BOOST_TEST(rb.of(node_event::kind::vnodes_released).front().peer == 2u);
  BOOST_TEST((rb.of(node_event::kind::vnodes_released).front().vnodes == wanted));
  require_converged({&a, &b, &c}, all);
  reduce_everywhere({&a, &b, &c}, sum_of_vnodes(3, 45), all);

  // b leaves: it reports what it handed over and to whom; the taker, what it got.
  const auto vb = b.own_vnodes();
  auto lb = b.leave();
  succeeded(lb);
  BOOST_REQUIRE(poll_until(5s, [&] { return rb.of(node_event::kind::vnodes_released).size() == 2; }));
  auto gone = rb.of(node_event::kind::vnodes_released).back();
  BOOST_TEST((gone.vnodes == vb));
  node& taker = gone.peer == 0 ? a : c;
  BOOST_REQUIRE(gone.peer == 0 || gone.peer == 2);
  auto& rt = gone.peer == 0 ? ra : rc;
  BOOST_REQUIRE(poll_until(5s, [&] {
    for (auto& e : rt.of(node_event::kind::vnodes_gained))
      if (e.peer == 1 && e.vnodes == vb)
        return true;
    return false;
  }));
  BOOST_TEST(taker.own_vnodes().includes(vb));
  b.stop();

  // A founder owning one vnode gives a joiner nothing: the join resolves anyway.
  node d(config(3));
  node e(config(4));
  BOOST_REQUIRE(d.start().has_value());
  BOOST_REQUIRE(e.start().has_value());
  auto fd = d.found(vnode_set{0});
  succeeded(fd, 5s);
  auto je = e.join({{d.address()}});
  succeeded(je, 10s);
  BOOST_TEST(e.own_vnodes().empty());
  BOOST_TEST((e.state() == supervisor::status::member));
  for (auto* n : {&a, &c, &d, &e})
    n->stop();
}

// Broadcasts and messages are numbered 1, 2, 3, ... per origin, across memberships; two
// origins use the same numbers, told apart by the origin; a restarted origin (a new
// process with the same id) counts from 1 again, told apart by its life.
BOOST_AUTO_TEST_CASE(op_ids_are_small_per_origin_and_never_collide) {
  const auto all = vnode_set::range(0, 20);
  node a(config(0));
  auto b = std::make_unique<node>(config(1));
  std::mutex mtx;
  std::map<wire::collective_id, std::map<vnode_id, int>> got;
  auto record = [&](const node_delivery& d) {
    std::lock_guard<std::mutex> lk(mtx);
    d.vnodes.for_each([&](vnode_id v) { ++got[d.op][v]; });
  };
  a.on_deliver(record);
  b->on_deliver(record);
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b->start().has_value());
  form(a, {b.get()}, all);
  auto started = [](std::future<expected<wire::collective_id>> f) {
    BOOST_REQUIRE(ready(f, 5s));
    auto id = f.get();
    BOOST_REQUIRE_MESSAGE(id.has_value(), (id ? "" : id.err().to_string()));
    return *id;
  };
  auto payload = shared_bytes(std::vector<std::uint8_t>(100, 7));
  auto a1 = started(a.broadcast(payload));
  auto a2 = started(a.broadcast(payload));
  auto b1 = started(b->broadcast(payload));
  auto b2 = started(b->send(one_of(a), payload));
  auto b3 = started(b->broadcast(payload));
  BOOST_TEST(wire::to_string(a1) == "0:1");
  BOOST_TEST(wire::to_string(a2) == "0:2");
  BOOST_TEST(wire::to_string(b1) == "1:1");
  BOOST_TEST(wire::to_string(b2) == "1:2");
  BOOST_TEST(wire::to_string(b3) == "1:3");
  BOOST_TEST((b2.kind == collective_kind::message));
  BOOST_TEST((a1 != b1));
  auto everywhere = [&](const wire::collective_id& op) {
    return poll_until(10s, [&] {
      std::lock_guard<std::mutex> lk(mtx);
      auto& per = got[op];
      if (per.size() != all.size())
        return false;
      for (auto& [v, n] : per)
        if (n != 1)
          return false;
      return true;
    });
  };
  for (auto op : {a1, a2, b1, b3})
    BOOST_TEST(everywhere(op), wire::to_string(op));

  // b leaves and joins again: it numbers on.
  auto l = b->leave();
  succeeded(l);
  auto j = b->join({{a.address()}});
  succeeded(j, 15s);
  require_converged({&a, b.get()}, all);
  auto b4 = started(b->broadcast(payload));
  BOOST_TEST(wire::to_string(b4) == "1:4");
  BOOST_TEST(everywhere(b4));

  // A new process with id 1 counts from 1 again: another life, another name.
  const auto life = b1.life;
  auto l2 = b->leave();
  succeeded(l2);
  b->stop();
  b = std::make_unique<node>(config(1));
  b->on_deliver(record);
  BOOST_REQUIRE(b->start().has_value());
  auto j2 = b->join({{a.address()}});
  succeeded(j2, 15s);
  require_converged({&a, b.get()}, all);
  auto again = started(b->broadcast(payload));
  BOOST_TEST(wire::to_string(again) == "1:1");
  BOOST_TEST(again.life != life);
  BOOST_TEST((again != b1));
  BOOST_TEST(everywhere(again));
  BOOST_TEST(everywhere(b1)); // still once each: the new life's deliveries are apart
  b->stop();
  a.stop();
}

// A join that cannot finish is given up: cancelled by the program, or when its time
// (`op_timeout`) is up; either way the node can join right after.
BOOST_AUTO_TEST_CASE(a_join_is_cancelled_or_times_out_and_the_next_join_works) {
  const auto all = vnode_set::range(0, 10);
  node a(config(0));
  BOOST_REQUIRE(a.start().has_value());
  auto f = a.found(all);
  succeeded(f, 5s);
  silent_port silent;

  node b(config(1));
  BOOST_REQUIRE(b.start().has_value());
  auto j = b.join({{silent.address()}});
  BOOST_TEST(!ready(j, 300ms));
  BOOST_TEST(b.cancel_join());
  failed(j, errc::cancelled, 1s);
  BOOST_TEST(!b.cancel_join());
  auto ok = b.join({{a.address()}});
  succeeded(ok);

  // Given up while its join request is out (or just let in: loopback is quick): should
  // the contact let it in, it leaves again at once. Nobody keeps it as a member, and it
  // joins right after.
  node d(config(3));
  BOOST_REQUIRE(d.start().has_value());
  auto jd = d.join({{a.address(), a.id()}});
  BOOST_TEST(d.cancel_join());
  failed(jd, errc::cancelled, 1s);
  BOOST_REQUIRE(poll_until(10s, [&] {
    return d.state() != supervisor::status::member && d.state() != supervisor::status::joining
           && a.members() == std::vector<proc_id>{0, 1};
  }));
  BOOST_TEST(d.own_vnodes().empty());
  BOOST_TEST(((a.own_vnodes() | b.own_vnodes()) == all));
  auto jd2 = d.join({{a.address()}});
  succeeded(jd2, 15s);
  require_converged({&a, &b, &d}, all);
  auto ld = d.leave();
  succeeded(ld);
  d.stop();
  BOOST_REQUIRE(poll_until(10s, [&] { return a.members() == std::vector<proc_id>{0, 1}; }));

  auto cc = config(2);
  cc.op_timeout = 700ms;
  node c(cc);
  BOOST_REQUIRE(c.start().has_value());
  auto jt = c.join({{silent.address()}, {silent.address()}});
  auto e = failed(jt, errc::timeout, 5s);
  BOOST_TEST(contains(e.message, "could not become a member within 700 ms"), e.message);
  auto again = c.join({{a.address()}});
  succeeded(again);
  require_converged({&a, &b, &c}, all);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

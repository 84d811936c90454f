// banyan::node's broadcast, point-to-point and reduction over TCP in one process (real
// TCP on 127.0.0.1, the real clock): every vnode reached exactly once with the right
// payload, the baselines over installed plans, collectives while nodes leave, rejoin and
// crash, streams to a leaver, a stopped node's collectives, the threads handlers run
// on, user operators, and a restart with the same seed. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "banyan/actors/node.hpp"
#include "banyan/core/tree_builders.hpp"
#include "node_suite.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using namespace banyan::test::node_suite;
using banyan::test::check_converged;
using banyan::test::poll_until;

// --- collectives over TCP ----------------------------------------------------------------

namespace {

node_config collective_config(proc_id id) {
  auto cfg = config(id);
  // Shorter lingers than the defaults keep the suite fast; still far above a loopback
  // round trip, which is what they must exceed.
  cfg.bcast.drain_linger = 300ms;
  cfg.reduce.drain_linger = 300ms;
  return cfg;
}

/// byte i of message `salt`: a pattern a truncated, shifted or mixed payload breaks.
shared_bytes pattern(std::size_t n, std::uint64_t salt) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>((i * 131 + salt) & 0xff);
  return shared_bytes(std::move(v));
}

bool matches(const shared_bytes& b, std::size_t n, std::uint64_t salt) {
  if (b.size() != n)
    return false;
  for (std::size_t i = 0; i < n; ++i)
    if (b.data()[i] != static_cast<std::uint8_t>((i * 131 + salt) & 0xff))
      return false;
  return true;
}

/// Every delivery at any node, by message: which vnodes got it how often, and whether
/// every payload was right.
struct delivery_ledger {
  struct entry {
    std::map<vnode_id, int> times;
    std::size_t size = 0;
    node_delivery::kind what = node_delivery::kind::broadcast;
    std::set<proc_id> at; ///< nodes that delivered some of it
    std::vector<shared_bytes> payloads; ///< every delivery's (shared, not copied)
  };
  std::mutex mtx;
  std::map<wire::collective_id, entry> by_op;

  node::delivery_handler handler(proc_id at) {
    return [this, at](const node_delivery& d) {
      std::lock_guard<std::mutex> lk(mtx);
      auto& e = by_op[d.op];
      d.vnodes.for_each([&](vnode_id v) { ++e.times[v]; });
      e.size = d.payload.size();
      e.what = d.what;
      e.at.insert(at);
      e.payloads.push_back(d.payload);
    };
  }
  /// Whether every payload delivered of `op` so far is `n` bytes of pattern `salt`.
  bool payloads_match(wire::collective_id op, std::size_t n, std::uint64_t salt) {
    std::lock_guard<std::mutex> lk(mtx);
    for (auto& p : by_op[op].payloads)
      if (!matches(p, n, salt))
        return false;
    return !by_op[op].payloads.empty();
  }
  /// Vnodes of `want` delivered exactly once each, so far.
  std::size_t once(wire::collective_id op, const vnode_set& want) {
    std::lock_guard<std::mutex> lk(mtx);
    std::size_t n = 0;
    want.for_each([&](vnode_id v) {
      auto it = by_op[op].times.find(v);
      n += it != by_op[op].times.end() && it->second == 1;
    });
    return n;
  }
  /// Deliveries beyond the first, to any vnode, of any message.
  int duplicates() {
    std::lock_guard<std::mutex> lk(mtx);
    int d = 0;
    for (auto& [op, e] : by_op)
      for (auto& [v, t] : e.times)
        d += t > 1 ? t - 1 : 0;
    return d;
  }
  entry get(wire::collective_id op) {
    std::lock_guard<std::mutex> lk(mtx);
    return by_op[op];
  }
};

wire::collective_id started(std::future<expected<wire::collective_id>>& f) {
  BOOST_REQUIRE_MESSAGE(f.wait_for(10s) == std::future_status::ready, "not started in time");
  auto r = f.get();
  BOOST_REQUIRE_MESSAGE(r.has_value(), "start failed: " << (r ? "" : r.err().to_string()));
  return *r;
}

/// Broadcasts `n` bytes from `from` and waits until every vnode of `all` has it exactly
/// once with the right payload.
void broadcast_everywhere(node& from, delivery_ledger& ledger, const vnode_set& all,
                          std::size_t n, std::uint64_t salt, std::chrono::milliseconds limit) {
  auto f = from.broadcast(pattern(n, salt));
  auto op = started(f);
  BOOST_TEST(op.origin == from.id());
  bool ok = poll_until(limit, [&] { return ledger.once(op, all) == all.size(); });
  auto e = ledger.get(op);
  BOOST_REQUIRE_MESSAGE(ok, n << "-byte broadcast reached " << ledger.once(op, all) << " of "
                                  << all.size() << " vnodes exactly once");
  BOOST_TEST(ledger.payloads_match(op, n, salt));
  BOOST_TEST(e.size == n);
  BOOST_TEST((e.what == node_delivery::kind::broadcast));
}

/// int32 contribution of vnode v, element i, to reduction `seq`.
std::int32_t element(vnode_id v, std::size_t i, std::uint64_t seq) {
  return static_cast<std::int32_t>(v * 31 + i * 7 + seq * 1000) - 5000;
}

template <class T>
std::vector<std::uint8_t> to_bytes(const std::vector<T>& xs) {
  std::vector<std::uint8_t> b(xs.size() * sizeof(T));
  std::memcpy(b.data(), xs.data(), b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const shared_bytes& b) {
  std::vector<T> xs(b.size() / sizeof(T));
  std::memcpy(xs.data(), b.data(), xs.size() * sizeof(T));
  return xs;
}

/// Every node in `ns` starts `r`; returns the futures in the same order.
std::vector<std::future<expected<reduce_result>>> reduce_all(std::vector<node*> ns,
                                                             const node_reduction& r) {
  std::vector<std::future<expected<reduce_result>>> fs;
  for (auto* n : ns)
    fs.push_back(n->reduce(r));
  return fs;
}

/// Waits for every future; returns the one result with a value (the root's owner's).
reduce_result gather(std::vector<std::future<expected<reduce_result>>>& fs,
                     std::chrono::milliseconds limit) {
  std::optional<reduce_result> root;
  int with_value = 0;
  for (auto& f : fs) {
    BOOST_REQUIRE_MESSAGE(f.wait_for(limit) == std::future_status::ready,
                          "a reduction did not resolve in time");
    auto r = f.get();
    BOOST_REQUIRE_MESSAGE(r.has_value(), "reduce failed: " << (r ? "" : r.err().to_string()));
    if (r->value.size() > 0) {
      ++with_value;
      root = *r;
    }
  }
  BOOST_REQUIRE_EQUAL(with_value, 1);
  return *root;
}

} // namespace

BOOST_AUTO_TEST_CASE(broadcast_send_and_reduce_over_tcp) {
  test_system ts;
  const auto all = vnode_set::range(0, 200);
  node a(*ts.sys, collective_config(0));
  node b(*ts.sys, collective_config(1));
  node c(collective_config(2));
  node d(collective_config(3));
  delivery_ledger ledger;
  std::vector<node*> ns{&a, &b, &c, &d};
  for (auto* n : ns) {
    n->on_deliver(ledger.handler(n->id()));
    BOOST_REQUIRE(n->start().has_value());
  }
  // Before joining: refused with a reason.
  auto early = a.broadcast(pattern(10, 1));
  BOOST_REQUIRE(early.wait_for(5s) == std::future_status::ready);
  auto early_r = early.get();
  BOOST_REQUIRE(!early_r.has_value());
  BOOST_TEST(static_cast<int>(early_r.err().code) == static_cast<int>(errc::invalid_argument));

  form(a, {&b, &c, &d}, all);

  // Short (one frame down the latency tree) and long (segments down the bandwidth tree).
  broadcast_everywhere(b, ledger, all, 1000, 7, 10s);
  broadcast_everywhere(c, ledger, all, 3u << 20, 8, 20s);
  broadcast_everywhere(a, ledger, all, 1, 9, 10s);

  // Point-to-point to one vnode of another node.
  auto target = d.own_vnodes();
  BOOST_REQUIRE(!target.empty());
  vnode_id v = 0;
  target.for_each([&](vnode_id x) { v = x; });
  auto sf = a.send(v, pattern(5000, 11));
  auto sop = started(sf);
  BOOST_REQUIRE(poll_until(10s, [&] { return ledger.once(sop, vnode_set{v}) == 1; }));
  auto se = ledger.get(sop);
  BOOST_TEST((se.what == node_delivery::kind::message));
  BOOST_TEST(ledger.payloads_match(sop, 5000, 11));
  BOOST_TEST(se.times.size() == 1u);
  BOOST_TEST((se.at == std::set<proc_id>{3}));
  // A vnode outside the namespace is refused.
  auto bad = a.send(100000, pattern(1, 1));
  BOOST_REQUIRE(bad.wait_for(5s) == std::future_status::ready);
  BOOST_TEST(!bad.get().has_value());

  // int32 sum of 1000 elements per vnode, against the true sum.
  const std::size_t count = 1000;
  node_reduction r1;
  r1.seq = 1;
  r1.root = 17;
  r1.op = {reduce_kind::sum, element_type::int32};
  r1.count = count;
  r1.values = [count](vnode_id vn) {
    std::vector<std::int32_t> xs(count);
    for (std::size_t i = 0; i < count; ++i)
      xs[i] = element(vn, i, 1);
    return to_bytes(xs);
  };
  auto fs1 = reduce_all(ns, r1);
  auto res1 = gather(fs1, 20s);
  BOOST_TEST(res1.op == 1u);
  BOOST_TEST(res1.vnodes.to_string() == all.to_string());
  auto sums = from_bytes<std::int32_t>(res1.value);
  BOOST_REQUIRE_EQUAL(sums.size(), count);
  for (std::size_t i = 0; i < count; i += 97) {
    std::int64_t want = 0;
    all.for_each([&](vnode_id vn) { want += element(vn, i, 1); });
    BOOST_TEST(sums[i] == want);
  }

  // max over doubles, rooted at a vnode of another node.
  node_reduction r2;
  r2.seq = 2;
  r2.root = 150;
  r2.op = {reduce_kind::max, element_type::float64};
  r2.count = 3;
  r2.values = [](vnode_id vn) {
    std::vector<double> xs{vn * 0.5, -double(vn), (vn % 7) * 1.25};
    return to_bytes(xs);
  };
  auto fs2 = reduce_all(ns, r2);
  auto res2 = gather(fs2, 20s);
  BOOST_TEST(res2.vnodes.to_string() == all.to_string());
  auto maxes = from_bytes<double>(res2.value);
  BOOST_REQUIRE_EQUAL(maxes.size(), 3u);
  BOOST_TEST(maxes[0] == 199 * 0.5);
  BOOST_TEST(maxes[1] == 0.0);
  BOOST_TEST(maxes[2] == 6 * 1.25);
  BOOST_TEST(ledger.duplicates() == 0);
  for (auto* n : ns)
    n->stop();
}

BOOST_AUTO_TEST_CASE(baselines_run_over_tcp_once_their_plans_are_installed) {
  // The static-tree broadcast and reduction (a binomial tree) and MPICH's
  // scatter-allgather, over real sockets: every vnode once, payloads intact.
  test_system ts;
  const auto all = vnode_set::range(0, 90);
  node a(*ts.sys, collective_config(0));
  node b(*ts.sys, collective_config(1));
  node c(*ts.sys, collective_config(2));
  delivery_ledger ledger;
  std::vector<node*> ns{&a, &b, &c};
  for (auto* n : ns) {
    n->on_deliver(ledger.handler(n->id()));
    BOOST_REQUIRE(n->start().has_value());
  }
  form(a, {&b, &c}, all);

  // Not installed yet: refused with a reason.
  auto early = a.broadcast(pattern(10, 1), collective_kind::static_broadcast);
  BOOST_REQUIRE(early.wait_for(5s) == std::future_status::ready);
  auto early_r = early.get();
  BOOST_REQUIRE(!early_r.has_value());
  BOOST_TEST(static_cast<int>(early_r.err().code) == static_cast<int>(errc::invalid_argument));
  // A plan that leaves a member out is refused.
  auto small = a.install_static_tree(binomial_tree(2, 0));
  BOOST_TEST(wait(small, 5s).has_value());

  for (auto* n : ns) {
    auto f = n->install_static_tree(binomial_tree(3, 0));
    BOOST_REQUIRE(!wait(f, 5s));
  }
  auto run = [&](node& from, collective_kind over, std::size_t n, std::uint64_t salt) {
    auto f = from.broadcast(pattern(n, salt), over);
    auto op = started(f);
    BOOST_TEST((op.kind == over));
    BOOST_REQUIRE_MESSAGE(poll_until(20s, [&] { return ledger.once(op, all) == all.size(); }),
                          to_string(over) << " of " << n << " bytes reached "
                                          << ledger.once(op, all) << " of " << all.size()
                                          << " vnodes exactly once");
    BOOST_TEST(ledger.payloads_match(op, n, salt));
    BOOST_TEST((ledger.get(op).at == std::set<proc_id>{0, 1, 2}));
  };
  run(a, collective_kind::static_broadcast, 1000, 21);    // whole, down the tree
  run(a, collective_kind::static_broadcast, 1u << 20, 22); // segments, pipelined

  // A static reduction rooted at a vnode of the tree's root, against the true sum.
  vnode_id root = 0;
  a.own_vnodes().for_each([&](vnode_id v) { root = v; });
  node_reduction r;
  r.seq = 1;
  r.root = root;
  r.op = {reduce_kind::sum, element_type::int32};
  r.count = 64;
  r.over = collective_kind::static_reduce;
  r.values = [&r](vnode_id vn) {
    std::vector<std::int32_t> xs(r.count);
    for (std::size_t i = 0; i < r.count; ++i)
      xs[i] = element(vn, i, 1);
    return to_bytes(xs);
  };
  auto fs = reduce_all(ns, r);
  auto res = gather(fs, 20s);
  BOOST_TEST(res.vnodes.to_string() == all.to_string());
  auto sums = from_bytes<std::int32_t>(res.value);
  BOOST_REQUIRE_EQUAL(sums.size(), r.count);
  for (std::size_t i = 0; i < r.count; ++i) {
    std::int64_t want = 0;
    all.for_each([&](vnode_id vn) { want += element(vn, i, 1); });
    BOOST_TEST(sums[i] == want);
  }

  // MPICH's scatter-allgather: below its threshold whole down the binomial tree, above
  // it scattered and gathered around the ring.
  for (auto* n : ns) {
    auto f = n->install_scatter_allgather(3);
    BOOST_REQUIRE(!wait(f, 5s));
  }
  run(b, collective_kind::scatter_allgather, 5000, 23);
  run(b, collective_kind::scatter_allgather, (1u << 20) + 7, 24);
  // The adaptive engines still run beside them.
  broadcast_everywhere(c, ledger, all, 2000, 25, 10s);
  BOOST_TEST(ledger.duplicates() == 0);
  for (auto* n : ns)
    n->stop();
}

BOOST_AUTO_TEST_CASE(collectives_while_a_node_leaves_rejoins_and_another_crashes) {
  const auto all = vnode_set::range(0, 120);
  node a(collective_config(0));
  node b(collective_config(1));
  node c(collective_config(2));
  node d(collective_config(3));
  delivery_ledger ledger;
  for (auto* n : {&a, &b, &c, &d}) {
    n->on_deliver(ledger.handler(n->id()));
    BOOST_REQUIRE(n->start().has_value());
  }
  form(a, {&b, &c, &d}, all);

  // b leaves while a long broadcast and messages to each of b's vnodes are under way:
  // its vnodes move to other nodes in the middle of them.
  auto vb = b.own_vnodes();
  BOOST_REQUIRE(!vb.empty());
  auto big = c.broadcast(pattern(4u << 20, 21));
  std::vector<std::pair<vnode_id, std::future<expected<wire::collective_id>>>> sends;
  vb.for_each([&](vnode_id v) { sends.emplace_back(v, d.send(v, pattern(300, 22))); });
  auto left = b.leave();
  auto big_op = started(big);
  std::vector<std::pair<vnode_id, wire::collective_id>> sent;
  for (auto& [v, sf] : sends)
    sent.emplace_back(v, started(sf));
  auto lerr = wait(left, 10s);
  BOOST_REQUIRE_MESSAGE(!lerr.has_value(), "leave: " << (lerr ? lerr->to_string() : ""));
  BOOST_REQUIRE(poll_until(30s, [&] { return ledger.once(big_op, all) == all.size(); }));
  BOOST_TEST(ledger.payloads_match(big_op, 4u << 20, 21));
  for (auto& [v, op] : sent) {
    BOOST_REQUIRE_MESSAGE(poll_until(10s, [&] { return ledger.once(op, vnode_set{v}) == 1; }),
                          "message to vnode " << v << " not delivered exactly once");
    BOOST_TEST(ledger.payloads_match(op, 300, 22));
  }
  require_converged({&a, &c, &d}, &all, 10s);
  BOOST_TEST((b.state() == supervisor::status::left));
  // A node that has left takes part in nothing.
  auto refused = b.broadcast(pattern(1, 1));
  BOOST_REQUIRE(refused.wait_for(5s) == std::future_status::ready);
  BOOST_TEST(!refused.get().has_value());

  // A reduction among the three members; then b joins again (as a new member whose
  // vnodes settle by handoff) and takes part in the next ones.
  node_reduction r;
  r.root = 3;
  r.op = {reduce_kind::sum, element_type::int64};
  r.count = 4;
  auto values_for = [](std::uint64_t seq) {
    return [seq](vnode_id vn) {
      std::vector<std::int64_t> xs(4);
      for (std::size_t i = 0; i < 4; ++i)
        xs[i] = element(vn, i, seq);
      return to_bytes(xs);
    };
  };
  auto true_sum = [&](std::uint64_t seq, std::size_t i) {
    std::int64_t s = 0;
    all.for_each([&](vnode_id vn) { s += element(vn, i, seq); });
    return s;
  };
  r.seq = 1;
  r.values = values_for(1);
  auto fs = reduce_all({&a, &c, &d}, r);
  auto res = gather(fs, 20s);
  BOOST_TEST(res.vnodes.to_string() == all.to_string());
  BOOST_TEST(from_bytes<std::int64_t>(res.value)[2] == true_sum(1, 2));

  auto rejoin = b.join({{c.address()}}, vnode_set::range(0, 20));
  BOOST_REQUIRE_MESSAGE(!wait(rejoin, 15s).has_value(), "b could not join again");
  require_converged({&a, &b, &c, &d}, &all, 20s);
  broadcast_everywhere(b, ledger, all, 2000, 23, 10s);
  for (std::uint64_t seq : {2u, 3u}) {
    r.seq = seq;
    r.values = values_for(seq);
    auto fs2 = reduce_all({&a, &b, &c, &d}, r);
    auto res2 = gather(fs2, 20s);
    BOOST_TEST(res2.vnodes.to_string() == all.to_string());
    auto got = from_bytes<std::int64_t>(res2.value);
    BOOST_REQUIRE_EQUAL(got.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i)
      BOOST_TEST(got[i] == true_sum(seq, i));
  }

  // d stops abruptly (as if killed) in the middle of a long broadcast: nobody hangs,
  // the rest find it gone, a (the next member after d, ids wrapping around) adopts d's
  // vnodes and is told so, and the next broadcast and reduction cover every vnode.
  const auto vd = d.own_vnodes();
  BOOST_REQUIRE(!vd.empty());
  std::mutex adoptions_mtx;
  std::vector<node_event> adoptions;
  std::map<proc_id, std::vector<node_event>> suspicions; // member_suspected, by who logged it
  for (auto* n : {&a, &b, &c}) {
    const auto id = n->id();
    n->on_event([&, id](const node_event& e) {
      std::lock_guard<std::mutex> guard{adoptions_mtx};
      if (e.what == node_event::kind::vnodes_adopted && id == 0)
        adoptions.push_back(e);
      if (e.what == node_event::kind::member_suspected)
        suspicions[id].push_back(e);
    });
  }
  const auto before = [&] {
    std::map<proc_id, node_metrics> m;
    for (auto* n : {&a, &b, &c})
      m[n->id()] = n->metrics();
    return m;
  }();
  auto lost = a.broadcast(pattern(4u << 20, 24));
  started(lost);
  d.stop();
  BOOST_REQUIRE(poll_until(15s, [&] {
    for (auto* n : {&a, &b, &c})
      if (n->members() != std::vector<proc_id>{0, 1, 2})
        return false;
    return true;
  }));
  BOOST_REQUIRE(poll_until(10s, [&] {
    std::lock_guard<std::mutex> guard{adoptions_mtx};
    return !adoptions.empty();
  }));
  {
    std::lock_guard<std::mutex> guard{adoptions_mtx};
    BOOST_TEST(adoptions.size() == 1u);
    BOOST_TEST(adoptions[0].peer == 3u);
    BOOST_TEST(adoptions[0].vnodes.to_string() == vd.to_string());
  }
  BOOST_TEST(((a.own_vnodes() & vd) == vd));
  // Whoever took d for crashed suspected it first, and said so (the first suspicion of a
  // peer is always logged); each suspicion ends once at most, cleared or declared.
  std::uint64_t crashes = 0;
  for (auto* n : {&a, &b, &c}) {
    const auto m = n->metrics();
    const auto& was = before.at(n->id());
    const auto declared = m.crashes_detected - was.crashes_detected;
    crashes += declared;
    BOOST_TEST(m.suspicions - was.suspicions
                 >= declared + (m.suspicions_cleared - was.suspicions_cleared),
               "processor " << n->id());
    if (declared == 0)
      continue;
    std::lock_guard<std::mutex> guard{adoptions_mtx};
    const auto& seen = suspicions[n->id()];
    BOOST_TEST(std::any_of(seen.begin(), seen.end(), [](const node_event& e) {
                 return e.peer == 3u && e.detail.find("processor 3 suspected") == 0;
               }),
               "processor " << n->id() << " took 3 for crashed without a member_suspected line");
  }
  BOOST_TEST(crashes >= 1u);
  auto after_crash = c.broadcast(pattern(3000, 25));
  auto ac_op = started(after_crash);
  BOOST_REQUIRE_MESSAGE(poll_until(15s, [&] { return ledger.once(ac_op, all) == all.size(); }),
                        "after the crash: " << ledger.once(ac_op, all) << " of " << all.size());
  BOOST_TEST(ledger.payloads_match(ac_op, 3000, 25));
  BOOST_TEST(ledger.duplicates() == 0);
  r.seq = 4;
  r.values = values_for(4);
  auto fs4 = reduce_all({&a, &b, &c}, r);
  auto res4 = gather(fs4, 20s);
  BOOST_TEST(res4.vnodes.to_string() == all.to_string());
  auto got4 = from_bytes<std::int64_t>(res4.value);
  BOOST_REQUIRE_EQUAL(got4.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)
    BOOST_TEST(got4[i] == true_sum(4, i));
  auto t0 = std::chrono::steady_clock::now();
  for (auto* n : {&a, &b, &c})
    n->stop();
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 10s)); // stop never hangs
}

// A long message streams point-to-point to a vnode of b over a slow link, and b leaves
// while most of its segments still wait at c: b took the stream's first frames, so it must
// get the rest (and pass the assembled message to the vnode's new owner). c must not drop
// b's address, handing the queued rest back to its engine, as soon as b is no longer a
// member: the stream would be split between b and c and never complete on either side.
BOOST_AUTO_TEST_CASE(a_stream_to_a_node_that_leaves_is_not_split) {
  const auto all = vnode_set::range(0, 30);
  auto slow = std::make_shared<std::atomic<bool>>(false);
  auto cc = collective_config(2);
  cc.shaper = [slow](proc_id to) {
    net::link_shape s;
    if (to != 1)
      return s;
    s.delay = 5ms; // so that b, leaving, hands its vnodes to a, the nearest
    if (slow->load())
      s.bandwidth = 1e6; // 2 MiB take about two seconds
    return s;
  };
  node a(collective_config(0));
  node b(collective_config(1));
  node c(cc);
  delivery_ledger ledger;
  for (auto* n : {&a, &b, &c}) {
    n->on_deliver(ledger.handler(n->id()));
    BOOST_REQUIRE(n->start().has_value());
  }
  form(a, {&b, &c}, all);
  auto vb = b.own_vnodes();
  BOOST_REQUIRE(!vb.empty());
  vnode_id v = 0;
  vb.for_each([&](vnode_id x) { v = x; });
  slow->store(true);
  auto m = c.send(v, pattern(2u << 20, 31));
  auto op = started(m);
  // About a quarter of the segments reach b; the rest (1.5 s of them) still wait at c.
  std::this_thread::sleep_for(500ms);
  auto left = b.leave();
  auto lerr = wait(left, 15s);
  BOOST_REQUIRE_MESSAGE(!lerr.has_value(), "leave: " << (lerr ? lerr->to_string() : ""));
  // c no longer counts b as a member (the stream to b is still under way).
  BOOST_REQUIRE(poll_until(15s, [&] { return c.members() == std::vector<proc_id>{0, 2}; }));
  BOOST_REQUIRE_MESSAGE(poll_until(15s, [&] { return ledger.once(op, vnode_set{v}) == 1; }),
                        "the message to vnode " << v << " was not delivered");
  BOOST_TEST(ledger.payloads_match(op, 2u << 20, 31));
  BOOST_TEST(ledger.duplicates() == 0);
  BOOST_TEST(!b.own_vnodes().contains(v));
  for (auto* n : {&a, &b, &c})
    n->stop();
}

// A node leaves in the middle of a long broadcast and joins again at once. Its engines
// relay what they hold; a new membership waits until they have drained, which over TCP
// means: nothing they sent is still queued in the transport, and a few round trips to
// the peers they wrote to (loopback: far below a millisecond; `drain_floor` 200 ms) have
// passed, the time a refusal needs to come back. With the blind rule it would wait
// `drain_linger` (5 s here) after their last send.
BOOST_AUTO_TEST_CASE(a_node_that_leaves_joins_again_well_before_the_linger) {
  const auto all = vnode_set::range(0, 60);
  auto cfg = [](proc_id id) {
    auto c = config(id);
    c.bcast.drain_linger = 5s;
    c.reduce.drain_linger = 5s;
    return c;
  };
  node a(cfg(0));
  node b(cfg(1));
  node c(cfg(2));
  delivery_ledger ledger;
  for (auto* n : {&a, &b, &c}) {
    n->on_deliver(ledger.handler(n->id()));
    BOOST_REQUIRE(n->start().has_value());
  }
  form(a, {&b, &c}, all);
  const auto vb = b.own_vnodes();
  BOOST_REQUIRE(!vb.empty());
  auto big = a.broadcast(pattern(4u << 20, 41));
  auto big_op = started(big);
  auto left = b.leave();
  auto lerr = wait(left, 10s);
  BOOST_REQUIRE_MESSAGE(!lerr.has_value(), "leave: " << (lerr ? lerr->to_string() : ""));
  const auto t0 = std::chrono::steady_clock::now();
  auto rejoin = b.join({{c.address()}}, vb);
  BOOST_REQUIRE_MESSAGE(!wait(rejoin, 15s).has_value(), "b could not join again");
  const auto took = std::chrono::steady_clock::now() - t0;
  BOOST_TEST_MESSAGE("joined again "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms after its leave completed");
  BOOST_TEST((took < 2500ms)); // half the linger
  BOOST_REQUIRE(poll_until(30s, [&] { return ledger.once(big_op, all) == all.size(); }));
  BOOST_TEST(ledger.payloads_match(big_op, 4u << 20, 41));
  require_converged({&a, &b, &c}, &all, 20s);
  broadcast_everywhere(c, ledger, all, 3000, 42, 10s);
  BOOST_TEST(ledger.duplicates() == 0);
  for (auto* n : {&a, &b, &c})
    n->stop();
}

BOOST_AUTO_TEST_CASE(collectives_of_a_stopped_node_resolve_with_stopped) {
  const auto all = vnode_set::range(0, 20);
  node a(collective_config(0));
  node b(collective_config(1));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  auto f = a.found(all);
  BOOST_REQUIRE(!wait(f, 5s));
  auto j = b.join({{a.address()}});
  BOOST_REQUIRE(!wait(j, 10s));
  require_converged({&a, &b}, &all, 20s);
  // Only a starts the reduction, rooted at one of its vnodes: it cannot complete.
  auto mine = a.own_vnodes();
  BOOST_REQUIRE(!mine.empty());
  vnode_id root = 0;
  mine.for_each([&](vnode_id v) { root = v; });
  node_reduction r;
  r.seq = 1;
  r.root = root;
  r.op = {reduce_kind::min, element_type::int32};
  r.count = 2;
  r.values = [](vnode_id v) { return to_bytes(std::vector<std::int32_t>{std::int32_t(v), 1}); };
  auto pending = a.reduce(r);
  BOOST_TEST((pending.wait_for(300ms) == std::future_status::timeout));
  // A malformed request fails at once, and the node goes on.
  node_reduction wrong = r;
  wrong.seq = 2;
  wrong.count = 0;
  wrong.op = {reduce_kind::user, element_type::bytes, 99};
  auto bad = a.reduce(wrong);
  BOOST_REQUIRE(bad.wait_for(5s) == std::future_status::ready);
  BOOST_TEST(!bad.get().has_value());
  a.stop();
  BOOST_REQUIRE(pending.wait_for(5s) == std::future_status::ready);
  auto res = pending.get();
  BOOST_REQUIRE(!res.has_value());
  BOOST_TEST(static_cast<int>(res.err().code) == static_cast<int>(errc::stopped));
  // After stop, new collectives fail at once with `stopped`.
  auto late = a.broadcast(pattern(1, 1));
  BOOST_REQUIRE(late.wait_for(1s) == std::future_status::ready);
  auto late_r = late.get();
  BOOST_REQUIRE(!late_r.has_value());
  BOOST_TEST(static_cast<int>(late_r.err().code) == static_cast<int>(errc::stopped));
  b.stop();
}

// Handlers run on the node's own threads, one at a time, never inside a call from the
// program's thread; a handler may send (an acknowledgement, as benchmarks do), and what it
// sends arrives exactly once.
BOOST_AUTO_TEST_CASE(handlers_run_on_the_node_s_threads_one_at_a_time_and_may_send) {
  const auto all = vnode_set::range(0, 30);
  node a(collective_config(0));
  node b(collective_config(1));
  node c(collective_config(2));
  std::vector<node*> ns{&a, &b, &c};
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0}, overlapping{0}, acks{0}, deliveries{0}, vnodes{0};
  std::map<proc_id, std::unique_ptr<std::atomic<bool>>> inside;
  for (auto* n : ns)
    inside[n->id()] = std::make_unique<std::atomic<bool>>(false);
  for (auto* n : ns) {
    auto* in = inside[n->id()].get();
    n->on_deliver([&, n, in](const node_delivery& d) {
      if (in->exchange(true))
        ++overlapping;
      if (std::this_thread::get_id() == caller)
        ++on_caller;
      if (d.what == node_delivery::kind::message) {
        ++acks;
      } else {
        ++deliveries;
        vnodes += static_cast<int>(d.vnodes.size());
        // Acknowledge to vnode 0 from inside the handler (a future left unwaited).
        (void)n->send(0, shared_bytes{});
      }
      in->store(false);
    });
    BOOST_REQUIRE(n->start().has_value());
  }
  form(a, {&b, &c}, all);
  const int rounds = 20;
  for (int i = 0; i < rounds; ++i) {
    auto from = ns[static_cast<std::size_t>(i) % ns.size()];
    auto s = from->broadcast(pattern(100, static_cast<std::uint64_t>(i)));
    started(s);
  }
  // Every vnode gets every broadcast once; every delivery is acknowledged once.
  const int want = rounds * static_cast<int>(all.size());
  BOOST_REQUIRE_MESSAGE(poll_until(20s, [&] { return vnodes.load() >= want && acks.load() >= deliveries.load(); }),
                        "vnodes reached: " << vnodes.load() << " of " << want << ", acks "
                                           << acks.load() << " of " << deliveries.load());
  std::this_thread::sleep_for(200ms); // nothing more may come
  BOOST_TEST(vnodes.load() == want);
  BOOST_TEST(acks.load() == deliveries.load());
  BOOST_TEST(deliveries.load() >= rounds * static_cast<int>(ns.size()));
  BOOST_TEST(on_caller.load() == 0);
  BOOST_TEST(overlapping.load() == 0);
  for (auto* n : ns)
    n->stop();
}

// With busy polling, the handlers a caller's thread leaves behind (here the origin's own
// delivery of its broadcast) run on the transport's loop thread, which is awake, and not
// on the actor's thread, which would have to be woken (docs/api.md, "Threads and
// signals"). The loop thread is the one that delivers what comes over the network.
BOOST_AUTO_TEST_CASE(with_busy_polling_a_caller_s_handlers_run_on_the_loop_thread) {
  const auto all = vnode_set::range(0, 10);
  auto ca = collective_config(0);
  auto cb = collective_config(1);
  ca.busy_poll = cb.busy_poll = 50ms;
  node a(ca);
  node b(cb);
  const auto caller = std::this_thread::get_id();
  std::mutex mtx;
  std::vector<std::pair<node_delivery::kind, std::thread::id>> seen; // a's deliveries
  a.on_deliver([&](const node_delivery& d) {
    std::lock_guard<std::mutex> lk(mtx);
    seen.emplace_back(d.what, std::this_thread::get_id());
  });
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  form(a, {&b}, all);
  const auto count = [&] {
    std::lock_guard<std::mutex> lk(mtx);
    return seen.size();
  };
  const int rounds = 5;
  for (int i = 0; i < rounds; ++i) {
    // A message from b reaches a on a's loop thread ...
    const auto v = a.own_vnodes().front();
    auto m = b.send(v, pattern(10, static_cast<std::uint64_t>(i)));
    started(m);
    BOOST_REQUIRE(poll_until(10s, [&] { return count() == static_cast<std::size_t>(2 * i + 1); }));
    // ... and so does a's own delivery of the broadcast this thread starts.
    auto s = a.broadcast(pattern(10, static_cast<std::uint64_t>(100 + i)));
    started(s);
    BOOST_REQUIRE(poll_until(10s, [&] { return count() == static_cast<std::size_t>(2 * i + 2); }));
  }
  std::lock_guard<std::mutex> lk(mtx);
  BOOST_REQUIRE_EQUAL(seen.size(), static_cast<std::size_t>(2 * rounds));
  const auto loop = seen.front().second;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    BOOST_TEST((seen[k].first == (k % 2 == 0 ? node_delivery::kind::message
                                             : node_delivery::kind::broadcast)));
    BOOST_TEST((seen[k].second == loop), "delivery " << k << " ran on another thread");
  }
  BOOST_TEST((loop != caller));
  a.stop();
  b.stop();
}

// A user-supplied associative and commutative operator, registered in every node's
// config, reduces over TCP like the built-in ones; a node without it refuses to start it.
BOOST_AUTO_TEST_CASE(user_operators_reduce_over_tcp) {
  const auto all = vnode_set::range(0, 40);
  auto with_op = [](proc_id id) {
    auto cfg = collective_config(id);
    // Bitwise or of 8-byte words.
    cfg.ops.add(7, [](std::uint8_t* acc, const std::uint8_t* in, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i)
        acc[i] |= in[i];
    });
    return cfg;
  };
  node a(with_op(0));
  node b(with_op(1));
  node c(with_op(2));
  std::vector<node*> ns{&a, &b, &c};
  for (auto* n : ns)
    BOOST_REQUIRE(n->start().has_value());
  form(a, {&b, &c}, all);
  node_reduction r;
  r.seq = 1;
  r.root = 33;
  r.op = {reduce_kind::user, element_type::bytes, 7};
  r.count = 16;
  // vnode v sets bit (v % 8) of byte (v / 8) of 16 bytes: the or of all is 5 bytes of 0xff.
  r.values = [](vnode_id v) {
    std::vector<std::uint8_t> bits(16, 0);
    bits[v / 8] = static_cast<std::uint8_t>(1u << (v % 8));
    return bits;
  };
  auto fs = reduce_all(ns, r);
  auto res = gather(fs, 20s);
  BOOST_TEST(res.vnodes.to_string() == all.to_string());
  auto got = res.value.to_vector();
  std::vector<std::uint8_t> want(16, 0);
  for (int i = 0; i < 5; ++i)
    want[static_cast<std::size_t>(i)] = 0xff;
  BOOST_TEST(got == want, boost::test_tools::per_element());
  // An operator nobody registered is refused at once, with a reason.
  node_reduction unknown = r;
  unknown.seq = 2;
  unknown.op.user = 8;
  auto u = a.reduce(unknown);
  BOOST_REQUIRE(u.wait_for(5s) == std::future_status::ready);
  auto ur = u.get();
  BOOST_REQUIRE(!ur.has_value());
  BOOST_TEST(static_cast<int>(ur.err().code) == static_cast<int>(errc::not_found));
  for (auto* n : ns)
    n->stop();
}

// A processor restarted with the same id and the same fixed seed (a new process, a new
// node object) joins again: its incarnation is not its earlier life's, which the members
// buried when it left (before supervisor_config::incarnation_salt its join went
// unanswered: "no answer to the join request").
BOOST_AUTO_TEST_CASE(a_restart_with_the_same_seed_joins_again) {
  const auto all = vnode_set::range(0, 16);
  node a(collective_config(0));
  BOOST_REQUIRE(a.start().has_value());
  auto f = a.found(all);
  BOOST_REQUIRE(!wait(f, 5s));
  for (int life = 0; life < 2; ++life) {
    node b(collective_config(1)); // same id, same seed every life
    BOOST_REQUIRE(b.start().has_value());
    auto j = b.join({{a.address()}});
    auto r = wait(j, 10s);
    BOOST_REQUIRE_MESSAGE(!r.has_value(), "life " << life << ": " << (r ? r->to_string() : ""));
    require_converged({&a, &b}, &all, 20s);
    BOOST_TEST(!b.own_vnodes().empty());
    auto l = b.leave();
    BOOST_REQUIRE(!wait(l, 10s).has_value());
    b.stop();
    BOOST_REQUIRE(poll_until(10s, [&] { return a.members().size() == 1; }));
  }
  a.stop();
}

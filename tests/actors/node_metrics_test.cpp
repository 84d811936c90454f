// node::metrics() over real TCP in one process: a broadcast's deliveries, the operations
// asked and their outcomes, the transport's bytes and frames, membership, parent edges
// with what was measured on them, and a refused connection counted by its reason on both
// sides. Every wait has a deadline.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <future>

#include "banyan/actors/node.hpp"
#include "node_check.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::check_converged;
using banyan::test::poll_until;
using banyan::test::ready;

namespace {

node_config config(proc_id id, std::string secret = "metrics test secret") {
  node_config cfg;
  cfg.id = id;
  cfg.listen = "127.0.0.1:0";
  cfg.secret = std::move(secret);
  cfg.seed = 500 + id;
  cfg.threads = 1;
  return cfg;
}

std::uint64_t vnode_deliveries(const node_metrics& m) {
  return m.deliveries[0].vnodes;
}

const node_metrics::collective_counts& of(const node_metrics& m, collective_kind k) {
  return m.collectives[static_cast<std::size_t>(k)];
}

std::uint64_t failures(const std::array<std::uint64_t, net::connection_failure_count>& by,
                       net::connection_failure f) {
  return by[static_cast<std::size_t>(f)];
}

} // namespace

BOOST_AUTO_TEST_CASE(metrics_count_a_broadcast_s_deliveries_and_what_carried_it) {
  const auto all = vnode_set::range(0, 96);
  node a(config(0));
  node b(config(1));
  node c(config(2));
  // Before start: zeros, and the state says idle.
  {
    auto m = a.metrics();
    BOOST_TEST(m.id == 0u);
    BOOST_TEST((m.state == supervisor::status::idle));
    BOOST_TEST(m.members == 0u);
    BOOST_TEST(m.transport.bytes_sent == 0u);
  }
  for (auto* n : {&a, &b, &c})
    BOOST_REQUIRE(n->start().has_value());
  auto f = a.found(all);
  BOOST_REQUIRE(ready(f, 5s) && !f.get());
  auto jb = b.join({{a.address()}});
  BOOST_REQUIRE(ready(jb, 10s) && !jb.get());
  auto jc = c.join({{a.address()}});
  BOOST_REQUIRE(ready(jc, 10s) && !jc.get());
  BOOST_REQUIRE(poll_until(20s, [&] {
    return !check_converged({a.status(), b.status(), c.status()}, &all);
  }));

  const auto before = a.metrics().deliveries[0];
  auto bc = b.broadcast(shared_bytes(std::vector<std::uint8_t>(1000, 7)));
  BOOST_REQUIRE(ready(bc, 5s));
  BOOST_REQUIRE(bc.get().has_value());
  // Every vnode gets it exactly once: the three nodes' vnode deliveries add up to 96.
  std::uint64_t total = 0;
  BOOST_REQUIRE(poll_until(10s, [&] {
    total = vnode_deliveries(a.metrics()) + vnode_deliveries(b.metrics()) + vnode_deliveries(c.metrics());
    return total >= all.size();
  }));
  BOOST_TEST(total == all.size());
  auto ma = a.metrics();
  auto mb = b.metrics();
  BOOST_TEST(ma.deliveries[0].vnodes - before.vnodes == a.own_vnodes().size());
  BOOST_TEST(ma.deliveries[0].events >= before.events + 1);
  BOOST_TEST(ma.deliveries[0].bytes - before.bytes == 1000 * (ma.deliveries[0].events - before.events));
  BOOST_TEST(ma.deliveries[1].events == 0u); // no messages
  // The origin counted one broadcast started and completed; the others none.
  BOOST_TEST(of(mb, collective_kind::broadcast).started == 1u);
  BOOST_TEST(of(mb, collective_kind::broadcast).completed == 1u);
  BOOST_TEST(of(mb, collective_kind::broadcast).failed == 0u);
  BOOST_TEST(of(ma, collective_kind::broadcast).started == 0u);
  // Membership, trees, the transport.
  for (auto* m : {&ma, &mb}) {
    BOOST_TEST((m->state == supervisor::status::member));
    BOOST_TEST(m->members == 3u);
    BOOST_TEST(m->all_parented);
    BOOST_TEST(m->parents.size() == 4u); // a latency and a bandwidth tree per other root
    for (auto& e : m->parents)
      BOOST_TEST((e.parent != no_proc && e.tree.root != m->id));
    BOOST_TEST(!m->parent_changes.empty());
    BOOST_TEST(m->transport.bytes_sent > 0u);
    BOOST_TEST(m->transport.bytes_received > 0u);
    BOOST_TEST(m->transport.frames_sent > 0u);
    BOOST_TEST(m->transport.frames_received > 0u);
    BOOST_TEST(m->transport.connections_opened >= 2u);
    BOOST_TEST(m->transport.connections_accepted >= 2u);
    BOOST_TEST(m->members_joined >= 2u);
    BOOST_TEST(m->probes_completed > 0u);
  }
  BOOST_TEST(ma.own_vnodes == a.own_vnodes().size());
  // The incarnation is the one the members know (a founder's is 0, a joiner's drawn).
  for (auto& mem : b.status().members)
    if (mem.id == b.id())
      BOOST_TEST(mb.incarnation == mem.incarnation);
  BOOST_TEST(mb.incarnation != 0u);
  // Some edge was measured: a latency tree's parent with an RTT, a bandwidth tree's with a rate.
  bool rtt = false, bw = false;
  for (auto* m : {&ma, &mb})
    for (auto& e : m->parents) {
      rtt = rtt || (e.tree.kind == tree_kind::latency && e.rtt > duration::zero());
      bw = bw || (e.tree.kind == tree_kind::bandwidth && e.bandwidth > 0);
    }
  BOOST_TEST(rtt);
  BOOST_TEST(bw);

  // A send and a refused broadcast: counted by kind and outcome.
  auto s = a.send(5, shared_bytes(std::vector<std::uint8_t>(3, 1)));
  BOOST_REQUIRE(ready(s, 5s) && s.get().has_value());
  auto none = a.broadcast(shared_bytes(std::vector<std::uint8_t>(1, 1)), collective_kind::static_broadcast);
  BOOST_REQUIRE(ready(none, 5s));
  BOOST_TEST(!none.get().has_value()); // no static tree installed
  ma = a.metrics();
  BOOST_TEST(of(ma, collective_kind::message).started == 1u);
  BOOST_TEST(of(ma, collective_kind::message).completed == 1u);
  BOOST_TEST(of(ma, collective_kind::static_broadcast).started == 1u);
  BOOST_TEST(of(ma, collective_kind::static_broadcast).failed == 1u);

  for (auto* n : {&a, &b, &c})
    n->stop();
  // After stop, the transport's counters are kept.
  BOOST_TEST(a.metrics().transport.bytes_sent >= ma.transport.bytes_sent);
}

BOOST_AUTO_TEST_CASE(a_wrong_secret_is_counted_on_both_sides) {
  node a(config(0));
  node intruder(config(7, "another secret"));
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(intruder.start().has_value());
  auto f = a.found(vnode_set::range(0, 8));
  BOOST_REQUIRE(ready(f, 5s) && !f.get());
  auto j = intruder.join({{a.address()}});
  BOOST_REQUIRE(ready(j, 15s));
  auto err = j.get();
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST((err->code == errc::auth_failed));
  // The joiner checks the acceptor's proof first and hangs up: it counts a wrong secret,
  // the acceptor a connection closed in its handshake.
  auto mi = intruder.metrics();
  BOOST_TEST(failures(mi.transport.outbound_failures, net::connection_failure::wrong_secret) >= 1u);
  BOOST_TEST(mi.transport.connections_opened == 0u);
  BOOST_TEST(poll_until(5s, [&] {
    return failures(a.metrics().transport.inbound_failures, net::connection_failure::handshake_closed) >= 1;
  }));
  BOOST_TEST(a.metrics().transport.connections_accepted == 0u);
  BOOST_TEST(a.metrics().members == 1u);
}

// banyan::node in one process: real TCP on 127.0.0.1 with ephemeral ports, the real
// clock, and CAF actor systems both borrowed (two nodes share the test's) and owned:
// joining, forming trees and leaving; joins that cannot succeed fail with a reason; a
// second node under a live member's id is refused; bad configuration is refused by
// start. Every wait has a deadline (collectives over TCP: node_collectives_test.cpp).

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

BOOST_AUTO_TEST_CASE(three_nodes_join_form_trees_and_one_leaves) {
  test_system ts; // outlives the nodes that borrow it
  const auto all = vnode_set::range(0, 300);
  recorder ra, rb; // before the nodes: they outlive them, whose handlers write to them
  node a(*ts.sys, config(0));
  node b(*ts.sys, config(1));
  node c(config(2)); // owns its actor system
  a.on_event(ra.handler());
  b.on_event(rb.handler());
  for (auto* n : {&a, &b, &c}) {
    auto port = n->start();
    BOOST_REQUIRE_MESSAGE(port.has_value(), "start: " << (port ? "" : port.err().to_string()));
    BOOST_TEST(*port != 0);
    BOOST_TEST(n->address() == "127.0.0.1:" + std::to_string(*port));
  }
  auto founded = a.found(all);
  BOOST_REQUIRE(!wait(founded, 5s));
  BOOST_TEST(a.own_vnodes().to_string() == all.to_string());
  BOOST_TEST((a.state() == supervisor::status::member));

  // b knows only a's address (a's id comes from its handshake); c joins through b.
  std::atomic<int> callbacks{0};
  auto jb = b.join({{a.address()}}, {}, [&](const node::result& r) { callbacks += !r ? 1 : 100; });
  BOOST_REQUIRE_MESSAGE(!wait(jb, 10s).has_value(), "b could not join");
  auto jc = c.join({{b.address(), b.id()}});
  BOOST_REQUIRE_MESSAGE(!wait(jc, 10s).has_value(), "c could not join");
  BOOST_TEST(callbacks.load() == 1);

  require_converged({&a, &b, &c}, &all, 15s);
  BOOST_TEST(ra.count(node_event::kind::member_joined, 1) == 1u);
  BOOST_TEST(ra.count(node_event::kind::member_joined, 2) == 1u);
  BOOST_TEST(rb.count(node_event::kind::joined) == 1u);
  for (proc_id r : {0u, 1u, 2u})
    BOOST_TEST((b.parent({r, tree_kind::latency}) == no_proc) == (r == 1));
  auto members = c.members();
  BOOST_TEST(members == (std::vector<proc_id>{0, 1, 2}));
  // The snapshot carries what the trees measured: c, which joined and probed, has a
  // latency tree with a distance from its root and a bandwidth tree with a rate; the
  // trees rooted at c itself have neither. The trees span as soon as c's contact adopts
  // it, before its first probes (a 128 KiB download each) have come back: the figures
  // are awaited.
  {
    bool dist = false, est = false;
    poll_until(10s, [&] {
      auto st = c.status();
      dist = est = false;
      for (auto& t : st.trees) {
        if (t.tree.root == c.id()) {
          BOOST_TEST(t.dist.count() == 0);
          continue;
        }
        if (t.parent == no_proc)
          continue;
        dist = dist || (t.tree.kind == tree_kind::latency && t.dist.count() > 0);
        est = est || (t.tree.kind == tree_kind::bandwidth && t.est > 0);
      }
      return dist && est;
    });
    BOOST_TEST(dist);
    BOOST_TEST(est);
  }
  // Every node's routing table names the owner every node claims to be.
  auto routes_agree = [&](std::vector<node*> ns) {
    for (auto* x : ns)
      for (auto* y : ns)
        if (x->vnodes_of(y->id()) != y->own_vnodes() || x->owner_of(y->own_vnodes().front()) != y->id())
          return false;
    return true;
  };
  BOOST_TEST(poll_until(5s, [&] { return routes_agree({&a, &b, &c}); }));
  BOOST_TEST(a.owner_of(300) == no_proc);

  // A second join or found while a member is refused.
  auto again = b.join({{a.address()}});
  auto err = wait(again, 5s);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(static_cast<int>(err->code) == static_cast<int>(errc::invalid_argument));

  // b leaves: its vnodes go to a or c, and both see it gone.
  auto vb = b.own_vnodes();
  BOOST_TEST(!vb.empty());
  auto left = b.leave();
  auto lerr = wait(left, 10s);
  BOOST_REQUIRE_MESSAGE(!lerr.has_value(), "leave: " << (lerr ? lerr->to_string() : ""));
  BOOST_TEST((b.state() == supervisor::status::left));
  BOOST_TEST(rb.count(node_event::kind::left) == 1u);
  require_converged({&a, &c}, &all, 10s);
  BOOST_TEST(ra.count(node_event::kind::member_left, 1) == 1u);
  BOOST_TEST(poll_until(5s, [&] { return routes_agree({&a, &c}); }));
  BOOST_TEST(a.vnodes_of(1).empty());
  b.stop();

  // c stops without leaving (as if it crashed): a finds it unreachable at once.
  c.stop();
  BOOST_REQUIRE(poll_until(5s, [&] { return a.members() == std::vector<proc_id>{0}; }));
  // The last member cannot leave: nobody would take its vnodes.
  auto last = a.leave();
  auto last_err = wait(last, 5s);
  BOOST_REQUIRE(last_err.has_value());
  BOOST_TEST(static_cast<int>(last_err->code) == static_cast<int>(errc::invalid_argument));
  a.stop();
  // After stop, requests fail at once.
  auto late = a.found(all);
  auto late_err = wait(late, 1s);
  BOOST_REQUIRE(late_err.has_value());
  BOOST_TEST(static_cast<int>(late_err->code) == static_cast<int>(errc::stopped));
}

namespace {

/// A TCP port on 127.0.0.1 that refuses connections for as long as this object lives.
class closed_port {
public:
  closed_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    BOOST_REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    BOOST_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    BOOST_REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~closed_port() { ::close(fd_); }
  closed_port(const closed_port&) = delete;
  closed_port& operator=(const closed_port&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
  int fd_ = -1;
  unsigned port_ = 0;
};

} // namespace

BOOST_AUTO_TEST_CASE(joins_that_cannot_succeed_fail_with_a_reason) {
  node a(config(0, "right"));
  BOOST_REQUIRE(a.start().has_value());
  auto f = a.found(vnode_set::range(0, 10));
  BOOST_REQUIRE(!wait(f, 5s));

  // Not started yet: refused at once.
  node early(config(9));
  auto e0 = early.join({{a.address()}});
  auto e0r = wait(e0, 1s);
  BOOST_REQUIRE(e0r.has_value());
  BOOST_TEST(static_cast<int>(e0r->code) == static_cast<int>(errc::invalid_argument));

  // Wrong secret: refused by the contact's handshake, and reported as such.
  node wrong(config(1, "wrong"));
  BOOST_REQUIRE(wrong.start().has_value());
  auto w = wrong.join({{a.address()}});
  auto werr = wait(w, 10s);
  BOOST_REQUIRE(werr.has_value());
  BOOST_TEST(static_cast<int>(werr->code) == static_cast<int>(errc::auth_failed));
  BOOST_TEST(werr->message.find("wrong shared secret") != std::string::npos, werr->message);
  BOOST_TEST(a.members() == std::vector<proc_id>{0});
  wrong.stop();

  // A dead contact is skipped for the next one. "Dead" is a port bound but never
  // listening: connections to it are refused, and no node started later can be
  // given it (a stopped node's port could be handed to the next one).
  closed_port dead_port;
  auto dead_address = dead_port.address();
  node d(config(2, "right"));
  BOOST_REQUIRE(d.start().has_value());
  auto t0 = std::chrono::steady_clock::now();
  auto j = d.join({{dead_address}, {a.address()}});
  auto jerr = wait(j, 10s);
  BOOST_REQUIRE_MESSAGE(!jerr.has_value(), "join: " << (jerr ? jerr->to_string() : ""));
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 3s)); // refused, not timed out
  require_converged({&a, &d}, nullptr, 10s);

  // Only dead contacts: unknown_peer.
  node lonely(config(3, "right"));
  BOOST_REQUIRE(lonely.start().has_value());
  auto l = lonely.join({{dead_address}});
  auto lerr = wait(l, 10s);
  BOOST_REQUIRE(lerr.has_value());
  BOOST_TEST(static_cast<int>(lerr->code) == static_cast<int>(errc::unknown_peer), lerr->to_string());
  BOOST_TEST((lonely.state() == supervisor::status::idle));
}

// A second node under a live member's id: its join fails with id_in_use ("id 1 is in
// use"), through another member and through the member itself, and nothing of the live
// member changes: its vnodes, incarnation, routes, and no crash is seen anywhere.
BOOST_AUTO_TEST_CASE(a_second_node_under_a_live_members_id_is_refused) {
  const auto all = vnode_set::range(0, 64);
  recorder ra, rb; // before the nodes: they outlive them, whose handlers write to them
  node a(config(0));
  node b(config(1));
  a.on_event(ra.handler());
  b.on_event(rb.handler());
  BOOST_REQUIRE(a.start().has_value());
  BOOST_REQUIRE(b.start().has_value());
  auto f = a.found(all);
  BOOST_REQUIRE(!wait(f, 5s));
  auto jb = b.join({{a.address()}});
  BOOST_REQUIRE(!wait(jb, 10s).has_value());
  require_converged({&a, &b}, &all, 15s);
  const auto before_a = a.status();
  const auto before_b = b.status();

  node impostor(config(1));
  BOOST_REQUIRE(impostor.start().has_value());
  for (const auto& contact : {node_contact{a.address()}, node_contact{a.address(), a.id()},
                              node_contact{b.address()}}) {
    BOOST_TEST_CONTEXT("through " << contact.address) {
      auto j = impostor.join({contact});
      auto r = wait(j, 10s);
      BOOST_REQUIRE(r.has_value());
      BOOST_TEST(static_cast<int>(r->code) == static_cast<int>(errc::id_in_use), r->to_string());
      BOOST_TEST(r->message.find("id 1 is in use") != std::string::npos, r->message);
      BOOST_TEST((impostor.state() == supervisor::status::idle));
    }
  }
  impostor.stop();

  const auto after_a = a.status();
  const auto after_b = b.status();
  BOOST_TEST(after_b.own_vnodes.to_string() == before_b.own_vnodes.to_string());
  for (auto [s, was] : {std::pair{&after_a, &before_a}, std::pair{&after_b, &before_b}}) {
    BOOST_TEST((s->state == supervisor::status::member));
    BOOST_REQUIRE(s->members.size() == 2u);
    BOOST_TEST(s->members[1].id == 1u);
    BOOST_TEST(s->members[1].incarnation == before_b.members[1].incarnation);
    BOOST_TEST(s->members[1].address == b.address());
    BOOST_TEST((s->routes.snapshot() == was->routes.snapshot()));
  }
  for (auto* r : {&ra, &rb})
    for (auto k : {node_event::kind::member_crashed, node_event::kind::vnodes_adopted,
                   node_event::kind::vnodes_disowned, node_event::kind::member_left})
      BOOST_TEST(r->count(k) == 0u);
  BOOST_TEST(ra.count(node_event::kind::member_joined) == 1u);
}

BOOST_AUTO_TEST_CASE(bad_configuration_is_refused_by_start) {
  auto cfg = config(1);
  cfg.listen = "nonsense";
  node n(cfg);
  auto r = n.start();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(static_cast<int>(r.err().code) == static_cast<int>(errc::invalid_argument));

  auto any = config(2);
  any.listen = "0.0.0.0:0"; // which address would others use?
  node m(any);
  BOOST_TEST(!m.start().has_value());

  node big(config(max_node_id + 1));
  BOOST_TEST(!big.start().has_value());

  // Whole messages larger than a frame may be: refused with a reason, not a silent stall.
  auto whole = config(3);
  whole.bcast.max_whole = 100u << 20;
  node w(whole);
  auto wr = w.start();
  BOOST_REQUIRE(!wr.has_value());
  BOOST_TEST(static_cast<int>(wr.err().code) == static_cast<int>(errc::invalid_argument));
  BOOST_TEST(wr.err().message.find("max_whole") != std::string::npos);
}

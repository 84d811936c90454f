#pragma once
// Shared by the suites of banyan::node in one process (tests/actors/node_test.cpp,
// node_collectives_test.cpp): a node's configuration on loopback, a wait on a future
// with a deadline, an event recorder, convergence checks and a CAF system of the test's
// own to borrow.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "banyan/actors/node.hpp"
#include "node_check.hpp"

namespace banyan::test::node_suite {

inline node_config config(proc_id id, std::string secret = "test secret") {
  node_config cfg;
  cfg.id = id;
  cfg.listen = "127.0.0.1:0";
  cfg.secret = std::move(secret);
  cfg.seed = 1000 + id;
  return cfg;
}

/// The future's value, or a timeout error if it takes longer than `limit`.
inline node::result wait(std::future<node::result>& f, std::chrono::milliseconds limit) {
  if (f.wait_for(limit) != std::future_status::ready)
    return make_error(errc::timeout, "the test gave up waiting");
  return f.get();
}

/// Events of one node, recorded from its actor's thread.
struct recorder {
  std::mutex mtx;
  std::vector<node_event> events;
  node::event_handler handler() {
    return [this](const node_event& e) {
      std::lock_guard<std::mutex> lk(mtx);
      events.push_back(e);
    };
  }
  std::size_t count(node_event::kind k, proc_id peer = no_proc) {
    std::lock_guard<std::mutex> lk(mtx);
    std::size_t n = 0;
    for (auto& e : events)
      n += e.what == k && (peer == no_proc || e.peer == peer);
    return n;
  }
};

inline std::optional<std::string> converged(const std::vector<const node*>& nodes,
                                     const vnode_set* all = nullptr) {
  std::vector<node_status> ss;
  for (auto* n : nodes)
    ss.push_back(n->status());
  return check_converged(ss, all);
}

/// Waits until `nodes` converge; on failure reports what was still wrong.
inline void require_converged(const std::vector<const node*>& nodes, const vnode_set* all,
                       std::chrono::milliseconds limit) {
  std::optional<std::string> why;
  bool ok = poll_until(limit, [&] { return !(why = converged(nodes, all)); });
  BOOST_REQUIRE_MESSAGE(ok, "not converged: " << why.value_or(""));
}

struct test_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  test_system() {
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

} // namespace banyan::test::node_suite

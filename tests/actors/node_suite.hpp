#pragma once
// Shared by the suites of banyan::node in one process (tests/actors/node_test.cpp,
// node_collectives_test.cpp): a node's configuration on loopback, a wait on a future
// with a deadline and a CAF system of the test's own to borrow, with node_forming.hpp's
// recorder, convergence checks and cluster forming.

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
#include "node_forming.hpp"

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

using banyan::test::converged;
using banyan::test::form;
using banyan::test::recorder;
using banyan::test::require_converged;

struct test_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  test_system() {
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

} // namespace banyan::test::node_suite

#pragma once
// Shared by the suites that drive banyan::node objects in one process: results that must
// succeed or fail within a deadline, an event recorder, waiting for convergence, and
// forming a cluster (a founder, the others joining through it, every tree formed).

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "banyan/actors/node.hpp"
#include "node_check.hpp"

namespace banyan::test {

/// The error of a result that must have failed with `code` within `limit`.
inline error failed(std::future<node::result>& f, errc code,
                    std::chrono::milliseconds limit = std::chrono::seconds(2)) {
  BOOST_REQUIRE_MESSAGE(ready(f, limit), "not answered in time");
  auto r = f.get();
  BOOST_REQUIRE_MESSAGE(r.has_value(), "succeeded, expected " << to_string(code));
  BOOST_TEST(to_string(r->code) == to_string(code), r->to_string());
  return *r;
}

template <class T>
error failed(std::future<expected<T>>& f, errc code,
             std::chrono::milliseconds limit = std::chrono::seconds(2)) {
  BOOST_REQUIRE_MESSAGE(ready(f, limit), "not answered in time");
  auto r = f.get();
  BOOST_REQUIRE_MESSAGE(!r.has_value(), "succeeded, expected " << to_string(code));
  BOOST_TEST(to_string(r.err().code) == to_string(code), r.err().to_string());
  return r.err();
}

/// A result that must succeed within `limit`; `what` names it in the failure.
inline void succeeded(std::future<node::result>& f,
                      std::chrono::milliseconds limit = std::chrono::seconds(10),
                      const std::string& what = "") {
  BOOST_REQUIRE_MESSAGE(ready(f, limit), what << (what.empty() ? "" : ": ") << "not answered in time");
  auto r = f.get();
  BOOST_REQUIRE_MESSAGE(!r.has_value(), what << (what.empty() ? "" : ": ") << (r ? r->to_string() : ""));
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Events of one node, recorded from its threads.
struct recorder {
  std::mutex mtx;
  std::vector<node_event> events;
  node::event_handler handler() {
    return [this](const node_event& e) {
      std::lock_guard<std::mutex> lk(mtx);
      events.push_back(e);
    };
  }
  /// How many events of kind `k` (about `peer`, unless no_proc) were recorded.
  std::size_t count(node_event::kind k, proc_id peer = no_proc) {
    std::lock_guard<std::mutex> lk(mtx);
    std::size_t n = 0;
    for (auto& e : events)
      n += e.what == k && (peer == no_proc || e.peer == peer);
    return n;
  }
  /// The events of kind `k`, in order.
  std::vector<node_event> of(node_event::kind k) {
    std::lock_guard<std::mutex> lk(mtx);
    std::vector<node_event> r;
    for (auto& e : events)
      if (e.what == k)
        r.push_back(e);
    return r;
  }
};

/// What is wrong with `nodes` as a converged cluster (nothing: converged); with `all`,
/// their vnodes must partition it.
inline std::optional<std::string> converged(const std::vector<const node*>& nodes,
                                            const vnode_set* all = nullptr) {
  std::vector<node_status> ss;
  for (auto* n : nodes)
    ss.push_back(n->status());
  return check_converged(ss, all);
}

/// Waits until `nodes` converge; on failure reports what was still wrong.
inline void require_converged(const std::vector<const node*>& nodes, const vnode_set* all,
                              std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  std::optional<std::string> why;
  bool ok = poll_until(limit, [&] { return !(why = converged(nodes, all)); });
  BOOST_REQUIRE_MESSAGE(ok, "not converged: " << why.value_or(""));
}
inline void require_converged(const std::vector<const node*>& nodes, const vnode_set& all,
                              std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  require_converged(nodes, &all, limit);
}

/// `founder` founds with `all`, the others join through it; every tree forms.
inline void form(node& founder, std::vector<node*> others, const vnode_set& all) {
  auto f = founder.found(all);
  succeeded(f, std::chrono::seconds(5), "founding");
  for (auto* n : others) {
    auto j = n->join({{founder.address()}});
    succeeded(j, std::chrono::seconds(10), "node " + std::to_string(n->id()) + " joining");
  }
  std::vector<const node*> every{&founder};
  every.insert(every.end(), others.begin(), others.end());
  require_converged(every, &all);
}

} // namespace banyan::test

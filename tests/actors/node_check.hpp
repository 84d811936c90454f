#pragma once
// Shared by the node tests: does a set of node snapshots describe a converged
// computation (everyone a member, the same members, every tree a spanning tree without
// cycle, vnodes owned once)? A poll-with-deadline helper, a wait on a future with a
// deadline, and the configuration of a node on loopback.

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "banyan/actors/node.hpp"
#include "banyan/core/tree.hpp"

namespace banyan::test {

/// A node listening on a free loopback port, with `secret`, its randomness seeded
/// `seed_base + id` (a suite's runs repeat), and drain lingers of 300 ms instead of the
/// defaults (still far above a loopback round trip), which keeps the suites fast.
inline node_config loopback_config(proc_id id, std::string secret, std::uint64_t seed_base) {
  using namespace std::chrono_literals;
  node_config cfg;
  cfg.id = id;
  cfg.listen = "127.0.0.1:0";
  cfg.secret = std::move(secret);
  cfg.seed = seed_base + id;
  cfg.bcast.drain_linger = 300ms;
  cfg.reduce.drain_linger = 300ms;
  return cfg;
}

/// True when `f` is ready within `limit`.
template <class T, class Rep, class Period>
bool ready(std::future<T>& f, std::chrono::duration<Rep, Period> limit) {
  return f.wait_for(limit) == std::future_status::ready;
}

/// Calls `pred` every 20 ms until it holds or `limit` passes; returns its last value.
template <class Pred>
bool poll_until(std::chrono::milliseconds limit, Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (pred())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// What is wrong with the snapshots of the members `ss` (nothing: converged). With
/// `all_vnodes`, their own vnodes must also partition exactly that set.
inline std::optional<std::string> check_converged(const std::vector<node_status>& ss,
                                                  const vnode_set* all_vnodes = nullptr) {
  std::set<proc_id> ids;
  proc_id top = 0;
  for (auto& s : ss) {
    ids.insert(s.id);
    top = std::max(top, s.id);
  }
  std::vector<bool> flags(top + 1, false);
  for (auto p : ids)
    flags[p] = true;
  vnode_set owned;
  for (auto& s : ss) {
    auto who = "node " + std::to_string(s.id) + ": ";
    if (s.state != supervisor::status::member)
      return who + "state " + to_string(s.state);
    std::set<proc_id> seen;
    for (auto& m : s.members)
      seen.insert(m.id);
    if (seen != ids)
      return who + "sees " + std::to_string(seen.size()) + " members, not " +
             std::to_string(ids.size());
    if (!s.all_parented)
      return who + "some tree has no parent";
    if (owned.intersects(s.own_vnodes))
      return who + "owns vnodes another node owns too: " + (owned & s.own_vnodes).to_string();
    owned |= s.own_vnodes;
  }
  if (all_vnodes && owned != *all_vnodes)
    return "vnodes owned " + owned.to_string() + ", expected " + all_vnodes->to_string();
  for (auto root : ids)
    for (auto kind : {tree_kind::latency, tree_kind::bandwidth}) {
      std::vector<proc_id> parents(top + 1, no_proc);
      for (auto& s : ss)
        for (auto& t : s.trees)
          if (t.tree == tree_key{root, kind})
            parents[s.id] = t.parent;
      if (auto problem = tree(root, parents).validate(flags))
        return std::string(to_string(kind)) + " tree of " + std::to_string(root) + ": " + *problem;
    }
  return std::nullopt;
}

} // namespace banyan::test

#pragma once
// Broadcast engines over a flat static tree (every root's tree flat), processor p owning
// vnode p, each with a routing table of its own (tests may make them disagree), for tests
// that move the frames by hand.

#include <cstddef>
#include <memory>
#include <vector>

#include "banyan/core/broadcast.hpp"
#include "banyan/core/routing_table.hpp"
#include "banyan/core/static_tree_view.hpp"
#include "banyan/core/tree_builders.hpp"

namespace banyan::test {

struct flat_engines {
  std::vector<std::unique_ptr<routing_table>> routes;
  std::vector<std::unique_ptr<static_tree_view>> views;
  std::vector<std::unique_ptr<broadcast_engine>> engines;

  flat_engines(std::size_t procs, const broadcast_config& cfg) {
    for (proc_id p = 0; p < procs; ++p) {
      routes.push_back(std::make_unique<routing_table>());
      for (proc_id q = 0; q < procs; ++q)
        routes.back()->assign(vnode_set{q}, q, 0);
      views.push_back(std::make_unique<static_tree_view>(
        p, *routes.back(), [procs](tree_key k) { return flat_tree(procs, k.root); }));
      engines.push_back(std::make_unique<broadcast_engine>(*views.back(), cfg));
    }
  }

  broadcast_engine& engine(proc_id p) { return *engines[p]; }
};

} // namespace banyan::test

// Embeds banyan in a program of its own: an emulated grid forms its trees, a
// processor leaves and one joins through the API, and the trees heal.
#include <banyan/actors/emulated_cluster.hpp>

#include <chrono>
#include <iostream>

int main() {
  using namespace std::chrono_literals;
  auto topo = banyan::builtin_topology("tiny-2c8");
  if (!topo) {
    std::cerr << topo.err().to_string() << "\n";
    return 2;
  }
  banyan::actors::cluster_config cfg;
  cfg.topo = *topo;
  cfg.initial = 7; // processor 7 joins later
  banyan::actors::emulated_cluster grid(cfg);
  grid.start();
  if (!grid.run_until_quiet(60s))
    return 1;
  std::cout << "formed: " << grid.monitor().complete_trees() << " complete trees\n";
  if (auto err = grid.leave(3)) {
    std::cerr << err->to_string() << "\n";
    return 1;
  }
  if (auto err = grid.join(7, 0, banyan::vnode_set{6})) {
    std::cerr << err->to_string() << "\n";
    return 1;
  }
  if (!grid.run_until_quiet(60s))
    return 1;
  auto live = grid.monitor().live_count();
  auto complete = grid.monitor().complete_trees();
  std::cout << "after churn: " << live << " processors, " << complete << " complete trees\n";
  return complete == 2 * live ? 0 : 1;
}

#include "demo.hpp"

#include <filesystem>
#include <iostream>

#include "sim_trees.hpp"
#include "tree_report.hpp"

namespace banyan::cli {

namespace {

void table(const actors::emulated_cluster& c) {
  std::printf("  %-10s %6s %8s %16s %16s %12s %10s\n", "tree kind", "trees", "valid",
              "WAN edges mean", "WAN edges max", "depth mean", "depth max");
  for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
    auto s = summarize(c, k);
    std::printf("  %-10s %6zu %8zu %16.2f %16zu %12.2f %10d\n", to_string(k), s.trees,
                s.trees - s.invalid, s.wan_edges_mean, s.wan_edges_max, s.depth_mean,
                s.depth_max);
  }
}

} // namespace

int run_demo(const demo_options& opt) {
  auto topo = load_topology(opt.topology);
  if (!topo) {
    std::cerr << "banyan demo: " << topo.err().to_string() << "\n";
    return 2;
  }
  std::printf("banyan demo: self-healing spanning trees on an EMULATED wide-area grid\n\n");
  std::printf("%s\n", topo->describe().c_str());
  std::printf("Every processor probes randomly chosen peers (1-byte ping-pong for RTT, 128 KiB\n"
              "download for bandwidth) and changes parents by the latency and bandwidth rules,\n"
              "for a latency tree and a bandwidth tree rooted at every processor. Time is\n"
              "virtual (deterministic, seed %llu).\n\n",
              static_cast<unsigned long long>(opt.seed));

  actors::cluster_config cfg;
  cfg.topo = *topo;
  cfg.seed = opt.seed;
  actors::emulated_cluster c(cfg);
  std::printf("1. Trees forming\n");
  c.start();
  bool ok = run_with_progress(c, std::chrono::seconds(600), from_ms(10), true);
  std::printf("   converged after %.1f ms of emulated time, %.1f probes per processor\n\n",
              to_ms(c.last_change()),
              static_cast<double>(c.probes()) / static_cast<double>(topo->proc_count()));
  std::printf("2. What formed (%zu clusters: the fewest possible WAN edges per tree is %zu)\n",
              topo->clusters().size(), topo->clusters().size() - 1);
  table(c);

  std::filesystem::create_directories(opt.out_dir);
  std::printf("\n3. Pictures of the trees rooted at processor 0 (clusters are boxes)\n");
  for (auto k : {tree_kind::latency, tree_kind::bandwidth})
    for (auto& f : export_tree(c, {0, k}, opt.out_dir))
      std::printf("   %s\n", f.c_str());

  std::printf("\n4. Half of the processors hand over their vnodes and leave\n");
  auto t_leave = c.elapsed();
  auto gone = leave_half(c);
  ok = run_with_progress(c, std::chrono::seconds(600), from_ms(10), true) && ok;
  std::printf("   %zu left; trees stable again after %.1f ms\n", gone.size(),
              std::max(0.0, to_ms(c.last_change() - t_leave)));
  table(c);

  std::printf("\n5. They rejoin and take their vnodes back\n");
  c.run_until(c.elapsed() + from_ms(100));
  auto t_join = c.elapsed();
  rejoin(c, gone);
  ok = run_with_progress(c, std::chrono::seconds(600), from_ms(10), true) && ok;
  std::printf("   %zu rejoined; trees stable again after %.1f ms\n", gone.size(),
              std::max(0.0, to_ms(c.last_change() - t_join)));
  table(c);
  for (auto k : {tree_kind::latency, tree_kind::bandwidth})
    ok = ok && summarize(c, k).invalid == 0;
  std::printf("\n%s\n", ok ? "demo finished: every tree spans exactly the live processors"
                           : "demo finished WITH PROBLEMS (see above)");
  return ok ? 0 : 1;
}

} // namespace banyan::cli

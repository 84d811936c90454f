#include "demo.hpp"

#include <cstring>
#include <filesystem>
#include <iostream>
#include <variant>

#include "banyan/core/tree_builders.hpp"
#include "bench.hpp"
#include "bench_churn.hpp"
#include "bench_reduce.hpp"
#include "sim_trees.hpp"
#include "svg_plot.hpp"
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

/// Element i of vnode v's contribution to the demo's reduction.
std::int32_t element(vnode_id v, std::size_t i) {
  return static_cast<std::int32_t>((v * 7 + i) % 101) - 50;
}

struct reduce_outcome {
  bool started = false, correct = false;
  double ms = 0;
};

/// An int32 sum of `count` elements per vnode into vnode 0, checked against the sum
/// computed here and for every vnode counted exactly once.
reduce_outcome reduce_once(actors::emulated_cluster& c, const banyan::tree* static_tree,
                           std::size_t count) {
  reduce_outcome out;
  actors::reduction_args a;
  a.root = 0;
  a.fn = {reduce_kind::sum, element_type::int32};
  a.count = count;
  a.values = actors::int32_values(count, element);
  c.run_until_quiet(std::chrono::seconds(600));
  auto op = static_tree ? c.reduce_static(*static_tree, a) : c.reduce(a);
  if (!op) {
    std::printf("   reduction not started: %s\n", op.err().to_string().c_str());
    return out;
  }
  out.started = true;
  bool done = c.run_until_reduced(*op, std::chrono::seconds(600));
  auto rec = c.reduction(*op);
  if (!done || rec.results.size() != 1)
    return out;
  auto& r = rec.results.front();
  auto vnodes = static_cast<vnode_id>(c.vnode_count());
  std::vector<std::uint8_t> want(count * 4);
  for (std::size_t i = 0; i < count; ++i) {
    std::int32_t sum = 0;
    for (vnode_id v = 0; v < vnodes; ++v)
      sum += element(v, i);
    std::memcpy(want.data() + i * 4, &sum, 4);
  }
  out.correct = reduced_exactly_once(rec, vnodes, want);
  out.ms = to_ms(r.when - rec.started);
  return out;
}

/// Writes a picture into the demo's directory and lists it (or says why not).
void picture(const std::string& path, const plot_spec& p) {
  if (auto err = write_svg(path, p))
    std::printf("   %s\n", err->c_str());
  else
    std::printf("   %s\n", path.c_str());
}

/// Section 4: broadcasts and a reduction over the formed trees, banyan's adaptive trees
/// (`dynamic`) against MagPIe's static cluster-aware tree. False when one failed.
bool collectives(actors::emulated_cluster& c, const std::string& dir) {
  auto& topo = c.topo();
  auto n = topo.proc_count();
  const proc_id root = 0;
  auto magpie = magpie_tree(n, root, topo.cluster_of());
  auto shortest = shortest_path_latencies(latency_matrix(topo), root);
  const auto limit = std::chrono::seconds(600);
  bool ok = true;
  std::printf("   %-34s %13s %13s %15s\n", "operation (root: processor 0)", "dynamic", "magpie",
              "dynamic/magpie");
  auto row = [](const std::string& what, double d, double m, const char* unit, bool ratio) {
    char dv[32], mv[32];
    int decimals = std::string(unit) == "ms" ? 3 : 1;
    std::snprintf(dv, sizeof dv, "%.*f %s", decimals, d, unit);
    std::snprintf(mv, sizeof mv, "%.*f %s", decimals, m, unit);
    if (ratio)
      std::printf("   %-34s %13s %13s %15.2f\n", what.c_str(), dv, mv, m > 0 ? d / m : 0.0);
    else
      std::printf("   %-34s %13s %13s\n", what.c_str(), dv, mv);
  };
  struct bcast_case {
    std::size_t bytes;
    std::string label, file;
  };
  std::vector<std::pair<std::string, plot_spec>> plots;
  for (auto& bc : {bcast_case{1, "1 B", "bcast-1B.svg"},
                   bcast_case{1024 * 1024, "1 MiB", "bcast-1MiB.svg"}}) {
    auto d = measure_broadcast(c, [&] { return c.broadcast(root, bc.bytes); }, limit, limit);
    auto m = measure_broadcast(
      c, [&] { return c.broadcast_static(root, magpie, bc.bytes); }, limit, limit);
    if (!d || !m || !d->complete || !m->complete) {
      std::printf("   broadcast %s: FAILED (not started, or not every processor exactly "
                  "once)\n",
                  bc.label.c_str());
      ok = false;
      continue;
    }
    row("broadcast " + bc.label + ", last delivery", d->completion_ms, m->completion_ms, "ms",
        true);
    if (bc.bytes > 1) {
      // The paper's bandwidth: bytes delivered to all processors over the completion time.
      auto mbps = [&](double t) { return static_cast<double>(bc.bytes * n) / (t / 1e3) / 1e6; };
      row("broadcast " + bc.label + ", bandwidth", mbps(d->completion_ms), mbps(m->completion_ms),
          "MB/s", false);
    }
    // The latency lower bound only means something for the short message.
    plot_spec p = delivery_plot("broadcast of " + bc.label + " from processor 0 on " +
                                  topo.name + " (emulated)",
                                {{"dynamic", d->per_proc_ms}, {"magpie", m->per_proc_ms}},
                                bc.bytes == 1 ? shortest : std::vector<double>{});
    plots.emplace_back(dir + "/" + bc.file, std::move(p));
  }
  const std::size_t count = 16 * 1024; // 64 KiB of int32 per vnode
  auto rd = reduce_once(c, nullptr, count);
  auto rm = reduce_once(c, &magpie, count);
  if (rd.correct && rm.correct)
    row("reduce: int32 sum of 64 KiB", rd.ms, rm.ms, "ms", true);
  else {
    std::printf("   reduce: int32 sum of 64 KiB: %s\n",
                !rd.started || !rm.started ? "FAILED to start" : "WRONG or missing result");
    ok = false;
  }
  if (rd.correct && rm.correct)
    std::printf("   (both reductions checked: the sum computed directly, every vnode once)\n");
  std::printf("   pictures: each processor's delivery time, processors sorted by it (and for 1 B\n"
              "   the lower bound: shortest paths from processor 0)\n");
  for (auto& [path, p] : plots)
    picture(path, p);
  return ok;
}

/// Section 7: the bandwidth of back-to-back broadcasts while half of the processors
/// leave and come back (the paper's Fig. 9), on a small grid of its own to keep the
/// demo short.
bool churn_timeline(const demo_options& opt) {
  churn_options co;
  co.topology = "tiny-2c8";
  co.seed = opt.seed;
  co.leave_at_ms = 1000;
  co.rejoin_at_ms = 2000;
  co.duration_ms = 5000;
  co.message_bytes = 256 * 1024;
  co.window = 4;
  co.bucket_ms = 100;
  auto r = run_churn(co);
  if (auto* err = std::get_if<std::string>(&r)) {
    std::printf("   churn run failed: %s\n", err->c_str());
    return false;
  }
  auto& res = std::get<churn_result>(r);
  std::printf("   %s, %zu processors: %zu broadcasts of 256 KiB from processor 0, 4 in flight\n",
              res.topology.c_str(), res.procs, res.broadcasts);
  for (auto& e : res.events) {
    std::printf("   %-6s of %zu processors at %6.0f ms: steady before %7.1f MB/s, ", e.what.c_str(),
                e.procs, e.at_ms, e.steady_MBps);
    if (e.restabilize_ms)
      std::printf("back to 90%% after %.0f ms\n", *e.restabilize_ms);
    else
      std::printf("not back to 90%% before the end\n");
  }
  std::printf("   deliveries %zu of %zu expected, duplicates %zu, lost %zu\n", res.deliveries,
              res.deliveries_expected, res.duplicates, res.lost);
  picture(opt.out_dir + "/churn.svg", churn_plot(res));
  return res.lost == 0 && res.duplicates == 0;
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

  std::printf("\n4. Collectives over these trees vs MagPIe's static cluster-aware tree\n");
  ok = collectives(c, opt.out_dir) && ok;

  std::printf("\n5. Half of the processors hand over their vnodes and leave\n");
  auto t_leave = c.elapsed();
  auto gone = leave_half(c);
  ok = run_with_progress(c, std::chrono::seconds(600), from_ms(10), true) && ok;
  std::printf("   %zu left; trees stable again after %.1f ms\n", gone.size(),
              std::max(0.0, to_ms(c.last_change() - t_leave)));
  table(c);

  std::printf("\n6. They rejoin and take their vnodes back\n");
  c.run_until(c.elapsed() + from_ms(100));
  auto t_join = c.elapsed();
  rejoin(c, gone);
  ok = run_with_progress(c, std::chrono::seconds(600), from_ms(10), true) && ok;
  std::printf("   %zu rejoined; trees stable again after %.1f ms\n", gone.size(),
              std::max(0.0, to_ms(c.last_change() - t_join)));
  table(c);
  for (auto k : {tree_kind::latency, tree_kind::bandwidth})
    ok = ok && summarize(c, k).invalid == 0;

  std::printf("\n7. Broadcast bandwidth while half of the processors leave and rejoin\n");
  ok = churn_timeline(opt) && ok;

  std::printf("\n%s\n", ok ? "demo finished: every tree spans exactly the live processors, "
                              "every collective delivered exactly once"
                           : "demo finished WITH PROBLEMS (see above)");
  return ok ? 0 : 1;
}

} // namespace banyan::cli

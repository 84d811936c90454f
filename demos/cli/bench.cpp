#include "bench.hpp"
#include "bench_bandwidth.hpp"
#include "bench_churn.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;


/// MPICH-G levels: the parent of each processor's leaf group (the leaf itself when it
/// has none), then the leaf.
std::vector<std::vector<int>> multilevel_levels(const topology& topo) {
  std::vector<std::vector<int>> levels;
  for (proc_id p = 0; p < topo.proc_count(); ++p) {
    int leaf = topo.leaf_of(p);
    int parent = topo.groups[leaf].parent;
    levels.push_back({parent >= 0 ? parent : leaf, leaf});
  }
  return levels;
}

double ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct result {
  std::string algorithm;
  double completion_ms = 0;
  double median_ms = 0;
  std::vector<double> per_proc_ms;
  bool complete = false;
  std::size_t duplicates = 0;
};

} // namespace

int run_bench_bcast_latency(const bench_bcast_options& opt) {
  auto topo = load_topology(opt.topology);
  if (!topo) {
    std::cerr << "banyan bench bcast-latency: " << topo.err().to_string() << "\n";
    return 2;
  }
  actors::cluster_config cfg;
  cfg.topo = *topo;
  cfg.seed = opt.seed;
  cfg.clock = actors::clock_mode::virtual_time;
  actors::emulated_cluster c{cfg};
  c.start();
  if (!c.run_until_quiet(3600s))
    std::cerr << "banyan bench bcast-latency: trees still changing after an hour (emulated)\n";

  auto n = topo->proc_count();
  auto lat = latency_matrix(*topo);
  const proc_id root = 0;
  double bound = farthest_shortest_path(lat, root);

  std::vector<std::pair<std::string, std::function<std::optional<wire::collective_id>()>>> algos;
  algos.emplace_back("dynamic", [&] { return c.broadcast(root, 1); });
  algos.emplace_back("magpie", [&] {
    return c.broadcast_static(root, magpie_tree(n, root, topo->cluster_of()), 1);
  });
  algos.emplace_back("mpich", [&] { return c.broadcast_static(root, binomial_tree(n, root), 1); });
  algos.emplace_back("multilevel", [&] {
    return c.broadcast_static(root, multilevel_tree(root, multilevel_levels(*topo)), 1);
  });
  algos.emplace_back("hlot", [&] { return c.broadcast_static(root, hlot_tree(lat, root), 1); });

  std::vector<result> results;
  int rc = 0;
  for (auto& [name, start] : algos) {
    c.run_until_quiet(600s);
    result r;
    r.algorithm = name;
    auto id = start();
    if (!id) {
      std::cerr << "banyan bench bcast-latency: " << name << ": broadcast not started\n";
      rc = 1;
      continue;
    }
    r.complete = c.run_until_delivered(*id, 600s);
    auto rec = c.deliveries(*id);
    r.per_proc_ms.assign(n, -1);
    for (auto& [v, times] : rec.delivered) {
      if (times.empty())
        continue;
      r.duplicates += times.size() - 1;
      if (v < n)
        r.per_proc_ms[v] = ms(times.front() - rec.started);
    }
    std::vector<double> sorted;
    for (auto t : r.per_proc_ms)
      if (t >= 0)
        sorted.push_back(t);
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty()) {
      r.completion_ms = sorted.back();
      r.median_ms = sorted[sorted.size() / 2];
    }
    if (!r.complete || sorted.size() != n || r.duplicates) {
      std::cerr << "banyan bench bcast-latency: " << name << ": " << sorted.size() << " of "
                << n << " processors reached, " << r.duplicates << " duplicates\n";
      rc = 1;
    }
    results.push_back(std::move(r));
  }

  std::printf("bcast-latency on %s (%zu processors, root %u, 1 byte, emulated)\n",
              topo->name.c_str(), n, static_cast<unsigned>(root));
  std::printf("lower bound (farthest shortest path): %.3f ms\n", bound);
  std::printf("%-12s %14s %12s %10s\n", "algorithm", "completion_ms", "median_ms", "x bound");
  for (auto& r : results)
    std::printf("%-12s %14.3f %12.3f %10.2f\n", r.algorithm.c_str(), r.completion_ms,
                r.median_ms, bound > 0 ? r.completion_ms / bound : 0.0);

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["topology"] = topo->name;
    j["seed"] = opt.seed;
    j["root"] = root;
    j["lower_bound_ms"] = bound;
    auto arr = nlohmann::json::array();
    for (auto& r : results)
      arr.push_back({{"algorithm", r.algorithm},
                     {"completion_ms", r.completion_ms},
                     {"median_ms", r.median_ms},
                     {"per_proc_ms", r.per_proc_ms},
                     {"complete", r.complete && r.duplicates == 0}});
    j["results"] = arr;
    std::ofstream out(opt.json_path);
    if (!out) {
      std::cerr << "banyan bench bcast-latency: cannot write " << opt.json_path << "\n";
      return 2;
    }
    out << j.dump(2) << "\n";
  }
  return rc;
}

void add_bench_command(CLI::App& app, std::function<int()>& action) {
  auto bench = app.add_subcommand("bench", "measurements on the emulated wide-area network");
  bench->require_subcommand(1);
  auto opt = std::make_shared<bench_bcast_options>();
  auto bl = bench->add_subcommand("bcast-latency",
                                  "1-byte broadcast from processor 0: adaptive vs static trees");
  bl->add_option("--topology", opt->topology, "built-in name or topology file")->required();
  bl->add_option("--seed", opt->seed, "random seed");
  bl->add_option("--json", opt->json_path, "write results as JSON");
  bl->callback([opt, &action] { action = [opt] { return run_bench_bcast_latency(*opt); }; });
  add_bench_bandwidth_command(*bench, action);
  add_bench_churn_command(*bench, action);
}

} // namespace banyan::cli

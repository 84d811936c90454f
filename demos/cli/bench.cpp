#include "bench.hpp"
#include "bench_adapt.hpp"
#include "bench_bandwidth.hpp"
#include "bench_churn.hpp"
#include "bench_reduce.hpp"
#include "bench_allreduce.hpp"
#include "bench_blocks.hpp"
#include "bench_suite.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "svg_plot.hpp"
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

} // namespace

std::optional<bcast_measurement>
measure_broadcast(actors::emulated_cluster& c,
                  const std::function<std::optional<wire::collective_id>()>& start,
                  duration settle_limit, duration limit) {
  c.run_until_quiet(settle_limit);
  auto id = start();
  if (!id)
    return std::nullopt;
  bcast_measurement m;
  auto n = c.topo().proc_count();
  m.complete = c.run_until_delivered(*id, limit);
  auto rec = c.deliveries(*id);
  m.per_proc_ms.assign(n, -1);
  for (auto& [v, times] : rec.delivered) {
    if (times.empty())
      continue;
    m.duplicates += times.size() - 1;
    if (v < n)
      m.per_proc_ms[v] = ms(times.front() - rec.started);
  }
  std::vector<double> sorted;
  for (auto t : m.per_proc_ms)
    if (t >= 0)
      sorted.push_back(t);
  std::sort(sorted.begin(), sorted.end());
  m.reached = sorted.size();
  if (!sorted.empty()) {
    m.completion_ms = sorted.back();
    m.median_ms = sorted[sorted.size() / 2];
  }
  m.complete = m.complete && m.reached == n && m.duplicates == 0;
  return m;
}

plot_spec delivery_plot(const std::string& title,
                        const std::vector<std::pair<std::string, std::vector<double>>>& lines,
                        std::vector<double> shortest) {
  plot_spec p;
  p.title = title;
  p.x_label = "processors, sorted by delivery time";
  p.y_label = "delivery time (ms)";
  auto sorted_series = [](std::string label, std::vector<double> ys) {
    plot_series s;
    s.label = std::move(label);
    for (auto t : ys)
      if (t >= 0)
        s.y.push_back(t);
    std::sort(s.y.begin(), s.y.end());
    for (std::size_t i = 0; i < s.y.size(); ++i)
      s.x.push_back(static_cast<double>(i + 1));
    return s;
  };
  for (auto& [label, per_proc] : lines)
    p.series.push_back(sorted_series(label, per_proc));
  if (!shortest.empty())
    p.series.push_back(sorted_series("lower bound (shortest paths)", std::move(shortest)));
  return p;
}

int run_bench_bcast_latency(const bench_options& opt, proc_id root) {
  const std::string name = "bcast-latency";
  // The root is checked before the trees are formed (seconds on the large topologies).
  if (auto t = load_topology(opt.topology); t && root >= t->proc_count()) {
    std::cerr << "banyan bench " << name << ": --root " << root << " is not a processor of "
              << t->name << " (0-" << t->proc_count() - 1 << ")\n";
    return 2;
  }
  auto run = form_cluster(name, opt);
  if (!run)
    return 2;
  auto& c = *run->cluster;
  auto* topo = &run->topo;
  // Between broadcasts: in virtual time until nothing is in flight; in real time also
  // until no tree has changed for half a second.
  const auto settle_limit = std::chrono::seconds(600);
  const auto bcast_limit = std::chrono::seconds(opt.clock == "real" ? 60 : 600);

  auto n = topo->proc_count();
  auto lat = latency_matrix(*topo);
  auto shortest = shortest_path_latencies(lat, root);
  double bound = *std::max_element(shortest.begin(), shortest.end());

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

  struct result {
    std::string algorithm;
    bcast_measurement m;
  };
  std::vector<result> results;
  int rc = 0;
  for (auto& [algo, start] : algos) {
    auto m = measure_broadcast(c, start, settle_limit, bcast_limit);
    if (!m) {
      std::cerr << "banyan bench " << name << ": " << algo << ": broadcast not started\n";
      rc = 1;
      continue;
    }
    if (!m->complete) {
      std::cerr << "banyan bench " << name << ": " << algo << ": " << m->reached << " of "
                << n << " processors reached, " << m->duplicates << " duplicates\n";
      rc = 1;
    }
    results.push_back({algo, std::move(*m)});
  }

  std::printf("bcast-latency on %s (%zu processors, root %u, 1 byte, emulated network, %s "
              "clock)\n",
              topo->name.c_str(), n, static_cast<unsigned>(root), opt.clock.c_str());
  std::printf("lower bound (farthest shortest path): %.3f ms\n", bound);
  std::printf("%-12s %14s %12s %10s\n", "algorithm", "completion_ms", "median_ms", "x bound");
  for (auto& r : results)
    std::printf("%-12s %14.3f %12.3f %10.2f\n", r.algorithm.c_str(), r.m.completion_ms,
                r.m.median_ms, bound > 0 ? r.m.completion_ms / bound : 0.0);

  nlohmann::json j;
  j["topology"] = topo->name;
  j["seed"] = opt.seed;
  j["clock"] = opt.clock;
  j["root"] = root;
  j["trees_formed_ms"] = run->formed_ms;
  j["trees_settled"] = run->settled;
  j["lower_bound_ms"] = bound;
  auto arr = nlohmann::json::array();
  for (auto& r : results)
    arr.push_back({{"algorithm", r.algorithm},
                   {"completion_ms", r.m.completion_ms},
                   {"median_ms", r.m.median_ms},
                   {"per_proc_ms", r.m.per_proc_ms},
                   {"complete", r.m.complete}});
  j["results"] = arr;
  if (!write_json(name, opt.json_path, j))
    return 2;
  std::vector<std::pair<std::string, std::vector<double>>> lines;
  for (auto& r : results)
    lines.emplace_back(r.algorithm, r.m.per_proc_ms);
  auto plot = delivery_plot("1-byte broadcast from processor " + std::to_string(root) + " on "
                              + topo->name + " (emulated)",
                            lines, shortest);
  if (!write_plot(name, opt.plot_path, plot))
    return 2;
  return rc;
}

void add_bench_command(CLI::App& app, std::function<int()>& action) {
  auto bench = app.add_subcommand("bench", "measurements on the emulated wide-area network");
  bench->require_subcommand(1);
  auto opt = std::make_shared<bench_options>();
  auto root = std::make_shared<proc_id>(0);
  auto bl = bench->add_subcommand("bcast-latency",
                                  "1-byte broadcast from one processor: adaptive vs static trees");
  add_bench_options(*bl, *opt);
  bl->add_option("--root", *root, "the broadcasting processor (default 0)");
  bl->callback([opt, root, &action] {
    action = [opt, root] { return run_bench_bcast_latency(*opt, *root); };
  });
  add_bench_bandwidth_command(*bench, action);
  add_bench_churn_command(*bench, action);
  add_bench_reduce_command(*bench, action);
  add_bench_suite_command(*bench, action);
  add_bench_allreduce_command(*bench, action);
  add_bench_blocks_command(*bench, action);
  add_bench_adapt_command(*bench, action);
}

} // namespace banyan::cli

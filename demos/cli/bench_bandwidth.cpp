#include "bench_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/broadcast.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "banyan/core/tree_choice.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

constexpr const char* tag = "banyan bench bcast-bandwidth: ";

const std::vector<std::string> default_sizes = {"32K", "256K", "1M", "4M", "16M", "64M"};
const std::vector<std::string> default_algorithms = {"dynamic", "mpich", "magpie", "list"};
/// `dynamic` chooses its tree as the broadcast engine is configured (broadcast_config::
/// rule); the variants choose by one rule whatever the default, on the same trees.
const std::vector<std::string> all_algorithms = {"dynamic",         "dynamic-model",
                                                 "dynamic-threshold", "dynamic-latency",
                                                 "dynamic-bandwidth", "mpich",
                                                 "magpie",          "list"};

/// The tree choice of a `dynamic` variant (nothing: the engine's own).
std::optional<tree_choice> choice_of(const std::string& a) {
  tree_choice c;
  c.cost.segment = broadcast_config{}.segment_size;
  c.cost.overhead = broadcast_config{}.send_overhead;
  if (a == "dynamic-model") {
    c.rule = tree_rule::model;
    return c;
  }
  c.rule = tree_rule::threshold;
  if (a == "dynamic-threshold")
    return c;
  if (a == "dynamic-latency") {
    c.long_threshold = std::numeric_limits<std::size_t>::max();
    return c;
  }
  if (a == "dynamic-bandwidth") {
    c.long_threshold = 0;
    return c;
  }
  return std::nullopt;
}

double to_ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string size_label(std::size_t s) {
  if (s % (1024 * 1024) == 0)
    return std::to_string(s / (1024 * 1024)) + " MiB";
  if (s % 1024 == 0)
    return std::to_string(s / 1024) + " KiB";
  return std::to_string(s) + " B";
}

/// "depth D, fan-out F, cluster edges A->B x2, ...": the shape of the adaptive tree `k`
/// (read from the supervisors; virtual time, between runs).
std::string describe_tree(const actors::emulated_cluster& c, tree_key k) {
  auto& topo = c.topo();
  auto cl = topo.cluster_of();
  std::map<std::pair<int, int>, int> wan;
  std::map<proc_id, int> kids;
  std::size_t depth = 0;
  for (auto p : c.running_procs()) {
    auto* s = c.inspect(p);
    if (!s || p == k.root)
      continue;
    auto par = s->parent(k);
    if (par == no_proc)
      continue;
    ++kids[par];
    if (cl[par] != cl[p])
      ++wan[{cl[par], cl[p]}];
    std::size_t d = 0;
    for (proc_id q = p; q != k.root && q != no_proc && d <= topo.proc_count(); ++d) {
      auto* sq = c.inspect(q);
      q = sq ? sq->parent(k) : no_proc;
    }
    depth = std::max(depth, d);
  }
  int fan = 0;
  for (auto& [p, m] : kids)
    fan = std::max(fan, m);
  std::string out = "depth " + std::to_string(depth) + ", max fan-out " + std::to_string(fan) +
                    ", cluster edges";
  for (auto& [e, m] : wan)
    out += " " + topo.groups[static_cast<std::size_t>(e.first)].name + "->" +
           topo.groups[static_cast<std::size_t>(e.second)].name + " x" + std::to_string(m);
  return out;
}

} // namespace

std::optional<std::size_t> parse_size(const std::string& s) {
  if (s.empty())
    return std::nullopt;
  std::size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9')
    ++digits;
  if (digits == 0 || digits > 12)
    return std::nullopt;
  std::size_t value = std::stoull(s.substr(0, digits));
  auto unit = s.substr(digits);
  std::size_t mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mult = 1024;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mult = 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    return std::nullopt;
  if (value == 0 || value > (std::size_t{1} << 30) / mult)
    return std::nullopt;
  return value * mult;
}

int run_bench_bcast_bandwidth(const bench_bandwidth_options& bopt) {
  const auto& opt = bopt.common;
  std::vector<std::size_t> sizes;
  for (auto& s : bopt.sizes.empty() ? default_sizes : bopt.sizes) {
    auto v = parse_size(s);
    if (!v) {
      std::cerr << tag << "bad size '" << s << "' (expected e.g. 32K, 4M or 1000; at most 1 GiB)\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  auto algorithms = bopt.algorithms.empty() ? default_algorithms : bopt.algorithms;
  for (auto& a : algorithms)
    if (std::find(all_algorithms.begin(), all_algorithms.end(), a) == all_algorithms.end()) {
      std::cerr << tag << "unknown algorithm '" << a
                << "' (dynamic, dynamic-model, dynamic-threshold, dynamic-latency, "
                   "dynamic-bandwidth, mpich, magpie, list)\n";
      return 2;
    }
  if (auto err = check(opt)) {
    std::cerr << tag << *err << "\n";
    return 2;
  }
  for (auto* path : {&opt.json_path, &opt.plot_path})
    if (!path->empty() && !std::ofstream(*path, std::ios::app)) {
      std::cerr << tag << "cannot write " << *path << "\n";
      return 2;
    }

  auto run = form_cluster("bcast-bandwidth", opt);
  if (!run)
    return 2;
  auto& c = *run->cluster;
  const auto* topo = &run->topo;
  const bool virtual_time = clock_of(opt) == actors::clock_mode::virtual_time;

  const auto n = topo->proc_count();
  const proc_id root = 0;
  // The supervisors can be read between runs in virtual time only.
  auto shape = virtual_time ? describe_tree(c, {root, tree_kind::bandwidth})
                            : std::string{"(not read in real time)"};
  auto chain = widest_chain(bandwidth_matrix(*topo), root);
  auto list = chain_tree(chain);
  auto magpie = magpie_tree(n, root, topo->cluster_of());
  auto binomial = binomial_tree(n, root);
  const auto sag_threshold = actors::emulated_cluster::scatter_allgather_threshold();

  // The origin's prediction per size (core/tree_choice.hpp), read from its supervisor
  // between runs (virtual time only): what the model rule decides on.
  std::map<std::size_t, tree_prediction> predicted;
  if (virtual_time)
    if (auto* s = c.inspect(root)) {
      supervisor_view view{*s};
      for (auto size : sizes)
        predicted[size] = predict(view, size,
                                  {broadcast_config{}.send_overhead, broadcast_config{}.segment_size});
    }
  auto method_of = [&](const std::string& a, std::size_t size) -> std::string {
    if (a.rfind("dynamic", 0) == 0) {
      auto choice = choice_of(a).value_or(tree_choice{broadcast_config{}.rule,
                                                      broadcast_config{}.long_threshold, {}});
      if (choice.rule == tree_rule::threshold)
        return size < choice.long_threshold ? "latency tree" : "bandwidth tree";
      auto p = predicted.find(size);
      if (p == predicted.end() || !p->second.known)
        return "model (not read)";
      return p->second.faster() == tree_kind::latency ? "latency tree (model)"
                                                       : "bandwidth tree (model)";
    }
    if (a == "mpich")
      return size < sag_threshold ? "binomial" : "scatter-allgather";
    return a == "magpie" ? "magpie tree" : "chain";
  };
  using starter = std::function<std::optional<wire::collective_id>(std::size_t)>;
  auto start_of = [&](const std::string& a) -> starter {
    if (a.rfind("dynamic", 0) == 0)
      return [&, choice = choice_of(a)](std::size_t b) { return c.broadcast(root, b, choice); };
    if (a == "mpich") // MPICH: binomial below its long threshold, then scatter-allgather
      return [&](std::size_t b) {
        return b < sag_threshold ? c.broadcast_static(root, binomial, b)
                                 : c.broadcast_scatter_allgather(root, b);
      };
    if (a == "magpie")
      return [&](std::size_t b) { return c.broadcast_static(root, magpie, b); };
    return [&](std::size_t b) { return c.broadcast_static(root, list, b); };
  };

  std::vector<bandwidth_result> results;
  int rc = 0;
  for (auto& a : algorithms) {
    auto start = start_of(a);
    for (auto size : sizes) {
      wait_until_quiet(c, 600s, false);
      bandwidth_result r;
      r.algorithm = a;
      r.size = size;
      r.method = method_of(a, size);
      auto id = start(size);
      if (!id) {
        std::cerr << tag << a << " " << size_label(size) << ": broadcast not started\n";
        rc = 1;
        continue;
      }
      r.complete = c.run_until_delivered(*id, virtual_time ? 3600s : 600s);
      auto rec = c.deliveries(*id);
      duration last{0};
      std::size_t reached = 0, dups = 0;
      r.per_vnode_ms.assign(c.vnode_count(), -1);
      for (auto& [v, times] : rec.delivered) {
        if (times.empty())
          continue;
        ++reached;
        if (v < r.per_vnode_ms.size())
          r.per_vnode_ms[v] = to_ms(times.front() - rec.started);
        dups += times.size() - 1;
        last = std::max(last, times.front());
      }
      r.completion_ms = to_ms(last - rec.started);
      r.complete = r.complete && reached == c.vnode_count() && dups == 0;
      if (r.completion_ms > 0)
        r.bandwidth_MBps = static_cast<double>(size) * static_cast<double>(n) /
                           (r.completion_ms / 1000.0) / 1e6;
      if (!r.complete) {
        std::cerr << tag << a << " " << size_label(size) << ": " << reached << " of "
                  << c.vnode_count() << " vnodes reached, " << dups << " duplicates\n";
        rc = 1;
      }
      if (opt.verbose)
        std::cerr << tag << a << ", " << size_label(size) << " (" << r.method
                  << "): " << r.completion_ms << " ms\n";
      results.push_back(r);
    }
  }

  std::printf("bcast-bandwidth on %s (%zu processors, root %u, %s time, emulated network, "
              "trees formed at %.0f ms)\n",
              topo->name.c_str(), n, static_cast<unsigned>(root), opt.clock.c_str(),
              run->formed_ms);
  std::printf("dynamic bandwidth tree of %u: %s\n", static_cast<unsigned>(root), shape.c_str());
  std::printf("list chain bottleneck: %.1f MB/s\n",
              chain_bottleneck(chain, bandwidth_matrix(*topo)) / 1e6);
  std::printf("mpich: binomial tree below %s, scatter then ring allgather from %s on\n",
              size_label(sag_threshold).c_str(), size_label(sag_threshold).c_str());
  std::printf("%-10s %10s %14s %16s  %s\n", "algorithm", "size", "completion_ms",
              "bandwidth_MBps", "method");
  for (auto& r : results)
    std::printf("%-10s %10s %14.3f %16.1f  %s%s\n", r.algorithm.c_str(),
                size_label(r.size).c_str(), r.completion_ms, r.bandwidth_MBps, r.method.c_str(),
                r.complete ? "" : "  (incomplete)");
  auto find = [&](const std::string& a, std::size_t s) -> const bandwidth_result* {
    for (auto& r : results)
      if (r.algorithm == a && r.size == s)
        return &r;
    return nullptr;
  };
  if (!predicted.empty()) {
    std::printf("model at processor %u (predicted completion, ms):\n", static_cast<unsigned>(root));
    for (auto& [size, p] : predicted)
      std::printf("  %10s  latency tree %10.3f  bandwidth tree %10.3f  -> %s%s\n",
                  size_label(size).c_str(), to_ms(p.latency), to_ms(p.bandwidth),
                  p.known ? to_string(p.faster()) : "unknown (threshold)",
                  !p.known ? "" : p.from_summaries ? " (own trees' summaries)"
                                                   : " (places in other trees)");
  }
  for (auto size : sizes) {
    auto d = find("dynamic", size);
    auto l = find("list", size);
    if (d && l && l->bandwidth_MBps > 0)
      std::printf("dynamic / list at %s: %.3f\n", size_label(size).c_str(),
                  d->bandwidth_MBps / l->bandwidth_MBps);
  }

  if (!opt.plot_path.empty()) {
    plot_spec p;
    p.title = "Broadcast bandwidth on " + topo->name + " (" + std::to_string(n) + " processors)";
    p.x_label = "message size (bytes)";
    p.y_label = "bandwidth (MB/s) = size x procs / completion";
    p.log_x = true;
    p.draw = plot_spec::style::lines;
    for (auto& a : algorithms) {
      plot_series s;
      s.label = a == "mpich" ? "mpich (binomial, scatter-allgather >= " +
                                   size_label(sag_threshold) + ")"
                             : a;
      for (auto& r : results)
        if (r.algorithm == a && r.complete) {
          s.x.push_back(static_cast<double>(r.size));
          s.y.push_back(r.bandwidth_MBps);
        }
      p.series.push_back(std::move(s));
    }
    if (!write_plot("bcast-bandwidth", opt.plot_path, p))
      return 2;
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["topology"] = topo->name;
    j["experiment"] = "bcast-bandwidth";
    j["seed"] = opt.seed;
    j["clock"] = opt.clock;
    j["trees_formed_ms"] = run->formed_ms;
    j["root"] = root;
    j["procs"] = n;
    j["list_order"] = chain;
    j["mpich_long"] = "scatter-allgather";
    j["mpich_long_threshold"] = sag_threshold;
    j["dynamic_rule"] = to_string(broadcast_config{}.rule);
    auto model = nlohmann::json::array();
    for (auto& [size, p] : predicted)
      model.push_back({{"size", size},
                       {"latency_ms", to_ms(p.latency)},
                       {"bandwidth_ms", to_ms(p.bandwidth)},
                       {"known", p.known},
                       {"from_summaries", p.from_summaries}});
    j["model"] = model;
    auto arr = nlohmann::json::array();
    for (auto& r : results)
      arr.push_back({{"algorithm", r.algorithm},
                     {"size", r.size},
                     {"completion_ms", r.completion_ms},
                     {"bandwidth_MBps", r.bandwidth_MBps},
                     {"method", r.method},
                     {"complete", r.complete},
                     {"per_vnode_ms", r.per_vnode_ms}});
    j["results"] = arr;
    if (!write_json("bcast-bandwidth", opt.json_path, j))
      return 2;
  }
  return rc;
}

void add_bench_bandwidth_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<bench_bandwidth_options>();
  auto cmd = bench.add_subcommand(
    "bcast-bandwidth", "long broadcasts from processor 0: bandwidth vs size per algorithm");
  add_bench_options(*cmd, opt->common);
  cmd->add_option("--sizes", opt->sizes, "message sizes (32K,256K,1M,4M,16M,64M)")->delimiter(',');
  cmd->add_option("--algorithms", opt->algorithms,
                  "of dynamic,mpich,magpie,list (the default) and dynamic-model, "
                  "dynamic-threshold, dynamic-latency, dynamic-bandwidth")
    ->delimiter(',');
  cmd->callback([opt, &action] { action = [opt] { return run_bench_bcast_bandwidth(*opt); }; });
}

} // namespace banyan::cli

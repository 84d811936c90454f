#include "bench_reduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "bench_bandwidth.hpp" // parse_size
#include "svg_plot.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

const char* const tag = "banyan bench reduce: ";
const std::vector<std::string> default_sizes = {"4", "256", "16K", "256K", "1M", "4M"};
const std::vector<std::string> all_algorithms = {"dynamic", "mpich", "magpie"};

double ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

/// Element i of vnode v in reduction `salt`: a small integer, different per vnode,
/// element and reduction.
std::int32_t element(vnode_id v, std::size_t i, std::uint64_t salt) {
  return static_cast<std::int32_t>((v * 31 + i * 7 + salt) % 17) - 8;
}

contribution_fn contributions(std::size_t count, std::uint64_t salt) {
  return actors::int32_values(count,
                              [salt](vnode_id v, std::size_t i) { return element(v, i, salt); });
}

/// The true sum over vnodes [0, n), computed directly (int32 wraps: summed unsigned).
std::vector<std::uint8_t> true_sum(vnode_id n, std::size_t count, std::uint64_t salt) {
  std::vector<std::uint8_t> b(count * 4);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t acc = 0;
    for (vnode_id v = 0; v < n; ++v)
      acc += static_cast<std::uint32_t>(element(v, i, salt));
    std::memcpy(b.data() + i * 4, &acc, 4);
  }
  return b;
}

std::string size_label(std::size_t s) {
  if (s >= 1024 * 1024 && s % (1024 * 1024) == 0)
    return std::to_string(s / (1024 * 1024)) + " MiB";
  if (s >= 1024 && s % 1024 == 0)
    return std::to_string(s / 1024) + " KiB";
  return std::to_string(s) + " B";
}

} // namespace

contribution_fn int32_contributions(std::size_t count, std::uint64_t salt) {
  return contributions(count, salt);
}

std::vector<std::uint8_t> int32_true_sum(vnode_id n, std::size_t count, std::uint64_t salt) {
  return true_sum(n, count, salt);
}

bool reduced_exactly_once(const actors::reduction_record& rec, std::size_t vnodes,
                          const std::vector<std::uint8_t>& want) {
  if (rec.results.size() != 1 || !rec.problems.empty() || rec.contributions.size() != vnodes)
    return false;
  for (auto& [v, k] : rec.contributions)
    if (k != 1)
      return false;
  auto& res = rec.results.front();
  return res.vnodes == vnode_set::range(0, static_cast<vnode_id>(vnodes)) && res.value == want;
}

int run_bench_reduce(const bench_reduce_options& ropt) {
  const auto& opt = ropt.common;
  std::vector<std::size_t> sizes;
  for (auto& s : ropt.sizes.empty() ? default_sizes : ropt.sizes) {
    auto v = parse_size(s);
    if (!v || *v % 4 != 0) {
      std::cerr << tag << "bad size '" << s
                << "' (int32 arrays: a multiple of 4 bytes, e.g. 4, 16K, 4M; at most 1 GiB)\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  auto algorithms = ropt.algorithms.empty() ? all_algorithms : ropt.algorithms;
  for (auto& a : algorithms)
    if (std::find(all_algorithms.begin(), all_algorithms.end(), a) == all_algorithms.end()) {
      std::cerr << tag << "unknown algorithm '" << a << "' (dynamic, mpich, magpie)\n";
      return 2;
    }
  std::optional<std::size_t> segment;
  if (!ropt.segment.empty()) {
    segment = ropt.segment == "0" ? std::optional<std::size_t>(0) : parse_size(ropt.segment);
    if (!segment || *segment % 4 != 0) {
      std::cerr << tag << "bad segment size '" << ropt.segment
                << "' (a multiple of 4 bytes, e.g. 16K; 0: no segments)\n";
      return 2;
    }
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
  std::size_t segment_used = 0;
  auto run = form_cluster("reduce", opt, [&](actors::cluster_config& cfg) {
    if (segment)
      cfg.reduce_segment = *segment;
    segment_used = cfg.reduce_segment;
  });
  if (!run)
    return 2;
  auto& c = *run->cluster;
  const auto* topo = &run->topo;
  const double formed_ms = run->formed_ms;

  const auto n = topo->proc_count();
  const auto vnodes = static_cast<vnode_id>(c.vnode_count());
  const vnode_id root = 0;
  const proc_id root_proc = 0; // founders: vnode v lives at processor v
  const auto clusters = topo->cluster_of();

  std::vector<reduce_result_row> rows;
  int rc = 0;
  std::uint64_t salt = opt.seed;
  for (auto size : sizes) {
    const std::size_t count = size / 4;
    for (auto& algo : algorithms) {
      ++salt;
      actors::reduction_args a;
      a.root = root;
      a.fn = {reduce_kind::sum, element_type::int32};
      a.count = count;
      a.values = contributions(count, salt);
      wait_until_quiet(c, 600s, false);
      expected<std::uint64_t> op = make_error(errc::invalid_argument, "no algorithm");
      if (algo == "dynamic")
        op = c.reduce(a);
      else if (algo == "mpich")
        op = c.reduce_static(binomial_tree(n, root_proc), a);
      else
        op = c.reduce_static(magpie_tree(n, root_proc, clusters), a);
      reduce_result_row r;
      r.algorithm = algo;
      r.size = size;
      if (!op) {
        std::cerr << tag << algo << ", " << size_label(size) << ": " << op.err().to_string() << "\n";
        rc = 1;
        rows.push_back(r);
        continue;
      }
      r.complete = c.run_until_reduced(*op, 600s);
      auto rec = c.reduction(*op);
      if (!rec.results.empty()) {
        auto& res = rec.results.front();
        r.completion_ms = ms(res.when - rec.started);
        r.correct = reduced_exactly_once(rec, vnodes, true_sum(vnodes, count, salt));
      }
      if (!r.complete || !r.correct) {
        std::cerr << tag << algo << ", " << size_label(size) << ": "
                  << (r.complete ? "wrong result" : "no result") << " (" << rec.results.size()
                  << " results";
        for (auto& p : rec.problems)
          std::cerr << "; " << p;
        std::cerr << ")\n";
        rc = 1;
      }
      if (opt.verbose)
        std::cerr << tag << algo << ", " << size_label(size) << ": " << r.completion_ms << " ms\n";
      rows.push_back(r);
    }
  }

  std::printf("reduce (int32 sum to vnode 0) on %s (%zu processors, %s time, trees formed at "
              "%.0f ms, dynamic segments %s)\n",
              topo->name.c_str(), n, opt.clock.c_str(), formed_ms,
              segment_used ? size_label(segment_used).c_str() : "none");
  std::printf("%-10s", "size");
  for (auto& a : algorithms)
    std::printf(" %14s", (a + "_ms").c_str());
  const bool ratio = std::count(algorithms.begin(), algorithms.end(), "dynamic") &&
                     std::count(algorithms.begin(), algorithms.end(), "magpie");
  if (ratio)
    std::printf(" %16s", "dynamic/magpie");
  std::printf("\n");
  std::map<std::pair<std::string, std::size_t>, reduce_result_row> by;
  for (auto& r : rows)
    by[{r.algorithm, r.size}] = r;
  double worst = 0;
  for (auto size : sizes) {
    std::printf("%-10s", size_label(size).c_str());
    for (auto& a : algorithms) {
      auto& r = by[{a, size}];
      if (r.correct)
        std::printf(" %14.3f", r.completion_ms);
      else
        std::printf(" %14s", "FAILED");
    }
    if (ratio) {
      auto& d = by[{"dynamic", size}];
      auto& m = by[{"magpie", size}];
      const double x = m.completion_ms > 0 ? d.completion_ms / m.completion_ms : 0;
      worst = std::max(worst, x);
      std::printf(" %16.2f", x);
    }
    std::printf("\n");
  }
  if (ratio)
    std::printf("dynamic/magpie: at most %.2fx over these sizes (target: 1.2x)\n", worst);

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["experiment"] = "reduce";
    j["topology"] = topo->name;
    j["seed"] = opt.seed;
    j["clock"] = opt.clock;
    j["processors"] = n;
    j["root_vnode"] = root;
    j["operation"] = "sum int32";
    j["trees_formed_ms"] = formed_ms;
    j["dynamic_segment"] = segment_used;
    auto arr = nlohmann::json::array();
    for (auto& r : rows)
      arr.push_back({{"algorithm", r.algorithm},
                     {"size", r.size},
                     {"completion_ms", r.completion_ms},
                     {"correct", r.correct}});
    j["results"] = arr;
    if (ratio)
      j["max_dynamic_over_magpie"] = worst;
    if (!write_json("reduce", opt.json_path, j))
      return 2;
  }
  if (!opt.plot_path.empty()) {
    plot_spec p;
    p.title = "int32 sum reduction to vnode 0 on " + topo->name + " (emulated)";
    p.x_label = "array size per processor (bytes)";
    p.y_label = "completion time (ms)";
    p.log_x = true;
    p.log_y = true;
    p.draw = plot_spec::style::lines;
    for (auto& a : algorithms) {
      plot_series s;
      s.label = a;
      for (auto size : sizes) {
        auto& r = by[{a, size}];
        if (r.correct && r.completion_ms > 0) {
          s.x.push_back(static_cast<double>(size));
          s.y.push_back(r.completion_ms);
        }
      }
      p.series.push_back(std::move(s));
    }
    if (!write_plot("reduce", opt.plot_path, p))
      return 2;
  }
  return rc;
}

void add_bench_reduce_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<bench_reduce_options>();
  auto cmd = bench.add_subcommand(
    "reduce", "int32 sum reductions of 4 B to 4 MiB: adaptive vs static trees (Fig. 8)");
  add_bench_options(*cmd, opt->common);
  cmd->add_option("--sizes", opt->sizes, "array sizes in bytes (e.g. 4,16K,4M)")->delimiter(',');
  cmd->add_option("--algorithms", opt->algorithms, "dynamic, mpich, magpie")->delimiter(',');
  cmd->add_option("--segment", opt->segment,
                  "dynamic: segment size for long arrays (default 16K; 0: none)");
  cmd->callback([opt, &action] { action = [opt] { return run_bench_reduce(*opt); }; });
}

} // namespace banyan::cli

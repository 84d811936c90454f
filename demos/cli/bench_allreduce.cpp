#include "bench_allreduce.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/mpich_allreduce.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "bench.hpp"           // measure_broadcast
#include "bench_bandwidth.hpp" // parse_size
#include "bench_reduce.hpp"    // int32_contributions, int32_true_sum
#include "svg_plot.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

const char* const tag = "banyan bench allreduce: ";
const std::vector<std::string> default_sizes = {"4", "256", "16K", "256K", "1M"};
const std::vector<std::string> all_algorithms = {"dynamic", "recursive_doubling", "ring",
                                                 "magpie"};

double ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string size_label(std::size_t s) {
  if (s >= 1024 * 1024 && s % (1024 * 1024) == 0)
    return std::to_string(s / (1024 * 1024)) + " MiB";
  if (s >= 1024 && s % 1024 == 0)
    return std::to_string(s / 1024) + " KiB";
  return std::to_string(s) + " B";
}

struct row {
  std::string algorithm;
  std::size_t size = 0; ///< bytes per vnode; 0: a barrier
  double completion_ms = 0;
  bool correct = false;
};

/// Runs one operation to its end and measures it: every vnode counted once (none for a
/// barrier) and delivered once, the value `want` everywhere.
row measure(actors::emulated_cluster& c, const std::string& algo, std::size_t size,
            collective_kind kind, expected<std::uint64_t> op,
            const std::vector<std::uint8_t>& want, bool verbose) {
  row r;
  r.algorithm = algo;
  r.size = size;
  if (!op) {
    std::cerr << tag << algo << ", " << size_label(size) << ": " << op.err().to_string() << "\n";
    return r;
  }
  const bool complete = c.run_until_allreduced(kind, *op, 600s);
  auto rec = c.allreduction(kind, *op);
  const auto vnodes = c.vnode_count();
  bool once = rec.delivered.size() == vnodes;
  for (auto& [v, times] : rec.delivered)
    once = once && times.size() == 1;
  const bool counted = size == 0 ? true : rec.contributions.size() == vnodes;
  for (auto& [v, k] : rec.contributions)
    once = once && k == 1;
  r.correct = complete && once && counted && rec.wrong_values == 0 && rec.problems.empty() &&
              rec.value == want;
  r.completion_ms = ms(rec.finished - rec.started);
  if (!r.correct) {
    std::cerr << tag << algo << ", " << size_label(size) << ": "
              << (complete ? "wrong or duplicated deliveries" : "not delivered everywhere");
    for (auto& p : rec.problems)
      std::cerr << "; " << p;
    std::cerr << "\n";
  } else if (verbose) {
    std::cerr << tag << algo << ", " << (size ? size_label(size) : "barrier") << ": "
              << r.completion_ms << " ms\n";
  }
  return r;
}

/// MagPIe's allreduce (and barrier, `a.count` 0) as its library runs it: the reduction
/// to processor `t.root()` over the cluster-aware tree `t`, then the broadcast of the
/// result down the same tree, one after the other with nothing overlapping. Measured the
/// same way: the reduction on the quiet network, then the broadcast of `size` bytes from
/// the root on the quiet network; the two completion times added. Every vnode counted
/// once and the sum right at the root; every vnode delivered once.
row measure_magpie(actors::emulated_cluster& c, const banyan::tree& t,
                   const actors::reduction_args& a, std::size_t size,
                   const std::vector<std::uint8_t>& want, bool verbose) {
  row r;
  r.algorithm = "magpie";
  r.size = size;
  auto op = c.reduce_static(t, a);
  if (!op) {
    std::cerr << tag << "magpie, " << size_label(size) << ": " << op.err().to_string() << "\n";
    return r;
  }
  const bool reduced = c.run_until_reduced(*op, 600s);
  auto rec = c.reduction(*op);
  const auto vnodes = c.vnode_count();
  bool once = rec.contributions.size() == vnodes;
  for (auto& [v, k] : rec.contributions)
    once = once && k == 1;
  const bool up = reduced && once && rec.results.size() == 1 && rec.problems.empty() &&
                  rec.results[0].vnodes == vnode_set::range(0, static_cast<vnode_id>(vnodes)) &&
                  (size == 0 || rec.results[0].value == want);
  double up_ms = up ? ms(rec.results[0].when - rec.started) : 0;
  auto down = measure_broadcast(
    c, [&] { return c.broadcast_static(t.root(), t, std::max<std::size_t>(size, 1)); }, 600s,
    600s);
  r.correct = up && down && down->complete;
  r.completion_ms = r.correct ? up_ms + down->completion_ms : 0;
  if (!r.correct)
    std::cerr << tag << "magpie, " << size_label(size) << ": "
              << (up ? "the broadcast did not reach every vnode once"
                     : "the reduction was not exact") << "\n";
  else if (verbose)
    std::cerr << tag << "magpie, " << (size ? size_label(size) : "barrier") << ": " << up_ms
              << " + " << down->completion_ms << " ms\n";
  return r;
}

} // namespace

int run_bench_allreduce(const bench_allreduce_options& aopt) {
  const auto& opt = aopt.common;
  std::vector<std::size_t> sizes;
  for (auto& s : aopt.sizes.empty() ? default_sizes : aopt.sizes) {
    auto v = parse_size(s);
    if (!v || *v % 4 != 0 || *v == 0) {
      std::cerr << tag << "bad size '" << s
                << "' (int32 arrays: a positive multiple of 4 bytes, e.g. 4, 16K, 1M)\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  auto algorithms = aopt.algorithms.empty() ? all_algorithms : aopt.algorithms;
  for (auto& a : algorithms)
    if (std::find(all_algorithms.begin(), all_algorithms.end(), a) == all_algorithms.end()) {
      std::cerr << tag << "unknown algorithm '" << a
                << "' (dynamic, recursive_doubling, ring, magpie)\n";
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
  auto run = form_cluster("allreduce", opt);
  if (!run)
    return 2;
  auto& c = *run->cluster;
  const auto* topo = &run->topo;
  const auto n = topo->proc_count();
  const auto vnodes = static_cast<vnode_id>(c.vnode_count());
  const auto magpie = magpie_tree(n, 0, topo->cluster_of()); // vnode 0 lives at processor 0

  std::vector<row> rows;
  std::uint64_t salt = opt.seed;
  for (auto size : sizes) {
    const std::size_t count = size / 4;
    for (auto& algo : algorithms) {
      ++salt;
      actors::reduction_args a;
      a.root = 0;
      a.fn = {reduce_kind::sum, element_type::int32};
      a.count = count;
      a.values = int32_contributions(count, salt);
      wait_until_quiet(c, 600s, false);
      expected<std::uint64_t> op = make_error(errc::invalid_argument, "no algorithm");
      collective_kind kind = collective_kind::allreduce;
      if (algo == "magpie") {
        rows.push_back(
          measure_magpie(c, magpie, a, size, int32_true_sum(vnodes, count, salt), opt.verbose));
        continue;
      }
      if (algo == "dynamic") {
        op = c.allreduce(a);
      } else {
        auto m = algo == "ring" ? mpich_algorithm::ring : mpich_algorithm::recursive_doubling;
        kind = kind_of(m);
        op = c.allreduce_mpich(m, a);
      }
      rows.push_back(measure(c, algo, size, kind, op, int32_true_sum(vnodes, count, salt), opt.verbose));
    }
  }
  // Barriers.
  wait_until_quiet(c, 600s, false);
  rows.push_back(measure(c, "dynamic", 0, collective_kind::barrier, c.barrier(), {}, opt.verbose));
  wait_until_quiet(c, 600s, false);
  rows.push_back(measure(c, "dissemination", 0, collective_kind::dissemination_barrier,
                         c.allreduce_mpich(mpich_algorithm::dissemination, {}), {}, opt.verbose));
  const bool with_magpie = std::count(algorithms.begin(), algorithms.end(), "magpie") > 0;
  if (with_magpie) { // a reduction of nothing, then a 1-byte release
    wait_until_quiet(c, 600s, false);
    actors::reduction_args nothing;
    nothing.fn = {reduce_kind::sum, element_type::int32};
    nothing.count = 0;
    nothing.values = [](vnode_id) { return std::vector<std::uint8_t>{}; };
    rows.push_back(measure_magpie(c, magpie, nothing, 0, {}, opt.verbose));
  }

  int rc = 0;
  for (auto& r : rows)
    if (!r.correct)
      rc = 1;
  std::map<std::pair<std::string, std::size_t>, row> by;
  for (auto& r : rows)
    by[{r.algorithm, r.size}] = r;
  std::printf("allreduce (int32 sum, every vnode gets it) on %s (%zu processors, %s time, trees "
              "formed at %.0f ms)\n",
              topo->name.c_str(), n, opt.clock.c_str(), run->formed_ms);
  std::printf("%-10s", "size");
  for (auto& a : algorithms)
    std::printf(" %20s", (a + "_ms").c_str());
  const bool has_dyn = std::count(algorithms.begin(), algorithms.end(), "dynamic") > 0;
  if (has_dyn)
    std::printf(" %22s", "dynamic/best_static");
  std::printf("\n");
  for (auto size : sizes) {
    std::printf("%-10s", size_label(size).c_str());
    double best = 0;
    for (auto& a : algorithms) {
      auto& r = by[{a, size}];
      if (r.correct)
        std::printf(" %20.3f", r.completion_ms);
      else
        std::printf(" %20s", "FAILED");
      if (a != "dynamic" && r.correct && (best == 0 || r.completion_ms < best))
        best = r.completion_ms;
    }
    if (has_dyn) {
      auto& d = by[{"dynamic", size}];
      if (best > 0 && d.correct)
        std::printf(" %22.2f", d.completion_ms / best);
      else
        std::printf(" %22s", "-");
    }
    std::printf("\n");
  }
  auto& db = by[{"dynamic", 0}];
  auto& mb = by[{"dissemination", 0}];
  std::printf("barrier: dynamic %.3f ms, dissemination %.3f ms, dynamic/dissemination %.2f",
              db.completion_ms, mb.completion_ms,
              mb.completion_ms > 0 ? db.completion_ms / mb.completion_ms : 0.0);
  if (with_magpie) {
    auto& gb = by[{"magpie", 0}];
    if (gb.correct)
      std::printf(", magpie %.3f ms, dynamic/magpie %.2f", gb.completion_ms,
                  gb.completion_ms > 0 ? db.completion_ms / gb.completion_ms : 0.0);
    else
      std::printf(", magpie FAILED");
  }
  std::printf("\n");

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["experiment"] = "allreduce";
    j["topology"] = topo->name;
    j["seed"] = opt.seed;
    j["clock"] = opt.clock;
    j["processors"] = n;
    j["operation"] = "sum int32";
    j["trees_formed_ms"] = run->formed_ms;
    auto arr = nlohmann::json::array();
    for (auto& r : rows)
      arr.push_back({{"algorithm", r.algorithm},
                     {"size", r.size},
                     {"barrier", r.size == 0},
                     {"completion_ms", r.completion_ms},
                     {"correct", r.correct}});
    j["results"] = arr;
    if (!write_json("allreduce", opt.json_path, j))
      return 2;
  }
  if (!opt.plot_path.empty()) {
    plot_spec p;
    p.title = "int32 sum allreduce on " + topo->name + " (emulated)";
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
    if (!write_plot("allreduce", opt.plot_path, p))
      return 2;
  }
  return rc;
}

void add_bench_allreduce_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<bench_allreduce_options>();
  auto cmd = bench.add_subcommand(
    "allreduce",
    "int32 sum allreduces and barriers: adaptive trees vs MPICH's and MagPIe's algorithms");
  add_bench_options(*cmd, opt->common);
  cmd->add_option("--sizes", opt->sizes, "array sizes in bytes (e.g. 4,16K,1M)")->delimiter(',');
  cmd->add_option("--algorithms", opt->algorithms, "dynamic, recursive_doubling, ring, magpie")
    ->delimiter(',');
  cmd->callback([opt, &action] { action = [opt] { return run_bench_allreduce(*opt); }; });
}

} // namespace banyan::cli

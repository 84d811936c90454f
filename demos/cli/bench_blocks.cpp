#include "bench_blocks.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "bench.hpp"           // measure_broadcast
#include "bench_bandwidth.hpp" // parse_size

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

const char* const tag = "banyan bench blocks: ";
const std::vector<std::string> default_sizes = {"8", "1K", "16K"};
const std::vector<std::string> default_algorithms = {"gather", "scatter", "allgather", "ring"};
const std::vector<std::string> all_algorithms = {
  "gather", "scatter", "allgather", "ring", "alltoall", "pairwise", "magpie_gather",
  "magpie_scatter", "magpie_allgather"};

/// Vnode v's all-to-all contribution: its block of `n` bytes for each of `vnodes` vnodes.
std::vector<std::uint8_t> contribution_of(vnode_id v, vnode_id vnodes, std::size_t n,
                                          std::uint64_t salt) {
  std::vector<std::uint8_t> all(std::size_t{vnodes} * n);
  for (vnode_id w = 0; w < vnodes; ++w)
    for (std::size_t i = 0; i < n; ++i)
      all[w * n + i] = static_cast<std::uint8_t>(v * 29 + w * 17 + i * 3 + salt);
  return all;
}

double ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::vector<std::uint8_t> block_of(vnode_id v, std::size_t n, std::uint64_t salt) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(v * 29 + i * 3 + salt);
  return b;
}

std::string size_label(std::size_t s) {
  if (s >= 1024 && s % 1024 == 0)
    return std::to_string(s / 1024) + " KiB";
  return std::to_string(s) + " B";
}

struct row {
  std::string algorithm;
  std::size_t size = 0;
  double completion_ms = 0;
  bool correct = false;
};

/// Every vnode's count is 1.
bool once_each(const std::map<vnode_id, int>& m, std::size_t n) {
  if (m.size() != n)
    return false;
  for (auto& [v, k] : m)
    if (k != 1)
      return false;
  return true;
}

} // namespace

int run_bench_blocks(const bench_blocks_options& bopt) {
  const auto& opt = bopt.common;
  std::vector<std::size_t> sizes;
  for (auto& s : bopt.sizes.empty() ? default_sizes : bopt.sizes) {
    auto v = parse_size(s);
    if (!v || *v == 0) {
      std::cerr << tag << "bad size '" << s << "' (bytes per vnode, e.g. 8, 1K, 64K)\n";
      return 2;
    }
    sizes.push_back(*v);
  }
  auto algorithms = bopt.algorithms.empty() ? default_algorithms : bopt.algorithms;
  for (auto& a : algorithms)
    if (std::find(all_algorithms.begin(), all_algorithms.end(), a) == all_algorithms.end()) {
      std::cerr << tag << "unknown algorithm '" << a
                << "' (gather, scatter, allgather, ring, alltoall, pairwise, magpie_gather, "
                   "magpie_scatter, magpie_allgather)\n";
      return 2;
    }
  if (auto err = check(opt)) {
    std::cerr << tag << *err << "\n";
    return 2;
  }
  if (!opt.json_path.empty() && !std::ofstream(opt.json_path, std::ios::app)) {
    std::cerr << tag << "cannot write " << opt.json_path << "\n";
    return 2;
  }
  auto run = form_cluster("blocks", opt);
  if (!run)
    return 2;
  auto& c = *run->cluster;
  const auto* topo = &run->topo;
  const auto n = static_cast<vnode_id>(c.vnode_count());
  // MagPIe's cluster-aware tree, rooted at vnode 0's processor (founders: processor 0).
  const auto magpie = magpie_tree(topo->proc_count(), 0, topo->cluster_of());

  std::vector<row> rows;
  int rc = 0;
  std::uint64_t salt = opt.seed;
  for (auto size : sizes)
    for (auto& algo : algorithms) {
      ++salt;
      wait_until_quiet(c, 600s, false);
      row r;
      r.algorithm = algo;
      r.size = size;
      auto values = [size, salt](vnode_id v) { return block_of(v, size, salt); };
      std::string why;
      if (algo == "magpie_gather" || algo == "magpie_allgather") {
        // MagPIe's gather over its cluster-aware tree; its allgather is that gather
        // followed by the broadcast of the whole result down the same tree, one after
        // the other (measured the same way, each on the quiet network, times added).
        auto op = c.gather_static(magpie, 0, size, values);
        if (op && c.run_until_reduced(*op, 600s)) {
          auto rec = c.reduction(*op);
          std::vector<std::uint8_t> want;
          for (vnode_id v = 0; v < n; ++v) {
            auto b = block_of(v, size, salt);
            want.insert(want.end(), b.begin(), b.end());
          }
          if (rec.results.size() == 1 && rec.problems.empty() &&
              once_each(rec.contributions, n) && rec.results[0].value == want) {
            r.completion_ms = ms(rec.results[0].when - rec.started);
            r.correct = true;
          } else {
            why = "the gather was not exact";
          }
          if (r.correct && algo == "magpie_allgather") {
            auto down = measure_broadcast(
              c, [&] { return c.broadcast_static(0, magpie, std::size_t{n} * size); }, 600s, 600s);
            r.correct = down && down->complete;
            r.completion_ms += down ? down->completion_ms : 0;
            if (!r.correct)
              why = "the broadcast did not reach every vnode once";
          }
        } else {
          why = op ? "no result" : op.err().to_string();
        }
      } else if (algo == "gather") {
        auto op = c.gather(0, size, values);
        if (op && c.run_until_reduced(*op, 600s)) {
          auto rec = c.reduction(*op);
          if (rec.results.size() == 1) {
            r.completion_ms = ms(rec.results[0].when - rec.started);
            std::vector<std::uint8_t> want;
            for (vnode_id v = 0; v < n; ++v) {
              auto b = block_of(v, size, salt);
              want.insert(want.end(), b.begin(), b.end());
            }
            r.correct = rec.problems.empty() && once_each(rec.contributions, n) &&
                        rec.results[0].value == want;
          }
        } else {
          why = op ? "no result" : op.err().to_string();
        }
      } else if (algo == "scatter" || algo == "magpie_scatter") {
        const auto bad_before = c.bad_payloads();
        auto id = algo == "scatter" ? c.scatter(0, size) : c.scatter_static(magpie, 0, size);
        if (id && c.run_until_delivered(*id, 600s)) {
          auto rec = c.deliveries(*id);
          duration last{0};
          bool once = rec.delivered.size() == n;
          for (auto& [v, times] : rec.delivered) {
            once = once && times.size() == 1;
            for (auto t : times)
              last = std::max(last, t);
          }
          r.completion_ms = ms(last - rec.started);
          r.correct = once && c.bad_payloads() == bad_before;
        } else {
          why = "not delivered";
        }
      } else if (algo == "alltoall" || algo == "pairwise") {
        auto contributions = [n, size, salt](vnode_id v) {
          return contribution_of(v, n, size, salt);
        };
        auto op = algo == "alltoall" ? c.alltoall(0, size, contributions)
                                     : c.alltoall_pairwise(size, contributions);
        if (op && c.run_until_alltoalled(*op, 600s)) {
          auto rec = c.alltoalled(*op);
          r.completion_ms = ms(rec.last - rec.started);
          r.correct = rec.bad == 0 && rec.problems.empty() && once_each(rec.delivered, n) &&
                      once_each(rec.contributions, n);
        } else {
          why = op ? "not delivered everywhere" : op.err().to_string();
        }
      } else {
        auto op = algo == "allgather" ? c.allgather(0, size, values) : c.allgather_ring(size, values);
        if (op && c.run_until_allgathered(*op, 600s)) {
          auto rec = c.allgathered(*op);
          r.completion_ms = ms(rec.last - rec.started);
          r.correct = rec.bad == 0 && rec.problems.empty() && once_each(rec.delivered, n) &&
                      once_each(rec.contributions, n);
        } else {
          why = op ? "not delivered everywhere" : op.err().to_string();
        }
      }
      if (!r.correct) {
        std::cerr << tag << algo << ", " << size_label(size) << ": "
                  << (why.empty() ? std::string("wrong") : why) << "\n";
        rc = 1;
      }
      if (opt.verbose)
        std::cerr << tag << algo << ", " << size_label(size) << ": " << r.completion_ms << " ms\n";
      rows.push_back(r);
    }

  std::printf("blocks (one block per vnode, all-to-all: per vnode pair; root vnode 0) on %s "
              "(%zu processors, %s time, trees "
              "formed at %.0f ms)\n",
              topo->name.c_str(), topo->proc_count(), opt.clock.c_str(), run->formed_ms);
  std::printf("%-10s", "size");
  for (auto& a : algorithms)
    std::printf(" %14s", (a + "_ms").c_str());
  auto has = [&](const char* a) { return std::count(algorithms.begin(), algorithms.end(), a) > 0; };
  const bool ratio = has("allgather") && has("ring");
  if (ratio)
    std::printf(" %16s", "allgather/ring");
  const bool gather_ratio = has("gather") && has("magpie_gather");
  if (gather_ratio)
    std::printf(" %14s", "gather/magpie");
  const bool scatter_ratio = has("scatter") && has("magpie_scatter");
  if (scatter_ratio)
    std::printf(" %15s", "scatter/magpie");
  const bool allgather_ratio = has("allgather") && has("magpie_allgather");
  if (allgather_ratio)
    std::printf(" %17s", "allgather/magpie");
  const bool a2a_ratio = std::count(algorithms.begin(), algorithms.end(), "alltoall") &&
                         std::count(algorithms.begin(), algorithms.end(), "pairwise");
  if (a2a_ratio)
    std::printf(" %18s", "alltoall/pairwise");
  std::printf("\n");
  std::map<std::pair<std::string, std::size_t>, row> by;
  for (auto& r : rows)
    by[{r.algorithm, r.size}] = r;
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
      auto& d = by[{"allgather", size}];
      auto& g = by[{"ring", size}];
      std::printf(" %16.2f", g.completion_ms > 0 ? d.completion_ms / g.completion_ms : 0.0);
    }
    auto ratio_of = [&](const char* x, const char* y, int width) {
      auto& a = by[{x, size}];
      auto& b = by[{y, size}];
      if (a.correct && b.correct && b.completion_ms > 0)
        std::printf(" %*.2f", width, a.completion_ms / b.completion_ms);
      else
        std::printf(" %*s", width, "-");
    };
    if (gather_ratio)
      ratio_of("gather", "magpie_gather", 14);
    if (scatter_ratio)
      ratio_of("scatter", "magpie_scatter", 15);
    if (allgather_ratio)
      ratio_of("allgather", "magpie_allgather", 17);
    if (a2a_ratio) {
      auto& t = by[{"alltoall", size}];
      auto& p = by[{"pairwise", size}];
      std::printf(" %18.2f", p.completion_ms > 0 ? t.completion_ms / p.completion_ms : 0.0);
    }
    std::printf("\n");
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["experiment"] = "blocks";
    j["topology"] = topo->name;
    j["seed"] = opt.seed;
    j["clock"] = opt.clock;
    j["processors"] = topo->proc_count();
    j["trees_formed_ms"] = run->formed_ms;
    auto arr = nlohmann::json::array();
    for (auto& r : rows)
      arr.push_back({{"algorithm", r.algorithm},
                     {"size", r.size},
                     {"completion_ms", r.completion_ms},
                     {"correct", r.correct}});
    j["results"] = arr;
    if (!write_json("blocks", opt.json_path, j))
      return 2;
  }
  return rc;
}

void add_bench_blocks_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<bench_blocks_options>();
  auto cmd = bench.add_subcommand(
    "blocks", "gather, scatter, allgather and all-to-all of per-vnode blocks; allgather vs "
              "MPICH's ring, all-to-all vs MPICH's pairwise exchange");
  add_bench_options(*cmd, opt->common);
  cmd->add_option("--sizes", opt->sizes,
                  "bytes per vnode (e.g. 8,1K,16K); all-to-all: per vnode pair")->delimiter(',');
  cmd->add_option("--algorithms", opt->algorithms,
                  "gather, scatter, allgather, ring (the default), alltoall, pairwise, "
                  "magpie_gather, magpie_scatter, magpie_allgather")
    ->delimiter(',');
  cmd->callback([opt, &action] { action = [opt] { return run_bench_blocks(*opt); }; });
}

} // namespace banyan::cli

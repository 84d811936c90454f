#include "bench_suite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/static_tree_oracle.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/topology_generator.hpp"
#include "banyan/core/tree_builders.hpp"
#include "bench.hpp"
#include "bench_churn.hpp"
#include "bench_common.hpp"
#include "bench_reduce.hpp"
#include "svg_plot.hpp"
#include "tree_report.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

constexpr const char* tag = "banyan bench suite: ";
const std::vector<std::string> default_topologies = {"paper-3c201", "paper-4c137",
                                                     "paper-3c128", "paper-4c160"};
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// The workload's sizes: full, or --quick.
struct workload {
  std::size_t long_bcast = 64u << 20;
  std::size_t reduce = 4u << 20;
  std::size_t churn_bytes = 4u << 20;
  double leave_ms = 1000, rejoin_ms = 3000, duration_ms = 5000;
  std::uint32_t min_procs = 8, max_procs = 160;
  duration formation_limit = std::chrono::seconds(120); ///< emulated time for trees to form
  bool formation_only = false;
  double background_s = 0; ///< background measurement period (0: off)
  bool on_demand = false;  ///< trees on demand: those of the roots measured only
  bool lan_search = true;
};

workload workload_of(bool quick) {
  workload w;
  if (quick) {
    w.long_bcast = 4u << 20;
    w.reduce = 1u << 20;
    w.churn_bytes = 1u << 20;
    w.rejoin_ms = 2000;
    w.duration_ms = 3000;
    w.min_procs = 6;
    w.max_procs = 16;
  }
  return w;
}

/// One measured quantity: times in ms, the references it is compared with.
struct metric {
  std::string name;
  double dynamic_ms = nan;
  double static_ms = nan; ///< NaN: no static reference (churn)
  std::string static_name;
  double oracle_ms = nan;
  /// The single-tree bound (broadcast_tree_ceiling / reduce_tree_ceiling); NaN where the
  /// metric is not one collective down or up one tree (1-byte: the bound is the oracle;
  /// churn: broadcasts in flight at once may follow different trees)
  double tree_oracle_ms = nan;
  double vs_static() const { return dynamic_ms / static_ms; }
  double vs_oracle() const { return dynamic_ms / oracle_ms; }
  double vs_tree_oracle() const { return dynamic_ms / tree_oracle_ms; }
};

const std::vector<std::string> metric_names = {"1B root 0", "1B small", "long bcast",
                                               "long reduce", "churn"};

struct entry {
  std::string source; ///< "builtin", a file, or "generated seed S"
  topology topo;
};

struct row {
  std::string name, source;
  std::size_t procs = 0, clusters = 0;
  int levels = 0;
  double formed_ms = 0;
  bool settled = false;
  double probes_per_proc = 0;
  kind_stats lat, bw; ///< the trees as formed (entries per group among them)
  std::vector<metric> metrics;
  std::optional<double> leave_ms, rejoin_ms; ///< churn: back to steady (nothing: not back)
  std::size_t churn_lost = 0, churn_duplicates = 0;
  std::vector<std::string> problems; ///< collectives that did not complete correctly
  double wall_s = 0;
};

/// The first processor of the smallest top-level group that does not hold processor 0
/// (smallest by processors, then declaration order); the last processor when there is
/// one group.
proc_id small_root(const topology& t) {
  int best = -1;
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const auto& gr = t.groups[g];
    if (gr.parent >= 0 || gr.first_proc == 0)
      continue;
    if (best < 0 || gr.proc_count < t.groups[static_cast<std::size_t>(best)].proc_count)
      best = static_cast<int>(g);
  }
  return best < 0 ? static_cast<proc_id>(t.proc_count() - 1)
                  : t.groups[static_cast<std::size_t>(best)].first_proc;
}

/// Everything measured on one topology. `say` gets progress lines.
row measure(const entry& e, const workload& w, const std::function<void(const std::string&)>& say) {
  const auto wall0 = std::chrono::steady_clock::now();
  const auto& topo = e.topo;
  const auto n = topo.proc_count();
  row r;
  r.name = topo.name;
  r.source = e.source;
  r.procs = n;
  for (const auto& g : topo.groups) {
    r.clusters += g.parent < 0;
    r.levels = std::max(r.levels, g.depth + 2);
  }

  say("oracles");
  const proc_id roots[2] = {0, small_root(topo)};
  static_tree_result statics[2] = {best_static_tree(topo, roots[0], 1),
                                   best_static_tree(topo, roots[1], 1)};
  const auto bcast_ceiling = broadcast_ceiling(topo, 0).ceiling;
  const auto red_ceiling = reduce_ceiling(topo, 0).ceiling;
  const auto bcast_tree_ceiling = broadcast_tree_ceiling(topo, 0).ceiling;
  const auto red_tree_ceiling = reduce_tree_ceiling(topo, 0).ceiling;
  auto bytes_over = [](std::size_t bytes, rate c) {
    return std::isinf(c) ? 0.0 : static_cast<double>(bytes) / c * 1000;
  };

  say("forming trees");
  actors::cluster_config cfg;
  cfg.topo = topo;
  cfg.seed = 1;
  cfg.clock = actors::clock_mode::virtual_time;
  cfg.sup.background_period = from_ms(w.background_s * 1000);
  std::vector<proc_id> open; // on demand: the roots measured, opened at the start
  if (w.on_demand) {
    cfg.sup.tree_set = tree_set_mode::on_demand;
    cfg.sup.retire_after = duration{0};
    cfg.sup.lan_search = w.lan_search;
    open = {roots[0], roots[1]};
    std::sort(open.begin(), open.end());
    open.erase(std::unique(open.begin(), open.end()), open.end());
  }
  actors::emulated_cluster c(cfg);
  c.start();
  for (auto root : open)
    c.prepare(root);
  // Whole seconds of emulated time until quiet or past the limit (at most a second over).
  for (const auto deadline = c.elapsed() + w.formation_limit;;) {
    r.settled = c.run_until_quiet(1s);
    if (r.settled || c.elapsed() >= deadline)
      break;
  }
  r.formed_ms = to_ms(c.last_change());
  r.probes_per_proc = static_cast<double>(c.probes()) / static_cast<double>(n);
  r.lat = summarize(c, tree_kind::latency, open);
  r.bw = summarize(c, tree_kind::bandwidth, open);
  if (r.lat.invalid + r.bw.invalid > 0)
    r.problems.push_back("invalid trees after formation: " +
                         (r.lat.invalid ? r.lat.first_problem : r.bw.first_problem));
  if (!r.settled) {
    // Every measurement waits for a quiet cluster first: nothing to measure.
    r.problems.push_back("trees still changing after " +
                         std::to_string(static_cast<long>(to_ms(w.formation_limit))) +
                         " ms (emulated); nothing measured");
    for (const auto& name : metric_names) {
      metric m;
      m.name = name;
      r.metrics.push_back(m);
    }
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    say("trees still changing at the formation limit");
    return r;
  }
  say("trees formed at " + std::to_string(static_cast<long>(r.formed_ms)) + " ms");
  if (w.formation_only) {
    for (const auto& name : metric_names) {
      metric m;
      m.name = name;
      r.metrics.push_back(m);
    }
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }

  auto bcast = [&](const std::string& what,
                   const std::function<std::optional<wire::collective_id>()>& start) {
    auto m = measure_broadcast(c, start, 600s, 3600s);
    if (!m || !m->complete) {
      r.problems.push_back(what + (m ? ": " + std::to_string(m->reached) + " of " +
                                         std::to_string(n) + " reached, " +
                                         std::to_string(m->duplicates) + " duplicates"
                                     : ": not started"));
      return nan;
    }
    return m->completion_ms;
  };
  auto keep_best = [](metric& m, const std::string& name, double t) {
    if (!std::isnan(t) && (std::isnan(m.static_ms) || t < m.static_ms)) {
      m.static_ms = t;
      m.static_name = name;
    }
  };

  for (int k = 0; k < 2; ++k) {
    const auto root = roots[k];
    metric m;
    m.name = metric_names[static_cast<std::size_t>(k)];
    say("1-byte broadcasts from " + std::to_string(root));
    m.dynamic_ms = bcast("dynamic 1B from " + std::to_string(root),
                         [&] { return c.broadcast(root, 1); });
    for (const auto& cand : statics[k].candidates)
      keep_best(m, cand.name,
                bcast(cand.name + " 1B from " + std::to_string(root),
                      [&] { return c.broadcast_static(root, cand.t, 1); }));
    m.oracle_ms = short_message_bound(topo, root);
    r.metrics.push_back(m);
  }

  {
    metric m;
    m.name = metric_names[2];
    const auto b = w.long_bcast;
    say("long broadcasts (" + std::to_string(b >> 20) + " MiB)");
    m.dynamic_ms = bcast("dynamic long", [&] { return c.broadcast(0, b); });
    const auto magpie = magpie_tree(n, 0, topo.cluster_of());
    const auto chain = chain_tree(widest_chain(bandwidth_matrix(topo), 0));
    keep_best(m, "magpie", bcast("magpie long", [&] { return c.broadcast_static(0, magpie, b); }));
    keep_best(m, "list", bcast("list long", [&] { return c.broadcast_static(0, chain, b); }));
    keep_best(m, "mpich", bcast("mpich long", [&] {
                return b < actors::emulated_cluster::scatter_allgather_threshold()
                         ? c.broadcast_static(0, binomial_tree(n, 0), b)
                         : c.broadcast_scatter_allgather(0, b);
              }));
    m.oracle_ms = std::max(bytes_over(b, bcast_ceiling), short_message_bound(topo, 0));
    m.tree_oracle_ms = std::max(bytes_over(b, bcast_tree_ceiling), short_message_bound(topo, 0));
    r.metrics.push_back(m);
  }

  {
    metric m;
    m.name = metric_names[3];
    const auto bytes = w.reduce;
    const std::size_t count = bytes / 4;
    say("reductions (" + std::to_string(bytes >> 20) + " MiB)");
    const auto vnodes = static_cast<vnode_id>(c.vnode_count());
    std::uint64_t salt = 0;
    auto reduce = [&](const std::string& what,
                      const std::function<expected<std::uint64_t>(const actors::reduction_args&)>& start) {
      actors::reduction_args a;
      a.root = 0;
      a.fn = {reduce_kind::sum, element_type::int32};
      a.count = count;
      a.values = int32_contributions(count, ++salt);
      wait_until_quiet(c, 600s, false);
      auto op = start(a);
      if (!op) {
        r.problems.push_back(what + ": " + op.err().to_string());
        return nan;
      }
      bool done = c.run_until_reduced(*op, 3600s);
      auto rec = c.reduction(*op);
      if (!done || !reduced_exactly_once(rec, vnodes, int32_true_sum(vnodes, count, salt))) {
        r.problems.push_back(what + ": " + (done ? "wrong result" : "no result"));
        return nan;
      }
      return to_ms(rec.results.front().when - rec.started);
    };
    m.dynamic_ms = reduce("dynamic reduce", [&](const auto& a) { return c.reduce(a); });
    keep_best(m, "mpich", reduce("mpich reduce", [&](const auto& a) {
                return c.reduce_static(binomial_tree(n, 0), a);
              }));
    keep_best(m, "magpie", reduce("magpie reduce", [&](const auto& a) {
                return c.reduce_static(magpie_tree(n, 0, topo.cluster_of()), a);
              }));
    m.oracle_ms = std::max(bytes_over(bytes, red_ceiling), short_message_bound(topo, 0, true));
    m.tree_oracle_ms =
      std::max(bytes_over(bytes, red_tree_ceiling), short_message_bound(topo, 0, true));
    r.metrics.push_back(m);
  }

  if (w.on_demand) {
    metric m; // churn runs a cluster of its own, every root's trees: not measured here
    m.name = metric_names[4];
    r.metrics.push_back(m);
  } else {
    metric m;
    m.name = metric_names[4];
    say("churn");
    churn_options o;
    o.topology = topo.name;
    o.topo = topo;
    o.seed = 1;
    o.leave_at_ms = w.leave_ms;
    o.rejoin_at_ms = w.rejoin_ms;
    o.duration_ms = w.duration_ms;
    o.message_bytes = w.churn_bytes;
    o.background_s = w.background_s;
    auto out = run_churn(o);
    if (auto* err = std::get_if<std::string>(&out)) {
      r.problems.push_back("churn: " + *err);
    } else {
      auto& cr = std::get<churn_result>(out);
      // The k broadcasts complete by the leave, all started at 0 or later, had reached
      // every vnode by the last one's completion T: each receiver took k messages in T,
      // so T / k >= bytes / ceiling (a rate over a window could catch a burst instead).
      std::size_t k = 0;
      double last = 0;
      for (const auto& b : cr.per_broadcast)
        if (b.complete && b.start_ms >= 0 && b.done_ms <= w.leave_ms) {
          ++k;
          last = std::max(last, b.done_ms);
        }
      if (k > 0)
        m.dynamic_ms = last / static_cast<double>(k);
      m.oracle_ms = bytes_over(w.churn_bytes, bcast_ceiling);
      if (cr.events.size() >= 2) {
        r.leave_ms = cr.events[0].restabilize_ms;
        r.rejoin_ms = cr.events[1].restabilize_ms;
      }
      r.churn_lost = cr.lost;
      r.churn_duplicates = cr.duplicates;
      if (cr.lost || cr.duplicates)
        r.problems.push_back("churn: " + std::to_string(cr.lost) + " lost, " +
                             std::to_string(cr.duplicates) + " duplicates");
    }
    r.metrics.push_back(m);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

double median(std::vector<double> v) {
  if (v.empty())
    return nan;
  std::sort(v.begin(), v.end());
  auto k = v.size() / 2;
  return v.size() % 2 ? v[k] : (v[k - 1] + v[k]) / 2;
}

double worst(const std::vector<double>& v) {
  return v.empty() ? nan : *std::max_element(v.begin(), v.end());
}

nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

std::string ratio_text(double v) {
  if (std::isnan(v))
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

} // namespace

int run_bench_suite(const suite_options& opt) {
  if (!(opt.formation_limit_s > 0)) {
    std::cerr << tag << "--formation-limit must be positive\n";
    return 2;
  }
  if (opt.jobs == 0) {
    std::cerr << tag << "--jobs must be at least 1\n";
    return 2;
  }
  if (!(opt.background_s >= 0)) {
    std::cerr << tag << "--background must be >= 0 (0: off)\n";
    return 2;
  }
  if (!opt.plot_path.empty() &&
      (opt.plot_path.size() < 4 || opt.plot_path.substr(opt.plot_path.size() - 4) != ".svg")) {
    std::cerr << tag << "--plot writes SVG: give a file name ending in .svg\n";
    return 2;
  }
  for (auto* path : {&opt.json_path, &opt.plot_path})
    if (!path->empty() && !std::ofstream(*path, std::ios::app)) {
      std::cerr << tag << "cannot write " << *path << "\n";
      return 2;
    }
  auto w = workload_of(opt.quick);
  w.formation_limit = std::chrono::duration_cast<duration>(
    std::chrono::duration<double>(opt.formation_limit_s));
  w.formation_only = opt.formation_only;
  w.background_s = opt.background_s;
  w.on_demand = opt.on_demand;
  w.lan_search = opt.lan_search;
  std::vector<entry> entries;
  auto names = opt.topologies;
  if (names.empty() && !opt.quick)
    names = default_topologies;
  for (const auto& name : names) {
    if (name == "none")
      continue;
    auto t = load_topology(name);
    if (!t) {
      std::cerr << tag << t.err().to_string() << "\n";
      return 2;
    }
    entries.push_back({builtin_topology_text(name).empty() ? name : "builtin", *t});
  }
  for (std::size_t i = 0; i < opt.generated; ++i) {
    topology_generator_options g;
    g.seed = opt.seed + i;
    g.min_procs = w.min_procs;
    g.max_procs = w.max_procs;
    auto t = generate_topology(g);
    if (!t) {
      std::cerr << tag << "generated seed " << g.seed << ": " << t.err().to_string() << "\n";
      return 2;
    }
    entries.push_back({"generated seed " + std::to_string(g.seed), *t});
  }
  if (entries.empty()) {
    std::cerr << tag << "no topologies (--generated 0 and --topologies none)\n";
    return 2;
  }

  // Topologies on `jobs` threads, each its own emulated cluster; rows come out in order.
  std::vector<std::optional<row>> done(entries.size());
  std::mutex mtx;
  std::condition_variable cv;
  std::size_t next = 0;
  auto work = [&] {
    for (;;) {
      std::size_t k;
      {
        std::lock_guard<std::mutex> lk(mtx);
        if (next == entries.size())
          return;
        k = next++;
      }
      auto say = [&, k](const std::string& s) {
        if (!opt.verbose)
          return;
        std::lock_guard<std::mutex> lk(mtx);
        std::cerr << tag << "[" << k + 1 << "/" << entries.size() << "] "
                  << entries[k].topo.name << ": " << s << std::endl;
      };
      auto r = measure(entries[k], w, say);
      std::lock_guard<std::mutex> lk(mtx);
      done[k] = std::move(r);
      cv.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < std::min(opt.jobs, entries.size()); ++i)
    workers.emplace_back(work);

  std::printf("bench suite: %zu topologies, emulated network, virtual time%s; ratios are "
              "times, dynamic / best static and dynamic / oracle (above 1: banyan slower)\n",
              entries.size(), opt.quick ? " (quick)" : "");
  std::printf("%-22s %5s %3s %9s %6s %9s", "topology", "procs", "lvl", "formed_ms", "probes",
              "once_l/b");
  for (const auto& m : metric_names)
    std::printf(" %13s", m.c_str());
  std::printf(" %9s %9s\n", "leave_ms", "rejoin_ms");
  std::vector<row> rows;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    {
      std::unique_lock<std::mutex> lk(mtx);
      cv.wait(lk, [&] { return done[k].has_value(); });
      rows.push_back(std::move(*done[k]));
    }
    const auto& r = rows.back();
    std::printf("%-22s %5zu %3d %9.0f %6.0f %4zu/%-4zu", r.name.c_str(), r.procs, r.levels,
                r.formed_ms, r.probes_per_proc, r.lat.entry_minimal, r.bw.entry_minimal);
    for (const auto& m : r.metrics)
      std::printf(" %13s", (ratio_text(m.vs_static()) + "/" + ratio_text(m.vs_oracle())).c_str());
    auto back = [&](const std::optional<double>& v) {
      if (w.on_demand)
        return std::string("-"); // churn not measured
      return v ? std::to_string(static_cast<long>(*v)) : std::string("not back");
    };
    std::printf(" %9s %9s\n", back(r.leave_ms).c_str(), back(r.rejoin_ms).c_str());
    for (const auto& p : r.problems)
      std::fprintf(stderr, "%s%s: %s\n", tag, r.name.c_str(), p.c_str());
    std::fflush(stdout);
  }
  for (auto& t : workers)
    t.join();

  std::printf("\n%-13s %15s %15s %15s %15s %13s %13s\n", "metric", "median/static",
              "worst/static", "median/oracle", "worst/oracle", "median/tree", "worst/tree");
  nlohmann::json summary = nlohmann::json::object();
  for (std::size_t i = 0; i < metric_names.size(); ++i) {
    std::vector<double> vs, vo, vt;
    for (const auto& r : rows) {
      const auto& m = r.metrics[i];
      if (std::isfinite(m.vs_static()))
        vs.push_back(m.vs_static());
      if (std::isfinite(m.vs_oracle()))
        vo.push_back(m.vs_oracle());
      if (std::isfinite(m.vs_tree_oracle()))
        vt.push_back(m.vs_tree_oracle());
    }
    std::printf("%-13s %15s %15s %15s %15s %13s %13s\n", metric_names[i].c_str(),
                ratio_text(median(vs)).c_str(), ratio_text(worst(vs)).c_str(),
                ratio_text(median(vo)).c_str(), ratio_text(worst(vo)).c_str(),
                ratio_text(median(vt)).c_str(), ratio_text(worst(vt)).c_str());
    summary[metric_names[i]] = {{"median_vs_static", number(median(vs))},
                                {"worst_vs_static", number(worst(vs))},
                                {"median_vs_oracle", number(median(vo))},
                                {"worst_vs_oracle", number(worst(vo))},
                                {"median_vs_tree_oracle", number(median(vt))},
                                {"worst_vs_tree_oracle", number(worst(vt))}};
  }
  // Formation: trees entering every group at most once, probes per processor.
  std::size_t trees = 0, lat_once = 0, bw_once = 0, settled = 0;
  std::vector<double> probes;
  for (const auto& r : rows) {
    trees += r.lat.trees;
    lat_once += r.lat.entry_minimal;
    bw_once += r.bw.entry_minimal;
    settled += r.settled;
    probes.push_back(r.probes_per_proc);
  }
  auto share = [&](std::size_t k) {
    return trees ? 100.0 * static_cast<double>(k) / static_cast<double>(trees) : nan;
  };
  std::printf("\nformation: %zu of %zu topologies settled; trees entering every group once: "
              "latency %.1f%%, bandwidth %.1f%% (of %zu each); probes per processor median "
              "%.0f, worst %.0f\n",
              settled, rows.size(), share(lat_once), share(bw_once), trees, median(probes),
              worst(probes));
  summary["formation"] = {{"settled", settled},
                          {"trees_per_kind", trees},
                          {"latency_entry_minimal", lat_once},
                          {"bandwidth_entry_minimal", bw_once},
                          {"probes_per_proc_median", number(median(probes))},
                          {"probes_per_proc_worst", number(worst(probes))}};
  bool ok = true;
  for (const auto& r : rows)
    ok = ok && r.problems.empty();

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["experiment"] = "suite";
    j["quick"] = opt.quick;
    j["seed"] = opt.seed;
    j["generated"] = opt.generated;
    j["tree_set"] = opt.on_demand ? "on-demand" : "all-roots";
    if (opt.on_demand)
      j["lan_search"] = opt.lan_search;
    j["sizes"] = {{"long_bcast", w.long_bcast}, {"reduce", w.reduce}, {"churn", w.churn_bytes}};
    auto arr = nlohmann::json::array();
    for (const auto& r : rows) {
      auto ms = nlohmann::json::array();
      for (const auto& m : r.metrics) {
        nlohmann::json x = {{"metric", m.name},
                            {"dynamic_ms", number(m.dynamic_ms)},
                            {"oracle_ms", number(m.oracle_ms)},
                            {"vs_oracle", number(m.vs_oracle())}};
        if (!std::isnan(m.tree_oracle_ms)) {
          x["tree_oracle_ms"] = number(m.tree_oracle_ms);
          x["vs_tree_oracle"] = number(m.vs_tree_oracle());
        }
        if (!std::isnan(m.static_ms) || !m.static_name.empty()) {
          x["best_static"] = m.static_name;
          x["best_static_ms"] = number(m.static_ms);
          x["vs_static"] = number(m.vs_static());
        }
        ms.push_back(x);
      }
      arr.push_back({{"topology", r.name},
                     {"source", r.source},
                     {"procs", r.procs},
                     {"top_groups", r.clusters},
                     {"levels", r.levels},
                     {"trees_formed_ms", r.formed_ms},
                     {"trees_settled", r.settled},
                     {"probes_per_proc", r.probes_per_proc},
                     {"latency_trees", to_json(r.lat)},
                     {"bandwidth_trees", to_json(r.bw)},
                     {"metrics", ms},
                     {"churn_leave_ms", r.leave_ms ? nlohmann::json(*r.leave_ms) : nullptr},
                     {"churn_rejoin_ms", r.rejoin_ms ? nlohmann::json(*r.rejoin_ms) : nullptr},
                     {"problems", r.problems},
                     {"wall_s", r.wall_s}});
    }
    j["topologies"] = arr;
    j["summary"] = summary;
    if (!write_json("suite", opt.json_path, j))
      return 2;
  }
  if (!opt.plot_path.empty()) {
    plot_spec p;
    p.title = "banyan against best static trees and oracles (" + std::to_string(rows.size()) +
              " topologies)";
    p.x_label = "1: 1B root 0, 2: 1B small cluster, 3: long broadcast, 4: long reduction, 5: churn";
    p.y_label = "time ratio, dynamic / reference (log)";
    p.log_y = true;
    p.draw = plot_spec::style::points;
    plot_series vs{"dynamic / best static", {}, {}}, vo{"dynamic / oracle", {}, {}},
      vt{"dynamic / tree ceiling", {}, {}};
    for (std::size_t k = 0; k < rows.size(); ++k) {
      // Dots of one metric spread over [-0.3, 0.3] around it, a topology each.
      const double spread =
        rows.size() > 1 ? 0.6 * static_cast<double>(k) / static_cast<double>(rows.size() - 1) - 0.3 : 0;
      for (std::size_t i = 0; i < rows[k].metrics.size(); ++i) {
        const auto& m = rows[k].metrics[i];
        const double x = static_cast<double>(i + 1) + spread;
        if (std::isfinite(m.vs_static())) {
          vs.x.push_back(x - 0.05);
          vs.y.push_back(m.vs_static());
        }
        if (std::isfinite(m.vs_oracle())) {
          vo.x.push_back(x + 0.05);
          vo.y.push_back(m.vs_oracle());
        }
        if (std::isfinite(m.vs_tree_oracle())) {
          vt.x.push_back(x + 0.15);
          vt.y.push_back(m.vs_tree_oracle());
        }
      }
    }
    p.series = {vs, vo, vt};
    if (!write_plot("suite", opt.plot_path, p))
      return 2;
  }
  return ok ? 0 : 1;
}

void add_bench_suite_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<suite_options>();
  auto cmd = bench.add_subcommand(
    "suite", "adaptive trees vs best static trees and oracles over paper and generated topologies");
  cmd->add_option("--generated", opt->generated, "generated topologies (default 20)");
  cmd->add_option("--seed", opt->seed, "generator seed of the first one (default 1)");
  cmd->add_option("--topologies", opt->topologies,
                  "builtins or files (default: the four paper-* grids; none: no builtin)")
    ->delimiter(',');
  cmd->add_flag("--quick", opt->quick, "small generated topologies and messages, no builtins");
  cmd->add_flag("--formation-only", opt->formation_only,
                "form the trees and report them (entries per group, probes), nothing else");
  cmd->add_option("--jobs", opt->jobs, "topologies at a time, one thread each (1)");
  cmd->add_option("--formation-limit", opt->formation_limit_s,
                  "emulated seconds for the trees to stop changing; a topology whose trees "
                  "still change then is reported and not measured (120)");
  cmd->add_option("--background", opt->background_s,
                  "background measurement period of banyan's trees once stable, churn "
                  "included (0: off)")
    ->type_name("SECONDS");
  cmd->add_option_function<std::string>(
       "--tree-set",
       [opt](const std::string& v) { opt->on_demand = v == "on-demand"; },
       "all-roots (default) or on-demand: only the roots measured have trees, opened at "
       "the start (churn not measured)")
    ->check(CLI::IsMember({"all-roots", "on-demand"}));
  cmd->add_flag_function(
    "--no-lan-search", [opt](std::int64_t) { opt->lan_search = false; },
    "with --tree-set on-demand: extra measurements count from the start "
    "(supervisor_config::lan_search off)");
  cmd->add_option("--json", opt->json_path, "write the results as JSON");
  cmd->add_option("--plot", opt->plot_path, "a dot per topology and metric, as SVG");
  cmd->add_flag_function(
    "-q,--quiet", [opt](std::int64_t) { opt->verbose = false; }, "no progress lines on stderr");
  cmd->callback([opt, &action] { action = [opt] { return run_bench_suite(*opt); }; });
}

} // namespace banyan::cli

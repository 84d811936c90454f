#include "plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "banyan/core/latency_matrix.hpp"
#include "banyan/core/static_tree_oracle.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"

namespace banyan::cli {

namespace {

constexpr double bytes_per_mbit = 1e6 / 8;

/// One line on stderr, exit code 2.
int fail(const std::string& what) {
  std::cerr << "banyan plan: " << what << "\n";
  return 2;
}

std::string label(const std::vector<std::string>& names, proc_id p) {
  return p < names.size() ? names[p] : std::to_string(p);
}

/// "12.5", "600", "0.05": milliseconds without trailing zeros.
std::string ms(double v) {
  if (std::isinf(v))
    return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.')
    s.pop_back();
  return s;
}

/// The tree drawn with ASCII branches, children in id order, each with its arrival:
///
///   A
///   +-- B  400 ms
///   |   `-- C  600 ms
///   `-- H  150 ms
void draw(std::ostream& out, const tree& t, const std::vector<std::string>& names,
          const std::vector<double>& arrival) {
  auto kids = t.children();
  out << label(names, t.root()) << "\n";
  std::function<void(proc_id, const std::string&)> below = [&](proc_id p,
                                                              const std::string& prefix) {
    for (std::size_t i = 0; i < kids[p].size(); ++i) {
      auto c = kids[p][i];
      bool last = i + 1 == kids[p].size();
      out << prefix << (last ? "`-- " : "+-- ") << label(names, c) << "  " << ms(arrival[c])
          << " ms\n";
      below(c, prefix + (last ? "    " : "|   "));
    }
  };
  below(t.root(), "");
}

std::optional<proc_id> find_root(const std::string& text, const std::vector<std::string>& names,
                                 std::size_t n) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text)
      return static_cast<proc_id>(i);
  try {
    std::size_t used = 0;
    auto v = std::stoul(text, &used);
    if (used == text.size() && v < n)
      return static_cast<proc_id>(v);
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// Each of the first `n` processors' parent in `t`, -1 for the root: a tree in the JSON.
std::vector<long long> parent_list(const tree& t, std::size_t n) {
  std::vector<long long> parent;
  for (proc_id p = 0; p < n; ++p) {
    auto q = t.parent(p);
    parent.push_back(q == no_proc ? -1 : static_cast<long long>(q));
  }
  return parent;
}

/// Writes `j` to `path` and says so in `out`: 0, or `fail`'s code when it cannot.
int write_json(const nlohmann::json& j, const std::string& path, std::ostream& out) {
  std::ofstream f(path);
  if (!f || !(f << j.dump(2) << "\n"))
    return fail("cannot write '" + path + "'");
  out << "wrote " << path << "\n";
  return 0;
}

cost_matrix scaled(cost_matrix m, double factor) {
  for (auto& row : m)
    for (auto& v : row)
      v *= factor;
  return m;
}

/// `banyan plan --topology T --root R`: the oracles of a topology (docs/plan.md).
int run_plan_topology(const plan_options& opt) {
  if (!opt.matrix.empty() || !opt.algo.empty())
    return fail("--topology prints the topology's oracles; it takes no --matrix or --algo");
  if (opt.root.empty())
    return fail("--root R is required (a processor id)");
  auto topo = load_topology(opt.topology);
  if (!topo)
    return fail(topo.err().to_string());
  const auto n = topo->proc_count();
  auto root = find_root(opt.root, {}, n);
  if (!root)
    return fail("root '" + opt.root + "' is not a processor id below " + std::to_string(n));

  std::cerr << "banyan plan: " << topo->name << ": searching static trees\n";
  auto lat = latency_matrix(*topo);
  const double postal = farthest_shortest_path(lat, *root);
  const double bound = short_message_bound(*topo, *root);
  const double reduce_bound = short_message_bound(*topo, *root, true);
  auto statics = best_static_tree(*topo, *root, opt.seed);
  std::cerr << "banyan plan: " << topo->name << ": maximum flows\n";
  auto bcast = broadcast_ceiling(*topo, *root);
  auto red = reduce_ceiling(*topo, *root);
  auto bcast_tree = broadcast_tree_ceiling(*topo, *root);
  auto red_tree = reduce_tree_ceiling(*topo, *root);
  const double mib64 = 64.0 * 1024 * 1024;

  std::ostringstream out;
  out << "oracles for processor " << *root << " of " << topo->name << " (" << n
      << " processors, send overhead " << format_duration(topo->send_overhead) << ")\n\n";
  out << "1-byte broadcast lower bound: " << ms(bound)
      << " ms (shortest paths, each hop one-way latency + send overhead)\n";
  out << "  without send overhead:      " << ms(postal) << " ms (shortest one-way paths)\n";
  out << "1-byte reduction lower bound: " << ms(reduce_bound) << " ms (the same, towards "
      << *root << ")\n\n";
  out << "static trees, completion under the send-overhead model (ms):\n";
  for (std::size_t i = 0; i < statics.candidates.size(); ++i) {
    const auto& c = statics.candidates[i];
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %12s%s\n", c.name.c_str(), ms(c.completion_ms).c_str(),
                  i == statics.best ? "  <- best" : "");
    out << line;
  }
  out << "\n";
  auto rate_line = [&](const char* what, const stream_ceiling& c, const char* how) {
    if (std::isinf(c.ceiling)) {
      out << what << ": unlimited (no finite capacity on any cut)\n";
      return;
    }
    out << what << ": " << ms(c.ceiling / 1e6) << " MB/s (" << how << " processor "
        << c.bottleneck << "); 64 MiB takes at least " << ms(mib64 / c.ceiling * 1000)
        << " ms\n";
  };
  rate_line("long-broadcast ceiling", bcast, "maximum flow to");
  rate_line("long-reduction ceiling", red, "maximum flow from");
  rate_line("one tree, broadcast    ", bcast_tree, "widest path to");
  rate_line("one tree, reduction    ", red_tree, "widest path from");

  // Pipelined static trees against the ceiling: each edge carries the whole stream.
  const cost_matrix bw = bandwidth_matrix(*topo);
  std::vector<std::pair<std::string, tree>> pipelined{
    {"flat", flat_tree(n, *root)},
    {"binomial", binomial_tree(n, *root)},
    {"magpie", magpie_tree(n, *root, topo->cluster_of())},
    {"multilevel", multilevel_tree(*root, group_levels(*topo))},
    {"widest chain", chain_tree(widest_chain(bw, *root))},
    {"best static (1 byte)", statics.winner().t}};
  out << "\npipelined static trees, steady rate through the resources (MB/s, no CPU):\n";
  auto tree_rates = nlohmann::json::array();
  std::size_t widest = 0;
  std::vector<double> rates;
  for (std::size_t i = 0; i < pipelined.size(); ++i) {
    rates.push_back(tree_stream_rate(*topo, pipelined[i].second));
    if (rates[i] > rates[widest])
      widest = i;
  }
  for (std::size_t i = 0; i < pipelined.size(); ++i) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-24s %12s%s\n", pipelined[i].first.c_str(),
                  std::isinf(rates[i]) ? "unlimited" : ms(rates[i] / 1e6).c_str(),
                  i == widest ? "  <- widest" : "");
    out << line;
    tree_rates.push_back({{"tree", pipelined[i].first},
                          {"bytes_per_s", std::isinf(rates[i]) ? -1.0 : rates[i]}});
  }

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["topology"] = topo->name;
    j["root"] = *root;
    j["procs"] = n;
    j["short_bound_ms"] = bound;
    j["postal_bound_ms"] = postal;
    j["reduce_short_bound_ms"] = reduce_bound;
    auto cands = nlohmann::json::array();
    for (const auto& c : statics.candidates)
      cands.push_back({{"name", c.name}, {"completion_ms", c.completion_ms}});
    j["static"] = {{"winner", statics.winner().name},
                   {"completion_ms", statics.winner().completion_ms},
                   {"parent", parent_list(statics.winner().t, n)},
                   {"candidates", cands}};
    auto rate_json = [](const stream_ceiling& c) {
      return nlohmann::json{{"bytes_per_s", std::isinf(c.ceiling) ? -1.0 : c.ceiling},
                            {"bottleneck", c.bottleneck}};
    };
    j["broadcast_ceiling"] = rate_json(bcast);
    j["tree_rates"] = tree_rates;
    j["reduce_ceiling"] = rate_json(red);
    j["broadcast_tree_ceiling"] = rate_json(bcast_tree);
    j["reduce_tree_ceiling"] = rate_json(red_tree);
    if (int rc = write_json(j, opt.json_path, out))
      return rc;
  }
  std::cout << out.str();
  return 0;
}

} // namespace

const std::vector<std::string>& plan_algorithms() {
  static const std::vector<std::string> all{"binomial", "flat", "mst", "hlot", "magpie",
                                            "multilevel", "sa", "adaptive", "list"};
  return all;
}

int run_plan(const plan_options& opt) {
  if (!opt.topology.empty())
    return run_plan_topology(opt);
  if (opt.matrix.empty())
    return fail("--matrix FILE.csv (or --topology T) is required");
  if (opt.algo.empty())
    return fail("--algo is required (one of binomial, flat, mst, hlot, magpie, multilevel, "
                "sa, adaptive, list)");
  const auto& algos = plan_algorithms();
  if (std::find(algos.begin(), algos.end(), opt.algo) == algos.end())
    return fail("unknown algorithm '" + opt.algo +
                "' (one of binomial, flat, mst, hlot, magpie, multilevel, sa, adaptive, list)");
  if (opt.root.empty())
    return fail("--root R is required (a processor id or a name from the matrix header)");

  auto loaded = load_matrix_csv(opt.matrix);
  if (!loaded)
    return fail(loaded.err().to_string());
  const auto& names = loaded->names;
  const auto& latency = loaded->values;
  const auto n = latency.size();
  auto root = find_root(opt.root, names, n);
  if (!root)
    return fail("root '" + opt.root + "' is neither a processor name nor an id below " +
                std::to_string(n));

  cost_matrix bandwidth; // bytes per second
  if (!opt.bandwidth.empty()) {
    auto bw = load_matrix_csv(opt.bandwidth);
    if (!bw)
      return fail(bw.err().to_string());
    if (bw->values.size() != n)
      return fail(opt.bandwidth + ": " + std::to_string(bw->values.size()) +
                  " processors, but the latency matrix has " + std::to_string(n));
    if (!bw->names.empty() && !names.empty() && bw->names != names)
      return fail(opt.bandwidth + ": processor names differ from the latency matrix's");
    bandwidth = scaled(bw->values, bytes_per_mbit);
  }
  if (opt.algo == "list" && bandwidth.empty())
    return fail("--algo list needs --bandwidth FILE.csv (Mbit/s)");
  if (opt.message_bytes < 0)
    return fail("--bytes must not be negative");

  // Groups for the cluster-aware shapes: from the file, else by the 1 ms threshold.
  std::vector<std::vector<int>> groups;
  std::string groups_from;
  if (opt.algo == "magpie" || opt.algo == "multilevel") {
    if (!opt.clusters.empty()) {
      auto g = load_clusters(opt.clusters, n, names);
      if (!g)
        return fail(g.err().to_string());
      groups = std::move(*g);
      groups_from = opt.clusters + " (" + std::to_string(groups.empty() ? 0 : groups[0].size()) +
                    " levels)";
    } else {
      auto c = clusters_by_threshold(latency);
      for (auto id : c)
        groups.push_back({id});
      groups_from = "one-way latency < 1 ms";
    }
  }

  tree t;
  nlohmann::json extra = nlohmann::json::object();
  if (opt.algo == "binomial") {
    t = binomial_tree(n, *root);
  } else if (opt.algo == "flat") {
    t = flat_tree(n, *root);
  } else if (opt.algo == "mst") {
    t = mst_tree(latency, *root);
  } else if (opt.algo == "hlot") {
    t = hlot_tree(latency, *root);
  } else if (opt.algo == "magpie") {
    std::vector<int> cluster;
    for (const auto& g : groups)
      cluster.push_back(g[0]);
    t = magpie_tree(n, *root, cluster);
  } else if (opt.algo == "multilevel") {
    t = multilevel_tree(*root, groups);
  } else if (opt.algo == "sa") {
    t = sa_tree(latency, bandwidth, *root, opt.message_bytes, opt.seed);
  } else if (opt.algo == "adaptive") {
    t = adaptive_tree(latency, *root, opt.seed);
  } else { // list
    auto order = widest_chain(bandwidth, *root);
    t = chain_tree(order);
    extra["order"] = order;
    extra["bottleneck_mbit"] = chain_bottleneck(order, bandwidth) / bytes_per_mbit;
  }
  if (auto problem = t.validate(std::vector<bool>(n, true)))
    return fail("internal error: the " + opt.algo + " tree is not a spanning tree: " + *problem);

  auto arrival = arrival_times(t, latency);
  auto completion = completion_time(t, latency);

  std::ostringstream out;
  out << opt.algo << " tree from " << label(names, *root);
  if (!names.empty())
    out << " (" << *root << ")";
  out << " over " << n << " processors of " << opt.matrix << "\n";
  if (!groups_from.empty()) {
    std::size_t clusters = 0;
    for (const auto& g : groups)
      clusters = std::max<std::size_t>(clusters, static_cast<std::size_t>(g[0]) + 1);
    out << "clusters: " << clusters << " at the first level, from " << groups_from << "\n";
  }
  out << "\n proc  name        parent      arrival ms\n";
  for (proc_id p = 0; p < n; ++p) {
    auto q = t.parent(p);
    char line[160];
    std::snprintf(line, sizeof line, "%5u  %-10s  %-10s  %10s\n", p,
                  (p < names.size() ? names[p] : std::string("-")).substr(0, 10).c_str(),
                  (q == no_proc ? std::string("-") : label(names, q)).substr(0, 10).c_str(),
                  ms(arrival[p]).c_str());
    out << line;
  }
  out << "\n";
  draw(out, t, names, arrival);
  out << "\npredicted completion: " << ms(completion)
      << " ms (postal model: one-way latency per hop, no send overhead)\n";
  if (opt.algo == "list")
    out << "bottleneck: " << ms(extra["bottleneck_mbit"].get<double>()) << " Mbit/s\n";
  if (opt.algo == "sa") {
    extra["message_bytes"] = opt.message_bytes;
    extra["seed"] = opt.seed;
    if (!bandwidth.empty()) {
      auto objective = completion_time_with_bandwidth(t, latency, bandwidth, opt.message_bytes);
      extra["objective"] = objective;
      out << "SA objective with " << opt.message_bytes
          << " bytes and serialized sends: " << ms(objective) << " ms\n";
    }
  }
  if (opt.algo == "adaptive")
    extra["seed"] = opt.seed;

  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["algorithm"] = opt.algo;
    j["root"] = *root;
    j["completion"] = completion;
    j["parent"] = parent_list(t, n);
    j["arrival"] = arrival;
    if (!names.empty())
      j["names"] = names;
    for (auto& [k, v] : extra.items())
      j[k] = v;
    if (int rc = write_json(j, opt.json_path, out))
      return rc;
  }
  std::cout << out.str();
  return 0;
}

void add_plan_command(CLI::App& app, std::function<int()>& action) {
  auto opt = std::make_shared<plan_options>();
  auto cmd = app.add_subcommand(
    "plan", "build a broadcast tree from a latency matrix and predict its completion");
  cmd->add_option("--matrix", opt->matrix, "CSV of one-way latencies in ms (row = sender)");
  cmd->add_option("--topology", opt->topology,
                  "instead of --matrix: print the oracles of this topology (built-in or file) "
                  "for --root");
  cmd->add_option("--root", opt->root, "root: processor id or name");
  cmd->add_option("--algo", opt->algo,
                  "binomial, flat, mst, hlot, magpie, multilevel, sa, adaptive, list");
  cmd->add_option("--clusters", opt->clusters,
                  "clusters file for magpie/multilevel (default: latency < 1 ms)");
  cmd->add_option("--bandwidth", opt->bandwidth, "CSV of bandwidths in Mbit/s (list, sa)");
  cmd->add_option("--bytes", opt->message_bytes, "message size for sa's bandwidth term (1)");
  cmd->add_option("--seed", opt->seed, "random seed for sa and adaptive (1)");
  cmd->add_option("--json", opt->json_path, "write the tree as JSON");
  cmd->callback([opt, &action] { action = [opt] { return run_plan(*opt); }; });
}

} // namespace banyan::cli

#include "bench_common.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "tree_report.hpp"

namespace banyan::cli {

void add_bench_options(CLI::App& cmd, bench_options& opt) {
  cmd.add_option("--topology", opt.topology, "built-in name or topology file")->required();
  cmd.add_option("--seed", opt.seed, "random seed (default 1)");
  cmd.add_option("--clock", opt.clock,
                 "virtual (default: deterministic emulated time) or real (wall clock)");
  cmd.add_option("--json", opt.json_path, "write the results as JSON to this file");
  cmd.add_option("--plot", opt.plot_path, "draw the results as SVG into this file");
  cmd.add_flag_function(
    "-q,--quiet", [&opt](std::int64_t) { opt.verbose = false; }, "no progress lines on stderr");
  cmd.add_flag("--acks", opt.acks,
               "broadcasts acknowledged to their origins (broadcast_config::acknowledge, as "
               "banyan node runs them): what exactly-once through crashes costs");
}

std::variant<std::vector<std::uint64_t>, std::string> parse_seed_list(const std::string& text) {
  std::vector<std::uint64_t> seeds;
  auto bad = [&](const std::string& why) {
    return "bad seed list '" + text + "': " + why + " (for example 1-10, 3,5,8 or 1-3,7)";
  };
  auto number = [](const std::string& t) -> std::optional<std::uint64_t> {
    if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoull(t);
  };
  std::size_t from = 0;
  while (from <= text.size()) {
    auto comma = text.find(',', from);
    auto item = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    auto dash = item.find('-');
    auto lo = number(dash == std::string::npos ? item : item.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : number(item.substr(dash + 1));
    if (!lo || !hi)
      return bad("'" + item + "' is not a seed or a range of seeds");
    if (*hi < *lo)
      return bad("the range '" + item + "' runs backwards");
    if (*hi - *lo >= 1000 || seeds.size() + (*hi - *lo + 1) > 1000)
      return bad("more than 1000 seeds");
    for (auto s = *lo; s <= *hi; ++s) {
      if (std::find(seeds.begin(), seeds.end(), s) != seeds.end())
        return bad("seed " + std::to_string(s) + " is named twice");
      seeds.push_back(s);
    }
    if (comma == std::string::npos)
      break;
    from = comma + 1;
  }
  return seeds;
}

std::optional<std::string> check(const bench_options& opt) {
  if (opt.topology.empty())
    return std::string{"--topology is empty (`banyan topology` lists the built-in ones)"};
  if (opt.clock != "virtual" && opt.clock != "real")
    return "--clock must be 'virtual' or 'real', not '" + opt.clock + "'";
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (!opt.plot_path.empty() && !ends_with(opt.plot_path, ".svg"))
    return "--plot writes SVG: give a file name ending in .svg, not '" + opt.plot_path + "'";
  if (!opt.json_path.empty() && !opt.plot_path.empty() && opt.json_path == opt.plot_path)
    return std::string{"--json and --plot name the same file"};
  return std::nullopt;
}

actors::clock_mode clock_of(const bench_options& opt) {
  return opt.clock == "real" ? actors::clock_mode::real_time : actors::clock_mode::virtual_time;
}

bool wait_until_quiet(actors::emulated_cluster& c, duration limit, bool verbose) {
  bool tty = verbose && isatty(fileno(stderr)) != 0;
  auto start = c.elapsed();
  const duration tick = std::chrono::seconds(1);
  for (;;) {
    auto left = limit - (c.elapsed() - start);
    bool quiet = c.run_until_quiet(std::min(tick, std::max(left, duration{0})));
    if (verbose)
      std::cerr << (tty ? "\r" : "") << progress_line(c) << (tty ? "" : "\n") << std::flush;
    if (quiet || c.elapsed() - start >= limit) {
      if (tty)
        std::cerr << "\n";
      return quiet;
    }
  }
}

std::optional<bench_cluster>
form_cluster(const std::string& experiment, const bench_options& opt,
             const std::function<void(actors::cluster_config&)>& configure, duration limit) {
  auto fail = [&](const std::string& what) {
    std::cerr << "banyan bench " << experiment << ": " << what << "\n";
    return std::nullopt;
  };
  if (auto err = check(opt))
    return fail(*err);
  auto topo = load_topology(opt.topology);
  if (!topo)
    return fail(topo.err().to_string());
  actors::cluster_config cfg;
  cfg.topo = *topo;
  cfg.seed = opt.seed;
  cfg.clock = clock_of(opt);
  cfg.bcast_acknowledge = opt.acks;
  if (configure)
    configure(cfg);
  bench_cluster r;
  r.topo = *topo;
  if (opt.verbose)
    std::cerr << "banyan bench " << experiment << ": " << topo->name << ", "
              << topo->proc_count() << " processors, seed " << opt.seed << ", " << opt.clock
              << " time (EMULATED network); forming trees\n";
  r.cluster = std::make_unique<actors::emulated_cluster>(cfg);
  r.cluster->start();
  r.settled = wait_until_quiet(*r.cluster, limit, opt.verbose);
  r.formed_ms = to_ms(r.cluster->last_change());
  if (opt.verbose)
    std::cerr << "banyan bench " << experiment << ": trees "
              << (r.settled ? "formed" : "STILL CHANGING at the limit") << ", last change at "
              << r.formed_ms << " ms\n";
  return r;
}

bool write_json(const std::string& experiment, const std::string& path,
                const nlohmann::json& j) {
  if (path.empty())
    return true;
  std::ofstream out(path);
  if (out)
    out << j.dump(2) << "\n";
  if (!out) {
    std::cerr << "banyan bench " << experiment << ": cannot write " << path << "\n";
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

bool write_plot(const std::string& experiment, const std::string& path, const plot_spec& p) {
  if (path.empty())
    return true;
  if (auto err = write_svg(path, p)) {
    std::cerr << "banyan bench " << experiment << ": " << *err << "\n";
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

} // namespace banyan::cli

#pragma once
// What every `banyan bench EXPERIMENT` shares: its common options, forming the emulated
// cluster, and writing the results.
//
//   banyan bench EXPERIMENT --topology T [--seed S] [--clock virtual|real]
//                           [--json F] [--plot F.svg] [-q] [experiment options]
//
//   --topology  built-in name (`banyan topology` lists them) or topology file (required)
//   --seed      random seed of the processors' probing (default 1)
//   --clock     virtual (default): CAF's test coordinator, deterministic, as fast as the
//               CPU allows; real: CAF's normal scheduler on the wall clock (the same
//               emulated network, so the delays are the topology's, plus the host's noise)
//   --json F    results as JSON
//   --plot F    a picture of the results as SVG (svg_plot.hpp)
//   -q,--quiet  no progress lines on stderr
//
// Typical use in an experiment:
//
//   bench_options opt;  add_bench_options(*cmd, opt);   // at registration
//   ...
//   auto run = form_cluster("bcast-latency", opt);       // when it runs
//   if (!run) return 2;                                   // bad input, already said
//   ... run->cluster->broadcast(...) ...
//   if (!write_json("bcast-latency", opt.json_path, j)) return 2;

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

struct bench_options {
  std::string topology;
  std::uint64_t seed = 1;
  std::string clock = "virtual"; ///< "virtual" or "real"
  std::string json_path;         ///< empty: no JSON
  std::string plot_path;         ///< empty: no picture
  bool verbose = true;           ///< progress lines on stderr
  bool acks = false;             ///< broadcasts acknowledged to their origins (--acks)
};

/// Registers --topology (required), --seed, --clock, --json, --plot and --quiet on `cmd`
/// (which must outlive the parse: `opt` is written to while parsing).
void add_bench_options(CLI::App& cmd, bench_options& opt);

/// What is wrong with `opt` that the parser does not catch (the clock's name, a plot
/// that is not .svg, an empty topology): a one-line message, or nothing.
std::optional<std::string> check(const bench_options& opt);

/// Seeds from a list such as "1-10", "3,5,8" or "1-3,7" (ascending ranges, at most 1000
/// seeds, no repeats), or a one-line message saying what is wrong with `text`.
std::variant<std::vector<std::uint64_t>, std::string> parse_seed_list(const std::string& text);

/// The clock mode `opt.clock` names (call after `check`).
actors::clock_mode clock_of(const bench_options& opt);

/// A started cluster whose trees have formed.
struct bench_cluster {
  banyan::topology topo;
  std::unique_ptr<actors::emulated_cluster> cluster;
  bool settled = false;   ///< trees stopped changing within the limit
  double formed_ms = 0;   ///< when the last parent change happened (cluster time)
};

/// Checks `opt`, loads its topology, builds the emulated cluster (seed and clock of
/// `opt`; `configure` may adjust the rest, e.g. vnodes per processor), starts it and
/// runs it until the trees stop changing, with progress lines on stderr. `limit` is in
/// cluster time (emulated in virtual mode, wall clock in real mode).
/// On bad input prints "banyan bench EXPERIMENT: what" on stderr and returns nothing.
std::optional<bench_cluster>
form_cluster(const std::string& experiment, const bench_options& opt,
             const std::function<void(actors::cluster_config&)>& configure = {},
             duration limit = std::chrono::seconds(3600));

/// Runs `c` until it is quiet (nobody measures, nothing in flight; in real time also no
/// tree change for half a second), printing a progress line per second of cluster time
/// on stderr when `verbose` (a live line on a terminal). False when `limit` passed first.
bool wait_until_quiet(actors::emulated_cluster& c, duration limit, bool verbose);

/// Writes `j` to `path` (nothing to do when `path` is empty) and says so on stdout;
/// on failure prints "banyan bench EXPERIMENT: cannot write ..." and returns false.
bool write_json(const std::string& experiment, const std::string& path,
                const nlohmann::json& j);

/// The same for a plot.
bool write_plot(const std::string& experiment, const std::string& path, const plot_spec& p);

} // namespace banyan::cli

#pragma once
// `banyan bench`: measurements on the emulated wide-area network. Every experiment takes
// the options of bench_common.hpp (--topology, --seed, --clock, --json, --plot).
//
//   banyan bench bcast-latency --topology T [--seed S] [--clock virtual|real]
//                              [--json FILE] [--plot FILE.svg]
//
// bcast-latency: once banyan's trees have converged, processor 0 broadcasts 1 byte
// over banyan's adaptive trees (`dynamic`) and, through the same broadcast engine over
// static trees, over `magpie`, `mpich` (binomial), `multilevel` (MPICH-G: the
// topology's leaf groups and their parents) and `hlot` (from the topology's latency
// matrix). Each broadcast runs alone. Prints a table; --json writes
// {"lower_bound_ms", "results": [{"algorithm", "completion_ms", "median_ms",
// "per_proc_ms"}]}. Times are from the broadcast's start to each processor's delivery
// (one vnode per processor); the lower bound is the largest one-way shortest-path
// latency from processor 0. --plot draws the paper's Fig. 6: each processor's delivery
// time, processors sorted by it, one line per algorithm, and the lower bound.

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace banyan::cli {

/// One broadcast, from its start to each processor's delivery (one vnode per processor).
struct bcast_measurement {
  std::vector<double> per_proc_ms; ///< by processor; -1: never reached
  double completion_ms = 0;        ///< the last processor reached
  double median_ms = 0;
  std::size_t reached = 0;
  std::size_t duplicates = 0;      ///< deliveries beyond the first (0 when all is well)
  bool complete = false;           ///< every processor exactly once within the limit
};

/// Waits until `c` is quiet (at most `settle_limit`), starts a broadcast with `start`
/// and runs until every vnode has it (at most `limit`). Nothing when it did not start.
std::optional<bcast_measurement>
measure_broadcast(actors::emulated_cluster& c,
                  const std::function<std::optional<wire::collective_id>()>& start,
                  duration settle_limit, duration limit);

/// The paper's Fig. 6: each processor's delivery time (`lines`: label, per-processor ms,
/// -1 for never), processors sorted by it, one line each, and the lower bound: the
/// sorted shortest-path latencies from the root (every processor is reached no sooner
/// than its shortest path, so neither is the k-th one); none when `shortest` is empty.
plot_spec delivery_plot(const std::string& title,
                        const std::vector<std::pair<std::string, std::vector<double>>>& lines,
                        std::vector<double> shortest);

/// Runs `banyan bench bcast-latency`: 0 on success, 1 when a broadcast did not
/// complete, 2 on bad input.
int run_bench_bcast_latency(const bench_options& opt, proc_id root = 0);

/// Registers the `bench` subcommand on `app`; when it is used, parsing sets `action`.
void add_bench_command(CLI::App& app, std::function<int()>& action);

} // namespace banyan::cli

#pragma once
// `banyan bench churn`: bandwidth of continuous long broadcasts while half of the
// processors leave and come back (the paper's Fig. 9).
//
//   banyan bench churn --topology T [common options of bench_common.hpp: --seed, --clock,
//                      --json, --plot, -q] [--leave-at MS] [--rejoin-at MS] [--duration MS]
//                      [--window N] [--size BYTES] [--trace FILE [--trace-from MS]]
//                      [--seeds LIST] [--tree-rule model|threshold]
//
// Progress on stderr (unless -q): a line per second of cluster time. In real time the
// supervisors cannot be read, so the processors rejoin asking for a share of processor
// 0's vnodes rather than the ones they had.
//
// Once banyan's trees have converged (virtual time; the clock is then reset to 0 for the
// timeline), processor 0 broadcasts 4 MiB messages back to back over banyan's adaptive
// trees, keeping `window` of them in flight. At `leave_at` half of the other processors
// (every second one: 1, 3, 5, ...) hand their vnodes over and leave; at `rejoin_at` they
// join again through processor 0, asking for the vnodes they had. Broadcasts start until
// `duration`; then the run waits for the last ones.
//
// Measured: delivered bytes (message size per vnode delivery) over fixed windows ->
// timeline of MB/s; per event, the steady bandwidth before it (mean over the second
// before the event) and `restabilize_ms`: from the event to the start of the first
// `smooth_ms` window (on a bucket boundary) whose mean bandwidth, and the next window's,
// is at least 90% of that steady bandwidth (long broadcasts complete in bursts, so single
// buckets say little). Each event also reports one tree's ceiling from processor 0
// (core/stream_ceiling.hpp) over the processors running before it and after it, as
// delivered MB/s: when the one after is below the steady rate, the network after the
// event cannot carry that rate, whatever the trees. Exactly-once: every vnode must get every broadcast once (vnodes are handed
// over, never dropped, so every broadcast has the same vnodes to reach).
//
// --seeds LIST (e.g. 1-10, or 1,4,9; instead of --seed): one run per seed, a line each,
// then how many came back within 1 s after each event and the medians ("not back"
// counting as the longest). The runs are chaotic (a different seed is a different course
// of probes, trees and timings), so one seed says little (docs/decisions.md). JSON:
// `seeds`, `runs` (each what a single run writes) and `summary` (`leave` and `rejoin`:
// `back_within_1s`, `not_back`, `median_ms` (null: not back); `median_broadcasts`,
// `duplicates`, `lost`); the plot draws every seed's timeline.
//
// --tree-rule model|threshold: how processor 0 picks the tree of each broadcast
// (core/tree_choice.hpp); without it, the broadcast engine's own rule (model). With
// threshold, every broadcast of 256 KiB or more takes the bandwidth tree, so the run
// measures the trees alone, without the choice between them.
//
// --trace FILE (virtual time): a line per frame and per tree event from --trace-from on,
// times in ms on the timeline (to find where the time goes):
//   F t_ms s|d|u from to type bytes [origin seq stream index count first direct hops kind vnodes]
//     (s sent, d delivered, u undeliverable; the bracket for broadcast segments)
//   T t_ms proc event root L|B old_parent new_parent   (tree events: parent changes...;
//     with --trace-from 0 it opens with a `formed` line per processor and tree of the
//     origin: its parent when the trees had formed, old_parent -1)
//   E t_ms leave|rejoin                                  (the churn events)

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "banyan/core/topology.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

struct churn_options {
  std::string topology;
  /// When set, the topology itself (`topology` then only names it): a generated one.
  std::optional<banyan::topology> topo;
  std::uint64_t seed = 1;
  std::string clock = "virtual"; ///< "virtual" or "real" (bench_common.hpp)
  double leave_at_ms = 1000;
  double rejoin_at_ms = 3000;
  double duration_ms = 5000;
  std::size_t message_bytes = 4 * 1024 * 1024;
  std::size_t window = 2;       ///< broadcasts in flight
  double bucket_ms = 100;       ///< timeline resolution
  double smooth_ms = 500;       ///< restabilization is judged on means over this long
  /// A trace of the run (empty: none), from `trace_from_ms` on the timeline: one line per
  /// frame the network carried (F) and per tree event (T); see run_churn.
  std::string trace_path;
  double trace_from_ms = 0;
  /// Background measurement period in seconds (supervisor_config::background_period;
  /// 0: off, trees measured once).
  double background_s = 0;
  /// The tree choice of processor 0's broadcasts: "model" or "threshold"
  /// (core/tree_choice.hpp); empty: the broadcast engine's own.
  std::string tree_rule;
};

struct churn_point {
  double t_ms = 0;
  double bandwidth_MBps = 0;
  /// Processor 0's bandwidth tree (the broadcasts' tree) at the bucket's start: edges
  /// that cross a wide-area link (processors with a parent in another cluster), and how
  /// many of them are beyond one per cluster entered (a cluster entered from two places
  /// carries every segment twice over its wide-area links). -1: not sampled.
  long wan_edges = -1;
  long extra_entries = -1;
};

struct churn_event {
  std::string what; ///< "leave" or "rejoin"
  double at_ms = 0;
  std::size_t procs = 0;           ///< processors that left / rejoined
  double steady_MBps = 0;          ///< mean over the second before the event
  std::optional<double> restabilize_ms; ///< nothing: not back before the end
  /// What one tree can carry from processor 0 to the processors running before and
  /// after the event (broadcast_tree_ceiling of the topology without the processors
  /// away, times the vnodes, as delivered MB/s): their ratio says whether the network
  /// after the event allows the steady rate at all.
  double tree_ceiling_before_MBps = 0;
  double tree_ceiling_after_MBps = 0;
};

/// One broadcast of the run: when it started and when its last vnode got it.
struct churn_broadcast {
  double start_ms = 0;
  double done_ms = 0;
  bool complete = false;
};

struct churn_result {
  std::string topology;
  std::size_t procs = 0;
  std::size_t vnodes = 0;
  std::vector<churn_point> timeline;
  std::vector<churn_event> events;
  std::size_t broadcasts = 0;
  std::size_t deliveries_expected = 0;
  std::size_t deliveries = 0; ///< (broadcast, vnode) pairs delivered at least once
  std::size_t duplicates = 0; ///< deliveries beyond the first
  std::size_t lost = 0;       ///< expected pairs never delivered
  std::vector<churn_broadcast> per_broadcast;
  /// Mean of churn_point::extra_entries from 500 ms after the leave to the rejoin, and
  /// from 500 ms after the rejoin to the end (the trees each event left behind).
  double extra_entries_after_leave = 0;
  double extra_entries_after_rejoin = 0;
  double wall_s = 0;
};

/// Runs the churn experiment; errors (bad topology or times) as a one-line message.
/// `progress` (may be empty) gets a line now and then.
std::variant<churn_result, std::string>
run_churn(const churn_options& opt, const std::function<void(const std::string&)>& progress = {});

/// The timeline as a chart with the events marked (the paper's Fig. 9).
plot_spec churn_plot(const churn_result& r);

/// `banyan bench churn`: 0 on success, 1 when deliveries were lost or duplicated, 2 on
/// bad input.
int run_bench_churn(const churn_options& opt, const std::string& json_path,
                    const std::string& plot_path, bool verbose = true);

/// Registers `churn` under `bench`; when it is used, parsing sets `action`.
void add_bench_churn_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

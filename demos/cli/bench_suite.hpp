#pragma once
// `banyan bench suite`: banyan's adaptive trees against the best static trees and
// against the oracles, over the paper's grids and generated topologies.
//
//   banyan bench suite [--generated G] [--seed S] [--topologies a,b,...] [--quick]
//                      [--jobs N] [--formation-limit S] [--formation-only]
//                      [--json F] [--plot F.svg] [-q]
//
// Topologies: the builtins of --topologies (default the paper's paper-3c201,
// paper-4c137, paper-3c128, paper-4c160; `--topologies none` for none), then G (20)
// generated ones, `topology generate --seed S+i --max-procs 160` for i = 0..G-1.
// --quick: no builtins unless named, generated ones of 6-16 processors, and smaller
// messages (4 MiB broadcast, 1 MiB reduction, a 3 s churn run of 1 MiB broadcasts).
//
// Per topology, on the emulated network in virtual time (processors' seed 1):
//   formation   the time until the trees stopped changing (reported, no ratio); when
//               they still change after --formation-limit (120 emulated seconds), the
//               topology is reported as such and not measured (every measurement waits
//               for a quiet cluster first); the probes per processor it took, and the
//               latency and bandwidth trees that enter every group of the topology (at
//               every level) at most once (core/group_entries.hpp)
//   1B root 0   1-byte broadcast from processor 0;
//   1B small    from the first processor of the smallest cluster (the next smallest when
//               that is processor 0's): dynamic, and every candidate of
//               best_static_tree through the same engine, the fastest measured being
//               "best static"; oracle: short_message_bound
//   long bcast  64 MiB broadcast from 0: dynamic; best of magpie, the widest chain and MPICH
//               (scatter-allgather); oracle: max(bytes / broadcast_ceiling, bound);
//               tree oracle (any single tree): max(bytes / broadcast_tree_ceiling, bound)
//   long reduce 4 MiB int32 sum into vnode 0: dynamic; best of binomial and magpie; oracle:
//               max(bytes / reduce_ceiling, reduction bound); tree oracle the same with
//               reduce_tree_ceiling
//   churn       bench churn's run (half leave at 1 s, rejoin at 3 s, 4 MiB back to back,
//               2 in flight): the time per message before the leave (T / k for the k
//               broadcasts complete by then, the last at T), against bytes /
//               broadcast_ceiling; the restabilization times are reported
// --formation-only: formation alone (fast enough for many generated topologies).
// Every ratio is a time ratio, dynamic / reference: above 1, banyan is slower.
// Printed per topology, then the median and the worst per metric. --json: the rows and
// the summary; --plot: a dot per topology and metric. --jobs N: N topologies at a time
// (one thread and emulated cluster each; the results are those of --jobs 1).
// Exit code 1 when a collective did not complete correctly, 2 on bad input.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace banyan::cli {

struct suite_options {
  std::vector<std::string> topologies; ///< builtins or files; empty: the default set
  std::size_t generated = 20;
  std::uint64_t seed = 1; ///< generator seed of the first generated topology
  bool quick = false;
  std::size_t jobs = 1;
  double formation_limit_s = 120; ///< emulated seconds for the trees to stop changing
  bool formation_only = false;    ///< measure tree formation and nothing else
  /// Background measurement period in seconds for banyan's trees, churn included
  /// (supervisor_config::background_period; 0: off).
  double background_s = 0;
  /// Trees on demand (supervisor_config::tree_set): only the measured roots (0 and the
  /// one in the smallest cluster) have trees, opened at the start; churn not measured.
  bool on_demand = false;
  bool lan_search = true; ///< on demand: supervisor_config::lan_search
  std::string json_path;
  std::string plot_path;
  bool verbose = true;
};

/// Runs the suite: 0 when every collective completed correctly, 1 otherwise, 2 on bad
/// input.
int run_bench_suite(const suite_options& opt);

/// Registers `suite` under `bench`; when it is used, parsing sets `action`.
void add_bench_suite_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

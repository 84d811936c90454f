#pragma once
// `banyan bench adapt`: broadcasts back to back while the network changes (docs/topology.md,
// "Networks that change"; docs/tree-protocol.md, "Trees that keep learning").
//
//   banyan bench adapt --topology T [--seed S] [-q] [--json F] [--plot F.svg]
//                      [--size 64M|1] [--algorithms dynamic,frozen,magpie,list]
//                      [--events FILE | --link G1 G2 --drop PERCENT] [--change-at S]
//                      [--start S] [--until S] [--period S]
//
// The scenario: by default, at --change-at (40 s of emulated time) the link between the
// root's group and its widest sibling loses --drop (75) percent of its bandwidth, both
// ways; --events FILE replaces it with a file of `at` lines. Each algorithm runs on a
// cluster of its own with the same scenario: once its trees are formed it idles until
// --start (change-at - 6 s), then processor 0 broadcasts --size bytes back to back
// until --until (change-at + 12 s).
//   dynamic  banyan's adaptive trees with background measurement (`--period`, 5 s)
//   frozen   the same trees measured once (no background measurement)
//   magpie   flat tree between cluster coordinators, binomial inside clusters
//   list     the widest chain over the network as it was at time zero
// Printed: a timeline (each broadcast's start, end, rate = size / completion, and the
// oracle ceiling of the network as it is at the broadcast's start: broadcast_ceiling of
// topology_at), how long after the change the first broadcast at >= 0.9 x the new
// ceiling started, and, for dynamic, when the root's bandwidth tree moved and the share
// of every wide-area link's capacity the idle cluster's traffic took between formation
// and --start (background measurement included).

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace banyan::cli {

struct bench_adapt_options {
  bench_options common;
  std::string size = "64M";
  std::vector<std::string> algorithms;
  std::string events_path;
  std::vector<std::string> link; ///< two group names
  double drop_percent = 75;
  double change_at_s = 40;
  double start_s = -1; ///< < 0: change_at - 6
  double until_s = -1; ///< < 0: change_at + 12
  double period_s = 5;
};

int run_bench_adapt(const bench_adapt_options& opt);
void add_bench_adapt_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

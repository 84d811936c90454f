#pragma once
// `banyan bench adapt`: broadcasts back to back while the network changes (docs/topology.md,
// "Networks that change"; docs/tree-protocol.md, "Trees that keep learning").
//
//   banyan bench adapt --topology T [--seed S] [-q] [--json F] [--plot F.svg]
//                      [--size 64M|1] [--algorithms dynamic,frozen,magpie,list,...]
//                      [--events FILE | --link G1 G2 [--drop PERCENT | --rtt-factor F]]
//                      [--change-at S] [--start S] [--until S] [--period S]
//                      [--rtt-watch S]
//
// The scenario, long messages (--size of 1 KiB or more): by default, at --change-at (40 s
// of emulated time) the narrowest wide-area link of the root's bandwidth tree (--link:
// that link) loses --drop (75) percent of its bandwidth, both ways. Short messages (under
// 1 KiB, where the broadcast takes the latency tree): the link's RTT is multiplied by
// --rtt-factor (5); by default the link is on the critical path of the root's latency
// tree as the first run formed it: on the tree path from the root to the processor it
// reaches last (the postal model with send overhead over the topology's latencies,
// arrival_times_with_overhead), the wide-area hop (one with a `link` line) of the largest
// one-way latency. --events FILE replaces either with a file of `at` lines. Each algorithm runs on a
// cluster of its own with the same scenario: once its trees are formed it idles until
// --start (change-at - 6 s), then processor 0 broadcasts --size bytes back to back
// until --until (change-at + 12 s).
//   dynamic  banyan's adaptive trees with background measurement (`--period`, 5 s; the
//            pings of the RTT watch every `--rtt-watch` S, 0.5; 0: none)
//   frozen   the same trees measured once (no background measurement)
//   magpie   flat tree between cluster coordinators, binomial inside clusters
//   list     the widest chain over the network as it was at time zero
//   best-before  best_static_tree (core/static_tree_oracle.hpp) for the network at time zero
//   best-after   best_static_tree for the network after the first change (topology_at)
// Short messages run dynamic, frozen, magpie, best-before and best-after by default, long
// ones dynamic, frozen, magpie and list. With best-after, every dynamic and frozen
// broadcast after the change is also shown as its completion over best-after's (the
// median of best-after's broadcasts started after the change), with the time from the
// change to the first broadcast from which that ratio stays within 1.1; with
// best-before, the same ratio before the change against best-before's.
// Printed: a timeline (each broadcast's start, end, rate = size / completion, and the
// oracle ceiling of the network as it is at the broadcast's start: broadcast_ceiling of
// topology_at, and the rate over one tree's ceiling, broadcast_tree_ceiling), how long
// after the change the first broadcast at >= 0.9 x the new ceiling (and one tree's)
// started, and, for dynamic, when the root's tree (bandwidth; latency for short messages) moved and the share
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
  double rtt_factor = 5; ///< short messages: the default change multiplies a link's RTT by it
  double change_at_s = 40;
  double start_s = -1; ///< < 0: change_at - 6
  double until_s = -1; ///< < 0: change_at + 12
  double period_s = 5;
  double rtt_watch_s = 0.5; ///< dynamic's supervisor_config::rtt_watch_period; 0: no RTT watch
};

int run_bench_adapt(const bench_adapt_options& opt);
void add_bench_adapt_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

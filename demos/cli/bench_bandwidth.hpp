#pragma once
// `banyan bench bcast-bandwidth`: long-message broadcast bandwidth (the paper's Fig. 7).
//
//   banyan bench bcast-bandwidth --topology T [--seed S] [--clock virtual|real] [-q]
//                                [--sizes 32K,1M,...] [--algorithms dynamic,mpich,...]
//                                [--json F] [--plot F.svg]
//
// The common options are bench_common.hpp's. Once banyan's trees have converged, processor 0 broadcasts messages of
// 32 KiB to 64 MiB, one at a time, with each algorithm, on the same emulated network
// (all but mpich's long messages through the broadcast engine, core/broadcast):
//   dynamic  banyan's adaptive trees, the tree chosen as the broadcast engine is
//            configured (broadcast_config::rule: by the model of core/tree_choice.hpp, or
//            latency tree below 256 KiB and bandwidth tree above); on request also
//            dynamic-model, dynamic-threshold (one rule whatever the default),
//            dynamic-latency and dynamic-bandwidth (one tree at every size)
//   mpich    MPICH's binomial tree (short messages, through the broadcast engine); long
//            messages (>= 256 KiB, MPICH's long threshold) scatter then ring allgather
//            (core/scatter_allgather, hosted by the processor actors); the output and
//            the JSON ("method" per result, "mpich_long") say which
//   magpie   flat tree between cluster coordinators, binomial inside clusters
//   list     one pipelined chain ordered for the widest bottleneck (widest_chain over
//            the topology's path bandwidths)
// bandwidth_MBps = size x processors / completion (the paper's definition; MB = 10^6 B).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace banyan::cli {

struct bench_bandwidth_options {
  bench_options common; ///< --topology, --seed, --clock, --json, --plot, --quiet
  std::vector<std::string> sizes; ///< "32K", "4M", "1048576": empty for the default set
  std::vector<std::string> algorithms; ///< empty: dynamic, mpich, magpie, list
};

/// One broadcast measured.
struct bandwidth_result {
  std::string algorithm;
  std::size_t size = 0;
  double completion_ms = 0;
  double bandwidth_MBps = 0;
  std::string method; ///< how it went: "binomial", "scatter-allgather", "bandwidth tree", ...
  bool complete = false;
  std::vector<double> per_vnode_ms; ///< first delivery per vnode, from the start (-1: none)
};

/// "32K" -> 32768, "4M" -> 4194304, "100" -> 100; nothing on a malformed or zero size.
std::optional<std::size_t> parse_size(const std::string& s);

/// Runs the benchmark: 0 on success, 1 when a broadcast did not complete, 2 on bad input.
int run_bench_bcast_bandwidth(const bench_bandwidth_options& opt);

/// Registers `bcast-bandwidth` under `bench`; when it is used, parsing sets `action`.
void add_bench_bandwidth_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

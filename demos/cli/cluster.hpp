#pragma once
// `banyan cluster`: N local `banyan node --control` processes over real TCP, driven
// through the control protocol (node_control.hpp) to run banyan bench's workloads.
//
//   banyan cluster --procs N [--topology T] [--netns] [--workload W[,W...]]
//                  [--json FILE] [--seed S] [--reps R] [--sizes B,...] [--reduce-sizes B,...]
//                  [--allreduce-sizes B,...] [--allgather-sizes B,...]
//                  [--vnodes-per-proc V] [--leave-at MS --rejoin-at MS --churn-for MS]
//
// Process 0 founds the computation owning every vnode (V per process, default 1);
// process k joins through it asking for vnodes [k*V, (k+1)*V). With --topology, process k
// stands for the topology's processor k: it gets its site and the user-space link
// emulation (delay and pacing of its outgoing frames). With --netns (root only), each
// site of the topology gets a network namespace, joined to the others by veth links to
// a bridge, with htb shaping the site's link (scripts/cluster/netns.sh).
//
// Workloads (W): latency, bandwidth, reduce, churn, overhead, allreduce, barrier,
// allgather, all (the first four). The JSON file holds one object per workload, shaped
// as `banyan bench` writes it (bcast-latency, bcast-bandwidth, reduce, churn, ...); see
// docs/cluster.md.
//
// Everything is always torn down: every child runs in its own process group and dies
// with the driver (PR_SET_PDEATHSIG); on the way out, also on failure and on
// SIGINT/SIGTERM/SIGHUP, each gets `quit`, then SIGKILL to its group. Every wait has a
// timeout. Progress goes to stderr, a summary of the results to stdout. Exit codes: 0 done, 1 a workload or the cluster
// failed, 2 bad arguments, 3 namespaces not permitted, 130 interrupted.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace banyan::cli {

struct cluster_options {
  std::size_t procs = 4;
  std::string topology;
  bool netns = false;
  std::string workload = "all";
  std::string json_path;
  std::uint64_t seed = 1;
  std::size_t reps = 5;
  std::string sizes = "32768,262144,2097152,16777216,67108864"; ///< bcast-bandwidth
  std::string reduce_sizes = "4,4096,262144,4194304";           ///< reduce (bytes per vnode)
  std::string allreduce_sizes = "4,4194304"; ///< allreduce (int32 bytes per vnode)
  std::string allgather_sizes = "1024";      ///< allgather (bytes per process)
  std::size_t vnodes_per_proc = 1;
  bool acks = true; ///< time broadcasts by acks too (the paper's method)
  std::uint64_t leave_at_ms = 2000;
  std::uint64_t rejoin_at_ms = 4000;
  std::uint64_t churn_for_ms = 6000;
  std::uint64_t op_timeout_ms = 60000;
  std::string scripts_dir; ///< where netns.sh is; empty: found next to the sources
  std::string node_args;   ///< extra arguments for every `banyan node`, space-separated
  bool keep = false;       ///< keep the temporary directory (logs) also on success
  std::string plot_dir;    ///< pictures of the results (latency.svg, ...); empty: none
};

/// Runs `banyan cluster`: 0, 1, 2, 3 or 130 as above.
int run_cluster(const cluster_options& opt);

/// Registers the `cluster` subcommand on `app`; when it is used, parsing sets `action`.
void add_cluster_command(CLI::App& app, std::function<int()>& action);

} // namespace banyan::cli

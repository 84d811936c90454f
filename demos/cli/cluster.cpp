#include "cluster.hpp"

#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "cluster_run.hpp"

namespace banyan::cli {

namespace cluster_detail {

int cluster_run::run() {
  if (opt_.procs < 1 || opt_.procs > 256) {
    std::cerr << "banyan cluster: --procs must be 1-256\n";
    return 2;
  }
  if (opt_.vnodes_per_proc < 1 || opt_.vnodes_per_proc > 4096) {
    std::cerr << "banyan cluster: --vnodes-per-proc must be 1-4096\n";
    return 2;
  }
  if (opt_.reps < 1 || opt_.reps > 1000) {
    std::cerr << "banyan cluster: --reps must be 1-1000\n";
    return 2;
  }
  if (!parse_sizes(opt_.sizes) || !parse_sizes(opt_.reduce_sizes)
      || !parse_sizes(opt_.allreduce_sizes) || !parse_sizes(opt_.allgather_sizes)) {
    std::cerr << "banyan cluster: --sizes, --reduce-sizes, --allreduce-sizes and "
                 "--allgather-sizes are comma-separated byte counts\n";
    return 2;
  }
  const auto allreduce_sizes = *parse_sizes(opt_.allreduce_sizes);
  const auto allgather_sizes = *parse_sizes(opt_.allgather_sizes);
  for (auto s : allreduce_sizes)
    if (s == 0 || s % 4 != 0) {
      std::cerr << "banyan cluster: --allreduce-sizes: " << s
                << " is not a whole number of int32\n";
      return 2;
    }
  for (auto s : allgather_sizes)
    if (s == 0 || s % opt_.vnodes_per_proc != 0) {
      std::cerr << "banyan cluster: --allgather-sizes: " << s
                << " bytes per process do not split into --vnodes-per-proc " << opt_.vnodes_per_proc
                << " blocks of at least one byte\n";
      return 2;
    }
  std::set<std::string> workloads;
  {
    std::stringstream in(opt_.workload);
    std::string w;
    while (std::getline(in, w, ',')) {
      if (w == "all") {
        workloads.insert({"latency", "bandwidth", "reduce", "churn"});
      } else if (w == "latency" || w == "bandwidth" || w == "reduce" || w == "churn"
                 || w == "overhead" || w == "allreduce" || w == "barrier" || w == "allgather"
                 || w == "none") {
        workloads.insert(w);
      } else {
        std::cerr << "banyan cluster: unknown workload \"" << w
                  << "\" (latency, bandwidth, reduce, churn, overhead, allreduce, barrier, "
                     "allgather, all, none)\n";
        return 2;
      }
    }
  }
  if (!opt_.topology.empty()) {
    auto t = load_topology(opt_.topology);
    if (!t) {
      std::cerr << "banyan cluster: --topology: " << t.err().to_string() << "\n";
      return 2;
    }
    topo_ = std::move(*t);
    if (opt_.procs > topo_->proc_count()) {
      std::cerr << "banyan cluster: --topology " << topo_->name << " has "
                << topo_->proc_count() << " processors, fewer than --procs " << opt_.procs << "\n";
      return 2;
    }
  } else if (opt_.netns) {
    std::cerr << "banyan cluster: --netns needs --topology (its sites become namespaces)\n";
    return 2;
  }
  if (!opt_.json_path.empty()) {
    if (!std::ofstream(opt_.json_path, std::ios::app)) {
      std::cerr << "banyan cluster: cannot write --json " << opt_.json_path << "\n";
      return 2;
    }
  }
  exe_ = self_exe();
  if (exe_.empty()) {
    std::cerr << "banyan cluster: cannot find my own executable (/proc/self/exe)\n";
    return 1;
  }

  json out{{"procs", opt_.procs},
           {"vnodes_per_proc", opt_.vnodes_per_proc},
           {"topology", topo_ ? json(topo_->name) : json(nullptr)},
           {"netns", opt_.netns},
           {"seed", opt_.seed},
           {"reps", opt_.reps},
           {"acks", opt_.acks}};
  try {
    make_dir();
    block_signals();
    if (opt_.netns)
      netns_up();
    start_all();
    wait_converged(std::chrono::milliseconds(30000 + 2000 * opt_.procs));
    if (opt_.acks) {
      // Each process acks to the vnode its origin owns (process k: vnode k*V).
      std::string line = "acks on";
      for (std::size_t k = 0; k < opt_.procs; ++k)
        line += " " + std::to_string(k) + ":" + std::to_string(k * opt_.vnodes_per_proc);
      for (std::size_t k = 0; k < opt_.procs; ++k)
        command(k, line);
      sync_all(); // every process acks from the first broadcast on
    }
    if (workloads.count("overhead"))
      out["overhead"] = workload_overhead();
    if (workloads.count("latency"))
      out["bcast-latency"] = workload_latency();
    if (workloads.count("bandwidth"))
      out["bcast-bandwidth"] = workload_bandwidth();
    if (workloads.count("reduce"))
      out["reduce"] = workload_reduce();
    if (workloads.count("allreduce"))
      out["allreduce"] = workload_allreduce();
    if (workloads.count("barrier"))
      out["barrier"] = workload_barrier();
    if (workloads.count("allgather"))
      out["allgather"] = workload_allgather();
    if (workloads.count("churn"))
      out["churn"] = workload_churn();
  } catch (const cluster_failure& f) {
    failed_ = f.code != 2 && f.code != 3;
    std::cerr << "banyan cluster: " << f.what << "\n";
    teardown();
    return f.code;
  }
  int rc = 0;
  for (auto& [k, errs] : ev_.errors)
    if (!errs.empty())
      rc = 1;
  for (auto name : {"bcast-latency", "bcast-bandwidth"})
    if (out.contains(name))
      for (auto& r : out[name]["results"])
        if (!r.value("complete", false))
          rc = 1;
  for (auto name : {"reduce", "allreduce", "barrier", "allgather"})
    if (out.contains(name))
      for (auto& r : out[name]["results"])
        if (!r.value("ok", false))
          rc = 1;
  if (out.contains("churn") && (out["churn"]["duplicates"] != 0 || out["churn"]["lost"] != 0))
    rc = 1;
  failed_ = rc != 0;
  teardown();
  if (!opt_.json_path.empty()) {
    std::ofstream f(opt_.json_path, std::ios::trunc);
    f << out.dump(2) << "\n";
    if (!f) {
      std::cerr << "banyan cluster: cannot write " << opt_.json_path << "\n";
      return 1;
    }
  }
  print_summary(out);
  const std::string who = std::to_string(opt_.procs) + " processes"
                          + (opt_.topology.empty() ? std::string(" on loopback")
                                                   : " emulating " + opt_.topology
                                                       + (opt_.netns ? " in namespaces" : ""));
  if (!opt_.plot_dir.empty() && !write_cluster_plots(opt_.plot_dir, who, out))
    rc = 1;
  progress(rc == 0 ? "done" : "done, with errors (see above)");
  return rc;
}

} // namespace cluster_detail

int run_cluster(const cluster_options& opt) {
  cluster_detail::cluster_run r(opt);
  return r.run();
}

void add_cluster_command(CLI::App& app, std::function<int()>& action) {
  auto opt = std::make_shared<cluster_options>();
  auto cmd = app.add_subcommand("cluster", "run N local `banyan node` processes and the bench workloads");
  cmd->add_option("--procs", opt->procs, "number of processes (4)");
  cmd->add_option("--topology", opt->topology, "emulate this topology (process k = its processor k)");
  cmd->add_flag("--netns", opt->netns, "one network namespace per site, veth links, htb (root)");
  cmd->add_option("--workload", opt->workload,
                  "latency, bandwidth, reduce, churn, overhead, allreduce, barrier, allgather, all "
                  "(the first four) or none; comma-separated (all)");
  cmd->add_option("--json", opt->json_path, "write the results as JSON");
  cmd->add_option("--seed", opt->seed, "seeds the processes' randomness (1)");
  cmd->add_option("--reps", opt->reps, "timed repetitions per measurement (5); the median is reported");
  cmd->add_option("--sizes", opt->sizes, "bandwidth: broadcast sizes in bytes, comma-separated");
  cmd->add_option("--reduce-sizes", opt->reduce_sizes, "reduce: int32 bytes per vnode, comma-separated");
  cmd->add_option("--allreduce-sizes", opt->allreduce_sizes,
                  "allreduce: int32 bytes per vnode, comma-separated (4,4194304)");
  cmd->add_option("--allgather-sizes", opt->allgather_sizes,
                  "allgather: bytes per process (split evenly among its vnodes), "
                  "comma-separated (1024)");
  cmd->add_option("--vnodes-per-proc", opt->vnodes_per_proc, "vnodes each process owns (1)");
  cmd->add_flag("!--no-acks", opt->acks, "do not time broadcasts by acks");
  cmd->add_option("--leave-at", opt->leave_at_ms, "churn: ms when half of the processes leave (2000)");
  cmd->add_option("--rejoin-at", opt->rejoin_at_ms, "churn: ms when they rejoin (4000)");
  cmd->add_option("--churn-for", opt->churn_for_ms, "churn: ms of broadcasting (6000)");
  cmd->add_option("--op-timeout", opt->op_timeout_ms, "ms one operation may take (60000)");
  cmd->add_option("--scripts", opt->scripts_dir, "directory of netns.sh (default: found)");
  cmd->add_option("--node-args", opt->node_args, "extra arguments for every banyan node");
  cmd->add_flag("--keep", opt->keep, "keep the temporary directory with the logs");
  cmd->add_option("--plot-dir", opt->plot_dir,
                  "draw the results there: latency.svg, bandwidth.svg, churn.svg (those that ran)");
  cmd->callback([opt, &action] { action = [opt] { return run_cluster(*opt); }; });
}

} // namespace banyan::cli

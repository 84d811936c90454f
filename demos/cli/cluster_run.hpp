#pragma once
// The driver of `banyan cluster` (cluster.hpp), internal to the CLI. One `cluster_run`
// holds the state of a run; its parts live in files by concept:
//
//   cluster.cpp            options, the run from start to finish, exit codes
//   cluster_processes.cpp  spawning the `banyan node --control` children, tearing them down
//   cluster_netns.cpp      network namespaces per site (--netns, scripts/cluster/netns.sh)
//   cluster_events.cpp     the event pump: reading the children's lines, commands, waits
//   cluster_workloads.cpp  forming the cluster and the workloads (latency, bandwidth,
//                          reduce, overhead, churn)
//   cluster_collectives.cpp  the workloads every process takes part in (allreduce,
//                          barrier, allgather)
//   cluster_results.cpp    the summary on stdout and the pictures (--plot-dir)
//   join_waves.hpp         the order of the joins (waves, contacts); in banyan_cli_support

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/types.h>

#include <nlohmann/json.hpp>

#include "banyan/core/topology.hpp"
#include "cluster.hpp"

namespace banyan::cli {

/// The pictures of a run's results (`--plot-dir`): each workload that ran, one SVG file.
/// A file that cannot be written gets a line on stderr and makes the run fail.
bool write_cluster_plots(const std::string& dir, const std::string& who, const nlohmann::json& out);

} // namespace banyan::cli

namespace banyan::cli::cluster_detail {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
using json = nlohmann::json;

/// Microseconds on the steady clock (the children stamp with the same clock).
std::int64_t now_us();

/// A progress line on stderr.
void progress(const std::string& s);

/// The cluster could not go on (a child died, a wait timed out, a signal came).
struct cluster_failure {
  std::string what;
  int code = 1;
};

/// This executable's path (/proc/self/exe); empty when unknown.
std::string self_exe();

/// Comma-separated byte counts; nullopt when empty or not numbers.
std::optional<std::vector<std::uint64_t>> parse_sizes(const std::string& s);

/// The median of `v` (0 when empty).
double median(std::vector<double> v);

/// The results as a table on stdout (the JSON has everything).
void print_summary(const json& out);

/// One `banyan node --control` child.
struct child {
  std::size_t index = 0;
  pid_t pid = -1;
  int in = -1;  ///< its stdin
  int out = -1; ///< its stdout
  std::string log;
  std::string buffer;
  bool alive = false;
  bool expected_exit = false;
  std::uint16_t port = 0;
  std::string host = "127.0.0.1";
  std::string site;
  std::string netns;
};

/// What the children said, indexed for the waits below.
struct event_index {
  std::map<std::size_t, json> ready;          ///< latest per child
  std::map<std::size_t, std::size_t> readies; ///< count per child
  std::map<std::size_t, json> status;         ///< latest per child
  std::map<std::size_t, std::size_t> statuses;
  std::map<std::size_t, std::deque<json>> started; ///< "bcast" lines, per child, in order
  std::map<std::size_t, std::deque<json>> sent;
  std::map<std::string, std::vector<std::pair<std::size_t, json>>> delivered; ///< by op
  std::map<std::string, json> acked;                                          ///< by op
  std::map<std::uint64_t, json> reduced;                                      ///< by seq
  std::map<std::uint64_t, std::set<std::size_t>> reduce_sent;
  /// "allreduced", "released" and "allgathered" / "allgather_sent" lines: by kind
  /// ("allreduce", "barrier", "allgather"), then seq, then process.
  std::map<std::string, std::map<std::uint64_t, std::map<std::size_t, json>>> finished;
  std::map<std::size_t, std::size_t> left;
  std::map<std::size_t, std::vector<std::string>> errors;
};

class cluster_run {
public:
  explicit cluster_run(const cluster_options& opt) : opt_(opt) {}
  cluster_run(const cluster_run&) = delete;
  cluster_run& operator=(const cluster_run&) = delete;
  ~cluster_run() { teardown(); }

  int run();

private:
  // --- setup and teardown ---
  void make_dir();
  void block_signals();
  void netns_up();
  void spawn(std::size_t k, const std::vector<std::string>& contacts);
  void teardown();
  void kill_all();

  // --- the event pump ---
  /// Reads what the children wrote for at most `limit`; throws on a signal or an
  /// unexpected death.
  /// With `only` >= 0, waits for that child's output alone (the others' stays in their
  /// pipes, unread), and reads everyone's without waiting if it wrote nothing.
  void pump(std::chrono::milliseconds limit, int only = -1);
  void on_line(child& c, const std::string& line);
  /// Pumps until `done()` or `limit` (then throws, naming `what`). With `only` >= 0,
  /// pumps that child alone (see `pump`).
  template <class F>
  void wait_for(F done, std::chrono::milliseconds limit, const std::string& what, int only = -1);
  void command(std::size_t k, const std::string& line);
  /// Returns once every process answered a `status` sent now: all it was sent before
  /// has been taken.
  void sync_all();

  // --- workloads ---
  void start_all();
  void wait_converged(std::chrono::milliseconds limit);
  struct bcast_outcome {
    std::string op;
    std::int64_t t0 = 0;
    std::vector<double> per_proc_ms; ///< first delivery per process (-1: none)
    double completion_ms = 0;        ///< last vnode delivered
    double acked_ms = -1;            ///< the root had every ack (-1: acks off)
    std::size_t vnodes = 0;          ///< deliveries counted (vnodes)
    bool ok = true;                  ///< every payload checked out
  };
  /// A broadcast of `bytes` from process `root`, waited for until every vnode has it
  /// (and the acks, when on).
  bcast_outcome broadcast(std::size_t root, std::uint64_t bytes, bool wait_acks);
  json workload_latency();
  json workload_bandwidth();
  json workload_reduce();
  json workload_churn();
  json workload_overhead();
  /// One collective every process starts (`line` to each, process 0 last), timed from the
  /// driver writing the commands to the last process's result line of kind `kind` and
  /// number `seq`. `ok`: every process reported, each result checked out and, where it
  /// names them, covered `total_vnodes()`.
  struct everywhere_outcome {
    double completion_ms = 0; ///< the last process's result
    double first_ms = 0;      ///< the first process's result
    /// From the last process to start it (its `t_start_us`: every process had called the
    /// operation by then) to the last result: the commands' delivery left out.
    double from_last_start_ms = 0;
    double last_start_ms = 0; ///< when the last process started it, after the commands
    std::vector<double> start_ms, done_ms; ///< per process, after the commands
    /// `synced`: from the root's owner (process 0) starting it, right after the barrier
    /// that came first, to the last result; -1 otherwise.
    double synced_ms = -1;
    bool ok = true;
  };
  /// `synced`: every process gets "synced B `line`" instead (node_control.hpp): barrier
  /// B first, the collective the moment that barrier is released there; `synced_ms`
  /// leaves the commands' delivery out, as MPI benchmarks do after an MPI_Barrier.
  everywhere_outcome everywhere(const std::string& kind, std::uint64_t seq,
                                const std::string& line, bool synced = false);
  json workload_allreduce();
  json workload_barrier();
  json workload_allgather();

  std::string address(std::size_t k) const {
    return std::to_string(k) + "@" + children_[k]->host + ":" + std::to_string(children_[k]->port);
  }
  std::size_t total_vnodes() const { return opt_.procs * opt_.vnodes_per_proc; }
  std::string log_tail(const child& c) const;

  cluster_options opt_;
  std::optional<topology> topo_;
  std::string dir_;
  std::string secret_;
  std::string exe_;
  std::string scripts_;
  std::string netns_name_;
  bool netns_made_ = false;
  std::map<std::string, std::string> site_ip_; ///< netns: site -> its address
  std::vector<std::unique_ptr<child>> children_;
  int sfd_ = -1;
  sigset_t old_mask_{};
  bool masked_ = false;
  bool torn_down_ = false;
  bool failed_ = false;
  event_index ev_;
  std::uint64_t reduce_seq_ = 0;
  std::uint64_t allreduce_seq_ = 0;
  std::uint64_t barrier_seq_ = 0;
  std::uint64_t allgather_seq_ = 0;
};

template <class F>
void cluster_run::wait_for(F done, std::chrono::milliseconds limit, const std::string& what,
                           int only) {
  const auto deadline = clock_type::now() + limit;
  while (!done()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) {
      failed_ = true;
      throw cluster_failure{"timed out after " + std::to_string(limit.count()) + " ms waiting for "
                            + what};
    }
    pump(std::min(left, std::chrono::milliseconds(only < 0 ? 100 : 10)), only);
  }
}

} // namespace banyan::cli::cluster_detail

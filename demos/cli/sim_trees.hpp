#pragma once
// `banyan sim trees`: start the processors of a topology on the emulated network,
// wait until no tree changes, report what formed; optionally make half of the
// processors leave and rejoin and report how long the trees took to heal.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"

namespace banyan::cli {

struct sim_trees_options {
  std::string topology = "paper-3c201";
  std::uint64_t seed = 1;
  std::string clock = "virtual";
  std::string json_path;
  double leave_half_at_ms = -1;
  double rejoin_at_ms = -1;
  std::string dot_dir;
  std::vector<proc_id> dot_roots{0};
  double limit_s = 600;
  double share_quantum_us = 0; ///< net::wan_options::share_quantum (0: exact)
  std::string rules = "banyan"; ///< "banyan" or "paper"
  int extra = 10;               ///< extra measurements after every tree has a parent
  double local_bias = 0.5;      ///< chance a probe goes to a known LAN peer
  std::size_t explain_entries = 0; ///< trees per kind whose extra group entries are listed
  std::string events_path;  ///< a file of `at` lines: scheduled changes of the network
  double background_s = 0;  ///< background measurement period (0: off)
  double observe_s = -1;    ///< after formation (and churn), run until this emulated time
                            ///< and report the trees, parent changes and drifts again
  std::string changes_log;  ///< with observe_s: one line per parent change observed
  /// Trees on demand: the roots whose trees are opened at the start (empty, with
  /// open_roots 0: every member roots trees, supervisor_config::tree_set all_roots).
  std::vector<proc_id> roots;
  std::size_t open_roots = 0; ///< on demand, K roots spread over the processor ids
  /// With leave_half_at_ms: this many processors leave (spread over the ids) instead of
  /// half (0: half).
  std::size_t leave_count = 0;
  std::size_t view_buckets = 128; ///< supervisor_config::view_buckets (0: whole views)
  std::size_t reply_budget = 4096; ///< supervisor_config::reply_budget (0: none)
  /// Record the size of every probe reply without its padding, per phase (formation,
  /// each churn event, observation), and report median, p99 and max.
  bool reply_sizes = false;
  bool no_lan_search = false; ///< on demand: supervisor_config::lan_search off
  /// Once formed: a broadcast of `collective_bytes` and a reduction from each root opened
  /// (processor 0 when every member roots trees), each checked exactly once.
  bool collectives = false;
  std::size_t collective_bytes = 64 * 1024;
  bool verbose = true;
};

/// One churn event and how long the trees took to settle after it.
struct heal_event {
  std::string what; ///< "leave" or "rejoin"
  double at_ms = 0;
  std::size_t procs = 0;
  double restabilize_ms = 0;
  bool settled = false;
};

/// Half of the running processors (every other one, so each cluster loses half)
/// hand their vnodes to their nearest member and leave.
std::vector<proc_id> leave_half(actors::emulated_cluster& c);
/// `count` of the running processors, spread over them, hand their vnodes to their
/// nearest member and leave.
std::vector<proc_id> leave_some(actors::emulated_cluster& c, std::size_t count);
/// The given processors rejoin through a running processor of their own cluster and
/// take back the vnodes they started with.
void rejoin(actors::emulated_cluster& c, const std::vector<proc_id>& procs);

int run_sim_trees(const sim_trees_options& opt);

} // namespace banyan::cli

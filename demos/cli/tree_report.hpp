#pragma once
// Summaries of the trees a cluster formed: what `banyan sim trees` and the demo print
// and write as JSON.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"

namespace banyan::cli {

struct kind_stats {
  std::size_t trees = 0;
  std::size_t invalid = 0; ///< trees that do not span exactly the live processors
  double wan_edges_mean = 0;
  std::size_t wan_edges_max = 0;
  double depth_mean = 0;
  int depth_max = 0;
  /// Trees that enter every group of the topology (every level) at most once
  /// (core/group_entries.hpp), and the entries beyond that minimum, per tree.
  std::size_t entry_minimal = 0;
  std::size_t top_entry_minimal = 0; ///< the same over top-level groups only
  double excess_entries_mean = 0;
  std::string first_problem; ///< what is wrong with the first invalid tree
};

/// Over the trees of `roots` only (empty: every root the monitor saw; trees on demand
/// pass the roots opened).
kind_stats summarize(const actors::emulated_cluster& c, tree_kind kind,
                     const std::vector<proc_id>& roots = {});
nlohmann::json to_json(const kind_stats& s);

/// The groups tree `k` enters more often than needed, one line each: the group, and
/// every entering edge as child<-parent with its RTT. Empty when it is entry-minimal.
std::vector<std::string> explain_entries(const actors::emulated_cluster& c, tree_key k);

/// One line of progress: time, complete trees, measuring processors, changes. With
/// `roots` (trees on demand: the roots opened), only their trees are counted.
std::string progress_line(const actors::emulated_cluster& c, const std::vector<proc_id>& roots = {});

/// Writes the DOT of one tree; renders SVG next to it when graphviz is installed.
/// Returns the files written.
std::vector<std::string> export_tree(const actors::emulated_cluster& c, tree_key k,
                                     const std::string& dir);

/// Runs the cluster in emulated-time steps until it is quiet, printing progress.
/// Returns false when `limit` passed first.
bool run_with_progress(actors::emulated_cluster& c, duration limit, duration step,
                       bool verbose, const std::vector<proc_id>& roots = {});

} // namespace banyan::cli

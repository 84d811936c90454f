#pragma once
/// Reading the inputs of planning tools: matrices of one-way latencies (or bandwidths)
/// as CSV, and the groups processors belong to (clusters, sites, machines).
///
/// Matrix CSV (row = sender, column = receiver, one row and column per processor):
///
///     # one-way latency in ms            <- '#' lines and blank lines are skipped
///     ,    A,   B,   C                   <- optional header of names; an empty first
///     A,   0,  10,  12                      cell (or any label) heads a name column
///     B,  10,   0,  15                   <- rows may then start with their name, which
///     C,  12,  15,   0                      must match the column's
///
/// Cells are comma-separated, spaces around them are ignored. The first line is a header
/// when none of its cells (but an empty first one) is a number. Values must be finite
/// and not negative; the diagonal is read but not used by the builders.
///
/// Clusters file: one line per processor, `proc group0 [group1 ...]`, separated by
/// spaces and/or commas; `proc` is an id (0..n-1) or a name from the matrix header;
/// group k is the processor's group at level k, the slowest level first (site, then
/// machine); groups are names or numbers, read within the group of the level above.
/// Every processor appears exactly once and every line has the same number of groups.
///
///     # proc  site   machine
///     0       osaka  m0
///     1       osaka  m1
///     2       tokyo  m0
///
/// Without a clusters file, `clusters_by_threshold` groups processors whose one-way
/// latencies are below 1 ms (both directions) into one cluster.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "banyan/core/error.hpp"

namespace banyan {

/// A square matrix read from CSV, and the names its header gave (empty without one).
struct named_matrix {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values; ///< values[row][column]
};

/// Parses matrix CSV (see above). Errors are `errc::parse_error` naming the line (and
/// column) at fault: "line 3: expected 8 values, found 7", "line 4, column 2: 'x' is not
/// a number", "line 5, column 3: negative value -2", "3 columns but 2 rows (the matrix
/// must be square)".
expected<named_matrix> parse_matrix_csv(std::string_view text);

/// Reads and parses a matrix CSV file; parse errors are prefixed with the path, a file
/// that cannot be read is `errc::not_found`.
expected<named_matrix> load_matrix_csv(const std::string& path);

/// Parses a clusters file for `n` processors (see above); `names` are the matrix's
/// processor names, if any. Returns `groups[p][level]`, each level's groups numbered
/// 0, 1, ... in order of first appearance. Errors are `errc::parse_error`:
/// "line 4: processor 2 listed twice (first on line 2)", "processor 5 is not listed".
expected<std::vector<std::vector<int>>> parse_clusters(std::string_view text, std::size_t n,
                                                       const std::vector<std::string>& names = {});

/// Reads and parses a clusters file, like `load_matrix_csv`.
expected<std::vector<std::vector<int>>> load_clusters(const std::string& path, std::size_t n,
                                                      const std::vector<std::string>& names = {});

/// Clusters from latencies: p and q share a cluster when a chain of links joins them
/// whose one-way latencies are below `threshold_ms` in both directions (single linkage).
/// Clusters are numbered 0, 1, ... in order of their lowest processor.
std::vector<int> clusters_by_threshold(const std::vector<std::vector<double>>& latency,
                                       double threshold_ms = 1.0);

} // namespace banyan

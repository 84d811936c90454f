#pragma once
// `banyan plan`: builds a broadcast tree from a matrix of one-way latencies with one of
// the baseline algorithms (or banyan's own adaptive rule), prints it with its predicted
// completion time under the postal model, and optionally writes it as JSON.
//
//   banyan plan --matrix FILE.csv --root R --algo ALGO [--clusters FILE]
//               [--bandwidth FILE.csv] [--bytes N] [--seed S] [--json out.json]
//   banyan plan --topology T --root R [--seed S] [--json out.json]
//
// With --topology it prints the topology's oracles for a root instead: the 1-byte lower
// bound, the best static tree found offline under the send-overhead model, and the
// long-broadcast and long-reduction ceilings (core/static_tree_oracle.hpp,
// core/stream_ceiling.hpp).
//
// File formats and algorithms: docs/plan.md. Bad input: one error line, exit code 2.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace banyan::cli {

struct plan_options {
  std::string matrix;    ///< CSV of one-way latencies in ms
  std::string topology;  ///< instead of `matrix`: print this topology's oracles
  std::string root;      ///< processor id or name from the matrix header
  std::string algo;      ///< see plan_algorithms()
  std::string clusters;  ///< clusters file (magpie, multilevel); derived if empty
  std::string bandwidth; ///< CSV of bandwidths in Mbit/s (list; sa)
  std::string json_path; ///< where to write the result as JSON
  double message_bytes = 1;  ///< message size for sa's bandwidth term
  std::uint64_t seed = 1;    ///< sa and adaptive
};

/// The accepted values of --algo, in the order `banyan plan --help` lists them.
const std::vector<std::string>& plan_algorithms();

/// Runs `banyan plan`: 0 on success, 2 on bad input (after one line on stderr).
int run_plan(const plan_options& opt);

/// Registers the `plan` subcommand on `app`; when it is used, parsing sets `action` to
/// the function that runs it.
void add_plan_command(CLI::App& app, std::function<int()>& action);

} // namespace banyan::cli

#pragma once
// `banyan topology generate`: a random topology in the text format of docs/topology.md
// (core/topology_generator.hpp; the distribution is in docs/topology.md).
//
//   banyan topology generate --seed S [--procs N | --min-procs A --max-procs B]
//                            [--levels 2|3] [--clusters K] [--out FILE]
//
// Without --out the text goes to stdout. The same options give the same text forever.
// Bad options: one line on stderr, exit code 2.

#include <functional>

#include <CLI/CLI.hpp>

namespace banyan::cli {

/// Registers `generate` under the `topology` subcommand; when it is used, parsing sets
/// `action`.
void add_topology_generate_command(CLI::App& topology_cmd, std::function<int()>& action);

} // namespace banyan::cli

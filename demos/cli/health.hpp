#pragma once
// `banyan health FILE`: whether the `banyan node` keeping FILE (its --json-status) is a
// member, for container health checks and Kubernetes readiness probes.
//
//   banyan health /run/banyan/status.json    exit 0: a member; 1: not (yet, or any more:
//                                            one line on stderr says its state); 2: bad use
//
// The file is the node's own status (written whole, renamed into place), so this needs
// no port of its own and no other tool in the image.

#include <functional>

#include <CLI/CLI.hpp>

namespace banyan::cli {

/// Registers the `health` subcommand on `app`; when it is used, parsing sets `action` to
/// the function that runs it.
void add_health_command(CLI::App& app, std::function<int()>& action);

} // namespace banyan::cli

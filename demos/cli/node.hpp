#pragma once
// `banyan node`: one processor as an OS process, over real TCP (banyan::node).
//
//   banyan node --id N --listen HOST:PORT --secret-file F
//               [--join [ID@]HOST:PORT ... | --join-file F] [--join-timeout S]
//               [--vnodes SET] [--advertise HOST:PORT]
//               [--topology T [--site GROUP]] [--json-status FILE] [--control] [--seed S] [--threads N] [--busy-poll-us US] [--forward-overhead-us US]
//               [--metrics HOST:PORT] [--log-level error|warn|info|debug] [--log-format text|json] [-v]
//
// Without --join it founds the computation, owning --vnodes (default 0-1023); with it,
// it joins through the first contact that lets it in, asking for --vnodes (default: a
// share of the contact's). Contacts also come from --join-file (one per line or comma
// separated, '#' comments) or, when neither is given, the environment variable
// BANYAN_JOIN. A contact's host name is resolved to all its addresses (a Kubernetes
// headless service names every ready member), again before each attempt; --join-timeout
// keeps retrying until that many seconds have passed (0: one attempt). It logs membership and tree events, keeps --json-status up to
// date, and on SIGINT/SIGTERM leaves gracefully (hands its vnodes over), then exits 0.
// With --control it takes commands on stdin and answers with JSON lines on stdout
// (logs go to stderr): see node_control.hpp and docs/cluster.md. With --metrics it serves
// `GET /metrics` (Prometheus text format) at HOST:PORT (port 0: any free one, named in
// the "listening on" line and the status file); docs/observability.md. Its log lines go
// through one node_logger (node_logger.hpp): --log-level, --log-format, -v = debug.
// Exit codes: 0 done, 1 could not start or join, 2 bad arguments (one line on stderr).
// See docs/api.md.

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace banyan::cli {

struct node_options {
  std::string id;
  std::string listen;
  std::string advertise;
  std::vector<std::string> join;
  std::string join_file;          ///< contacts, one per line (or comma separated)
  std::string join_timeout_s = "0"; ///< keep retrying the join this long; 0: one attempt
  std::string vnodes;
  std::string secret_file;
  std::string topology;
  std::string site;
  std::string json_status;
  std::string leave_timeout_ms = "10000";
  std::string crash_timeout_ms = "10000";
  std::string seed = "0"; ///< the supervisor's randomness; 0: random
  std::string threads = "2"; ///< CAF worker threads
  std::string busy_poll_us = "0"; ///< net::tcp_config::busy_poll
  std::string handshakes_per_address = "8"; ///< node_config::handshakes_per_address
  std::string handshake_timeout_ms; ///< node_config::handshake_timeout (empty: the transport's)
  std::string probe_timeout_ms;   ///< supervisor_config::probe_timeout (empty: its default)
  std::string suspect_timeout_ms; ///< supervisor_config::suspect_timeout (empty: its default)
  /// supervisor_config::forward_overhead in microseconds (empty: its default)
  std::string forward_overhead_us;
  /// broadcast_config::segment_size and max_segment in KiB: one segment size for every
  /// long broadcast (empty: the node's defaults, 64 KiB up to 1 MiB by the message size)
  std::string segment_kib;
  bool no_bcast_acks = false; ///< broadcasts not acknowledged (no exactly-once through crashes)
  std::string metrics;              ///< IP:PORT to serve GET /metrics on (empty: none)
  std::string log_level = "info";   ///< error, warn, info, debug
  std::string log_format = "text";  ///< text, json
  bool log_level_given = false;     ///< --log-level was given (-v then must agree)
  bool verbose = false;             ///< -v: --log-level debug
  bool plaintext = false; ///< net::tcp_config::plaintext: frames unencrypted (trusted networks)
  bool control = false; ///< commands on stdin, JSON lines on stdout (node_control.hpp)
  std::vector<std::string> extras; ///< unrecognised arguments (an error)
};

/// Runs `banyan node` until a signal (or a failed join): 0, 1 or 2 as above.
int run_node(const node_options& opt);

/// Registers the `node` subcommand on `app`; when it is used, parsing sets `action` to
/// the function that runs it.
void add_node_command(CLI::App& app, std::function<int()>& action);

} // namespace banyan::cli

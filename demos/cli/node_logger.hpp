#pragma once
// The log of `banyan node`: every line it writes about itself goes through one
// `node_logger`, with a level (error, warn, info, debug: `--log-level`, default info; `-v`
// is `--log-level debug`) and in one of two formats (`--log-format`):
//
//   text:  node 3: member_joined: 5 at 127.0.0.1:7005          (info: no level word)
//          node 3: warn: member_crashed: processor 1 taken to have crashed ...
//   json:  {"ts":"2025-01-02T03:04:05.678Z","level":"info","node":3,"event":"member_joined",
//           "msg":"member_joined: 5 at 127.0.0.1:7005","fields":{"peer":5,"address":"..."}}
//
// One JSON object per line; "ts" is UTC wall-clock time with milliseconds. Lines about
// untrusted input (`hostile`) are also limited per category: at most one per second, the
// next one saying how many were held back (the transport limits them per address too).
// Not logs, so not here: usage errors before the node starts (`banyan node: ...` on
// stderr, the CLI's error contract) and the control protocol's JSON lines on stdout.

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "banyan/actors/node.hpp"
#include "banyan/core/types.hpp"
#include "banyan/net/log_limiter.hpp"

namespace banyan::cli {

/// Most severe first: a logger at level L writes the lines of L and of the levels above.
enum class log_level { error, warn, info, debug };
enum class log_format { text, json };

const char* to_string(log_level l);
std::optional<log_level> parse_log_level(std::string_view s);
std::optional<log_format> parse_log_format(std::string_view s);

/// One log line before it is formatted.
struct log_record {
  log_level level = log_level::info;
  std::string event;   ///< a short name: "member_joined", "listening", "hostile_input", ...
  std::string message; ///< the line a human reads
  nlohmann::ordered_json fields = nlohmann::ordered_json::object(); ///< the JSON format's details
};

/// "2025-01-02T03:04:05.678Z"
std::string utc_timestamp(std::chrono::system_clock::time_point t);

/// The line (without its newline) `r` makes in format `f` for processor `node` at `ts`.
std::string format_log_line(const log_record& r, log_format f, proc_id node,
                            std::chrono::system_clock::time_point ts);

/// The line of a node event (not `idle`, whose line the node makes from its status):
///   error:  none (the join's final failure and the like are the CLI's own lines)
///   warn:   member_crashed, vnodes_disowned, join_failed, collective; transport events
///           about untrusted input (`hostile_input`; see `untrusted_input`) or about a
///           peer holding another secret, version or mode (`misconfigured_peer`)
///   info:   joined, left, member_joined, member_left, vnodes_adopted, cycle_broken
///   debug:  parent_changed, busy, and the other transport events (connections up and
///           down, retries, a peer hanging up in its handshake: every join's first step,
///           learning the contact's id, does that, as does a joiner holding another
///           secret; the metrics count it as handshake_closed)
/// `fields` carries the event's details (peer, tree, root, parents, vnodes, reason, detail).
log_record record_of(const node_event& e);

/// Whether `e`'s line is about untrusted input (`node_logger::hostile`, category
/// "transport"): a hostile transport event other than a peer hanging up in its handshake.
bool untrusted_input(const node_event& e);

class node_logger {
public:
  /// `hostile_interval`: how often a line about untrusted input of one category gets
  /// through (see `hostile`).
  node_logger(proc_id node, log_level level, log_format format, std::ostream& out,
              duration hostile_interval = std::chrono::seconds(1));

  bool enabled(log_level l) const { return l <= level_; }
  /// Writes `r` (if its level is enabled), whole, at once.
  void log(log_record r);
  void error(std::string event, std::string message, nlohmann::ordered_json fields = {});
  void warn(std::string event, std::string message, nlohmann::ordered_json fields = {});
  void info(std::string event, std::string message, nlohmann::ordered_json fields = {});
  void debug(std::string event, std::string message, nlohmann::ordered_json fields = {});
  /// A line about untrusted input of `category` ("transport", "metrics"): at most one per
  /// hostile interval per category; the next one written says how many were held back
  /// (" [N more lines about untrusted input held back]", field "held_back").
  void hostile(std::string category, log_record r);

private:
  std::mutex mtx_;
  proc_id node_;
  log_level level_;
  log_format format_;
  std::ostream& out_;
  net::log_limiter limiter_;
};

} // namespace banyan::cli

#pragma once
// `banyan node --control`: a node driven by commands on stdin that answers with one JSON
// object per line on stdout (logs stay on stderr). `banyan cluster` and the multi-process
// tests drive nodes this way. The protocol (docs/cluster.md):
//
//   -> {"ev":"ready","id":N,"port":P,"vnodes":"0-9"}       after found/join succeeded
//   <- bcast BYTES           -> {"ev":"bcast","op":"O:S","size":B}   (t_us: when it started)
//                            -> everywhere, per delivery: {"ev":"delivered","op":"O:S",
//                               "kind":"broadcast"|"message","vnodes":K,"size":B,"ok":bool}
//   <- acks on [P:V ...]|off each node acks each broadcast it delivered all its vnodes of
//                            with one empty message to vnode V of the origin P; the origin
//                            prints {"ev":"acked","op":"O:S","acks":M} once all have acked
//                            (holding its bcast/delivered lines back until then, at
//                            most 50 ms: see emit_or_hold)
//   <- trace on|off          on: each delivery also prints {"ev":"delivered_to","op":"O:S",
//                            "set":"0-9"} (the vnodes), and the origin of each broadcast
//                            started here prints {"ev":"outcome","op":"O:S","ok":bool,
//                            "resends":N} or, failed, "detail" (`node::broadcast_outcome`)
//   <- send VNODE BYTES      -> {"ev":"sent","op":"O:S","size":B}; the receiver: delivered
//   <- reduce SEQ ROOT COUNT OP TYPE
//                            -> the root's owner {"ev":"reduced","seq":"S","vnodes":K,"ok":bool},
//                               the others {"ev":"reduce_sent","seq":"S"}
//   <- allreduce SEQ ROOT COUNT OP TYPE
//                            -> every member owning vnodes {"ev":"allreduced","seq":"S",
//                               "vnodes":K,"own":J,"ok":bool,"t_start_us":T}
//   <- barrier SEQ           -> every member owning vnodes {"ev":"released","seq":"S",
//                               "t_start_us":T}
//   <- allgather SEQ ROOT BLOCK
//                            -> every member {"ev":"allgathered","seq":"S","vnodes":K,
//                               "ok":bool,"t_start_us":T} (one owning no vnode
//                               {"ev":"allgather_sent",...}); T: when it called the node
//   <- synced BSEQ allreduce ...|barrier ...|allgather ...
//                            starts barrier BSEQ, and the collective (as above) the moment
//                            that barrier is released here (T: then): timed from the
//                            root's T, as MPI benchmarks time from after an MPI_Barrier
//   <- leave | join ADDR | status | quit
//                            -> {"ev":"left"} | {"ev":"ready",...} | {"ev":"status",...} | exit
//   -> {"ev":"error","detail":"..."}                       for a bad command (keeps running)
//
// 64-bit names are strings ("op":"O:S", "seq":"S"): JSON readers that hold numbers in
// doubles (jq, JavaScript) would round them above 2^53.
//
// Every line carries "t_us": CLOCK_MONOTONIC microseconds (std::chrono::steady_clock), so
// lines of processes on one host compare (also across network namespaces).
//
// Payloads follow a pattern the receiver checks: byte i of operation S is
// (i*131 + S) & 0xff. Vnode v contributes element i = ((v*31 + i*7 + SEQ) % 17) - 8 to
// reduction or allreduce SEQ; the root's owner (every member, for an allreduce) checks the
// result against that formula. Vnode v's block of allgather SEQ is the pattern of
// operation SEQ + 31 v.

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "banyan/actors/node.hpp"

namespace banyan::cli {

/// A decimal number of at most `max` (digits only; no sign, no spaces); nothing otherwise.
std::optional<std::uint64_t> parse_uint(const std::string& s, std::uint64_t max);

/// The pattern byte i of operation `seq` carries.
std::uint8_t pattern_byte(std::size_t i, std::uint64_t seq);
/// `n` bytes of the pattern of operation `seq`.
shared_bytes pattern_bytes(std::size_t n, std::uint64_t seq);
/// Whether `b` is the pattern of operation `seq`.
bool is_pattern(const shared_bytes& b, std::uint64_t seq);
/// Element i of vnode v's contribution to reduction `seq`.
std::int64_t reduce_element(vnode_id v, std::size_t i, std::uint64_t seq);
/// Vnode v's contribution to reduction `seq`: `count` elements of `type`.
std::vector<std::uint8_t> reduce_contribution(element_type type, vnode_id v, std::size_t count,
                                              std::uint64_t seq);
/// Whether `value` is the reduction `op` over `vnodes` of `count` elements each (floats
/// within a relative 1e-5: their result depends on the order of combination).
bool reduce_result_ok(const reduce_op& op, const vnode_set& vnodes, std::size_t count,
                      std::uint64_t seq, const shared_bytes& value);

/// The "delivered" line (without the newline), written out directly: the same text as
/// nlohmann's dump of that object, without building one. It is written on every
/// receiver's loop thread right after the ack, on the path of each hop, and building the
/// object cost about as much as the rest of the handler.
std::string delivered_line(const wire::collective_id& op, bool message, std::size_t vnodes,
                           std::size_t size, bool ok, std::int64_t t_us);

/// The command interpreter of one node. Methods other than the delivery handler are
/// called from one thread (the one reading stdin). The collectives it starts report
/// through callbacks that name it: stop the node before the session goes while any is
/// pending (a stopping node answers them all).
class control_session {
public:
  /// Writes one line on stdout: a JSON object (without the newline) that has "t_us".
  using emit_fn = std::function<void(const std::string&)>;

  /// `wanted`: the vnodes asked for when joining again (empty: a share).
  /// `hold`: how long the origin may hold its lines back while its broadcast waits for
  /// acks (see `emit_or_hold`).
  control_session(banyan::node& n, vnode_set wanted, emit_fn emit,
                  std::chrono::microseconds hold = std::chrono::milliseconds(50));
  ~control_session();

  /// After found or join succeeded: prints "ready".
  void ready();
  /// One command line. Returns false for `quit`.
  bool handle(const std::string& line);
  /// Reports the broadcasts and sends that started, and forgets the operations that
  /// finished. Call now and then: often while `busy`.
  void collect();
  /// Whether a broadcast or send waits for `collect` to report it.
  bool busy();
  /// Waits (at most `limit`) for the operations still pending; call after `node::stop`.
  void finish(std::chrono::milliseconds limit);

private:
  void on_delivery(const node_delivery& d);
  void error(const std::string& detail);
  /// Whether this node is a member; if not, the error line "`what`: not a member".
  bool member_for(const std::string& what);
  void cmd_bcast(std::istringstream& in);
  void cmd_send(std::istringstream& in);
  void cmd_acks(std::istringstream& in);
  void cmd_trace(std::istringstream& in);
  void cmd_reduce(std::istringstream& in);
  // The collectives every member starts (node_control_everywhere.cpp).
  /// Starts the collective a command asked for; set up by `prepare` (empty: the command
  /// was wrong, an error line written). It stamps its start, and its result line is
  /// written from the node's `done` callback.
  using starter = std::function<void()>;
  starter prepare(const std::string& cmd, std::istringstream& in);
  starter prepare_allreduce(std::istringstream& in);
  starter prepare_barrier(std::istringstream& in);
  starter prepare_allgather(std::istringstream& in);
  void cmd_everywhere(const std::string& cmd, std::istringstream& in);
  void cmd_synced(std::istringstream& in);
  /// Runs `fn` (checks a result, writes its line) here, or when `heavy` on a thread of
  /// its own.
  void report(bool heavy, std::function<void()> fn);
  void cmd_leave();
  void cmd_join(std::istringstream& in);
  /// Runs `then(result)` on a thread of its own once `f` is ready (or reports a timeout).
  template <class T, class F>
  void await(std::future<T> f, std::string what, F then);
  /// Runs `then(result)` in `collect` once `f` is ready (no thread: cheaper for the
  /// broadcasts and sends whose start is timed).
  void watch(std::future<expected<wire::collective_id>> f, std::string what,
             std::function<void(expected<wire::collective_id>)> then);
  /// The sequence number the next operation started here will get.
  std::uint64_t next_seq();
  void started(const wire::collective_id& id, std::uint64_t predicted);
  /// Writes `j`, or holds it back while one of our broadcasts started less than `hold`
  /// ago waits for its acks: the driver, woken by every line, would take the CPU from
  /// the operation being timed. Held lines go out right before an "acked" line, from
  /// `collect` once `hold` has passed since the first was held, and from `finish`.
  void emit_or_hold(nlohmann::json j);
  /// The same for a line already written out (with its "t_us").
  void emit_or_hold(std::string line);
  /// Writes `j`, adding "t_us": now unless it is there.
  void put(nlohmann::json j);
  /// The held lines, in order (under mtx_); emits them.
  void flush_held_locked();

  banyan::node& n_;
  vnode_set wanted_;
  emit_fn emit_;
  std::int64_t hold_us_; ///< see emit_or_hold

  std::mutex mtx_; // guards what follows (the actor's handler and the command thread)
  std::uint64_t next_seq_ = 1;
  bool acks_ = false;
  bool trace_ = false; ///< `trace on`
  std::map<proc_id, vnode_id> ack_to_; ///< where each origin takes its acks
  /// Broadcasts delivered here: the vnodes reached so far, and whether acked.
  struct received {
    vnode_set vnodes;
    bool acked = false;
  };
  std::map<wire::collective_id, received> received_;
  /// Our broadcasts waiting for acks, by the low 32 bits of their number: who should
  /// ack, who did, and the name (known once the broadcast's future resolved).
  struct awaiting {
    std::set<proc_id> expected;
    std::set<proc_id> acked;
    std::string name;
    std::int64_t acked_at = -1; ///< when the last ack came (t_us); -1: not yet
    std::int64_t started_at = 0; ///< t_us
  };
  std::vector<std::string> held_;    ///< see emit_or_hold
  std::int64_t held_since_ = 0;      ///< t_us of the first held line
  std::map<std::uint64_t, awaiting> awaiting_;
  std::list<std::future<void>> pending_;
  struct watched {
    std::future<expected<wire::collective_id>> f;
    std::chrono::steady_clock::time_point deadline;
    std::string what;
    std::function<void(expected<wire::collective_id>)> then;
  };
  std::list<watched> watched_;
  /// Acks handed to the node: their guessed number and outcome.
  std::list<std::pair<std::uint64_t, std::future<expected<wire::collective_id>>>> acks_sent_;
};

} // namespace banyan::cli

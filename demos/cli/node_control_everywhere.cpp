// `banyan node --control`: the collectives every member starts (allreduce, barrier,
// allgather), and `synced`, which starts one of them right after a barrier of its own.
//
// Their results come back through `node_reduction::done` / `node_gather::done`: the
// line is written on the node's thread that got the result, with no thread woken for
// it. Checking a result of more than `heavy_result` bytes moves to a thread of its own
// (its time is taken first): the loop that got it may still have segments to send.
#include <functional>
#include <limits>
#include <sstream>

#include "banyan/core/gather.hpp"
#include "node_control.hpp"
#include "node_control_parse.hpp"

namespace banyan::cli {

using namespace control_detail;

namespace {

/// Results above this many bytes are checked on a thread of their own (see above).
constexpr std::size_t heavy_result = 64 * 1024;

/// Vnode v's block of allgather `seq`: the pattern of operation `seq + 31 v`.
shared_bytes gather_block(vnode_id v, std::size_t bytes, std::uint64_t seq) {
  return pattern_bytes(bytes, seq + std::uint64_t{31} * v);
}

} // namespace

void control_session::report(bool heavy, std::function<void()> fn) {
  if (!heavy) {
    fn();
    return;
  }
  std::lock_guard<std::mutex> lk(mtx_);
  pending_.push_back(std::async(std::launch::async, std::move(fn)));
}

control_session::starter control_session::prepare(const std::string& cmd, std::istringstream& in) {
  if (cmd == "allreduce")
    return prepare_allreduce(in);
  if (cmd == "barrier")
    return prepare_barrier(in);
  if (cmd == "allgather")
    return prepare_allgather(in);
  error("synced: unknown collective \"" + cmd + "\" (allreduce, barrier, allgather)");
  return {};
}

void control_session::cmd_synced(std::istringstream& in) {
  std::string bseq_s, cmd;
  in >> bseq_s >> cmd;
  auto bseq = parse_uint(bseq_s, std::numeric_limits<std::uint64_t>::max());
  if (!bseq || cmd.empty())
    return error("usage: synced BARRIER_SEQ allreduce|barrier|allgather ARGS...");
  if (!member_for("synced"))
    return;
  auto start = prepare(cmd, in);
  if (!start)
    return;
  // The barrier's release runs `start` on the node's thread that got it, at once.
  node_reduction r;
  r.seq = *bseq;
  r.over = collective_kind::barrier;
  r.done = [this, b = *bseq, start = std::move(start)](const expected<reduce_result>& res) {
    if (!res)
      return error("synced: barrier " + std::to_string(b) + ": " + res.err().to_string());
    start();
  };
  n_.reduce(std::move(r));
}

control_session::starter control_session::prepare_allreduce(std::istringstream& in) {
  const auto a = parse_reduction(in);
  if (!a) {
    error("usage: allreduce SEQ ROOT COUNT sum|min|max|prod int32|int64|float|double");
    return {};
  }
  if (!member_for("allreduce"))
    return {};
  // The result is checked against every vnode of the namespace as this node knows it now
  // (the result itself names only this node's vnodes).
  vnode_set all;
  for (auto m : n_.members())
    all |= n_.vnodes_of(m);
  const auto s = a->seq;
  const auto n = a->count;
  const auto ty = a->type;
  const reduce_op op{a->kind, ty, 0};
  const vnode_id rv = a->root;
  return [this, s, n, ty, op, rv, all] {
    node_reduction r;
    r.seq = s;
    r.root = rv;
    r.op = op;
    r.count = n;
    r.values = [s, n, ty](vnode_id v) { return reduce_contribution(ty, v, n, s); };
    const auto t_start = now_us();
    r.done = [this, s, n, op, all, t_start](const expected<reduce_result>& res) {
      if (!res)
        return error("allreduce " + std::to_string(s) + ": " + res.err().to_string());
      const auto t = now_us(); // when it came, not when it was checked
      report(res->value.size() > heavy_result, [this, s, n, op, all, t_start, t, res] {
        const bool ok = reduce_result_ok(op, all, n, s, res->value);
        put({{"ev", "allreduced"},
             {"seq", std::to_string(s)},
             {"vnodes", all.size()},
             {"own", res->vnodes.size()},
             {"ok", ok},
             {"t_start_us", t_start},
             {"t_us", t}});
      });
    };
    n_.allreduce(std::move(r));
  };
}

control_session::starter control_session::prepare_barrier(std::istringstream& in) {
  std::string seq_s;
  in >> seq_s;
  auto seq = parse_uint(seq_s, std::numeric_limits<std::uint64_t>::max());
  if (!seq || trailing(in)) {
    error("usage: barrier SEQ");
    return {};
  }
  if (!member_for("barrier"))
    return {};
  const auto s = *seq;
  return [this, s] {
    node_reduction r;
    r.seq = s;
    r.over = collective_kind::barrier;
    const auto t_start = now_us();
    r.done = [this, s, t_start](const expected<reduce_result>& res) {
      if (!res)
        return error("barrier " + std::to_string(s) + ": " + res.err().to_string());
      put({{"ev", "released"},
           {"seq", std::to_string(s)},
           {"t_start_us", t_start},
           {"t_us", now_us()}});
    };
    n_.reduce(std::move(r));
  };
}

control_session::starter control_session::prepare_allgather(std::istringstream& in) {
  std::string seq_s, root_s, block_s;
  in >> seq_s >> root_s >> block_s;
  auto seq = parse_uint(seq_s, std::numeric_limits<std::uint64_t>::max());
  auto root = parse_uint(root_s, vnode_set::max_member);
  auto block = parse_uint(block_s, max_payload);
  if (!seq || !root || !block || *block == 0 || trailing(in)) {
    error("usage: allgather SEQ ROOT BLOCK (bytes per vnode, at least 1)");
    return {};
  }
  if (!member_for("allgather"))
    return {};
  const auto s = *seq;
  const auto b = *block;
  const vnode_id rv = static_cast<vnode_id>(*root);
  return [this, s, b, rv] {
    node_gather g;
    g.seq = s;
    g.root = rv;
    g.block = b;
    g.values = [s, b](vnode_id v) { return gather_block(v, b, s).to_vector(); };
    // The root's owner broadcasts the blocks, numbered with this node's broadcasts and
    // sends: the next of those numbers goes to it.
    if (n_.own_vnodes().contains(g.root))
      next_seq();
    const auto t_start = now_us();
    g.done = [this, s, b, t_start](const expected<reduce_result>& res) {
      if (!res)
        return error("allgather " + std::to_string(s) + ": " + res.err().to_string());
      const auto t = now_us(); // when it came, not when it was checked
      if (res->value.empty()) {
        put({{"ev", "allgather_sent"},
             {"seq", std::to_string(s)},
             {"t_start_us", t_start},
             {"t_us", t}});
        return;
      }
      report(res->value.size() > heavy_result, [this, s, b, t_start, t, res] {
        bool ok = res->value.size() == res->vnodes.size() * b;
        if (ok)
          for (auto& [v, blk] : gathered_blocks(*res))
            ok = ok && blk == gather_block(v, b, s);
        put({{"ev", "allgathered"},
             {"seq", std::to_string(s)},
             {"vnodes", res->vnodes.size()},
             {"ok", ok},
             {"t_start_us", t_start},
             {"t_us", t}});
      });
    };
    n_.allgather(std::move(g));
  };
}

void control_session::cmd_everywhere(const std::string& cmd, std::istringstream& in) {
  if (auto start = prepare(cmd, in))
    start();
}

} // namespace banyan::cli

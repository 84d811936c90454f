// `banyan cluster`: the workloads every process takes part in (allreduce, barrier,
// allgather), each timed from the driver writing the commands to the last process's
// result, and again started right after a barrier of their own, timed from the root's
// start to the last result (cluster_run.hpp, docs/cluster.md).
#include <algorithm>
#include <cstdio>

#include "cluster_run.hpp"

namespace banyan::cli::cluster_detail {

namespace {

std::size_t error_count(const event_index& ev) {
  std::size_t n = 0;
  for (auto& [k, e] : ev.errors)
    n += e.size();
  return n;
}

} // namespace

cluster_run::everywhere_outcome cluster_run::everywhere(const std::string& kind, std::uint64_t seq,
                                                        const std::string& line_in, bool synced) {
  const auto line = synced ? "synced " + std::to_string(++barrier_seq_) + " " + line_in : line_in;
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  const auto errors = error_count(ev_);
  auto& done = ev_.finished[kind][seq];
  auto failed = [&] { return error_count(ev_) > errors; };
  const auto t0 = now_us();
  for (std::size_t k = opt_.procs; k-- > 0;) // process 0 (the root's owner) last
    command(k, line);
  // Process 0 first, alone: the others' result lines wait in their pipes, so that reading
  // them does not take the CPU from the processes still working (as for broadcasts).
  wait_for([&] { return done.count(0) > 0 || failed(); }, limit,
           kind + " " + std::to_string(seq) + " at process 0", 0);
  wait_for([&] { return done.size() >= opt_.procs || failed(); }, limit,
           kind + " " + std::to_string(seq) + " (" + std::to_string(done.size()) + " of "
             + std::to_string(opt_.procs) + " processes done)");
  if (failed())
    throw cluster_failure{kind + " " + std::to_string(seq) + " failed: " + [&] {
      for (auto& [k, e] : ev_.errors)
        if (!e.empty())
          return "process " + std::to_string(k) + ": " + e.back();
      return std::string("an error");
    }()};
  everywhere_outcome o;
  std::int64_t first = -1, last = t0, last_start = t0;
  o.start_ms.assign(opt_.procs, -1);
  o.done_ms.assign(opt_.procs, -1);
  for (auto& [k, j] : done) {
    const auto t = j.value("t_us", t0);
    if (k < opt_.procs) {
      o.start_ms[k] = static_cast<double>(j.value("t_start_us", t0) - t0) / 1000.0;
      o.done_ms[k] = static_cast<double>(t - t0) / 1000.0;
    }
    last_start = std::max(last_start, j.value("t_start_us", t0));
    last = std::max(last, t);
    first = first < 0 ? t : std::min(first, t);
    o.ok = o.ok && j.value("ok", true) && j.value("ev", "") != "allgather_sent" // no blocks came
           && (!j.contains("vnodes") || j.value("vnodes", std::size_t{0}) == total_vnodes());
  }
  o.completion_ms = static_cast<double>(last - t0) / 1000.0;
  o.first_ms = static_cast<double>(first - t0) / 1000.0;
  o.from_last_start_ms = static_cast<double>(last - last_start) / 1000.0;
  o.last_start_ms = static_cast<double>(last_start - t0) / 1000.0;
  if (synced && done.count(0) > 0)
    o.synced_ms = static_cast<double>(last - done.at(0).value("t_start_us", last)) / 1000.0;
  return o;
}

namespace {

/// One size's row: 1 + reps runs of `run` (the first warms up), the medians. Each run is
/// `run(false)`, timed from the commands, then `run(true)`, timed from the root's start
/// after a barrier ("synced_ms").
template <class F>
json timed_row(std::size_t reps, F run) {
  std::vector<double> completion, first, from_start, last_start, synced;
  std::vector<std::vector<double>> start, done;
  bool ok = true, synced_ok = true;
  for (std::size_t r = 0; r < reps + 1; ++r) {
    auto o = run(false);
    auto so = run(true);
    ok = ok && o.ok;
    synced_ok = synced_ok && so.ok;
    if (r == 0)
      continue;
    synced.push_back(so.synced_ms);
    start.resize(o.start_ms.size());
    done.resize(o.done_ms.size());
    for (std::size_t k = 0; k < o.start_ms.size(); ++k) {
      start[k].push_back(o.start_ms[k]);
      done[k].push_back(o.done_ms[k]);
    }
    completion.push_back(o.completion_ms);
    first.push_back(o.first_ms);
    from_start.push_back(o.from_last_start_ms);
    last_start.push_back(o.last_start_ms);
  }
  std::vector<double> start_med, done_med;
  for (auto& v : start)
    start_med.push_back(median(v));
  for (auto& v : done)
    done_med.push_back(median(v));
  return {{"algorithm", "dynamic"},
          {"per_proc_start_ms", start_med},
          {"per_proc_done_ms", done_med},
          {"completion_ms", median(completion)},
          {"first_ms", median(first)},
          {"from_last_start_ms", median(from_start)},
          {"last_start_ms", median(last_start)},
          {"runs_ms", completion},
          {"from_last_start_runs_ms", from_start},
          {"synced_ms", median(synced)},
          {"synced_runs_ms", synced},
          {"synced_ok", synced_ok},
          {"ok", ok && synced_ok}};
}

} // namespace

json cluster_run::workload_allreduce() {
  json results = json::array();
  const auto sizes = *parse_sizes(opt_.allreduce_sizes);
  for (auto size : sizes) {
    progress("allreduce: int32 sums of " + std::to_string(size)
             + " bytes per vnode, one to warm up and " + std::to_string(opt_.reps) + " timed");
    auto row = timed_row(opt_.reps, [&](bool synced) {
      const auto seq = ++allreduce_seq_;
      return everywhere("allreduce", seq,
                        "allreduce " + std::to_string(seq) + " 0 " + std::to_string(size / 4)
                          + " sum int32",
                        synced);
    });
    row["size"] = size;
    std::fprintf(stderr, "cluster: allreduce: %llu bytes: %.3f ms, synced %.3f ms%s\n",
                 static_cast<unsigned long long>(size), row["completion_ms"].get<double>(),
                 row["synced_ms"].get<double>(),
                 row["ok"].get<bool>() ? "" : " (WRONG RESULT)");
    results.push_back(row);
  }
  return {{"results", results}};
}

json cluster_run::workload_barrier() {
  progress("barrier: one to warm up and " + std::to_string(opt_.reps) + " timed");
  auto row = timed_row(opt_.reps, [&](bool synced) {
    const auto seq = synced ? barrier_seq_ + 2 : ++barrier_seq_; // synced: its barrier first
    auto o = everywhere("barrier", seq, "barrier " + std::to_string(seq), synced);
    barrier_seq_ = std::max(barrier_seq_, seq);
    return o;
  });
  std::fprintf(stderr, "cluster: barrier: %.3f ms, synced %.3f ms%s\n",
               row["completion_ms"].get<double>(), row["synced_ms"].get<double>(),
               row["ok"].get<bool>() ? "" : " (FAILED)");
  return {{"results", json::array({row})}};
}

json cluster_run::workload_allgather() {
  json results = json::array();
  const auto sizes = *parse_sizes(opt_.allgather_sizes);
  for (auto size : sizes) {
    const auto block = size / opt_.vnodes_per_proc;
    progress("allgather: " + std::to_string(size) + " bytes per process (" + std::to_string(block)
             + " per vnode), one to warm up and " + std::to_string(opt_.reps) + " timed");
    auto row = timed_row(opt_.reps, [&](bool synced) {
      const auto seq = ++allgather_seq_;
      return everywhere("allgather", seq,
                        "allgather " + std::to_string(seq) + " 0 " + std::to_string(block),
                        synced);
    });
    row["size"] = size;
    row["block"] = block;
    std::fprintf(stderr, "cluster: allgather: %llu bytes per process: %.3f ms, synced %.3f ms%s\n",
                 static_cast<unsigned long long>(size), row["completion_ms"].get<double>(),
                 row["synced_ms"].get<double>(),
                 row["ok"].get<bool>() ? "" : " (WRONG RESULT)");
    results.push_back(row);
  }
  return {{"results", results}};
}

} // namespace banyan::cli::cluster_detail

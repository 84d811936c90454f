// `banyan cluster`: forming the cluster and the workloads, each timed the paper's way
// from the processes' own stamps (cluster_run.hpp, docs/cluster.md).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "banyan/core/tree_builders.hpp"
#include "cluster_run.hpp"
#include "join_waves.hpp"

namespace banyan::cli::cluster_detail {

namespace {

/// Whether every process in `ks` has said more since `before` was taken: `count[k]`
/// (how often it said it) differs from `before[k]`.
bool all_moved_on(const std::vector<std::size_t>& ks, std::map<std::size_t, std::size_t>& count,
                  std::map<std::size_t, std::size_t>& before) {
  for (auto k : ks)
    if (count[k] == before[k])
      return false;
  return true;
}

} // namespace

std::optional<std::vector<std::uint64_t>> parse_sizes(const std::string& s) {
  std::vector<std::uint64_t> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos
        || part.size() > 12)
      return std::nullopt;
    out.push_back(std::stoull(part));
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void cluster_run::start_all() {
  const auto t0 = clock_type::now();
  progress("starting " + std::to_string(opt_.procs) + " processes"
           + (topo_ ? " on " + topo_->name : std::string()) + (opt_.netns ? " in namespaces" : "")
           + " (logs in " + dir_ + ")");
  spawn(0, {});
  wait_for([&] { return ev_.readies[0] > 0; }, 20s, "process 0 to found the computation");
  // Joins go in waves through several contacts (plan_join_waves). A contact handles
  // each join (a share of vnodes handed over, a member_joined to every member) on its
  // own loop, and every member then connects to each newcomer: 127 joins at one contact
  // at once left joins unanswered within the supervisor's 3 x probe_timeout on 2 cores.
  // Every joiner asks for its own vnodes, which process 0 owns until it hands them over,
  // whoever the contact: a wave is also at most 16. Measured on 2 cores at 128
  // processes: waves of 4 and 20 all got their vnodes; of a wave of 100, 39 joiners
  // stopped waiting for process 0's handover (sup.probe_timeout after being let in).
  // Each joiner keeps retrying through its contacts (`--join-timeout`, spawn).
  const auto waves = plan_join_waves(opt_.procs);
  std::size_t upto = 1;
  for (auto& wave : waves) {
    for (auto& p : wave) {
      std::vector<std::string> contacts;
      for (auto c : p.contacts)
        contacts.push_back(address(c));
      spawn(p.proc, contacts);
    }
    upto += wave.size();
    wait_for(
      [&] {
        for (std::size_t k = 0; k < upto; ++k)
          if (!ev_.readies[k])
            return false;
        return true;
      },
      // Outlasts the joiners' own retries (--join-timeout 60, spawn): a joiner that gives
      // up exits, which this wait reports at once, with its reason.
      std::chrono::milliseconds(20000 + 2000 * wave.size() + 60000), "every process to join");
  }
  // A joiner that stopped waiting for its vnodes is ready owning none (docs/api.md,
  // "join resolves owning"); they may still come (a handover that was slow) or not (one
  // that was lost): the count is said here, and a broadcast it cannot ack fails.
  std::size_t without = 0;
  for (std::size_t k = 1; k < opt_.procs; ++k)
    without += ev_.ready[k].value("vnodes", std::string()).empty();
  progress("all " + std::to_string(opt_.procs) + " ready after "
           + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count())
           + " ms (" + std::to_string(waves.size()) + " waves of joins"
           + (without ? ", " + std::to_string(without) + " joiners ready before their vnodes came" : std::string())
           + ")");
}

void cluster_run::wait_converged(std::chrono::milliseconds limit) {
  const auto t0 = clock_type::now();
  std::string why = "no status yet";
  wait_for(
    [&] {
      std::map<std::size_t, std::size_t> before;
      std::vector<std::size_t> live;
      for (std::size_t k = 0; k < children_.size(); ++k)
        if (children_[k] && children_[k]->alive && !children_[k]->expected_exit) {
          before[k] = ev_.statuses[k];
          live.push_back(k);
          command(k, "status");
        }
      wait_for([&] { return all_moved_on(live, ev_.statuses, before); }, 10s, "status replies");
      std::size_t members_expected = 0;
      for (auto k : live)
        members_expected += ev_.status[k].value("state", "") == "member";
      for (auto k : live) {
        auto& s = ev_.status[k];
        if (s.value("state", "") != "member")
          continue;
        if (!s.value("all_parented", false) || s.value("busy", true)
            || s["members"].size() != members_expected) {
          why = "process " + std::to_string(k) + " still forming (" + s.dump() + ")";
          return false;
        }
      }
      return true;
    },
    limit, "the trees to converge");
  progress("trees converged after "
           + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count())
           + " ms");
  (void)why;
}

cluster_run::bcast_outcome cluster_run::broadcast(std::size_t root, std::uint64_t bytes,
                                                  bool wait_acks) {
  bcast_outcome o;
  const auto had = ev_.started[root].size();
  const auto errors = ev_.errors[root].size();
  command(root, "bcast " + std::to_string(bytes));
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  wait_for([&] { return ev_.started[root].size() > had || ev_.errors[root].size() > errors; }, limit,
           "process " + std::to_string(root) + " to start a broadcast",
           wait_acks ? static_cast<int>(root) : -1); // see below
  if (ev_.started[root].size() == had)
    throw cluster_failure{"process " + std::to_string(root) + " could not broadcast: "
                          + ev_.errors[root].back()};
  auto started = ev_.started[root].back();
  o.op = started.value("op", "");
  o.t0 = started.value("t_us", std::int64_t{0});
  const auto want = total_vnodes();
  auto count = [&] {
    std::size_t n = 0;
    for (auto& [k, j] : ev_.delivered[o.op])
      n += j.value("vnodes", std::size_t{0});
    return n;
  };
  if (wait_acks) {
    // Until the root has every ack, read the root alone: the others' "delivered" lines
    // wait in their pipes, so that this process does not take the CPU from the timed
    // operation on a small machine (every line would wake it up and be parsed at once).
    // The times are the processes' own stamps either way.
    wait_for([&] { return ev_.acked.count(o.op) > 0; }, limit,
             "the acks of broadcast " + o.op + " of " + std::to_string(bytes) + " bytes",
             static_cast<int>(root));
  }
  wait_for([&] { return count() >= want && (!wait_acks || ev_.acked.count(o.op)); }, limit,
           "broadcast " + o.op + " of " + std::to_string(bytes) + " bytes ("
             + std::to_string(count()) + " of " + std::to_string(want) + " vnodes reached"
             + (wait_acks ? ", acks " + std::string(ev_.acked.count(o.op) ? "in" : "pending") : "")
             + ")");
  o.vnodes = count();
  o.per_proc_ms.assign(opt_.procs, -1);
  for (auto& [k, j] : ev_.delivered[o.op]) {
    const double ms = static_cast<double>(j.value("t_us", std::int64_t{0}) - o.t0) / 1000.0;
    if (k < o.per_proc_ms.size() && (o.per_proc_ms[k] < 0 || ms < o.per_proc_ms[k]))
      o.per_proc_ms[k] = ms;
    o.completion_ms = std::max(o.completion_ms, ms);
    o.ok = o.ok && j.value("ok", false);
  }
  if (wait_acks)
    o.acked_ms = static_cast<double>(ev_.acked[o.op].value("t_us", std::int64_t{0}) - o.t0) / 1000.0;
  return o;
}

namespace {

double lower_bound_ms(const topology* topo, std::size_t procs) {
  if (!topo)
    return 0;
  auto full = latency_matrix(*topo);
  cost_matrix m(procs, std::vector<double>(procs, 0));
  for (std::size_t a = 0; a < procs; ++a)
    for (std::size_t b = 0; b < procs; ++b)
      m[a][b] = full[a][b];
  return farthest_shortest_path(m, 0);
}

} // namespace

json cluster_run::workload_latency() {
  progress("latency: " + std::to_string(opt_.reps) + " 1-byte broadcasts from process 0");
  broadcast(0, 1, opt_.acks); // warm-up: connections opened on first use
  std::vector<double> completion, acked, med;
  std::vector<std::vector<double>> per_proc(opt_.procs);
  bool complete = true;
  for (std::size_t r = 0; r < opt_.reps; ++r) {
    auto o = broadcast(0, 1, opt_.acks);
    completion.push_back(o.completion_ms);
    if (opt_.acks)
      acked.push_back(o.acked_ms);
    std::vector<double> reached;
    for (std::size_t k = 0; k < opt_.procs; ++k) {
      per_proc[k].push_back(o.per_proc_ms[k]);
      if (o.per_proc_ms[k] >= 0)
        reached.push_back(o.per_proc_ms[k]);
    }
    med.push_back(median(reached));
    complete = complete && o.ok && o.vnodes == total_vnodes();
  }
  std::vector<double> pp;
  for (auto& v : per_proc)
    pp.push_back(median(v));
  json r{{"algorithm", "dynamic"},
         {"completion_ms", median(completion)},
         {"median_ms", median(med)},
         {"per_proc_ms", pp},
         {"runs_ms", completion},
         {"complete", complete}};
  if (opt_.acks) {
    r["acked_ms"] = median(acked);
    r["acked_runs_ms"] = acked;
  }
  std::fprintf(stderr, "cluster: latency: completion %.3f ms (median of %zu)%s\n",
               median(completion), opt_.reps,
               opt_.acks ? (", with acks " + std::to_string(median(acked)) + " ms").c_str() : "");
  return {{"lower_bound_ms", lower_bound_ms(topo_ ? &*topo_ : nullptr, opt_.procs)},
          {"results", json::array({r})}};
}

json cluster_run::workload_bandwidth() {
  auto sizes = *parse_sizes(opt_.sizes);
  json results = json::array();
  for (auto size : sizes) {
    progress("bandwidth: " + std::to_string(size) + "-byte broadcasts from process 0, one to warm up and "
             + std::to_string(opt_.reps) + " timed");
    std::vector<double> completion, acked;
    bool complete = true;
    // The first one warms up, as in the latency and reduce workloads and in Open MPI's
    // side of scripts/bench_mpi.sh: buffers fault in, segments' frames are first sized.
    auto warm = broadcast(0, size, opt_.acks);
    complete = warm.ok && warm.vnodes == total_vnodes();
    for (std::size_t r = 0; r < opt_.reps; ++r) {
      auto o = broadcast(0, size, opt_.acks);
      completion.push_back(o.completion_ms);
      if (opt_.acks)
        acked.push_back(o.acked_ms);
      complete = complete && o.ok && o.vnodes == total_vnodes();
    }
    const double c = median(completion);
    const double mbps = c > 0 ? static_cast<double>(size) * static_cast<double>(opt_.procs) / (c * 1e3) : 0;
    json r{{"algorithm", "dynamic"},     {"size", size},        {"completion_ms", c},
           {"bandwidth_MBps", mbps},     {"runs_ms", completion}, {"complete", complete}};
    if (opt_.acks) {
      r["acked_ms"] = median(acked);
      r["acked_runs_ms"] = acked;
    }
    std::fprintf(stderr, "cluster: bandwidth: %llu bytes: %.3f ms, %.1f MB/s%s\n",
                 static_cast<unsigned long long>(size), c, mbps,
                 opt_.acks ? (" (acked " + std::to_string(median(acked)) + " ms)").c_str() : "");
    results.push_back(r);
  }
  return {{"results", results}};
}

json cluster_run::workload_reduce() {
  auto sizes = *parse_sizes(opt_.reduce_sizes);
  json results = json::array();
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  for (auto size : sizes) {
    if (size % 4 != 0 || size == 0)
      throw cluster_failure{"--reduce-sizes: " + std::to_string(size) + " is not a whole number of int32", 2};
    std::vector<double> completion;
    bool ok = true;
    for (std::size_t r = 0; r < opt_.reps + 1; ++r) { // the first one warms up
      const auto seq = ++reduce_seq_;
      const auto line = "reduce " + std::to_string(seq) + " 0 " + std::to_string(size / 4)
                        + " sum int32";
      const auto t0 = now_us();
      for (std::size_t k = opt_.procs; k-- > 0;) // the root's owner (process 0) last
        command(k, line);
      wait_for(
        [&] {
          return ev_.reduced.count(seq) && ev_.reduce_sent[seq].size() + 1 >= opt_.procs;
        },
        limit, "reduction " + std::to_string(seq) + " of " + std::to_string(size) + " bytes");
      auto& res = ev_.reduced[seq];
      if (r == 0)
        continue;
      completion.push_back(static_cast<double>(res.value("t_us", std::int64_t{0}) - t0) / 1000.0);
      ok = ok && res.value("ok", false) && res.value("vnodes", std::size_t{0}) == total_vnodes();
    }
    const double c = median(completion);
    std::fprintf(stderr, "cluster: reduce: %llu bytes: %.3f ms%s\n",
                 static_cast<unsigned long long>(size), c, ok ? "" : " (WRONG RESULT)");
    results.push_back({{"algorithm", "dynamic"},
                       {"size", size},
                       {"completion_ms", c},
                       {"runs_ms", completion},
                       {"ok", ok}});
  }
  return {{"results", results}};
}

json cluster_run::workload_overhead() {
  // The barrier-plus-acks cost alone, as near as banyan gets: every other process sends
  // process 0 one empty message at once; timed from the commands to the last arrival.
  progress("overhead: empty messages from every process to process 0");
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  auto once = [&] {
    std::map<std::size_t, std::size_t> had;
    for (std::size_t k = 1; k < opt_.procs; ++k)
      had[k] = ev_.sent[k].size();
    const auto t0 = now_us();
    for (std::size_t k = 1; k < opt_.procs; ++k)
      command(k, "send 0 0");
    std::vector<std::string> ops;
    wait_for(
      [&] {
        for (std::size_t k = 1; k < opt_.procs; ++k)
          if (ev_.sent[k].size() == had[k])
            return false;
        return true;
      },
      limit, "the empty messages to be sent");
    for (std::size_t k = 1; k < opt_.procs; ++k)
      ops.push_back(ev_.sent[k].back().value("op", ""));
    std::int64_t last = t0;
    wait_for(
      [&] {
        for (auto& op : ops)
          if (ev_.delivered[op].empty())
            return false;
        return true;
      },
      limit, "the empty messages to arrive");
    for (auto& op : ops)
      last = std::max(last, ev_.delivered[op].front().second.value("t_us", t0));
    return static_cast<double>(last - t0) / 1000.0;
  };
  once();
  std::vector<double> runs;
  for (std::size_t r = 0; r < opt_.reps; ++r)
    runs.push_back(once());
  std::fprintf(stderr, "cluster: overhead: %.3f ms\n", median(runs));
  return {{"overhead_ms", median(runs)}, {"runs_ms", runs}};
}

json cluster_run::workload_churn() {
  // Continuous 4 MiB broadcasts from process 0; at leave_at half of the others hand
  // their vnodes over and leave, at rejoin_at they come back asking for them again.
  if (opt_.procs < 3)
    throw cluster_failure{"churn needs at least 3 processes", 2};
  const std::uint64_t size = 4 << 20;
  std::vector<std::size_t> movers;
  for (std::size_t k = 1; k < opt_.procs; k += 2)
    movers.push_back(k);
  progress("churn: 4 MiB broadcasts for " + std::to_string(opt_.churn_for_ms) + " ms; "
           + std::to_string(movers.size()) + " processes leave at " + std::to_string(opt_.leave_at_ms)
           + " ms and rejoin at " + std::to_string(opt_.rejoin_at_ms) + " ms");
  for (std::size_t k = 0; k < opt_.procs; ++k) // a leaving process cannot ack
    command(k, "acks off");
  sync_all();
  const auto start = now_us();
  auto elapsed_ms = [&] { return static_cast<double>(now_us() - start) / 1000.0; };
  json timeline = json::array();
  std::vector<std::pair<double, double>> points; // t_ms, MB/s
  std::size_t expected = 0, delivered = 0, duplicates = 0, lost = 0;
  bool left = false, rejoined = false;
  double left_at = -1, rejoined_at = -1;
  std::map<std::size_t, std::size_t> readies_before;
  std::vector<std::string> ops;
  while (elapsed_ms() < static_cast<double>(opt_.churn_for_ms)) {
    if (!left && elapsed_ms() >= static_cast<double>(opt_.leave_at_ms)) {
      for (auto k : movers)
        command(k, "leave");
      left = true;
      left_at = elapsed_ms();
      progress("churn: " + std::to_string(movers.size()) + " processes leaving");
    }
    if (left && !rejoined && elapsed_ms() >= static_cast<double>(opt_.rejoin_at_ms)) {
      bool all_left = true;
      for (auto k : movers)
        all_left = all_left && ev_.left[k] > 0;
      if (all_left) {
        for (auto k : movers) {
          readies_before[k] = ev_.readies[k];
          command(k, "join " + address(k - 1)); // a stayer: the joins spread (start_all)
        }
        rejoined = true;
        rejoined_at = elapsed_ms();
        progress("churn: they rejoin");
      }
    }
    // One broadcast; counted over every vnode wherever it lives now.
    const auto had = ev_.started[0].size();
    command(0, "bcast " + std::to_string(size));
    wait_for([&] { return ev_.started[0].size() > had; }, std::chrono::milliseconds(opt_.op_timeout_ms),
             "process 0 to start a broadcast");
    auto started = ev_.started[0].back();
    const auto op = started.value("op", "");
    const auto t0 = started.value("t_us", std::int64_t{0});
    auto count = [&] {
      std::size_t n = 0;
      for (auto& [k, j] : ev_.delivered[op])
        n += j.value("vnodes", std::size_t{0});
      return n;
    };
    const auto want = total_vnodes();
    try {
      wait_for([&] { return count() >= want; }, std::chrono::milliseconds(opt_.op_timeout_ms),
               "broadcast " + op);
    } catch (const cluster_failure& f) {
      if (f.code == 130)
        throw;
      failed_ = false;
      progress("churn: " + f.what);
    }
    ops.push_back(op);
    std::int64_t last = t0;
    for (auto& [k, j] : ev_.delivered[op])
      last = std::max(last, j.value("t_us", t0));
    const double ms = static_cast<double>(last - t0) / 1000.0;
    const double mbps = ms > 0 ? static_cast<double>(size) * static_cast<double>(opt_.procs) / (ms * 1e3) : 0;
    const double t_ms = static_cast<double>(last - start) / 1000.0;
    points.emplace_back(t_ms, mbps);
    timeline.push_back({{"t_ms", t_ms}, {"bandwidth_MBps", mbps}, {"op", op}});
  }
  // Deliveries counted once everything settled (a late duplicate would show up here).
  auto settle = clock_type::now() + 1s;
  wait_for([&] { return clock_type::now() >= settle; }, 5s, "the last deliveries");
  const auto want = total_vnodes();
  for (auto& op : ops) {
    std::size_t n = 0;
    for (auto& [k, j] : ev_.delivered[op])
      n += j.value("vnodes", std::size_t{0});
    expected += want;
    delivered += std::min(n, want);
    duplicates += n > want ? n - want : 0;
    lost += n < want ? want - n : 0;
  }
  if (rejoined)
    wait_for([&] { return all_moved_on(movers, ev_.readies, readies_before); }, 30s,
             "the processes to rejoin");
  // Back within 10% of the steady state before the event: the median before it.
  auto restabilize = [&](double at, double until) -> json {
    if (at < 0)
      return nullptr;
    std::vector<double> before;
    for (auto& [t, b] : points)
      if (t < at)
        before.push_back(b);
    if (before.empty())
      return nullptr;
    const double steady = median(before);
    for (auto& [t, b] : points)
      if (t >= at && t < until && b >= 0.9 * steady)
        return t - at;
    return nullptr;
  };
  json restab = json::array();
  restab.push_back({{"event", "leave"}, {"at_ms", left_at},
                    {"restabilize_ms", restabilize(left_at, rejoined_at < 0 ? 1e18 : rejoined_at)}});
  restab.push_back({{"event", "rejoin"}, {"at_ms", rejoined_at}, {"restabilize_ms", restabilize(rejoined_at, 1e18)}});
  std::fprintf(stderr, "cluster: churn: %zu broadcasts, %zu/%zu deliveries, %zu duplicates, %zu lost\n",
               timeline.size(), delivered, expected, duplicates, lost);
  return {{"size", size},
          {"timeline", timeline},
          {"restabilize_ms", restab},
          {"deliveries_expected", expected},
          {"deliveries", delivered},
          {"duplicates", duplicates},
          {"lost", lost}};
}

} // namespace banyan::cli::cluster_detail

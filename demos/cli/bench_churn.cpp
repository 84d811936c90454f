#include "bench_churn.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <variant>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology.hpp"
#include "bench_bandwidth.hpp" // parse_size
#include "bench_common.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

constexpr const char* tag = "banyan bench churn: ";

double to_ms(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

/// The network with the processors `away` taken out (the others renumbered in order, as
/// the topology text numbers them: depth first, in declaration order).
topology without(const topology& topo, const std::vector<proc_id>& away) {
  topology t = topo;
  for (auto p : away)
    --t.groups[static_cast<std::size_t>(topo.leaf_of(p))].procs;
  proc_id next = 0;
  std::function<void(int)> number = [&](int gi) {
    auto& g = t.groups[static_cast<std::size_t>(gi)];
    g.first_proc = next;
    next += g.procs;
    for (int c : g.children)
      number(c);
    g.proc_count = next - g.first_proc;
  };
  for (std::size_t i = 0; i < t.groups.size(); ++i)
    if (t.groups[i].parent < 0)
      number(static_cast<int>(i));
  return t;
}

/// How long a broadcast may stay incomplete before the window stops waiting for it (it
/// still counts at the end, as lost if it never completes).
constexpr auto give_up_after = 10s;
/// How long the run waits for the last broadcasts after `duration`.
constexpr auto final_wait = 60s;
/// The driver's step: broadcasts start at most this late after a slot frees.
constexpr auto step = 2ms;

std::optional<std::string> check(const churn_options& o) {
  if (o.bucket_ms <= 0 || o.window == 0 || o.message_bytes == 0 || o.smooth_ms < o.bucket_ms)
    return "window, bucket and message size must be positive, smoothing at least a bucket";
  if (o.leave_at_ms < 1000)
    return "--leave-at must be at least 1000 ms (the steady state is measured over the second before)";
  if (o.rejoin_at_ms < o.leave_at_ms + 1000)
    return "--rejoin-at must be at least 1000 ms after --leave-at";
  if (o.duration_ms <= o.rejoin_at_ms)
    return "--duration must end after --rejoin-at";
  if (o.duration_ms > 600000)
    return "--duration is at most 600000 ms";
  if (o.clock != "virtual" && o.clock != "real")
    return "--clock must be virtual or real, not '" + o.clock + "'";
  if (!o.trace_path.empty() && o.clock != "virtual")
    return "--trace needs --clock virtual";
  if (!(o.background_s >= 0))
    return "--background must be >= 0 (0: off)";
  return std::nullopt;
}

double mean_over(const std::vector<churn_point>& tl, double bucket, double from, double to) {
  double sum = 0;
  std::size_t k = 0;
  for (auto& p : tl)
    if (p.t_ms >= from - 1e-9 && p.t_ms + bucket <= to + 1e-9) {
      sum += p.bandwidth_MBps;
      ++k;
    }
  return k ? sum / static_cast<double>(k) : 0.0;
}

/// Restabilization of an event at `at` (ms), searching up to `until` (ms): from the
/// event to the start t (a bucket boundary, t >= at) of the first `smooth` window whose
/// mean is at least 90% of `steady`, and the window after it too (when it fits before
/// `until`). Long broadcasts complete in bursts, so single buckets say little.
std::optional<double> restabilize(const std::vector<churn_point>& tl, double bucket, double at,
                                  double until, double steady, double smooth) {
  auto ok = [&](double from) {
    return mean_over(tl, bucket, from, from + smooth) >= 0.9 * steady;
  };
  for (auto k = static_cast<std::size_t>(std::ceil(at / bucket - 1e-9));; ++k) {
    auto t = static_cast<double>(k) * bucket;
    if (t + smooth > until + 1e-9)
      return std::nullopt;
    if (ok(t) && (t + 2 * smooth > until + 1e-9 || ok(t + smooth)))
      return t - at;
  }
}


} // namespace

std::variant<churn_result, std::string>
run_churn(const churn_options& opt, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress)
      progress(s);
  };
  if (auto e = check(opt))
    return *e;
  auto topo = opt.topo ? expected<topology>(*opt.topo) : load_topology(opt.topology);
  if (!topo)
    return topo.err().to_string();
  if (topo->proc_count() < 2)
    return std::string{"the topology needs at least 2 processors"};
  auto wall0 = std::chrono::steady_clock::now();

  actors::cluster_config cfg;
  // The trace (optional): lines from `trace_from_ms` on the timeline, once the trees have
  // formed (`base` is set then).
  std::unique_ptr<std::ofstream> trace;
  std::optional<duration> trace_base;
  if (!opt.trace_path.empty()) {
    trace = std::make_unique<std::ofstream>(opt.trace_path);
    if (!*trace)
      return "cannot write " + opt.trace_path;
  }
  auto trace_t = [&](duration at) -> std::optional<double> {
    if (!trace || !trace_base)
      return std::nullopt;
    auto ms = to_ms(at - *trace_base);
    if (ms < opt.trace_from_ms)
      return std::nullopt;
    return ms;
  };
  if (trace) {
    cfg.on_frame = [&](const actors::frame_trace& f) {
      auto t = trace_t(f.at);
      if (!t)
        return;
      static const char what[] = {'s', 'd', 'u'};
      auto& e = *f.frame;
      char line[256];
      std::snprintf(line, sizeof line, "F %.3f %c %u %u %s %zu", *t,
                    what[static_cast<int>(f.what)], e.from, e.to, wire::name_of(e.body), f.bytes);
      *trace << line;
      if (auto* seg = std::get_if<wire::bcast_segment>(&e.body))
        *trace << ' ' << seg->op.origin << ' ' << seg->op.seq << ' ' << seg->stream << ' '
               << seg->index << ' ' << seg->count << ' ' << seg->first << ' ' << seg->direct
               << ' ' << seg->hops << ' ' << (seg->kind == tree_kind::bandwidth ? 'B' : 'L') << ' '
               << seg->vnodes.to_string();
      *trace << '\n';
    };
    cfg.on_tree_event = [&](proc_id p, const tree_event& e) {
      auto t = trace_t(e.at);
      if (!t)
        return;
      static const char* names[] = {"parent_changed", "busy", "idle", "cycle_broken", "joined",
                                    "join_failed", "left", "crash_detected", "adopted",
                                    "disowned", "gained", "released",
                                    "member_buried", "member_returned", "suspected",
                                    "suspicion_cleared"};
      *trace << "T " << *t << ' ' << p << ' ' << names[static_cast<int>(e.what)] << ' '
             << static_cast<long>(e.tree.root == no_proc ? -1 : static_cast<long>(e.tree.root))
             << ' ' << (e.tree.kind == tree_kind::bandwidth ? 'B' : 'L') << ' '
             << (e.old_parent == no_proc ? -1L : static_cast<long>(e.old_parent)) << ' '
             << (e.new_parent == no_proc ? -1L : static_cast<long>(e.new_parent)) << '\n';
    };
  }
  cfg.topo = *topo;
  cfg.seed = opt.seed;
  cfg.clock = opt.clock == "real" ? actors::clock_mode::real_time : actors::clock_mode::virtual_time;
  cfg.sup.background_period = from_ms(opt.background_s * 1000);
  // Owned here, and released instead of destroyed when a broadcast never completed: the
  // cluster's destructor runs the actors until they are all done, which frames that
  // circulate for good (the losses reported) never are.
  auto owned = std::make_unique<actors::emulated_cluster>(cfg);
  auto& c = *owned;
  c.start();
  if (!c.run_until_quiet(3600s))
    say("trees still changing after an hour (emulated); measuring anyway");
  const auto base = c.elapsed();
  trace_base = base;
  const proc_id origin = 0;
  std::optional<tree_choice> choice;
  if (!opt.tree_rule.empty()) {
    tree_choice tc;
    tc.rule = opt.tree_rule == "threshold" ? tree_rule::threshold : tree_rule::model;
    tc.cost.segment = broadcast_config{}.segment_size;
    tc.cost.overhead = broadcast_config{}.send_overhead;
    choice = tc;
  }
  if (trace && opt.trace_from_ms <= 0) // the trees as formed, so the trace's tree lines start whole
    for (proc_id p = 0; p < topo->proc_count(); ++p)
      if (auto* s = c.inspect(p))
        for (auto kind : {tree_kind::latency, tree_kind::bandwidth})
          *trace << "T 0 " << p << " formed " << origin << ' '
                 << (kind == tree_kind::bandwidth ? 'B' : 'L') << " -1 "
                 << (s->parent({origin, kind}) == no_proc ? -1L
                                                           : static_cast<long>(s->parent({origin, kind})))
                 << '\n';
  auto now_ms = [&] { return to_ms(c.elapsed() - base); };
  say("trees formed after " + std::to_string(static_cast<long>(to_ms(base))) + " ms");

  std::vector<proc_id> movers;
  for (proc_id p = 1; p < topo->proc_count(); p += 2)
    movers.push_back(p);
  std::map<proc_id, vnode_set> had;

  struct in_flight {
    wire::collective_id id;
    double started_ms;
  };
  std::vector<wire::collective_id> started;
  std::deque<in_flight> flying;
  auto complete = [&](const wire::collective_id& id) {
    auto rec = c.deliveries(id);
    return rec.delivered.size() >= c.vnode_count();
  };

  churn_result res;
  res.topology = topo->name;
  res.procs = topo->proc_count();
  res.vnodes = c.vnode_count();
  bool left = false, rejoined = false;
  std::string failure;
  double next_report_ms = 1000;
  // Processor 0's bandwidth tree at every bucket's start: its wide-area edges, and the
  // entries into a cluster beyond the first (see churn_point).
  const auto cluster_of = topo->cluster_of();
  std::vector<std::pair<long, long>> entries_at;
  auto sample_entries = [&] {
    auto tr = c.monitor().tree_of({origin, tree_kind::bandwidth});
    auto live = c.monitor().live();
    std::map<int, long> per_cluster;
    long wan = 0;
    for (proc_id p = 0; p < tr.size() && p < live.size(); ++p) {
      auto q = tr.parent(p);
      if (!live[p] || q == no_proc || q >= cluster_of.size() || p >= cluster_of.size()
          || cluster_of[p] == cluster_of[q])
        continue;
      ++wan;
      ++per_cluster[cluster_of[p]];
    }
    long extra = 0;
    for (auto& [cl, n] : per_cluster)
      extra += n - 1;
    entries_at.emplace_back(wan, extra);
  };
  while (now_ms() < opt.duration_ms) {
    auto t = now_ms();
    while (static_cast<double>(entries_at.size()) * opt.bucket_ms <= t)
      sample_entries();
    if (t >= next_report_ms) {
      next_report_ms += 1000;
      const auto done = std::count_if(started.begin(), started.end(), complete);
      say(std::to_string(long(t)) + " of " + std::to_string(long(opt.duration_ms)) + " ms: " +
          std::to_string(started.size()) + " broadcasts started, " + std::to_string(done) +
          " complete (" + std::to_string(long(std::chrono::duration<double>(
                                           std::chrono::steady_clock::now() - wall0).count())) +
          " s wall)");
    }
    if (!left && t >= opt.leave_at_ms) {
      for (auto p : movers) {
        if (auto* s = opt.clock == "real" ? nullptr : c.inspect(p)) // readable in virtual time only
          had[p] = s->routes().owned_by(p);
        if (auto err = c.leave(p))
          return "leave " + std::to_string(p) + ": " + err->to_string();
      }
      left = true;
      if (trace)
        *trace << "E " << t << " leave\n";
      say(std::to_string(movers.size()) + " processors leave at " + std::to_string(long(t)) + " ms");
    }
    if (!rejoined && t >= opt.rejoin_at_ms) {
      for (auto p : movers)
        if (auto err = c.join(p, origin, had[p]))
          return "join " + std::to_string(p) + ": " + err->to_string();
      rejoined = true;
      if (trace)
        *trace << "E " << t << " rejoin\n";
      say(std::to_string(movers.size()) + " processors rejoin at " + std::to_string(long(t)) + " ms");
    }
    while (!flying.empty() &&
           (complete(flying.front().id) || t - flying.front().started_ms > to_ms(give_up_after)))
      flying.pop_front();
    // Completions out of order: drop any completed one, not only the oldest.
    flying.erase(std::remove_if(flying.begin(), flying.end(),
                                [&](const in_flight& f) { return complete(f.id); }),
                 flying.end());
    while (flying.size() < opt.window) {
      auto id = c.broadcast(origin, opt.message_bytes, choice);
      if (!id)
        return std::string{"processor 0 could not start a broadcast"};
      started.push_back(*id);
      flying.push_back({*id, t});
    }
    c.run_until(c.elapsed() + step);
  }
  say(std::to_string(started.size()) + " broadcasts started; waiting for the last ones");
  auto wait_end = c.elapsed() + final_wait;
  auto report_at = c.elapsed() + 1s;
  while (c.elapsed() < wait_end &&
         std::any_of(flying.begin(), flying.end(), [&](auto& f) { return !complete(f.id); })) {
    c.run_until(c.elapsed() + 50ms);
    if (c.elapsed() >= report_at) {
      report_at += 1s;
      const auto left_over = std::count_if(flying.begin(), flying.end(),
                                           [&](auto& f) { return !complete(f.id); });
      say("waiting at " + std::to_string(long(now_ms())) + " ms: " + std::to_string(left_over) +
          " broadcasts incomplete");
    }
  }
  c.run_until(c.elapsed() + 100ms);

  // Timeline and exactly-once accounting.
  auto buckets = static_cast<std::size_t>(std::ceil(opt.duration_ms / opt.bucket_ms));
  std::vector<double> bytes(buckets, 0.0);
  for (auto& id : started) {
    auto rec = c.deliveries(id);
    churn_broadcast b;
    b.start_ms = to_ms(rec.started - base);
    for (auto& [v, times] : rec.delivered)
      if (!times.empty())
        b.done_ms = std::max(b.done_ms, to_ms(times.front() - base));
    b.complete = rec.delivered.size() >= c.vnode_count();
    res.per_broadcast.push_back(b);
    res.deliveries_expected += c.vnode_count();
    for (auto& [v, times] : rec.delivered) {
      if (times.empty())
        continue;
      ++res.deliveries;
      res.duplicates += times.size() - 1;
      for (auto tt : times) {
        auto ms = to_ms(tt - base);
        if (ms < 0)
          continue;
        auto k = static_cast<std::size_t>(ms / opt.bucket_ms);
        if (k < buckets)
          bytes[k] += static_cast<double>(opt.message_bytes);
      }
    }
  }
  res.broadcasts = started.size();
  res.lost = res.deliveries_expected - res.deliveries;
  for (std::size_t k = 0; k < buckets; ++k) {
    churn_point pt;
    pt.t_ms = static_cast<double>(k) * opt.bucket_ms;
    pt.bandwidth_MBps = bytes[k] / (opt.bucket_ms / 1000.0) / 1e6;
    if (k < entries_at.size())
      std::tie(pt.wan_edges, pt.extra_entries) = entries_at[k];
    res.timeline.push_back(pt);
  }
  auto mean_extra = [&](double from, double to) {
    double sum = 0;
    std::size_t n = 0;
    for (auto& pt : res.timeline)
      if (pt.t_ms >= from && pt.t_ms < to && pt.extra_entries >= 0) {
        sum += static_cast<double>(pt.extra_entries);
        ++n;
      }
    return n ? sum / static_cast<double>(n) : 0.0;
  };
  res.extra_entries_after_leave = mean_extra(opt.leave_at_ms + 500, opt.rejoin_at_ms);
  res.extra_entries_after_rejoin = mean_extra(opt.rejoin_at_ms + 500, opt.duration_ms);

  // One tree's ceiling from processor 0 (never a mover), as delivered MB/s.
  const double all_vnodes = static_cast<double>(res.vnodes);
  const double ceiling_all =
    broadcast_tree_ceiling(*topo, origin).ceiling * all_vnodes / 1e6;
  const double ceiling_left =
    broadcast_tree_ceiling(without(*topo, movers), origin).ceiling * all_vnodes / 1e6;
  auto event = [&](const std::string& what, double at, double until) {
    churn_event e;
    e.what = what;
    e.at_ms = at;
    e.procs = movers.size();
    e.tree_ceiling_before_MBps = what == "leave" ? ceiling_all : ceiling_left;
    e.tree_ceiling_after_MBps = what == "leave" ? ceiling_left : ceiling_all;
    e.steady_MBps = mean_over(res.timeline, opt.bucket_ms, at - 1000, at);
    e.restabilize_ms =
      restabilize(res.timeline, opt.bucket_ms, at, until, e.steady_MBps, opt.smooth_ms);
    return e;
  };
  res.events.push_back(event("leave", opt.leave_at_ms, opt.rejoin_at_ms));
  res.events.push_back(event("rejoin", opt.rejoin_at_ms, opt.duration_ms));
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (res.lost > 0) {
    say("frames still circulate for " + std::to_string(res.lost) +
        " lost deliveries; the emulated cluster is left running idle, not shut down");
    (void) owned.release();
  }
  return res;
}

plot_spec churn_plot(const churn_result& r) {
  plot_spec p;
  p.title = "Broadcast bandwidth under churn on " + r.topology;
  p.x_label = "time (ms)";
  p.y_label = "delivered MB/s";
  p.draw = plot_spec::style::steps;
  plot_series s;
  s.label = "dynamic";
  for (auto& pt : r.timeline) {
    s.x.push_back(pt.t_ms);
    s.y.push_back(pt.bandwidth_MBps);
  }
  p.series.push_back(std::move(s));
  for (auto& e : r.events)
    p.markers.push_back({e.at_ms, std::to_string(e.procs) + " " + e.what});
  return p;
}

namespace {

nlohmann::json run_json(const churn_options& opt, const churn_result& r) {
  nlohmann::json j;
  j["topology"] = r.topology;
  j["seed"] = opt.seed;
  j["background_s"] = opt.background_s;
  j["tree_rule"] = opt.tree_rule.empty() ? "engine" : opt.tree_rule;
  j["clock"] = opt.clock;
  j["procs"] = r.procs;
  j["vnodes"] = r.vnodes;
  j["message_bytes"] = opt.message_bytes;
  j["window"] = opt.window;
  j["bucket_ms"] = opt.bucket_ms;
  j["smooth_ms"] = opt.smooth_ms;
  auto tl = nlohmann::json::array();
  for (auto& p : r.timeline)
    tl.push_back({{"t_ms", p.t_ms}, {"bandwidth_MBps", p.bandwidth_MBps},
                  {"wan_edges", p.wan_edges}, {"extra_entries", p.extra_entries}});
  j["timeline"] = tl;
  auto ev = nlohmann::json::array();
  for (auto& e : r.events) {
    nlohmann::json x = {{"event", e.what},
                        {"at_ms", e.at_ms},
                        {"procs", e.procs},
                        {"steady_MBps", e.steady_MBps},
                        {"tree_ceiling_before_MBps", e.tree_ceiling_before_MBps},
                        {"tree_ceiling_after_MBps", e.tree_ceiling_after_MBps}};
    x["restabilize_ms"] = e.restabilize_ms ? nlohmann::json(*e.restabilize_ms) : nlohmann::json();
    ev.push_back(x);
  }
  j["events"] = ev;
  j["restabilize_ms"] = {{"leave", ev[0]["restabilize_ms"]}, {"rejoin", ev[1]["restabilize_ms"]}};
  j["broadcasts"] = r.broadcasts;
  auto pb = nlohmann::json::array();
  for (auto& b : r.per_broadcast)
    pb.push_back({{"start_ms", b.start_ms}, {"last_delivery_ms", b.done_ms},
                  {"complete", b.complete}});
  j["per_broadcast"] = pb;
  j["extra_entries"] = {{"after_leave", r.extra_entries_after_leave},
                        {"after_rejoin", r.extra_entries_after_rejoin}};
  j["deliveries_expected"] = r.deliveries_expected;
  j["deliveries"] = r.deliveries;
  j["duplicates"] = r.duplicates;
  j["lost"] = r.lost;
  return j;
}

/// "not back" as infinity: the median of restabilization times, or nothing when it is
/// "not back" itself.
std::optional<double> median_ms(std::vector<std::optional<double>> v) {
  std::vector<double> x;
  for (auto& e : v)
    x.push_back(e ? *e : std::numeric_limits<double>::infinity());
  std::sort(x.begin(), x.end());
  if (x.empty())
    return std::nullopt;
  auto m = x.size() % 2 ? x[x.size() / 2] : (x[x.size() / 2 - 1] + x[x.size() / 2]) / 2;
  return std::isfinite(m) ? std::optional<double>{m} : std::nullopt;
}

} // namespace

int run_bench_churn(const churn_options& opt, const std::string& json_path,
                    const std::string& plot_path, bool verbose) {
  for (auto* path : {&json_path, &plot_path})
    if (!path->empty() && !std::ofstream(*path, std::ios::app)) {
      std::cerr << tag << "cannot write " << *path << "\n";
      return 2;
    }
  auto out = run_churn(opt, [verbose](const std::string& s) {
    if (verbose)
      std::cerr << tag << s << std::endl;
  });
  if (auto* err = std::get_if<std::string>(&out)) {
    std::cerr << tag << *err << "\n";
    return 2;
  }
  auto& r = std::get<churn_result>(out);
  std::printf("churn on %s (%zu processors, %zu vnodes, %zu KiB broadcasts from 0, %zu in "
              "flight, emulated network, %s time%s%s)\n",
              r.topology.c_str(), r.procs, r.vnodes, opt.message_bytes / 1024, opt.window,
              opt.clock.c_str(), opt.tree_rule.empty() ? "" : ", tree rule ",
              opt.tree_rule.c_str());
  std::printf("%-8s %8s %6s %12s %16s %24s\n", "event", "at_ms", "procs", "steady_MBps",
              "restabilize_ms", "tree_ceiling_MBps");
  for (auto& e : r.events) {
    char ceiling[64];
    std::snprintf(ceiling, sizeof ceiling, "%.1f -> %.1f", e.tree_ceiling_before_MBps,
                  e.tree_ceiling_after_MBps);
    if (e.restabilize_ms)
      std::printf("%-8s %8.0f %6zu %12.1f %16.0f %24s\n", e.what.c_str(), e.at_ms, e.procs,
                  e.steady_MBps, *e.restabilize_ms, ceiling);
    else
      std::printf("%-8s %8.0f %6zu %12.1f %16s %24s\n", e.what.c_str(), e.at_ms, e.procs,
                  e.steady_MBps, "not back", ceiling);
  }
  std::printf("broadcasts %zu, deliveries %zu of %zu expected, duplicates %zu, lost %zu "
              "(%.1f s wall)\n",
              r.broadcasts, r.deliveries, r.deliveries_expected, r.duplicates, r.lost, r.wall_s);

  if (!plot_path.empty()) {
    if (auto err = write_svg(plot_path, churn_plot(r))) {
      std::cerr << tag << *err << "\n";
      return 2;
    }
  }
  if (!json_path.empty()) {
    auto j = run_json(opt, r);
    std::ofstream f(json_path);
    if (!f) {
      std::cerr << tag << "cannot write " << json_path << "\n";
      return 2;
    }
    f << j.dump(2) << "\n";
  }
  return r.lost || r.duplicates ? 1 : 0;
}

int run_bench_churn_seeds(const churn_options& opt, const std::vector<std::uint64_t>& seeds,
                          const std::string& json_path, const std::string& plot_path,
                          bool verbose, std::size_t jobs) {
  for (auto* path : {&json_path, &plot_path})
    if (!path->empty() && !std::ofstream(*path, std::ios::app)) {
      std::cerr << tag << "cannot write " << *path << "\n";
      return 2;
    }
  std::printf("churn on %s over %zu seeds (%zu KiB broadcasts from 0, %zu in flight, leave at "
              "%.0f ms, rejoin at %.0f ms, emulated network, %s time%s%s)\n",
              opt.topology.c_str(), seeds.size(), opt.message_bytes / 1024, opt.window,
              opt.leave_at_ms, opt.rejoin_at_ms, opt.clock.c_str(),
              opt.tree_rule.empty() ? "" : ", tree rule ", opt.tree_rule.c_str());
  std::printf("%6s %10s %14s %14s %12s %10s %5s %5s %8s %8s\n", "seed", "broadcasts",
              "leave_ms", "rejoin_ms", "steady_MBps", "wall_s", "dup", "lost", "x_leave",
              "x_rejoin");
  auto runs = nlohmann::json::array();
  plot_spec plot;
  std::vector<std::optional<double>> leave, rejoin;
  std::vector<double> broadcasts;
  std::size_t dup = 0, lost = 0;
  const double limit_ms = 1000; // the target: back within 1 s
  std::size_t leave_ok = 0, rejoin_ok = 0;
  // The seeds run on `jobs` threads (each its own emulated cluster, actor system and
  // randomness: a seed's run is the same whichever thread takes it); the rows come out
  // in seed order.
  using outcome = std::variant<churn_result, std::string>;
  std::vector<std::optional<outcome>> done(seeds.size());
  std::mutex mtx;
  std::condition_variable cv;
  std::size_t next = 0;
  bool stop = false;
  auto work = [&] {
    for (;;) {
      std::size_t k;
      {
        std::lock_guard<std::mutex> lk(mtx);
        if (stop || next == seeds.size())
          return;
        k = next++;
      }
      auto o = opt;
      o.seed = seeds[k];
      auto out = run_churn(o, [&](const std::string& s) {
        if (!verbose)
          return;
        std::lock_guard<std::mutex> lk(mtx);
        std::cerr << tag << "seed " << o.seed << " (" << k + 1 << " of " << seeds.size()
                  << "): " << s << std::endl;
      });
      std::lock_guard<std::mutex> lk(mtx);
      done[k] = std::move(out);
      cv.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < std::max<std::size_t>(1, std::min(jobs, seeds.size())); ++i)
    workers.emplace_back(work);
  struct joiner {
    std::vector<std::thread>& ts;
    std::mutex& m;
    bool& stop;
    ~joiner() {
      {
        std::lock_guard<std::mutex> lk(m);
        stop = true; // an early return: start no further seed
      }
      for (auto& t : ts)
        t.join();
    }
  } join_all{workers, mtx, stop};
  for (std::size_t k = 0; k < seeds.size(); ++k) {
    auto o = opt;
    o.seed = seeds[k];
    outcome out;
    {
      std::unique_lock<std::mutex> lk(mtx);
      cv.wait(lk, [&] { return done[k].has_value(); });
      out = std::move(*done[k]);
      done[k].reset();
    }
    if (auto* err = std::get_if<std::string>(&out)) {
      std::cerr << tag << "seed " << o.seed << ": " << *err << "\n";
      return 2;
    }
    auto& r = std::get<churn_result>(out);
    auto show = [](const std::optional<double>& v) {
      return v ? std::to_string(static_cast<long>(*v)) : std::string{"not back"};
    };
    std::printf("%6llu %10zu %14s %14s %12.1f %10.1f %5zu %5zu %8.2f %8.2f\n",
                static_cast<unsigned long long>(o.seed), r.broadcasts,
                show(r.events[0].restabilize_ms).c_str(), show(r.events[1].restabilize_ms).c_str(),
                r.events[0].steady_MBps, r.wall_s, r.duplicates, r.lost,
                r.extra_entries_after_leave, r.extra_entries_after_rejoin);
    std::fflush(stdout);
    leave.push_back(r.events[0].restabilize_ms);
    rejoin.push_back(r.events[1].restabilize_ms);
    leave_ok += leave.back() && *leave.back() <= limit_ms;
    rejoin_ok += rejoin.back() && *rejoin.back() <= limit_ms;
    broadcasts.push_back(static_cast<double>(r.broadcasts));
    dup += r.duplicates;
    lost += r.lost;
    runs.push_back(run_json(o, r));
    auto one = churn_plot(r);
    one.series.front().label = "seed " + std::to_string(o.seed);
    if (k == 0) {
      plot = one;
      plot.title += " over " + std::to_string(seeds.size()) + " seeds";
    } else {
      plot.series.push_back(std::move(one.series.front()));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  auto show = [](const std::optional<double>& v) {
    return v ? std::to_string(static_cast<long>(*v)) + " ms" : std::string{"not back"};
  };
  std::printf("back within 1 s: leave %zu of %zu, rejoin %zu of %zu; median restabilize_ms "
              "leave %s, rejoin %s; median broadcasts %.1f; duplicates %zu, lost %zu\n",
              leave_ok, seeds.size(), rejoin_ok, seeds.size(), show(median_ms(leave)).c_str(),
              show(median_ms(rejoin)).c_str(), median(broadcasts), dup, lost);
  if (!plot_path.empty())
    if (auto err = write_svg(plot_path, plot)) {
      std::cerr << tag << *err << "\n";
      return 2;
    }
  if (!json_path.empty()) {
    auto event_summary = [&](const std::vector<std::optional<double>>& v, std::size_t ok) {
      auto m = median_ms(v);
      std::size_t not_back = 0;
      for (auto& e : v)
        not_back += !e;
      return nlohmann::json{{"back_within_1s", ok},
                            {"not_back", not_back},
                            {"median_ms", m ? nlohmann::json(*m) : nlohmann::json()}};
    };
    nlohmann::json j;
    j["topology"] = opt.topology;
    j["background_s"] = opt.background_s;
    j["tree_rule"] = opt.tree_rule.empty() ? "engine" : opt.tree_rule;
    j["seeds"] = seeds;
    j["runs"] = runs;
    j["summary"] = {{"runs", seeds.size()},
                    {"leave", event_summary(leave, leave_ok)},
                    {"rejoin", event_summary(rejoin, rejoin_ok)},
                    {"median_broadcasts", median(broadcasts)},
                    {"duplicates", dup},
                    {"lost", lost}};
    std::ofstream f(json_path);
    if (!f) {
      std::cerr << tag << "cannot write " << json_path << "\n";
      return 2;
    }
    f << j.dump(2) << "\n";
  }
  return lost || dup ? 1 : 0;
}

void add_bench_churn_command(CLI::App& bench, std::function<int()>& action) {
  struct args {
    bench_options common;
    churn_options opt;
    std::string size = "4M";
    std::string seeds;
    std::size_t jobs = 1;
  };
  auto a = std::make_shared<args>();
  auto cmd = bench.add_subcommand(
    "churn", "continuous broadcasts (4 MiB) while half of the processors leave and rejoin");
  add_bench_options(*cmd, a->common);
  cmd->add_option("--leave-at", a->opt.leave_at_ms, "ms after the trees formed (1000)");
  cmd->add_option("--rejoin-at", a->opt.rejoin_at_ms, "ms after the trees formed (3000)");
  cmd->add_option("--duration", a->opt.duration_ms, "ms of broadcasting (5000)");
  cmd->add_option("--window", a->opt.window, "broadcasts in flight (2)");
  cmd->add_option("--size", a->size, "bytes per broadcast, e.g. 256K (4M)");
  cmd->add_option("--trace", a->opt.trace_path,
                  "write a line per frame and tree event to FILE (virtual time; large)");
  cmd->add_option("--trace-from", a->opt.trace_from_ms, "ms on the timeline the trace starts at (0)");
  cmd->add_option("--background", a->opt.background_s,
                  "background measurement period once trees are stable (0: off)")
    ->type_name("SECONDS");
  cmd->add_option("--tree-rule", a->opt.tree_rule,
                  "how processor 0 picks each broadcast's tree: model or threshold "
                  "(default: the broadcast engine's own, model)")
    ->check(CLI::IsMember({"model", "threshold"}));
  cmd->add_option("--seeds", a->seeds,
                  "run once per seed (e.g. 1-10, or 1,4,9) and summarize; the JSON has "
                  "`runs` and `summary`, the plot a timeline per seed")
    ->excludes("--seed")
    ->excludes("--trace");
  cmd->add_option("--jobs", a->jobs,
                  "with --seeds: run this many seeds at a time, one thread each (1); the "
                  "results are the same, in seed order")
    ->check(CLI::Range(std::size_t{1}, std::size_t{64}))
    ->needs("--seeds");
  cmd->callback([a, &action] {
    action = [a] {
      if (auto err = check(a->common)) {
        std::cerr << tag << *err << "\n";
        return 2;
      }
      auto o = a->opt;
      auto size = parse_size(a->size);
      if (!size || *size == 0) {
        std::cerr << tag << "bad --size '" << a->size << "' (a positive size such as 256K or 4M)\n";
        return 2;
      }
      o.message_bytes = *size;
      o.topology = a->common.topology;
      o.seed = a->common.seed;
      o.clock = a->common.clock;
      if (!a->seeds.empty()) {
        auto seeds = parse_seed_list(a->seeds);
        if (auto* err = std::get_if<std::string>(&seeds)) {
          std::cerr << tag << *err << "\n";
          return 2;
        }
        return run_bench_churn_seeds(o, std::get<std::vector<std::uint64_t>>(seeds),
                                     a->common.json_path, a->common.plot_path,
                                     a->common.verbose, a->jobs);
      }
      return run_bench_churn(o, a->common.json_path, a->common.plot_path, a->common.verbose);
    };
  });
}

} // namespace banyan::cli

#include "bench_adapt.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/network_change.hpp"
#include "banyan/core/static_tree_oracle.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "bench_bandwidth.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

namespace {

using namespace std::chrono_literals;

constexpr const char* tag = "banyan bench adapt: ";
const std::vector<std::string> known_algorithms = {"dynamic", "frozen", "magpie", "list",
                                                   "best-before", "best-after"};
const std::vector<std::string> default_long = {"dynamic", "frozen", "magpie", "list"};
const std::vector<std::string> default_short = {"dynamic", "frozen", "magpie", "best-before",
                                                "best-after"};
/// Under this size a broadcast is short: the default change is on a link's RTT.
constexpr std::size_t short_below = 1024;

double seconds(duration d) {
  return std::chrono::duration<double>(d).count();
}

duration from_s(double s) {
  return duration{static_cast<duration::rep>(std::llround(s * 1e9))};
}

struct point {
  double start_s = 0, end_s = 0;
  double completion_ms = 0;
  double rate_MBps = 0;    ///< size / completion
  double ceiling_MBps = 0; ///< at the start
  double tree_ceiling_MBps = 0; ///< one tree's ceiling at the start
  bool complete = false;
};

struct run_result {
  std::string algorithm;
  double formed_ms = 0;
  std::vector<point> timeline;
  double tree_moved_s = -1; ///< dynamic: the root's tree's (latency for short messages) first change after the change
  double idle_max_share = 0; ///< the largest share of a link direction's capacity when idle
  std::string idle_max_link;
  std::uint64_t background_probes = 0, drifts = 0;
  std::uint64_t idle_drifts = 0, idle_parent_changes = 0;
  double idle_s = 0;
};

/// The default scenario: the link between the root's group and its widest sibling
/// (`names` overrides) loses `drop` of its bandwidth at `at`; with `rtt_factor` > 0 its
/// RTT is multiplied by it instead.
std::optional<network_change> default_change(const topology& topo, proc_id root,
                                             const std::vector<std::string>& names, double drop,
                                             double rtt_factor, duration at, std::string& why) {
  int l = -1;
  if (names.size() == 2) {
    const int a = topo.find_group(names[0]), b = topo.find_group(names[1]);
    if (a < 0 || b < 0) {
      why = "--link: unknown group '" + (a < 0 ? names[0] : names[1]) + "'";
      return std::nullopt;
    }
    l = topo.find_link(a, b);
    if (l < 0) {
      why = "--link: no link line between '" + names[0] + "' and '" + names[1] + "'";
      return std::nullopt;
    }
  } else {
    // The root's group (or its ancestor) at either end, widest first.
    std::vector<int> mine;
    for (int g = topo.leaf_of(root); g >= 0; g = topo.groups[g].parent)
      mine.push_back(g);
    rate best = 0;
    for (std::size_t i = 0; i < topo.links.size(); ++i) {
      const auto& k = topo.links[i];
      const bool ours = std::count(mine.begin(), mine.end(), k.a) + std::count(mine.begin(), mine.end(), k.b) > 0;
      const rate w = std::min(k.bw_ab, k.bw_ba);
      if (ours && std::isfinite(w) && w > best) {
        best = w;
        l = static_cast<int>(i);
      }
    }
    if (l < 0) {
      why = "no link of finite bandwidth next to the root's group: give --link or --events";
      return std::nullopt;
    }
  }
  network_change c;
  c.at = at;
  c.link = l;
  if (rtt_factor > 0) {
    c.rtt = duration{static_cast<duration::rep>(
      std::llround(static_cast<double>(topo.links[l].rtt.count()) * rtt_factor))};
  } else {
    c.bw_ab = topo.links[l].bw_ab * (1 - drop / 100);
    c.bw_ba = topo.links[l].bw_ba * (1 - drop / 100);
  }
  if (auto err = check_network_change(topo, c)) {
    why = err->message;
    return std::nullopt;
  }
  return c;
}

/// The wide-area link crossed by the root's bandwidth tree in `c` whose capacity in the
/// direction crossed is the smallest: the tree's narrowest wide-area link; -1 if none.
int narrowest_crossed_link(const actors::emulated_cluster& c, proc_id root) {
  const auto& topo = c.topo();
  const auto parents = c.monitor().tree_of({root, tree_kind::bandwidth}).parents();
  int best = -1;
  rate narrowest = infinite_rate;
  for (proc_id p = 0; p < parents.size(); ++p) {
    const auto q = parents[p];
    if (q == no_proc || topo.leaf_of(q) == topo.leaf_of(p))
      continue;
    const auto s = topo.split_of(q, p);
    const int l = topo.find_link(s.side_a, s.side_b);
    if (l < 0)
      continue;
    const auto& k = topo.links[l];
    const rate cap = k.a == s.side_a ? k.bw_ab : k.bw_ba;
    if (std::isfinite(cap) && cap < narrowest) {
      narrowest = cap;
      best = l;
    }
  }
  return best;
}

/// The link of the default RTT change: on the path of the root's latency tree in `c` from
/// the root to the processor it reaches last (arrival_times_with_overhead over the
/// topology's one-way latencies and send overhead), the hop between two groups joined by
/// a `link` line with the largest one-way latency; -1 if the path has none. `why` says
/// which processor is reached last, when, and the path's wide-area hops.
int critical_path_link(const actors::emulated_cluster& c, proc_id root, std::string& why) {
  const auto& topo = c.topo();
  const auto t = c.monitor().tree_of({root, tree_kind::latency});
  const auto lat = latency_matrix(topo);
  const double overhead_ms = std::chrono::duration<double, std::milli>(topo.send_overhead).count();
  const auto arrival = arrival_times_with_overhead(t, lat, overhead_ms);
  proc_id last = root;
  for (proc_id p = 0; p < arrival.size(); ++p)
    if (std::isfinite(arrival[p]) && arrival[p] > arrival[last])
      last = p;
  int best = -1;
  double best_ms = -1;
  std::ostringstream hops;
  for (proc_id p = last; p != root && t.parent(p) != no_proc; p = t.parent(p)) {
    const proc_id q = t.parent(p);
    if (topo.leaf_of(q) == topo.leaf_of(p))
      continue;
    const auto s = topo.split_of(q, p);
    const int l = topo.find_link(s.side_a, s.side_b);
    if (l < 0)
      continue;
    const double ms = lat[q][p];
    hops << (hops.tellp() > 0 ? ", " : "") << q << "->" << p << " (" << topo.groups[s.side_a].name << "-"
         << topo.groups[s.side_b].name << ", " << ms << " ms one way)";
    if (ms > best_ms) {
      best_ms = ms;
      best = l;
    }
  }
  std::ostringstream w;
  w << "the root's latency tree reaches processor " << last << " last (" << arrival[last]
    << " ms in the postal model with send overhead); wide-area hops on its path: "
    << (hops.tellp() > 0 ? hops.str() : std::string("none"));
  why = w.str();
  return best;
}

} // namespace

int run_bench_adapt(const bench_adapt_options& aopt) {
  const auto& opt = aopt.common;
  auto fail = [](const std::string& what) {
    std::cerr << tag << what << "\n";
    return 2;
  };
  auto size = parse_size(aopt.size);
  if (!size)
    return fail("bad --size '" + aopt.size + "' (expected e.g. 64M, 1M or 1)");
  const bool short_msgs = *size < short_below;
  auto algorithms = !aopt.algorithms.empty() ? aopt.algorithms : short_msgs ? default_short : default_long;
  for (auto& a : algorithms)
    if (std::find(known_algorithms.begin(), known_algorithms.end(), a) == known_algorithms.end())
      return fail("unknown algorithm '" + a + "' (dynamic, frozen, magpie, list, best-before, best-after)");
  if (auto err = check(opt))
    return fail(*err);
  if (opt.clock != "virtual")
    return fail("--clock real is not supported (the timeline reads the supervisors)");
  if (!(aopt.drop_percent > 0 && aopt.drop_percent < 100))
    return fail("--drop must be within (0, 100)");
  if (!(aopt.rtt_factor > 0) || !std::isfinite(aopt.rtt_factor))
    return fail("--rtt-factor must be positive");
  const double rtt_factor = short_msgs ? aopt.rtt_factor : 0;
  if (!aopt.link.empty() && aopt.link.size() != 2)
    return fail("--link takes two group names");
  if (!(aopt.rtt_watch_s >= 0))
    return fail("--rtt-watch must be 0 or more");
  if (!(aopt.period_s > 0) || !(aopt.change_at_s > 0))
    return fail("--period and --change-at must be positive");
  const double start_s = aopt.start_s >= 0 ? aopt.start_s : std::max(0.0, aopt.change_at_s - 6);
  const double until_s = aopt.until_s >= 0 ? aopt.until_s : aopt.change_at_s + 12;
  if (until_s <= start_s)
    return fail("--until must come after --start");
  for (auto* path : {&opt.json_path, &opt.plot_path})
    if (!path->empty() && !std::ofstream(*path, std::ios::app))
      return fail("cannot write " + *path);
  auto loaded = load_topology(opt.topology);
  if (!loaded)
    return fail(loaded.err().to_string());
  auto topo = *loaded;
  const proc_id root = 0;
  if (!aopt.events_path.empty()) {
    std::ifstream in(aopt.events_path);
    if (!in)
      return fail("cannot read " + aopt.events_path);
    std::stringstream text;
    text << in.rdbuf();
    auto changes = parse_network_changes(topo, text.str());
    if (!changes)
      return fail(aopt.events_path + ": " + changes.err().message);
    topo.changes.insert(topo.changes.end(), changes->begin(), changes->end());
    std::stable_sort(topo.changes.begin(), topo.changes.end(),
                     [](auto& x, auto& y) { return x.at < y.at; });
  }
  // The default change: on the link --link names, or else on the narrowest wide-area
  // link of the root's bandwidth tree as the first run formed it (the same change for
  // every run, scheduled once its trees are formed). `timeline` is the network with every
  // change, for the ceilings.
  std::optional<network_change> planned;
  const bool scenario_given = !topo.changes.empty();
  if (!scenario_given && aopt.link.size() == 2) {
    std::string why;
    planned = default_change(topo, root, aopt.link, aopt.drop_percent, rtt_factor,
                             from_s(aopt.change_at_s), why);
    if (!planned)
      return fail(why);
  }
  if (!aopt.events_path.empty() && topo.changes.empty())
    return fail("no change to the network: the events file holds none");
  auto timeline = topo;
  auto cluster_topo = topo;
  if (planned)
    timeline.changes.push_back(*planned);
  double change_s = timeline.changes.empty() ? aopt.change_at_s : seconds(timeline.changes.front().at);

  // The oracle ceiling at each moment: the network as it is then.
  auto ceiling_at = [&](double t) {
    return broadcast_ceiling(topology_at(timeline, from_s(t)), root).ceiling / 1e6;
  };
  // The same for any single tree (docs/plan.md, "The tree ceiling"): what a broadcast
  // down one tree, as banyan's and every static one is, can reach at best.
  auto tree_ceiling_at = [&](double t) {
    return broadcast_tree_ceiling(topology_at(timeline, from_s(t)), root).ceiling / 1e6;
  };
  const auto n = topo.proc_count();
  auto cl = topo.cluster_of();
  auto magpie = magpie_tree(n, root, cl);
  auto list = chain_tree(widest_chain(bandwidth_matrix(topo), root));

  std::string chosen_why; // how the default change's link was chosen, when it was
  // The best static trees before and after the change, computed when first needed (after
  // the first run has planned the default change).
  std::optional<static_tree_result> best_before, best_after;
  auto static_tree_for = [&](const std::string& a) -> const tree& {
    if (a == "magpie")
      return magpie;
    if (a == "list")
      return list;
    auto& slot = a == "best-before" ? best_before : best_after;
    if (!slot) {
      const auto net = a == "best-before" ? topo : topology_at(timeline, from_s(change_s));
      slot = best_static_tree(net, root, opt.seed);
      if (opt.verbose)
        std::cerr << tag << a << ": " << slot->winner().name << ", " << slot->winner().completion_ms
                  << " ms in the postal model with send overhead\n";
    }
    return slot->winner().t;
  };

  std::vector<run_result> results;
  int rc = 0;
  for (auto& a : algorithms) {
    run_result r;
    r.algorithm = a;
    actors::cluster_config cfg;
    cfg.topo = cluster_topo;
    cfg.seed = opt.seed;
    cfg.clock = actors::clock_mode::virtual_time;
    if (a == "dynamic") {
      cfg.sup.background_period = from_s(aopt.period_s);
      cfg.sup.rtt_watch_period = from_s(aopt.rtt_watch_s);
    }
    // Instrumentation: wide-area bytes while idle, and the root's bandwidth tree.
    bool idle = false;
    std::map<std::pair<int, int>, std::uint64_t> crossing;
    cfg.on_frame = [&](const actors::frame_trace& f) {
      if (idle && f.what == actors::frame_trace::kind::delivered && cl[f.frame->from] != cl[f.frame->to])
        crossing[{cl[f.frame->from], cl[f.frame->to]}] += f.bytes;
    };
    cfg.on_tree_event = [&](proc_id, const tree_event& e) {
      if (idle && e.what == tree_event::kind::parent_changed)
        ++r.idle_parent_changes;
      if (e.what == tree_event::kind::parent_changed
          && e.tree == tree_key{root, short_msgs ? tree_kind::latency : tree_kind::bandwidth}
          && r.tree_moved_s < 0 && seconds(duration{e.at.count()}) >= change_s)
        r.tree_moved_s = seconds(duration{e.at.count()}) - change_s;
    };
    if (opt.verbose)
      std::cerr << tag << a << ": " << topo.name << ", " << n << " processors, seed " << opt.seed
                << "; forming trees\n";
    actors::emulated_cluster c(cfg);
    c.start();
    bool settled = wait_until_quiet(c, 3600s, false);
    r.formed_ms = std::chrono::duration<double, std::milli>(c.last_change()).count();
    if (!settled || seconds(c.elapsed()) + 1 >= start_s) {
      std::cerr << tag << a << ": trees formed at " << r.formed_ms
                << " ms, too late for --start " << start_s << " s\n";
      return 1;
    }
    if (!scenario_given) {
      if (!planned) {
        const int l = short_msgs ? critical_path_link(c, root, chosen_why) : narrowest_crossed_link(c, root);
        if (l < 0) {
          std::cerr << tag
                    << (short_msgs ? "the critical path of the root's latency tree crosses no link "
                                     "line (" + chosen_why + "): give --link or --events\n"
                                   : std::string("the root's bandwidth tree crosses no wide-area link of "
                                                 "finite bandwidth: give --link or --events\n"));
          return 2;
        }
        const auto& k = topo.links[l];
        std::string why;
        planned = default_change(topo, root, {topo.groups[k.a].name, topo.groups[k.b].name},
                                 aopt.drop_percent, rtt_factor, from_s(aopt.change_at_s), why);
        if (!planned)
          return fail(why);
        timeline.changes.push_back(*planned);
        change_s = seconds(planned->at);
      }
      if (auto err = c.schedule_change(*planned))
        return fail(err->message);
    }
    const double idle_from = seconds(c.elapsed()) + 1;
    c.run_until(from_s(idle_from));
    auto drifts_now = [&] {
      std::uint64_t d = 0;
      for (proc_id p = 0; p < n; ++p)
        if (auto* s = c.inspect(p))
          d += s->drifts();
      return d;
    };
    const auto drifts_before = drifts_now();
    idle = true;
    c.run_until(from_s(start_s));
    idle = false;
    r.idle_drifts = drifts_now() - drifts_before;
    r.idle_s = start_s - idle_from;
    for (auto& [dir, bytes] : crossing) {
      const auto s = topo.split_of(topo.groups[dir.first].first_proc, topo.groups[dir.second].first_proc);
      const auto l = topo.find_link(s.side_a, s.side_b);
      if (l < 0)
        continue;
      const auto& k = topology_at(topo, from_s(idle_from)).links[l];
      const rate cap = k.a == s.side_a ? k.bw_ab : k.bw_ba;
      const double share = static_cast<double>(bytes) / (cap * (start_s - idle_from));
      if (share > r.idle_max_share) {
        r.idle_max_share = share;
        r.idle_max_link = topo.groups[s.side_a].name + "->" + topo.groups[s.side_b].name;
      }
    }
    while (seconds(c.elapsed()) < until_s) {
      std::optional<wire::collective_id> id;
      if (a == "dynamic" || a == "frozen")
        id = c.broadcast(root, *size);
      else
        id = c.broadcast_static(root, static_tree_for(a), *size);
      if (!id) {
        std::cerr << tag << a << ": broadcast not started\n";
        rc = 1;
        break;
      }
      point p;
      p.complete = c.run_until_delivered(*id, 600s);
      auto rec = c.deliveries(*id);
      duration last{0};
      std::size_t reached = 0, dups = 0;
      for (auto& [v, times] : rec.delivered) {
        if (times.empty())
          continue;
        ++reached;
        dups += times.size() - 1;
        last = std::max(last, times.front());
      }
      p.complete = p.complete && reached == c.vnode_count() && dups == 0;
      p.start_s = seconds(rec.started);
      p.end_s = seconds(last);
      p.completion_ms = (p.end_s - p.start_s) * 1e3;
      p.rate_MBps = p.completion_ms > 0 ? static_cast<double>(*size) / (p.completion_ms / 1e3) / 1e6 : 0;
      p.ceiling_MBps = ceiling_at(p.start_s);
      p.tree_ceiling_MBps = tree_ceiling_at(p.start_s);
      if (!p.complete) {
        std::cerr << tag << a << ": a broadcast reached " << reached << " of " << c.vnode_count()
                  << " vnodes, " << dups << " duplicates\n";
        rc = 1;
      }
      r.timeline.push_back(p);
      if (!p.complete)
        break;
    }
    for (proc_id p = 0; p < n; ++p)
      if (auto* s = c.inspect(p)) {
        r.background_probes += s->background_probes();
        r.drifts += s->drifts();
      }
    if (opt.verbose)
      std::cerr << tag << a << ": " << r.timeline.size() << " broadcasts\n";
    results.push_back(std::move(r));
  }

  const bool long_msgs = *size >= 1024 * 1024;
  std::printf("adapt on %s (%zu processors, root %u, seed %llu, emulated network, %s broadcasts back to back)\n",
              topo.name.c_str(), n, static_cast<unsigned>(root),
              static_cast<unsigned long long>(opt.seed), aopt.size.c_str());
  for (auto& ch : timeline.changes)
    std::printf("  %s\n", describe_change(topo, ch).c_str());
  if (!chosen_why.empty())
    std::printf("  the link: %s; the largest one-way latency among them\n", chosen_why.c_str());
  // The references: the median completion of best-before's broadcasts that ended before
  // the change, and of best-after's that started at or after it (0: not run).
  auto median_completion = [&](const std::string& name, bool after) {
    std::vector<double> v;
    for (auto& r : results)
      if (r.algorithm == name)
        for (auto& p : r.timeline)
          if (p.complete && (after ? p.start_s >= change_s : p.end_s < change_s))
            v.push_back(p.completion_ms);
    if (v.empty())
      return 0.0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  const double ref_before = median_completion("best-before", false);
  const double ref_after = median_completion("best-after", true);
  if (ref_before > 0 || ref_after > 0) {
    std::printf("best static trees: before the change %.3f ms (%s), after it %.3f ms (%s); medians of "
                "their broadcasts on either side\n",
                ref_before, best_before ? best_before->winner().name.c_str() : "not run", ref_after,
                best_after ? best_after->winner().name.c_str() : "not run");
  }
  std::printf("oracle ceiling: %.1f MB/s before, %.1f MB/s after the first change; one "
              "tree's: %.1f before, %.1f after\n",
              ceiling_at(change_s - 1e-3), ceiling_at(change_s), tree_ceiling_at(change_s - 1e-3),
              tree_ceiling_at(change_s));
  nlohmann::json runs = nlohmann::json::array();
  for (auto& r : results) {
    std::printf("%s (trees formed at %.0f ms):\n", r.algorithm.c_str(), r.formed_ms);
    const bool vs_best = ref_before > 0 || ref_after > 0;
    std::printf("  %9s %9s %12s %10s %12s %6s %6s%s\n", "start_s", "end_s", "completion_ms", "MB/s",
                "ceiling MB/s", "ratio", "/tree", vs_best ? "   /best static" : "");
    // vs the best static tree of the network as it is: the first broadcast after the
    // change from which every later one is within 1.1x of best-after's completion.
    double within_from = -1, first_after = -1, before_max = 0;
    nlohmann::json vs = nlohmann::json::array();
    double recovered = -1;
    double after_min = -1, after_sum = 0, recovered_tree = -1, after_tree_min = -1, after_tree_sum = 0;
    std::size_t after_n = 0;
    for (auto& p : r.timeline) {
      const double ratio = p.ceiling_MBps > 0 ? p.rate_MBps / p.ceiling_MBps : 0;
      const double tree_ratio = p.tree_ceiling_MBps > 0 ? p.rate_MBps / p.tree_ceiling_MBps : 0;
      const bool after = p.start_s >= change_s;
      const double ref = after ? ref_after : p.end_s < change_s ? ref_before : 0;
      const double vb = ref > 0 ? p.completion_ms / ref : 0;
      char vbs[32] = "";
      if (vs_best && ref > 0)
        std::snprintf(vbs, sizeof vbs, " %14.3f", vb);
      else if (vs_best)
        std::snprintf(vbs, sizeof vbs, " %14s", "-");
      std::printf("  %9.3f %9.3f %12.3f %10.2f %12.2f %6.3f %6.3f%s%s\n", p.start_s, p.end_s,
                  p.completion_ms, p.rate_MBps, p.ceiling_MBps, ratio, tree_ratio, vbs,
                  p.complete ? "" : "  (incomplete)");
      if (ref > 0)
        vs.push_back({{"start_s", p.start_s}, {"ratio", vb}, {"after_change", after}});
      if (ref > 0 && !after)
        before_max = std::max(before_max, vb);
      if (ref > 0 && after) {
        if (first_after < 0)
          first_after = vb;
        if (vb > 1.1 || !p.complete)
          within_from = -1;
        else if (within_from < 0)
          within_from = p.start_s - change_s;
      }
      if (p.start_s >= change_s && recovered < 0 && ratio >= 0.9)
        recovered = p.start_s - change_s;
      if (p.start_s >= change_s && recovered_tree < 0 && tree_ratio >= 0.9)
        recovered_tree = p.start_s - change_s;
      if (p.start_s >= change_s + 2) {
        after_min = after_min < 0 ? ratio : std::min(after_min, ratio);
        after_sum += ratio;
        after_tree_min = after_tree_min < 0 ? tree_ratio : std::min(after_tree_min, tree_ratio);
        after_tree_sum += tree_ratio;
        ++after_n;
      }
    }
    if (long_msgs) {
      if (recovered >= 0)
        std::printf("  first broadcast at >= 0.9 x the ceiling started %.3f s after the change\n", recovered);
      else
        std::printf("  no broadcast after the change reached 0.9 x the ceiling\n");
      if (recovered_tree >= 0)
        std::printf("  first broadcast at >= 0.9 x one tree's ceiling started %.3f s after the change\n",
                    recovered_tree);
      else
        std::printf("  no broadcast after the change reached 0.9 x one tree's ceiling\n");
      if (after_n > 0)
        std::printf("  broadcasts started >= 2 s after the change: %zu, rate / ceiling mean %.3f, min "
                    "%.3f; rate / one tree's ceiling mean %.3f, min %.3f\n",
                    after_n, after_sum / static_cast<double>(after_n), after_min,
                    after_tree_sum / static_cast<double>(after_n), after_tree_min);
    }
    if (ref_after > 0 && first_after >= 0) {
      if (ref_before > 0)
        std::printf("  vs the best static tree: at most %.3f x before the change; ", before_max);
      else
        std::printf("  vs the best static tree: ");
      std::printf("%.3f x for the first broadcast after it; ", first_after);
      if (within_from >= 0)
        std::printf("within 1.1 x from %.3f s after the change on\n", within_from);
      else
        std::printf("not within 1.1 x by the last broadcast (%.1f s after the change)\n",
                    r.timeline.empty() ? 0.0 : r.timeline.back().start_s - change_s);
    }
    if (r.algorithm == "dynamic") {
      const char* kind = short_msgs ? "latency" : "bandwidth";
      if (r.tree_moved_s >= 0)
        std::printf("  root's %s tree first changed %.3f s after the change\n", kind, r.tree_moved_s);
      else
        std::printf("  root's %s tree did not change after the change\n", kind);
      std::printf("  idle for %.1f s: the most loaded wide-area link direction (%s) carried %.3f%% of "
                  "its capacity; %llu drifts and %llu parent changes meanwhile\n",
                  r.idle_s, r.idle_max_link.empty() ? "none" : r.idle_max_link.c_str(),
                  r.idle_max_share * 100, static_cast<unsigned long long>(r.idle_drifts),
                  static_cast<unsigned long long>(r.idle_parent_changes));
      std::printf("  in all: %llu background probes, %llu drifts found\n",
                  static_cast<unsigned long long>(r.background_probes),
                  static_cast<unsigned long long>(r.drifts));
    }
    nlohmann::json tl = nlohmann::json::array();
    for (auto& p : r.timeline)
      tl.push_back({{"start_s", p.start_s}, {"end_s", p.end_s}, {"completion_ms", p.completion_ms},
                    {"rate_MBps", p.rate_MBps}, {"ceiling_MBps", p.ceiling_MBps},
                    {"tree_ceiling_MBps", p.tree_ceiling_MBps}, {"complete", p.complete}});
    nlohmann::json jr = {{"algorithm", r.algorithm}, {"trees_formed_ms", r.formed_ms}, {"timeline", tl},
                         {"recovered_after_s", recovered}};
    if (!vs.empty()) {
      jr["vs_best_static"] = {{"per_broadcast", vs}, {"max_before", before_max},
                              {"first_after", first_after}, {"within_1_1_after_s", within_from}};
    }
    if (after_n > 0)
      jr["after_2s"] = {{"broadcasts", after_n}, {"mean_ratio", after_sum / static_cast<double>(after_n)},
                        {"min_ratio", after_min}};
    if (r.algorithm == "dynamic")
      jr["dynamic"] = {{"tree_moved_after_s", r.tree_moved_s}, {"idle_max_link_share", r.idle_max_share},
                       {"idle_max_link", r.idle_max_link}, {"idle_s", r.idle_s},
                       {"idle_drifts", r.idle_drifts}, {"idle_parent_changes", r.idle_parent_changes},
                       {"background_probes", r.background_probes},
                       {"drifts", r.drifts}, {"period_s", aopt.period_s}};
    runs.push_back(jr);
  }

  if (!opt.plot_path.empty()) {
    plot_spec p;
    p.title = "Broadcasts of " + aopt.size + " back to back on " + topo.name + " while the network changes";
    p.x_label = "emulated time (s)";
    p.y_label = long_msgs ? "rate (MB/s) = size / completion" : "completion (ms)";
    p.draw = plot_spec::style::steps;
    for (auto& r : results) {
      plot_series s;
      s.label = r.algorithm;
      for (auto& q : r.timeline) {
        s.x.push_back(q.start_s);
        s.y.push_back(long_msgs ? q.rate_MBps : q.completion_ms);
      }
      p.series.push_back(std::move(s));
    }
    if (long_msgs) {
      plot_series s;
      s.label = "oracle ceiling";
      for (double t = start_s; t <= until_s; t += 0.05) {
        s.x.push_back(t);
        s.y.push_back(ceiling_at(t));
      }
      p.series.push_back(std::move(s));
      plot_series tc;
      tc.label = "one tree's ceiling";
      for (double t = start_s; t <= until_s; t += 0.05) {
        tc.x.push_back(t);
        tc.y.push_back(tree_ceiling_at(t));
      }
      p.series.push_back(std::move(tc));
    }
    for (auto& ch : timeline.changes)
      p.markers.push_back({seconds(ch.at), describe_change(topo, ch).substr(3)});
    if (!write_plot("adapt", opt.plot_path, p))
      return 2;
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j;
    j["experiment"] = "adapt";
    j["topology"] = topo.name;
    j["seed"] = opt.seed;
    j["root"] = root;
    j["procs"] = n;
    j["size"] = *size;
    nlohmann::json ch = nlohmann::json::array();
    for (auto& c : timeline.changes)
      ch.push_back(describe_change(topo, c));
    j["changes"] = ch;
    j["ceiling_before_MBps"] = ceiling_at(change_s - 1e-3);
    j["ceiling_after_MBps"] = ceiling_at(change_s);
    j["tree_ceiling_before_MBps"] = tree_ceiling_at(change_s - 1e-3);
    j["tree_ceiling_after_MBps"] = tree_ceiling_at(change_s);
    if (!chosen_why.empty())
      j["change_chosen"] = chosen_why;
    if (best_before)
      j["best_static_before"] = {{"tree", best_before->winner().name},
                                 {"model_ms", best_before->winner().completion_ms},
                                 {"median_completion_ms", ref_before}};
    if (best_after)
      j["best_static_after"] = {{"tree", best_after->winner().name},
                                {"model_ms", best_after->winner().completion_ms},
                                {"median_completion_ms", ref_after}};
    j["runs"] = runs;
    if (!write_json("adapt", opt.json_path, j))
      return 2;
  }
  return rc;
}

void add_bench_adapt_command(CLI::App& bench, std::function<int()>& action) {
  auto opt = std::make_shared<bench_adapt_options>();
  auto cmd = bench.add_subcommand(
    "adapt", "broadcasts back to back while links change: adaptive trees vs static ones");
  add_bench_options(*cmd, opt->common);
  cmd->add_option("--size", opt->size, "broadcast size (64M; 1 for one byte)");
  cmd->add_option("--algorithms", opt->algorithms,
                  "of dynamic,frozen,magpie,list,best-before,best-after (long messages: the first "
                  "four; short: all but list)")->delimiter(',');
  cmd->add_option("--events", opt->events_path, "FILE of 'at' lines (docs/topology.md) instead of the default change");
  cmd->add_option("--link", opt->link, "G1 G2: the link the default change degrades")->expected(2);
  cmd->add_option("--drop", opt->drop_percent, "PERCENT of the link's bandwidth lost (75; long messages)");
  cmd->add_option("--rtt-factor", opt->rtt_factor,
                  "F: the link's RTT is multiplied by F (5; short messages, under 1 KiB)");
  cmd->add_option("--change-at", opt->change_at_s, "S: when the default change happens (40)");
  cmd->add_option("--start", opt->start_s, "S: first broadcast (change-at - 6)");
  cmd->add_option("--until", opt->until_s, "S: no broadcast starts after (change-at + 12)");
  cmd->add_option("--period", opt->period_s, "S: background measurement period of dynamic (5)");
  cmd->add_option("--rtt-watch", opt->rtt_watch_s,
                  "S: dynamic pings its latency trees' remote parents this often (0.5; 0: never)");
  cmd->callback([opt, &action] { action = [opt] { return run_bench_adapt(*opt); }; });
}

} // namespace banyan::cli

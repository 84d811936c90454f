#include "sim_trees.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "root_collectives.hpp"
#include "tree_report.hpp"

namespace banyan::cli {

std::vector<proc_id> leave_half(actors::emulated_cluster& c) {
  std::vector<proc_id> leaving;
  auto running = c.running_procs();
  for (std::size_t i = 1; i < running.size(); i += 2)
    leaving.push_back(running[i]);
  for (auto p : leaving)
    c.leave(p);
  return leaving;
}

std::vector<proc_id> leave_some(actors::emulated_cluster& c, std::size_t count) {
  std::vector<proc_id> leaving;
  auto running = c.running_procs();
  count = std::min(count, running.size() > 0 ? running.size() - 1 : 0);
  // The middles of `count` equal stretches of the running list: not the roots that
  // --open-roots spreads over the ids from 0.
  for (std::size_t i = 0; i < count; ++i) {
    auto at = (2 * i + 1) * running.size() / (2 * count);
    leaving.push_back(running[std::max<std::size_t>(at, 1)]);
  }
  for (auto p : leaving)
    c.leave(p);
  return leaving;
}

void rejoin(actors::emulated_cluster& c, const std::vector<proc_id>& procs) {
  auto& topo = c.topo();
  auto running = c.running_procs();
  for (auto p : procs) {
    // A contact in the newcomer's own cluster if there is one, as a site-local
    // launcher would give it.
    proc_id contact = running.front();
    for (auto q : running)
      if (topo.leaf_of(q) == topo.leaf_of(p)) {
        contact = q;
        break;
      }
    auto k = 1u; // the vnodes it started with: [p*k, (p+1)*k)
    if (auto err = c.join(p, contact, vnode_set::range(p * k, (p + 1) * k)))
      std::cerr << "rejoin of " << p << " failed: " << err->to_string() << "\n";
  }
}

namespace {

void print_kind(const char* name, const kind_stats& s) {
  std::printf("  %-9s trees %4zu  invalid %zu  WAN edges mean %5.2f max %3zu  depth mean "
              "%5.2f max %3d\n",
              name, s.trees, s.invalid, s.wan_edges_mean, s.wan_edges_max, s.depth_mean,
              s.depth_max);
  std::printf("  %-9s entering every group once: %zu of %zu trees (every top-level group "
              "once: %zu); extra entries per tree %.2f\n",
              "", s.entry_minimal, s.trees, s.top_entry_minimal, s.excess_entries_mean);
  if (s.invalid > 0)
    std::printf("    first problem: %s\n", s.first_problem.c_str());
}

/// The probe replies' sizes without padding, per phase (`--reply-sizes`).
struct reply_sizes {
  struct phase {
    std::string name;
    std::vector<std::size_t> bytes; // every reply
    std::vector<std::size_t> view;  // of those that carried a view or part of one: its bytes
    std::size_t omitted = 0, partial = 0, whole = 0;
    std::size_t cut = 0; // replies that left differing buckets out (reply budget)
  };
  std::mutex m;
  std::vector<phase> phases;

  void start(std::string name) {
    std::lock_guard lock(m);
    phases.push_back({std::move(name), {}, {}, 0, 0, 0, 0});
  }
  void note(const wire::bw_reply& r) {
    std::lock_guard lock(m);
    if (phases.empty())
      return;
    auto& p = phases.back();
    const auto bytes = wire::wire_size(r) - r.padding;
    p.bytes.push_back(bytes);
    if (r.view_omitted) {
      ++p.omitted;
      return;
    }
    ++(r.view_buckets.empty() ? p.whole : p.partial);
    if (r.view_buckets_left > 0)
      ++p.cut;
    auto bare = r;
    bare.members.clear();
    bare.departed.clear();
    bare.routes.clear();
    bare.view_buckets.clear();
    bare.view_buckets_left = 0;
    p.view.push_back(bytes - (wire::wire_size(bare) - bare.padding));
  }
  nlohmann::json report() {
    std::lock_guard lock(m);
    nlohmann::json out = nlohmann::json::array();
    auto quantile = [](std::vector<std::size_t>& b, double q) {
      return b.empty() ? std::size_t{0}
                       : b[std::min(b.size() - 1, static_cast<std::size_t>(q * static_cast<double>(b.size())))];
    };
    for (auto& p : phases) {
      auto b = p.bytes, v = p.view;
      std::sort(b.begin(), b.end());
      std::sort(v.begin(), v.end());
      std::printf("  probe replies (%s): %zu (view left out %zu, buckets %zu of which cut "
                  "by the budget %zu, whole %zu); "
                  "bytes without padding median %zu p99 %zu max %zu; of the view in those "
                  "that carry one, median %zu p99 %zu max %zu\n",
                  p.name.c_str(), b.size(), p.omitted, p.partial, p.cut, p.whole, quantile(b, 0.5),
                  quantile(b, 0.99), quantile(b, 1.0), quantile(v, 0.5), quantile(v, 0.99),
                  quantile(v, 1.0));
      out.push_back({{"phase", p.name}, {"replies", b.size()}, {"view_omitted", p.omitted},
                     {"view_buckets", p.partial}, {"cut_by_budget", p.cut}, {"whole_view", p.whole},
                     {"median_bytes", quantile(b, 0.5)}, {"p99_bytes", quantile(b, 0.99)},
                     {"max_bytes", quantile(b, 1.0)}, {"view_median_bytes", quantile(v, 0.5)},
                     {"view_p99_bytes", quantile(v, 0.99)}, {"view_max_bytes", quantile(v, 1.0)}});
    }
    return out;
  }
};

heal_event settle_after(actors::emulated_cluster& c, std::string what, std::size_t n,
                         const sim_trees_options& opt) {
  heal_event ev;
  ev.what = std::move(what);
  ev.at_ms = to_ms(c.elapsed());
  ev.procs = n;
  if (opt.verbose)
    std::cerr << "--- " << ev.what << " of " << n << " processors at " << ev.at_ms << " ms\n";
  ev.settled = run_with_progress(c, from_ms(opt.limit_s * 1000), from_ms(10), opt.verbose);
  ev.restabilize_ms = std::max(0.0, to_ms(c.last_change()) - ev.at_ms);
  return ev;
}

} // namespace

int run_sim_trees(const sim_trees_options& opt) {
  auto topo = load_topology(opt.topology);
  if (!topo) {
    std::cerr << "banyan sim trees: " << topo.err().to_string() << "\n";
    return 2;
  }
  if (opt.clock != "virtual" && opt.clock != "real") {
    std::cerr << "banyan sim trees: --clock must be 'virtual' or 'real', not '" << opt.clock
              << "'\n";
    return 2;
  }
  if (opt.rules != "banyan" && opt.rules != "paper") {
    std::cerr << "banyan sim trees: --rules must be 'banyan' or 'paper', not '" << opt.rules
              << "'\n";
    return 2;
  }
  if (!opt.events_path.empty()) {
    std::ifstream in(opt.events_path);
    if (!in) {
      std::cerr << "banyan sim trees: cannot read " << opt.events_path << "\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto changes = parse_network_changes(*topo, text.str());
    if (!changes) {
      std::cerr << "banyan sim trees: " << opt.events_path << ": " << changes.err().message << "\n";
      return 2;
    }
    topo->changes.insert(topo->changes.end(), changes->begin(), changes->end());
    std::stable_sort(topo->changes.begin(), topo->changes.end(),
                     [](auto& x, auto& y) { return x.at < y.at; });
  }
  if (opt.background_s < 0) {
    std::cerr << "banyan sim trees: --background must be >= 0\n";
    return 2;
  }
  if (opt.extra < 0 || opt.local_bias < 0 || opt.local_bias > 1) {
    std::cerr << "banyan sim trees: --extra must be >= 0 and --local-bias within [0, 1]\n";
    return 2;
  }
  if (opt.rejoin_at_ms >= 0 && opt.leave_half_at_ms < 0) {
    std::cerr << "banyan sim trees: --rejoin-at needs --leave-half-at\n";
    return 2;
  }
  if (opt.rejoin_at_ms >= 0 && opt.rejoin_at_ms <= opt.leave_half_at_ms) {
    std::cerr << "banyan sim trees: --rejoin-at must come after --leave-half-at\n";
    return 2;
  }
  for (auto r : opt.dot_roots)
    if (r >= topo->proc_count()) {
      std::cerr << "banyan sim trees: --dot-root " << r << " is not a processor of "
                << topo->name << " (0.." << topo->proc_count() - 1 << ")\n";
      return 2;
    }
  for (auto r : opt.roots)
    if (r >= topo->proc_count()) {
      std::cerr << "banyan sim trees: --roots " << r << " is not a processor of "
                << topo->name << " (0.." << topo->proc_count() - 1 << ")\n";
      return 2;
    }
  if (opt.open_roots > topo->proc_count() || (opt.open_roots > 0 && !opt.roots.empty())) {
    std::cerr << "banyan sim trees: --open-roots must be at most the number of processors ("
              << topo->proc_count() << "), and not given with --roots\n";
    return 2;
  }
  auto roots = opt.roots; // trees on demand: the roots opened
  for (std::size_t i = 0; i < opt.open_roots; ++i)
    roots.push_back(static_cast<proc_id>(i * topo->proc_count() / opt.open_roots));
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  if (opt.view_buckets > 4096) {
    std::cerr << "banyan sim trees: --view-buckets must be at most 4096\n";
    return 2;
  }
  actors::cluster_config cfg;
  cfg.topo = *topo;
  cfg.sup.view_buckets = opt.view_buckets;
  cfg.sup.reply_budget = opt.reply_budget;
  reply_sizes replies;
  if (opt.reply_sizes) {
    cfg.on_frame = [&](const actors::frame_trace& f) {
      if (f.what == actors::frame_trace::kind::sent)
        if (auto* r = std::get_if<wire::bw_reply>(&f.frame->body))
          replies.note(*r);
    };
    replies.start("formation");
  }
  cfg.seed = opt.seed;
  cfg.share_quantum = duration{static_cast<duration::rep>(opt.share_quantum_us * 1000)};
  cfg.clock = opt.clock == "real" ? actors::clock_mode::real_time
                                  : actors::clock_mode::virtual_time;
  cfg.sup.rules = opt.rules == "paper" ? rule_variant::paper : rule_variant::banyan;
  cfg.sup.extra_measurements = opt.extra;
  cfg.sup.local_bias = opt.local_bias; // (the paper variant draws uniformly: variant_decision)
  cfg.sup.background_period = from_ms(opt.background_s * 1000);
  if (!roots.empty()) {
    cfg.sup.tree_set = tree_set_mode::on_demand;
    cfg.sup.retire_after = duration{0}; // formed to be measured: they never retire here
    cfg.sup.lan_search = !opt.no_lan_search;
  }
  std::uint64_t changes_seen = 0;
  bool observing = false;
  std::vector<std::pair<proc_id, tree_event>> changes; // observed, for --changes-log
  cfg.on_tree_event = [&](proc_id p, const tree_event& e) {
    if (observing && e.what == tree_event::kind::parent_changed) {
      ++changes_seen;
      if (!opt.changes_log.empty())
        changes.emplace_back(p, e);
    }
  };
  actors::emulated_cluster c(cfg);
  if (opt.verbose)
    std::cerr << "banyan sim trees: " << topo->name << ", " << topo->proc_count()
              << " processors, seed " << opt.seed << ", " << opt.clock << " time (EMULATED network)\n";
  c.start();
  for (auto r : roots)
    c.prepare(r);
  auto limit = from_ms(opt.limit_s * 1000);
  bool settled = run_with_progress(c, limit, from_ms(10), opt.verbose, roots);
  auto converged_ms = to_ms(c.last_change());
  auto probes_formation = c.probes();
  auto lat = summarize(c, tree_kind::latency, roots);
  auto bw = summarize(c, tree_kind::bandwidth, roots);
  auto clusters = topo->clusters().size();

  std::printf("%s: %zu processors in %zu clusters, seed %llu\n", topo->name.c_str(),
              topo->proc_count(), clusters, static_cast<unsigned long long>(opt.seed));
  if (!roots.empty())
    std::printf("  trees on demand: %zu roots opened at the start\n", roots.size());
  std::printf("  converged after %.1f ms of emulated time%s; %.1f probes per processor\n",
              converged_ms, settled ? "" : " (NOT settled within the limit)",
              static_cast<double>(probes_formation) / static_cast<double>(topo->proc_count()));
  print_kind("latency", lat);
  print_kind("bandwidth", bw);
  for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
    std::size_t shown = 0;
    for (auto root : c.monitor().roots()) {
      if (shown == opt.explain_entries)
        break;
      auto lines = explain_entries(c, {root, k});
      if (lines.empty())
        continue;
      ++shown;
      std::printf("  %s tree of %u:\n", to_string(k), static_cast<unsigned>(root));
      for (const auto& l : lines)
        std::printf("    %s\n", l.c_str());
    }
  }

  nlohmann::json j;
  j["topology"] = topo->name;
  j["procs"] = topo->proc_count();
  j["clusters"] = clusters;
  j["seed"] = opt.seed;
  j["clock"] = opt.clock;
  j["rules"] = opt.rules;
  j["extra_measurements"] = opt.extra;
  j["local_bias"] = opt.local_bias;
  j["view_buckets"] = opt.view_buckets;
  j["reply_budget"] = opt.reply_budget;
  j["converged_ms"] = converged_ms;
  j["settled"] = settled;
  j["probes_per_proc"] = static_cast<double>(probes_formation) /
                         static_cast<double>(topo->proc_count());
  j["latency"] = to_json(lat);
  j["bandwidth"] = to_json(bw);
  if (!roots.empty()) {
    j["open_roots"] = roots;
    j["lan_search"] = !opt.no_lan_search;
  }

  if (!opt.dot_dir.empty()) {
    std::filesystem::create_directories(opt.dot_dir);
    for (auto r : opt.dot_roots)
      for (auto k : {tree_kind::latency, tree_kind::bandwidth})
        for (auto& f : export_tree(c, {r, k}, opt.dot_dir))
          std::printf("  wrote %s\n", f.c_str());
  }

  bool ok = settled && lat.invalid == 0 && bw.invalid == 0;
  if (opt.collectives) {
    auto from = roots.empty() ? std::vector<proc_id>{0} : roots;
    auto rc = run_root_collectives(c, from, opt.collective_bytes, cfg.vnodes_per_proc,
                                   from_ms(opt.limit_s * 1000));
    std::printf("  collectives from %zu roots: broadcasts of %zu B exactly once %zu of %zu "
                "(slowest %.1f ms), reductions exactly once %zu of %zu (slowest %.1f ms)\n",
                from.size(), opt.collective_bytes, rc.broadcasts_once, rc.broadcasts,
                rc.broadcast_ms_max, rc.reductions_once, rc.reductions, rc.reduction_ms_max);
    j["collectives"] = rc.to_json();
    ok = ok && rc.ok();
  }
  if (opt.leave_half_at_ms >= 0) {
    std::vector<heal_event> events;
    replies.start("until the leave");
    c.run_until(from_ms(opt.leave_half_at_ms));
    auto gone = opt.leave_count > 0 ? leave_some(c, opt.leave_count) : leave_half(c);
    replies.start("leave");
    events.push_back(settle_after(c, "leave", gone.size(), opt));
    if (opt.rejoin_at_ms >= 0) {
      replies.start("until the rejoin");
      c.run_until(from_ms(opt.rejoin_at_ms));
      rejoin(c, gone);
      replies.start("rejoin");
      events.push_back(settle_after(c, "rejoin", gone.size(), opt));
    }
    auto lat2 = summarize(c, tree_kind::latency, roots);
    auto bw2 = summarize(c, tree_kind::bandwidth, roots);
    nlohmann::json evs = nlohmann::json::array();
    for (auto& e : events) {
      std::printf("  %-6s of %zu processors at %.1f ms: trees stable again after %.1f ms%s\n",
                  e.what.c_str(), e.procs, e.at_ms, e.restabilize_ms,
                  e.settled ? "" : " (NOT settled within the limit)");
      evs.push_back({{"event", e.what}, {"at_ms", e.at_ms}, {"procs", e.procs},
                     {"restabilize_ms", e.restabilize_ms}, {"settled", e.settled}});
      ok = ok && e.settled;
    }
    std::printf("  after churn (%zu processors live):\n", c.running_procs().size());
    print_kind("latency", lat2);
    print_kind("bandwidth", bw2);
    j["events"] = evs;
    j["after_churn"] = {{"latency", to_json(lat2)}, {"bandwidth", to_json(bw2)}};
    ok = ok && lat2.invalid == 0 && bw2.invalid == 0;
  }
  if (opt.observe_s >= 0) {
    const auto from = c.elapsed();
    replies.start("observed");
    observing = true;
    c.run_until(std::max(from, from_ms(opt.observe_s * 1000)));
    observing = false;
    std::uint64_t drifts = 0, background = 0;
    for (auto p : c.running_procs())
      if (auto* s = c.inspect(p)) {
        drifts += s->drifts();
        background += s->background_probes();
      }
    auto lat3 = summarize(c, tree_kind::latency, roots);
    auto bw3 = summarize(c, tree_kind::bandwidth, roots);
    std::printf("  observed from %.1f s to %.1f s: %llu parent changes, %llu background probes, "
                "%llu drifts\n",
                to_ms(from) / 1000, to_ms(c.elapsed()) / 1000,
                static_cast<unsigned long long>(changes_seen),
                static_cast<unsigned long long>(background), static_cast<unsigned long long>(drifts));
    print_kind("latency", lat3);
    print_kind("bandwidth", bw3);
    j["observed"] = {{"from_s", to_ms(from) / 1000}, {"until_s", to_ms(c.elapsed()) / 1000},
                     {"parent_changes", changes_seen}, {"background_probes", background},
                     {"drifts", drifts}, {"latency", to_json(lat3)}, {"bandwidth", to_json(bw3)}};
    ok = ok && lat3.invalid == 0 && bw3.invalid == 0;
    if (!opt.changes_log.empty()) {
      std::ofstream log(opt.changes_log);
      for (auto& [p, e] : changes)
        log << to_ms(e.at) / 1000 << ' ' << p << ' ' << to_string(e.tree.kind) << ' '
            << e.tree.root << ' ' << static_cast<long long>(e.old_parent == no_proc ? -1 : e.old_parent)
            << ' ' << static_cast<long long>(e.new_parent == no_proc ? -1 : e.new_parent) << '\n';
      if (!log)
        std::cerr << "banyan sim trees: cannot write " << opt.changes_log << "\n";
    }
  }
  if (opt.reply_sizes)
    j["probe_replies"] = replies.report();
  auto ns = c.net_stats();
  j["messages"] = ns.messages;
  j["bytes"] = ns.bytes;
  j["probes_total"] = c.probes();
  j["cycles_broken"] = c.monitor().cycles_broken();
  j["ok"] = ok;
  if (!opt.json_path.empty()) {
    std::ofstream out(opt.json_path);
    if (!out) {
      std::cerr << "banyan sim trees: cannot write " << opt.json_path << "\n";
      return 2;
    }
    out << j.dump(2) << "\n";
    std::printf("  wrote %s\n", opt.json_path.c_str());
  }
  return ok ? 0 : 1;
}

} // namespace banyan::cli

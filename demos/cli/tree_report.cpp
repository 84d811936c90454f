#include "tree_report.hpp"

#include "banyan/core/group_entries.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace banyan::cli {

kind_stats summarize(const actors::emulated_cluster& c, tree_kind kind,
                     const std::vector<proc_id>& roots) {
  kind_stats s;
  auto cluster_of = c.topo().cluster_of();
  auto live = c.monitor().live();
  double wan_sum = 0, depth_sum = 0, excess_sum = 0;
  for (auto root : roots.empty() ? c.monitor().roots() : roots) {
    auto t = c.monitor().tree_of({root, kind});
    ++s.trees;
    if (auto problem = t.validate(live)) {
      if (s.invalid++ == 0)
        s.first_problem = "tree " + std::string(to_string(kind)) + " rooted at " +
                          std::to_string(root) + ": " + *problem;
    }
    auto wan = t.cross_edges(cluster_of);
    wan_sum += static_cast<double>(wan);
    s.wan_edges_max = std::max(s.wan_edges_max, wan);
    depth_sum += t.depth_mean();
    auto entries = count_group_entries(t, c.topo(), live);
    s.entry_minimal += entries.minimal() ? 1 : 0;
    bool top_once = true;
    for (std::size_t g = 0; g < entries.per_group.size(); ++g) {
      const auto& gr = c.topo().groups[g];
      const bool holds_root = root >= gr.first_proc && root < gr.first_proc + gr.proc_count;
      if (gr.parent < 0 && entries.per_group[g] > (holds_root ? 0u : 1u))
        top_once = false;
    }
    s.top_entry_minimal += top_once ? 1 : 0;
    excess_sum += entries.excess;
    s.depth_max = std::max(s.depth_max, t.depth_max());
  }
  if (s.trees > 0) {
    s.wan_edges_mean = wan_sum / static_cast<double>(s.trees);
    s.depth_mean = depth_sum / static_cast<double>(s.trees);
    s.excess_entries_mean = excess_sum / static_cast<double>(s.trees);
  }
  return s;
}

std::vector<std::string> explain_entries(const actors::emulated_cluster& c, tree_key k) {
  std::vector<std::string> out;
  const auto& topo = c.topo();
  auto t = c.monitor().tree_of(k);
  auto entries = count_group_entries(t, topo, c.monitor().live());
  for (std::size_t g = 0; g < entries.per_group.size(); ++g) {
    const auto& gr = topo.groups[g];
    auto in = [&](proc_id p) { return p >= gr.first_proc && p < gr.first_proc + gr.proc_count; };
    if (entries.per_group[g] <= (in(t.root()) ? 0u : 1u))
      continue;
    std::string line = "group " + gr.name + " (" + std::to_string(gr.proc_count) +
                       " procs) entered " + std::to_string(entries.per_group[g]) + "x:";
    for (proc_id p = gr.first_proc; p < gr.first_proc + gr.proc_count; ++p) {
      auto q = t.parent(p);
      if (q != no_proc && !in(q))
        line += " " + std::to_string(p) + "<-" + std::to_string(q) + " (" +
                format_duration(topo.rtt(p, q)) + ")";
    }
    out.push_back(line);
  }
  return out;
}

nlohmann::json to_json(const kind_stats& s) {
  return {{"trees", s.trees},           {"invalid", s.invalid},
          {"wan_edges_mean", s.wan_edges_mean}, {"wan_edges_max", s.wan_edges_max},
          {"depth_mean", s.depth_mean}, {"depth_max", s.depth_max},
          {"entry_minimal", s.entry_minimal}, {"top_entry_minimal", s.top_entry_minimal}, {"excess_entries_mean", s.excess_entries_mean}};
}

std::string progress_line(const actors::emulated_cluster& c, const std::vector<proc_id>& roots) {
  auto& m = c.monitor();
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "t=%8.1f ms  trees complete %4zu/%-4zu  measuring %4zu  parent changes %7llu",
                to_ms(c.elapsed()), m.complete_trees(roots), (roots.empty() ? m.roots().size() : roots.size()) * 2, m.measuring(),
                static_cast<unsigned long long>(m.parent_changes()));
  return buf;
}

std::vector<std::string> export_tree(const actors::emulated_cluster& c, tree_key k,
                                     const std::string& dir) {
  std::vector<std::string> files;
  auto& topo = c.topo();
  std::vector<std::string> names;
  for (auto& g : topo.groups)
    names.push_back(g.name);
  auto t = c.monitor().tree_of(k);
  auto base = dir + "/" + to_string(k.kind) + "-root" + std::to_string(k.root);
  std::string title = std::string(to_string(k.kind)) + " tree rooted at " +
                      std::to_string(k.root) + " (" + topo.name + ")";
  {
    std::ofstream out(base + ".dot");
    out << t.to_dot(topo.cluster_of(), names, title);
  }
  files.push_back(base + ".dot");
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    auto cmd = "dot -Tsvg '" + base + ".dot' -o '" + base + ".svg' && dot -Tpng '" + base +
               ".dot' -o '" + base + ".png'";
    if (std::system(cmd.c_str()) == 0) {
      files.push_back(base + ".svg");
      files.push_back(base + ".png");
    }
  }
  return files;
}

bool run_with_progress(actors::emulated_cluster& c, duration limit, duration step,
                       bool verbose, const std::vector<proc_id>& roots) {
  bool tty = isatty(fileno(stderr)) != 0;
  auto start = c.elapsed();
  auto next_line = start;
  for (;;) {
    auto t = c.elapsed() + step;
    c.run_until(t);
    bool quiet = c.quiet();
    if (verbose && (tty || c.elapsed() >= next_line || quiet)) {
      std::cerr << (tty ? "\r" : "") << progress_line(c, roots) << (tty ? "" : "\n") << std::flush;
      // a terminal gets a live line; logs get one line per emulated second
      next_line = c.elapsed() + (tty ? step : std::chrono::duration_cast<duration>(std::chrono::seconds(1)));
    }
    if (quiet) {
      if (verbose && tty)
        std::cerr << "\n";
      return true;
    }
    if (c.elapsed() - start > limit) {
      if (verbose && tty)
        std::cerr << "\n";
      return false;
    }
  }
}

} // namespace banyan::cli

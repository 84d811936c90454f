#include "banyan/core/static_tree_oracle.hpp"

#include <algorithm>
#include <limits>

namespace banyan {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Objective of the descent: completion first, then the sum of arrivals (so that moves
/// still count when several processors share the latest arrival).
struct score {
  double completion = inf;
  double total = inf;
  bool better_than(const score& o) const {
    const double tol = 1e-9;
    return completion < o.completion - tol ||
           (completion <= o.completion + tol && total < o.total - tol);
  }
};

score score_of(const tree& t, const cost_matrix& lat, double o) {
  auto a = arrival_times_with_overhead(t, lat, o);
  score s{0, 0};
  for (auto x : a) {
    s.completion = std::max(s.completion, x);
    s.total += x;
  }
  return s;
}

/// Moves of one processor on the path to the latest arrival under another parent, the
/// best of each round kept while it improves the score; at most `budget` evaluations.
tree descend(tree t, const cost_matrix& lat, double o, std::size_t budget) {
  const auto n = t.size();
  auto best = score_of(t, lat, o);
  std::size_t used = 0;
  while (used < budget) {
    auto arrival = arrival_times_with_overhead(t, lat, o);
    proc_id last = t.root();
    for (proc_id p = 0; p < n; ++p)
      if (arrival[p] > arrival[last])
        last = p;
    auto kids = t.children();
    auto parents = t.parents();
    score round_best = best;
    std::pair<proc_id, proc_id> move{no_proc, no_proc};
    for (proc_id p = last; p != t.root() && used < budget; p = parents[p]) {
      std::vector<bool> below(n, false);
      std::vector<proc_id> stack{p};
      while (!stack.empty()) {
        auto x = stack.back();
        stack.pop_back();
        below[x] = true;
        for (auto c : kids[x])
          stack.push_back(c);
      }
      for (proc_id q = 0; q < n && used < budget; ++q) {
        if (below[q] || q == parents[p])
          continue;
        auto trial = parents;
        trial[p] = q;
        ++used;
        auto s = score_of(tree(t.root(), std::move(trial)), lat, o);
        if (s.better_than(round_best)) {
          round_best = s;
          move = {p, q};
        }
      }
    }
    if (move.first == no_proc)
      break;
    parents[move.first] = move.second;
    t = tree(t.root(), std::move(parents));
    best = round_best;
  }
  return t;
}

} // namespace

std::vector<double> short_message_bounds(const topology& topo, proc_id root, bool towards_root) {
  const auto n = topo.proc_count();
  const auto lat = latency_matrix(topo);
  const double o = to_ms(topo.send_overhead);
  std::vector<double> dist(n, inf);
  std::vector<bool> done(n, false);
  if (root >= n)
    return dist;
  dist[root] = 0;
  for (std::size_t round = 0; round < n; ++round) {
    proc_id u = no_proc;
    for (proc_id p = 0; p < n; ++p)
      if (!done[p] && (u == no_proc || dist[p] < dist[u]))
        u = p;
    if (u == no_proc || dist[u] == inf)
      break;
    done[u] = true;
    for (proc_id v = 0; v < n; ++v)
      if (!done[v] && v != u) {
        const double w = (towards_root ? lat[v][u] : lat[u][v]) + o;
        dist[v] = std::min(dist[v], dist[u] + w);
      }
  }
  return dist;
}

double short_message_bound(const topology& topo, proc_id root, bool towards_root) {
  auto d = short_message_bounds(topo, root, towards_root);
  double worst = 0;
  for (auto x : d)
    worst = std::max(worst, x);
  return worst;
}

std::vector<std::vector<int>> group_levels(const topology& topo) {
  const auto n = topo.proc_count();
  std::vector<std::vector<int>> levels(n);
  std::size_t depth = 0;
  for (proc_id p = 0; p < n; ++p) {
    for (int g = topo.leaf_of(p); g >= 0; g = topo.groups[static_cast<std::size_t>(g)].parent)
      levels[p].insert(levels[p].begin(), g);
    depth = std::max(depth, levels[p].size());
  }
  for (auto& l : levels)
    while (l.size() < depth)
      l.push_back(l.back());
  return levels;
}

static_tree_result best_static_tree(const topology& topo, proc_id root, std::uint64_t seed,
                                    bool with_sa) {
  const auto n = topo.proc_count();
  const auto lat = latency_matrix(topo);
  const double o = to_ms(topo.send_overhead);
  static_tree_result r;
  auto add = [&](std::string name, tree t) {
    auto c = completion_time_with_overhead(t, lat, o);
    r.candidates.push_back({std::move(name), std::move(t), c});
    if (c < r.candidates[r.best].completion_ms - 1e-9)
      r.best = r.candidates.size() - 1;
  };
  add("binomial", binomial_tree(n, root));
  add("mst", mst_tree(lat, root));
  add("hlot", hlot_tree(lat, root));
  add("magpie", magpie_tree(n, root, topo.cluster_of()));
  add("multilevel", multilevel_tree(root, group_levels(topo)));
  if (with_sa)
    add("sa", sa_tree(lat, {}, root, 1, seed));
  const auto from = r.winner();
  const std::size_t budget = std::max<std::size_t>(1000, 5000000 / std::max<std::size_t>(1, n));
  add("descent from " + from.name, descend(from.t, lat, o, budget));
  return r;
}

} // namespace banyan

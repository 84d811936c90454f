// The fixed and latency-driven shapes of tree_builders.hpp, and the postal model.
// Simulated annealing (and the bandwidth-aware model it optimizes) lives in
// builder_sa.cpp, the adaptive tree in builder_adaptive.cpp.

#include "banyan/core/tree_builders.hpp"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <map>

namespace banyan {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

[[maybe_unused]] bool square(const cost_matrix& m) {
  for (const auto& row : m)
    if (row.size() != m.size())
      return false;
  return true;
}

/// A binomial tree over `members` (in the given order) rooted at members[root_index]:
/// the same arithmetic as binomial_tree on positions in `members`.
void binomial_over(const std::vector<proc_id>& members, std::size_t root_index,
                   std::vector<proc_id>& parent) {
  const auto m = members.size();
  for (std::size_t i = 0; i < m; ++i) {
    auto rel = (i + m - root_index) % m;
    if (rel == 0)
      continue;
    auto up = rel & (rel - 1); // clear the lowest set bit
    parent[members[i]] = members[(up + root_index) % m];
  }
}

/// Processors in breadth-first order from the root, following `kids`.
std::vector<proc_id> bfs_order(const tree& t, const std::vector<std::vector<proc_id>>& kids) {
  std::vector<proc_id> order;
  if (t.root() >= t.size())
    return order;
  std::vector<bool> seen(t.size(), false);
  order.push_back(t.root());
  seen[t.root()] = true;
  for (std::size_t i = 0; i < order.size(); ++i)
    for (auto c : kids[order[i]])
      if (!seen[c]) {
        seen[c] = true;
        order.push_back(c);
      }
  return order;
}

/// The bottleneck of a chain and how many links sit at it: what widest_chain improves.
struct chain_score {
  double bottleneck = inf;
  std::size_t at_bottleneck = 0;
  bool better_than(const chain_score& o) const {
    return bottleneck > o.bottleneck ||
           (bottleneck == o.bottleneck && at_bottleneck < o.at_bottleneck);
  }
};

chain_score score_of(const std::vector<proc_id>& order, const cost_matrix& bw) {
  chain_score s;
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    auto w = bw[order[i]][order[i + 1]];
    if (w < s.bottleneck) {
      s.bottleneck = w;
      s.at_bottleneck = 1;
    } else if (w == s.bottleneck) {
      ++s.at_bottleneck;
    }
  }
  return s;
}

/// Depth-first search for a path from `root` through every processor on links at
/// least `threshold` wide, visiting first the processor with the fewest onward links
/// (Warnsdorff's rule), then the wider link. Gives up after `budget` steps.
bool path_through_all(const cost_matrix& bw, proc_id root, double threshold,
                      std::size_t budget, std::vector<proc_id>& path) {
  const auto n = bw.size();
  std::vector<bool> used(n, false);
  path.assign(1, root);
  used[root] = true;
  auto onward = [&](proc_id q) {
    std::size_t k = 0;
    for (proc_id r = 0; r < n; ++r)
      if (!used[r] && r != q && bw[q][r] >= threshold)
        ++k;
    return k;
  };
  // Dead end: an unvisited processor that neither the tail nor another unvisited one
  // can reach.
  auto stranded = [&]() {
    auto tail = path.back();
    for (proc_id x = 0; x < n; ++x) {
      if (used[x])
        continue;
      bool reachable = bw[tail][x] >= threshold;
      for (proc_id y = 0; y < n && !reachable; ++y)
        reachable = !used[y] && y != x && bw[y][x] >= threshold;
      if (!reachable)
        return true;
    }
    return false;
  };
  std::function<bool()> extend = [&]() {
    if (path.size() == n)
      return true;
    if (budget == 0 || stranded())
      return false;
    --budget;
    auto tail = path.back();
    std::vector<std::pair<std::size_t, proc_id>> next;
    for (proc_id q = 0; q < n; ++q)
      if (!used[q] && bw[tail][q] >= threshold)
        next.emplace_back(onward(q), q);
    std::sort(next.begin(), next.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first)
        return a.first < b.first;
      if (bw[tail][a.second] != bw[tail][b.second])
        return bw[tail][a.second] > bw[tail][b.second];
      return a.second < b.second;
    });
    for (auto [k, q] : next) {
      used[q] = true;
      path.push_back(q);
      if (extend())
        return true;
      path.pop_back();
      used[q] = false;
    }
    return false;
  };
  return extend();
}

double max_arrival(const tree& t, const std::vector<double>& arrival) {
  double worst = 0;
  auto d = t.depths();
  for (std::size_t p = 0; p < arrival.size(); ++p)
    if (d[p] >= 0)
      worst = std::max(worst, arrival[p]);
  return worst;
}

} // namespace

// --- shapes that need no measurements ------------------------------------------------

tree binomial_tree(std::size_t n, proc_id root) {
  if (n == 0)
    return {};
  assert(root < n);
  std::vector<proc_id> members(n);
  for (proc_id p = 0; p < n; ++p)
    members[p] = p;
  std::vector<proc_id> parent(n, no_proc);
  binomial_over(members, root, parent);
  return tree::from_parents(root, std::move(parent));
}

tree flat_tree(std::size_t n, proc_id root) {
  if (n == 0)
    return {};
  assert(root < n);
  std::vector<proc_id> parent(n, root);
  parent[root] = no_proc;
  return tree::from_parents(root, std::move(parent));
}

tree chain_tree(const std::vector<proc_id>& order) {
  if (order.empty())
    return {};
  std::vector<proc_id> parent(order.size(), no_proc);
  for (std::size_t i = 1; i < order.size(); ++i) {
    assert(order[i] < order.size());
    parent[order[i]] = order[i - 1];
  }
  return tree::from_parents(order.front(), std::move(parent));
}

std::vector<proc_id> widest_chain(const cost_matrix& bandwidth, proc_id root) {
  const auto n = bandwidth.size();
  if (n == 0)
    return {};
  assert(root < n && square(bandwidth));
  // 1. Greedy: always extend the tail by its widest link to an unvisited processor.
  std::vector<proc_id> order{root};
  std::vector<bool> used(n, false);
  used[root] = true;
  while (order.size() < n) {
    auto tail = order.back();
    proc_id next = no_proc;
    for (proc_id q = 0; q < n; ++q)
      if (!used[q] && (next == no_proc || bandwidth[tail][q] > bandwidth[tail][next]))
        next = q;
    used[next] = true;
    order.push_back(next);
  }
  // 2. Binary search for the widest threshold whose links still hold a path through
  //    everyone (a bounded search, so a miss only costs width). Thresholds above what
  //    any processor can be entered by (or the root can leave by) are not tried.
  double cap = inf;
  for (proc_id x = 0; x < n; ++x) {
    double widest_in = 0, widest_out = 0;
    for (proc_id y = 0; y < n; ++y)
      if (y != x) {
        widest_in = std::max(widest_in, bandwidth[y][x]);
        widest_out = std::max(widest_out, bandwidth[x][y]);
      }
    if (x != root)
      cap = std::min(cap, widest_in);
    else if (n > 1)
      cap = std::min(cap, widest_out);
  }
  auto greedy_width = score_of(order, bandwidth).bottleneck;
  std::vector<double> levels;
  for (proc_id x = 0; x < n; ++x)
    for (proc_id y = 0; y < n; ++y)
      if (x != y && bandwidth[x][y] > greedy_width && bandwidth[x][y] <= cap)
        levels.push_back(bandwidth[x][y]);
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  const std::size_t budget = std::max<std::size_t>(1000, 20'000'000 / (n * n));
  std::size_t lo = 0, hi = levels.size(); // levels[lo, hi) not yet decided
  std::vector<proc_id> found;
  while (lo < hi) {
    auto mid = lo + (hi - lo) / 2;
    if (path_through_all(bandwidth, root, levels[mid], budget, found)) {
      order = found;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  // 3. Local search: move one processor (never the root) to another place while that
  //    improves (bottleneck, links at it). Each move strictly improves, so this ends.
  auto best = score_of(order, bandwidth);
  bool improved = true;
  std::vector<proc_id> cand;
  while (improved) {
    improved = false;
    for (std::size_t i = 1; i < n && !improved; ++i) {
      for (std::size_t j = 1; j < n && !improved; ++j) {
        if (j == i)
          continue;
        cand = order;
        auto x = cand[i];
        cand.erase(cand.begin() + static_cast<std::ptrdiff_t>(i));
        cand.insert(cand.begin() + static_cast<std::ptrdiff_t>(j), x);
        auto sc = score_of(cand, bandwidth);
        if (sc.better_than(best)) {
          best = sc;
          order.swap(cand);
          improved = true;
        }
      }
    }
  }
  return order;
}

double chain_bottleneck(const std::vector<proc_id>& order, const cost_matrix& bandwidth) {
  return score_of(order, bandwidth).bottleneck;
}

// --- latency-driven shapes -----------------------------------------------------------

tree mst_tree(const cost_matrix& latency, proc_id root) {
  const auto n = latency.size();
  if (n == 0)
    return {};
  assert(root < n && square(latency));
  std::vector<proc_id> parent(n, no_proc);
  std::vector<double> link(n, inf);
  std::vector<bool> in(n, false);
  in[root] = true;
  for (proc_id x = 0; x < n; ++x)
    if (x != root) {
      link[x] = latency[root][x];
      parent[x] = root;
    }
  for (std::size_t added = 1; added < n; ++added) {
    proc_id x = no_proc;
    for (proc_id q = 0; q < n; ++q)
      if (!in[q] && (x == no_proc || link[q] < link[x]))
        x = q;
    in[x] = true;
    for (proc_id y = 0; y < n; ++y)
      if (!in[y] && latency[x][y] < link[y]) {
        link[y] = latency[x][y];
        parent[y] = x;
      }
  }
  return tree::from_parents(root, std::move(parent));
}

tree hlot_tree(const cost_matrix& latency, proc_id root) {
  const auto n = latency.size();
  if (n == 0)
    return {};
  assert(root < n && square(latency));
  // link[x]: the cheapest admissible link into x from the tree so far, from parent[x].
  std::vector<proc_id> parent(n, no_proc);
  std::vector<double> link(n, inf), dist(n, 0);
  std::vector<bool> in(n, false);
  in[root] = true;
  for (proc_id x = 0; x < n; ++x)
    if (x != root) {
      link[x] = latency[root][x];
      parent[x] = root;
    }
  for (std::size_t added = 1; added < n; ++added) {
    proc_id x = no_proc;
    for (proc_id q = 0; q < n; ++q)
      if (!in[q] && (x == no_proc || link[q] < link[x]))
        x = q;
    in[x] = true;
    dist[x] = dist[parent[x]] + link[x];
    for (proc_id y = 0; y < n; ++y) {
      if (in[y])
        continue;
      // Relaying through x must beat the root's direct link to be considered at all.
      bool admissible = dist[x] + latency[x][y] < latency[root][y];
      if (admissible && latency[x][y] < link[y]) {
        link[y] = latency[x][y];
        parent[y] = x;
      }
    }
  }
  return tree::from_parents(root, std::move(parent));
}

// --- cluster-aware shapes ------------------------------------------------------------

tree magpie_tree(std::size_t n, proc_id root, const std::vector<int>& cluster_of,
                 const std::vector<proc_id>& coordinators) {
  if (n == 0)
    return {};
  assert(root < n && cluster_of.size() == n);
  std::map<int, std::vector<proc_id>> members; // ids ascending within each cluster
  for (proc_id p = 0; p < n; ++p)
    members[cluster_of[p]].push_back(p);
  std::vector<proc_id> parent(n, no_proc);
  for (const auto& [c, procs] : members) {
    proc_id coord = procs.front();
    if (cluster_of[root] == c) {
      coord = root;
    } else {
      for (auto q : coordinators)
        if (q < n && cluster_of[q] == c) {
          coord = q;
          break;
        }
      parent[coord] = root; // the wide-area hop
    }
    auto at = std::find(procs.begin(), procs.end(), coord) - procs.begin();
    binomial_over(procs, static_cast<std::size_t>(at), parent);
  }
  return tree::from_parents(root, std::move(parent));
}

namespace {

/// Links `group` (ids ascending), whose master is `master`, below `master` from level
/// `level` down; see multilevel_tree.
void multilevel_group(const std::vector<std::vector<int>>& levels,
                      const std::vector<proc_id>& group, proc_id master, std::size_t level,
                      std::vector<proc_id>& parent) {
  const auto depth = levels[master].size();
  if (level == depth) {
    auto at = std::find(group.begin(), group.end(), master) - group.begin();
    binomial_over(group, static_cast<std::size_t>(at), parent);
    return;
  }
  std::map<int, std::vector<proc_id>> sub;
  for (auto p : group)
    sub[levels[p][level]].push_back(p);
  for (const auto& [g, procs] : sub) {
    bool holds_master = std::find(procs.begin(), procs.end(), master) != procs.end();
    auto sub_master = holds_master ? master : procs.front();
    if (!holds_master)
      parent[sub_master] = master; // flat among the masters of this level
    multilevel_group(levels, procs, sub_master, level + 1, parent);
  }
}

} // namespace

tree multilevel_tree(proc_id root, const std::vector<std::vector<int>>& levels) {
  const auto n = levels.size();
  if (n == 0)
    return {};
  assert(root < n);
#ifndef NDEBUG
  for (const auto& row : levels)
    assert(row.size() == levels.front().size());
#endif
  std::vector<proc_id> all(n);
  for (proc_id p = 0; p < n; ++p)
    all[p] = p;
  std::vector<proc_id> parent(n, no_proc);
  multilevel_group(levels, all, root, 0, parent);
  return tree::from_parents(root, std::move(parent));
}

// --- the postal model ----------------------------------------------------------------

std::vector<double> arrival_times(const tree& t, const cost_matrix& latency) {
  std::vector<double> arrival(t.size(), inf);
  if (t.root() >= t.size())
    return arrival;
  assert(latency.size() >= t.size());
  auto kids = t.children();
  auto order = bfs_order(t, kids);
  arrival[t.root()] = 0;
  for (auto p : order)
    for (auto c : kids[p])
      arrival[c] = arrival[p] + latency[p][c];
  return arrival;
}

std::vector<double> shortest_path_latencies(const cost_matrix& latency, proc_id root) {
  auto n = latency.size();
  std::vector<double> dist(n, std::numeric_limits<double>::infinity());
  std::vector<bool> done(n, false);
  dist[root] = 0;
  for (std::size_t step = 0; step < n; ++step) {
    std::size_t u = n;
    for (std::size_t i = 0; i < n; ++i)
      if (!done[i] && (u == n || dist[i] < dist[u]))
        u = i;
    done[u] = true;
    for (std::size_t v = 0; v < n; ++v)
      dist[v] = std::min(dist[v], dist[u] + latency[u][v]);
  }
  return dist;
}

double farthest_shortest_path(const cost_matrix& latency, proc_id root) {
  auto dist = shortest_path_latencies(latency, root);
  return *std::max_element(dist.begin(), dist.end());
}

double completion_time(const tree& t, const cost_matrix& latency) {
  return max_arrival(t, arrival_times(t, latency));
}

std::vector<std::vector<proc_id>> send_order(const tree& t) {
  auto kids = t.children();
  // Subtree sizes bottom-up over the breadth-first order.
  auto order = bfs_order(t, kids);
  std::vector<std::size_t> below(t.size(), 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (auto c : kids[*it])
      below[*it] += below[c] + 1;
  for (auto& list : kids)
    std::stable_sort(list.begin(), list.end(),
                     [&](proc_id a, proc_id b) { return below[a] > below[b]; });
  return kids;
}

std::vector<double> arrival_times_with_overhead(const tree& t, const cost_matrix& latency,
                                                double overhead) {
  std::vector<double> arrival(t.size(), inf);
  if (t.root() >= t.size())
    return arrival;
  assert(latency.size() >= t.size());
  auto kids = send_order(t);
  auto order = bfs_order(t, kids);
  arrival[t.root()] = 0;
  for (auto p : order)
    for (std::size_t i = 0; i < kids[p].size(); ++i) {
      auto c = kids[p][i];
      arrival[c] = arrival[p] + static_cast<double>(i + 1) * overhead + latency[p][c];
    }
  return arrival;
}

double completion_time_with_overhead(const tree& t, const cost_matrix& latency,
                                     double overhead) {
  return max_arrival(t, arrival_times_with_overhead(t, latency, overhead));
}

} // namespace banyan

#include "banyan/core/stream_ceiling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

namespace banyan {

namespace {

/// Dinic's maximum flow over double capacities.
class flow_network {
public:
  explicit flow_network(std::size_t nodes) : adj_(nodes) {}

  void add(std::size_t from, std::size_t to, double cap) {
    adj_[from].push_back(edges_.size());
    edges_.push_back({to, cap, cap});
    adj_[to].push_back(edges_.size());
    edges_.push_back({from, 0, 0});
  }

  /// Maximum flow from `s` to `t` (the capacities are restored first).
  double max_flow(std::size_t s, std::size_t t) {
    for (auto& e : edges_)
      e.residual = e.cap;
    double total = 0;
    while (levels(s, t)) {
      next_.assign(adj_.size(), 0);
      while (double f = push(s, t, std::numeric_limits<double>::infinity()))
        total += f;
    }
    return total;
  }

  /// The widest path from `s` to every node: the largest bottleneck (smallest capacity
  /// on the path) over all paths, 0 for nodes `s` cannot reach (Dijkstra on max-min).
  std::vector<double> widest_from(std::size_t s) const {
    std::vector<double> best(adj_.size(), 0);
    best[s] = std::numeric_limits<double>::infinity();
    std::priority_queue<std::pair<double, std::size_t>> q;
    q.push({best[s], s});
    while (!q.empty()) {
      auto [w, u] = q.top();
      q.pop();
      if (w < best[u])
        continue;
      for (auto i : adj_[u]) {
        const auto& e = edges_[i];
        if (e.cap <= eps)
          continue; // the reverse half of an edge
        if (double v = std::min(w, e.cap); v > best[e.to]) {
          best[e.to] = v;
          q.push({v, e.to});
        }
      }
    }
    return best;
  }

private:
  struct edge {
    std::size_t to;
    double cap;
    double residual;
  };
  static constexpr double eps = 1e-6; // bytes per second: far below any capacity

  bool levels(std::size_t s, std::size_t t) {
    level_.assign(adj_.size(), -1);
    std::queue<std::size_t> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      auto u = q.front();
      q.pop();
      for (auto i : adj_[u]) {
        auto& e = edges_[i];
        if (e.residual > eps && level_[e.to] < 0) {
          level_[e.to] = level_[u] + 1;
          q.push(e.to);
        }
      }
    }
    return level_[t] >= 0;
  }

  double push(std::size_t u, std::size_t t, double limit) {
    if (u == t)
      return limit;
    for (auto& k = next_[u]; k < adj_[u].size(); ++k) {
      auto i = adj_[u][k];
      auto& e = edges_[i];
      if (e.residual <= eps || level_[e.to] != level_[u] + 1)
        continue;
      if (double f = push(e.to, t, std::min(limit, e.residual)); f > eps) {
        e.residual -= f;
        edges_[i ^ 1].residual += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<std::vector<std::size_t>> adj_;
  std::vector<edge> edges_;
  std::vector<int> level_;
  std::vector<std::size_t> next_;
};

/// The network of the header's drawing; processors are nodes 0..n-1.
struct resource_graph {
  flow_network net;
  double finite_total = 0; ///< sum of the finite capacities
};

resource_graph build(const topology& topo) {
  const auto n = topo.proc_count();
  const auto g = topo.groups.size();
  // Per group: S_out/O (exit hub), S_in/I (entry hub), X (left it), E (about to enter it).
  auto hub_out = [&](std::size_t i) { return n + 4 * i; };
  auto hub_in = [&](std::size_t i) { return n + 4 * i + 1; };
  auto exit_of = [&](std::size_t i) { return n + 4 * i + 2; };
  auto entry_of = [&](std::size_t i) { return n + 4 * i + 3; };
  double finite = 0;
  for (const auto& gr : topo.groups) {
    if (!std::isinf(gr.uplink))
      finite += 2 * gr.uplink;
    if (gr.is_leaf() && !std::isinf(gr.nic))
      finite += 2 * gr.nic * gr.procs;
    if (!gr.is_leaf() && !std::isinf(gr.link_bw))
      finite += gr.link_bw * static_cast<double>(gr.children.size() * gr.children.size());
  }
  for (const auto& l : topo.links)
    for (auto b : {l.bw_ab, l.bw_ba})
      if (!std::isinf(b))
        finite += b;
  if (!std::isinf(topo.root_link_bw))
    finite += topo.root_link_bw * static_cast<double>(g * g);
  // Infinite capacities become one larger than every finite cut.
  const double big = 4 * finite + 1;
  auto cap = [&](rate r) { return std::isinf(r) ? big : r; };

  resource_graph r{flow_network(n + 4 * g), finite};
  auto& net = r.net;
  for (proc_id p = 0; p < n; ++p) {
    auto leaf = static_cast<std::size_t>(topo.leaf_of(p));
    net.add(p, hub_out(leaf), cap(topo.groups[leaf].nic));
    net.add(hub_in(leaf), p, cap(topo.groups[leaf].nic));
  }
  std::vector<int> top;
  for (std::size_t i = 0; i < g; ++i) {
    const auto& gr = topo.groups[i];
    net.add(hub_out(i), exit_of(i), cap(gr.uplink));
    net.add(entry_of(i), hub_in(i), cap(gr.uplink));
    if (gr.is_leaf())
      net.add(hub_out(i), hub_in(i), big);
    for (auto c : gr.children) {
      net.add(exit_of(static_cast<std::size_t>(c)), hub_out(i), big);
      net.add(hub_in(i), entry_of(static_cast<std::size_t>(c)), big);
    }
    if (gr.parent < 0)
      top.push_back(static_cast<int>(i));
  }
  // Links between siblings, one capacity per direction.
  auto siblings = [&](const std::vector<int>& kids, rate default_bw) {
    for (auto a : kids)
      for (auto b : kids) {
        if (a == b)
          continue;
        rate bw = default_bw;
        if (int l = topo.find_link(a, b); l >= 0)
          bw = topo.links[static_cast<std::size_t>(l)].a == a
                 ? topo.links[static_cast<std::size_t>(l)].bw_ab
                 : topo.links[static_cast<std::size_t>(l)].bw_ba;
        net.add(exit_of(static_cast<std::size_t>(a)), entry_of(static_cast<std::size_t>(b)), cap(bw));
      }
  };
  siblings(top, topo.root_link_bw);
  for (const auto& gr : topo.groups)
    if (!gr.is_leaf())
      siblings(gr.children, gr.link_bw);
  return r;
}

/// The smallest of `rate_to(g, p)` over processors p other than the root (bytes per
/// second through the network `g`; above every finite capacity: unlimited).
template <class RateTo>
stream_ceiling smallest_over_procs(const topology& topo, proc_id root, RateTo rate_to) {
  stream_ceiling out;
  const auto n = topo.proc_count();
  out.per_proc.assign(n, infinite_rate);
  if (root >= n)
    return out;
  auto g = build(topo);
  for (proc_id p = 0; p < n; ++p) {
    if (p == root)
      continue;
    const double f = rate_to(g, p);
    out.per_proc[p] = f > g.finite_total ? infinite_rate : f;
    if (out.bottleneck == no_proc || out.per_proc[p] < out.ceiling) {
      out.ceiling = out.per_proc[p];
      out.bottleneck = p;
    }
  }
  return out;
}

stream_ceiling ceiling_of(const topology& topo, proc_id root, bool inbound) {
  return smallest_over_procs(topo, root, [&](resource_graph& g, proc_id p) {
    return inbound ? g.net.max_flow(p, root) : g.net.max_flow(root, p);
  });
}

stream_ceiling tree_ceiling_of(const topology& topo, proc_id root, bool inbound) {
  std::vector<double> from_root; // one widest-path search serves every p
  return smallest_over_procs(topo, root, [&](resource_graph& g, proc_id p) {
    if (inbound)
      return g.net.widest_from(p)[root];
    if (from_root.empty())
      from_root = g.net.widest_from(root);
    return from_root[p];
  });
}

} // namespace

stream_ceiling broadcast_tree_ceiling(const topology& topo, proc_id root) {
  return tree_ceiling_of(topo, root, false);
}

stream_ceiling reduce_tree_ceiling(const topology& topo, proc_id root) {
  return tree_ceiling_of(topo, root, true);
}

stream_ceiling broadcast_ceiling(const topology& topo, proc_id root) {
  return ceiling_of(topo, root, false);
}

stream_ceiling reduce_ceiling(const topology& topo, proc_id root) {
  return ceiling_of(topo, root, true);
}

rate tree_stream_rate(const topology& topo, const tree& t) {
  // Resources by (kind, a, b): 0 NIC out of proc a, 1 NIC in of proc a, 2 uplink out of
  // group a, 3 uplink in of group a, 4 the link from sibling a to sibling b.
  std::map<std::tuple<int, long, long>, std::pair<rate, int>> used;
  auto use = [&](int kind, long a, long b, rate cap) {
    if (std::isinf(cap))
      return;
    auto& u = used[{kind, a, b}];
    u.first = cap;
    ++u.second;
  };
  const auto n = std::min<std::size_t>(t.size(), topo.proc_count());
  for (proc_id c = 0; c < n; ++c) {
    const auto p = t.parent(c);
    if (p == no_proc || p >= n)
      continue;
    const int lp = topo.leaf_of(p), lc = topo.leaf_of(c);
    use(0, p, 0, topo.groups[static_cast<std::size_t>(lp)].nic);
    use(1, c, 0, topo.groups[static_cast<std::size_t>(lc)].nic);
    if (lp == lc)
      continue;
    const auto s = topo.split_of(p, c);
    for (int g = lp; g != s.common; g = topo.groups[static_cast<std::size_t>(g)].parent)
      use(2, g, 0, topo.groups[static_cast<std::size_t>(g)].uplink);
    for (int g = lc; g != s.common; g = topo.groups[static_cast<std::size_t>(g)].parent)
      use(3, g, 0, topo.groups[static_cast<std::size_t>(g)].uplink);
    rate bw = s.common < 0 ? topo.root_link_bw : topo.groups[static_cast<std::size_t>(s.common)].link_bw;
    if (int l = topo.find_link(s.side_a, s.side_b); l >= 0) {
      const auto& lk = topo.links[static_cast<std::size_t>(l)];
      bw = lk.a == s.side_a ? lk.bw_ab : lk.bw_ba;
    }
    use(4, s.side_a, s.side_b, bw);
  }
  rate r = infinite_rate;
  for (const auto& [key, u] : used)
    r = std::min(r, u.first / u.second);
  return r;
}

} // namespace banyan

// Simulated annealing over broadcast trees (paper 002) and the bandwidth-aware postal
// model it minimizes. See sa_tree in tree_builders.hpp for what follows the paper and
// what is simplified.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "banyan/core/tree_builders.hpp"

namespace banyan {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Evaluates trees given as parent vectors under the model of
/// `arrival_times_with_bandwidth`, reusing its buffers: simulated annealing evaluates
/// ~10^5 trees per run.
class evaluator {
public:
  evaluator(const cost_matrix& latency, const cost_matrix& bandwidth, double message_bytes)
    : lat_(latency), bw_(bandwidth), bytes_(message_bytes) {}

  /// Fills arrival(), latest() and returns the completion time.
  double operator()(const std::vector<proc_id>& parent, proc_id root) {
    const auto n = parent.size();
    arrival_.assign(n, inf);
    latest_ = root;
    if (root >= n)
      return 0;
    // Children as one array sliced per parent (ids ascending within each slice).
    first_.assign(n + 1, 0);
    for (proc_id c = 0; c < n; ++c)
      if (parent[c] < n && c != root)
        ++first_[parent[c] + 1];
    for (std::size_t p = 0; p < n; ++p)
      first_[p + 1] += first_[p];
    kids_.resize(first_[n]);
    fill_ = first_;
    for (proc_id c = 0; c < n; ++c)
      if (parent[c] < n && c != root)
        kids_[fill_[parent[c]]++] = c;
    // Breadth-first order from the root; detached cycles are never reached.
    order_.clear();
    seen_.assign(n, 0);
    order_.push_back(root);
    seen_[root] = 1;
    for (std::size_t i = 0; i < order_.size(); ++i) {
      auto p = order_[i];
      for (auto k = first_[p]; k < first_[p + 1]; ++k)
        if (!seen_[kids_[k]]) {
          seen_[kids_[k]] = 1;
          order_.push_back(kids_[k]);
        }
    }
    // Bottom-up: sort each parent's children by longest remaining time first; tail[p]
    // is how long p's subtree takes after p has the message.
    tail_.assign(n, 0);
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      auto p = *it;
      auto b = kids_.begin() + static_cast<std::ptrdiff_t>(first_[p]);
      auto e = kids_.begin() + static_cast<std::ptrdiff_t>(first_[p + 1]);
      auto key = [&](proc_id c) { return lat_[p][c] + tail_[c]; };
      std::sort(b, e, [&](proc_id x, proc_id y) {
        auto kx = key(x), ky = key(y);
        return kx != ky ? kx > ky : x < y;
      });
      double sent = 0, t = 0;
      for (auto k = b; k != e; ++k) {
        sent += transfer(p, *k);
        t = std::max(t, sent + key(*k));
      }
      tail_[p] = t;
    }
    // Top-down arrival times.
    arrival_[root] = 0;
    for (auto p : order_) {
      double sent = 0;
      for (auto k = first_[p]; k < first_[p + 1]; ++k) {
        auto c = kids_[k];
        sent += transfer(p, c);
        arrival_[c] = arrival_[p] + sent + lat_[p][c];
      }
    }
    double worst = 0;
    for (proc_id p = 0; p < n; ++p)
      if (seen_[p] && arrival_[p] > worst) {
        worst = arrival_[p];
        latest_ = p;
      }
    return worst;
  }

  const std::vector<double>& arrival() const { return arrival_; }
  /// The processor that got the message last (lowest id among ties; the root if none).
  proc_id latest() const { return latest_; }

private:
  /// Milliseconds p's link is busy pushing the message to c.
  double transfer(proc_id p, proc_id c) const {
    if (bw_.empty() || bytes_ <= 0)
      return 0;
    auto b = bw_[p][c];
    return b > 0 ? bytes_ / b * 1000.0 : inf;
  }

  const cost_matrix& lat_;
  const cost_matrix& bw_;
  double bytes_;
  std::vector<double> arrival_, tail_;
  std::vector<std::size_t> first_, fill_;
  std::vector<proc_id> kids_, order_;
  std::vector<char> seen_;
  proc_id latest_ = no_proc;
};

struct scored {
  double cost = inf;
  std::vector<proc_id> parent;
};

/// Trees within 10% of the best seen, best first, at most `cap` of them (paper 002's
/// good_list, which seeds the refinement phase).
class good_list {
public:
  void offer(double cost, const std::vector<proc_id>& parent) {
    if (!std::isfinite(cost))
      return;
    if (!list_.empty() && cost > 1.1 * list_.front().cost)
      return;
    for (const auto& s : list_)
      if (s.cost == cost && s.parent == parent)
        return;
    auto at = std::find_if(list_.begin(), list_.end(),
                           [&](const scored& s) { return s.cost > cost; });
    list_.insert(at, scored{cost, parent});
    auto limit = 1.1 * list_.front().cost;
    while (list_.size() > cap || list_.back().cost > limit)
      list_.pop_back();
  }
  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  const scored& operator[](std::size_t i) const { return list_[i]; }

private:
  static constexpr std::size_t cap = 16;
  std::vector<scored> list_;
};

/// One annealing problem: matrices over processors 0..n-1 and a root.
class annealer {
public:
  annealer(const cost_matrix& latency, const cost_matrix& bandwidth, double message_bytes,
           proc_id root, std::mt19937_64& rng)
    : lat_(latency), bw_(bandwidth), bytes_(message_bytes), root_(root), rng_(rng),
      eval_(latency, bandwidth, message_bytes) {}

  double cost(const std::vector<proc_id>& parent) { return eval_(parent, root_); }

  /// The paper's Fig. 1.
  scored basic_sa(const std::vector<proc_id>& initial, good_list& good) {
    constexpr double initial_temp = 100, min_temp = 1, temp_factor = 0.8;
    constexpr int iterations = 80, enough_accepted = 20;
    scored cur{cost(initial), initial};
    auto cur_latest = eval_.latest();
    scored best = cur;
    good.offer(cur.cost, cur.parent);
    // Costs compared in percent of where this run started.
    double scale = std::isfinite(cur.cost) && cur.cost > 0 ? 100.0 / cur.cost : 1.0;
    std::vector<proc_id> next;
    for (double temp = initial_temp; temp > min_temp; temp *= temp_factor) {
      int accepted = 0;
      bool best_found = false;
      for (int i = 0; i < iterations; ++i) {
        next = cur.parent;
        if (!transform(next, cur_latest))
          return best; // no move exists (two processors or fewer)
        auto c = cost(next);
        good.offer(c, next);
        bool take = false;
        if (c < best.cost) {
          best = scored{c, next};
          best_found = true;
          take = true;
        } else {
          auto diff = (c - cur.cost) * scale;
          take = unit() < std::exp(-diff / temp);
        }
        if (take) {
          cur.parent.swap(next);
          cur.cost = c;
          cur_latest = eval_.latest();
          if (++accepted == enough_accepted)
            break;
        }
      }
      if (accepted < 0.03 * iterations && !best_found)
        break;
    }
    return best;
  }

  /// The paper's Fig. 2 without a time budget: 50 starts, 25 refinements.
  scored driver_sa() {
    const auto n = lat_.size();
    std::vector<std::vector<proc_id>> starts;
    for (const auto& t : {flat_tree(n, root_), binomial_tree(n, root_), mst_tree(lat_, root_),
                          hlot_tree(lat_, root_)})
      starts.push_back(t.parents());
    good_list good;
    scored best;
    for (int i = 0; i < 50; ++i) {
      auto start = i < static_cast<int>(starts.size()) ? starts[static_cast<std::size_t>(i)]
                                                       : random_tree();
      keep_better(best, basic_sa(start, good));
      if (n <= 2)
        return best; // only one tree exists
    }
    for (std::size_t i = 0; i < 25 && !good.empty(); ++i)
      keep_better(best, basic_sa(good[i % good.size()].parent, good));
    return best;
  }

  static void keep_better(scored& best, scored candidate) {
    if (best.parent.empty() || candidate.cost < best.cost)
      best = std::move(candidate);
  }

private:
  std::size_t below(std::size_t k) { return static_cast<std::size_t>(rng_() % k); }
  /// Uniform in (0, 1], from 53 random bits, the same on every platform.
  double unit() { return static_cast<double>((rng_() >> 11) + 1) * 0x1.0p-53; }

  /// The root, then the others in random order, each under a random earlier one.
  std::vector<proc_id> random_tree() {
    const auto n = lat_.size();
    std::vector<proc_id> order;
    for (proc_id p = 0; p < n; ++p)
      if (p != root_)
        order.push_back(p);
    for (std::size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[below(i)]);
    std::vector<proc_id> parent(n, no_proc);
    std::vector<proc_id> placed{root_};
    for (auto p : order) {
      parent[p] = placed[below(placed.size())];
      placed.push_back(p);
    }
    return parent;
  }

  /// Moves a random processor on the path to the latest one under another random
  /// processor outside its subtree (not its current parent). False when none can move.
  bool transform(std::vector<proc_id>& parent, proc_id latest) {
    const auto n = parent.size();
    path_.clear();
    for (auto x = latest; x != root_ && x < n; x = parent[x])
      path_.push_back(x);
    if (path_.empty()) // everyone arrives at once: any processor will do
      for (proc_id p = 0; p < n; ++p)
        if (p != root_)
          path_.push_back(p);
    if (path_.empty())
      return false;
    auto v = path_[below(path_.size())];
    // Which processors lie below v: walk up from each, memoizing.
    enum : char { unknown, inside, outside };
    status_.assign(n, unknown);
    status_[v] = inside;
    status_[root_] = outside;
    valid_.clear();
    for (proc_id q = 0; q < n; ++q) {
      walk_.clear();
      auto x = q;
      while (x < n && status_[x] == unknown) {
        walk_.push_back(x);
        x = parent[x];
      }
      char s = x < n ? status_[x] : static_cast<char>(outside);
      for (auto y : walk_)
        status_[y] = s;
      if (status_[q] == outside && q != parent[v])
        valid_.push_back(q);
    }
    if (valid_.empty())
      return false;
    parent[v] = valid_[below(valid_.size())];
    return true;
  }

  const cost_matrix& lat_;
  const cost_matrix& bw_;
  double bytes_;
  proc_id root_;
  std::mt19937_64& rng_;
  evaluator eval_;
  std::vector<proc_id> path_, walk_, valid_;
  std::vector<char> status_;
};

/// Rows and columns `ids` of `m` (an empty matrix stays empty).
cost_matrix sub_matrix(const cost_matrix& m, const std::vector<proc_id>& ids) {
  if (m.empty())
    return {};
  cost_matrix out(ids.size(), std::vector<double>(ids.size(), 0));
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = 0; j < ids.size(); ++j)
      out[i][j] = m[ids[i]][ids[j]];
  return out;
}

/// Pool sets for clusteredSA: processors joined by links (the slower direction) no
/// slower than 10, 25, 50 and 75% of the slowest link; distinct sets only, without
/// the all-singletons one (it would not shrink the problem).
std::vector<std::vector<std::vector<proc_id>>> pool_sets(const cost_matrix& lat) {
  const auto n = lat.size();
  double slowest = 0;
  for (proc_id i = 0; i < n; ++i)
    for (proc_id j = 0; j < n; ++j)
      if (i != j)
        slowest = std::max(slowest, lat[i][j]);
  std::vector<std::vector<std::vector<proc_id>>> sets;
  for (double per : {0.10, 0.25, 0.50, 0.75}) {
    std::vector<proc_id> up(n);
    for (proc_id p = 0; p < n; ++p)
      up[p] = p;
    auto find = [&](proc_id p) {
      while (up[p] != p)
        p = up[p] = up[up[p]];
      return p;
    };
    for (proc_id i = 0; i < n; ++i)
      for (proc_id j = i + 1; j < n; ++j)
        if (std::max(lat[i][j], lat[j][i]) <= per * slowest)
          up[find(j)] = find(i);
    std::map<proc_id, std::vector<proc_id>> pools; // keyed by representative
    for (proc_id p = 0; p < n; ++p)
      pools[find(p)].push_back(p);
    if (pools.size() == n)
      continue;
    std::vector<std::vector<proc_id>> set;
    for (auto& [r, members] : pools)
      set.push_back(std::move(members));
    std::sort(set.begin(), set.end());
    if (std::find(sets.begin(), sets.end(), set) == sets.end())
      sets.push_back(std::move(set));
  }
  auto too_big = [](const std::vector<std::vector<proc_id>>& set) {
    for (const auto& pool : set)
      if (pool.size() > 16)
        return true;
    return false;
  };
  bool all_too_big = std::all_of(sets.begin(), sets.end(), too_big);
  if (!all_too_big)
    sets.erase(std::remove_if(sets.begin(), sets.end(), too_big), sets.end());
  return sets;
}

/// driverSA on small problems, the pooled approximation of clusteredSA on large ones.
std::vector<proc_id> solve(const cost_matrix& lat, const cost_matrix& bw, double bytes,
                           proc_id root, std::mt19937_64& rng) {
  const auto n = lat.size();
  annealer whole(lat, bw, bytes, root, rng);
  if (n <= 16)
    return whole.driver_sa().parent;
  auto sets = pool_sets(lat);
  if (sets.empty())
    return whole.driver_sa().parent;
  scored best;
  for (const auto& set : sets) {
    std::vector<proc_id> parent(n, no_proc), reps;
    for (const auto& pool : set) {
      // The pool's root: the broadcast root if it is here, else the member nearest it.
      auto rep = pool.front();
      for (auto p : pool)
        if (p == root || (rep != root && lat[root][p] < lat[root][rep]))
          rep = p;
      reps.push_back(rep);
      if (pool.size() < 2)
        continue;
      auto local_root = static_cast<proc_id>(std::find(pool.begin(), pool.end(), rep) -
                                             pool.begin());
      auto sub_lat = sub_matrix(lat, pool), sub_bw = sub_matrix(bw, pool);
      annealer part(sub_lat, sub_bw, bytes, local_root, rng);
      auto sub = part.driver_sa().parent;
      for (std::size_t i = 0; i < pool.size(); ++i)
        if (sub[i] != no_proc)
          parent[pool[i]] = pool[sub[i]];
    }
    auto rep_root =
      static_cast<proc_id>(std::find(reps.begin(), reps.end(), root) - reps.begin());
    auto rep_lat = sub_matrix(lat, reps), rep_bw = sub_matrix(bw, reps);
    auto top = solve(rep_lat, rep_bw, bytes, rep_root, rng);
    for (std::size_t i = 0; i < reps.size(); ++i)
      if (top[i] != no_proc)
        parent[reps[i]] = reps[top[i]];
    annealer::keep_better(best, scored{whole.cost(parent), parent});
  }
  good_list unused;
  return whole.basic_sa(best.parent, unused).parent;
}

} // namespace

tree sa_tree(const cost_matrix& latency, const cost_matrix& bandwidth, proc_id root,
             double message_bytes, std::uint64_t seed) {
  const auto n = latency.size();
  if (n == 0)
    return {};
  assert(root < n && (bandwidth.empty() || bandwidth.size() == n));
  std::mt19937_64 rng(seed);
  auto parent = solve(latency, bandwidth, message_bytes, root, rng);
  // The pooled search can miss what a fixed shape gets; never return worse than them.
  evaluator eval(latency, bandwidth, message_bytes);
  auto best_cost = eval(parent, root);
  for (const auto& t : {flat_tree(n, root), binomial_tree(n, root), mst_tree(latency, root),
                        hlot_tree(latency, root)}) {
    auto c = eval(t.parents(), root);
    if (c < best_cost) {
      best_cost = c;
      parent = t.parents();
    }
  }
  return tree::from_parents(root, std::move(parent));
}

std::vector<double> arrival_times_with_bandwidth(const tree& t, const cost_matrix& latency,
                                                 const cost_matrix& bandwidth,
                                                 double message_bytes) {
  evaluator eval(latency, bandwidth, message_bytes);
  eval(t.parents(), t.root());
  return eval.arrival();
}

double completion_time_with_bandwidth(const tree& t, const cost_matrix& latency,
                                      const cost_matrix& bandwidth, double message_bytes) {
  evaluator eval(latency, bandwidth, message_bytes);
  return eval(t.parents(), t.root());
}

} // namespace banyan

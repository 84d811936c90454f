#include "banyan/core/tree.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace banyan {

namespace {

std::string proc_str(proc_id p) {
  return p == no_proc ? std::string("no_proc") : std::to_string(p);
}

// Quotes a string for DOT: only `"` and `\` need escaping inside a quoted ID.
std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// Light fills that keep black labels readable; clusters beyond the palette reuse it.
constexpr const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3",
                                   "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd"};
constexpr std::size_t palette_size = sizeof(palette) / sizeof(palette[0]);

} // namespace

tree::tree(proc_id root, std::vector<proc_id> parent)
  : root_(root), parent_(std::move(parent)) {
}

tree tree::from_parents(proc_id root, std::vector<proc_id> parent) {
  return tree(root, std::move(parent));
}

proc_id tree::parent(proc_id p) const noexcept {
  return p < parent_.size() ? parent_[p] : no_proc;
}

std::vector<std::vector<proc_id>> tree::children() const {
  std::vector<std::vector<proc_id>> out(parent_.size());
  // Visiting children in increasing id order keeps every list sorted.
  for (proc_id p = 0; p < parent_.size(); ++p) {
    auto q = parent_[p];
    if (q < parent_.size())
      out[q].push_back(p);
  }
  return out;
}

std::optional<std::string> tree::validate(const std::vector<bool>& members) const {
  const auto n = parent_.size();
  if (members.size() != n)
    return "member flags cover " + std::to_string(members.size()) +
           " processors but the tree has " + std::to_string(n);
  if (root_ == no_proc) {
    for (proc_id p = 0; p < n; ++p)
      if (members[p])
        return "the tree has no root but proc " + std::to_string(p) + " is a member";
  } else {
    auto r = std::to_string(root_);
    if (root_ >= n)
      return "root " + r + " is out of range (" + std::to_string(n) + " processors)";
    if (!members[root_])
      return "root " + r + " is not a member";
    if (parent_[root_] != no_proc)
      return "root " + r + " has parent " + proc_str(parent_[root_]);
  }
  for (proc_id p = 0; p < n; ++p) {
    auto q = parent_[p];
    auto ps = "proc " + std::to_string(p);
    if (!members[p]) {
      if (q != no_proc)
        return ps + " is not a member but has parent " + proc_str(q);
      continue;
    }
    if (p == root_)
      continue;
    if (q == no_proc)
      return ps + " is a member but has no parent (orphan)";
    if (q >= n)
      return ps + ": parent " + std::to_string(q) + " is out of range";
    if (q == p)
      return ps + " is its own parent";
    if (!members[q])
      return ps + ": parent " + std::to_string(q) + " is not a member";
  }
  // Every member now has a member parent; what is left is a cycle that misses the root.
  enum : char { unknown, on_path, reaches_root };
  std::vector<char> state(n, unknown);
  if (root_ != no_proc)
    state[root_] = reaches_root;
  std::vector<proc_id> path;
  for (proc_id p = 0; p < n; ++p) {
    if (!members[p] || state[p] != unknown)
      continue;
    path.clear();
    auto x = p;
    while (state[x] == unknown) {
      state[x] = on_path;
      path.push_back(x);
      x = parent_[x];
    }
    if (state[x] == on_path) {
      auto it = std::find(path.begin(), path.end(), x);
      std::string msg = "cycle not reaching root " + proc_str(root_) + ": ";
      for (; it != path.end(); ++it)
        msg += std::to_string(*it) + " -> ";
      return msg + std::to_string(x);
    }
    for (auto y : path)
      state[y] = reaches_root;
  }
  return std::nullopt;
}

std::vector<int> tree::depths() const {
  std::vector<int> depth(parent_.size(), -1);
  if (root_ >= parent_.size())
    return depth;
  auto kids = children();
  // Breadth-first from the root; processors on a detached cycle are never reached.
  std::vector<proc_id> frontier{root_};
  depth[root_] = 0;
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    auto p = frontier[i];
    for (auto c : kids[p]) {
      if (depth[c] >= 0)
        continue;
      depth[c] = depth[p] + 1;
      frontier.push_back(c);
    }
  }
  return depth;
}

int tree::depth_max() const {
  auto d = depths();
  int m = 0;
  for (auto x : d)
    m = std::max(m, x);
  return m;
}

double tree::depth_mean() const {
  long long sum = 0;
  std::size_t count = 0;
  for (auto x : depths()) {
    if (x > 0) {
      sum += x;
      ++count;
    }
  }
  return count == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(count);
}

std::size_t tree::descendants(proc_id p) const {
  if (p >= parent_.size())
    return 0;
  auto kids = children();
  // Marks visited processors so that a cycle through p cannot loop forever.
  std::vector<bool> seen(parent_.size(), false);
  std::vector<proc_id> stack{p};
  seen[p] = true;
  std::size_t count = 0;
  while (!stack.empty()) {
    auto x = stack.back();
    stack.pop_back();
    for (auto c : kids[x]) {
      if (seen[c])
        continue;
      seen[c] = true;
      ++count;
      stack.push_back(c);
    }
  }
  return count;
}

std::size_t tree::cross_edges(const std::vector<int>& cluster_of) const {
  auto cluster = [&](proc_id p) { return p < cluster_of.size() ? cluster_of[p] : -1; };
  std::size_t count = 0;
  for (proc_id p = 0; p < parent_.size(); ++p) {
    auto q = parent_[p];
    if (q != no_proc && cluster(p) != cluster(q))
      ++count;
  }
  return count;
}

std::string tree::to_dot(const std::vector<int>& cluster_of,
                         const std::vector<std::string>& cluster_names,
                         const std::string& title,
                         const std::vector<std::string>& edge_labels) const {
  const auto n = parent_.size();
  auto cluster = [&](proc_id p) { return p < cluster_of.size() ? cluster_of[p] : -1; };
  // Absent processors (no parent, no children, not the root) would only add clutter.
  std::vector<bool> shown(n, false);
  for (proc_id p = 0; p < n; ++p) {
    auto q = parent_[p];
    if (p == root_ || q != no_proc)
      shown[p] = true;
    if (q < n)
      shown[q] = true;
  }
  auto node = [&](proc_id p) {
    std::string s = std::to_string(p);
    auto c = cluster(p);
    s += " [fillcolor=" +
         dot_quote(c >= 0 ? palette[static_cast<std::size_t>(c) % palette_size] : "white");
    if (p == root_)
      s += ", shape=doublecircle, penwidth=2.5";
    return s + "];\n";
  };

  std::string out = "digraph banyan_tree {\n";
  out += "  label=" + dot_quote(title) + ";\n  labelloc=t;\n  fontname=\"Helvetica\";\n";
  out += "  node [shape=circle, style=filled, fontname=\"Helvetica\"];\n";
  out += "  edge [arrowsize=0.6, fontname=\"Helvetica\"];\n";
  std::map<int, std::vector<proc_id>> by_cluster;
  for (proc_id p = 0; p < n; ++p)
    if (shown[p])
      by_cluster[cluster(p)].push_back(p);
  for (const auto& [c, procs] : by_cluster) {
    if (c < 0) {
      for (auto p : procs)
        out += "  " + node(p);
      continue;
    }
    auto cs = static_cast<std::size_t>(c);
    auto name = cs < cluster_names.size() ? cluster_names[cs] : "cluster " + std::to_string(c);
    out += "  subgraph cluster_" + std::to_string(c) + " {\n";
    out += "    label=" + dot_quote(name) + ";\n    style=rounded;\n";
    for (auto p : procs)
      out += "    " + node(p);
    out += "  }\n";
  }
  for (proc_id p = 0; p < n; ++p) {
    auto q = parent_[p];
    if (q >= n)
      continue;
    std::vector<std::string> attrs;
    if (cluster(p) != cluster(q))
      attrs.emplace_back("style=bold, color=\"#c0392b\"");
    if (p < edge_labels.size() && !edge_labels[p].empty())
      attrs.push_back("label=" + dot_quote(edge_labels[p]));
    out += "  " + std::to_string(q) + " -> " + std::to_string(p);
    if (!attrs.empty()) {
      out += " [";
      for (std::size_t i = 0; i < attrs.size(); ++i)
        out += (i > 0 ? ", " : "") + attrs[i];
      out += "]";
    }
    out += ";\n";
  }
  return out + "}\n";
}

} // namespace banyan

#include "banyan/core/topology.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "topology_text.hpp"

namespace banyan {

// ---------------------------------------------------------------------------------------
// Queries

std::size_t topology::proc_count() const {
  std::size_t n = 0;
  for (const auto& g : groups)
    n += g.procs;
  return n;
}

int topology::find_group(std::string_view group_name) const {
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i].name == group_name)
      return static_cast<int>(i);
  return -1;
}

int topology::find_link(int a, int b) const {
  for (std::size_t i = 0; i < links.size(); ++i)
    if ((links[i].a == a && links[i].b == b) || (links[i].a == b && links[i].b == a))
      return static_cast<int>(i);
  return -1;
}

int topology::leaf_of(proc_id p) const {
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (g.procs > 0 && p >= g.first_proc && p - g.first_proc < g.procs)
      return static_cast<int>(i);
  }
  assert(!"leaf_of: processor id out of range");
  return -1;
}

std::vector<int> topology::clusters() const {
  std::vector<int> out;
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i].procs > 0)
      out.push_back(static_cast<int>(i));
  std::sort(out.begin(), out.end(),
            [this](int x, int y) { return groups[x].first_proc < groups[y].first_proc; });
  return out;
}

std::vector<int> topology::cluster_of() const {
  std::vector<int> out;
  out.reserve(proc_count());
  for (int leaf : clusters())
    out.insert(out.end(), groups[leaf].procs, leaf);
  return out;
}

topology::split topology::split_of(proc_id a, proc_id b) const {
  int ga = leaf_of(a);
  int gb = leaf_of(b);
  if (ga == gb)
    return {ga, -1, -1};
  while (groups[ga].depth > groups[gb].depth)
    ga = groups[ga].parent;
  while (groups[gb].depth > groups[ga].depth)
    gb = groups[gb].parent;
  // Two distinct leaves: neither is an ancestor of the other, so ga != gb here.
  while (groups[ga].parent != groups[gb].parent) {
    ga = groups[ga].parent;
    gb = groups[gb].parent;
  }
  return {groups[ga].parent, ga, gb};
}

duration topology::rtt(proc_id a, proc_id b) const {
  if (a == b)
    return duration::zero();
  const auto s = split_of(a, b);
  if (s.side_a < 0)
    return groups[s.common].rtt;
  if (int l = find_link(s.side_a, s.side_b); l >= 0)
    return links[l].rtt;
  return s.common < 0 ? root_rtt : groups[s.common].rtt;
}

duration topology::one_way(proc_id a, proc_id b) const {
  return rtt(a, b) / 2;
}

rate topology::path_bandwidth(proc_id a, proc_id b) const {
  if (a == b)
    return infinite_rate;
  const auto s = split_of(a, b);
  const int la = leaf_of(a);
  const int lb = leaf_of(b);
  rate r = std::min(groups[la].nic, groups[lb].nic);
  if (s.side_a < 0)
    return r;
  for (int g = la; g != s.common; g = groups[g].parent)
    r = std::min(r, groups[g].uplink);
  for (int g = lb; g != s.common; g = groups[g].parent)
    r = std::min(r, groups[g].uplink);
  if (int l = find_link(s.side_a, s.side_b); l >= 0)
    r = std::min(r, links[l].a == s.side_a ? links[l].bw_ab : links[l].bw_ba);
  else
    r = std::min(r, s.common < 0 ? root_link_bw : groups[s.common].link_bw);
  return r;
}

std::string format_duration(duration d) {
  const std::int64_t ns = d.count();
  if (ns == 0)
    return "0s";
  struct unit {
    std::int64_t scale;
    int digits;
    const char* name;
  };
  static constexpr unit units[] = {
      {1'000'000'000, 9, "s"}, {1'000'000, 6, "ms"}, {1'000, 3, "us"}, {1, 0, "ns"}};
  const std::int64_t mag = ns < 0 ? -ns : ns;
  for (const auto& u : units) {
    if (mag < u.scale && u.scale != 1)
      continue;
    std::string out = (ns < 0 ? "-" : "") + std::to_string(mag / u.scale);
    if (std::int64_t frac = mag % u.scale; frac != 0) {
      std::string f = std::to_string(frac);
      f.insert(0, static_cast<std::size_t>(u.digits) - f.size(), '0');
      while (!f.empty() && f.back() == '0')
        f.pop_back();
      out += "." + f;
    }
    return out + u.name;
  }
  return std::to_string(ns) + "ns";
}

std::string format_rate(rate r) {
  if (std::isinf(r))
    return "inf";
  const double bits = r * 8.0;
  struct unit {
    double scale;
    const char* name;
  };
  static constexpr unit units[] = {
      {1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "Kbit"}, {1, "bit"}};
  for (const auto& u : units) {
    if (bits >= u.scale || u.scale == 1) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6g%s", bits / u.scale, u.name);
      return buf;
    }
  }
  return "inf";
}

namespace {

std::string proc_range(const topology::group& g) {
  return "[" + std::to_string(g.first_proc) + ", " + std::to_string(g.first_proc + g.proc_count)
         + ")";
}

void describe_group(const topology& t, int gi, std::ostringstream& out) {
  const auto& g = t.groups[gi];
  out << std::string(2 * static_cast<std::size_t>(g.depth) + 2, ' ') << g.name << ": ";
  if (g.is_leaf()) {
    out << g.procs << " procs " << proc_range(g);
    if (g.procs > 1)
      out << ", rtt " << format_duration(g.rtt);
    out << ", nic " << format_rate(g.nic);
  } else {
    out << g.proc_count << " procs " << proc_range(g) << " in " << g.children.size() << " groups";
    if (g.rtt != duration::zero())
      out << ", rtt " << format_duration(g.rtt);
    if (!std::isinf(g.link_bw))
      out << ", bw " << format_rate(g.link_bw);
  }
  if (!std::isinf(g.uplink))
    out << ", uplink " << format_rate(g.uplink);
  out << '\n';
  for (int c : g.children)
    describe_group(t, c, out);
}

} // namespace

std::string topology::describe() const {
  std::ostringstream out;
  out << (name.empty() ? "(unnamed)" : name) << ": " << proc_count() << " processors in "
      << clusters().size() << " clusters, send overhead " << format_duration(send_overhead) << '\n';
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i].parent < 0)
      describe_group(*this, static_cast<int>(i), out);
  for (const auto& l : links) {
    out << "  link " << groups[l.a].name << " - " << groups[l.b].name << ": rtt "
        << format_duration(l.rtt) << ", bw " << format_rate(l.bw_ab);
    if (l.bw_ab != l.bw_ba)
      out << " / " << format_rate(l.bw_ba);
    out << '\n';
  }
  return out.str();
}

std::vector<std::vector<double>> latency_matrix(const topology& topo) {
  const std::size_t n = topo.proc_count();
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  // One-way latency depends only on the pair of clusters: compute it once per pair.
  const auto leaves = topo.clusters();
  for (int la : leaves) {
    const auto& ga = topo.groups[la];
    for (int lb : leaves) {
      const auto& gb = topo.groups[lb];
      double ms;
      if (la == lb)
        ms = to_ms(ga.rtt / 2);
      else
        ms = to_ms(topo.one_way(ga.first_proc, gb.first_proc));
      for (proc_id a = ga.first_proc; a < ga.first_proc + ga.procs; ++a)
        for (proc_id b = gb.first_proc; b < gb.first_proc + gb.procs; ++b)
          m[a][b] = a == b ? 0.0 : ms;
    }
  }
  return m;
}

std::vector<std::vector<double>> bandwidth_matrix(const topology& topo) {
  const std::size_t n = topo.proc_count();
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (proc_id a = 0; a < n; ++a)
    for (proc_id b = 0; b < n; ++b)
      if (a != b)
        m[a][b] = topo.path_bandwidth(a, b);
  return m;
}

// ---------------------------------------------------------------------------------------
// Parser

namespace {

error line_error(int line, const std::string& msg) {
  return make_error(errc::parse_error, "line " + std::to_string(line) + ": " + msg);
}

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

std::vector<std::string_view> tokenize(std::string_view line) {
  if (auto hash = line.find('#'); hash != std::string_view::npos)
    line = line.substr(0, hash);
  std::vector<std::string_view> out;
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; };
  while (i < line.size()) {
    while (i < line.size() && space(line[i]))
      ++i;
    std::size_t j = i;
    while (j < line.size() && !space(line[j]))
      ++j;
    if (j > i)
      out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

/// Splits "0.25ms" into 0.25 and "ms". Only plain decimals: no sign, no exponent.
bool split_number(std::string_view tok, double& value, std::string_view& unit) {
  std::size_t n = 0;
  bool digit = false;
  while (n < tok.size() && ((tok[n] >= '0' && tok[n] <= '9') || tok[n] == '.')) {
    digit = digit || tok[n] != '.';
    ++n;
  }
  if (!digit)
    return false;
  auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + n, value);
  if (ec != std::errc{} || ptr != tok.data() + n)
    return false;
  unit = tok.substr(n);
  return true;
}

expected<duration> parse_time(int line, std::string_view tok) {
  double v = 0;
  std::string_view unit;
  if (!split_number(tok, v, unit))
    return line_error(line, "invalid time " + quote(tok)
                                + " (expected a number and a unit: ns, us, ms or s)");
  double scale;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else if (unit.empty())
    return line_error(line, "missing time unit in " + quote(tok) + " (use ns, us, ms or s)");
  else
    return line_error(line, "unknown time unit " + quote(unit) + " in " + quote(tok)
                                + " (use ns, us, ms or s)");
  const double ns = std::round(v * scale);
  if (ns > 1e18)
    return line_error(line, "time " + quote(tok) + " is too large");
  return duration{static_cast<std::int64_t>(ns)};
}

expected<rate> parse_rate(int line, std::string_view tok) {
  if (tok == "inf")
    return infinite_rate;
  double v = 0;
  std::string_view unit;
  static constexpr const char* units_hint =
      " (use bit, Kbit, Mbit, Gbit, Tbit for bits per second, B, KB, MB, GB for bytes per "
      "second, or inf)";
  if (!split_number(tok, v, unit))
    return line_error(line, "invalid bandwidth " + quote(tok) + units_hint);
  struct unit_def {
    std::string_view name;
    double bytes_per_second;
  };
  static constexpr unit_def units[] = {{"bit", 1.0 / 8},  {"Kbit", 1e3 / 8},  {"Mbit", 1e6 / 8},
                                       {"Gbit", 1e9 / 8}, {"Tbit", 1e12 / 8}, {"B", 1},
                                       {"KB", 1e3},       {"MB", 1e6},        {"GB", 1e9}};
  if (unit.empty())
    return line_error(line, "missing bandwidth unit in " + quote(tok) + units_hint);
  for (const auto& u : units) {
    if (u.name == unit) {
      if (v <= 0)
        return line_error(line, "bandwidth must be positive, got " + quote(tok));
      return v * u.bytes_per_second;
    }
  }
  return line_error(line,
                    "unknown bandwidth unit " + quote(unit) + " in " + quote(tok) + units_hint);
}

bool valid_name(std::string_view s) {
  if (s.empty())
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
           || c == '-' || c == '.';
  });
}

/// What the parser knows beyond the topology itself: declaration lines and which
/// optional values were given, needed for validation and inheritance at the end.
struct group_extra {
  int line = 0;
  bool has_rtt = false;
  bool has_nic = false;
  bool has_bw = false;
};
struct link_extra {
  int line = 0;
  bool has_rtt = false;
  bool has_bw = false;
};

class parser {
public:
  expected<topology> run(std::string_view text) {
    int line_no = 0;
    while (!text.empty()) {
      ++line_no;
      const auto nl = text.find('\n');
      const auto line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      const auto toks = tokenize(line);
      if (toks.empty())
        continue;
      if (auto err = parse_line(line_no, toks))
        return *err;
    }
    if (auto err = finish())
      return *err;
    for (const auto& [line, words] : at_lines_) {
      auto c = parse_network_change(t_, line, tokens(words.begin(), words.end()));
      if (!c)
        return c.err();
      t_.changes.push_back(*c);
    }
    std::stable_sort(t_.changes.begin(), t_.changes.end(),
                     [](const network_change& x, const network_change& y) { return x.at < y.at; });
    return std::move(t_);
  }

private:
  using tokens = std::vector<std::string_view>;

  /// Each step returns nothing on success, or the error.
  std::optional<error> parse_line(int line, const tokens& toks) {
    const auto kw = toks[0];
    if (kw == "topology")
      return parse_name(line, toks);
    if (kw == "send_overhead")
      return parse_overhead(line, toks);
    if (kw == "default")
      return parse_default(line, toks);
    if (kw == "group")
      return parse_group(line, toks);
    if (kw == "link")
      return parse_link(line, toks);
    if (kw == "at") {
      // Changes name links and groups as they are once every line is read.
      at_lines_.emplace_back(line, std::vector<std::string>(toks.begin(), toks.end()));
      return {};
    }
    return line_error(line, "unknown keyword " + quote(kw)
                                + " (expected topology, send_overhead, default, group, link or at)");
  }

  std::optional<error> parse_name(int line, const tokens& toks) {
    if (toks.size() != 2)
      return line_error(line, "'topology' takes one name");
    if (has_name_)
      return line_error(line, "'topology' given twice");
    has_name_ = true;
    t_.name = std::string(toks[1]);
    return {};
  }

  std::optional<error> parse_overhead(int line, const tokens& toks) {
    if (toks.size() != 2)
      return line_error(line, "'send_overhead' takes one time");
    if (has_overhead_)
      return line_error(line, "'send_overhead' given twice");
    has_overhead_ = true;
    auto d = parse_time(line, toks[1]);
    if (!d)
      return d.err();
    t_.send_overhead = *d;
    return {};
  }

  std::optional<error> parse_default(int line, const tokens& toks) {
    if (toks.size() != 3)
      return line_error(line, "'default' takes a name and a value, e.g. 'default nic 1Gbit'");
    const auto what = toks[1];
    bool* seen;
    if (what == "nic")
      seen = &has_default_nic_;
    else if (what == "rtt")
      seen = &has_root_rtt_;
    else if (what == "bw")
      seen = &has_root_bw_;
    else
      return line_error(line, "unknown default " + quote(what) + " (expected nic, rtt or bw)");
    if (*seen)
      return line_error(line, "'default " + std::string(what) + "' given twice");
    *seen = true;
    if (what == "rtt") {
      auto d = parse_time(line, toks[2]);
      if (!d)
        return d.err();
      t_.root_rtt = *d;
    } else {
      auto r = parse_rate(line, toks[2]);
      if (!r)
        return r.err();
      (what == "nic" ? default_nic_ : t_.root_link_bw) = *r;
    }
    return {};
  }

  std::optional<error> parse_group(int line, const tokens& toks) {
    if (toks.size() < 2)
      return line_error(line, "'group' needs a name");
    const auto name = toks[1];
    if (!valid_name(name))
      return line_error(line, "invalid group name " + quote(name)
                                  + " (use letters, digits, '_', '-' and '.')");
    if (t_.find_group(name) >= 0)
      return line_error(line, "group " + quote(name) + " declared twice");
    topology::group g;
    g.name = std::string(name);
    group_extra x;
    x.line = line;
    bool has_procs = false, has_in = false, has_uplink = false;
    for (std::size_t i = 2; i < toks.size(); i += 2) {
      const auto key = toks[i];
      bool* seen;
      if (key == "in")
        seen = &has_in;
      else if (key == "procs")
        seen = &has_procs;
      else if (key == "rtt")
        seen = &x.has_rtt;
      else if (key == "bw")
        seen = &x.has_bw;
      else if (key == "nic")
        seen = &x.has_nic;
      else if (key == "uplink")
        seen = &has_uplink;
      else
        return line_error(line, "unknown group attribute " + quote(key)
                                    + " (expected in, procs, rtt, bw, nic or uplink)");
      if (i + 1 >= toks.size())
        return line_error(line, quote(key) + " needs a value");
      if (*seen)
        return line_error(line, quote(key) + " given twice");
      *seen = true;
      const auto val = toks[i + 1];
      if (key == "in") {
        const int p = t_.find_group(val);
        if (p < 0)
          return line_error(line, "unknown group " + quote(val)
                                      + " (groups must be declared before they are used)");
        if (t_.groups[p].procs > 0)
          return line_error(line, "group " + quote(name) + " cannot be inside " + quote(val)
                                      + ", which has procs (processors and subgroups do not mix)");
        g.parent = p;
      } else if (key == "procs") {
        std::uint32_t n = 0;
        auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), n);
        if (ec != std::errc{} || ptr != val.data() + val.size() || n == 0)
          return line_error(line, "'procs' must be a positive integer, got " + quote(val));
        g.procs = n;
      } else if (key == "rtt") {
        auto d = parse_time(line, val);
        if (!d)
          return d.err();
        g.rtt = *d;
      } else {
        auto r = parse_rate(line, val);
        if (!r)
          return r.err();
        (key == "bw" ? g.link_bw : key == "nic" ? g.nic : g.uplink) = *r;
      }
    }
    if (has_procs && x.has_bw)
      return line_error(line, "'bw' is the bandwidth between subgroups, but " + quote(name)
                                  + " has procs (limit its processors with 'nic')");
    const int idx = static_cast<int>(t_.groups.size());
    if (g.parent >= 0) {
      g.depth = t_.groups[g.parent].depth + 1;
      t_.groups[g.parent].children.push_back(idx);
    }
    t_.groups.push_back(std::move(g));
    gx_.push_back(x);
    return {};
  }

  std::optional<error> parse_link(int line, const tokens& toks) {
    if (toks.size() < 3)
      return line_error(line, "'link' needs two group names");
    int ends[2];
    for (int k = 0; k < 2; ++k) {
      ends[k] = t_.find_group(toks[1 + k]);
      if (ends[k] < 0)
        return line_error(line, "unknown group " + quote(toks[1 + k])
                                    + " (groups must be declared before they are used)");
    }
    const auto& ga = t_.groups[ends[0]];
    const auto& gb = t_.groups[ends[1]];
    if (ends[0] == ends[1])
      return line_error(line, "link from " + quote(ga.name) + " to itself");
    if (ga.parent != gb.parent) {
      auto where = [this](const topology::group& g) {
        return g.parent < 0 ? quote(g.name) + " is top-level"
                            : quote(g.name) + " is in " + quote(t_.groups[g.parent].name);
      };
      return line_error(line, "link between " + quote(ga.name) + " and " + quote(gb.name)
                                  + ", which are not siblings (" + where(ga) + ", " + where(gb)
                                  + ")");
    }
    if (t_.find_link(ends[0], ends[1]) >= 0)
      return line_error(line, "link between " + quote(ga.name) + " and " + quote(gb.name)
                                  + " declared twice");
    topology::link l;
    l.a = ends[0];
    l.b = ends[1];
    link_extra x;
    x.line = line;
    for (std::size_t i = 3; i < toks.size(); i += 2) {
      const auto key = toks[i];
      bool* seen;
      if (key == "rtt")
        seen = &x.has_rtt;
      else if (key == "bw")
        seen = &x.has_bw;
      else
        return line_error(line, "unknown link attribute " + quote(key) + " (expected rtt or bw)");
      if (i + 1 >= toks.size())
        return line_error(line, quote(key) + " needs a value");
      if (*seen)
        return line_error(line, quote(key) + " given twice");
      *seen = true;
      const auto val = toks[i + 1];
      if (key == "rtt") {
        auto d = parse_time(line, val);
        if (!d)
          return d.err();
        l.rtt = *d;
      } else {
        // "200Mbit" (both directions) or "200Mbit/150Mbit" (a -> b / b -> a).
        const auto slash = val.find('/');
        auto ab = parse_rate(line, val.substr(0, slash));
        if (!ab)
          return ab.err();
        l.bw_ab = l.bw_ba = *ab;
        if (slash != std::string_view::npos) {
          auto ba = parse_rate(line, val.substr(slash + 1));
          if (!ba)
            return ba.err();
          l.bw_ba = *ba;
        }
      }
    }
    if (!x.has_rtt && !x.has_bw)
      return line_error(line, "link between " + quote(ga.name) + " and " + quote(gb.name)
                                  + " sets neither rtt nor bw");
    t_.links.push_back(l);
    lx_.push_back(x);
    return {};
  }

  /// Validation and inheritance once every line is read.
  std::optional<error> finish() {
    if (t_.groups.empty())
      return make_error(errc::parse_error,
                        "no processors: declare at least one group with 'procs'");
    for (std::size_t i = 0; i < t_.groups.size(); ++i) {
      auto& g = t_.groups[i];
      const auto& x = gx_[i];
      if (g.procs == 0 && g.children.empty())
        return line_error(x.line, "group " + quote(g.name) + " has neither procs nor subgroups");
      if (g.procs > 1 && !x.has_rtt)
        return line_error(x.line, "group " + quote(g.name) + " has " + std::to_string(g.procs)
                                      + " procs but no rtt");
      // Parents come before children, so the parent's nic is already resolved.
      if (!x.has_nic)
        g.nic = g.parent >= 0 ? t_.groups[g.parent].nic : default_nic_;
    }
    for (std::size_t i = 0; i < t_.links.size(); ++i) {
      auto& l = t_.links[i];
      const int parent = t_.groups[l.a].parent;
      if (!lx_[i].has_rtt) {
        const bool parent_rtt = parent < 0 ? has_root_rtt_ : gx_[parent].has_rtt;
        if (!parent_rtt)
          return line_error(
              lx_[i].line,
              "link between " + quote(t_.groups[l.a].name) + " and " + quote(t_.groups[l.b].name)
                  + " has no rtt, and "
                  + (parent < 0 ? std::string("there is no 'default rtt'")
                                : "their parent " + quote(t_.groups[parent].name) + " has none"));
        l.rtt = parent < 0 ? t_.root_rtt : t_.groups[parent].rtt;
      }
      if (!lx_[i].has_bw)
        l.bw_ab = l.bw_ba = parent < 0 ? t_.root_link_bw : t_.groups[parent].link_bw;
    }
    if (auto err = check_sibling_rtts())
      return err;
    // Processor ids: depth-first, children in declaration order, so that every group's
    // processors form one contiguous range.
    std::uint64_t next = 0;
    for (std::size_t i = 0; i < t_.groups.size(); ++i)
      if (t_.groups[i].parent < 0)
        number(static_cast<int>(i), next);
    if (next >= no_proc)
      return make_error(errc::parse_error, "too many processors: " + std::to_string(next));
    return {};
  }

  /// Every pair of siblings needs an RTT: their link's, or their parent's default.
  std::optional<error> check_sibling_rtts() {
    std::vector<int> top;
    for (std::size_t i = 0; i < t_.groups.size(); ++i)
      if (t_.groups[i].parent < 0)
        top.push_back(static_cast<int>(i));
    auto check = [this](int parent, const std::vector<int>& kids) -> std::optional<error> {
      const bool has = parent < 0 ? has_root_rtt_ : gx_[parent].has_rtt;
      if (has)
        return {};
      for (std::size_t i = 0; i < kids.size(); ++i)
        for (std::size_t j = i + 1; j < kids.size(); ++j)
          if (t_.find_link(kids[i], kids[j]) < 0) {
            const auto& a = t_.groups[kids[i]].name;
            const auto& b = t_.groups[kids[j]].name;
            const std::string fix = "add 'link " + a + " " + b + " rtt ...' or ";
            if (parent < 0)
              return make_error(errc::parse_error, "no rtt between top-level groups " + quote(a)
                                                       + " and " + quote(b) + ": " + fix
                                                       + "'default rtt ...'");
            return line_error(gx_[parent].line, "no rtt between " + quote(a) + " and " + quote(b)
                                                    + " in " + quote(t_.groups[parent].name) + ": "
                                                    + fix + "an rtt to "
                                                    + quote(t_.groups[parent].name));
          }
      return {};
    };
    if (auto err = check(-1, top))
      return err;
    for (std::size_t i = 0; i < t_.groups.size(); ++i)
      if (auto err = check(static_cast<int>(i), t_.groups[i].children))
        return err;
    return {};
  }

  void number(int gi, std::uint64_t& next) {
    auto& g = t_.groups[gi];
    g.first_proc = static_cast<proc_id>(std::min<std::uint64_t>(next, no_proc));
    const std::uint64_t start = next;
    next += g.procs;
    for (int c : g.children)
      number(c, next);
    g.proc_count = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(next - start, std::numeric_limits<std::uint32_t>::max()));
  }

  topology t_;
  std::vector<std::pair<int, std::vector<std::string>>> at_lines_;
  std::vector<group_extra> gx_;
  std::vector<link_extra> lx_;
  rate default_nic_ = infinite_rate;
  bool has_name_ = false;
  bool has_overhead_ = false;
  bool has_default_nic_ = false;
  bool has_root_rtt_ = false;
  bool has_root_bw_ = false;
};

} // namespace

namespace detail {
error topology_line_error(int line, const std::string& msg) {
  return line_error(line, msg);
}
std::string topology_quote(std::string_view s) {
  return quote(s);
}
std::vector<std::string_view> topology_tokenize(std::string_view line) {
  return tokenize(line);
}
expected<duration> topology_time(int line, std::string_view tok) {
  return parse_time(line, tok);
}
expected<rate> topology_rate(int line, std::string_view tok) {
  return parse_rate(line, tok);
}
} // namespace detail

expected<topology> parse_topology(std::string_view text) {
  return parser{}.run(text);
}

expected<topology> builtin_topology(std::string_view name) {
  const auto text = builtin_topology_text(name);
  if (text.empty()) {
    std::string names;
    for (const auto& n : builtin_topology_names())
      names += (names.empty() ? "" : ", ") + n;
    return make_error(errc::not_found,
                      "no builtin topology " + quote(name) + " (builtins: " + names + ")");
  }
  return parse_topology(text);
}

expected<topology> load_topology(const std::string& name_or_path) {
  if (!builtin_topology_text(name_or_path).empty())
    return builtin_topology(name_or_path);
  std::ifstream in(name_or_path, std::ios::binary);
  if (!in) {
    std::string names;
    for (const auto& n : builtin_topology_names())
      names += (names.empty() ? "" : ", ") + n;
    return make_error(errc::not_found, "no builtin topology or readable file named "
                                           + quote(name_or_path) + " (builtins: " + names + ")");
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  auto t = parse_topology(buf.str());
  if (!t)
    return make_error(t.err().code, name_or_path + ": " + t.err().message);
  if (t->name.empty()) {
    // Unnamed file: name it after the file, without directories or extension.
    auto base = name_or_path.substr(name_or_path.find_last_of('/') + 1);
    if (auto dot = base.find_last_of('.'); dot != std::string::npos && dot > 0)
      base.resize(dot);
    t->name = base;
  }
  return t;
}

} // namespace banyan

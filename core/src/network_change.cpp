#include "banyan/core/network_change.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "banyan/core/topology.hpp"
#include "topology_text.hpp"

namespace banyan {

namespace {

using detail::topology_line_error;
using detail::topology_quote;

std::string group_name(const topology& topo, int g) {
  return topology_quote(topo.groups[g].name);
}

/// "60%" -> 0.6; the share must be in [0, 100).
expected<double> parse_load(int line, std::string_view tok) {
  if (tok.empty() || tok.back() != '%')
    return topology_line_error(line, "invalid load " + topology_quote(tok)
                                         + " (expected a percentage such as 60%)");
  const auto num = tok.substr(0, tok.size() - 1);
  double v = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc{} || ptr != num.data() + num.size() || num[0] == '-'
      || num[0] == '+')
    return topology_line_error(line, "invalid load " + topology_quote(tok)
                                         + " (expected a percentage such as 60%)");
  if (!(v >= 0 && v < 100))
    return topology_line_error(line, "load " + topology_quote(tok)
                                         + " out of range (0% up to, not including, 100%)");
  return v / 100;
}

} // namespace

std::optional<error> check_network_change(const topology& topo, const network_change& c) {
  const int line = c.line;
  auto fail = [line](const std::string& msg) -> std::optional<error> {
    if (line > 0)
      return topology_line_error(line, msg);
    return make_error(errc::invalid_argument, msg);
  };
  if (c.at < duration{0})
    return fail("a change's time must not be negative");
  if (c.load && !(*c.load >= 0 && *c.load < 1))
    return fail("load out of range (0% up to, not including, 100%)");
  for (const auto& b : {c.bw_ab, c.bw_ba})
    if (b && !(*b > 0 && std::isfinite(*b)))
      return fail("a changed bandwidth must be positive and finite");
  const bool capacity = c.bw_ab || c.bw_ba || c.load;
  if (c.what == network_change::target::link) {
    if (c.link < 0 || c.link >= static_cast<int>(topo.links.size()))
      return fail("no such link");
    const auto& l = topo.links[c.link];
    if (capacity && (std::isinf(l.bw_ab) || std::isinf(l.bw_ba)))
      return fail("link between " + group_name(topo, l.a) + " and " + group_name(topo, l.b)
                  + " has unlimited bandwidth: give it a 'bw' in its link line to change it "
                    "or load it");
    if (!capacity && !c.rtt)
      return fail("a link change sets at least one of bw, rtt and load");
  } else {
    if (c.group < 0 || c.group >= static_cast<int>(topo.groups.size()))
      return fail("no such group");
    if (c.rtt)
      return fail("an uplink has no rtt (change the rtt of a link)");
    if (capacity && std::isinf(topo.groups[c.group].uplink))
      return fail("group " + group_name(topo, c.group)
                  + " has no uplink: give it one ('uplink RATE') to change it or load it");
    if (!capacity)
      return fail("an uplink change sets bw or load");
  }
  return {};
}

expected<network_change> parse_network_change(const topology& topo, int line,
                                              const std::vector<std::string_view>& toks) {
  static constexpr const char* usage =
      " (expected 'at TIME link G1 G2 bw|rtt|load VALUE...' or 'at TIME uplink G bw|load "
      "VALUE...')";
  if (toks.size() < 3 || toks[0] != "at")
    return topology_line_error(line, std::string("incomplete change") + usage);
  network_change c;
  c.line = line;
  auto at = detail::topology_time(line, toks[1]);
  if (!at)
    return at.err();
  c.at = *at;
  std::size_t i = 3;
  bool swapped = false;
  auto find = [&](std::string_view name) -> expected<int> {
    const int g = topo.find_group(name);
    if (g < 0)
      return topology_line_error(line, "unknown group " + topology_quote(name));
    return g;
  };
  if (toks[2] == "link") {
    if (toks.size() < 5)
      return topology_line_error(line, std::string("'link' needs two groups") + usage);
    auto a = find(toks[3]);
    if (!a)
      return a.err();
    auto b = find(toks[4]);
    if (!b)
      return b.err();
    c.link = topo.find_link(*a, *b);
    if (c.link < 0)
      return topology_line_error(line, "no link line between " + topology_quote(toks[3])
                                           + " and " + topology_quote(toks[4])
                                           + ": changes apply to declared links");
    swapped = topo.links[c.link].a != *a;
    i = 5;
  } else if (toks[2] == "uplink") {
    c.what = network_change::target::uplink;
    auto g = find(toks[3]);
    if (!g)
      return g.err();
    c.group = *g;
    i = 4;
  } else {
    return topology_line_error(line, "unknown change target " + topology_quote(toks[2]) + usage);
  }
  if (i >= toks.size())
    return topology_line_error(line, std::string("nothing to change") + usage);
  for (; i < toks.size(); i += 2) {
    const auto key = toks[i];
    if (i + 1 >= toks.size())
      return topology_line_error(line, topology_quote(key) + " needs a value");
    const auto val = toks[i + 1];
    if (key == "bw") {
      if (c.bw_ab)
        return topology_line_error(line, "'bw' given twice");
      const auto slash = val.find('/');
      if (slash != std::string_view::npos && c.what == network_change::target::uplink)
        return topology_line_error(line, "an uplink change takes one rate, not X/Y");
      auto ab = detail::topology_rate(line, val.substr(0, slash));
      if (!ab)
        return ab.err();
      rate ba = *ab;
      if (slash != std::string_view::npos) {
        auto r = detail::topology_rate(line, val.substr(slash + 1));
        if (!r)
          return r.err();
        ba = *r;
      }
      if (std::isinf(*ab) || std::isinf(ba))
        return topology_line_error(line, "a changed bandwidth must be finite, got "
                                             + topology_quote(val));
      c.bw_ab = swapped ? ba : *ab;
      c.bw_ba = swapped ? *ab : ba;
    } else if (key == "rtt") {
      if (c.rtt)
        return topology_line_error(line, "'rtt' given twice");
      auto d = detail::topology_time(line, val);
      if (!d)
        return d.err();
      c.rtt = *d;
    } else if (key == "load") {
      if (c.load)
        return topology_line_error(line, "'load' given twice");
      auto l = parse_load(line, val);
      if (!l)
        return l.err();
      c.load = *l;
    } else {
      return topology_line_error(line, "unknown change attribute " + topology_quote(key)
                                           + " (expected bw, rtt or load)");
    }
  }
  if (auto err = check_network_change(topo, c))
    return *err;
  return c;
}

expected<std::vector<network_change>> parse_network_changes(const topology& topo,
                                                            std::string_view text) {
  std::vector<network_change> out;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    const auto toks = detail::topology_tokenize(line);
    if (toks.empty())
      continue;
    if (toks[0] != "at")
      return topology_line_error(line_no, "unknown keyword " + topology_quote(toks[0])
                                              + " (an events file holds only 'at' lines)");
    auto c = parse_network_change(topo, line_no, toks);
    if (!c)
      return c.err();
    out.push_back(*c);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const network_change& x, const network_change& y) { return x.at < y.at; });
  return out;
}

network_state::network_state(const topology& topo) {
  for (const auto& l : topo.links)
    links_.push_back({l.bw_ab, l.bw_ba, 0});
  for (const auto& g : topo.groups)
    uplinks_.push_back({g.uplink, g.uplink, 0});
}

void network_state::apply(topology& topo, const network_change& c) {
  if (c.what == network_change::target::link) {
    auto& l = topo.links[c.link];
    auto& s = links_[c.link];
    if (c.rtt)
      l.rtt = *c.rtt;
    if (c.bw_ab)
      s.nominal_ab = *c.bw_ab;
    if (c.bw_ba)
      s.nominal_ba = *c.bw_ba;
    if (c.load)
      s.load = *c.load;
    l.bw_ab = s.nominal_ab * (1 - s.load);
    l.bw_ba = s.nominal_ba * (1 - s.load);
  } else {
    auto& g = topo.groups[c.group];
    auto& s = uplinks_[c.group];
    if (c.bw_ab)
      s.nominal_ab = *c.bw_ab;
    if (c.load)
      s.load = *c.load;
    g.uplink = s.nominal_ab * (1 - s.load);
  }
}

topology topology_at(const topology& topo, duration t) {
  topology out = topo;
  network_state state(topo);
  for (const auto& c : topo.changes)
    if (c.at <= t)
      state.apply(out, c);
  return out;
}

std::string describe_change(const topology& topo, const network_change& c) {
  std::string s = "at " + format_duration(c.at) + " ";
  if (c.what == network_change::target::link) {
    const auto& l = topo.links[c.link];
    s += "link " + topo.groups[l.a].name + " " + topo.groups[l.b].name;
  } else {
    s += "uplink " + topo.groups[c.group].name;
  }
  if (c.bw_ab) {
    s += " bw " + format_rate(*c.bw_ab);
    if (c.bw_ba && *c.bw_ba != *c.bw_ab)
      s += "/" + format_rate(*c.bw_ba);
  }
  if (c.rtt)
    s += " rtt " + format_duration(*c.rtt);
  if (c.load) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", *c.load * 100);
    s += " load " + std::string(buf);
  }
  return s;
}

} // namespace banyan

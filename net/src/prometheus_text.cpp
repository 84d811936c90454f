#include "banyan/net/prometheus_text.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace banyan::net {

namespace {

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

const char* type_name(metric_family::type t) {
  return t == metric_family::type::counter ? "counter" : "gauge";
}

bool family_ok(const metric_family& f) {
  if (!valid_metric_name(f.name))
    return false;
  for (auto& s : f.samples)
    for (auto& [k, v] : s.labels)
      if (!valid_label_name(k))
        return false;
  return true;
}

} // namespace

bool valid_metric_name(std::string_view name) {
  if (name.empty())
    return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true))
      return false;
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__")
    return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false))
      return false;
  return true;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9.2e18)
    return std::to_string(static_cast<std::int64_t>(v));
  // The shortest of %.15g .. %.17g that reads back as the same double.
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string render_prometheus(const std::vector<metric_family>& families) {
  std::string out;
  for (auto& f : families) {
    if (!family_ok(f)) {
      out += "# invalid metric family \"" + escape_label_value(f.name) + "\" left out\n";
      continue;
    }
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + type_name(f.kind) + "\n";
    for (auto& s : f.samples) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0)
            out += ',';
          out += s.labels[i].first + "=\"" + escape_label_value(s.labels[i].second) + "\"";
        }
        out += '}';
      }
      out += ' ';
      out += format_value(s.value);
      out += '\n';
    }
  }
  return out;
}

} // namespace banyan::net

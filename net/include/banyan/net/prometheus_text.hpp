#pragma once
/// The Prometheus text exposition format (version 0.0.4): metric families, each with its
/// `# HELP` and `# TYPE` lines, then one line per sample, `name{label="value",...} value`.
/// Pure: it only builds text (net/metrics_server.hpp serves it; docs/observability.md lists
/// what `banyan node --metrics` exposes).
///
///     # HELP banyan_members Members of the computation as this node knows them.
///     # TYPE banyan_members gauge
///     banyan_members 3
///     # HELP banyan_collectives_total Collective operations asked of this node, by outcome.
///     # TYPE banyan_collectives_total counter
///     banyan_collectives_total{kind="broadcast",outcome="completed"} 12

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace banyan::net {

struct metric_sample {
  /// (name, value) pairs in the order they are written; values are any UTF-8 text
  /// (escaped as the format wants), names must be valid label names.
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

struct metric_family {
  enum class type { counter, gauge };
  std::string name; ///< a valid metric name; counters end in `_total` by convention
  std::string help; ///< one line of text (escaped as the format wants)
  type kind = type::gauge;
  std::vector<metric_sample> samples;
};

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
bool valid_metric_name(std::string_view name);
/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved)
bool valid_label_name(std::string_view name);
/// A label value between its quotes: `\` -> `\\`, `"` -> `\"`, newline -> `\n`.
std::string escape_label_value(std::string_view v);
/// A HELP text: `\` -> `\\`, newline -> `\n`.
std::string escape_help(std::string_view v);
/// A sample's value: whole numbers of magnitude below 2^63 as integers ("42"), others in
/// the shortest form that reads back exactly ("0.0125", "1e+20"), and "NaN", "+Inf",
/// "-Inf".
std::string format_value(double v);

/// The exposition of `families`, in the order given (a family without samples gets its
/// HELP and TYPE lines alone), every line ended by '\n'. A family or label whose name is
/// not valid is a programming error: the family is left out, and the text says so in a
/// comment line (`# invalid metric family "..." left out`).
std::string render_prometheus(const std::vector<metric_family>& families);

/// The Content-Type of the text format.
inline constexpr const char* prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace banyan::net

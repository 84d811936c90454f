#pragma once
// svg_plot: self-contained SVG line/point/step charts for the benchmark and demo
// pictures (no gnuplot, no graphviz). One chart per file: title, axis labels, nice
// ticks on linear or log axes, a legend beside the plot area, one distinct colour per
// series, and vertical dashed markers for events (a leave, a rejoin, ...).
//
//   plot_spec p;
//   p.title = "broadcast delivery";
//   p.x_label = "processor (sorted)";
//   p.y_label = "ms";
//   p.series.push_back({"dynamic", {0, 1, 2}, {0.0, 12.5, 30.1}});
//   if (auto err = write_svg("out/fig6.svg", p)) std::cerr << *err << "\n";
//
// Points whose x or y is not finite (NaN, inf), or not positive on a log axis, are not
// drawn; a line is broken there. Series without any drawable point still get a legend
// entry. Labels are XML-escaped. The output depends only on the spec (deterministic).

#include <optional>
#include <string>
#include <vector>

namespace banyan::cli {

/// One curve. x and y are paired by index; extra elements of the longer one are ignored.
struct plot_series {
  std::string label;
  std::vector<double> x, y;
};

/// A vertical dashed line at `x` with a label, e.g. an event in a timeline.
struct plot_marker {
  double x = 0;
  std::string label;
};

struct plot_spec {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  /// lines: polyline through the points; points: a dot per point; steps: a staircase
  /// that holds each y until the next x (a value that changes at events).
  enum class style { lines, points, steps } draw = style::lines;
  std::vector<plot_series> series;
  std::vector<plot_marker> markers;
};

/// The chart as an SVG document.
std::string render_svg(const plot_spec& p);

/// Writes the SVG file; on failure returns a one-line error message.
std::optional<std::string> write_svg(const std::string& path, const plot_spec& p);

} // namespace banyan::cli

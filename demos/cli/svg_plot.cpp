#include "svg_plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace banyan::cli {

namespace {

// Canvas layout (pixels). The legend sits right of the plot area so it never hides data.
//
//   +--------------------------------------------------+
//   |                   title                          |
//   |  y  +-------------------------------+  -- a      |
//   |  l  |  plot area                    |  -- b      |
//   |  a  |                               |  (legend)  |
//   |  b  +-------------------------------+            |
//   |        ticks        x label                      |
//   +--------------------------------------------------+
constexpr double width = 900, height = 520;
constexpr double left = 85, top = 50, right = 680, bottom = 455;
constexpr double legend_x = right + 20;

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline/CR are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          out += '?';
        else
          out += c;
    }
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string px(double v) {
  return fmt("%.2f", v);
}

/// A line from (x1, y1) to (x2, y2); `attrs`, its own attributes (each after a space).
std::string line(double x1, double y1, double x2, double y2, const std::string& attrs = {}) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2)
         + "\"" + attrs + "/>\n";
}

/// The step between ticks: 1, 2 or 5 times a power of ten, about `raw`.
double nice_step(double raw) {
  double e = std::floor(std::log10(raw));
  double base = std::pow(10.0, e);
  double f = raw / base;
  double nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  return nf * base;
}

struct axis {
  bool log = false;
  double lo = 0, hi = 1;       // data space (for log: positive)
  std::vector<double> ticks;   // labelled
  std::vector<double> minor;   // log axes: 2..9 times each decade, unlabelled
  std::vector<std::string> labels;

  /// 0 at lo, 1 at hi.
  double frac(double v) const {
    if (log)
      return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

axis linear_axis(double mn, double mx) {
  axis a;
  if (!(mn <= mx)) { // no data
    mn = 0;
    mx = 1;
  }
  if (mn == mx) {
    double d = mn != 0 ? std::abs(mn) * 0.1 : 1;
    mn -= d;
    mx += d;
  }
  // Positive data that comes close to 0 is drawn from 0, so that heights compare.
  if (mn > 0 && mn < mx / 4)
    mn = 0;
  double step = nice_step((mx - mn) / 5);
  // The data plus a little room (not below 0 for data that starts at 0 or above); the
  // ticks are the multiples of the step inside.
  double pad = (mx - mn) * 0.03;
  a.lo = mn >= 0 ? std::max(0.0, mn - pad) : mn - pad;
  a.hi = mx + pad;
  int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  bool sci = std::max(std::abs(a.lo), std::abs(a.hi)) >= 1e7 || step < 1e-4;
  auto first = static_cast<long long>(std::ceil(a.lo / step - 1e-9));
  auto last = static_cast<long long>(std::floor(a.hi / step + 1e-9));
  for (auto i = first; i <= last; ++i) {
    double v = static_cast<double>(i) * step;
    if (std::abs(v) < step * 1e-9)
      v = 0; // no "-0"
    a.ticks.push_back(v);
    char buf[64];
    if (sci)
      std::snprintf(buf, sizeof buf, "%g", v);
    else
      std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    a.labels.push_back(buf);
  }
  return a;
}

axis log_axis(double mn, double mx) {
  axis a;
  a.log = true;
  if (!(mn <= mx)) {
    mn = 1;
    mx = 10;
  }
  int lo_e = static_cast<int>(std::floor(std::log10(mn) + 1e-9));
  int hi_e = static_cast<int>(std::ceil(std::log10(mx) - 1e-9));
  if (hi_e <= lo_e)
    hi_e = lo_e + 1;
  int step = std::max(1, (hi_e - lo_e + 7) / 8); // at most about 8 labelled decades
  hi_e = lo_e + (hi_e - lo_e + step - 1) / step * step;
  a.lo = std::pow(10.0, lo_e);
  a.hi = std::pow(10.0, hi_e);
  for (int e = lo_e; e <= hi_e; e += step) {
    a.ticks.push_back(std::pow(10.0, e));
    char buf[32];
    if (e >= -4 && e <= 6)
      std::snprintf(buf, sizeof buf, "%.*f", e < 0 ? -e : 0, std::pow(10.0, e));
    else
      std::snprintf(buf, sizeof buf, "1e%d", e);
    a.labels.push_back(buf);
  }
  if (step == 1 && hi_e - lo_e <= 6)
    for (int e = lo_e; e < hi_e; ++e)
      for (int m = 2; m <= 9; ++m)
        a.minor.push_back(m * std::pow(10.0, e));
  return a;
}

/// tab10, then well-spread hues.
std::string colour(std::size_t i) {
  static const char* base[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  constexpr std::size_t n = sizeof base / sizeof base[0];
  if (i < n)
    return base[i];
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%.1f,65%%,40%%)",
                std::fmod(static_cast<double>(i - n) * 137.508 + 15.0, 360.0));
  return buf;
}

bool drawable(double v, bool log) {
  return std::isfinite(v) && (!log || v > 0);
}

} // namespace

std::string render_svg(const plot_spec& p) {
  // Data ranges over the drawable points (and the markers, on x).
  double inf = std::numeric_limits<double>::infinity();
  double xmin = inf, xmax = -inf, ymin = inf, ymax = -inf;
  bool any = false;
  for (auto& s : p.series) {
    auto n = std::min(s.x.size(), s.y.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (!drawable(s.x[i], p.log_x) || !drawable(s.y[i], p.log_y))
        continue;
      any = true;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]);
      ymax = std::max(ymax, s.y[i]);
    }
  }
  for (auto& m : p.markers)
    if (drawable(m.x, p.log_x)) {
      xmin = std::min(xmin, m.x);
      xmax = std::max(xmax, m.x);
    }
  axis ax = p.log_x ? log_axis(xmin, xmax) : linear_axis(xmin, xmax);
  axis ay = p.log_y ? log_axis(ymin, ymax) : linear_axis(ymin, ymax);
  auto sx = [&](double v) { return left + ax.frac(v) * (right - left); };
  auto sy = [&](double v) { return bottom - ay.frac(v) * (bottom - top); };

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) + "\" height=\"" +
       px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
       "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + px(width) + "\" height=\"" + px(height) +
       "\" fill=\"white\"/>\n";
  o += "<defs><clipPath id=\"plot-area\"><rect x=\"" + px(left) + "\" y=\"" + px(top) +
       "\" width=\"" + px(right - left) + "\" height=\"" + px(bottom - top) +
       "\"/></clipPath></defs>\n";
  o += "<text class=\"title\" x=\"" + px((left + right) / 2) + "\" y=\"28\" font-size=\"16\" "
       "text-anchor=\"middle\">" + escape(p.title) + "</text>\n";

  // Grid and ticks.
  o += "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  for (double v : ax.minor)
    o += line(sx(v), top, sx(v), bottom, " stroke=\"#f3f3f3\"");
  for (double v : ay.minor)
    o += line(left, sy(v), right, sy(v), " stroke=\"#f3f3f3\"");
  for (double v : ax.ticks)
    o += line(sx(v), top, sx(v), bottom);
  for (double v : ay.ticks)
    o += line(left, sy(v), right, sy(v));
  o += "</g>\n";
  o += "<g class=\"ticks\" fill=\"#333\">\n";
  for (std::size_t i = 0; i < ax.ticks.size(); ++i)
    o += "<text class=\"tick-x\" x=\"" + px(sx(ax.ticks[i])) + "\" y=\"" + px(bottom + 17) +
         "\" text-anchor=\"middle\">" + escape(ax.labels[i]) + "</text>\n";
  for (std::size_t i = 0; i < ay.ticks.size(); ++i)
    o += "<text class=\"tick-y\" x=\"" + px(left - 6) + "\" y=\"" + px(sy(ay.ticks[i]) + 4) +
         "\" text-anchor=\"end\">" + escape(ay.labels[i]) + "</text>\n";
  o += "</g>\n";
  o += "<rect class=\"frame\" x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" +
       px(right - left) + "\" height=\"" + px(bottom - top) +
       "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text class=\"x-label\" x=\"" + px((left + right) / 2) + "\" y=\"" + px(bottom + 42) +
       "\" font-size=\"13\" text-anchor=\"middle\">" + escape(p.x_label) + "</text>\n";
  double ymid = (top + bottom) / 2;
  o += "<text class=\"y-label\" x=\"22\" y=\"" + px(ymid) + "\" font-size=\"13\" "
       "text-anchor=\"middle\" transform=\"rotate(-90 22 " + px(ymid) + ")\">" +
       escape(p.y_label) + "</text>\n";

  // Markers under the data.
  for (std::size_t i = 0; i < p.markers.size(); ++i) {
    auto& m = p.markers[i];
    if (!drawable(m.x, p.log_x))
      continue;
    double x = sx(m.x);
    o += "<line class=\"marker\" x1=\"" + px(x) + "\" y1=\"" + px(top) + "\" x2=\"" + px(x) +
         "\" y2=\"" + px(bottom) + "\" stroke=\"#555\" stroke-width=\"1.2\" "
         "stroke-dasharray=\"6,4\"/>\n";
    // Staggered so that labels of close markers do not overprint.
    o += "<text class=\"marker-label\" x=\"" + px(x + 4) + "\" y=\"" +
         px(top + 14 + static_cast<double>(i % 3) * 14) + "\" fill=\"#555\" font-size=\"11\">" +
         escape(m.label) + "</text>\n";
  }

  // Series. Earlier series are drawn wider, so that a curve that coincides with a later
  // one still shows as a coloured rim around it.
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    auto& s = p.series[k];
    auto c = colour(k);
    double w = 1.5 + 3.0 * std::min(1.0, static_cast<double>(p.series.size() - 1 - k) / 5);
    o += "<g class=\"series\" data-label=\"" + escape(s.label) + "\" stroke=\"" + c +
         "\" fill=\"" + c + "\" stroke-width=\"" + px(w) +
         "\" clip-path=\"url(#plot-area)\">\n";
    // Runs of consecutive drawable points; a non-drawable point breaks the line.
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    auto n = std::min(s.x.size(), s.y.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (drawable(s.x[i], p.log_x) && drawable(s.y[i], p.log_y))
        runs.back().emplace_back(sx(s.x[i]), sy(s.y[i]));
      else if (!runs.back().empty())
        runs.emplace_back();
    }
    for (auto& run : runs) {
      if (run.empty())
        continue;
      if (p.draw == plot_spec::style::points || run.size() == 1) {
        for (auto& [x, y] : run)
          o += "<circle cx=\"" + px(x) + "\" cy=\"" + px(y) + "\" r=\"2.6\" stroke=\"none\"/>\n";
      } else if (p.draw == plot_spec::style::lines) {
        o += "<polyline fill=\"none\" stroke-linejoin=\"round\" points=\"";
        for (std::size_t i = 0; i < run.size(); ++i)
          o += (i ? " " : "") + px(run[i].first) + "," + px(run[i].second);
        o += "\"/>\n";
      } else { // steps: hold y until the next x
        o += "<path fill=\"none\" d=\"M" + px(run[0].first) + " " +
             px(run[0].second);
        for (std::size_t i = 1; i < run.size(); ++i)
          o += " H" + px(run[i].first) + " V" + px(run[i].second);
        o += "\"/>\n";
      }
    }
    o += "</g>\n";
  }
  if (!any)
    o += "<text class=\"no-data\" x=\"" + px((left + right) / 2) + "\" y=\"" + px(ymid) +
         "\" font-size=\"14\" fill=\"#999\" text-anchor=\"middle\">no data</text>\n";

  // Legend.
  o += "<g class=\"legend\">\n";
  for (std::size_t k = 0; k < p.series.size(); ++k) {
    double y = top + 8 + static_cast<double>(k) * 18;
    auto c = colour(k);
    if (p.draw == plot_spec::style::points)
      o += "<circle cx=\"" + px(legend_x + 11) + "\" cy=\"" + px(y) + "\" r=\"3.5\" fill=\"" +
           c + "\"/>\n";
    else
      o += line(legend_x, y, legend_x + 22, y, " stroke=\"" + c + "\" stroke-width=\"2.5\"");
    o += "<text class=\"legend-label\" x=\"" + px(legend_x + 28) + "\" y=\"" + px(y + 4) +
         "\">" + escape(p.series[k].label) + "</text>\n";
  }
  o += "</g>\n";
  o += "</svg>\n";
  return o;
}

std::optional<std::string> write_svg(const std::string& path, const plot_spec& p) {
  if (path.empty())
    return std::string{"cannot write SVG: empty file name"};
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty())
    std::filesystem::create_directories(dir, ec);
  if (ec)
    return "cannot write " + path + ": " + ec.message();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return "cannot write " + path + ": " + std::strerror(errno);
  out << render_svg(p);
  out.close();
  if (!out)
    return "cannot write " + path + ": write failed";
  return std::nullopt;
}

} // namespace banyan::cli

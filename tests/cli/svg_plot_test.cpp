// svg_plot: the SVG is well-formed XML (balanced tags, escaped text), ticks are nice
// numbers, log axes place decades evenly, legends list every series, NaN breaks lines.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "svg_plot.hpp"

using namespace banyan::cli;

namespace {

/// One element of the parsed document: its name, attributes (still escaped) and the
/// text directly inside it (still escaped).
struct element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;
};

/// A small XML reader for what render_svg writes: fails the test when tags do not
/// balance, a '<' or a bare '&' appears in text or attributes, or an attribute is
/// repeated. Returns the elements in document order.
std::vector<element> parse(const std::string& doc) {
  std::vector<element> out;
  std::vector<std::size_t> open; // indices into out
  std::size_t i = 0;
  auto check_entities = [](const std::string& s) {
    for (std::size_t k = 0; k < s.size(); ++k) {
      BOOST_REQUIRE_MESSAGE(s[k] != '<', "raw '<' in: " << s);
      if (s[k] == '&') {
        auto semi = s.find(';', k);
        BOOST_REQUIRE(semi != std::string::npos);
        auto ent = s.substr(k, semi - k + 1);
        BOOST_REQUIRE_MESSAGE(ent == "&amp;" || ent == "&lt;" || ent == "&gt;" ||
                                ent == "&quot;" || ent == "&apos;",
                              "bad entity " << ent);
      }
    }
  };
  while (i < doc.size()) {
    auto lt = doc.find('<', i);
    std::string text = doc.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    check_entities(text);
    if (!open.empty())
      out[open.back()].text += text;
    else
      BOOST_REQUIRE_MESSAGE(text.find_first_not_of(" \n\t\r") == std::string::npos,
                            "text outside the root element: " << text);
    if (lt == std::string::npos)
      break;
    auto gt = doc.find('>', lt);
    BOOST_REQUIRE(gt != std::string::npos);
    std::string tag = doc.substr(lt + 1, gt - lt - 1);
    i = gt + 1;
    if (tag.rfind("?xml", 0) == 0) {
      BOOST_REQUIRE_EQUAL(lt, 0u);
      continue;
    }
    if (tag[0] == '/') {
      BOOST_REQUIRE_MESSAGE(!open.empty(), "closing tag without opening: " << tag);
      BOOST_REQUIRE_EQUAL(out[open.back()].name, tag.substr(1));
      open.pop_back();
      if (open.empty())
        BOOST_REQUIRE_MESSAGE(doc.find_first_not_of(" \n", i) == std::string::npos,
                              "content after the root element");
      continue;
    }
    bool self_closing = tag.back() == '/';
    if (self_closing)
      tag.pop_back();
    element e;
    std::size_t k = tag.find_first_of(" \n");
    e.name = tag.substr(0, k);
    while (k != std::string::npos && k < tag.size()) {
      k = tag.find_first_not_of(" \n", k);
      if (k == std::string::npos)
        break;
      auto eq = tag.find('=', k);
      BOOST_REQUIRE(eq != std::string::npos && tag[eq + 1] == '"');
      auto close = tag.find('"', eq + 2);
      BOOST_REQUIRE(close != std::string::npos);
      auto name = tag.substr(k, eq - k);
      auto value = tag.substr(eq + 2, close - eq - 2);
      check_entities(value);
      BOOST_REQUIRE_MESSAGE(e.attrs.emplace(name, value).second, "repeated attribute " << name);
      k = close + 1;
    }
    BOOST_REQUIRE_MESSAGE(!e.name.empty(), "empty tag");
    BOOST_REQUIRE_MESSAGE(!(open.empty() && !out.empty()), "second root element");
    out.push_back(e);
    if (!self_closing)
      open.push_back(out.size() - 1);
  }
  BOOST_REQUIRE_MESSAGE(open.empty(), "unclosed element");
  BOOST_REQUIRE(!out.empty());
  BOOST_REQUIRE_EQUAL(out.front().name, "svg");
  return out;
}

std::vector<const element*> with_class(const std::vector<element>& doc, const std::string& c) {
  std::vector<const element*> r;
  for (auto& e : doc) {
    auto it = e.attrs.find("class");
    if (it != e.attrs.end() && it->second == c)
      r.push_back(&e);
  }
  return r;
}

std::vector<std::string> texts(const std::vector<const element*>& es) {
  std::vector<std::string> r;
  for (auto* e : es)
    r.push_back(e->text);
  return r;
}

double num(const element& e, const std::string& attr) {
  auto it = e.attrs.find(attr);
  BOOST_REQUIRE_MESSAGE(it != e.attrs.end(), "no attribute " << attr << " on " << e.name);
  return std::stod(it->second);
}

/// The x (or y) position of the tick labelled `label`.
double tick_pos(const std::vector<element>& doc, const std::string& cls,
                const std::string& label, const std::string& attr) {
  for (auto* e : with_class(doc, cls))
    if (e->text == label)
      return num(*e, attr);
  BOOST_FAIL("no tick labelled " << label);
  return 0;
}

/// The elements of the `series` group labelled `label` (up to its closing tag: they
/// follow it in document order until the next group).
std::vector<const element*> series_parts(const std::vector<element>& doc,
                                         const std::string& label) {
  std::vector<const element*> r;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    auto c = doc[i].attrs.find("class");
    auto l = doc[i].attrs.find("data-label");
    if (c == doc[i].attrs.end() || c->second != "series" || l == doc[i].attrs.end() ||
        l->second != label)
      continue;
    for (std::size_t j = i + 1; j < doc.size() && !doc[j].attrs.count("class"); ++j)
      r.push_back(&doc[j]);
  }
  return r;
}

plot_spec line(std::vector<double> x, std::vector<double> y) {
  plot_spec p;
  p.title = "t";
  p.series.push_back({"s", std::move(x), std::move(y)});
  return p;
}

} // namespace

BOOST_AUTO_TEST_CASE(linear_ticks_are_nice_numbers_covering_the_data) {
  auto doc = parse(render_svg(line({0, 10}, {0, 100})));
  BOOST_TEST(texts(with_class(doc, "tick-x")) ==
               (std::vector<std::string>{"0", "2", "4", "6", "8", "10"}),
             boost::test_tools::per_element());
  BOOST_TEST(texts(with_class(doc, "tick-y")) ==
               (std::vector<std::string>{"0", "20", "40", "60", "80", "100"}),
             boost::test_tools::per_element());
  // Evenly spaced, increasing to the right and upwards.
  double x0 = tick_pos(doc, "tick-x", "0", "x"), x2 = tick_pos(doc, "tick-x", "2", "x");
  double x10 = tick_pos(doc, "tick-x", "10", "x");
  BOOST_TEST(x2 > x0);
  BOOST_TEST(x10 - x0 == 5 * (x2 - x0), boost::test_tools::tolerance(1e-3));
  BOOST_TEST(tick_pos(doc, "tick-y", "100", "y") < tick_pos(doc, "tick-y", "0", "y"));

  // Fractional and offset ranges: the multiples of the step inside the data's range
  // (plus a little room), with enough decimals.
  doc = parse(render_svg(line({0.33, 0.87}, {-3.2, 41})));
  BOOST_TEST(texts(with_class(doc, "tick-x")) ==
               (std::vector<std::string>{"0.4", "0.5", "0.6", "0.7", "0.8"}),
             boost::test_tools::per_element());
  BOOST_TEST(texts(with_class(doc, "tick-y")) ==
               (std::vector<std::string>{"0", "10", "20", "30", "40"}),
             boost::test_tools::per_element());
  // The data stays inside the frame.
  auto frame = with_class(doc, "frame");
  BOOST_REQUIRE_EQUAL(frame.size(), 1u);
  std::istringstream pts(series_parts(doc, "s").at(0)->attrs.at("points"));
  std::string pt;
  while (pts >> pt) {
    double x = std::stod(pt.substr(0, pt.find(','))), y = std::stod(pt.substr(pt.find(',') + 1));
    BOOST_TEST(x > num(*frame[0], "x"));
    BOOST_TEST(x < num(*frame[0], "x") + num(*frame[0], "width"));
    BOOST_TEST(y > num(*frame[0], "y"));
    BOOST_TEST(y < num(*frame[0], "y") + num(*frame[0], "height"));
  }
}

BOOST_AUTO_TEST_CASE(positive_data_close_to_zero_is_drawn_from_zero) {
  auto doc = parse(render_svg(line({0, 1, 2}, {21, 126, 90})));
  auto y = texts(with_class(doc, "tick-y"));
  BOOST_REQUIRE(!y.empty());
  BOOST_TEST(y.front() == "0");
  // Far from zero, the axis stays on the data.
  doc = parse(render_svg(line({0, 1, 2}, {1000, 1010, 1005})));
  y = texts(with_class(doc, "tick-y"));
  BOOST_REQUIRE(!y.empty());
  BOOST_TEST(std::stod(y.front()) >= 1000);
}

BOOST_AUTO_TEST_CASE(a_constant_series_still_gets_a_range) {
  auto doc = parse(render_svg(line({1, 2, 3}, {5, 5, 5})));
  auto y = texts(with_class(doc, "tick-y"));
  BOOST_REQUIRE_GE(y.size(), 2u);
  BOOST_TEST(std::stod(y.front()) < 5);
  BOOST_TEST(std::stod(y.back()) > 5);
}

BOOST_AUTO_TEST_CASE(log_axes_place_decades_evenly) {
  auto p = line({1, 30, 1000}, {0.02, 1, 50});
  p.log_x = true;
  p.log_y = true;
  auto doc = parse(render_svg(p));
  BOOST_TEST(texts(with_class(doc, "tick-x")) ==
               (std::vector<std::string>{"1", "10", "100", "1000"}),
             boost::test_tools::per_element());
  BOOST_TEST(texts(with_class(doc, "tick-y")) ==
               (std::vector<std::string>{"0.01", "0.1", "1", "10", "100"}),
             boost::test_tools::per_element());
  double x1 = tick_pos(doc, "tick-x", "1", "x"), x10 = tick_pos(doc, "tick-x", "10", "x");
  double x100 = tick_pos(doc, "tick-x", "100", "x");
  BOOST_TEST(x10 - x1 > 10);
  BOOST_TEST(x100 - x10 == x10 - x1, boost::test_tools::tolerance(1e-3));

  // The point x=30 sits log10(30) decades right of 1.
  auto parts = series_parts(doc, "s");
  BOOST_REQUIRE_EQUAL(parts.size(), 1u);
  BOOST_REQUIRE_EQUAL(parts[0]->name, "polyline");
  std::istringstream pts(parts[0]->attrs.at("points"));
  std::vector<double> xs;
  std::string pt;
  while (pts >> pt)
    xs.push_back(std::stod(pt.substr(0, pt.find(','))));
  BOOST_REQUIRE_EQUAL(xs.size(), 3u);
  BOOST_TEST(xs[1] == x1 + std::log10(30.0) * (x10 - x1), boost::test_tools::tolerance(1e-3));

  // Non-positive values cannot be drawn on a log axis; they break the line.
  p = line({1, 0, 10, 100}, {1, 1, -1, 3});
  p.log_x = p.log_y = true;
  doc = parse(render_svg(p));
  parts = series_parts(doc, "s");
  BOOST_REQUIRE_EQUAL(parts.size(), 2u); // two lone points, drawn as dots
  BOOST_TEST(parts[0]->name == "circle");
  BOOST_TEST(parts[1]->name == "circle");
}

BOOST_AUTO_TEST_CASE(legend_lists_every_series_with_distinct_colours_and_escaped_labels) {
  plot_spec p;
  p.title = "Fig. <6> & \"more\"";
  p.x_label = "x's";
  p.y_label = "ms";
  for (int k = 0; k < 14; ++k)
    p.series.push_back({"algo " + std::to_string(k), {0, 1}, {double(k), double(k + 1)}});
  p.series[3].label = "a<b & c>d";
  auto doc = parse(render_svg(p));
  auto legend = texts(with_class(doc, "legend-label"));
  BOOST_REQUIRE_EQUAL(legend.size(), 14u);
  BOOST_TEST(legend[0] == "algo 0");
  BOOST_TEST(legend[3] == "a&lt;b &amp; c&gt;d");
  BOOST_TEST(texts(with_class(doc, "title"))[0] == "Fig. &lt;6&gt; &amp; &quot;more&quot;");
  BOOST_TEST(texts(with_class(doc, "x-label"))[0] == "x&apos;s");
  std::set<std::string> colours;
  for (auto* g : with_class(doc, "series"))
    colours.insert(g->attrs.at("stroke"));
  BOOST_TEST(colours.size() == 14u);
}

BOOST_AUTO_TEST_CASE(nan_breaks_a_line_and_empty_series_are_only_listed) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  plot_spec p;
  p.series.push_back({"gappy", {0, 1, 2, 3, 4, 5}, {1, 2, nan, 4, 5, 6}});
  p.series.push_back({"empty", {}, {}});
  p.series.push_back({"all missing", {0, 1}, {nan, nan}});
  auto doc = parse(render_svg(p));
  auto gappy = series_parts(doc, "gappy");
  BOOST_REQUIRE_EQUAL(gappy.size(), 2u);
  BOOST_TEST(gappy[0]->name == "polyline");
  BOOST_TEST(gappy[1]->name == "polyline");
  BOOST_TEST(series_parts(doc, "empty").empty());
  BOOST_TEST(series_parts(doc, "all missing").empty());
  BOOST_TEST(with_class(doc, "legend-label").size() == 3u);
  BOOST_TEST(with_class(doc, "no-data").empty());
  for (auto& e : doc)
    for (auto& [k, v] : e.attrs)
      BOOST_CHECK_MESSAGE(v.find("nan") == std::string::npos, k << "=" << v);
}

BOOST_AUTO_TEST_CASE(nothing_to_draw_says_so) {
  plot_spec p;
  p.title = "empty";
  auto doc = parse(render_svg(p));
  BOOST_TEST(with_class(doc, "no-data").size() == 1u);
  BOOST_TEST(with_class(doc, "tick-x").size() >= 2u);
  p.log_x = p.log_y = true;
  p.series.push_back({"zeros", {0, 0}, {0, 0}});
  doc = parse(render_svg(p));
  BOOST_TEST(with_class(doc, "no-data").size() == 1u);
}

BOOST_AUTO_TEST_CASE(markers_are_dashed_vertical_lines_with_labels) {
  auto p = line({0, 100}, {0, 1});
  p.markers.push_back({20, "half leave"});
  p.markers.push_back({150, "rejoin <all>"}); // beyond the data: the axis grows to show it
  auto doc = parse(render_svg(p));
  auto lines = with_class(doc, "marker");
  BOOST_REQUIRE_EQUAL(lines.size(), 2u);
  for (auto* l : lines) {
    BOOST_TEST(l->attrs.count("stroke-dasharray") == 1u);
    BOOST_TEST(num(*l, "x1") == num(*l, "x2"));
    BOOST_TEST(num(*l, "y1") != num(*l, "y2"));
  }
  BOOST_TEST(texts(with_class(doc, "marker-label")) ==
               (std::vector<std::string>{"half leave", "rejoin &lt;all&gt;"}),
             boost::test_tools::per_element());
  double x0 = tick_pos(doc, "tick-x", "0", "x");
  double x100 = tick_pos(doc, "tick-x", "100", "x");
  BOOST_TEST(num(*lines[0], "x1") == x0 + 0.2 * (x100 - x0), boost::test_tools::tolerance(1e-3));
  BOOST_TEST(texts(with_class(doc, "tick-x")).back() == "150");
}

BOOST_AUTO_TEST_CASE(steps_and_points_styles) {
  auto p = line({0, 1, 2}, {3, 1, 2});
  p.draw = plot_spec::style::steps;
  auto doc = parse(render_svg(p));
  auto parts = series_parts(doc, "s");
  BOOST_REQUIRE_EQUAL(parts.size(), 1u);
  BOOST_REQUIRE_EQUAL(parts[0]->name, "path");
  auto d = parts[0]->attrs.at("d");
  // M x0 y0, then for each next point: horizontal to its x, vertical to its y.
  BOOST_TEST(d.rfind("M", 0) == 0u);
  BOOST_TEST(std::count(d.begin(), d.end(), 'H') == 2);
  BOOST_TEST(std::count(d.begin(), d.end(), 'V') == 2);

  p.draw = plot_spec::style::points;
  doc = parse(render_svg(p));
  parts = series_parts(doc, "s");
  BOOST_TEST(parts.size() == 3u);
  for (auto* e : parts)
    BOOST_TEST(e->name == "circle");
}

BOOST_AUTO_TEST_CASE(write_svg_writes_the_rendering_or_says_why_not) {
  auto p = line({0, 1}, {0, 1});
  auto dir = std::filesystem::temp_directory_path() /
             ("banyan_svg_plot_test_" + std::to_string(::getpid()));
  auto file = (dir / "sub" / "plot.svg").string();
  auto err = write_svg(file, p);
  BOOST_REQUIRE_MESSAGE(!err, *err);
  std::ifstream in(file);
  std::stringstream got;
  got << in.rdbuf();
  BOOST_TEST(got.str() == render_svg(p));
  // A directory in the way: an error message of one line that names the file.
  auto bad = (dir / "sub" / "plot.svg" / "x.svg").string();
  err = write_svg(bad, p);
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST(err->find(bad) != std::string::npos);
  BOOST_TEST(err->find('\n') == std::string::npos);
  BOOST_TEST(write_svg("", p).has_value());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(rendering_is_deterministic) {
  auto p = line({0, 1, 2}, {0.5, 0.25, 0.125});
  p.markers.push_back({1, "m"});
  BOOST_TEST(render_svg(p) == render_svg(p));
}

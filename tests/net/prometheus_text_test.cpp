// The Prometheus text format: HELP and TYPE lines, samples with labels, escaping, values.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "banyan/net/prometheus_text.hpp"

namespace net = banyan::net;

BOOST_AUTO_TEST_CASE(families_render_with_help_type_and_labelled_samples) {
  std::vector<net::metric_family> fams;
  fams.push_back({"banyan_members", "Members as this node knows them.", net::metric_family::type::gauge,
                  {{{}, 3}}});
  fams.push_back({"banyan_collectives_total",
                  "Collective operations, by kind and outcome.",
                  net::metric_family::type::counter,
                  {{{{"kind", "broadcast"}, {"outcome", "started"}}, 2},
                   {{{"kind", "broadcast"}, {"outcome", "completed"}}, 2},
                   {{{"kind", "reduce"}, {"outcome", "failed"}}, 0}}});
  fams.push_back({"banyan_empty", "No samples yet.", net::metric_family::type::counter, {}});
  const std::string want =
      "# HELP banyan_members Members as this node knows them.\n"
      "# TYPE banyan_members gauge\n"
      "banyan_members 3\n"
      "# HELP banyan_collectives_total Collective operations, by kind and outcome.\n"
      "# TYPE banyan_collectives_total counter\n"
      "banyan_collectives_total{kind=\"broadcast\",outcome=\"started\"} 2\n"
      "banyan_collectives_total{kind=\"broadcast\",outcome=\"completed\"} 2\n"
      "banyan_collectives_total{kind=\"reduce\",outcome=\"failed\"} 0\n"
      "# HELP banyan_empty No samples yet.\n"
      "# TYPE banyan_empty counter\n";
  BOOST_TEST(net::render_prometheus(fams) == want);
}

BOOST_AUTO_TEST_CASE(label_values_and_help_are_escaped) {
  BOOST_TEST(net::escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  BOOST_TEST(net::escape_help("x\\y\nz \"q\"") == "x\\\\y\\nz \"q\"");
  std::vector<net::metric_family> fams{
      {"m", "line one\nline two", net::metric_family::type::gauge, {{{{"addr", "\"[::1]:80\"\n"}}, 1}}}};
  BOOST_TEST(net::render_prometheus(fams)
             == "# HELP m line one\\nline two\n# TYPE m gauge\nm{addr=\"\\\"[::1]:80\\\"\\n\"} 1\n");
}

BOOST_AUTO_TEST_CASE(values_are_exact_integers_shortest_decimals_and_special_values) {
  BOOST_TEST(net::format_value(0) == "0");
  BOOST_TEST(net::format_value(42) == "42");
  BOOST_TEST(net::format_value(-7) == "-7");
  BOOST_TEST(net::format_value(9007199254740992.0) == "9007199254740992");
  BOOST_TEST(net::format_value(0.0125) == "0.0125");
  BOOST_TEST(net::format_value(0.1) == "0.1");
  BOOST_TEST(net::format_value(1e20) == "1e+20");
  BOOST_TEST(std::stod(net::format_value(1.0 / 3)) == 1.0 / 3);
  BOOST_TEST(net::format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  BOOST_TEST(net::format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  BOOST_TEST(net::format_value(std::nan("")) == "NaN");
}

BOOST_AUTO_TEST_CASE(names_are_checked_and_a_bad_family_is_left_out_with_a_comment) {
  BOOST_TEST(net::valid_metric_name("banyan_bytes_total"));
  BOOST_TEST(net::valid_metric_name("a:b_c9"));
  BOOST_TEST(!net::valid_metric_name("9lives"));
  BOOST_TEST(!net::valid_metric_name("has-dash"));
  BOOST_TEST(!net::valid_metric_name(""));
  BOOST_TEST(net::valid_label_name("kind"));
  BOOST_TEST(!net::valid_label_name("__reserved"));
  BOOST_TEST(!net::valid_label_name("a:b"));
  std::vector<net::metric_family> fams{
      {"bad-name", "x", net::metric_family::type::gauge, {{{}, 1}}},
      {"good", "y", net::metric_family::type::gauge, {{{{"bad label", "v"}}, 1}}},
      {"fine", "z", net::metric_family::type::gauge, {{{}, 5}}}};
  BOOST_TEST(net::render_prometheus(fams)
             == "# invalid metric family \"bad-name\" left out\n"
                "# invalid metric family \"good\" left out\n"
                "# HELP fine z\n# TYPE fine gauge\nfine 5\n");
}

// `banyan bench suite --generated 2 --quick`: runs to the end on two small generated
// topologies and writes well-formed JSON in which every ratio is a finite positive
// number, no measurement beats its oracles (the tree ceiling's included), and the summary
// names every metric.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#ifdef BANYAN_CLI_PATH

BOOST_AUTO_TEST_SUITE(bench_suite)

BOOST_AUTO_TEST_CASE(quick_suite_writes_finite_positive_ratios) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("banyan-suite-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto json = (dir / "suite.json").string();
  const auto plot = (dir / "suite.svg").string();
  const std::string cmd = std::string(BANYAN_CLI_PATH) +
                          " bench suite --generated 2 --quick -q --json " + json + " --plot " +
                          plot + " > " + (dir / "out.txt").string();
  const int rc = std::system(cmd.c_str());
  BOOST_CHECK_EQUAL(rc, 0);
  std::ifstream in(json);
  BOOST_REQUIRE(in);
  nlohmann::json j;
  BOOST_REQUIRE_NO_THROW(j = nlohmann::json::parse(in));
  BOOST_CHECK_EQUAL(j.at("experiment"), "suite");
  const auto& tops = j.at("topologies");
  BOOST_REQUIRE_EQUAL(tops.size(), 2u);
  std::size_t ratios = 0;
  for (const auto& t : tops) {
    BOOST_TEST_CONTEXT(t.at("topology").get<std::string>()) {
      BOOST_CHECK(t.at("problems").empty());
      const auto& ms = t.at("metrics");
      BOOST_REQUIRE_EQUAL(ms.size(), 5u);
      for (const auto& m : ms)
        for (const char* key : {"vs_static", "vs_oracle", "vs_tree_oracle"}) {
          if (!m.contains(key))
            continue;
          BOOST_TEST_CONTEXT(m.at("metric").get<std::string>() << " " << key) {
            BOOST_REQUIRE(m.at(key).is_number());
            const double v = m.at(key).get<double>();
            BOOST_CHECK(std::isfinite(v));
            BOOST_CHECK_GT(v, 0.0);
            if (std::string(key) != "vs_static") // the oracles are bounds
              BOOST_CHECK_GE(v, 1 - 1e-9);
            if (std::string(key) == "vs_tree_oracle") // one tree: never above max flow
              BOOST_CHECK_LE(v, m.at("vs_oracle").get<double>() * (1 + 1e-9));
            ++ratios;
          }
        }
    }
  }
  // Churn has no static reference; the long broadcast and reduction have a tree oracle.
  BOOST_CHECK_EQUAL(ratios, 2u * 11u);
  for (const char* m : {"1B root 0", "1B small", "long bcast", "long reduce", "churn"})
    BOOST_CHECK(j.at("summary").contains(m));
  BOOST_CHECK(std::filesystem::file_size(plot) > 0);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

#endif

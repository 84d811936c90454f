// bench_common: the options every `banyan bench` experiment takes, their errors, and
// forming a cluster (virtual time, a small topology).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "bench_common.hpp"
#include "tree_report.hpp"

using namespace banyan;
using namespace banyan::cli;

namespace {

/// Parses `args` (after the program name) with the bench options; the parse error's
/// message, or nothing.
std::optional<std::string> parse(bench_options& opt, std::vector<std::string> args) {
  CLI::App app{"test"};
  add_bench_options(app, opt);
  std::vector<const char*> argv{"bench"};
  for (auto& a : args)
    argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::ParseError& e) {
    return std::string{e.what()};
  }
  return std::nullopt;
}

bench_options valid() {
  bench_options o;
  o.topology = "tiny-2c8";
  o.verbose = false;
  return o;
}

} // namespace

BOOST_AUTO_TEST_CASE(options_parse_with_defaults) {
  bench_options opt;
  BOOST_REQUIRE(!parse(opt, {"--topology", "tiny-2c8"}));
  BOOST_TEST(opt.topology == "tiny-2c8");
  BOOST_TEST(opt.seed == 1u);
  BOOST_TEST(opt.clock == "virtual");
  BOOST_TEST(opt.json_path.empty());
  BOOST_TEST(opt.plot_path.empty());
  BOOST_TEST(opt.verbose);
  BOOST_TEST(!check(opt));
  BOOST_TEST((clock_of(opt) == actors::clock_mode::virtual_time));

  bench_options all;
  BOOST_REQUIRE(!parse(all, {"--topology", "paper-3c201", "--seed", "7", "--clock", "real",
                             "--json", "r.json", "--plot", "r.svg", "-q"}));
  BOOST_TEST(all.seed == 7u);
  BOOST_TEST(!check(all));
  BOOST_TEST((clock_of(all) == actors::clock_mode::real_time));
  BOOST_TEST(all.json_path == "r.json");
  BOOST_TEST(all.plot_path == "r.svg");
  BOOST_TEST(!all.verbose);
}

BOOST_AUTO_TEST_CASE(bad_options_get_one_line_errors) {
  bench_options opt;
  BOOST_TEST(parse(opt, {}).has_value()); // --topology is required
  bench_options seed;
  BOOST_TEST(parse(seed, {"--topology", "tiny-2c8", "--seed", "many"}).has_value());

  auto one_line = [](const std::optional<std::string>& e, const std::string& mentions) {
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(e->find('\n') == std::string::npos);
    BOOST_TEST(e->find(mentions) != std::string::npos, *e);
  };
  auto o = valid();
  o.clock = "wall";
  one_line(check(o), "'wall'");
  o = valid();
  o.plot_path = "fig.png";
  one_line(check(o), "fig.png");
  o = valid();
  o.plot_path = o.json_path = "same.svg";
  one_line(check(o), "same file");
  o = valid();
  o.topology.clear();
  one_line(check(o), "--topology");
}

BOOST_AUTO_TEST_CASE(form_cluster_refuses_bad_input_without_a_cluster) {
  auto o = valid();
  o.topology = "no-such-topology";
  BOOST_TEST(!form_cluster("test", o).has_value());
  o = valid();
  o.clock = "sundial";
  BOOST_TEST(!form_cluster("test", o).has_value());
}

BOOST_AUTO_TEST_CASE(form_cluster_forms_valid_trees_in_virtual_time) {
  auto o = valid();
  o.seed = 3;
  std::size_t configured = 0;
  auto run = form_cluster("test", o, [&](actors::cluster_config& cfg) {
    configured = cfg.topo.proc_count();
    BOOST_TEST(cfg.seed == 3u);
    BOOST_TEST((cfg.clock == actors::clock_mode::virtual_time));
    cfg.vnodes_per_proc = 2;
  });
  BOOST_REQUIRE(run.has_value());
  BOOST_TEST(configured == 8u);
  BOOST_TEST(run->settled);
  BOOST_TEST(run->cluster->quiet());
  BOOST_TEST(run->cluster->vnode_count() == 16u);
  BOOST_TEST(run->formed_ms > 0);
  BOOST_TEST(run->formed_ms <= to_ms(run->cluster->elapsed()));
  for (auto k : {tree_kind::latency, tree_kind::bandwidth}) {
    auto s = summarize(*run->cluster, k);
    BOOST_TEST(s.trees == 8u);
    BOOST_TEST(s.invalid == 0u, s.first_problem);
  }
  // Deterministic: the same seed forms the trees at the same emulated time.
  auto again = form_cluster("test", o, [](actors::cluster_config& cfg) {
    cfg.vnodes_per_proc = 2;
  });
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST(again->formed_ms == run->formed_ms);
}

BOOST_AUTO_TEST_CASE(writers_write_or_say_why_not) {
  auto dir = std::filesystem::temp_directory_path() /
             ("banyan_bench_common_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto json = (dir / "r.json").string();
  BOOST_TEST(write_json("test", json, nlohmann::json{{"a", 1}}));
  std::ifstream in(json);
  BOOST_TEST(nlohmann::json::parse(in)["a"] == 1);
  BOOST_TEST(write_json("test", "", nlohmann::json{})); // nothing asked, nothing to do
  BOOST_TEST(!write_json("test", (dir / "r.json" / "x.json").string(), nlohmann::json{}));
  plot_spec p;
  p.series.push_back({"s", {0, 1}, {0, 1}});
  BOOST_TEST(write_plot("test", (dir / "p.svg").string(), p));
  BOOST_TEST(std::filesystem::file_size(dir / "p.svg") > 0u);
  BOOST_TEST(!write_plot("test", (dir / "r.json" / "p.svg").string(), p));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(seed_lists_parse_and_bad_ones_say_why) {
  using seeds = std::vector<std::uint64_t>;
  auto ok = [](const std::string& t) {
    auto r = parse_seed_list(t);
    BOOST_REQUIRE_MESSAGE(std::holds_alternative<seeds>(r), t);
    return std::get<seeds>(r);
  };
  BOOST_TEST(ok("1-4") == (seeds{1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(ok("7") == (seeds{7}), boost::test_tools::per_element());
  BOOST_TEST(ok("3,5,8") == (seeds{3, 5, 8}), boost::test_tools::per_element());
  BOOST_TEST(ok("1-3,7,10-11") == (seeds{1, 2, 3, 7, 10, 11}), boost::test_tools::per_element());
  BOOST_TEST(ok("0-999").size() == 1000u);
  for (std::string bad : {"", "1-", "-3", "a", "1,,2", "3-1", "1-3,2", "1 2", "0-1000",
                          "99999999999999999999", "1.5"}) {
    auto r = parse_seed_list(bad);
    BOOST_REQUIRE_MESSAGE(std::holds_alternative<std::string>(r), "accepted '" << bad << "'");
    BOOST_TEST(std::get<std::string>(r).find("bad seed list '" + bad + "'") == 0u);
  }
}

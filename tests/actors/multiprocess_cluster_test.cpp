// `banyan cluster` (docs/cluster.md) runs its workloads over real processes and writes
// JSON, tears everything down on SIGINT and on bad input, and runs in network namespaces
// where the machine allows them.

#include <boost/test/unit_test.hpp>

#include "multiprocess.hpp"

#ifdef BANYAN_CLI_PATH

using namespace banyan;
using namespace std::chrono_literals;
using namespace banyan::test;


namespace {

/// Runs `banyan cluster ARGS` with stdout and stderr in `log`; its exit code within `limit`.
std::optional<int> run_cluster(cluster_fixture& f, std::vector<std::string> args, const std::string& log,
                               std::chrono::milliseconds limit, pid_t* pid_out = nullptr) {
  args.insert(args.begin(), "cluster");
  auto pid = f.spawn(args, log);
  if (pid_out)
    *pid_out = pid;
  return f.wait_exit(pid, limit);
}

/// The pids the cluster's nodes logged ("listening on ... (pid N)") in `dir`.
std::vector<pid_t> node_pids(const std::string& dir) {
  std::vector<pid_t> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    auto text = slurp(e.path().string());
    auto at = text.find("(pid ");
    if (e.path().filename().string().rfind("node-", 0) == 0 && at != std::string::npos)
      out.push_back(static_cast<pid_t>(std::stol(text.substr(at + 5))));
  }
  return out;
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(cluster_runs_the_workloads_and_writes_json, cluster_fixture) {
  auto json_path = dir + "/cluster.json";
  auto log = dir + "/cluster.log";
  auto code = run_cluster(*this,
                          {"--procs", "3", "--workload",
                           "latency,bandwidth,reduce,churn,overhead,allreduce,barrier,allgather",
                           "--reps", "2", "--sizes", "65536,1048576", "--reduce-sizes", "4,40000",
                           "--allreduce-sizes", "4,40000", "--allgather-sizes", "1024",
                           "--leave-at", "800", "--rejoin-at", "1600", "--churn-for", "2500",
                           "--json", json_path, "--plot-dir", dir + "/plots"},
                          log, 90s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "banyan cluster did not finish: " << slurp(log));
  BOOST_TEST(*code == 0, slurp(log));
  auto j = nlohmann::json::parse(slurp(json_path), nullptr, false);
  BOOST_REQUIRE_MESSAGE(!j.is_discarded(), slurp(json_path));
  BOOST_TEST(j.at("procs").get<int>() == 3);
  auto& lat = j.at("bcast-latency").at("results").at(0);
  BOOST_TEST(lat.at("algorithm").get<std::string>() == "dynamic");
  BOOST_TEST(lat.at("complete").get<bool>());
  BOOST_TEST(lat.at("per_proc_ms").size() == 3u);
  BOOST_TEST(lat.at("completion_ms").get<double>() > 0);
  BOOST_TEST(lat.at("acked_ms").get<double>() >= lat.at("completion_ms").get<double>() * 0.5);
  auto& bw = j.at("bcast-bandwidth").at("results");
  BOOST_REQUIRE(bw.size() == 2u);
  for (auto& r : bw) {
    BOOST_TEST(r.at("complete").get<bool>());
    BOOST_TEST(r.at("bandwidth_MBps").get<double>() > 0);
  }
  auto& red = j.at("reduce").at("results");
  BOOST_REQUIRE(red.size() == 2u);
  for (auto& r : red)
    BOOST_TEST(r.at("ok").get<bool>());
  for (auto name : {"allreduce", "barrier", "allgather"}) {
    auto& rs = j.at(name).at("results");
    BOOST_REQUIRE_MESSAGE(rs.size() == (std::string(name) == "allreduce" ? 2u : 1u), name);
    for (auto& r : rs) {
      BOOST_TEST(r.at("ok").get<bool>(), name);
      BOOST_TEST(r.at("runs_ms").size() == 2u, name);
      BOOST_TEST(r.at("completion_ms").get<double>() >= r.at("first_ms").get<double>(), name);
    }
  }
  auto& churn = j.at("churn");
  BOOST_TEST(churn.at("lost").get<int>() == 0);
  BOOST_TEST(churn.at("duplicates").get<int>() == 0);
  BOOST_TEST(churn.at("deliveries").get<int>() == churn.at("deliveries_expected").get<int>());
  BOOST_TEST(churn.at("deliveries").get<int>() > 0);
  BOOST_TEST(j.at("overhead").at("overhead_ms").get<double>() > 0);
  // --plot-dir: a picture of each workload that has one, its points from the JSON.
  for (auto name : {"latency.svg", "bandwidth.svg", "churn.svg"}) {
    auto svg = slurp(dir + "/plots/" + name);
    BOOST_TEST(svg.rfind("<?xml", 0) == 0u, name);
    BOOST_TEST(svg.find("</svg>") != std::string::npos, name);
    BOOST_TEST(svg.find(">banyan</text>") != std::string::npos, name); // the legend
  }
  BOOST_TEST(slurp(dir + "/plots/churn.svg").find(">leave</text>") != std::string::npos);
  // Its temporary directory is gone (nothing kept on success).
  auto text = slurp(log);
  auto at = text.find("logs in ");
  BOOST_REQUIRE(at != std::string::npos);
  auto tmp = text.substr(at + 8, text.find(')', at) - at - 8);
  BOOST_TEST(!std::filesystem::exists(tmp), tmp);
}

BOOST_FIXTURE_TEST_CASE(cluster_tears_everything_down_on_sigint_and_on_bad_input, cluster_fixture) {
  auto log = dir + "/cluster.log";
  auto pid = spawn({"cluster", "--procs", "4", "--workload", "churn", "--churn-for", "60000",
                    "--leave-at", "50000", "--rejoin-at", "55000"},
                   log);
  BOOST_REQUIRE_MESSAGE(poll_until(30s, [&] { return slurp(log).find("churn: 4 MiB") != std::string::npos; }),
                        "the cluster did not get to its workload: " << slurp(log));
  BOOST_REQUIRE(::kill(pid, SIGINT) == 0);
  auto code = wait_exit(pid, 15s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "banyan cluster did not stop on SIGINT: " << slurp(log));
  BOOST_TEST(*code == 130);
  auto text = slurp(log);
  auto at = text.find("logs kept in ");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, text);
  auto kept = text.substr(at + 13, text.find('\n', at) - at - 13);
  auto pids = node_pids(kept);
  BOOST_TEST(pids.size() == 4u, kept);
  for (auto p : pids)
    BOOST_TEST(!alive(p), "node process " << p << " outlived the cluster");
  std::error_code ec;
  std::filesystem::remove_all(kept, ec);

  // Bad input: one line, exit 2, nothing started.
  const std::vector<std::vector<std::string>> cases{
    {"--procs", "0"},
    {"--procs", "3", "--workload", "nonsense"},
    {"--procs", "3", "--workload", "allreduce,allgathr"},
    {"--procs", "3", "--allreduce-sizes", "6"},
    {"--procs", "3", "--vnodes-per-proc", "3", "--allgather-sizes", "1000"},
    {"--procs", "3", "--topology", "no-such-topology"},
    {"--procs", "99", "--topology", "tiny-2c8"},
    {"--procs", "3", "--sizes", "12,x"},
    {"--procs", "3", "--netns"},
  };
  int i = 0;
  for (auto& args : cases) {
    auto l = dir + "/bad-" + std::to_string(i++) + ".log";
    auto c = run_cluster(*this, args, l, 10s);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "did not exit: " << slurp(l));
    BOOST_TEST(*c == 2, args.back() << ": " << slurp(l));
    BOOST_TEST(slurp(l).find("banyan cluster: ") != std::string::npos, slurp(l));
  }
}

BOOST_FIXTURE_TEST_CASE(cluster_in_network_namespaces, cluster_fixture) {
  // Namespaces need root and a kernel that lets us have them: skip clearly otherwise.
  if (::geteuid() != 0 || std::system("ip netns add bnyprobe >/dev/null 2>&1 && ip netns del bnyprobe") != 0) {
    BOOST_TEST_MESSAGE("SKIPPED: network namespaces are not permitted here (needs root and `ip netns`)");
    BOOST_TEST(true);
    return;
  }
  auto json_path = dir + "/netns.json";
  auto log = dir + "/netns.log";
  pid_t pid = -1;
  auto code = run_cluster(*this,
                          {"--procs", "6", "--topology", "tiny-2c8", "--netns", "--workload",
                           "latency,reduce", "--reps", "2", "--reduce-sizes", "4096", "--json", json_path},
                          log, 90s, &pid);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "banyan cluster --netns did not finish: " << slurp(log));
  BOOST_TEST(*code == 0, slurp(log));
  auto j = nlohmann::json::parse(slurp(json_path), nullptr, false);
  BOOST_REQUIRE(!j.is_discarded());
  BOOST_TEST(j.at("netns").get<bool>());
  auto& lat = j.at("bcast-latency").at("results").at(0);
  BOOST_TEST(lat.at("complete").get<bool>());
  // tiny-2c8: A and B are 2 ms apart (1 ms one way): processes 4 and 5 are in B.
  BOOST_TEST(lat.at("per_proc_ms").at(4).get<double>() >= 1.0);
  BOOST_TEST(j.at("reduce").at("results").at(0).at("ok").get<bool>());
  // Nothing left behind.
  auto name = "bny" + std::to_string(pid % 100000) + "-";
  auto list = dir + "/netns-list";
  BOOST_REQUIRE(std::system(("ip netns list > " + list).c_str()) == 0);
  BOOST_TEST(slurp(list).find(name) == std::string::npos, slurp(list));
}

#else

BOOST_AUTO_TEST_CASE(skipped_without_the_cli) {
  BOOST_TEST_MESSAGE("BANYAN_CLI_PATH is not set (demos off): nothing to run");
  BOOST_TEST(true);
}

#endif

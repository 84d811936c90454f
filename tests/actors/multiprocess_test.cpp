// Real `banyan node` processes on 127.0.0.1, each on an ephemeral port it reports in its
// --json-status file: they join and form trees; one leaves on SIGTERM and the others heal;
// a SIGKILLed one is found unreachable and the others heal; a wrong secret is refused;
// bad arguments exit with 2. Every wait has a deadline, and every child is killed at the
// end of its test case, also when the test fails.

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "node_check.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::check_converged;
using banyan::test::poll_until;

#ifdef BANYAN_CLI_PATH

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A --json-status file as a node_status (nothing while it is absent or half-written).
std::optional<node_status> read_status(const std::string& path) {
  auto text = slurp(path);
  if (text.empty())
    return std::nullopt;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return std::nullopt;
  node_status s;
  s.id = j.at("id").get<proc_id>();
  s.address = j.at("address").get<std::string>();
  auto state = j.at("state").get<std::string>();
  for (auto st : {supervisor::status::idle, supervisor::status::joining, supervisor::status::member,
                  supervisor::status::leaving, supervisor::status::left})
    if (state == to_string(st))
      s.state = st;
  for (auto& m : j.at("members"))
    s.members.push_back({m.at("id").get<proc_id>(), m.at("address").get<std::string>(),
                         m.at("incarnation").get<std::uint64_t>()});
  std::vector<vnode_set::interval> runs;
  for (auto& r : j.at("own_vnode_intervals"))
    runs.push_back({r.at(0).get<vnode_id>(), r.at(1).get<vnode_id>()});
  s.own_vnodes = vnode_set::from_intervals(runs);
  for (auto& t : j.at("trees")) {
    node_tree nt;
    nt.tree.root = t.at("root").get<proc_id>();
    nt.tree.kind = t.at("kind").get<std::string>() == "latency" ? tree_kind::latency
                                                                : tree_kind::bandwidth;
    nt.parent = t.at("parent").is_null() ? no_proc : t.at("parent").get<proc_id>();
    s.trees.push_back(nt);
  }
  s.all_parented = j.at("all_parented").get<bool>();
  return s;
}

/// Children of one test case: started with fork/exec, killed (SIGKILL) and reaped when
/// the fixture goes away, whatever happened.
struct cluster_fixture {
  std::string dir;
  std::string secret;
  std::map<pid_t, std::string> running; // pid -> log file

  cluster_fixture() {
    char tmpl[] = "/tmp/banyan-multiprocess-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    secret = file("secret", "multiprocess test secret\n");
  }

  ~cluster_fixture() {
    for (auto& [pid, log] : running) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string file(const std::string& name, const std::string& content) {
    auto path = dir + "/" + name;
    std::ofstream(path) << content;
    return path;
  }

  /// Runs `banyan <args>` with stdout and stderr going to `log`.
  pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> all{BANYAN_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    BOOST_REQUIRE(fd >= 0);
    pid_t pid = ::fork();
    if (pid == 0) { // the child: only async-signal-safe calls until exec
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fd);
    BOOST_REQUIRE(pid > 0);
    running[pid] = log;
    return pid;
  }

  /// The exit code of `pid` once it exits within `limit` (-1: killed by a signal).
  std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds limit) {
    int status = 0;
    bool done = poll_until(limit, [&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
    if (!done)
      return std::nullopt;
    running.erase(pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

/// One `banyan node` process.
struct proc {
  proc_id id = no_proc;
  pid_t pid = -1;
  std::string status_file;
  std::string log_file;
  std::uint16_t port = 0;
};

proc start_node(cluster_fixture& f, proc_id id, std::vector<std::string> extra,
                const std::string& secret_file = {}) {
  proc p;
  p.id = id;
  p.status_file = f.dir + "/status-" + std::to_string(id) + ".json";
  p.log_file = f.dir + "/node-" + std::to_string(id) + ".log";
  std::vector<std::string> args{"node",          "--id",
                                std::to_string(id), "--listen",
                                "127.0.0.1:0",   "--secret-file",
                                secret_file.empty() ? f.secret : secret_file,
                                "--json-status", p.status_file};
  args.insert(args.end(), extra.begin(), extra.end());
  p.pid = f.spawn(args, p.log_file);
  std::optional<node_status> s;
  BOOST_REQUIRE_MESSAGE(poll_until(10s, [&] { return (s = read_status(p.status_file)).has_value(); }),
                        "node " << id << " wrote no status: " << slurp(p.log_file));
  auto colon = s->address.rfind(':');
  p.port = static_cast<std::uint16_t>(std::stoul(s->address.substr(colon + 1)));
  BOOST_REQUIRE(p.port != 0);
  return p;
}

std::string address_of(const proc& p) {
  return "127.0.0.1:" + std::to_string(p.port);
}

/// Waits until the processes' status files describe a converged computation.
void require_converged(const std::vector<proc>& ps, const vnode_set* all,
                       std::chrono::milliseconds limit) {
  std::optional<std::string> why;
  bool ok = poll_until(limit, [&] {
    std::vector<node_status> ss;
    for (auto& p : ps) {
      auto s = read_status(p.status_file);
      if (!s) {
        why = "node " + std::to_string(p.id) + ": no status";
        return false;
      }
      ss.push_back(*s);
    }
    why = check_converged(ss, all);
    return !why;
  });
  std::string logs;
  if (!ok)
    for (auto& p : ps)
      logs += slurp(p.log_file);
  BOOST_REQUIRE_MESSAGE(ok, "not converged: " << why.value_or("") << "\n" << logs);
}

} // namespace

BOOST_FIXTURE_TEST_CASE(processes_join_form_trees_leave_and_survive_a_kill, cluster_fixture) {
  auto t0 = std::chrono::steady_clock::now();
  const auto all = vnode_set::range(0, 1000);
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--vnodes", "0-999"}));
  // Joiners know only an address; node 4 joins through node 2 and names its id.
  for (proc_id id : {1u, 2u, 3u})
    ps.push_back(start_node(*this, id, {"--join", address_of(ps[0])}));
  ps.push_back(start_node(*this, 4, {"--join", "2@" + address_of(ps[2])}));
  require_converged(ps, &all, 20s);
  auto formed = std::chrono::steady_clock::now();
  BOOST_TEST_MESSAGE("5 processes formed their trees in "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(formed - t0).count()
                     << " ms (process start included)");

  // SIGTERM: node 1 hands its vnodes over, leaves and exits 0; the others heal.
  BOOST_REQUIRE(::kill(ps[1].pid, SIGTERM) == 0);
  auto code = wait_exit(ps[1].pid, 10s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "node 1 did not exit: " << slurp(ps[1].log_file));
  BOOST_TEST(*code == 0);
  auto log1 = slurp(ps[1].log_file);
  BOOST_TEST(log1.find("node 1: left") != std::string::npos, log1);
  auto gone = read_status(ps[1].status_file);
  BOOST_REQUIRE(gone.has_value());
  BOOST_TEST(to_string(gone->state) == std::string("left"));
  ps.erase(ps.begin() + 1);
  require_converged(ps, &all, 15s); // the vnodes all still have an owner

  // SIGKILL: node 3 vanishes without a word; the others find it unreachable and heal.
  auto victim = std::find_if(ps.begin(), ps.end(), [](const proc& p) { return p.id == 3; });
  BOOST_REQUIRE(::kill(victim->pid, SIGKILL) == 0);
  BOOST_REQUIRE(wait_exit(victim->pid, 5s).has_value());
  auto killed_at = std::chrono::steady_clock::now();
  ps.erase(victim);
  require_converged(ps, nullptr, 15s); // node 3's vnodes went with it
  BOOST_TEST_MESSAGE("healed "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - killed_at)
                            .count()
                     << " ms after the SIGKILL");
  for (auto& p : ps) {
    auto log = slurp(p.log_file);
    BOOST_TEST(log.find("member_left: 3") != std::string::npos, log);
  }

  // Everyone else stops on SIGTERM at once (leaving when someone still takes vnodes).
  for (auto& p : ps)
    BOOST_REQUIRE(::kill(p.pid, SIGTERM) == 0);
  for (auto& p : ps) {
    auto c = wait_exit(p.pid, 15s);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "node " << p.id << " did not exit: " << slurp(p.log_file));
    BOOST_TEST(*c == 0, "node " << p.id << ": " << slurp(p.log_file));
  }
}

BOOST_FIXTURE_TEST_CASE(links_shaped_after_a_topology, cluster_fixture) {
  // tiny-2c8: processors 0-3 in cluster A, 4-7 in B, 2 ms RTT and 100 Mbit/s between
  // them. The shaper delays and paces every frame; trees must still form.
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--topology", "tiny-2c8", "--site", "A"}));
  for (proc_id id : {1u, 4u, 5u})
    ps.push_back(start_node(*this, id, {"--topology", "tiny-2c8", "--join", address_of(ps[0])}));
  require_converged(ps, nullptr, 15s);
  for (auto& p : ps)
    BOOST_REQUIRE(::kill(p.pid, SIGTERM) == 0);
  for (auto& p : ps) {
    auto c = wait_exit(p.pid, 15s);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "node " << p.id << " did not exit: " << slurp(p.log_file));
    BOOST_TEST(*c == 0, "node " << p.id << ": " << slurp(p.log_file));
  }
}

BOOST_FIXTURE_TEST_CASE(a_wrong_secret_is_refused, cluster_fixture) {
  auto founder = start_node(*this, 0, {});
  auto wrong = file("wrong-secret", "not the secret\n");
  auto intruder = start_node(*this, 7, {"--join", address_of(founder)}, wrong);
  auto code = wait_exit(intruder.pid, 15s);
  auto log = slurp(intruder.log_file);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "the intruder did not give up: " << log);
  BOOST_TEST(*code == 1);
  BOOST_TEST(log.find("wrong shared secret") != std::string::npos, log);
  auto s = read_status(founder.status_file);
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST(s->members.size() == 1u);
  // (The founder cannot tell: the joiner checks the founder's proof first and hangs up.)
  BOOST_REQUIRE(::kill(founder.pid, SIGTERM) == 0);
  auto fc = wait_exit(founder.pid, 10s);
  BOOST_REQUIRE(fc.has_value());
  BOOST_TEST(*fc == 0); // the last member just stops
}

BOOST_FIXTURE_TEST_CASE(bad_arguments_exit_with_2, cluster_fixture) {
  auto empty = file("empty-secret", "");
  const std::vector<std::vector<std::string>> cases{
      {"node"},
      {"node", "--id", "x", "--listen", "127.0.0.1:0", "--secret-file", secret},
      {"node", "--id", "1", "--listen", "nowhere", "--secret-file", secret},
      {"node", "--id", "1", "--listen", "127.0.0.1:0"},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", dir + "/missing"},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", empty},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", secret, "--vnodes", "9-3"},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", secret, "--join", "x"},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", secret, "--bogus"},
      {"node", "--id", "1", "--listen", "127.0.0.1:0", "--secret-file", secret, "--site", "A"},
      {"node", "--id", "99", "--listen", "127.0.0.1:0", "--secret-file", secret, "--topology",
       "tiny-2c8"},
      {"node", "--id", "0", "--listen", "127.0.0.1:0", "--secret-file", secret, "--topology",
       "tiny-2c8", "--site", "B"},
      {"node", "--id", "0", "--listen", "127.0.0.1:0", "--secret-file", secret, "--topology",
       "no-such-topology"},
      {"node", "--id", "0", "--listen", "127.0.0.1:0", "--secret-file", secret, "--json-status",
       dir + "/no/such/dir/status.json"},
  };
  int i = 0;
  for (auto& args : cases) {
    auto log = dir + "/bad-" + std::to_string(i++) + ".log";
    auto pid = spawn(args, log);
    auto code = wait_exit(pid, 10s);
    BOOST_REQUIRE_MESSAGE(code.has_value(), "did not exit: " << slurp(log));
    auto text = slurp(log);
    BOOST_TEST(*code == 2, args.back() << ": " << text);
    BOOST_TEST(text.find("banyan node: ") != std::string::npos, text);
  }
}

#else

BOOST_AUTO_TEST_CASE(skipped_without_the_cli) {
  BOOST_TEST_MESSAGE("BANYAN_CLI_PATH is not set (demos off): nothing to run");
  BOOST_TEST(true);
}

#endif

#pragma once
// Shared by the multi-process suites (tests/actors/multiprocess*_test.cpp): real
// `banyan node` children started with fork/exec from the CLI built alongside
// (BANYAN_CLI_PATH), each killed and reaped when its test case ends, whatever happened;
// their --json-status files read back as node_status, and a wait until they describe a
// converged computation.

#ifdef BANYAN_CLI_PATH

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <atomic>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "node_check.hpp"

namespace banyan::test {

using namespace std::chrono_literals;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A --json-status file as a node_status (nothing while it is absent or half-written).
inline std::optional<node_status> read_status(const std::string& path) {
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
                         std::stoull(m.at("incarnation").get<std::string>())}); // 64-bit: a string
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

/// `name`: what its files are called after (default: its id); `listen`: its address.
inline proc start_node(cluster_fixture& f, proc_id id, std::vector<std::string> extra,
                const std::string& secret_file = {}, std::string name = {},
                const std::string& listen = "127.0.0.1:0") {
  proc p;
  p.id = id;
  if (name.empty())
    name = std::to_string(id);
  p.status_file = f.dir + "/status-" + name + ".json";
  p.log_file = f.dir + "/node-" + name + ".log";
  std::vector<std::string> args{"node",          "--id",
                                std::to_string(id), "--listen",
                                listen,          "--secret-file",
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

/// Stops every process with SIGTERM at once; each must exit cleanly.
inline void stop_all(cluster_fixture& f, const std::vector<proc>& ps) {
  for (auto& p : ps)
    BOOST_REQUIRE(::kill(p.pid, SIGTERM) == 0);
  for (auto& p : ps) {
    auto c = f.wait_exit(p.pid, 15s);
    BOOST_REQUIRE_MESSAGE(c.has_value(), "node " << p.id << " did not exit: " << slurp(p.log_file));
    BOOST_TEST(*c == 0, "node " << p.id << ": " << slurp(p.log_file));
  }
}

inline std::string address_of(const proc& p) {
  return "127.0.0.1:" + std::to_string(p.port);
}

/// Waits until the processes' status files describe a converged computation.
inline void require_converged(const std::vector<proc>& ps, const vnode_set* all,
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

} // namespace banyan::test

#endif

#include "cluster.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "banyan/core/topology.hpp"
#include "banyan/core/tree_builders.hpp"
#include "svg_plot.hpp"

namespace banyan::cli {

bool write_cluster_plots(const std::string& dir, const std::string& who, const nlohmann::json& out);

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
using json = nlohmann::json;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now().time_since_epoch())
    .count();
}

void progress(const std::string& s) {
  std::cerr << "cluster: " << s << std::endl;
}

/// The cluster could not go on (a child died, a wait timed out, a signal came).
struct cluster_failure {
  std::string what;
  int code = 1;
};

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

/// scripts/cluster next to the sources: above the executable (build-x/demos/cli/banyan),
/// or under the working directory.
std::string find_scripts(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty())
    return given;
  std::vector<fs::path> tries;
  auto exe = fs::path(self_exe()).parent_path();
  for (auto p = exe; !p.empty() && p != p.root_path(); p = p.parent_path())
    tries.push_back(p / "scripts" / "cluster");
  tries.push_back(fs::current_path() / "scripts" / "cluster");
  for (auto& t : tries)
    if (fs::exists(t / "netns.sh"))
      return t.string();
  return {};
}

std::optional<std::vector<std::uint64_t>> parse_sizes(const std::string& s) {
  std::vector<std::uint64_t> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos
        || part.size() > 12)
      return std::nullopt;
    out.push_back(std::stoull(part));
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// One `banyan node --control` child.
struct child {
  std::size_t index = 0;
  pid_t pid = -1;
  int in = -1;  ///< its stdin
  int out = -1; ///< its stdout
  std::string log;
  std::string buffer;
  bool alive = false;
  bool expected_exit = false;
  std::uint16_t port = 0;
  std::string host = "127.0.0.1";
  std::string site;
  std::string netns;
};

/// What the children said, indexed for the waits below.
struct event_index {
  std::map<std::size_t, json> ready;          ///< latest per child
  std::map<std::size_t, std::size_t> readies; ///< count per child
  std::map<std::size_t, json> status;         ///< latest per child
  std::map<std::size_t, std::size_t> statuses;
  std::map<std::size_t, std::deque<json>> started; ///< "bcast" lines, per child, in order
  std::map<std::size_t, std::deque<json>> sent;
  std::map<std::string, std::vector<std::pair<std::size_t, json>>> delivered; ///< by op
  std::map<std::string, json> acked;                                          ///< by op
  std::map<std::uint64_t, json> reduced;                                      ///< by seq
  std::map<std::uint64_t, std::set<std::size_t>> reduce_sent;
  std::map<std::size_t, std::size_t> left;
  std::map<std::size_t, std::vector<std::string>> errors;
};

class cluster_run {
public:
  explicit cluster_run(const cluster_options& opt) : opt_(opt) {}
  cluster_run(const cluster_run&) = delete;
  cluster_run& operator=(const cluster_run&) = delete;
  ~cluster_run() { teardown(); }

  int run();

private:
  // --- setup and teardown ---
  void make_dir();
  void block_signals();
  void netns_up();
  void spawn(std::size_t k, const std::vector<std::string>& contacts);
  void teardown();
  void kill_all();

  // --- the event pump ---
  /// Reads what the children wrote for at most `limit`; throws on a signal or an
  /// unexpected death.
  /// With `only` >= 0, waits for that child's output alone (the others' stays in their
  /// pipes, unread), and reads everyone's without waiting if it wrote nothing.
  void pump(std::chrono::milliseconds limit, int only = -1);
  void on_line(child& c, const std::string& line);
  /// Pumps until `done()` or `limit` (then throws, naming `what`). With `only` >= 0,
  /// pumps that child alone (see `pump`).
  template <class F>
  void wait_for(F done, std::chrono::milliseconds limit, const std::string& what, int only = -1);
  void command(std::size_t k, const std::string& line);
  /// Returns once every process answered a `status` sent now: all it was sent before
  /// has been taken.
  void sync_all();

  // --- workloads ---
  void start_all();
  void wait_converged(std::chrono::milliseconds limit);
  struct bcast_outcome {
    std::string op;
    std::int64_t t0 = 0;
    std::vector<double> per_proc_ms; ///< first delivery per process (-1: none)
    double completion_ms = 0;        ///< last vnode delivered
    double acked_ms = -1;            ///< the root had every ack (-1: acks off)
    std::size_t vnodes = 0;          ///< deliveries counted (vnodes)
    bool ok = true;                  ///< every payload checked out
  };
  /// A broadcast of `bytes` from process `root`, waited for until every vnode has it
  /// (and the acks, when on).
  bcast_outcome broadcast(std::size_t root, std::uint64_t bytes, bool wait_acks);
  json workload_latency();
  json workload_bandwidth();
  json workload_reduce();
  json workload_churn();
  json workload_overhead();

  std::string address(std::size_t k) const {
    return std::to_string(k) + "@" + children_[k]->host + ":" + std::to_string(children_[k]->port);
  }
  std::size_t total_vnodes() const { return opt_.procs * opt_.vnodes_per_proc; }
  std::string log_tail(const child& c) const;

  cluster_options opt_;
  std::optional<topology> topo_;
  std::string dir_;
  std::string secret_;
  std::string exe_;
  std::string scripts_;
  std::string netns_name_;
  bool netns_made_ = false;
  std::map<std::string, std::string> site_ip_; ///< netns: site -> its address
  std::vector<std::unique_ptr<child>> children_;
  int sfd_ = -1;
  sigset_t old_mask_{};
  bool masked_ = false;
  bool torn_down_ = false;
  bool failed_ = false;
  event_index ev_;
  std::uint64_t reduce_seq_ = 0;
};

std::string cluster_run::log_tail(const child& c) const {
  std::ifstream in(c.log);
  std::deque<std::string> lines;
  std::string l;
  while (std::getline(in, l)) {
    lines.push_back(l);
    if (lines.size() > 8)
      lines.pop_front();
  }
  std::string out;
  for (auto& x : lines)
    out += "    " + x + "\n";
  return out;
}

void cluster_run::make_dir() {
  char tmpl[] = "/tmp/banyan-cluster-XXXXXX";
  if (!::mkdtemp(tmpl))
    throw cluster_failure{"cannot create a temporary directory: " + std::string(std::strerror(errno))};
  dir_ = tmpl;
  std::random_device rd;
  std::ostringstream s;
  for (int i = 0; i < 4; ++i)
    s << std::hex << rd();
  secret_ = dir_ + "/secret";
  std::ofstream(secret_) << s.str() << "\n";
  ::chmod(secret_.c_str(), 0600);
}

void cluster_run::block_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  masked_ = true;
  sfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd_ < 0)
    throw cluster_failure{"cannot create a signalfd"};
  std::signal(SIGPIPE, SIG_IGN); // a child that died must not kill us through its stdin
}

void cluster_run::netns_up() {
  if (::geteuid() != 0)
    throw cluster_failure{"--netns needs root (network namespaces, veth links, htb)", 3};
  scripts_ = find_scripts(opt_.scripts_dir);
  if (scripts_.empty())
    throw cluster_failure{"--netns: cannot find scripts/cluster/netns.sh (use --scripts)", 3};
  netns_name_ = "bny" + std::to_string(::getpid() % 100000);
  // One namespace per site in use, shaped to the site's narrowest way out.
  std::map<std::string, double> rate_of; // bytes/s
  for (std::size_t k = 0; k < opt_.procs; ++k) {
    const auto p = static_cast<proc_id>(k);
    auto& site = topo_->groups[static_cast<std::size_t>(topo_->leaf_of(p))].name;
    double r = infinite_rate;
    for (proc_id q = 0; q < topo_->proc_count(); ++q)
      if (topo_->leaf_of(q) != topo_->leaf_of(p))
        r = std::min(r, topo_->path_bandwidth(p, q));
    auto it = rate_of.find(site);
    rate_of[site] = it == rate_of.end() ? r : std::min(it->second, r);
  }
  std::string cmd = "bash '" + scripts_ + "/netns.sh' up " + netns_name_;
  for (auto& [site, r] : rate_of) {
    auto mbit = std::isinf(r) ? 0.0 : r * 8 / 1e6;
    cmd += " " + site + ":" + std::to_string(static_cast<long long>(mbit));
  }
  cmd += " > '" + dir_ + "/netns.out' 2> '" + dir_ + "/netns.err'";
  progress("netns: " + std::to_string(rate_of.size()) + " namespaces (" + netns_name_ + "-*)");
  netns_made_ = true; // from here on, teardown runs `down` whatever happened
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream err(dir_ + "/netns.err");
    std::string line, first;
    while (std::getline(err, line))
      if (!line.empty())
        first = line;
    throw cluster_failure{"--netns: network namespaces not permitted here (" + first + ")", 3};
  }
  std::ifstream out(dir_ + "/netns.out");
  std::string site, ip;
  while (out >> site >> ip)
    site_ip_[site] = ip;
  if (site_ip_.size() != rate_of.size())
    throw cluster_failure{"--netns: netns.sh printed no address for some site", 3};
}

namespace {

/// The nodes' environment: the driver's, with glibc's huge-page tunable for malloc
/// added (`glibc.malloc.hugetlb=1`) unless GLIBC_TUNABLES already says something about
/// it. Long broadcasts cost fresh memory; the tunable cut the page faults of 64 MiB
/// broadcasts about 3x (docs/api.md). Older glibc ignores tunables it does not know.
std::vector<std::string> node_environment() {
  constexpr const char* var = "GLIBC_TUNABLES=";
  constexpr const char* hugetlb = "glibc.malloc.hugetlb";
  std::vector<std::string> env;
  bool have = false;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind(var, 0) == 0) {
      have = true;
      if (kv.find(hugetlb) == std::string::npos)
        kv += (kv.size() > std::strlen(var) ? ":" : "") + std::string(hugetlb) + "=1";
    }
    env.push_back(std::move(kv));
  }
  if (!have)
    env.push_back(std::string(var) + hugetlb + "=1");
  return env;
}

} // namespace

void cluster_run::spawn(std::size_t k, const std::vector<std::string>& contacts) {
  auto c = std::make_unique<child>();
  c->index = k;
  c->log = dir_ + "/node-" + std::to_string(k) + ".log";
  std::vector<std::string> args;
  if (topo_) {
    c->site = topo_->groups[static_cast<std::size_t>(topo_->leaf_of(static_cast<proc_id>(k)))].name;
    if (opt_.netns) {
      c->netns = netns_name_ + "-" + c->site;
      c->host = site_ip_.at(c->site);
      args = {"ip", "netns", "exec", c->netns};
    }
  }
  args.insert(args.end(), {exe_, "node", "--control", "--id", std::to_string(k), "--listen",
                           c->host + ":0", "--secret-file", secret_, "--seed",
                           std::to_string(opt_.seed * 1000003 + k)});
  const auto v = opt_.vnodes_per_proc;
  if (contacts.empty()) {
    args.insert(args.end(), {"--vnodes", "0-" + std::to_string(total_vnodes() - 1)});
  } else {
    args.insert(args.end(), {"--vnodes", std::to_string(k * v) + "-" + std::to_string(k * v + v - 1)});
    for (auto& a : contacts)
      args.insert(args.end(), {"--join", a});
  }
  if (topo_)
    args.insert(args.end(), {"--topology", opt_.topology, "--site", c->site});
  std::istringstream extra(opt_.node_args);
  for (std::string a; extra >> a;)
    args.push_back(a);

  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw cluster_failure{"pipe: " + std::string(std::strerror(errno))};
  int logfd = ::open(c->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logfd < 0)
    throw cluster_failure{"cannot write " + c->log};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto env = node_environment(); // built here: the child may only exec
  std::vector<char*> envp;
  for (auto& kv : env)
    envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  const bool use_path = opt_.netns && topo_;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) { // the child: async-signal-safe calls only until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127); // the driver is already gone
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(logfd, 2);
    if (use_path)
      ::execvpe(argv[0], argv.data(), envp.data());
    else
      ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(logfd);
  if (pid < 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    throw cluster_failure{"fork: " + std::string(std::strerror(errno))};
  }
  ::setpgid(pid, pid); // also here: no race with the kill below
  c->pid = pid;
  c->in = in_pipe[1];
  c->out = out_pipe[0];
  c->alive = true;
  ::fcntl(c->out, F_SETFL, O_NONBLOCK);
  if (children_.size() <= k)
    children_.resize(k + 1);
  children_[k] = std::move(c);
}

void cluster_run::kill_all() {
  for (auto& c : children_)
    if (c && c->pid > 0) {
      ::kill(-c->pid, SIGKILL);
      ::kill(c->pid, SIGKILL);
    }
}

void cluster_run::teardown() {
  if (torn_down_)
    return;
  torn_down_ = true;
  // `quit` first (each stops at once), then SIGKILL to whatever is left, group by group.
  for (auto& c : children_)
    if (c && c->alive && c->in >= 0) {
      c->expected_exit = true;
      static const char quit[] = "quit\n";
      [[maybe_unused]] auto n = ::write(c->in, quit, sizeof quit - 1);
    }
  auto deadline = clock_type::now() + 3s;
  for (auto& c : children_) {
    if (!c || c->pid <= 0)
      continue;
    int status = 0;
    while (::waitpid(c->pid, &status, WNOHANG) == 0 && clock_type::now() < deadline)
      ::usleep(10000);
  }
  kill_all();
  for (auto& c : children_) {
    if (!c || c->pid <= 0)
      continue;
    ::waitpid(c->pid, nullptr, 0); // SIGKILL: it goes now
    c->pid = -1;
    c->alive = false;
    if (c->in >= 0)
      ::close(c->in);
    if (c->out >= 0)
      ::close(c->out);
    c->in = c->out = -1;
  }
  if (netns_made_) {
    std::string cmd = "bash '" + scripts_ + "/netns.sh' down " + netns_name_ + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0)
      progress("netns: cleanup reported an error (check `ip netns list`)");
    netns_made_ = false;
  }
  if (sfd_ >= 0)
    ::close(sfd_);
  sfd_ = -1;
  if (masked_)
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  masked_ = false;
  if (!dir_.empty()) {
    if (failed_ || opt_.keep) {
      progress("logs kept in " + dir_);
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
}

void cluster_run::pump(std::chrono::milliseconds limit, int only) {
  std::vector<pollfd> fds;
  std::vector<child*> who;
  fds.push_back({sfd_, POLLIN, 0});
  who.push_back(nullptr);
  for (auto& c : children_)
    if (c && c->alive && (only < 0 || c->index == static_cast<std::size_t>(only))) {
      fds.push_back({c->out, POLLIN, 0});
      who.push_back(c.get());
    }
  int r = ::poll(fds.data(), fds.size(), static_cast<int>(limit.count()));
  if (r < 0 && errno != EINTR)
    throw cluster_failure{"poll: " + std::string(std::strerror(errno))};
  if (r == 0 && only >= 0) {
    pump(std::chrono::milliseconds(0)); // nothing from it: the others (a death, say)
    return;
  }
  if (fds[0].revents & POLLIN) {
    signalfd_siginfo si;
    if (::read(sfd_, &si, sizeof si) > 0)
      throw cluster_failure{"interrupted by signal " + std::to_string(si.ssi_signo), 130};
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (!fds[i].revents)
      continue;
    auto& c = *who[i];
    char chunk[65536];
    for (;;) {
      auto n = ::read(c.out, chunk, sizeof chunk);
      if (n > 0) {
        c.buffer.append(chunk, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        c.alive = false; // its stdout closed: it exited
        int status = 0;
        if (::waitpid(c.pid, &status, 0) == c.pid)
          c.pid = -1;
        if (!c.expected_exit) {
          failed_ = true;
          throw cluster_failure{"process " + std::to_string(c.index) + " exited unexpectedly ("
                                + (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                       : "code " + std::to_string(WEXITSTATUS(status)))
                                + "); its log ends:\n" + log_tail(c)};
        }
      }
      break;
    }
    std::size_t nl;
    while ((nl = c.buffer.find('\n')) != std::string::npos) {
      auto line = c.buffer.substr(0, nl);
      c.buffer.erase(0, nl + 1);
      on_line(c, line);
    }
  }
}

void cluster_run::on_line(child& c, const std::string& line) {
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ev")) {
    progress("process " + std::to_string(c.index) + " wrote a line that is not an event: " + line);
    return;
  }
  const auto ev = j["ev"].get<std::string>();
  const auto k = c.index;
  if (ev == "ready") {
    c.port = j.value("port", std::uint16_t{0});
    ev_.ready[k] = j;
    ++ev_.readies[k];
  } else if (ev == "status") {
    ev_.status[k] = j;
    ++ev_.statuses[k];
  } else if (ev == "bcast") {
    ev_.started[k].push_back(j);
  } else if (ev == "sent") {
    ev_.sent[k].push_back(j);
  } else if (ev == "delivered") {
    ev_.delivered[j.value("op", "")].emplace_back(k, j);
  } else if (ev == "acked") {
    ev_.acked[j.value("op", "")] = j;
  } else if (ev == "reduced") {
    ev_.reduced[j.value("seq", std::uint64_t{0})] = j;
  } else if (ev == "reduce_sent") {
    ev_.reduce_sent[j.value("seq", std::uint64_t{0})].insert(k);
  } else if (ev == "left") {
    ++ev_.left[k];
  } else if (ev == "error") {
    auto d = j.value("detail", "");
    progress("process " + std::to_string(k) + ": error: " + d);
    ev_.errors[k].push_back(d);
  }
}

template <class F>
void cluster_run::wait_for(F done, std::chrono::milliseconds limit, const std::string& what,
                           int only) {
  const auto deadline = clock_type::now() + limit;
  while (!done()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) {
      failed_ = true;
      throw cluster_failure{"timed out after " + std::to_string(limit.count()) + " ms waiting for "
                            + what};
    }
    pump(std::min(left, std::chrono::milliseconds(only < 0 ? 100 : 10)), only);
  }
}

void cluster_run::command(std::size_t k, const std::string& line) {
  auto& c = *children_.at(k);
  if (!c.alive)
    throw cluster_failure{"process " + std::to_string(k) + " is gone"};
  auto text = line + "\n";
  std::size_t at = 0;
  while (at < text.size()) {
    auto n = ::write(c.in, text.data() + at, text.size() - at);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      failed_ = true;
      throw cluster_failure{"cannot write to process " + std::to_string(k) + ": "
                            + std::strerror(errno)};
    }
    at += static_cast<std::size_t>(n);
  }
}

void cluster_run::sync_all() {
  std::map<std::size_t, std::size_t> before;
  for (std::size_t k = 0; k < children_.size(); ++k)
    if (children_[k] && children_[k]->alive) {
      before[k] = ev_.statuses[k];
      command(k, "status");
    }
  wait_for(
    [&] {
      for (auto& [k, n] : before)
        if (ev_.statuses[k] == n)
          return false;
      return true;
    },
    10s, "status replies");
}

void cluster_run::start_all() {
  const auto t0 = clock_type::now();
  progress("starting " + std::to_string(opt_.procs) + " processes"
           + (topo_ ? " on " + topo_->name : std::string()) + (opt_.netns ? " in namespaces" : "")
           + " (logs in " + dir_ + ")");
  spawn(0, {});
  wait_for([&] { return ev_.readies[0] > 0; }, 20s, "process 0 to found the computation");
  std::vector<std::string> contacts{address(0)};
  for (std::size_t k = 1; k < opt_.procs; ++k)
    spawn(k, contacts);
  wait_for(
    [&] {
      for (std::size_t k = 0; k < opt_.procs; ++k)
        if (!ev_.readies[k])
          return false;
      return true;
    },
    std::chrono::milliseconds(20000 + 2000 * opt_.procs), "every process to join");
  progress("all " + std::to_string(opt_.procs) + " ready after "
           + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count())
           + " ms");
}

void cluster_run::wait_converged(std::chrono::milliseconds limit) {
  const auto t0 = clock_type::now();
  std::string why = "no status yet";
  wait_for(
    [&] {
      std::map<std::size_t, std::size_t> before;
      std::vector<std::size_t> live;
      for (std::size_t k = 0; k < children_.size(); ++k)
        if (children_[k] && children_[k]->alive && !children_[k]->expected_exit) {
          before[k] = ev_.statuses[k];
          live.push_back(k);
          command(k, "status");
        }
      wait_for(
        [&] {
          for (auto k : live)
            if (ev_.statuses[k] == before[k])
              return false;
          return true;
        },
        10s, "status replies");
      std::size_t members_expected = 0;
      for (auto k : live)
        members_expected += ev_.status[k].value("state", "") == "member";
      for (auto k : live) {
        auto& s = ev_.status[k];
        if (s.value("state", "") != "member")
          continue;
        if (!s.value("all_parented", false) || s.value("busy", true)
            || s["members"].size() != members_expected) {
          why = "process " + std::to_string(k) + " still forming (" + s.dump() + ")";
          return false;
        }
      }
      return true;
    },
    limit, "the trees to converge");
  progress("trees converged after "
           + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count())
           + " ms");
  (void)why;
}

cluster_run::bcast_outcome cluster_run::broadcast(std::size_t root, std::uint64_t bytes,
                                                  bool wait_acks) {
  bcast_outcome o;
  const auto had = ev_.started[root].size();
  const auto errors = ev_.errors[root].size();
  command(root, "bcast " + std::to_string(bytes));
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  wait_for([&] { return ev_.started[root].size() > had || ev_.errors[root].size() > errors; }, limit,
           "process " + std::to_string(root) + " to start a broadcast",
           wait_acks ? static_cast<int>(root) : -1); // see below
  if (ev_.started[root].size() == had)
    throw cluster_failure{"process " + std::to_string(root) + " could not broadcast: "
                          + ev_.errors[root].back()};
  auto started = ev_.started[root].back();
  o.op = started.value("op", "");
  o.t0 = started.value("t_us", std::int64_t{0});
  const auto want = total_vnodes();
  auto count = [&] {
    std::size_t n = 0;
    for (auto& [k, j] : ev_.delivered[o.op])
      n += j.value("vnodes", std::size_t{0});
    return n;
  };
  if (wait_acks) {
    // Until the root has every ack, read the root alone: the others' "delivered" lines
    // wait in their pipes, so that this process does not take the CPU from the timed
    // operation on a small machine (every line would wake it up and be parsed at once).
    // The times are the processes' own stamps either way.
    wait_for([&] { return ev_.acked.count(o.op) > 0; }, limit,
             "the acks of broadcast " + o.op + " of " + std::to_string(bytes) + " bytes",
             static_cast<int>(root));
  }
  wait_for([&] { return count() >= want && (!wait_acks || ev_.acked.count(o.op)); }, limit,
           "broadcast " + o.op + " of " + std::to_string(bytes) + " bytes ("
             + std::to_string(count()) + " of " + std::to_string(want) + " vnodes reached"
             + (wait_acks ? ", acks " + std::string(ev_.acked.count(o.op) ? "in" : "pending") : "")
             + ")");
  o.vnodes = count();
  o.per_proc_ms.assign(opt_.procs, -1);
  for (auto& [k, j] : ev_.delivered[o.op]) {
    const double ms = static_cast<double>(j.value("t_us", std::int64_t{0}) - o.t0) / 1000.0;
    if (k < o.per_proc_ms.size() && (o.per_proc_ms[k] < 0 || ms < o.per_proc_ms[k]))
      o.per_proc_ms[k] = ms;
    o.completion_ms = std::max(o.completion_ms, ms);
    o.ok = o.ok && j.value("ok", false);
  }
  if (wait_acks)
    o.acked_ms = static_cast<double>(ev_.acked[o.op].value("t_us", std::int64_t{0}) - o.t0) / 1000.0;
  return o;
}

/// The results as a table on stdout (the JSON has everything).
void print_summary(const json& out) {
  std::printf("banyan cluster: %zu processes%s%s\n", out["procs"].get<std::size_t>(),
              out["topology"].is_null() ? "" : (" on " + out["topology"].get<std::string>()).c_str(),
              out["netns"].get<bool>() ? " in network namespaces" : "");
  if (out.contains("overhead"))
    std::printf("overhead (empty messages to process 0): %.3f ms\n",
                out["overhead"]["overhead_ms"].get<double>());
  if (out.contains("bcast-latency")) {
    auto& r = out["bcast-latency"]["results"][0];
    std::printf("bcast 1 B: completion %.3f ms, median %.3f ms, acked %.3f ms, lower bound %.3f ms%s\n",
                r["completion_ms"].get<double>(), r["median_ms"].get<double>(),
                r.value("acked_ms", -1.0), out["bcast-latency"]["lower_bound_ms"].get<double>(),
                r["complete"].get<bool>() ? "" : "  INCOMPLETE");
  }
  if (out.contains("bcast-bandwidth"))
    for (auto& r : out["bcast-bandwidth"]["results"])
      std::printf("bcast %llu B: completion %.3f ms, %.1f MB/s, acked %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["bandwidth_MBps"].get<double>(),
                  r.value("acked_ms", -1.0), r["complete"].get<bool>() ? "" : "  INCOMPLETE");
  if (out.contains("reduce"))
    for (auto& r : out["reduce"]["results"])
      std::printf("reduce %llu B int32 sum: %.3f ms%s\n",
                  static_cast<unsigned long long>(r["size"].get<std::uint64_t>()),
                  r["completion_ms"].get<double>(), r["ok"].get<bool>() ? "" : "  WRONG RESULT");
  if (out.contains("churn")) {
    auto& c = out["churn"];
    std::printf("churn: %zu broadcasts, %zu/%zu deliveries, %zu duplicates, %zu lost\n",
                c["timeline"].size(), c["deliveries"].get<std::size_t>(),
                c["deliveries_expected"].get<std::size_t>(), c["duplicates"].get<std::size_t>(),
                c["lost"].get<std::size_t>());
  }
}

double lower_bound_ms(const topology* topo, std::size_t procs) {
  if (!topo)
    return 0;
  auto full = latency_matrix(*topo);
  cost_matrix m(procs, std::vector<double>(procs, 0));
  for (std::size_t a = 0; a < procs; ++a)
    for (std::size_t b = 0; b < procs; ++b)
      m[a][b] = full[a][b];
  return farthest_shortest_path(m, 0);
}

json cluster_run::workload_latency() {
  progress("latency: " + std::to_string(opt_.reps) + " 1-byte broadcasts from process 0");
  broadcast(0, 1, opt_.acks); // warm-up: connections opened on first use
  std::vector<double> completion, acked, med;
  std::vector<std::vector<double>> per_proc(opt_.procs);
  bool complete = true;
  for (std::size_t r = 0; r < opt_.reps; ++r) {
    auto o = broadcast(0, 1, opt_.acks);
    completion.push_back(o.completion_ms);
    if (opt_.acks)
      acked.push_back(o.acked_ms);
    std::vector<double> reached;
    for (std::size_t k = 0; k < opt_.procs; ++k) {
      per_proc[k].push_back(o.per_proc_ms[k]);
      if (o.per_proc_ms[k] >= 0)
        reached.push_back(o.per_proc_ms[k]);
    }
    med.push_back(median(reached));
    complete = complete && o.ok && o.vnodes == total_vnodes();
  }
  std::vector<double> pp;
  for (auto& v : per_proc)
    pp.push_back(median(v));
  json r{{"algorithm", "dynamic"},
         {"completion_ms", median(completion)},
         {"median_ms", median(med)},
         {"per_proc_ms", pp},
         {"runs_ms", completion},
         {"complete", complete}};
  if (opt_.acks) {
    r["acked_ms"] = median(acked);
    r["acked_runs_ms"] = acked;
  }
  std::fprintf(stderr, "cluster: latency: completion %.3f ms (median of %zu)%s\n",
               median(completion), opt_.reps,
               opt_.acks ? (", with acks " + std::to_string(median(acked)) + " ms").c_str() : "");
  return {{"lower_bound_ms", lower_bound_ms(topo_ ? &*topo_ : nullptr, opt_.procs)},
          {"results", json::array({r})}};
}

json cluster_run::workload_bandwidth() {
  auto sizes = *parse_sizes(opt_.sizes);
  json results = json::array();
  for (auto size : sizes) {
    progress("bandwidth: " + std::to_string(size) + "-byte broadcasts from process 0, one to warm up and "
             + std::to_string(opt_.reps) + " timed");
    std::vector<double> completion, acked;
    bool complete = true;
    // The first one warms up, as in the latency and reduce workloads and in Open MPI's
    // side of scripts/bench_mpi.sh: buffers fault in, segments' frames are first sized.
    auto warm = broadcast(0, size, opt_.acks);
    complete = warm.ok && warm.vnodes == total_vnodes();
    for (std::size_t r = 0; r < opt_.reps; ++r) {
      auto o = broadcast(0, size, opt_.acks);
      completion.push_back(o.completion_ms);
      if (opt_.acks)
        acked.push_back(o.acked_ms);
      complete = complete && o.ok && o.vnodes == total_vnodes();
    }
    const double c = median(completion);
    const double mbps = c > 0 ? static_cast<double>(size) * static_cast<double>(opt_.procs) / (c * 1e3) : 0;
    json r{{"algorithm", "dynamic"},     {"size", size},        {"completion_ms", c},
           {"bandwidth_MBps", mbps},     {"runs_ms", completion}, {"complete", complete}};
    if (opt_.acks) {
      r["acked_ms"] = median(acked);
      r["acked_runs_ms"] = acked;
    }
    std::fprintf(stderr, "cluster: bandwidth: %llu bytes: %.3f ms, %.1f MB/s%s\n",
                 static_cast<unsigned long long>(size), c, mbps,
                 opt_.acks ? (" (acked " + std::to_string(median(acked)) + " ms)").c_str() : "");
    results.push_back(r);
  }
  return {{"results", results}};
}

json cluster_run::workload_reduce() {
  auto sizes = *parse_sizes(opt_.reduce_sizes);
  json results = json::array();
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  for (auto size : sizes) {
    if (size % 4 != 0 || size == 0)
      throw cluster_failure{"--reduce-sizes: " + std::to_string(size) + " is not a whole number of int32", 2};
    std::vector<double> completion;
    bool ok = true;
    for (std::size_t r = 0; r < opt_.reps + 1; ++r) { // the first one warms up
      const auto seq = ++reduce_seq_;
      const auto line = "reduce " + std::to_string(seq) + " 0 " + std::to_string(size / 4)
                        + " sum int32";
      const auto t0 = now_us();
      for (std::size_t k = opt_.procs; k-- > 0;) // the root's owner (process 0) last
        command(k, line);
      wait_for(
        [&] {
          return ev_.reduced.count(seq) && ev_.reduce_sent[seq].size() + 1 >= opt_.procs;
        },
        limit, "reduction " + std::to_string(seq) + " of " + std::to_string(size) + " bytes");
      auto& res = ev_.reduced[seq];
      if (r == 0)
        continue;
      completion.push_back(static_cast<double>(res.value("t_us", std::int64_t{0}) - t0) / 1000.0);
      ok = ok && res.value("ok", false) && res.value("vnodes", std::size_t{0}) == total_vnodes();
    }
    const double c = median(completion);
    std::fprintf(stderr, "cluster: reduce: %llu bytes: %.3f ms%s\n",
                 static_cast<unsigned long long>(size), c, ok ? "" : " (WRONG RESULT)");
    results.push_back({{"algorithm", "dynamic"},
                       {"size", size},
                       {"completion_ms", c},
                       {"runs_ms", completion},
                       {"ok", ok}});
  }
  return {{"results", results}};
}

json cluster_run::workload_overhead() {
  // The barrier-plus-acks cost alone, as near as banyan gets: every other process sends
  // process 0 one empty message at once; timed from the commands to the last arrival.
  progress("overhead: empty messages from every process to process 0");
  const auto limit = std::chrono::milliseconds(opt_.op_timeout_ms);
  auto once = [&] {
    std::map<std::size_t, std::size_t> had;
    for (std::size_t k = 1; k < opt_.procs; ++k)
      had[k] = ev_.sent[k].size();
    const auto t0 = now_us();
    for (std::size_t k = 1; k < opt_.procs; ++k)
      command(k, "send 0 0");
    std::vector<std::string> ops;
    wait_for(
      [&] {
        for (std::size_t k = 1; k < opt_.procs; ++k)
          if (ev_.sent[k].size() == had[k])
            return false;
        return true;
      },
      limit, "the empty messages to be sent");
    for (std::size_t k = 1; k < opt_.procs; ++k)
      ops.push_back(ev_.sent[k].back().value("op", ""));
    std::int64_t last = t0;
    wait_for(
      [&] {
        for (auto& op : ops)
          if (ev_.delivered[op].empty())
            return false;
        return true;
      },
      limit, "the empty messages to arrive");
    for (auto& op : ops)
      last = std::max(last, ev_.delivered[op].front().second.value("t_us", t0));
    return static_cast<double>(last - t0) / 1000.0;
  };
  once();
  std::vector<double> runs;
  for (std::size_t r = 0; r < opt_.reps; ++r)
    runs.push_back(once());
  std::fprintf(stderr, "cluster: overhead: %.3f ms\n", median(runs));
  return {{"overhead_ms", median(runs)}, {"runs_ms", runs}};
}

json cluster_run::workload_churn() {
  // Continuous 4 MiB broadcasts from process 0; at leave_at half of the others hand
  // their vnodes over and leave, at rejoin_at they come back asking for them again.
  if (opt_.procs < 3)
    throw cluster_failure{"churn needs at least 3 processes", 2};
  const std::uint64_t size = 4 << 20;
  std::vector<std::size_t> movers;
  for (std::size_t k = 1; k < opt_.procs; k += 2)
    movers.push_back(k);
  progress("churn: 4 MiB broadcasts for " + std::to_string(opt_.churn_for_ms) + " ms; "
           + std::to_string(movers.size()) + " processes leave at " + std::to_string(opt_.leave_at_ms)
           + " ms and rejoin at " + std::to_string(opt_.rejoin_at_ms) + " ms");
  for (std::size_t k = 0; k < opt_.procs; ++k) // a leaving process cannot ack
    command(k, "acks off");
  sync_all();
  const auto start = now_us();
  auto elapsed_ms = [&] { return static_cast<double>(now_us() - start) / 1000.0; };
  json timeline = json::array();
  std::vector<std::pair<double, double>> points; // t_ms, MB/s
  std::size_t expected = 0, delivered = 0, duplicates = 0, lost = 0;
  bool left = false, rejoined = false;
  double left_at = -1, rejoined_at = -1;
  std::map<std::size_t, std::size_t> readies_before;
  std::vector<std::string> ops;
  while (elapsed_ms() < static_cast<double>(opt_.churn_for_ms)) {
    if (!left && elapsed_ms() >= static_cast<double>(opt_.leave_at_ms)) {
      for (auto k : movers)
        command(k, "leave");
      left = true;
      left_at = elapsed_ms();
      progress("churn: " + std::to_string(movers.size()) + " processes leaving");
    }
    if (left && !rejoined && elapsed_ms() >= static_cast<double>(opt_.rejoin_at_ms)) {
      bool all_left = true;
      for (auto k : movers)
        all_left = all_left && ev_.left[k] > 0;
      if (all_left) {
        for (auto k : movers) {
          readies_before[k] = ev_.readies[k];
          command(k, "join " + address(0));
        }
        rejoined = true;
        rejoined_at = elapsed_ms();
        progress("churn: they rejoin");
      }
    }
    // One broadcast; counted over every vnode wherever it lives now.
    const auto had = ev_.started[0].size();
    command(0, "bcast " + std::to_string(size));
    wait_for([&] { return ev_.started[0].size() > had; }, std::chrono::milliseconds(opt_.op_timeout_ms),
             "process 0 to start a broadcast");
    auto started = ev_.started[0].back();
    const auto op = started.value("op", "");
    const auto t0 = started.value("t_us", std::int64_t{0});
    auto count = [&] {
      std::size_t n = 0;
      for (auto& [k, j] : ev_.delivered[op])
        n += j.value("vnodes", std::size_t{0});
      return n;
    };
    const auto want = total_vnodes();
    try {
      wait_for([&] { return count() >= want; }, std::chrono::milliseconds(opt_.op_timeout_ms),
               "broadcast " + op);
    } catch (const cluster_failure& f) {
      if (f.code == 130)
        throw;
      failed_ = false;
      progress("churn: " + f.what);
    }
    ops.push_back(op);
    std::int64_t last = t0;
    for (auto& [k, j] : ev_.delivered[op])
      last = std::max(last, j.value("t_us", t0));
    const double ms = static_cast<double>(last - t0) / 1000.0;
    const double mbps = ms > 0 ? static_cast<double>(size) * static_cast<double>(opt_.procs) / (ms * 1e3) : 0;
    const double t_ms = static_cast<double>(last - start) / 1000.0;
    points.emplace_back(t_ms, mbps);
    timeline.push_back({{"t_ms", t_ms}, {"bandwidth_MBps", mbps}, {"op", op}});
  }
  // Deliveries counted once everything settled (a late duplicate would show up here).
  auto settle = clock_type::now() + 1s;
  wait_for([&] { return clock_type::now() >= settle; }, 5s, "the last deliveries");
  const auto want = total_vnodes();
  for (auto& op : ops) {
    std::size_t n = 0;
    for (auto& [k, j] : ev_.delivered[op])
      n += j.value("vnodes", std::size_t{0});
    expected += want;
    delivered += std::min(n, want);
    duplicates += n > want ? n - want : 0;
    lost += n < want ? want - n : 0;
  }
  if (rejoined)
    wait_for(
      [&] {
        for (auto k : movers)
          if (ev_.readies[k] == readies_before[k])
            return false;
        return true;
      },
      30s, "the processes to rejoin");
  // Back within 10% of the steady state before the event: the median before it.
  auto restabilize = [&](double at, double until) -> json {
    if (at < 0)
      return nullptr;
    std::vector<double> before;
    for (auto& [t, b] : points)
      if (t < at)
        before.push_back(b);
    if (before.empty())
      return nullptr;
    const double steady = median(before);
    for (auto& [t, b] : points)
      if (t >= at && t < until && b >= 0.9 * steady)
        return t - at;
    return nullptr;
  };
  json restab = json::array();
  restab.push_back({{"event", "leave"}, {"at_ms", left_at},
                    {"restabilize_ms", restabilize(left_at, rejoined_at < 0 ? 1e18 : rejoined_at)}});
  restab.push_back({{"event", "rejoin"}, {"at_ms", rejoined_at}, {"restabilize_ms", restabilize(rejoined_at, 1e18)}});
  std::fprintf(stderr, "cluster: churn: %zu broadcasts, %zu/%zu deliveries, %zu duplicates, %zu lost\n",
               timeline.size(), delivered, expected, duplicates, lost);
  return {{"size", size},
          {"timeline", timeline},
          {"restabilize_ms", restab},
          {"deliveries_expected", expected},
          {"deliveries", delivered},
          {"duplicates", duplicates},
          {"lost", lost}};
}

int cluster_run::run() {
  if (opt_.procs < 1 || opt_.procs > 256) {
    std::cerr << "banyan cluster: --procs must be 1-256\n";
    return 2;
  }
  if (opt_.vnodes_per_proc < 1 || opt_.vnodes_per_proc > 4096) {
    std::cerr << "banyan cluster: --vnodes-per-proc must be 1-4096\n";
    return 2;
  }
  if (opt_.reps < 1 || opt_.reps > 1000) {
    std::cerr << "banyan cluster: --reps must be 1-1000\n";
    return 2;
  }
  if (!parse_sizes(opt_.sizes) || !parse_sizes(opt_.reduce_sizes)) {
    std::cerr << "banyan cluster: --sizes and --reduce-sizes are comma-separated byte counts\n";
    return 2;
  }
  std::set<std::string> workloads;
  {
    std::stringstream in(opt_.workload);
    std::string w;
    while (std::getline(in, w, ',')) {
      if (w == "all") {
        workloads.insert({"latency", "bandwidth", "reduce", "churn"});
      } else if (w == "latency" || w == "bandwidth" || w == "reduce" || w == "churn"
                 || w == "overhead" || w == "none") {
        workloads.insert(w);
      } else {
        std::cerr << "banyan cluster: unknown workload \"" << w
                  << "\" (latency, bandwidth, reduce, churn, overhead, all, none)\n";
        return 2;
      }
    }
  }
  if (!opt_.topology.empty()) {
    auto t = load_topology(opt_.topology);
    if (!t) {
      std::cerr << "banyan cluster: --topology: " << t.err().to_string() << "\n";
      return 2;
    }
    topo_ = std::move(*t);
    if (opt_.procs > topo_->proc_count()) {
      std::cerr << "banyan cluster: --topology " << topo_->name << " has "
                << topo_->proc_count() << " processors, fewer than --procs " << opt_.procs << "\n";
      return 2;
    }
  } else if (opt_.netns) {
    std::cerr << "banyan cluster: --netns needs --topology (its sites become namespaces)\n";
    return 2;
  }
  if (!opt_.json_path.empty()) {
    if (!std::ofstream(opt_.json_path, std::ios::app)) {
      std::cerr << "banyan cluster: cannot write --json " << opt_.json_path << "\n";
      return 2;
    }
  }
  exe_ = self_exe();
  if (exe_.empty()) {
    std::cerr << "banyan cluster: cannot find my own executable (/proc/self/exe)\n";
    return 1;
  }

  json out{{"procs", opt_.procs},
           {"vnodes_per_proc", opt_.vnodes_per_proc},
           {"topology", topo_ ? json(topo_->name) : json(nullptr)},
           {"netns", opt_.netns},
           {"seed", opt_.seed},
           {"reps", opt_.reps},
           {"acks", opt_.acks}};
  try {
    make_dir();
    block_signals();
    if (opt_.netns)
      netns_up();
    start_all();
    wait_converged(std::chrono::milliseconds(30000 + 2000 * opt_.procs));
    if (opt_.acks) {
      // Each process acks to the vnode its origin owns (process k: vnode k*V).
      std::string line = "acks on";
      for (std::size_t k = 0; k < opt_.procs; ++k)
        line += " " + std::to_string(k) + ":" + std::to_string(k * opt_.vnodes_per_proc);
      for (std::size_t k = 0; k < opt_.procs; ++k)
        command(k, line);
      sync_all(); // every process acks from the first broadcast on
    }
    if (workloads.count("overhead"))
      out["overhead"] = workload_overhead();
    if (workloads.count("latency"))
      out["bcast-latency"] = workload_latency();
    if (workloads.count("bandwidth"))
      out["bcast-bandwidth"] = workload_bandwidth();
    if (workloads.count("reduce"))
      out["reduce"] = workload_reduce();
    if (workloads.count("churn"))
      out["churn"] = workload_churn();
  } catch (const cluster_failure& f) {
    failed_ = f.code != 2 && f.code != 3;
    std::cerr << "banyan cluster: " << f.what << "\n";
    teardown();
    return f.code;
  }
  int rc = 0;
  for (auto& [k, errs] : ev_.errors)
    if (!errs.empty())
      rc = 1;
  for (auto name : {"bcast-latency", "bcast-bandwidth"})
    if (out.contains(name))
      for (auto& r : out[name]["results"])
        if (!r.value("complete", false))
          rc = 1;
  if (out.contains("reduce"))
    for (auto& r : out["reduce"]["results"])
      if (!r.value("ok", false))
        rc = 1;
  if (out.contains("churn") && (out["churn"]["duplicates"] != 0 || out["churn"]["lost"] != 0))
    rc = 1;
  failed_ = rc != 0;
  teardown();
  if (!opt_.json_path.empty()) {
    std::ofstream f(opt_.json_path, std::ios::trunc);
    f << out.dump(2) << "\n";
    if (!f) {
      std::cerr << "banyan cluster: cannot write " << opt_.json_path << "\n";
      return 1;
    }
  }
  print_summary(out);
  const std::string who = std::to_string(opt_.procs) + " processes"
                          + (opt_.topology.empty() ? std::string(" on loopback")
                                                   : " emulating " + opt_.topology
                                                       + (opt_.netns ? " in namespaces" : ""));
  if (!opt_.plot_dir.empty() && !write_cluster_plots(opt_.plot_dir, who, out))
    rc = 1;
  progress(rc == 0 ? "done" : "done, with errors (see above)");
  return rc;
}

} // namespace

/// The pictures of a run's results (`--plot-dir`): each workload that ran, one SVG file.
/// A file that cannot be written gets a line on stderr and makes the run fail.
bool write_cluster_plots(const std::string& dir, const std::string& who, const nlohmann::json& out) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::cerr << "banyan cluster: --plot-dir " << dir << ": " << ec.message() << "\n";
    return false;
  }
  std::vector<std::pair<std::string, plot_spec>> plots;
  if (out.contains("bcast-latency")) {
    plot_spec p;
    p.title = "1-byte broadcast from process 0, " + who + " (median per process)";
    p.x_label = "processes, sorted by delivery time";
    p.y_label = "delivered after (ms)";
    p.draw = plot_spec::style::points;
    plot_series s;
    s.label = "banyan";
    std::vector<double> t;
    for (auto& v : out["bcast-latency"]["results"][0]["per_proc_ms"])
      if (v.get<double>() >= 0)
        t.push_back(v.get<double>());
    std::sort(t.begin(), t.end());
    for (std::size_t k = 0; k < t.size(); ++k) {
      s.x.push_back(static_cast<double>(k + 1));
      s.y.push_back(t[k]);
    }
    p.series.push_back(std::move(s));
    plots.emplace_back("latency.svg", std::move(p));
  }
  if (out.contains("bcast-bandwidth")) {
    plot_spec p;
    p.title = "Broadcast bandwidth by size, " + who + " (size x processes / completion)";
    p.x_label = "message size (bytes)";
    p.y_label = "MB/s";
    p.log_x = true;
    plot_series s;
    s.label = "banyan";
    for (auto& r : out["bcast-bandwidth"]["results"]) {
      s.x.push_back(r["size"].get<double>());
      s.y.push_back(r["bandwidth_MBps"].get<double>());
    }
    p.series.push_back(std::move(s));
    plots.emplace_back("bandwidth.svg", std::move(p));
  }
  if (out.contains("churn")) {
    auto& c = out["churn"];
    plot_spec p;
    p.title = "Broadcasts of " + std::to_string(c["size"].get<std::uint64_t>() >> 10)
              + " KiB under churn, " + who;
    p.x_label = "time (ms)";
    p.y_label = "MB/s per broadcast (size x processes / completion)";
    p.draw = plot_spec::style::steps;
    plot_series s;
    s.label = "banyan";
    for (auto& pt : c["timeline"]) {
      s.x.push_back(pt["t_ms"].get<double>());
      s.y.push_back(pt["bandwidth_MBps"].get<double>());
    }
    p.series.push_back(std::move(s));
    for (auto& e : c["restabilize_ms"])
      if (e["at_ms"].is_number() && e["at_ms"].get<double>() >= 0)
        p.markers.push_back({e["at_ms"].get<double>(), e["event"].get<std::string>()});
    plots.emplace_back("churn.svg", std::move(p));
  }
  bool ok = true;
  for (auto& [name, p] : plots) {
    auto path = (std::filesystem::path(dir) / name).string();
    if (auto err = write_svg(path, p)) {
      std::cerr << "banyan cluster: " << *err << "\n";
      ok = false;
    } else {
      std::fprintf(stderr, "cluster: wrote %s\n", path.c_str());
    }
  }
  return ok;
}

int run_cluster(const cluster_options& opt) {
  cluster_run r(opt);
  return r.run();
}

void add_cluster_command(CLI::App& app, std::function<int()>& action) {
  auto opt = std::make_shared<cluster_options>();
  auto cmd = app.add_subcommand("cluster", "run N local `banyan node` processes and the bench workloads");
  cmd->add_option("--procs", opt->procs, "number of processes (4)");
  cmd->add_option("--topology", opt->topology, "emulate this topology (process k = its processor k)");
  cmd->add_flag("--netns", opt->netns, "one network namespace per site, veth links, htb (root)");
  cmd->add_option("--workload", opt->workload,
                  "latency, bandwidth, reduce, churn, overhead, all or none; comma-separated (all)");
  cmd->add_option("--json", opt->json_path, "write the results as JSON");
  cmd->add_option("--seed", opt->seed, "seeds the processes' randomness (1)");
  cmd->add_option("--reps", opt->reps, "timed repetitions per measurement (5); the median is reported");
  cmd->add_option("--sizes", opt->sizes, "bandwidth: broadcast sizes in bytes, comma-separated");
  cmd->add_option("--reduce-sizes", opt->reduce_sizes, "reduce: int32 bytes per vnode, comma-separated");
  cmd->add_option("--vnodes-per-proc", opt->vnodes_per_proc, "vnodes each process owns (1)");
  cmd->add_flag("!--no-acks", opt->acks, "do not time broadcasts by acks");
  cmd->add_option("--leave-at", opt->leave_at_ms, "churn: ms when half of the processes leave (2000)");
  cmd->add_option("--rejoin-at", opt->rejoin_at_ms, "churn: ms when they rejoin (4000)");
  cmd->add_option("--churn-for", opt->churn_for_ms, "churn: ms of broadcasting (6000)");
  cmd->add_option("--op-timeout", opt->op_timeout_ms, "ms one operation may take (60000)");
  cmd->add_option("--scripts", opt->scripts_dir, "directory of netns.sh (default: found)");
  cmd->add_option("--node-args", opt->node_args, "extra arguments for every banyan node");
  cmd->add_flag("--keep", opt->keep, "keep the temporary directory with the logs");
  cmd->add_option("--plot-dir", opt->plot_dir,
                  "draw the results there: latency.svg, bandwidth.svg, churn.svg (those that ran)");
  cmd->callback([opt, &action] { action = [opt] { return run_cluster(*opt); }; });
}

} // namespace banyan::cli

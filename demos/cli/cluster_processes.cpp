// `banyan cluster`: spawning the `banyan node --control` children, and tearing every one
// of them down whatever happened (cluster_run.hpp).
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_run.hpp"

namespace banyan::cli::cluster_detail {

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

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
    // A contact that does not answer in time (busy with other joins) is not the end:
    // the node tries the next one, and all of them again with backoff, this long.
    args.insert(args.end(), {"--join-timeout", "60"});
  }
  // Every process of this cluster shares one address (127.0.0.1, or a site's in a
  // namespace), and every member connects to a newcomer at once: the transport's default
  // of 8 handshakes per address (meant for one host of few processes) refused most of
  // them. Assumes the processes here are ours (the secret is a fresh random one).
  args.insert(args.end(), {"--handshakes-per-address", std::to_string(std::max<std::size_t>(8, opt_.procs))});
  if (topo_)
    args.insert(args.end(), {"--topology", opt_.topology, "--site", c->site});
  // The supervisor's timeouts (a probe's answer 1 s, a suspect's 1 s, silence 10 s)
  // assume a live process is scheduled well within them. N processes on C cores each
  // get a slice of about C/N of a core while they all form their trees: at 128 on 2
  // (shared) cores they did not answer in time (probes unanswered three times, peers
  // suspected and buried while alive, joins given up; handshakes refused after 1 s,
  // with the joiners' handover requests behind them). So beyond 16 processes per core
  // every timeout is stretched by procs / (16 x cores), rounded up, unless --node-args
  // sets it. Assumes the slice, not the network (loopback), is what delays an answer.
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t stretch = (opt_.procs + 16 * cores - 1) / (16 * cores);
  if (stretch > 1) {
    auto given = [&](const char* flag) { return opt_.node_args.find(flag) != std::string::npos; };
    if (!given("--probe-timeout"))
      args.insert(args.end(), {"--probe-timeout", std::to_string(1000 * stretch)});
    if (!given("--suspect-timeout"))
      args.insert(args.end(), {"--suspect-timeout", std::to_string(1000 * stretch)});
    if (!given("--handshake-timeout"))
      args.insert(args.end(), {"--handshake-timeout", std::to_string(2000 * stretch)});
    if (!given("--crash-timeout"))
      args.insert(args.end(), {"--crash-timeout", std::to_string(10000 * stretch)});
  }
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

} // namespace banyan::cli::cluster_detail

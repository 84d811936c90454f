#include "node.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "banyan/actors/node.hpp"
#include "banyan/actors/node_exposition.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/net/metrics_server.hpp"
#include "node_control.hpp"
#include "node_logger.hpp"

namespace banyan::cli {

namespace {

/// One line on stderr, exit code 2.
int bad(const std::string& what) {
  std::cerr << "banyan node: " << what << "\n";
  return 2;
}

/// "host:port" or "[v6]:port", port 0-65535.
bool host_port_ok(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  auto host = s.substr(0, colon);
  if (host.front() == '[' ? host.back() != ']' || host.size() < 3
                          : host.find(':') != std::string::npos)
    return false;
  return parse_uint(s.substr(colon + 1), 65535).has_value();
}

/// "IP:PORT" or "[IPv6]:PORT" with a numeric address -> address and port.
std::optional<std::pair<std::string, std::uint16_t>> numeric_host_port(const std::string& s) {
  if (!host_port_ok(s))
    return std::nullopt;
  const auto colon = s.rfind(':');
  auto host = s.substr(0, colon);
  const bool v6 = host.front() == '[';
  if (v6)
    host = host.substr(1, host.size() - 2);
  unsigned char buf[16];
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), buf) != 1)
    return std::nullopt;
  return std::make_pair(host, static_cast<std::uint16_t>(*parse_uint(s.substr(colon + 1), 65535)));
}

/// "0-1023", "7", "0-9,20-29", "{0-9,20-29}": inclusive ranges, as vnode_set prints them.
std::optional<vnode_set> parse_vnodes(std::string s) {
  if (s.size() >= 2 && s.front() == '{' && s.back() == '}')
    s = s.substr(1, s.size() - 2);
  if (s.empty())
    return std::nullopt;
  std::vector<vnode_set::interval> xs;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    auto dash = part.find('-');
    auto lo = parse_uint(part.substr(0, dash), vnode_set::max_member - 1);
    auto hi = dash == std::string::npos ? lo
                                        : parse_uint(part.substr(dash + 1), vnode_set::max_member - 1);
    if (!lo || !hi || *hi < *lo)
      return std::nullopt;
    xs.push_back({static_cast<vnode_id>(*lo), static_cast<vnode_id>(*hi + 1)});
  }
  return vnode_set::from_intervals(std::move(xs));
}

/// "[ID@]HOST:PORT".
std::optional<node_contact> parse_contact(const std::string& s) {
  node_contact c;
  auto at = s.find('@');
  c.address = at == std::string::npos ? s : s.substr(at + 1);
  if (at != std::string::npos) {
    auto id = parse_uint(s.substr(0, at), max_node_id);
    if (!id)
      return std::nullopt;
    c.id = static_cast<proc_id>(*id);
  }
  if (!host_port_ok(c.address))
    return std::nullopt;
  return c;
}

/// "[ID@]HOST:PORT" items separated by commas, blanks or newlines; '#' starts a comment
/// that runs to the end of its line (for --join-file and BANYAN_JOIN).
std::vector<std::string> split_contacts(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    line = line.substr(0, line.find('#'));
    for (auto& c : line)
      if (c == ',' || c == '\t' || c == '\r')
        c = ' ';
    std::stringstream words(line);
    std::string w;
    while (words >> w)
      out.push_back(w);
  }
  return out;
}

/// Every address HOST resolves to, as "ip:port" / "[v6]:port" contacts (a name such as a
/// Kubernetes headless service stands for all its members). An address literal stays
/// itself; a name that does not resolve (yet) gives none. An ID given with a name that
/// stands for several addresses is dropped: it could be any one of them.
std::vector<node_contact> resolve_contact(const node_contact& c) {
  auto colon = c.address.rfind(':');
  auto host = c.address.substr(0, colon);
  const auto port = c.address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<node_contact> out;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0)
    return out;
  for (auto* a = res; a; a = a->ai_next) {
    char ip[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, ip, sizeof ip, nullptr, 0, NI_NUMERICHOST) != 0)
      continue;
    std::string addr = a->ai_family == AF_INET6 ? "[" + std::string(ip) + "]:" + port
                                                : std::string(ip) + ":" + port;
    bool seen = false;
    for (auto& o : out)
      seen = seen || o.address == addr;
    if (!seen)
      out.push_back({addr, c.id});
  }
  ::freeaddrinfo(res);
  if (out.size() > 1)
    for (auto& o : out)
      o.id = no_proc;
  return out;
}

/// "cannot join: X" once, whether or not `message` already says "cannot join".
std::string with_prefix(const std::string& prefix, const std::string& message) {
  return message.rfind(prefix, 0) == 0 ? message : prefix + message;
}

/// Joins through `contacts`, resolving their names again before every attempt, until a
/// join succeeds, `deadline` passes (0: one attempt), a retry cannot help (wrong secret,
/// bad arguments, stopped, our id in use) or `give_up` is set. Runs on a thread of its own.
std::future<banyan::node::result> join_with_retries(banyan::node& n,
                                                    std::vector<node_contact> contacts,
                                                    vnode_set wanted,
                                                    std::chrono::milliseconds deadline,
                                                    const std::atomic<bool>& give_up) {
  return std::async(std::launch::async, [&n, contacts = std::move(contacts), wanted, deadline,
                                         &give_up]() -> banyan::node::result {
    const auto until = std::chrono::steady_clock::now() + deadline;
    auto pause = std::chrono::milliseconds(500);
    for (;;) {
      std::vector<node_contact> now;
      for (auto& c : contacts)
        for (auto& r : resolve_contact(c))
          if (r.address != n.address())
            now.push_back(r);
      banyan::node::result res;
      if (now.empty())
        res = error{errc::unknown_peer, "cannot join: no contact resolves to an address yet"};
      else
        res = n.join(now, wanted).get();
      if (!res || res->code == errc::auth_failed || res->code == errc::invalid_argument
          || res->code == errc::stopped || res->code == errc::id_in_use)
        return res;
      for (auto waited = std::chrono::milliseconds(0); waited < pause;
           waited += std::chrono::milliseconds(50)) {
        if (give_up.load() || std::chrono::steady_clock::now() + pause - waited > until)
          return res;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      pause = std::min(pause * 2, std::chrono::milliseconds(5000));
    }
  });
}

/// The --json-status document. Incarnations are strings: they are 64-bit, and JSON
/// readers that hold numbers in doubles (jq, JavaScript) round those above 2^53.
nlohmann::json status_json(const banyan::node& n, const std::string& metrics,
                           const std::string& error) {
  const auto s = n.status();
  nlohmann::json j;
  j["id"] = s.id;
  j["pid"] = static_cast<long>(::getpid());
  j["port"] = n.port();
  j["address"] = n.address(); // at once; the snapshot has it a moment later
  j["state"] = to_string(s.state);
  auto& members = j["members"] = nlohmann::json::array();
  for (auto& m : s.members)
    members.push_back(
      {{"id", m.id}, {"address", m.address}, {"incarnation", std::to_string(m.incarnation)}});
  j["own_vnodes"] = s.own_vnodes.to_string();
  j["own_vnode_count"] = s.own_vnodes.size();
  auto& runs = j["own_vnode_intervals"] = nlohmann::json::array();
  for (auto iv : s.own_vnodes.intervals())
    runs.push_back({iv.lo, iv.hi});
  auto& routes = j["routes"] = nlohmann::json::array();
  for (auto& r : s.routes.snapshot())
    for (auto iv : r.vnodes.intervals())
      routes.push_back({{"lo", iv.lo}, {"hi", iv.hi}, {"owner", r.owner}, {"epoch", r.epoch}});
  j["all_parented"] = s.all_parented;
  j["busy"] = s.busy;
  auto& trees = j["trees"] = nlohmann::json::array();
  for (auto& t : s.trees) {
    trees.push_back({{"root", t.tree.root},
                     {"kind", to_string(t.tree.kind)},
                     {"parent", t.parent == no_proc ? nlohmann::json() : nlohmann::json(t.parent)},
                     {"children", t.children}});
    auto& last = trees.back();
    if (t.tree.kind == tree_kind::latency && t.parent != no_proc)
      last["dist_us"] = std::chrono::duration_cast<std::chrono::microseconds>(t.dist).count();
    if (t.tree.kind == tree_kind::bandwidth && t.parent != no_proc)
      last["est_MBps"] = t.est / 1e6;
  }
  j["probes"] = {{"completed", s.probes_completed}, {"abandoned", s.probes_abandoned}};
  if (!metrics.empty())
    j["metrics"] = metrics;
  if (!error.empty())
    j["error"] = error;
  return j;
}

/// Writes the file whole or not at all (a reader never sees half of it).
void write_status(const std::string& path, const nlohmann::json& j) {
  if (path.empty())
    return;
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    if (!out)
      return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

/// "trees: 8/8 parented, 4 members"
std::string tree_summary(const node_status& s) {
  std::size_t parented = 0;
  std::size_t total = 0;
  for (auto& t : s.trees) {
    if (t.tree.root == s.id)
      continue;
    ++total;
    parented += t.parent != no_proc;
  }
  return "trees: " + std::to_string(parented) + "/" + std::to_string(total) + " parented, "
         + std::to_string(s.members.size()) + " members, " + std::to_string(s.own_vnodes.size())
         + " vnodes " + s.own_vnodes.to_string();
}

/// One line on stdout (a JSON object; the newline is added here), written at once.
void write_line(const std::string& line) {
  static std::mutex mtx;
  std::lock_guard<std::mutex> lk(mtx);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

/// One JSON object per line on stdout, with "t_us" (steady clock) unless it has one.
void emit_line(nlohmann::json j) {
  if (!j.contains("t_us"))
    j["t_us"] = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  write_line(j.dump());
}

/// Control mode's loop: commands from stdin until `quit`, end of input or a signal
/// (then it leaves, as without --control). Returns the exit code.
int control_loop(banyan::node& n, node_logger& log, control_session& session, const sigset_t& signals,
                 std::future<banyan::node::result> pending, const std::string& json_status,
                 const std::atomic<bool>& dirty_flag, const std::function<void()>& write_now,
                 const std::function<int()>& leave_and_stop) {
  int sfd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (sfd < 0) {
    log.error("signalfd", std::string("cannot create a signalfd: ") + std::strerror(errno));
    n.stop();
    return 1;
  }
  bool member = false;
  std::string buffer;
  bool quit = false;
  bool eof = false;
  bool signalled = false;
  while (!quit && !eof && !signalled) {
    pollfd fds[2] = {{0, POLLIN, 0}, {sfd, POLLIN, 0}};
    // Reading stdin only once a member: commands need one (and "ready" comes first).
    // Short naps while a started broadcast or send waits to be reported.
    int r = ::poll(member ? fds : fds + 1, member ? 2 : 1, session.busy() ? 1 : 100);
    if (r < 0 && errno != EINTR)
      break;
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      if (::read(sfd, &si, sizeof si) > 0)
        signalled = true;
    }
    if (!member && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      if (auto err = pending.get()) {
        log.error("cannot_join", with_prefix("cannot join: ", err->message),
                  {{"code", to_string(err->code)}});
        emit_line({{"ev", "error"}, {"detail", err->to_string()}});
        n.stop();
        ::close(sfd);
        return 1;
      }
      member = true;
      session.ready();
    }
    if (member && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char chunk[4096];
      auto got = ::read(0, chunk, sizeof chunk);
      if (got <= 0) {
        eof = true;
      } else {
        buffer.append(chunk, static_cast<std::size_t>(got));
        std::size_t nl;
        while (!quit && (nl = buffer.find('\n')) != std::string::npos) {
          auto line = buffer.substr(0, nl);
          buffer.erase(0, nl + 1);
          if (!line.empty() && line.back() == '\r')
            line.pop_back();
          quit = !session.handle(line);
        }
        if (buffer.size() > 1 << 20) {
          emit_line({{"ev", "error"}, {"detail", "command line longer than 1 MiB: dropped"}});
          buffer.clear();
        }
      }
    }
    session.collect();
    if (!json_status.empty() && dirty_flag.load())
      write_now();
  }
  ::close(sfd);
  if (quit || eof) {
    // `quit` (or the driver went away): stop without leaving.
    log.info("stopping", quit ? "quit: stopping" : "end of input: stopping");
    n.stop();
    session.finish(std::chrono::seconds(5));
    write_now();
    log.info("stopped", "stopped");
    return 0;
  }
  int code = leave_and_stop();
  session.finish(std::chrono::seconds(5));
  return code;
}

} // namespace

int run_node(const node_options& opt) {
  if (!opt.extras.empty())
    return bad("unexpected argument \"" + opt.extras.front() + "\"");
  if (opt.id.empty())
    return bad("--id is required");
  auto id = parse_uint(opt.id, max_node_id);
  if (!id)
    return bad("bad --id \"" + opt.id + "\" (want 0-" + std::to_string(max_node_id) + ")");
  if (opt.listen.empty())
    return bad("--listen is required (host:port; port 0 picks a free one)");
  if (!host_port_ok(opt.listen))
    return bad("bad --listen \"" + opt.listen + "\" (want host:port or [v6]:port)");
  if (!opt.advertise.empty() && !host_port_ok(opt.advertise))
    return bad("bad --advertise \"" + opt.advertise + "\" (want host:port or [v6]:port)");
  // Contacts: --join, then --join-file; BANYAN_JOIN only when neither is given.
  std::vector<std::pair<std::string, std::string>> seeds; // (where from, "[id@]host:port")
  for (auto& j : opt.join)
    seeds.emplace_back("--join", j);
  if (!opt.join_file.empty()) {
    std::ifstream in(opt.join_file);
    if (!in)
      return bad("cannot read --join-file \"" + opt.join_file + "\"");
    std::stringstream ss;
    ss << in.rdbuf();
    for (auto& j : split_contacts(ss.str()))
      seeds.emplace_back("--join-file " + opt.join_file + ":", j);
  }
  if (seeds.empty())
    if (const char* env = std::getenv("BANYAN_JOIN"))
      for (auto& j : split_contacts(env))
        seeds.emplace_back("BANYAN_JOIN:", j);
  std::vector<node_contact> contacts;
  for (auto& [from, j] : seeds) {
    auto c = parse_contact(j);
    if (!c)
      return bad("bad " + from + " \"" + j + "\" (want host:port or id@host:port)");
    contacts.push_back(*c);
  }
  if (!opt.join_file.empty() && contacts.empty())
    return bad("--join-file \"" + opt.join_file + "\" names no contact");
  auto join_timeout_s = parse_uint(opt.join_timeout_s, 7 * 24 * 3600);
  if (!join_timeout_s)
    return bad("bad --join-timeout \"" + opt.join_timeout_s + "\" (seconds; 0: one attempt)");
  vnode_set vnodes;
  if (!opt.vnodes.empty()) {
    auto v = parse_vnodes(opt.vnodes);
    if (!v)
      return bad("bad --vnodes \"" + opt.vnodes + "\" (want LO-HI, inclusive, e.g. 0-1023 or 0-9,20-29)");
    vnodes = *v;
  } else if (contacts.empty()) {
    vnodes = vnode_set::range(0, 1024);
  }
  if (opt.secret_file.empty())
    return bad("--secret-file is required");
  std::string secret;
  {
    std::ifstream in(opt.secret_file, std::ios::binary);
    if (!in)
      return bad("cannot read --secret-file \"" + opt.secret_file + "\"");
    std::stringstream ss;
    ss << in.rdbuf();
    secret = ss.str();
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
      secret.pop_back();
    if (secret.empty())
      return bad("--secret-file \"" + opt.secret_file + "\" is empty");
  }
  if (!opt.json_status.empty()) {
    auto probe = opt.json_status + ".tmp"; // where write_status writes first
    if (!std::ofstream(probe, std::ios::app))
      return bad("cannot write --json-status \"" + opt.json_status + "\"");
    std::remove(probe.c_str());
  }
  auto seed = parse_uint(opt.seed, std::numeric_limits<std::uint64_t>::max());
  if (!seed)
    return bad("bad --seed \"" + opt.seed + "\" (a number; 0: random)");
  auto threads = parse_uint(opt.threads, 64);
  if (!threads || *threads == 0)
    return bad("bad --threads \"" + opt.threads + "\" (1-64)");
  auto poll_us = parse_uint(opt.busy_poll_us, 10 * 1000 * 1000);
  if (!poll_us)
    return bad("bad --busy-poll-us \"" + opt.busy_poll_us + "\" (microseconds, at most 10 s)");
  auto per_address = parse_uint(opt.handshakes_per_address, 65536);
  if (!per_address || *per_address == 0)
    return bad("bad --handshakes-per-address \"" + opt.handshakes_per_address + "\" (1-65536)");
  std::optional<std::uint64_t> probe_ms, suspect_ms, handshake_ms;
  if (!opt.handshake_timeout_ms.empty()) {
    handshake_ms = parse_uint(opt.handshake_timeout_ms, 3600 * 1000);
    if (!handshake_ms || *handshake_ms == 0)
      return bad("bad --handshake-timeout \"" + opt.handshake_timeout_ms + "\" (milliseconds, 1-3600000)");
  }
  if (!opt.probe_timeout_ms.empty()) {
    probe_ms = parse_uint(opt.probe_timeout_ms, 3600 * 1000);
    if (!probe_ms || *probe_ms == 0)
      return bad("bad --probe-timeout \"" + opt.probe_timeout_ms + "\" (milliseconds, 1-3600000)");
  }
  if (!opt.suspect_timeout_ms.empty()) {
    suspect_ms = parse_uint(opt.suspect_timeout_ms, 3600 * 1000);
    if (!suspect_ms)
      return bad("bad --suspect-timeout \"" + opt.suspect_timeout_ms + "\" (milliseconds; 0: no suspicion)");
  }
  std::optional<std::uint64_t> forward_us;
  if (!opt.forward_overhead_us.empty()) {
    forward_us = parse_uint(opt.forward_overhead_us, 1000 * 1000);
    if (!forward_us)
      return bad("bad --forward-overhead-us \"" + opt.forward_overhead_us
                 + "\" (microseconds, at most 1 s)");
  }
  std::optional<std::uint64_t> segment_kib;
  if (!opt.segment_kib.empty()) {
    segment_kib = parse_uint(opt.segment_kib, 16 * 1024);
    if (!segment_kib || *segment_kib == 0)
      return bad("bad --segment-kib \"" + opt.segment_kib + "\" (1-16384)");
  }
  auto leave_ms = parse_uint(opt.leave_timeout_ms, 3600 * 1000);
  if (!leave_ms)
    return bad("bad --leave-timeout \"" + opt.leave_timeout_ms + "\" (milliseconds)");
  auto crash_ms = parse_uint(opt.crash_timeout_ms, 3600 * 1000);
  if (!crash_ms)
    return bad("bad --crash-timeout \"" + opt.crash_timeout_ms + "\" (milliseconds; 0: off)");
  auto level = parse_log_level(opt.log_level);
  if (!level)
    return bad("bad --log-level \"" + opt.log_level + "\" (error, warn, info or debug)");
  if (opt.verbose) {
    if (opt.log_level_given && *level != log_level::debug)
      return bad("-v means --log-level debug: it contradicts --log-level " + opt.log_level);
    level = log_level::debug;
  }
  auto format = parse_log_format(opt.log_format);
  if (!format)
    return bad("bad --log-format \"" + opt.log_format + "\" (text or json)");
  std::optional<std::pair<std::string, std::uint16_t>> metrics_at;
  if (!opt.metrics.empty()) {
    metrics_at = numeric_host_port(opt.metrics);
    if (!metrics_at)
      return bad("bad --metrics \"" + opt.metrics
                 + "\" (want IP:PORT, e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:0; port 0 picks a free one)");
  }

  node_config cfg;
  cfg.id = static_cast<proc_id>(*id);
  cfg.listen = opt.listen;
  cfg.advertise = opt.advertise;
  cfg.secret = secret;
  cfg.plaintext = opt.plaintext;
  cfg.seed = *seed;
  cfg.threads = static_cast<std::size_t>(*threads);
  cfg.busy_poll = std::chrono::microseconds(*poll_us);
  cfg.handshakes_per_address = static_cast<std::size_t>(*per_address);
  if (handshake_ms)
    cfg.handshake_timeout = std::chrono::milliseconds(*handshake_ms);
  if (probe_ms)
    cfg.sup.probe_timeout = std::chrono::milliseconds(*probe_ms);
  if (suspect_ms)
    cfg.sup.suspect_timeout = std::chrono::milliseconds(*suspect_ms);
  cfg.crash_timeout = std::chrono::milliseconds(*crash_ms);
  if (forward_us)
    cfg.sup.forward_overhead = std::chrono::microseconds(*forward_us);
  if (opt.no_bcast_acks)
    cfg.bcast.acknowledge = false;
  if (segment_kib) // one size for every long broadcast: no choice by the links
    cfg.bcast.segment_size = cfg.bcast.max_segment = static_cast<std::size_t>(*segment_kib) << 10;
  if (!opt.topology.empty()) {
    auto t = load_topology(opt.topology);
    if (!t)
      return bad("--topology: " + t.err().to_string());
    auto topo = std::make_shared<const topology>(std::move(*t));
    if (cfg.id >= topo->proc_count())
      return bad("--topology " + topo->name + " has " + std::to_string(topo->proc_count())
                 + " processors: no place for processor " + std::to_string(cfg.id));
    // Processor p stands in for the topology's processor p; --site double-checks that.
    auto& leaf = topo->groups[static_cast<std::size_t>(topo->leaf_of(cfg.id))].name;
    if (!opt.site.empty() && opt.site != leaf)
      return bad("processor " + std::to_string(cfg.id) + " is in group " + leaf + " of topology "
                 + topo->name + ", not in " + opt.site);
    auto self = cfg.id;
    cfg.shaper = [topo, self](proc_id to) {
      if (to >= topo->proc_count())
        return net::link_shape{};
      return net::link_shape{topo->one_way(self, to), topo->path_bandwidth(self, to)};
    };
  } else if (!opt.site.empty()) {
    return bad("--site needs --topology");
  }

  // Signals are taken synchronously by this thread; every thread started below (CAF,
  // libuv) inherits the mask and never sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto wait_signal = [&](std::chrono::milliseconds d) {
    timespec ts{static_cast<time_t>(d.count() / 1000), static_cast<long>(d.count() % 1000) * 1000000};
    return sigtimedwait(&signals, nullptr, &ts) > 0;
  };

  node_logger log(cfg.id, *level, *format, opt.control ? std::cerr : std::cout);
  std::atomic<bool> dirty{true};
  banyan::node n(cfg);
  std::string last_summary;
  n.on_event([&](const node_event& e) {
    dirty = true;
    if (e.what != node_event::kind::idle) {
      auto r = record_of(e);
      if (untrusted_input(e))
        log.hostile("transport", std::move(r));
      else
        log.log(std::move(r));
      return;
    }
    // One line when the trees settle, if they look different from the last time.
    auto st = n.status();
    if (st.state != supervisor::status::member)
      return;
    auto s = tree_summary(st);
    std::size_t parented = 0;
    std::size_t total = 0;
    for (auto& t : st.trees) {
      total += t.tree.root != st.id;
      parented += t.tree.root != st.id && t.parent != no_proc;
    }
    log.log({s != last_summary ? log_level::info : log_level::debug, "trees", s,
             {{"parented", parented},
              {"trees", total},
              {"members", st.members.size()},
              {"vnodes", st.own_vnodes.to_string()}}});
    last_summary = s;
  });
  auto port = n.start();
  if (!port) {
    std::cerr << "banyan node: cannot start: " << port.err().to_string() << "\n";
    return 1;
  }
  // GET /metrics, on a thread of its own; stopped before the node goes (declared after it).
  std::unique_ptr<net::metrics_server> metrics;
  std::string metrics_address;
  if (metrics_at) {
    net::metrics_server_config mc;
    mc.host = metrics_at->first;
    mc.port = metrics_at->second;
    metrics = std::make_unique<net::metrics_server>(
      mc, [&n] { return prometheus_text(n.metrics()); },
      [&log](const std::string& line) {
        log.hostile("metrics", {log_level::warn, "metrics_request_refused", line, {}});
      });
    auto mp = metrics->start();
    if (!mp) {
      n.stop();
      std::cerr << "banyan node: " << mp.err().message << "\n";
      return 1;
    }
    metrics_address = (mc.host.find(':') != std::string::npos ? "[" + mc.host + "]" : mc.host) + ":"
                      + std::to_string(*mp);
  }
  {
    std::string line = "listening on " + n.address() + " (pid " + std::to_string(::getpid()) + ")";
    nlohmann::ordered_json f{{"address", n.address()}, {"pid", ::getpid()}};
    if (!metrics_address.empty()) {
      line += ", metrics on http://" + metrics_address + "/metrics";
      f["metrics"] = metrics_address;
    }
    log.info("listening", line, std::move(f));
  }
  auto status_now = [&](const std::string& error) { return status_json(n, metrics_address, error); };
  write_status(opt.json_status, status_now({}));

  // Set once the node leaves or stops: a join still retrying gives up.
  std::atomic<bool> give_up{false};
  auto pending = contacts.empty()
                   ? n.found(vnodes)
                   : join_with_retries(n, contacts, vnodes, std::chrono::seconds(*join_timeout_s),
                                       give_up);

  // SIGINT/SIGTERM: leave gracefully (a second signal stops at once), then stop.
  auto leave_and_stop = [&]() -> int {
    give_up = true;
    int code = 0;
    if (n.state() == supervisor::status::member) {
      log.info("signal", "signal: leaving");
      auto left = n.leave();
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*leave_ms);
      bool again = false;
      while (left.wait_for(std::chrono::seconds(0)) != std::future_status::ready
             && std::chrono::steady_clock::now() < deadline && !again)
        again = wait_signal(std::chrono::milliseconds(20));
      if (again) {
        log.warn("signal", "second signal: stopping without finishing the leave");
        code = 1;
      } else if (left.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        log.error("leave_timeout", "leave timed out after " + std::to_string(*leave_ms) + " ms: stopping");
        code = 1;
      } else if (auto err = left.get()) {
        // The last member has nobody to hand its vnodes to: that is a clean end too.
        log.warn("leave_refused", "not leaving gracefully: " + err->message,
                 {{"code", to_string(err->code)}});
      }
    } else {
      log.info("signal", "signal: stopping (" + std::string(to_string(n.state())) + ")");
    }
    n.stop();
    write_status(opt.json_status, status_now({}));
    log.info("stopped", "stopped");
    return code;
  };

  if (opt.control) {
    // Wanted vnodes when joining again: those asked for at first (empty: a share).
    control_session session(n, contacts.empty() ? vnode_set{} : vnodes, write_line);
    auto write_now = [&] {
      dirty = false;
      write_status(opt.json_status, status_now({}));
    };
    return control_loop(n, log, session, signals, std::move(pending), opt.json_status, dirty,
                        write_now, leave_and_stop);
  }

  bool member = false;
  bool signalled = false;
  while (!signalled) {
    signalled = wait_signal(std::chrono::milliseconds(100));
    if (!member && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      if (auto err = pending.get()) {
        log.error("cannot_join", with_prefix("cannot join: ", err->message),
                  {{"code", to_string(err->code)}});
        n.stop();
        write_status(opt.json_status, status_now(err->to_string()));
        return 1;
      }
      member = true;
    }
    if (dirty.exchange(false))
      write_status(opt.json_status, status_now({}));
  }
  return leave_and_stop();
}

void add_node_command(CLI::App& app, std::function<int()>& action) {
  auto opt = std::make_shared<node_options>();
  auto cmd = app.add_subcommand("node", "run one processor over TCP as this process");
  cmd->add_option("--id", opt->id, "processor id (required)")->type_name("UINT");
  cmd->add_option("--listen", opt->listen, "host:port to listen on; port 0 picks one (required)")
    ->type_name("HOST:PORT");
  cmd->add_option("--advertise", opt->advertise, "host:port others reach us at (default: --listen with the bound port)")
    ->type_name("HOST:PORT");
  cmd->add_option("--join", opt->join,
                  "[id@]host:port of a member to join through (repeatable; a name stands for all its addresses)")
    ->type_name("[ID@]HOST:PORT");
  cmd->add_option("--join-file", opt->join_file,
                  "file of [id@]host:port contacts, one per line (default: $BANYAN_JOIN when no --join)")
    ->type_name("FILE");
  cmd->add_option("--join-timeout", opt->join_timeout_s,
                  "keep retrying the join this long, resolving names again (0: one attempt)")
    ->type_name("SECONDS");
  cmd->add_option("--vnodes", opt->vnodes, "vnodes, e.g. 0-1023: owned when founding (default 0-1023), wanted when joining (default a share)")
    ->type_name("VNODES");
  cmd->add_option("--secret-file", opt->secret_file, "file holding the cluster's shared secret (required)")
    ->type_name("FILE");
  cmd->add_option("--topology", opt->topology, "emulate this topology's links (processor p = its processor p)")
    ->type_name("NAME|FILE");
  cmd->add_option("--site", opt->site, "with --topology: the group this processor must be in")
    ->type_name("GROUP");
  cmd->add_option("--json-status", opt->json_status, "keep this JSON file up to date with our status (`banyan health` reads it)")
    ->type_name("FILE");
  cmd->add_option("--threads", opt->threads, "CAF worker threads (2)")->type_name("UINT");
  cmd->add_option("--busy-poll-us", opt->busy_poll_us,
                  "after activity, poll the sockets this long before sleeping, as MPI does (0: never; costs CPU)")
    ->type_name("MICROSECONDS");
  cmd->add_option("--handshakes-per-address", opt->handshakes_per_address,
                  "inbound connections in their handshake from one IP address (8); raise it to "
                  "the number of processes when many share one host's address")
    ->type_name("UINT");
  cmd->add_option("--forward-overhead-us", opt->forward_overhead_us,
                  "the latency rule's cost per child of a LAN parent, microseconds (default 20)")
    ->type_name("MICROSECONDS");
  cmd->add_flag("--no-bcast-acks", opt->no_bcast_acks,
                "broadcasts are not acknowledged to their origins: no resend after a crash and "
                "no outcome (broadcast_config::acknowledge; for comparisons)");
  cmd->add_option("--segment-kib", opt->segment_kib,
                  "segment size of every long broadcast, KiB (default: 64, doubled up to 1024 while a message still makes 64 segments)")
    ->type_name("KIB");
  cmd->add_option("--seed", opt->seed, "seeds the supervisor's randomness (0: random)")->type_name("UINT");
  cmd->add_option("--leave-timeout", opt->leave_timeout_ms, "ms to finish a graceful leave (10000)")->type_name("MS");
  cmd->add_option("--handshake-timeout", opt->handshake_timeout_ms,
                  "ms a connection's handshake may take, either side (default 2000 ours, 1000 theirs)")
    ->type_name("MS");
  cmd->add_option("--probe-timeout", opt->probe_timeout_ms,
                  "ms a probe, an offer or a join request waits for its answer (1000); "
                  "three probes unanswered in a row make the peer a suspect")
    ->type_name("MS");
  cmd->add_option("--suspect-timeout", opt->suspect_timeout_ms,
                  "ms a suspect has to answer a ping before it is taken for crashed (1000; 0: no suspicion)")
    ->type_name("MS");
  cmd->add_option("--crash-timeout", opt->crash_timeout_ms,
                  "ms a member may stay silent before it is taken to have crashed and its vnodes are adopted (10000; 0: only refused connections)")
    ->type_name("MS");
  cmd->add_option("--metrics", opt->metrics,
                  "serve GET /metrics (Prometheus text format) at this address; port 0 picks a free one (docs/observability.md)")
    ->type_name("IP:PORT");
  cmd->add_option("--log-level", opt->log_level, "error, warn, info (default) or debug")
    ->type_name("LEVEL")
    ->each([opt](const std::string&) { opt->log_level_given = true; });
  cmd->add_option("--log-format", opt->log_format, "text (default) or json: one JSON object per line")
    ->type_name("FORMAT");
  cmd->add_flag("-v,--verbose", opt->verbose, "--log-level debug: also every parent change and connection");
  cmd->add_flag("--plaintext", opt->plaintext,
                "send frames unencrypted (trusted networks only; every processor must agree)");
  cmd->add_flag("--control", opt->control,
                "take commands on stdin, answer in JSON lines on stdout (docs/cluster.md)");
  cmd->allow_extras();
  cmd->callback([opt, cmd, &action] {
    opt->extras = cmd->remaining();
    action = [opt] { return run_node(*opt); };
  });
}

} // namespace banyan::cli

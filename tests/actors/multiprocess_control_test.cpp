// Real `banyan node --control` processes (docs/cluster.md, the control protocol):
// broadcasts short and long, point-to-point, acks, reductions, leave and rejoin, every
// delivery exactly once; a process SIGKILLed mid-broadcast hangs nobody, and its vnodes
// are adopted: later broadcasts reach them exactly once and a reduction completes; a
// silent (stopped) node is taken for crashed and yields its vnodes when it wakes.

#include <boost/test/unit_test.hpp>

#include "multiprocess.hpp"

#ifdef BANYAN_CLI_PATH

using namespace banyan;
using namespace std::chrono_literals;
using namespace banyan::test;

// --- the control protocol ------------------------------------------------------------

namespace {

/// A `banyan node --control` child: commands through its stdin, JSON lines from its
/// stdout, its log (stderr) in a file.
struct ctl {
  proc_id id = no_proc;
  pid_t pid = -1;
  int in = -1;
  int out = -1;
  std::string log;
  std::string buffer;
  std::vector<nlohmann::json> events;
  std::uint16_t port = 0;
  std::string vnodes;
};

struct ctl_fixture : cluster_fixture {
  std::map<proc_id, ctl> nodes;

  ~ctl_fixture() {
    for (auto& [id, c] : nodes) {
      if (c.in >= 0)
        ::close(c.in);
      if (c.out >= 0)
        ::close(c.out);
    }
  }

  ctl& start(proc_id id, std::vector<std::string> extra) {
    auto& c = nodes[id];
    c.id = id;
    c.log = dir + "/ctl-" + std::to_string(id) + ".log";
    std::vector<std::string> all{BANYAN_CLI_PATH, "node", "--control", "--id", std::to_string(id),
                                 "--listen", "127.0.0.1:0", "--secret-file", secret, "--seed",
                                 std::to_string(id + 1)};
    all.insert(all.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int in_pipe[2], out_pipe[2];
    BOOST_REQUIRE(::pipe2(in_pipe, O_CLOEXEC) == 0 && ::pipe2(out_pipe, O_CLOEXEC) == 0);
    int fd = ::open(c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    BOOST_REQUIRE(fd >= 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    ::close(fd);
    BOOST_REQUIRE(pid > 0);
    running[pid] = c.log;
    c.pid = pid;
    c.in = in_pipe[1];
    c.out = out_pipe[0];
    ::fcntl(c.out, F_SETFL, O_NONBLOCK);
    auto ready = wait_event(c, "ready", 0, 20s);
    c.port = ready.at("port").get<std::uint16_t>();
    c.vnodes = ready.at("vnodes").get<std::string>();
    return c;
  }

  /// Every node's log, for failure messages.
  std::string all_logs() const {
    std::string text;
    for (auto& [id, c] : nodes)
      text += "\n--- node " + std::to_string(id) + " ---\n" + slurp(c.log);
    return text;
  }

  void send(ctl& c, const std::string& line) {
    auto text = line + "\n";
    BOOST_REQUIRE_MESSAGE(::write(c.in, text.data(), text.size()) == static_cast<ssize_t>(text.size()),
                          "cannot write to node " << c.id);
  }

  /// Reads whatever every node wrote, waiting at most `limit` for something.
  void pump(std::chrono::milliseconds limit) {
    std::vector<pollfd> fds;
    std::vector<ctl*> who;
    for (auto& [id, c] : nodes)
      if (c.out >= 0) {
        fds.push_back({c.out, POLLIN, 0});
        who.push_back(&c);
      }
    if (::poll(fds.data(), fds.size(), static_cast<int>(limit.count())) <= 0)
      return;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents)
        continue;
      auto& c = *who[i];
      char chunk[65536];
      ssize_t n;
      while ((n = ::read(c.out, chunk, sizeof chunk)) > 0)
        c.buffer.append(chunk, static_cast<std::size_t>(n));
      if (n == 0) {
        ::close(c.out);
        c.out = -1;
      }
      std::size_t nl;
      while ((nl = c.buffer.find('\n')) != std::string::npos) {
        auto j = nlohmann::json::parse(c.buffer.substr(0, nl), nullptr, false);
        BOOST_CHECK_MESSAGE(!j.is_discarded() && j.contains("ev") && j.contains("t_us"),
                            "node " << c.id << " wrote a line that is no event: " << c.buffer.substr(0, nl));
        c.buffer.erase(0, nl + 1);
        if (!j.is_discarded())
          c.events.push_back(j);
      }
    }
  }

  /// Pumps until `pred()` or `limit`.
  template <class F>
  bool until(std::chrono::milliseconds limit, F pred) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      pump(std::min(left, std::chrono::milliseconds(50)));
    }
    return true;
  }

  /// The events of `c` named `ev` (with `key` == `value`, when given).
  std::vector<nlohmann::json> events(const ctl& c, const std::string& ev, const std::string& key = {},
                                     const nlohmann::json& value = {}) {
    std::vector<nlohmann::json> out;
    for (auto& j : c.events)
      if (j.value("ev", "") == ev && (key.empty() || (j.contains(key) && j[key] == value)))
        out.push_back(j);
    return out;
  }

  /// The `n`-th (0-based) event `ev` of `c`, waited for at most `limit`.
  nlohmann::json wait_event(ctl& c, const std::string& ev, std::size_t n, std::chrono::milliseconds limit) {
    bool ok = until(limit, [&] { return events(c, ev).size() > n; });
    BOOST_REQUIRE_MESSAGE(ok, "node " << c.id << ": no \"" << ev << "\" event #" << n << "; log:\n"
                                      << slurp(c.log));
    return events(c, ev)[n];
  }

  /// The delivered events of `op`, per node: vnodes reached and lines.
  std::map<proc_id, std::pair<std::size_t, std::size_t>> deliveries(const std::string& op) {
    std::map<proc_id, std::pair<std::size_t, std::size_t>> out;
    for (auto& [id, c] : nodes)
      for (auto& j : events(c, "delivered", "op", op)) {
        out[id].first += j.at("vnodes").get<std::size_t>();
        ++out[id].second;
        BOOST_TEST(j.at("ok").get<bool>(), "node " << id << ": payload of " << op << " damaged");
      }
    return out;
  }

  /// Broadcasts `bytes` from `from`; waits until `vnodes` vnodes have it. Returns its op.
  std::string broadcast(ctl& from, std::size_t bytes, std::size_t vnodes) {
    auto had = events(from, "bcast").size();
    send(from, "bcast " + std::to_string(bytes));
    auto started = wait_event(from, "bcast", had, 20s);
    auto op = started.at("op").get<std::string>();
    BOOST_TEST(started.at("size").get<std::size_t>() == bytes);
    auto reached = [&] {
      std::size_t n = 0;
      for (auto& [id, d] : deliveries(op))
        n += d.first;
      return n;
    };
    BOOST_REQUIRE_MESSAGE(until(30s, [&] { return reached() >= vnodes; }),
                          "broadcast " << op << " reached " << reached() << " of " << vnodes << " vnodes");
    pump(200ms); // a duplicate would show up now
    BOOST_TEST(reached() == vnodes, "broadcast " << op << ": every vnode exactly once");
    return op;
  }

  int quit(ctl& c) {
    send(c, "quit");
    auto code = wait_exit(c.pid, 10s);
    BOOST_REQUIRE_MESSAGE(code.has_value(), "node " << c.id << " did not quit: " << slurp(c.log));
    return *code;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(control_protocol_broadcast_send_reduce_leave_rejoin, ctl_fixture) {
  // Four processes, ten vnodes each: 0 founds with 0-39, k joins asking for its ten.
  auto& n0 = start(0, {"--vnodes", "0-39"});
  const auto contact = "0@127.0.0.1:" + std::to_string(n0.port);
  for (proc_id k = 1; k < 4; ++k) {
    auto& c = start(k, {"--join", contact, "--vnodes", std::to_string(10 * k) + "-" + std::to_string(10 * k + 9)});
    BOOST_TEST(c.vnodes == std::to_string(10 * k) + "-" + std::to_string(10 * k + 9));
  }
  auto& n1 = nodes[1];
  auto& n2 = nodes[2];
  auto& n3 = nodes[3];

  // Broadcasts, short and long: every node gets its ten vnodes once, the payload intact.
  for (auto [from, bytes] : {std::pair<proc_id, std::size_t>{0, 1}, {2, 3u << 20}, {3, 0}}) {
    auto op = broadcast(nodes[from], bytes, 40);
    for (auto& [id, d] : deliveries(op))
      BOOST_TEST(d.first == 10u, "node " << id << " got " << d.first << " vnodes of " << op);
    for (auto& [id, c] : nodes)
      for (auto& j : events(c, "delivered", "op", op)) {
        BOOST_TEST(j.at("kind").get<std::string>() == "broadcast");
        BOOST_TEST(j.at("size").get<std::size_t>() == bytes);
      }
  }

  // Point-to-point: vnode 25 lives at node 2.
  send(n0, "send 25 1000");
  auto sent = wait_event(n0, "sent", 0, 10s);
  auto msg = sent.at("op").get<std::string>();
  BOOST_REQUIRE(until(10s, [&] { return !events(n2, "delivered", "op", msg).empty(); }));
  pump(200ms);
  auto got = events(n2, "delivered", "op", msg);
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].at("kind").get<std::string>() == "message");
  BOOST_TEST(got[0].at("vnodes").get<std::size_t>() == 1u);
  BOOST_TEST(got[0].at("size").get<std::size_t>() == 1000u);
  BOOST_TEST(got[0].at("ok").get<bool>());
  for (auto* c : {&n0, &n1, &n3})
    BOOST_TEST(events(*c, "delivered", "op", msg).empty());

  // Acks: with `command` taken by every node, a broadcast from `origin` is acked by the
  // three others, and no node reports an error.
  auto acks_round = [&](const std::string& command, ctl& origin) {
    std::map<proc_id, std::size_t> errors_before;
    for (auto& [id, c] : nodes) { // "status" answered: "acks" taken before the broadcast
      errors_before[id] = events(c, "error").size();
      auto had = events(c, "status").size();
      send(c, command);
      send(c, "status");
      wait_event(c, "status", had, 5s);
    }
    auto op = broadcast(origin, 100, 40);
    auto acked = wait_event(origin, "acked", 0, 10s);
    BOOST_TEST(acked.at("op").get<std::string>() == op, command);
    BOOST_TEST(acked.at("acks").get<int>() == 3, command);
    BOOST_TEST(acked.at("t_us").get<std::int64_t>()
               >= wait_event(origin, "bcast", 0, 1s).at("t_us").get<std::int64_t>());
    for (auto& [id, c] : nodes) {
      BOOST_TEST(events(c, "error").size() == errors_before[id], "node " << id << ": " << slurp(c.log));
      send(c, "acks off");
    }
  };
  // First without targets (the vnode each node's routing table gives the origin): targets
  // given later are kept, and would hide the lookup.
  acks_round("acks on", n2);
  acks_round("acks on 0:0 1:10 2:20 3:30", n1);

  // Reductions: every member gets the same commands in the same order.
  for (auto& [id, c] : nodes) {
    send(c, "reduce 1 0 1000 sum int32");
    send(c, "reduce 2 15 300 max double");
    send(c, "reduce 3 39 50 prod int64");
  }
  struct expect { std::uint64_t seq; proc_id root_owner; };
  for (auto e : {expect{1, 0}, expect{2, 1}, expect{3, 3}}) {
    auto& owner = nodes[e.root_owner];
    BOOST_REQUIRE_MESSAGE(until(20s, [&] { return !events(owner, "reduced", "seq", std::to_string(e.seq)).empty(); }),
                          "no result of reduction " << e.seq << ": " << slurp(owner.log));
    auto r = events(owner, "reduced", "seq", std::to_string(e.seq))[0];
    BOOST_TEST(r.at("ok").get<bool>(), "reduction " << e.seq);
    BOOST_TEST(r.at("vnodes").get<std::size_t>() == 40u);
    for (auto& [id, c] : nodes)
      if (id != e.root_owner) {
        BOOST_REQUIRE(until(10s, [&] { return !events(c, "reduce_sent", "seq", std::to_string(e.seq)).empty(); }));
        BOOST_TEST(events(c, "reduced", "seq", std::to_string(e.seq)).empty());
      }
  }

  // Allreduce, barrier, allgather: every member gets the result, checked against every
  // vnode's contribution (ten blocks per node in the allgather).
  for (auto& [id, c] : nodes) {
    send(c, "allreduce 1 7 1000 sum int32");
    send(c, "barrier 1");
    send(c, "allgather 1 0 100");
  }
  for (auto& [id, c] : nodes) {
    for (auto [ev, what] : {std::pair<const char*, const char*>{"allreduced", "allreduce"},
                            {"released", "barrier"},
                            {"allgathered", "allgather"}}) {
      BOOST_REQUIRE_MESSAGE(until(20s, [&, ev = ev] { return !events(c, ev, "seq", "1").empty(); }),
                            "node " << id << ": no " << what << " result: " << slurp(c.log));
      auto r = events(c, ev, "seq", "1");
      BOOST_TEST(r.size() == 1u, what);
      if (std::string(ev) != "released") {
        BOOST_TEST(r[0].at("ok").get<bool>(), "node " << id << ": " << what);
        BOOST_TEST(r[0].at("vnodes").get<std::size_t>() == 40u, what);
      }
    }
    BOOST_TEST(events(c, "allreduced", "seq", "1")[0].at("own").get<std::size_t>() == 10u);
  }

  // Bad commands: one error line each, and the process goes on.
  for (auto bad : {"bcast", "bcast -1", "send x 1", "reduce 1 0 10 xor int32", "frobnicate", "acks maybe",
                   "join", "allreduce 2 0 10 sum", "barrier", "barrier x", "allgather 2 0 0",
                   "allgather 2 0"}) {
    auto had = events(n3, "error").size();
    send(n3, bad);
    auto e = wait_event(n3, "error", had, 5s);
    BOOST_TEST(!e.at("detail").get<std::string>().empty(), bad);
  }
  send(n3, "status");
  auto st = wait_event(n3, "status", 0, 5s);
  BOOST_TEST(st.at("state").get<std::string>() == "member");
  BOOST_TEST(st.at("members").size() == 4u);

  // Node 3 leaves: its vnodes move, a broadcast still reaches all 40, none at node 3.
  send(n3, "leave");
  wait_event(n3, "left", 0, 15s);
  auto op = broadcast(n0, 2000, 40);
  BOOST_TEST(deliveries(op).count(3) == 0u);
  // It rejoins asking for its vnodes back, and gets them.
  send(n3, "join " + contact);
  wait_event(n3, "ready", 1, 20s);
  // The vnodes it asked for come over once the others hand them.
  BOOST_REQUIRE_MESSAGE(until(20s, [&] {
                          auto had = events(n3, "status").size();
                          send(n3, "status");
                          return wait_event(n3, "status", had, 5s).at("vnodes").get<std::string>() == "30-39";
                        }),
                        "node 3 did not get its vnodes back: " << slurp(n3.log));
  BOOST_REQUIRE(until(20s, [&] {
    // The others see it again before the next broadcast counts on it.
    for (auto* c : {&n0, &n1, &n2}) {
      auto had = events(*c, "status").size();
      send(*c, "status");
      auto s = wait_event(*c, "status", had, 5s);
      if (s.at("members").size() != 4u)
        return false;
    }
    return true;
  }));
  op = broadcast(n2, 1u << 20, 40);
  BOOST_TEST(deliveries(op)[3].first == 10u);

  for (auto& [id, c] : nodes)
    BOOST_TEST(quit(c) == 0, "node " << id << ": " << slurp(c.log));
}

BOOST_FIXTURE_TEST_CASE(a_process_killed_mid_broadcast_hangs_nobody, ctl_fixture) {
  auto& n0 = start(0, {"--vnodes", "0-3"});
  const auto contact = "0@127.0.0.1:" + std::to_string(n0.port);
  for (proc_id k = 1; k < 4; ++k)
    start(k, {"--join", contact, "--vnodes", std::to_string(k)});
  // Node 2 dies while an 8 MiB broadcast passes through the trees.
  send(n0, "bcast 8388608");
  wait_event(n0, "bcast", 0, 10s);
  BOOST_REQUIRE(::kill(nodes[2].pid, SIGKILL) == 0);
  BOOST_REQUIRE(wait_exit(nodes[2].pid, 5s).has_value());
  ::close(nodes[2].in);
  nodes[2].in = -1;
  auto op = events(n0, "bcast")[0].at("op").get<std::string>();
  // Whatever reached the survivors reached them at most once (node 2 may have taken
  // segments with it that nobody else holds: the broadcast need not complete, but
  // nothing may wait for it forever).
  until(10s, [&] {
    auto d = deliveries(op);
    return d[0].first == 1 && d[1].first == 1 && d[3].first == 1;
  });
  {
    auto d = deliveries(op);
    BOOST_TEST_MESSAGE("the broadcast cut by the SIGKILL reached nodes 0/1/3: " << d[0].first << "/"
                       << d[1].first << "/" << d[3].first << " vnodes");
    for (proc_id k : {0u, 1u, 3u})
      BOOST_TEST(d[k].first <= 1u, "node " << k << ": a vnode got it twice");
  }
  // They notice the death, answer, and go on broadcasting among themselves.
  for (proc_id k : {0u, 1u, 3u}) {
    auto& c = nodes[k];
    BOOST_REQUIRE_MESSAGE(until(20s, [&] {
                            auto had = events(c, "status").size();
                            send(c, "status");
                            auto s = wait_event(c, "status", had, 5s);
                            return s.at("members").size() == 3u;
                          }),
                          "node " << k << " still counts the dead one: " << slurp(c.log));
  }
  // Node 3, the next member after 2, adopts its vnode: it owns vnodes 2 and 3.
  BOOST_REQUIRE_MESSAGE(until(20s, [&] {
                          auto had = events(nodes[3], "status").size();
                          send(nodes[3], "status");
                          return wait_event(nodes[3], "status", had, 5s).at("vnodes").get<std::string>() == "2-3";
                        }),
                        "node 3 did not adopt the dead node's vnode: " << slurp(nodes[3].log));
  BOOST_TEST(slurp(nodes[3].log).find("adopted from crashed processor 2") != std::string::npos,
             "no log line for the adoption: " << slurp(nodes[3].log));
  // The cut broadcast: still at most once per vnode (node 3 may have got vnode 2's part).
  {
    auto d = deliveries(events(n0, "bcast")[0].at("op").get<std::string>());
    BOOST_TEST(d[3].first <= 2u);
  }
  // The survivors' next broadcasts reach every vnode, the adopted one too, exactly once.
  op = broadcast(nodes[3], 65536, 4);
  BOOST_TEST(deliveries(op)[3].first == 2u);
  op = broadcast(n0, 1u << 20, 4);
  BOOST_TEST(deliveries(op)[3].first == 2u);
  // A reduction completes, counting the adopted vnode once, with the right value.
  for (proc_id k : {0u, 1u, 3u})
    send(nodes[k], "reduce 1 0 1000 sum int32");
  BOOST_REQUIRE_MESSAGE(until(20s, [&] { return !events(n0, "reduced", "seq", "1").empty(); }),
                        "no result of the reduction after the crash: " << slurp(n0.log));
  auto r = events(n0, "reduced", "seq", "1")[0];
  BOOST_TEST(r.at("ok").get<bool>());
  BOOST_TEST(r.at("vnodes").get<std::size_t>() == 4u);
  for (proc_id k : {0u, 1u, 3u})
    BOOST_TEST(quit(nodes[k]) == 0);
}

// A node that goes silent without closing its connections (SIGSTOP: as a power loss or a
// partition looks) is found by its predecessor's watch within --crash-timeout, and its
// successor adopts its vnode; woken up (SIGCONT), it learns it was buried, gives the vnode
// up and comes back as a new incarnation: one owner per vnode throughout.
BOOST_FIXTURE_TEST_CASE(a_silent_node_is_taken_for_crashed_and_yields_its_vnodes_on_waking, ctl_fixture) {
  const std::vector<std::string> fast{"--crash-timeout", "1000"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), fast.begin(), fast.end());
    return a;
  };
  auto& n0 = start(0, with({"--vnodes", "0-3"}));
  const auto contact = "0@127.0.0.1:" + std::to_string(n0.port);
  for (proc_id k = 1; k < 4; ++k)
    start(k, with({"--join", contact, "--vnodes", std::to_string(k)}));
  auto status_of = [&](proc_id k) {
    auto& c = nodes[k];
    auto had = events(c, "status").size();
    send(c, "status");
    return wait_event(c, "status", had, 5s);
  };
  auto all_see = [&](std::vector<proc_id> who, std::size_t members) {
    return until(20s, [&] {
      for (auto k : who)
        if (status_of(k).at("members").size() != members)
          return false;
      return true;
    });
  };
  BOOST_REQUIRE(all_see({0, 1, 2, 3}, 4));
  BOOST_REQUIRE(::kill(nodes[1].pid, SIGSTOP) == 0);
  // Node 0 watches node 1; node 2, the next member after it, adopts vnode 1.
  BOOST_REQUIRE_MESSAGE(until(20s, [&] { return status_of(2).at("vnodes").get<std::string>() == "1-2"; }),
                        "node 2 did not adopt the silent node's vnode: " << slurp(nodes[2].log));
  BOOST_TEST(slurp(n0.log).find("member_crashed: processor 1") != std::string::npos, slurp(n0.log));
  BOOST_TEST(slurp(nodes[2].log).find("adopted from crashed processor 1") != std::string::npos);
  BOOST_REQUIRE(all_see({0, 2, 3}, 3));
  auto op = broadcast(nodes[3], 1000, 4);
  BOOST_TEST(deliveries(op)[2].first == 2u);
  // Awake again: it hears the crash notice, yields vnode 1 and rejoins without vnodes.
  BOOST_REQUIRE(::kill(nodes[1].pid, SIGCONT) == 0);
  BOOST_REQUIRE_MESSAGE(until(20s, [&] { return status_of(1).at("vnodes").get<std::string>().empty(); }),
                        "node 1 still claims vnodes: " << all_logs());
  BOOST_TEST(slurp(nodes[1].log).find("vnodes_disowned") != std::string::npos, slurp(nodes[1].log));
  BOOST_REQUIRE(all_see({0, 1, 2, 3}, 4));
  BOOST_TEST(status_of(2).at("vnodes").get<std::string>() == "1-2");
  // Every vnode exactly once, none at node 1; a reduction counts each once.
  op = broadcast(n0, 1u << 20, 4);
  BOOST_TEST(deliveries(op)[1].first == 0u);
  BOOST_TEST(deliveries(op)[2].first == 2u);
  for (auto& [id, c] : nodes)
    send(c, "reduce 1 3 100 sum int64");
  BOOST_REQUIRE_MESSAGE(until(20s, [&] { return !events(nodes[3], "reduced", "seq", "1").empty(); }),
                        "no result of the reduction: " << slurp(nodes[3].log));
  auto r = events(nodes[3], "reduced", "seq", "1")[0];
  BOOST_TEST(r.at("ok").get<bool>());
  BOOST_TEST(r.at("vnodes").get<std::size_t>() == 4u);
  for (auto& [id, c] : nodes)
    BOOST_TEST(quit(c) == 0, "node " << id << ": " << slurp(c.log));
}

#else

BOOST_AUTO_TEST_CASE(skipped_without_the_cli) {
  BOOST_TEST_MESSAGE("BANYAN_CLI_PATH is not set (demos off): nothing to run");
  BOOST_TEST(true);
}

#endif

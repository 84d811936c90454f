// Strangers that open connections and never speak, against real `banyan node`
// processes: from many addresses they evict no member and split nothing; from the
// members' own address they may get a member suspected, never buried.

#include <boost/test/unit_test.hpp>

#include "multiprocess.hpp"

#ifdef BANYAN_CLI_PATH

using namespace banyan;
using namespace std::chrono_literals;
using namespace banyan::test;


// --- a flood of strangers ----------------------------------------------------------

namespace {

/// A non-blocking TCP connection to 127.0.0.1:port from the local address `source`
/// (every 127.x.y.z is local on Linux); -1 when it cannot be bound.
int connect_from(const char* source, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to); // EINPROGRESS
  return fd;
}

/// Strangers without the secret: `sockets` silent connections to `port` from 40
/// addresses (or all from `source`), each reopened as soon as it is closed, until the
/// flood is destroyed.
struct stranger_flood {
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> opened{0};
  std::thread t;
  stranger_flood(std::uint16_t port, std::size_t sockets, std::string source = {}) {
    t = std::thread([this, port, sockets, source] {
      std::vector<std::string> from(sockets);
      for (std::size_t i = 0; i < sockets; ++i)
        from[i] = !source.empty() ? source : "127.0.1." + std::to_string(10 + i % 40);
      std::vector<int> fds(sockets, -1);
      std::vector<pollfd> p(sockets);
      while (!stop) {
        for (std::size_t i = 0; i < sockets; ++i) {
          if (fds[i] < 0) {
            fds[i] = connect_from(from[i].c_str(), port);
            ++opened;
          }
          p[i] = {fds[i], POLLIN, 0};
        }
        if (::poll(p.data(), p.size(), 20) <= 0)
          continue;
        char scratch[256];
        for (std::size_t i = 0; i < sockets; ++i)
          if (p[i].revents != 0 && ::recv(fds[i], scratch, sizeof scratch, 0) <= 0) {
            ::close(fds[i]); // closed by the node (or failed): open another at once
            fds[i] = -1;
          }
      }
      for (auto fd : fds)
        if (fd >= 0)
          ::close(fd);
    });
  }
  ~stranger_flood() {
    stop = true;
    t.join();
  }
};

/// How many lines of `log` contain `what`.
std::size_t count_lines(const std::string& log, const std::string& what) {
  std::size_t n = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    n += line.find(what) != std::string::npos ? 1 : 0;
  return n;
}

/// Lines of `log` that report a member taken for crashed or vnodes lost to one.
std::string crash_lines(const std::string& log) {
  std::string out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find("member_crashed") != std::string::npos
        || line.find("vnodes_adopted") != std::string::npos
        || line.find("vnodes_disowned") != std::string::npos)
      out += line + "\n";
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(a_flood_of_strangers_evicts_no_member_and_splits_nothing, cluster_fixture) {
  // Two members; strangers without the secret hold 360 silent sockets to node 0, each
  // reopened as soon as it is closed; a third processor joins through node 1 meanwhile
  // and must reach node 0 through the flood. Nobody is taken for crashed, and once the
  // flood stops the three agree on one owner for each of the 1024 vnodes.
  const auto all = vnode_set::range(0, 1024);
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--vnodes", "0-1023"}));
  ps.push_back(start_node(*this, 1, {"--join", address_of(ps[0])}));
  require_converged(ps, &all, 20s);
  std::size_t opened = 0;
  {
    stranger_flood flood(ps[0].port, 360);
    BOOST_REQUIRE(poll_until(10s, [&] { return flood.opened.load() >= 3 * 360; }));
    ps.push_back(start_node(*this, 2, {"--join", address_of(ps[1])}));
    require_converged(ps, &all, 30s);
    std::this_thread::sleep_for(2s); // the flood goes on: still nobody evicted
    opened = flood.opened.load();
  }
  BOOST_TEST_MESSAGE("flood: " << opened << " connections opened");
  std::this_thread::sleep_for(1s);
  require_converged(ps, &all, 15s);
  for (auto& p : ps) {
    auto s = read_status(p.status_file);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST(s->members.size() == 3u, "node " << p.id);
    const auto lines = crash_lines(slurp(p.log_file));
    BOOST_TEST(lines.empty(), "node " << p.id << ": " << lines);
  }
  stop_all(*this, ps);
}

BOOST_FIXTURE_TEST_CASE(a_flood_from_the_members_own_address_gets_a_member_suspected_never_buried,
                        cluster_fixture) {
  // Strangers flood node 0 from 127.0.0.1, the address every member connects from, so
  // the per-address budget cannot tell them apart: the flood holds node 0's handshake
  // slots for that address, and a processor joining through node 1 has its connections
  // to node 0 refused. That is the evidence an attacker can drive; it makes node 0 a
  // suspect of the joiner, and node 1, whose connection to node 0 is authenticated and
  // outside the strangers' budget, answers for it (an indirect ping). Nobody is taken
  // for crashed, during the flood or after, and once it stops the three agree on one
  // owner for each vnode.
  const auto all = vnode_set::range(0, 1024);
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--vnodes", "0-1023"}));
  ps.push_back(start_node(*this, 1, {"--join", address_of(ps[0])}));
  require_converged(ps, &all, 20s);
  std::size_t opened = 0;
  {
    stranger_flood flood(ps[0].port, 64, "127.0.0.1");
    BOOST_REQUIRE(poll_until(10s, [&] { return flood.opened.load() >= 3 * 64; }));
    ps.push_back(start_node(*this, 2, {"--join", address_of(ps[1])}));
    // The joiner suspects node 0 (its connections refused), and the suspicion clears.
    BOOST_REQUIRE_MESSAGE(poll_until(30s, [&] {
                            return count_lines(slurp(ps[2].log_file), "suspicion_cleared") > 0;
                          }),
                          "node 2 never suspected node 0, or never cleared it: "
                            << slurp(ps[2].log_file) << slurp(ps[1].log_file) << slurp(ps[0].log_file));
    std::this_thread::sleep_for(3s); // the flood goes on: still nobody buried
    opened = flood.opened.load();
  }
  BOOST_TEST_MESSAGE("flood: " << opened << " connections opened");
  require_converged(ps, &all, 30s);
  for (auto& p : ps) {
    auto s = read_status(p.status_file);
    BOOST_REQUIRE(s.has_value());
    BOOST_TEST(s->members.size() == 3u, "node " << p.id);
    const auto log = slurp(p.log_file);
    const auto lines = crash_lines(log);
    BOOST_TEST(lines.empty(), "node " << p.id << ": " << lines);
    BOOST_TEST_MESSAGE("node " << p.id << ": " << count_lines(log, "member_suspected")
                               << " suspected, " << count_lines(log, "suspicion_cleared")
                               << " cleared");
  }
  stop_all(*this, ps);
}

#else

BOOST_AUTO_TEST_CASE(skipped_without_the_cli) {
  BOOST_TEST_MESSAGE("BANYAN_CLI_PATH is not set (demos off): nothing to run");
  BOOST_TEST(true);
}

#endif

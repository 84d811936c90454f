// Real `banyan node` processes on 127.0.0.1, each on an ephemeral port it reports in its
// --json-status file: they join and form trees; one leaves on SIGTERM and the others heal;
// a SIGKILLed one is found unreachable and the others heal; links shaped after a
// topology; a wrong secret is refused; a second process under a live member's id is
// refused and changes nothing; a killed member restarted under its id comes back; bad
// arguments exit with 2. Every wait has a deadline (tests/actors/multiprocess.hpp).

#include <boost/test/unit_test.hpp>

#include "multiprocess.hpp"

#ifdef BANYAN_CLI_PATH

using namespace banyan;
using namespace std::chrono_literals;
using namespace banyan::test;


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
  stop_all(*this, ps);
}

BOOST_FIXTURE_TEST_CASE(links_shaped_after_a_topology, cluster_fixture) {
  // tiny-2c8: processors 0-3 in cluster A, 4-7 in B, 2 ms RTT and 100 Mbit/s between
  // them. The shaper delays and paces every frame; trees must still form.
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--topology", "tiny-2c8", "--site", "A"}));
  for (proc_id id : {1u, 4u, 5u})
    ps.push_back(start_node(*this, id, {"--topology", "tiny-2c8", "--join", address_of(ps[0])}));
  require_converged(ps, nullptr, 15s);
  stop_all(*this, ps);
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

// --- one process per id ------------------------------------------------------------

namespace {

/// What a node's status file says about the things a second process under a member's id
/// must not change: its vnodes, the members and their incarnations, its routes, its trees.
struct member_view {
  std::string state;
  nlohmann::json own, members, routes, trees;
  bool operator==(const member_view& o) const {
    return state == o.state && own == o.own && members == o.members && routes == o.routes
           && trees == o.trees;
  }
};

std::optional<member_view> view_of(const proc& p) {
  auto j = nlohmann::json::parse(slurp(p.status_file), nullptr, false);
  if (j.is_discarded())
    return std::nullopt;
  member_view v{j.at("state").get<std::string>(), j.at("own_vnode_intervals"), j.at("members"),
                j.at("routes"), nlohmann::json::array()};
  for (auto& t : j.at("trees"))
    v.trees.push_back({t.at("root"), t.at("kind"), t.at("parent")});
  return v;
}

std::map<proc_id, member_view> views_of(const std::vector<proc>& ps) {
  std::map<proc_id, member_view> out;
  for (auto& p : ps) {
    auto v = view_of(p);
    BOOST_REQUIRE_MESSAGE(v.has_value(), "node " << p.id << ": no status");
    out[p.id] = *v;
  }
  return out;
}

/// Waits until the status files have not changed for `quiet` (the trees settled).
std::map<proc_id, member_view> settled_views(const std::vector<proc>& ps,
                                             std::chrono::milliseconds quiet,
                                             std::chrono::milliseconds limit) {
  auto last = views_of(ps);
  auto since = std::chrono::steady_clock::now();
  poll_until(limit, [&] {
    auto now = views_of(ps);
    if (!(now == last)) {
      last = now;
      since = std::chrono::steady_clock::now();
    }
    return std::chrono::steady_clock::now() - since >= quiet;
  });
  return last;
}

std::uint64_t incarnation_of(const member_view& v, proc_id id) {
  for (auto& m : v.members)
    if (m.at("id").get<proc_id>() == id)
      return std::stoull(m.at("incarnation").get<std::string>()); // 64-bit: a string
  return 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(one_process_per_id)

// A second `banyan node --id 1` while processor 1 runs: refused with "id 1 is in use"
// and exit 1, joining through another member and through processor 1 itself; every
// member's view (vnodes, incarnations, routes, trees) is what it was, and no connection
// of processor 1 was closed or replaced.
BOOST_FIXTURE_TEST_CASE(a_second_process_under_a_live_members_id_is_refused, cluster_fixture) {
  const auto all = vnode_set::range(0, 1000);
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--vnodes", "0-999", "-v"}));
  for (proc_id id : {1u, 2u})
    ps.push_back(start_node(*this, id, {"--join", address_of(ps[0]), "-v"}));
  require_converged(ps, &all, 20s);
  const auto before = settled_views(ps, 1500ms, 20s);
  std::map<proc_id, std::size_t> log_size;
  for (auto& p : ps)
    log_size[p.id] = slurp(p.log_file).size();

  int attempt = 0;
  for (const proc* contact : {&ps[0], &ps[1]}) {
    BOOST_TEST_CONTEXT("joining through node " << contact->id) {
      const auto name = "impostor-" + std::to_string(attempt++);
      auto impostor = start_node(*this, 1, {"--join", address_of(*contact)}, {}, name);
      auto code = wait_exit(impostor.pid, 20s);
      auto log = slurp(impostor.log_file);
      BOOST_REQUIRE_MESSAGE(code.has_value(), "the impostor did not give up: " << log);
      BOOST_TEST(*code == 1, log);
      BOOST_TEST(log.find("node 1: error: cannot join: ") != std::string::npos, log);
      BOOST_TEST(log.find("id 1 is in use") != std::string::npos, log);
      auto failed = nlohmann::json::parse(slurp(impostor.status_file), nullptr, false);
      BOOST_REQUIRE(!failed.is_discarded());
      BOOST_TEST(failed.value("error", "").find("id_in_use: ") == 0u, failed.dump());
      // The member that refused says so in its log (rate-limited).
      auto refuser = slurp(contact->log_file);
      BOOST_TEST(refuser.find("id 1 is in use", log_size[contact->id]) != std::string::npos,
                 refuser);
    }
  }

  std::this_thread::sleep_for(1s); // time for any consequence to show
  const auto after = views_of(ps);
  for (auto& p : ps) {
    BOOST_TEST_CONTEXT("node " << p.id) {
      BOOST_TEST(after.at(p.id).state == "member");
      BOOST_TEST(after.at(p.id).own == before.at(p.id).own);
      BOOST_TEST(after.at(p.id).members == before.at(p.id).members);
      BOOST_TEST(incarnation_of(after.at(p.id), 1) == incarnation_of(before.at(1), 1));
      BOOST_TEST(after.at(p.id).routes == before.at(p.id).routes);
      BOOST_TEST(after.at(p.id).trees == before.at(p.id).trees);
      auto log = slurp(p.log_file).substr(log_size[p.id]);
      for (auto bad : {"member_crashed", "vnodes_adopted", "vnodes_disowned", "member_left",
                       "peer_down", "replaced by a newer connection"})
        BOOST_TEST(log.find(bad) == std::string::npos, bad << " in: " << log);
    }
  }
  stop_all(*this, ps);
}

// Processor 1 SIGKILLed and started again under its id, at its old address: accepted (the
// process that answers there now is the one claiming the id), a new incarnation, and
// the computation converges with every vnode owned.
BOOST_FIXTURE_TEST_CASE(a_member_killed_and_restarted_under_its_id_comes_back, cluster_fixture) {
  const auto all = vnode_set::range(0, 1000);
  std::vector<proc> ps;
  ps.push_back(start_node(*this, 0, {"--vnodes", "0-999"}));
  for (proc_id id : {1u, 2u})
    ps.push_back(start_node(*this, id, {"--join", address_of(ps[0])}));
  require_converged(ps, &all, 20s);
  const auto old_incarnation = incarnation_of(*view_of(ps[1]), 1);
  const auto old_address = address_of(ps[1]);

  BOOST_REQUIRE(::kill(ps[1].pid, SIGKILL) == 0);
  BOOST_REQUIRE(wait_exit(ps[1].pid, 5s).has_value());
  ps[1] = start_node(*this, 1, {"--join", address_of(ps[0])}, {}, "restarted", old_address);
  BOOST_TEST(address_of(ps[1]) == old_address);
  require_converged(ps, &all, 30s);
  const auto now = views_of(ps);
  const auto fresh = incarnation_of(now.at(1), 1);
  BOOST_TEST(fresh != old_incarnation);
  for (auto& p : ps)
    BOOST_TEST(incarnation_of(now.at(p.id), 1) == fresh, "node " << p.id);
  auto log = slurp(ps[1].log_file);
  BOOST_TEST(log.find("is in use") == std::string::npos, log);
  BOOST_TEST(log.find("node 1: joined") != std::string::npos, log);
  stop_all(*this, ps);
}

BOOST_AUTO_TEST_SUITE_END()

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

// Networks that change: scheduled bandwidth, RTT and load changes take effect at their
// time in virtual time (net/wan_model.hpp, core/network_change.hpp).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>

#include "banyan/net/wan_model.hpp"

using namespace banyan;
using namespace banyan::net;
using namespace std::chrono_literals;

namespace {

constexpr rate mbit = 1e6 / 8;
const wan_options exact{0};

/// Two clusters, no send overhead: 12.5 MB over the 100 Mbit link take exactly 1 s.
constexpr std::string_view two = R"(topology two
default nic 1Gbit
group A procs 4 rtt 0.2ms uplink 1Gbit
group B procs 4 rtt 0.2ms
link A B rtt 2ms bw 100Mbit
)";

topology with(std::string_view changes) {
  auto t = parse_topology(std::string(two) + std::string(changes));
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

/// Runs to the end; deliveries by id.
std::map<std::uint64_t, delivery> drain(wan_model& m) {
  std::map<std::uint64_t, delivery> out;
  for (auto t = m.next_event(); t; t = m.next_event())
    for (const auto& d : m.advance(*t))
      out.emplace(d.id, d);
  return out;
}

void check_time(timestamp got, timestamp want) {
  BOOST_CHECK_MESSAGE(std::abs((got - want).count()) <= 3,
                      "time " << got.count() << "ns, expected " << want.count() << "ns");
}

} // namespace

BOOST_AUTO_TEST_CASE(a_bandwidth_change_slows_a_transfer_from_its_time_on) {
  wan_model m(with("at 500ms link A B bw 50Mbit\n"), exact);
  const auto id = m.submit(0ns, 0, 4, 12'500'000);
  m.advance(0ns);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 100 * mbit, 1e-9);
  // The change is an event while something is in flight.
  BOOST_REQUIRE(m.next_event());
  check_time(*m.next_event(), 500ms);
  m.advance(499ms);
  BOOST_CHECK_EQUAL(m.changes_applied(), 0u);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 100 * mbit, 1e-9);
  m.advance(500ms);
  BOOST_CHECK_EQUAL(m.changes_applied(), 1u);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 50 * mbit, 1e-9);
  // Half sent at 100 Mbit in 0.5 s, the other half at 50 Mbit in 1 s, then 1 ms one way.
  auto ds = drain(m);
  BOOST_REQUIRE_EQUAL(ds.size(), 1u);
  check_time(ds.at(id).at, 1500ms + 1ms);
  BOOST_CHECK_CLOSE(m.topo().links[0].bw_ab, 50 * mbit, 1e-9);
}

BOOST_AUTO_TEST_CASE(cross_traffic_takes_its_share_and_gives_it_back) {
  wan_model m(with("at 200ms link A B load 60%\nat 700ms link A B load 0%\n"), exact);
  const auto id = m.submit(0ns, 0, 4, 12'500'000);
  m.advance(200ms);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 40 * mbit, 1e-9);
  m.advance(700ms);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 100 * mbit, 1e-9);
  // 0.2 s at 100, 0.5 s at 40 (= 0.2 s' worth), then the remaining 0.6 s at 100.
  auto ds = drain(m);
  check_time(ds.at(id).at, 1300ms + 1ms);
}

BOOST_AUTO_TEST_CASE(two_flows_share_the_changed_link) {
  wan_model m(with("at 100ms link A B bw 20Mbit\n"), exact);
  const auto x = m.submit(0ns, 0, 4, 1'000'000);
  const auto y = m.submit(0ns, 1, 5, 1'000'000);
  m.advance(0ns);
  BOOST_CHECK_CLOSE(*m.current_rate(x), 50 * mbit, 1e-9);
  m.advance(100ms);
  BOOST_CHECK_CLOSE(*m.current_rate(x), 10 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(*m.current_rate(y), 10 * mbit, 1e-9);
}

BOOST_AUTO_TEST_CASE(an_uplink_change_limits_everything_leaving_the_group) {
  wan_model m(with("at 1s uplink A bw 40Mbit\n"), exact);
  // Inside A nothing crosses the uplink; towards B it becomes the bottleneck.
  const auto local = m.submit(1500ms, 0, 1, 1'000'000);
  const auto wide = m.submit(1500ms, 0, 4, 1'000'000);
  m.advance(1500ms);
  BOOST_CHECK_EQUAL(m.changes_applied(), 1u); // nothing was in flight: applied on submit
  BOOST_CHECK_CLOSE(*m.current_rate(wide), 40 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(*m.current_rate(local), 1000 * mbit - 40 * mbit, 1e-9);
}

BOOST_AUTO_TEST_CASE(an_idle_network_reports_no_change_events) {
  wan_model m(with("at 1s link A B bw 50Mbit\n"), exact);
  BOOST_CHECK(!m.next_event());
  m.advance(2s);
  BOOST_CHECK_EQUAL(m.changes_applied(), 1u);
  BOOST_CHECK_CLOSE(m.topo().path_bandwidth(0, 4), 50 * mbit, 1e-9);
}

BOOST_AUTO_TEST_CASE(an_rtt_change_applies_to_later_messages_and_keeps_fifo) {
  // 2 ms -> 0.2 ms at 0.5 ms: a message sent before keeps its 1 ms one way; one sent
  // right after the change would arrive first, and waits for it (FIFO per pair).
  wan_model m(with("at 500us link A B rtt 0.2ms\nat 10ms link A B rtt 40ms\n"), exact);
  const auto a = m.submit(0ns, 0, 4, 100);
  const auto b = m.submit(600us, 0, 4, 100);
  const auto c = m.submit(800us, 1, 4, 100);
  auto ds = drain(m);
  const auto tx = duration{8000}; // 100 bytes at 100 Mbit
  check_time(ds.at(a).at, tx + 1ms);
  check_time(ds.at(b).at, tx + 1ms); // would be 600us + tx + 100us
  check_time(ds.at(c).at, 800us + tx + 100us);
  BOOST_CHECK(ds.at(a).at <= ds.at(b).at);
  const auto d = m.submit(20ms, 0, 4, 100);
  ds = drain(m);
  check_time(ds.at(d).at, 20ms + tx + 20ms);
  BOOST_CHECK(m.topo().rtt(0, 4) == 40ms);
}

BOOST_AUTO_TEST_CASE(the_same_changes_give_the_same_deliveries) {
  auto run = [] {
    wan_model m(with("at 3ms link A B bw 30Mbit\nat 9ms link A B load 25%\n"
                     "at 12ms uplink A load 90%\n"));
    for (int i = 0; i < 40; ++i)
      m.submit(duration{i * 500'000}, static_cast<proc_id>(i % 4),
               static_cast<proc_id>(4 + (i * 7) % 4), 20'000 + 1000 * static_cast<std::size_t>(i));
    std::vector<std::pair<std::uint64_t, std::int64_t>> out;
    for (auto& [id, d] : drain(m))
      out.emplace_back(id, d.at.count());
    return out;
  };
  const auto x = run();
  BOOST_CHECK_EQUAL(x.size(), 40u);
  BOOST_CHECK(x == run());
}

#include <boost/test/unit_test.hpp>

#include <string>

#include "banyan/core/network_change.hpp"
#include "banyan/core/topology.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

constexpr rate mbit = 1e6 / 8;

constexpr std::string_view base = R"(topology two
default nic 1Gbit
group A procs 4 rtt 0.2ms uplink 1Gbit
group B procs 4 rtt 0.2ms
group C procs 2 rtt 0.2ms
link A B rtt 2ms bw 100Mbit/80Mbit
link A C rtt 5ms
link B C rtt 6ms bw 50Mbit
)";

topology parse_ok(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

std::string parse_err(const std::string& extra) {
  auto t = parse_topology(std::string(base) + extra);
  BOOST_REQUIRE_MESSAGE(!t, "expected a parse error for: " << extra);
  BOOST_CHECK(t.err().code == errc::parse_error);
  return t.err().message;
}

} // namespace

BOOST_AUTO_TEST_CASE(at_lines_parse_into_sorted_changes) {
  auto t = parse_ok(std::string(base) + "at 5s link A B bw 50Mbit\n"
                                          "at 2s link B A rtt 40ms load 60%\n"
                                          "at 5s uplink A bw 200Mbit\n"
                                          "at 7s link B A bw 10Mbit/20Mbit\n");
  BOOST_REQUIRE_EQUAL(t.changes.size(), 4u);
  BOOST_CHECK(t.changes[0].at == 2s); // sorted by time, stable
  BOOST_CHECK(t.changes[0].rtt && *t.changes[0].rtt == 40ms);
  BOOST_CHECK(t.changes[0].load && std::abs(*t.changes[0].load - 0.6) < 1e-12);
  BOOST_CHECK(!t.changes[0].bw_ab);
  BOOST_CHECK(t.changes[1].at == 5s);
  BOOST_CHECK_EQUAL(t.changes[1].line, 9);
  BOOST_CHECK(t.changes[2].what == network_change::target::uplink);
  // Named B A: X is B -> A, i.e. the link's b -> a.
  BOOST_CHECK_CLOSE(*t.changes[3].bw_ab, 20 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(*t.changes[3].bw_ba, 10 * mbit, 1e-9);
  BOOST_CHECK_EQUAL(describe_change(t, t.changes[3]), "at 7s link A B bw 20Mbit/10Mbit");
  BOOST_CHECK_EQUAL(describe_change(t, t.changes[0]), "at 2s link A B rtt 40ms load 60%");
}

BOOST_AUTO_TEST_CASE(topology_at_applies_the_changes_due) {
  auto t = parse_ok(std::string(base) + "at 1s link A B load 50%\n"
                                          "at 2s link A B bw 40Mbit\n"
                                          "at 3s link A B load 0%\n"
                                          "at 3s link A B rtt 20ms\n"
                                          "at 4s uplink A load 75%\n");
  const auto ab = t.find_link(t.find_group("A"), t.find_group("B"));
  auto at = [&](duration d) { return topology_at(t, d); };
  BOOST_CHECK_CLOSE(at(0s).links[ab].bw_ab, 100 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(at(1s).links[ab].bw_ab, 50 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(at(1s).links[ab].bw_ba, 40 * mbit, 1e-9);
  // A new bandwidth keeps the load; a new load keeps the bandwidth.
  BOOST_CHECK_CLOSE(at(2s).links[ab].bw_ab, 20 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(at(2s).links[ab].bw_ba, 20 * mbit, 1e-9);
  BOOST_CHECK_CLOSE(at(3s).links[ab].bw_ab, 40 * mbit, 1e-9);
  BOOST_CHECK(at(3s).links[ab].rtt == 20ms);
  BOOST_CHECK(at(2999ms).links[ab].rtt == 2ms);
  BOOST_CHECK_CLOSE(at(4s).groups[t.find_group("A")].uplink, 250 * mbit, 1e-9);
  // The queries follow: a processor of A to one of B.
  BOOST_CHECK(at(3s).rtt(0, 4) == 20ms);
  BOOST_CHECK_CLOSE(at(4s).path_bandwidth(0, 4), 40 * mbit, 1e-9);
}

BOOST_AUTO_TEST_CASE(bad_at_lines_name_their_line) {
  BOOST_CHECK_EQUAL(parse_err("at 5s link A D bw 1Mbit\n"), "line 9: unknown group 'D'");
  BOOST_CHECK_EQUAL(parse_err("at 5 link A B bw 1Mbit\n"),
                    "line 9: missing time unit in '5' (use ns, us, ms or s)");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B load 100%\n"),
                    "line 9: load '100%' out of range (0% up to, not including, 100%)");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B load 60\n"),
                    "line 9: invalid load '60' (expected a percentage such as 60%)");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B bw inf\n"),
                    "line 9: a changed bandwidth must be finite, got 'inf'");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B\n"),
                    "line 9: nothing to change (expected 'at TIME link G1 G2 bw|rtt|load "
                    "VALUE...' or 'at TIME uplink G bw|load VALUE...')");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B jitter 3ms\n"),
                    "line 9: unknown change attribute 'jitter' (expected bw, rtt or load)");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A B bw\n"), "line 9: 'bw' needs a value");
  BOOST_CHECK_EQUAL(parse_err("at 5s link A C bw 1Mbit\n"),
                    "line 9: link between 'A' and 'C' has unlimited bandwidth: give it a 'bw' "
                    "in its link line to change it or load it");
  BOOST_CHECK_EQUAL(parse_err("at 5s uplink B bw 1Mbit\n"),
                    "line 9: group 'B' has no uplink: give it one ('uplink RATE') to change it "
                    "or load it");
  BOOST_CHECK_EQUAL(parse_err("at 5s uplink A rtt 1ms\n"),
                    "line 9: an uplink has no rtt (change the rtt of a link)");
  BOOST_CHECK_EQUAL(parse_err("at 5s wire A B bw 1Mbit\n"),
                    "line 9: unknown change target 'wire' (expected 'at TIME link G1 G2 "
                    "bw|rtt|load VALUE...' or 'at TIME uplink G bw|load VALUE...')");
  // A change may come before the lines it names: they are checked once all are read.
  auto t = parse_topology("at 1s link A B bw 1Mbit\n" + std::string(base));
  BOOST_CHECK(t);
}

BOOST_AUTO_TEST_CASE(an_events_file_holds_only_at_lines) {
  auto t = parse_ok(base);
  auto ok = parse_network_changes(t, "# a WAN link degrades\n\nat 3s link A B bw 25Mbit\n"
                                     "at 1s link B C load 10%\n");
  BOOST_REQUIRE(ok);
  BOOST_REQUIRE_EQUAL(ok->size(), 2u);
  BOOST_CHECK(ok->front().at == 1s);
  auto bad = parse_network_changes(t, "at 3s link A B bw 25Mbit\ngroup D procs 1\n");
  BOOST_REQUIRE(!bad);
  BOOST_CHECK_EQUAL(bad.err().message,
                    "line 2: unknown keyword 'group' (an events file holds only 'at' lines)");
  network_change c;
  c.link = 0;
  c.load = 1.5;
  BOOST_REQUIRE(check_network_change(t, c));
  BOOST_CHECK(check_network_change(t, c)->code == errc::invalid_argument);
}

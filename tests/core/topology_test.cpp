#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "banyan/core/topology.hpp"

using namespace banyan;
using namespace std::chrono_literals;

namespace {

topology parse_ok(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

std::string parse_err(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(!t, "expected a parse error for:\n" << text);
  BOOST_CHECK(t.err().code == errc::parse_error);
  return t.err().message;
}

constexpr rate mbit = 1e6 / 8;
constexpr rate gbit = 1e9 / 8;

/// Three sites of uneven depth; m4 is declared after S2 but numbered inside S1.
constexpr std::string_view nested = R"(topology nest
default nic 1Gbit
default rtt 40ms
default bw 200Mbit
group S1 rtt 5ms bw 100Mbit
group m1 in S1 procs 4 rtt 0.01ms nic 10Gbit uplink 1Gbit
group m2 in S1 procs 2 rtt 0.02ms
group S2 rtt 1ms uplink 500Mbit nic 2Gbit
group m3 in S2 procs 3 rtt 0.03ms
group m4 in S1 procs 1
group S3 procs 2 rtt 0.1ms
link S1 S3 rtt 30ms bw 300Mbit
)";

} // namespace

BOOST_AUTO_TEST_CASE(every_builtin_parses) {
  struct expect {
    const char* name;
    std::size_t procs;
    std::size_t clusters;
  };
  const expect all[] = {{"paper-3c201", 201, 3}, {"paper-4c137", 137, 4},   {"paper-3c128", 128, 3},
                        {"paper-4c160", 160, 4}, {"mpichg-3level", 64, 13}, {"wan-1000", 1000, 8},
                        {"tiny-2c8", 8, 2}};
  BOOST_REQUIRE_EQUAL(builtin_topology_names().size(), std::size(all));
  for (const auto& e : all) {
    BOOST_TEST_CONTEXT(e.name) {
      auto t = builtin_topology(e.name);
      BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
      BOOST_CHECK_EQUAL(t->name, e.name);
      BOOST_CHECK_EQUAL(t->proc_count(), e.procs);
      BOOST_CHECK_EQUAL(t->clusters().size(), e.clusters);
      BOOST_CHECK(t->send_overhead == 20us);
      // The builtin's text is itself valid input in the format.
      auto again = parse_topology(builtin_topology_text(e.name));
      BOOST_CHECK(again && again->proc_count() == e.procs);
    }
  }
}

BOOST_AUTO_TEST_CASE(paper_sizes_match_section_v) {
  auto sizes = [](const char* name) {
    std::vector<std::uint32_t> out;
    auto t = builtin_topology(name);
    for (int g : t->clusters())
      out.push_back(t->groups[g].procs);
    return out;
  };
  using v = std::vector<std::uint32_t>;
  BOOST_TEST(sizes("paper-3c201") == (v{96, 64, 41}), boost::test_tools::per_element());
  BOOST_TEST(sizes("paper-4c137") == (v{48, 40, 32, 17}), boost::test_tools::per_element());
  BOOST_TEST(sizes("paper-3c128") == (v{64, 32, 32}), boost::test_tools::per_element());
  BOOST_TEST(sizes("paper-4c160") == (v{40, 40, 40, 40}), boost::test_tools::per_element());
  // Every paper configuration: 1 Gbit/s NICs, sub-ms LANs, 2-10 ms and 100-500 Mbit/s WAN.
  for (const char* n : {"paper-3c201", "paper-4c137", "paper-3c128", "paper-4c160"}) {
    auto t = builtin_topology(n);
    for (int g : t->clusters()) {
      BOOST_CHECK_EQUAL(t->groups[g].nic, gbit);
      BOOST_CHECK(t->groups[g].rtt >= 200us && t->groups[g].rtt <= 400us);
    }
    for (const auto& l : t->links) {
      BOOST_CHECK(l.rtt >= 2ms && l.rtt <= 10ms);
      BOOST_CHECK(l.bw_ab >= 100 * mbit && l.bw_ab <= 500 * mbit);
    }
  }
}

BOOST_AUTO_TEST_CASE(paper_3c201_queries) {
  auto t = builtin_topology("paper-3c201").value();
  const int a = t.find_group("A"), b = t.find_group("B"), c = t.find_group("C");
  BOOST_CHECK_EQUAL(t.leaf_of(0), a);
  BOOST_CHECK_EQUAL(t.leaf_of(95), a);
  BOOST_CHECK_EQUAL(t.leaf_of(96), b);
  BOOST_CHECK_EQUAL(t.leaf_of(159), b);
  BOOST_CHECK_EQUAL(t.leaf_of(160), c);
  BOOST_CHECK_EQUAL(t.leaf_of(200), c);
  const auto of = t.cluster_of();
  BOOST_REQUIRE_EQUAL(of.size(), 201u);
  BOOST_CHECK_EQUAL(of[95], a);
  BOOST_CHECK_EQUAL(of[96], b);

  BOOST_CHECK(t.rtt(7, 7) == 0ns);
  BOOST_CHECK(t.rtt(0, 1) == 250us);
  BOOST_CHECK(t.rtt(96, 97) == 300us);
  BOOST_CHECK(t.rtt(199, 160) == 400us);
  BOOST_CHECK(t.rtt(0, 96) == 4ms);
  BOOST_CHECK(t.rtt(96, 0) == 4ms);
  BOOST_CHECK(t.rtt(0, 160) == 7ms);
  BOOST_CHECK(t.rtt(100, 170) == 5ms);
  BOOST_CHECK(t.one_way(0, 160) == 3500us);
  BOOST_CHECK(t.one_way(0, 1) == 125us);

  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 1), gbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 96), 400 * mbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(160, 0), 200 * mbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(150, 180), 300 * mbit);
  BOOST_CHECK(std::isinf(t.path_bandwidth(3, 3)));
}

BOOST_AUTO_TEST_CASE(asymmetric_link) {
  auto t = parse_ok("default nic 1Gbit\n"
                    "group A procs 2 rtt 0.25ms\n"
                    "group C procs 2 rtt 0.4ms\n"
                    "link A C rtt 7ms bw 200Mbit/150Mbit\n");
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 2), 200 * mbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(2, 0), 150 * mbit);
  BOOST_CHECK(t.rtt(0, 2) == 7ms);
  // A link written the other way round keeps its own direction.
  auto r = parse_ok("group A procs 2 rtt 0.25ms\n"
                    "group C procs 2 rtt 0.4ms\n"
                    "link C A rtt 7ms bw 200Mbit/150Mbit\n");
  BOOST_CHECK_EQUAL(r.path_bandwidth(2, 0), 200 * mbit);
  BOOST_CHECK_EQUAL(r.path_bandwidth(0, 2), 150 * mbit);
}

BOOST_AUTO_TEST_CASE(nested_groups_structure) {
  auto t = parse_ok(nested);
  BOOST_CHECK_EQUAL(t.name, "nest");
  BOOST_REQUIRE_EQUAL(t.proc_count(), 12u);
  const int s1 = t.find_group("S1"), m1 = t.find_group("m1"), m2 = t.find_group("m2"),
            s2 = t.find_group("S2"), m3 = t.find_group("m3"), m4 = t.find_group("m4"),
            s3 = t.find_group("S3");
  // Ids follow the tree (depth first, children in declaration order), not the file.
  BOOST_CHECK_EQUAL(t.groups[m1].first_proc, 0u);
  BOOST_CHECK_EQUAL(t.groups[m2].first_proc, 4u);
  BOOST_CHECK_EQUAL(t.groups[m4].first_proc, 6u);
  BOOST_CHECK_EQUAL(t.groups[m3].first_proc, 7u);
  BOOST_CHECK_EQUAL(t.groups[s3].first_proc, 10u);
  BOOST_CHECK_EQUAL(t.groups[s1].first_proc, 0u);
  BOOST_CHECK_EQUAL(t.groups[s1].proc_count, 7u);
  BOOST_CHECK_EQUAL(t.groups[s2].proc_count, 3u);
  BOOST_CHECK_EQUAL(t.groups[m1].parent, s1);
  BOOST_CHECK_EQUAL(t.groups[m1].depth, 1);
  BOOST_CHECK_EQUAL(t.groups[s1].depth, 0);
  BOOST_CHECK_EQUAL(t.groups[s3].parent, -1);
  BOOST_TEST(t.groups[s1].children == (std::vector<int>{m1, m2, m4}),
             boost::test_tools::per_element());
  BOOST_TEST(t.clusters() == (std::vector<int>{m1, m2, m4, m3, s3}),
             boost::test_tools::per_element());
  BOOST_CHECK_EQUAL(t.leaf_of(6), m4);
  BOOST_CHECK_EQUAL(t.leaf_of(9), m3);
  // nic: own value, else the nearest ancestor's, else the default.
  BOOST_CHECK_EQUAL(t.groups[m1].nic, 10 * gbit);
  BOOST_CHECK_EQUAL(t.groups[m2].nic, gbit);
  BOOST_CHECK_EQUAL(t.groups[m3].nic, 2 * gbit);
  BOOST_CHECK_EQUAL(t.groups[s3].nic, gbit);
  const auto sp = t.split_of(0, 8);
  BOOST_CHECK_EQUAL(sp.common, -1);
  BOOST_CHECK_EQUAL(sp.side_a, s1);
  BOOST_CHECK_EQUAL(sp.side_b, s2);
  const auto in_s1 = t.split_of(5, 1);
  BOOST_CHECK_EQUAL(in_s1.common, s1);
  BOOST_CHECK_EQUAL(in_s1.side_a, m2);
  BOOST_CHECK_EQUAL(in_s1.side_b, m1);
  const auto same = t.split_of(7, 9);
  BOOST_CHECK_EQUAL(same.common, m3);
  BOOST_CHECK_EQUAL(same.side_a, -1);
}

BOOST_AUTO_TEST_CASE(nested_groups_rtt_and_bandwidth) {
  auto t = parse_ok(nested);
  BOOST_CHECK(t.rtt(0, 1) == 10us);  // inside m1
  BOOST_CHECK(t.rtt(0, 4) == 5ms);   // m1 - m2: S1's default
  BOOST_CHECK(t.rtt(6, 5) == 5ms);   // m4 - m2
  BOOST_CHECK(t.rtt(0, 7) == 40ms);  // S1 - S2: the root's default
  BOOST_CHECK(t.rtt(0, 10) == 30ms); // S1 - S3: explicit link
  BOOST_CHECK(t.rtt(8, 11) == 40ms); // S2 - S3
  BOOST_CHECK(t.rtt(7, 9) == 30us);

  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 1), 10 * gbit);  // two 10Gbit NICs
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 4), 100 * mbit); // S1's bw between machines
  BOOST_CHECK_EQUAL(t.path_bandwidth(4, 0), 100 * mbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 7), 200 * mbit); // the root's default bw
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 10), 300 * mbit);
  BOOST_CHECK_EQUAL(t.path_bandwidth(7, 8), 2 * gbit); // S2's uplink is not crossed
  // With a fat root, the uplinks below it are the limit.
  auto u = parse_ok("default rtt 10ms\n"
                    "group S rtt 1ms\n"
                    "group m in S procs 2 rtt 0.01ms nic 10Gbit uplink 1Gbit\n"
                    "group T rtt 1ms uplink 500Mbit\n"
                    "group n in T procs 2 rtt 0.01ms nic 10Gbit\n");
  BOOST_CHECK_EQUAL(u.path_bandwidth(0, 2), 500 * mbit); // T's uplink, inbound
  BOOST_CHECK_EQUAL(u.path_bandwidth(2, 0), 500 * mbit); // T's uplink, outbound
  BOOST_CHECK_EQUAL(u.path_bandwidth(0, 1), 10 * gbit);
  BOOST_CHECK(std::isinf(u.groups[u.find_group("S")].link_bw));
}

BOOST_AUTO_TEST_CASE(defaults_and_inheritance) {
  // A link's missing rtt comes from the parent, its missing bw likewise.
  auto t = parse_ok("default rtt 9ms\n"
                    "default bw 50Mbit\n"
                    "group A procs 1\n"
                    "group B procs 1\n"
                    "group C procs 1\n"
                    "link A B bw 400Mbit\n"
                    "link A C rtt 3ms\n");
  BOOST_CHECK(t.rtt(0, 1) == 9ms);
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 1), 400 * mbit);
  BOOST_CHECK(t.rtt(0, 2) == 3ms);
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 2), 50 * mbit);
  BOOST_CHECK(t.rtt(1, 2) == 9ms);
  BOOST_CHECK_EQUAL(t.path_bandwidth(1, 2), 50 * mbit);
  BOOST_CHECK(t.send_overhead == 0ns);
  BOOST_CHECK(std::isinf(t.groups[0].nic)); // no default nic: unlimited
  BOOST_CHECK(t.name.empty());
}

BOOST_AUTO_TEST_CASE(units_and_layout) {
  auto t = parse_ok("# leading comment\r\n"
                    "topology units   # trailing comment\r\n"
                    "\tsend_overhead 1500ns\r\n"
                    "\n"
                    "group A procs 2 rtt 1s nic 10MB\r\n"
                    "group B procs 2 rtt 2500us nic 8Kbit\r\n"
                    "link A B rtt 1.5ms bw inf\r\n");
  BOOST_CHECK_EQUAL(t.name, "units");
  BOOST_CHECK(t.send_overhead == 1500ns);
  BOOST_CHECK(t.rtt(0, 1) == 1s);
  BOOST_CHECK(t.rtt(2, 3) == 2500us);
  BOOST_CHECK(t.rtt(0, 2) == 1500us);
  BOOST_CHECK_EQUAL(t.groups[0].nic, 10e6);
  BOOST_CHECK_EQUAL(t.groups[1].nic, 1000.0);
  BOOST_CHECK(std::isinf(t.links[0].bw_ab));
  BOOST_CHECK_EQUAL(t.path_bandwidth(0, 2), 1000.0);
  auto b = parse_ok("default nic 3B\ngroup A procs 1 uplink 2KB\ngroup B procs 1 nic 1GB\n"
                    "link A B rtt 1ns bw 7bit/5Tbit\n");
  BOOST_CHECK_EQUAL(b.groups[0].nic, 3.0);
  BOOST_CHECK_EQUAL(b.groups[0].uplink, 2000.0);
  BOOST_CHECK_EQUAL(b.groups[1].nic, 1e9);
  BOOST_CHECK_EQUAL(b.links[0].bw_ab, 7.0 / 8);
  BOOST_CHECK_EQUAL(b.links[0].bw_ba, 5e12 / 8);
  BOOST_CHECK(b.links[0].rtt == 1ns);
}

BOOST_AUTO_TEST_CASE(error_messages) {
  struct item {
    std::string text;
    std::string message;
  };
  const std::string units_hint =
      " (use bit, Kbit, Mbit, Gbit, Tbit for bits per second, B, KB, MB, GB for bytes per "
      "second, or inf)";
  const std::string ab = "group A procs 2 rtt 1ms\ngroup B procs 2 rtt 1ms\n";
  const item items[] = {
      {"group A procs 2 rtt 1ms\n\n# c\ngroup B procs 2 rtt 1ms\nlink A B rtt 2ms\n\n"
       "lnk A B",
       "line 7: unknown keyword 'lnk' (expected topology, send_overhead, default, group, "
       "link or at)"},
      {"group A procs 2 rtt 1ms\n# again\ngroup A procs 3 rtt 1ms\n",
       "line 3: group 'A' declared twice"},
      {"group A procs 2 rtt 5xs", "line 1: unknown time unit 'xs' in '5xs' (use ns, us, ms or s)"},
      {"group A procs 2 rtt 5", "line 1: missing time unit in '5' (use ns, us, ms or s)"},
      {"group A procs 2 rtt fast",
       "line 1: invalid time 'fast' (expected a number and a unit: ns, us, ms or s)"},
      {"group A procs 2 rtt -1ms",
       "line 1: invalid time '-1ms' (expected a number and a unit: ns, us, ms or s)"},
      {ab + "link A B rtt 1ms bw 5mbit",
       "line 3: unknown bandwidth unit 'mbit' in '5mbit'" + units_hint},
      {ab + "link A B rtt 1ms bw 5", "line 3: missing bandwidth unit in '5'" + units_hint},
      {ab + "link A B rtt 1ms bw 0Mbit", "line 3: bandwidth must be positive, got '0Mbit'"},
      {ab + "link A B rtt 1ms bw 1Mbit/", "line 3: invalid bandwidth ''" + units_hint},
      {"group S rtt 1ms\ngroup m in S procs 1\ngroup B procs 1\nlink m B rtt 1ms",
       "line 4: link between 'm' and 'B', which are not siblings ('m' is in 'S', 'B' is "
       "top-level)"},
      {ab + "link A A rtt 1ms", "line 3: link from 'A' to itself"},
      {ab + "link A B rtt 1ms\nlink B A rtt 2ms",
       "line 4: link between 'B' and 'A' declared twice"},
      {ab + "link A X rtt 1ms",
       "line 3: unknown group 'X' (groups must be declared before they are used)"},
      {ab + "link A B", "line 3: link between 'A' and 'B' sets neither rtt nor bw"},
      {ab + "link A B bw 1Mbit",
       "line 3: link between 'A' and 'B' has no rtt, and there is no 'default rtt'"},
      {"group S\ngroup a in S procs 1\ngroup b in S procs 1\nlink a b bw 1Mbit",
       "line 4: link between 'a' and 'b' has no rtt, and their parent 'S' has none"},
      {ab + "link A B rtt 1ms speed 3",
       "line 3: unknown link attribute 'speed' (expected rtt or bw)"},
      {ab + "link A", "line 3: 'link' needs two group names"},
      {"group S rtt 1ms", "line 1: group 'S' has neither procs nor subgroups"},
      {"group A procs 0 rtt 1ms", "line 1: 'procs' must be a positive integer, got '0'"},
      {"group A procs -3 rtt 1ms", "line 1: 'procs' must be a positive integer, got '-3'"},
      {"group A procs 4x rtt 1ms", "line 1: 'procs' must be a positive integer, got '4x'"},
      {"group A procs", "line 1: 'procs' needs a value"},
      {"group A procs 2 procs 3", "line 1: 'procs' given twice"},
      {"group A procs 2 color red",
       "line 1: unknown group attribute 'color' (expected in, procs, rtt, bw, nic or uplink)"},
      {"group A procs 96", "line 1: group 'A' has 96 procs but no rtt"},
      {"", "no processors: declare at least one group with 'procs'"},
      {"# nothing\ntopology empty\nsend_overhead 1us\n",
       "no processors: declare at least one group with 'procs'"},
      {"group A procs 2 rtt 1ms\ngroup m in A procs 1",
       "line 2: group 'm' cannot be inside 'A', which has procs (processors and subgroups do "
       "not mix)"},
      {"group m in Z procs 1",
       "line 1: unknown group 'Z' (groups must be declared before they are used)"},
      {"group A procs 2 rtt 1ms bw 1Gbit",
       "line 1: 'bw' is the bandwidth between subgroups, but 'A' has procs (limit its "
       "processors with 'nic')"},
      {"group A procs 1\ngroup B procs 1",
       "no rtt between top-level groups 'A' and 'B': add 'link A B rtt ...' or 'default rtt "
       "...'"},
      {"default rtt 1ms\ngroup S\ngroup a in S procs 1\ngroup b in S procs 1",
       "line 2: no rtt between 'a' and 'b' in 'S': add 'link a b rtt ...' or an rtt to 'S'"},
      {"default color 1", "line 1: unknown default 'color' (expected nic, rtt or bw)"},
      {"default nic", "line 1: 'default' takes a name and a value, e.g. 'default nic 1Gbit'"},
      {"default nic 1Gbit\ndefault nic 2Gbit", "line 2: 'default nic' given twice"},
      {"send_overhead 1us\nsend_overhead 2us", "line 2: 'send_overhead' given twice"},
      {"send_overhead", "line 1: 'send_overhead' takes one time"},
      {"topology a b", "line 1: 'topology' takes one name"},
      {"topology a\ntopology b", "line 2: 'topology' given twice"},
      {"group A/B procs 1",
       "line 1: invalid group name 'A/B' (use letters, digits, '_', '-' and '.')"},
      {"group", "line 1: 'group' needs a name"},
  };
  for (const auto& i : items)
    BOOST_TEST_CONTEXT(i.text) {
      BOOST_CHECK_EQUAL(parse_err(i.text), i.message);
    }
}

BOOST_AUTO_TEST_CASE(latency_matrix_is_one_way_ms) {
  auto t = builtin_topology("tiny-2c8").value();
  const auto m = latency_matrix(t);
  BOOST_REQUIRE_EQUAL(m.size(), 8u);
  for (const auto& row : m)
    BOOST_REQUIRE_EQUAL(row.size(), 8u);
  BOOST_CHECK_EQUAL(m[0][0], 0.0);
  BOOST_CHECK_CLOSE(m[0][1], 0.1, 1e-9);
  BOOST_CHECK_CLOSE(m[5][6], 0.1, 1e-9);
  BOOST_CHECK_CLOSE(m[0][4], 1.0, 1e-9);
  BOOST_CHECK_CLOSE(m[7][3], 1.0, 1e-9);
  // Agrees with one_way on a nested topology, pair by pair.
  auto n = parse_ok(nested);
  const auto mn = latency_matrix(n);
  for (proc_id a = 0; a < n.proc_count(); ++a)
    for (proc_id b = 0; b < n.proc_count(); ++b)
      BOOST_CHECK_EQUAL(mn[a][b], to_ms(n.one_way(a, b)));
}

BOOST_AUTO_TEST_CASE(describe_and_formatting) {
  auto t = builtin_topology("paper-3c201").value();
  const auto d = t.describe();
  BOOST_TEST_MESSAGE(d);
  BOOST_CHECK(d.find("paper-3c201: 201 processors in 3 clusters, send overhead 20us") == 0);
  BOOST_CHECK(d.find("  A: 96 procs [0, 96), rtt 250us, nic 1Gbit\n") != std::string::npos);
  BOOST_CHECK(d.find("  C: 41 procs [160, 201), rtt 400us") != std::string::npos);
  BOOST_CHECK(d.find("  link A - B: rtt 4ms, bw 400Mbit\n") != std::string::npos);
  auto n = parse_ok(nested).describe();
  BOOST_CHECK(n.find("    m1: 4 procs [0, 4), rtt 10us, nic 10Gbit, uplink 1Gbit\n")
              != std::string::npos);
  BOOST_CHECK(n.find("  S1: 7 procs [0, 7) in 3 groups, rtt 5ms, bw 100Mbit\n")
              != std::string::npos);

  BOOST_CHECK_EQUAL(format_duration(250us), "250us");
  BOOST_CHECK_EQUAL(format_duration(4ms), "4ms");
  BOOST_CHECK_EQUAL(format_duration(1500ms), "1.5s");
  BOOST_CHECK_EQUAL(format_duration(1234567ns), "1.234567ms");
  BOOST_CHECK_EQUAL(format_duration(20ns), "20ns");
  BOOST_CHECK_EQUAL(format_duration(0ns), "0s");
  BOOST_CHECK_EQUAL(format_rate(gbit), "1Gbit");
  BOOST_CHECK_EQUAL(format_rate(150 * mbit), "150Mbit");
  BOOST_CHECK_EQUAL(format_rate(1.0), "8bit");
  BOOST_CHECK_EQUAL(format_rate(infinite_rate), "inf");
}

BOOST_AUTO_TEST_CASE(load_builtin_or_file) {
  auto b = load_topology("paper-4c160");
  BOOST_REQUIRE(b);
  BOOST_CHECK_EQUAL(b->proc_count(), 160u);

  const auto dir = std::filesystem::temp_directory_path()
                   / ("banyan_topology_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto good = (dir / "two.topo").string();
  const auto bad = (dir / "bad.topo").string();
  std::ofstream(good) << "group A procs 3 rtt 1ms\n";
  std::ofstream(bad) << "group A procs 3 rtt 1ms\nlnk A A\n";
  auto g = load_topology(good);
  BOOST_REQUIRE_MESSAGE(g, (g ? std::string() : g.err().to_string()));
  BOOST_CHECK_EQUAL(g->proc_count(), 3u);
  BOOST_CHECK_EQUAL(g->name, "two"); // unnamed file: named after the file
  auto e = load_topology(bad);
  BOOST_REQUIRE(!e);
  BOOST_CHECK(e.err().code == errc::parse_error);
  BOOST_CHECK_EQUAL(e.err().message, bad
                                         + ": line 2: unknown keyword 'lnk' (expected "
                                           "topology, send_overhead, default, group, link or at)");
  auto missing = load_topology((dir / "missing.topo").string());
  BOOST_REQUIRE(!missing);
  BOOST_CHECK(missing.err().code == errc::not_found);
  std::filesystem::remove_all(dir);

  auto none = builtin_topology("paper-9c999");
  BOOST_REQUIRE(!none);
  BOOST_CHECK(none.err().code == errc::not_found);
  BOOST_CHECK(none.err().message.find("tiny-2c8") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(wan_1000_and_mpichg_shapes) {
  auto w = builtin_topology("wan-1000").value();
  const int us_east = w.find_group("us-east"), uk = w.find_group("uk");
  BOOST_CHECK_EQUAL(w.groups[us_east].procs, 160u);
  BOOST_CHECK_EQUAL(w.groups[uk].first_proc, 420u);
  BOOST_CHECK(w.rtt(0, 420) == 90ms);                        // america - europe
  BOOST_CHECK(w.rtt(0, 160) == 60ms);                        // us-east - us-west link
  BOOST_CHECK(w.rtt(160, 300) == 150ms);                     // us-west - brazil: america's default
  BOOST_CHECK_EQUAL(w.path_bandwidth(420, 800), 500 * mbit); // europe -> asia
  BOOST_CHECK_EQUAL(w.path_bandwidth(800, 420), 400 * mbit); // asia -> europe
  BOOST_CHECK_EQUAL(w.path_bandwidth(920, 0), gbit);         // india's uplink, 1Gbit
  BOOST_CHECK_EQUAL(latency_matrix(w).size(), 1000u);

  auto m = builtin_topology("mpichg-3level").value();
  const int sp0 = m.find_group("llnl-sp0");
  BOOST_CHECK_EQUAL(m.groups[sp0].depth, 1);
  BOOST_CHECK(m.rtt(0, 1) == 20us);  // same SMP node
  BOOST_CHECK(m.rtt(0, 4) == 300us); // two nodes of the LLNL SP
  BOOST_CHECK(m.rtt(0, 24) == 50ms); // LLNL - ANL
  BOOST_CHECK_EQUAL(m.path_bandwidth(0, 1), 10 * gbit);
  BOOST_CHECK_EQUAL(m.path_bandwidth(0, 4), gbit);        // node uplinks
  BOOST_CHECK_EQUAL(m.path_bandwidth(0, 24), 155 * mbit); // the WAN
}

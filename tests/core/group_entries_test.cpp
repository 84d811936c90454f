// group_entries: the entries of a tree into every group of a topology, at every level.

#include <boost/test/unit_test.hpp>

#include "banyan/core/group_entries.hpp"

using namespace banyan;

namespace {

/// Two sites; site S has machines m0 (procs 0-2) and m1 (3-4); site T is one cluster
/// (procs 5-7).
constexpr std::string_view two_sites = R"(topology two-sites
default rtt 20ms
group S rtt 300us
group m0 in S procs 3 rtt 20us
group m1 in S procs 2 rtt 20us
group T procs 3 rtt 200us
)";

topology parse_ok(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

std::uint32_t entries_of(const group_entries& e, const topology& t, const char* name) {
  return e.per_group.at(static_cast<std::size_t>(t.find_group(name)));
}

} // namespace

BOOST_AUTO_TEST_SUITE(group_entries_suite)

BOOST_AUTO_TEST_CASE(a_tree_entering_each_group_once_is_minimal) {
  auto topo = parse_ok(two_sites);
  const std::vector<bool> live(8, true);
  // 0 -> 1, 2 (m0); 0 -> 3 -> 4 (m1); 0 -> 5 -> 6, 7 (T)
  tree t(0, {no_proc, 0, 0, 0, 3, 0, 5, 5});
  auto e = count_group_entries(t, topo, live);
  BOOST_TEST(e.minimal());
  BOOST_TEST(e.excess == 0u);
  BOOST_TEST(entries_of(e, topo, "S") == 0u); // holds the root
  BOOST_TEST(entries_of(e, topo, "m0") == 0u);
  BOOST_TEST(entries_of(e, topo, "m1") == 1u);
  BOOST_TEST(entries_of(e, topo, "T") == 1u);
}

BOOST_AUTO_TEST_CASE(every_level_counts_and_leaving_and_reentering_counts_too) {
  auto topo = parse_ok(two_sites);
  const std::vector<bool> live(8, true);
  // T entered twice (5 and 6 from 0); m1 entered twice (3 from 0, 4 from 1).
  tree t(0, {no_proc, 0, 0, 0, 1, 0, 0, 5});
  auto e = count_group_entries(t, topo, live);
  BOOST_TEST(!e.minimal());
  BOOST_TEST(entries_of(e, topo, "T") == 2u);
  BOOST_TEST(entries_of(e, topo, "m1") == 2u);
  BOOST_TEST(e.excess == 2u);
  BOOST_TEST(e.groups_over == 2u);
  // A path that leaves the root's group and comes back: S is entered once, its
  // minimum being 0 (3 hangs under 5 in T).
  tree back(0, {no_proc, 0, 0, 5, 3, 0, 5, 5});
  auto b = count_group_entries(back, topo, live);
  BOOST_TEST(entries_of(b, topo, "S") == 1u);
  BOOST_TEST(entries_of(b, topo, "m1") == 1u);
  BOOST_TEST(b.excess == 1u);
}

BOOST_AUTO_TEST_CASE(processors_that_are_not_live_enter_nothing) {
  auto topo = parse_ok(two_sites);
  std::vector<bool> live(8, true);
  live[3] = live[4] = false; // m1 is empty
  tree t(0, {no_proc, 0, 0, no_proc, no_proc, 0, 5, 5});
  auto e = count_group_entries(t, topo, live);
  BOOST_TEST(e.minimal());
  BOOST_TEST(entries_of(e, topo, "m1") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

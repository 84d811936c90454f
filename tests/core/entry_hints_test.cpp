#include <boost/test/unit_test.hpp>

#include <map>

#include "banyan/core/bandwidth_rule.hpp"
#include "banyan/core/entry_hints.hpp"
#include "banyan/core/topology.hpp"
#include "mini_grid.hpp"

using namespace banyan;
using namespace std::chrono_literals;
using banyan::test::mini_grid;

namespace {

wire::tree_info info(tree_key k, rate est, std::vector<proc_id> path, bool connected = true) {
  wire::tree_info i;
  i.tree = k;
  i.connected = connected;
  i.est = est;
  i.children = 1;
  i.path = std::move(path);
  return i;
}

const tree_key bw{0, tree_kind::bandwidth};
const tree_key lat{0, tree_kind::latency};

rule_context lan_context() {
  rule_context ctx; // banyan: LAN RTT 0.2 ms, wide-area 2 ms and more
  ctx.min_rtt = 200us;
  ctx.sender_capacity = 125e6;
  return ctx;
}

/// Processor `self` in tree `k` under `parent` at `rtt`, receiving `est`.
tree_state placed(tree_key k, proc_id self, proc_id parent, duration rtt, rate est,
                  std::vector<proc_id> parent_path) {
  tree_state t{k, self};
  t.set_sender_capacity(125e6);
  t.set_parent(parent, rtt, 125e6, info(k, est, std::move(parent_path)));
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_entry_is_a_bandwidth_tree_member_with_a_remote_parent) {
  auto ctx = lan_context();
  BOOST_TEST(is_entry(placed(bw, 5, 1, 2ms, 12e6, {0}), ctx));
  BOOST_TEST(!is_entry(placed(bw, 5, 6, 200us, 12e6, {1, 0}), ctx)); // fed in its LAN
  BOOST_TEST(!is_entry(placed(lat, 5, 1, 2ms, 12e6, {0}), ctx));    // latency trees: never
  BOOST_TEST(!is_entry(tree_state{bw, 5}, ctx));                     // no parent
  BOOST_TEST(!is_entry(tree_state{bw, 0}, ctx));                     // the root
  BOOST_TEST(!is_entry(placed(bw, 5, 1, 2ms, 12e6, {0}), rule_context{})); // LAN unknown
}

BOOST_AUTO_TEST_CASE(of_two_entries_the_one_receiving_less_probes_the_other) {
  auto ctx = lan_context();
  // 5 and 7 share a LAN; both take processor 0's tree across the wide-area link.
  auto five = placed(bw, 5, 1, 2ms, 10e6, {0});
  auto seven = placed(bw, 7, 2, 2ms, 12e6, {0});
  BOOST_TEST((respond_to_entry(five, 5, 7, seven.info(), ctx) == entry_response::probe));
  BOOST_TEST((respond_to_entry(seven, 7, 5, five.info(), ctx) == entry_response::answer));
  // An answer from the better entry makes the other probe it, not the other way round.
  BOOST_TEST(probe_answerer(five, 5, 7, seven.info(), ctx));
  BOOST_TEST(!probe_answerer(seven, 7, 5, five.info(), ctx));
  // A tie: the higher id moves, so only one side does.
  auto seven_tied = placed(bw, 7, 2, 2ms, 10e6, {0});
  BOOST_TEST((respond_to_entry(seven_tied, 7, 5, five.info(), ctx) == entry_response::probe));
  BOOST_TEST((respond_to_entry(five, 5, 7, seven_tied.info(), ctx) == entry_response::answer));
}

BOOST_AUTO_TEST_CASE(a_processor_fed_in_its_lan_answers_unless_fed_through_the_entry) {
  auto ctx = lan_context();
  auto entry = placed(bw, 5, 1, 2ms, 12e6, {0});
  // 6 gets the data from 4 in the LAN, and 4 from 3 across another link: a second way in.
  auto six = placed(bw, 6, 4, 200us, 12e6, {3, 0});
  BOOST_TEST((respond_to_entry(six, 6, 5, entry.info(), ctx) == entry_response::answer));
  BOOST_TEST(probe_answerer(entry, 5, 6, six.info(), ctx));
  // 8 is below the entry itself: the entry is its LAN's way in, rightly.
  auto eight = placed(bw, 8, 5, 200us, 12e6, {1, 0});
  BOOST_TEST((respond_to_entry(eight, 8, 5, entry.info(), ctx) == entry_response::ignore));
  // ...and an answerer fed through the asker is no place for it to go.
  BOOST_TEST(!probe_answerer(entry, 5, 8, eight.info(), ctx));
  // A way in that gives far less is not worth a probe.
  auto slow = placed(bw, 6, 4, 200us, 3e6, {3, 0});
  BOOST_TEST((respond_to_entry(slow, 6, 5, entry.info(), ctx) == entry_response::ignore));
  BOOST_TEST(!probe_answerer(entry, 5, 6, slow.info(), ctx));
  // The root in the entry's LAN answers: its data left the LAN and came back.
  tree_state root{bw, 0};
  BOOST_TEST((respond_to_entry(root, 0, 5, entry.info(), ctx) == entry_response::answer));
  // Other kinds of trees, unconnected receivers and notices about other trees: nothing.
  BOOST_TEST((respond_to_entry(tree_state{bw, 6}, 6, 5, entry.info(), ctx)
              == entry_response::ignore));
  auto lat_six = placed(lat, 6, 4, 200us, 12e6, {3, 0});
  BOOST_TEST((respond_to_entry(lat_six, 6, 5, entry.info(), ctx) == entry_response::ignore));
  BOOST_TEST((respond_to_entry(six, 6, 5, info({1, tree_kind::bandwidth}, 12e6, {0}), ctx)
              == entry_response::ignore));
}

BOOST_AUTO_TEST_CASE(an_entry_fed_through_the_receiver_is_told_to_come_closer) {
  auto ctx = lan_context();
  // 5's path leaves the LAN below 6 and comes back: 6 must not move under 5 (a cycle),
  // though a tie of rates would make the higher id move; 5 may move under 6 directly.
  auto five = placed(bw, 5, 1, 2ms, 10e6, {6, 2, 0});
  auto six = placed(bw, 6, 2, 2ms, 10e6, {0});
  BOOST_TEST((respond_to_entry(six, 6, 5, five.info(), ctx) == entry_response::answer));
  BOOST_TEST(probe_answerer(five, 5, 6, six.info(), ctx));
}

namespace {

// Two clusters of six behind a 100 Mbit link; measuring ends soon (two extra probes),
// and probes go to any member, so that two processors of the far cluster may each take
// a tree across the link and never probe each other.
topology two_lans() {
  auto t = parse_topology("topology two-lans\nsend_overhead 0us\ndefault nic 1Gbit\n"
                          "group A procs 6 rtt 0.2ms\ngroup B procs 6 rtt 0.2ms\n"
                          "link A B rtt 4ms bw 100Mbit\n");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

/// Entries into a cluster beyond the first, summed over every bandwidth tree.
std::size_t extra_entries(const mini_grid& g) {
  auto cl = g.topo().cluster_of();
  std::size_t extra = 0;
  for (proc_id r = 0; r < g.topo().proc_count(); ++r) {
    auto t = g.tree_of({r, tree_kind::bandwidth});
    std::map<int, std::size_t> entries;
    for (proc_id p = 0; p < t.size(); ++p)
      if (auto q = t.parent(p); q != no_proc && cl[p] != cl[q])
        ++entries[cl[p]];
    for (auto& [c, n] : entries)
      extra += n - 1;
  }
  return extra;
}

supervisor_config short_measuring(bool hints) {
  supervisor_config cfg;
  cfg.extra_measurements = 2;
  cfg.local_bias = 0;
  cfg.entry_hints = hints;
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_CASE(entries_into_one_lan_find_each_other_and_merge) {
  // Without hints these seeds end with trees entering a cluster at two or more
  // processors; with them every bandwidth tree enters each cluster once.
  std::size_t without = 0, with = 0, notices = 0, hint_probes = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    mini_grid off{two_lans(), seed, short_measuring(false)};
    off.start();
    off.run();
    BOOST_TEST(!off.busy());
    without += extra_entries(off);

    mini_grid on{two_lans(), seed, short_measuring(true)};
    on.start();
    on.run();
    BOOST_TEST(!on.busy());
    for (proc_id r = 0; r < 12; ++r)
      BOOST_TEST(!on.tree_of({r, tree_kind::bandwidth}).validate(on.live()).has_value());
    with += extra_entries(on);
    for (proc_id p = 0; p < 12; ++p) {
      notices += on.sup(p)->entry_notices();
      hint_probes += on.sup(p)->entry_probes();
      BOOST_TEST(off.sup(p)->entry_notices() == 0u);
    }
  }
  BOOST_TEST_MESSAGE("extra entries without hints " << without << ", with " << with
                     << "; notices " << notices << ", probes " << hint_probes);
  BOOST_TEST(without > 0u);
  BOOST_TEST(with == 0u);
  BOOST_TEST(notices > 0u);
  BOOST_TEST(hint_probes > 0u);
}

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "banyan/core/routing_table.hpp"

// Lets BOOST_TEST print operands when a comparison fails.
namespace banyan {
inline std::ostream& boost_test_print_type(std::ostream& os, const vnode_set& s) {
  return os << s.to_string();
}
inline std::ostream& boost_test_print_type(std::ostream& os, const routing_table& t) {
  os << "[";
  for (const auto& r : t.runs())
    os << " [" << r.lo << "," << r.hi << ")->" << r.owner << "@" << r.epoch;
  return os << " ]";
}
} // namespace banyan

using banyan::no_proc;
using banyan::proc_id;
using banyan::routing_table;
using banyan::vnode_id;
using banyan::vnode_set;
using banyan::wire::route_entry;

namespace {

// Runs sorted, non-empty, disjoint, and touching runs differ in owner or epoch.
bool canonical(const routing_table& t) {
  const auto& rs = t.runs();
  for (std::size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].lo >= rs[i].hi)
      return false;
    if (i > 0) {
      if (rs[i - 1].hi > rs[i].lo)
        return false;
      if (rs[i - 1].hi == rs[i].lo && rs[i - 1].owner == rs[i].owner &&
          rs[i - 1].epoch == rs[i].epoch)
        return false;
    }
  }
  return true;
}

struct entry {
  proc_id owner;
  std::uint64_t epoch;
};
using model_table = std::map<vnode_id, entry>;

// Checks every query of the table against a per-vnode model over [0, universe).
void check_against(const routing_table& t, const model_table& m, vnode_id universe) {
  BOOST_TEST_REQUIRE(canonical(t), t.runs().size() << " runs, not canonical");
  vnode_set all;
  std::map<proc_id, vnode_set> by_owner;
  for (vnode_id v = 0; v < universe; ++v) {
    auto it = m.find(v);
    if (it == m.end()) {
      BOOST_TEST(t.owner(v) == no_proc);
      BOOST_TEST(t.epoch(v) == 0u);
      BOOST_TEST(!t.knows(v));
    } else {
      BOOST_TEST(t.owner(v) == it->second.owner, "vnode " << v);
      BOOST_TEST(t.epoch(v) == it->second.epoch, "vnode " << v);
      BOOST_TEST(t.knows(v));
      all.insert(v);
      by_owner[it->second.owner].insert(v);
    }
  }
  BOOST_TEST(t.all() == all);
  for (const auto& [p, vs] : by_owner)
    BOOST_TEST(t.owned_by(p) == vs, "owner " << p);
  // The snapshot rebuilds the same table, and its entries are disjoint.
  routing_table copy;
  vnode_set seen;
  for (const auto& e : t.snapshot()) {
    BOOST_TEST(!seen.intersects(e.vnodes));
    seen |= e.vnodes;
    copy.apply(e);
  }
  BOOST_TEST(copy == t);
}

} // namespace

BOOST_AUTO_TEST_SUITE(routing_table_unit)

BOOST_AUTO_TEST_CASE(empty_table) {
  routing_table t;
  BOOST_TEST(t.empty());
  BOOST_TEST(t.owner(0) == no_proc);
  BOOST_TEST(t.owner(std::numeric_limits<vnode_id>::max()) == no_proc);
  BOOST_TEST(t.epoch(7) == 0u);
  BOOST_TEST(t.all().empty());
  BOOST_TEST(t.owned_by(0).empty());
  BOOST_TEST(t.snapshot().empty());
  auto parts = t.partition(vnode_set::range(0, 10));
  BOOST_TEST(parts.size() == 1u);
  BOOST_TEST(parts[no_proc] == vnode_set::range(0, 10));
  BOOST_TEST(t.partition(vnode_set{}).empty());
}

BOOST_AUTO_TEST_CASE(assign_overwrites_and_stays_compact) {
  routing_table t;
  t.assign(vnode_set::range(0, 100), 1, 5);
  BOOST_TEST(t.runs().size() == 1u);
  t.assign(vnode_set::range(100, 200), 1, 5); // touching, same owner and epoch: merged
  BOOST_TEST(t.runs().size() == 1u);
  BOOST_TEST((t.runs()[0] == routing_table::run{0, 200, 1, 5}));
  // Assign ignores epochs: a lower epoch still overwrites, splitting the run.
  t.assign(vnode_set::range(50, 60), 2, 1);
  BOOST_TEST(t.runs().size() == 3u);
  BOOST_TEST(t.owner(49) == 1u);
  BOOST_TEST(t.owner(50) == 2u);
  BOOST_TEST(t.epoch(50) == 1u);
  BOOST_TEST(t.owner(59) == 2u);
  BOOST_TEST(t.owner(60) == 1u);
  BOOST_TEST(t.owner(200) == no_proc);
  // Putting the hole back as it was re-merges the three runs into one.
  t.assign(vnode_set::range(50, 60), 1, 5);
  BOOST_TEST(t.runs().size() == 1u);
  // Same owner, different epoch: separate runs.
  t.assign(vnode_set::range(200, 210), 1, 6);
  BOOST_TEST(t.runs().size() == 2u);
  BOOST_TEST(t.owned_by(1) == vnode_set::range(0, 210));
}

BOOST_AUTO_TEST_CASE(assign_across_runs_and_gaps) {
  routing_table t;
  t.assign(vnode_set::from_intervals({{0, 10}, {20, 30}, {40, 50}}), 1, 1);
  t.assign(vnode_set::range(5, 45), 2, 2);
  BOOST_TEST(t.owned_by(1) == vnode_set::from_intervals({{0, 5}, {45, 50}}));
  BOOST_TEST(t.owned_by(2) == vnode_set::range(5, 45));
  BOOST_TEST(t.runs().size() == 3u);
  BOOST_TEST(t.all() == vnode_set::range(0, 50));
}

BOOST_AUTO_TEST_CASE(apply_higher_epoch_wins) {
  routing_table t;
  // Unknown vnodes are taken whatever the epoch, even 0.
  auto changed = t.apply(route_entry{vnode_set::range(0, 10), 1, 0});
  BOOST_TEST(changed == vnode_set::range(0, 10));
  BOOST_TEST(t.owner(3) == 1u);
  // Same epoch: ignored, even with another owner.
  changed = t.apply(route_entry{vnode_set::range(0, 10), 2, 0});
  BOOST_TEST(changed.empty());
  BOOST_TEST(t.owner(3) == 1u);
  // Higher epoch on part of the range, plus some unknown vnodes.
  changed = t.apply(route_entry{vnode_set::range(5, 15), 2, 3});
  BOOST_TEST(changed == vnode_set::range(5, 15));
  BOOST_TEST(t.owner(4) == 1u);
  BOOST_TEST(t.owner(5) == 2u);
  BOOST_TEST(t.epoch(14) == 3u);
  // A stale update (lower epoch) changes only the vnodes it is newer for.
  changed = t.apply(route_entry{vnode_set::range(0, 20), 3, 2});
  BOOST_TEST(changed == (vnode_set::range(0, 5) | vnode_set::range(15, 20)));
  BOOST_TEST(t.owner(0) == 3u);
  BOOST_TEST(t.owner(7) == 2u);
  BOOST_TEST(t.owner(17) == 3u);
  // A newer epoch naming the same owner still counts as a change (the epoch moved).
  changed = t.apply(route_entry{vnode_set{7}, 2, 4});
  BOOST_TEST(changed == (vnode_set{7}));
  BOOST_TEST(t.epoch(7) == 4u);
  BOOST_TEST(t.owner(7) == 2u);
  // Empty update: nothing happens.
  auto before = t;
  BOOST_TEST(t.apply(route_entry{vnode_set{}, 9, 99}).empty());
  BOOST_TEST(t == before);
}

BOOST_AUTO_TEST_CASE(ids_near_the_top) {
  const vnode_id m = vnode_set::max_member;
  routing_table t;
  t.assign(vnode_set::range(m - 9, m + 1), 4, 1);
  t.apply(route_entry{vnode_set{m}, 5, 2});
  BOOST_TEST(t.owner(m) == 5u);
  BOOST_TEST(t.owner(m - 1) == 4u);
  BOOST_TEST(t.owner(m + 1) == no_proc);
  BOOST_TEST(t.owned_by(4) == vnode_set::range(m - 9, m));
  auto parts = t.partition(vnode_set{0, m - 1, m});
  BOOST_TEST(parts.size() == 3u);
  BOOST_TEST(parts[no_proc] == (vnode_set{0}));
  BOOST_TEST(parts[4] == (vnode_set{m - 1}));
  BOOST_TEST(parts[5] == (vnode_set{m}));
}

BOOST_AUTO_TEST_CASE(snapshot_groups_by_owner_and_epoch) {
  routing_table t;
  t.assign(vnode_set::from_intervals({{0, 10}, {30, 40}}), 2, 1);
  t.assign(vnode_set::range(10, 30), 1, 1);
  t.assign(vnode_set::range(50, 55), 2, 3);
  auto snap = t.snapshot();
  BOOST_TEST_REQUIRE(snap.size() == 3u);
  BOOST_TEST((snap[0] == route_entry{vnode_set::range(10, 30), 1, 1}));
  BOOST_TEST((snap[1] == route_entry{vnode_set::from_intervals({{0, 10}, {30, 40}}), 2, 1}));
  BOOST_TEST((snap[2] == route_entry{vnode_set::range(50, 55), 2, 3}));
  routing_table copy;
  for (const auto& e : snap)
    copy.apply(e);
  BOOST_TEST(copy == t);
}

BOOST_AUTO_TEST_CASE(partition_splits_by_owner) {
  routing_table t;
  t.assign(vnode_set::range(0, 10), 1, 1);
  t.assign(vnode_set::range(10, 20), 2, 1);
  t.assign(vnode_set::range(25, 30), 1, 2);
  // An interval of v spanning several runs and a gap; another inside one run.
  auto parts = t.partition(vnode_set::from_intervals({{5, 27}, {28, 29}, {40, 41}}));
  BOOST_TEST(parts.size() == 3u);
  BOOST_TEST(parts[1] == vnode_set::from_intervals({{5, 10}, {25, 27}, {28, 29}}));
  BOOST_TEST(parts[2] == vnode_set::range(10, 20));
  BOOST_TEST(parts[no_proc] == vnode_set::from_intervals({{20, 25}, {40, 41}}));
  // Owners with nothing in v do not appear.
  auto only_one = t.partition(vnode_set{3});
  BOOST_TEST(only_one.size() == 1u);
  BOOST_TEST(only_one.count(1) == 1u);
}

BOOST_AUTO_TEST_CASE(no_proc_owner_is_an_entry) {
  // An entry may name no_proc (e.g. a vnode whose owner vanished); it still carries an
  // epoch, so older updates cannot resurrect a stale owner.
  routing_table t;
  t.apply(route_entry{vnode_set::range(0, 4), 1, 1});
  t.apply(route_entry{vnode_set::range(0, 4), no_proc, 2});
  BOOST_TEST(t.owner(0) == no_proc);
  BOOST_TEST(t.knows(0));
  BOOST_TEST(t.apply(route_entry{vnode_set::range(0, 4), 1, 1}).empty());
  BOOST_TEST(t.owner(0) == no_proc);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(routing_table_property)

// Random assign/apply operations against a per-vnode model.
BOOST_AUTO_TEST_CASE(matches_model) {
  constexpr vnode_id universe = 80;
  for (std::uint32_t seed = 1; seed <= 150; ++seed) {
    std::mt19937 rng(seed);
    routing_table t;
    model_table m;
    for (int step = 0; step < 40; ++step) {
      std::vector<vnode_set::interval> xs;
      for (int k = static_cast<int>(rng() % 4); k >= 0; --k) {
        auto lo = static_cast<vnode_id>(rng() % universe);
        auto hi = std::min<vnode_id>(universe, lo + 1 + rng() % 20);
        xs.push_back({lo, hi});
      }
      auto vs = vnode_set::from_intervals(xs);
      auto owner = static_cast<proc_id>(rng() % 5);
      std::uint64_t epoch = rng() % 8;
      BOOST_TEST_CONTEXT("seed " << seed << " step " << step << " " << vs.to_string() << " -> "
                                 << owner << "@" << epoch) {
        if (rng() % 4 == 0) {
          t.assign(vs, owner, epoch);
          vs.for_each([&](vnode_id v) { m[v] = entry{owner, epoch}; });
        } else {
          vnode_set expected_changed;
          vs.for_each([&](vnode_id v) {
            auto it = m.find(v);
            if (it == m.end() || epoch > it->second.epoch) {
              m[v] = entry{owner, epoch};
              expected_changed.insert(v);
            }
          });
          BOOST_TEST(t.apply(route_entry{vs, owner, epoch}) == expected_changed);
        }
        check_against(t, m, universe + 2);
        // Partition of a random set agrees with owner().
        auto probe_lo = static_cast<vnode_id>(rng() % universe);
        auto hole = static_cast<vnode_id>(rng() % universe);
        auto probe = vnode_set::range(probe_lo, universe + 2) - vnode_set{hole};
        vnode_set covered;
        for (const auto& [p, part] : t.partition(probe)) {
          BOOST_TEST(!part.empty());
          BOOST_TEST(!covered.intersects(part));
          covered |= part;
          part.for_each([&, q = p](vnode_id v) { BOOST_TEST(t.owner(v) == q); });
        }
        BOOST_TEST(covered == probe);
      }
    }
  }
}

// Handovers as the protocol makes them: each one moves a set of vnodes to a new owner
// at an epoch above every epoch those vnodes had, so (vnode, epoch) names one owner.
// Members receiving the updates in any order must end with identical tables.
BOOST_AUTO_TEST_CASE(any_delivery_order_converges) {
  constexpr vnode_id universe = 200;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    routing_table truth; // the updates applied in the order they were made
    std::vector<route_entry> history;
    history.push_back(route_entry{vnode_set::range(0, universe), 0, 0});
    truth.apply(history.back());
    for (int k = 0; k < 30; ++k) {
      auto lo = static_cast<vnode_id>(rng() % universe);
      auto hi = std::min<vnode_id>(universe, lo + 1 + rng() % 40);
      auto vs = vnode_set::range(lo, hi);
      std::uint64_t epoch = 0;
      vs.for_each([&](vnode_id v) { epoch = std::max(epoch, truth.epoch(v)); });
      history.push_back(route_entry{vs, static_cast<proc_id>(rng() % 8), epoch + 1});
      truth.apply(history.back());
    }
    for (int trial = 0; trial < 20; ++trial) {
      auto order = history;
      std::shuffle(order.begin(), order.end(), rng);
      routing_table member;
      for (const auto& e : order)
        member.apply(e);
      BOOST_TEST(member == truth, "seed " << seed << " trial " << trial);
    }
    // A newcomer built from a member's snapshot agrees too.
    routing_table newcomer;
    for (const auto& e : truth.snapshot())
      newcomer.apply(e);
    BOOST_TEST(newcomer == truth);
  }
}

// An entry that changes nothing leaves the table as it was, version included, and a
// copy carries its original's version until either changes: what lets a view keep a copy
// current by comparing versions (supervisor_view::refresh).
BOOST_AUTO_TEST_CASE(versions_name_states) {
  routing_table t;
  BOOST_TEST(t.version() == 0u);
  BOOST_TEST(!t.apply(route_entry{vnode_set::range(0, 100), 1, 1}).empty());
  const auto v1 = t.version();
  BOOST_TEST(v1 != 0u);
  // Old news, equal news and a part of what is known: nothing changes.
  BOOST_TEST(!t.would_change(route_entry{vnode_set::range(10, 20), 2, 1}));
  BOOST_TEST(t.apply(route_entry{vnode_set::range(10, 20), 2, 1}).empty());
  BOOST_TEST(t.apply(route_entry{vnode_set::range(0, 100), 1, 0}).empty());
  BOOST_TEST(t.version() == v1);
  routing_table copy = t;
  BOOST_TEST(copy.version() == v1);
  // A gap or a newer epoch in any interval is a change.
  BOOST_TEST(t.would_change(route_entry{vnode_set{5, 150}, 2, 1}));
  BOOST_TEST(t.would_change(route_entry{vnode_set{5, 50}, 2, 2}));
  BOOST_TEST(t.apply(route_entry{vnode_set{5, 50}, 2, 2}) == (vnode_set{5, 50}));
  BOOST_TEST(t.version() != v1);
  BOOST_TEST(copy.version() == v1);
  BOOST_TEST(copy != t);
  // Two tables that change independently never share a version.
  routing_table other;
  other.apply(route_entry{vnode_set::range(0, 100), 1, 1});
  BOOST_TEST(other.version() != v1);
  BOOST_TEST(other == copy); // same entries, told apart by their runs
  BOOST_TEST(!other.apply(route_entry{vnode_set::range(0, 100), 1, 0}).size());
}

// would_change agrees with what apply does, on random tables and entries (the early
// exit must never skip a change).
BOOST_AUTO_TEST_CASE(would_change_agrees_with_apply) {
  for (unsigned seed = 1; seed <= 10; ++seed) {
    std::mt19937 rng(seed);
    routing_table t;
    for (int k = 0; k < 300; ++k) {
      vnode_set vs;
      for (int i = 0, n = 1 + static_cast<int>(rng() % 3); i < n; ++i) {
        auto lo = static_cast<vnode_id>(rng() % 500);
        vs |= vnode_set::range(lo, lo + 1 + rng() % 60);
      }
      route_entry e{vs, static_cast<proc_id>(rng() % 6), rng() % 12};
      const bool predicted = t.would_change(e);
      const auto before = t;
      const auto changed = t.apply(e);
      BOOST_TEST(predicted == !changed.empty(), "seed " << seed << " step " << k);
      BOOST_TEST(predicted == (t.runs() != before.runs()), "seed " << seed << " step " << k);
      BOOST_TEST(canonical(t));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

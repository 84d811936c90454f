// plan_join_waves: the order in which `banyan cluster` starts its joiners.

#include <boost/test/unit_test.hpp>

#include <set>

#include "join_waves.hpp"

using banyan::cli::join_wave_limits;
using banyan::cli::plan_join_waves;

BOOST_AUTO_TEST_SUITE(join_waves)

BOOST_AUTO_TEST_CASE(every_process_joins_once_through_processes_ready_before_its_wave) {
  for (std::size_t procs : {1u, 2u, 5u, 96u, 128u, 256u}) {
    const auto waves = plan_join_waves(procs);
    std::set<std::size_t> ready{0}, seen;
    for (auto& wave : waves) {
      BOOST_TEST_REQUIRE(!wave.empty());
      BOOST_TEST(wave.size() <= 16u);               // per_owner
      BOOST_TEST(wave.size() <= 4u * ready.size()); // per_contact
      for (auto& p : wave) {
        BOOST_TEST(seen.insert(p.proc).second); // once
        BOOST_TEST(!p.contacts.empty());
        BOOST_TEST(p.contacts.size() <= 3u);
        std::set<std::size_t> distinct(p.contacts.begin(), p.contacts.end());
        BOOST_TEST(distinct.size() == p.contacts.size());
        for (auto c : p.contacts)
          BOOST_TEST(ready.count(c) == 1u); // a member before this wave
      }
      for (auto& p : wave)
        ready.insert(p.proc);
    }
    BOOST_TEST(seen.size() == procs - 1);
    if (procs > 1) {
      BOOST_TEST(*seen.begin() == 1u);
      BOOST_TEST(*seen.rbegin() == procs - 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(waves_grow_with_the_members_and_spread_over_them) {
  const auto waves = plan_join_waves(128);
  // 1 ready: 4; 5 ready: 16 (capped); then 16 a wave: 4 + 16 x 7 + 11 = 127.
  BOOST_TEST_REQUIRE(waves.size() == 9u);
  BOOST_TEST(waves[0].size() == 4u);
  for (std::size_t w = 1; w + 1 < waves.size(); ++w)
    BOOST_TEST(waves[w].size() == 16u);
  BOOST_TEST(waves.back().size() == 11u);
  // The first wave has process 0 alone; the second spreads over all five ready, each
  // the first contact of some joiner.
  for (auto& p : waves[0])
    BOOST_TEST((p.contacts == std::vector<std::size_t>{0}));
  std::set<std::size_t> first;
  for (auto& p : waves[1])
    first.insert(p.contacts.front());
  BOOST_TEST(first.size() == 5u);
}

BOOST_AUTO_TEST_CASE(limits_are_taken_as_given_and_never_below_one) {
  join_wave_limits all_at_once{1000, 1000, 1};
  const auto one = plan_join_waves(10, all_at_once);
  BOOST_TEST_REQUIRE(one.size() == 1u); // process 0 alone: 9 at once
  BOOST_TEST(one[0].size() == 9u);
  join_wave_limits zero{0, 0, 0};
  const auto slow = plan_join_waves(4, zero);
  BOOST_TEST(slow.size() == 3u); // one at a time
  for (auto& w : slow)
    BOOST_TEST(w.front().contacts.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

#include <boost/test/unit_test.hpp>

#include "banyan/core/measurement_schedule.hpp"

using banyan::measurement_schedule;

BOOST_AUTO_TEST_CASE(idle_until_triggered) {
  measurement_schedule s{10};
  BOOST_TEST(!s.active());
  BOOST_TEST(!s.next(false));
  BOOST_TEST(!s.next(true));
}

BOOST_AUTO_TEST_CASE(measures_until_parented_then_exactly_extra_more) {
  measurement_schedule s{10};
  s.trigger();
  for (int i = 0; i < 25; ++i)
    BOOST_TEST(s.next(false)); // searching: unbounded
  int extra = 0;
  while (s.next(true))
    ++extra;
  BOOST_TEST(extra == 10);
  BOOST_TEST(!s.active());
}

BOOST_AUTO_TEST_CASE(losing_a_parent_meanwhile_does_not_consume_extras) {
  measurement_schedule s{3};
  s.trigger();
  BOOST_TEST(s.next(true));  // extra 1
  BOOST_TEST(s.next(false)); // orphaned again: search
  BOOST_TEST(s.next(false));
  BOOST_TEST(s.next(true)); // extra 2
  BOOST_TEST(s.next(true)); // extra 3
  BOOST_TEST(!s.next(true));
}

BOOST_AUTO_TEST_CASE(a_new_trigger_restarts_the_extras) {
  measurement_schedule s{3};
  s.trigger();
  BOOST_TEST(s.next(true));
  BOOST_TEST(s.next(true));
  s.trigger(); // a join elsewhere
  int extra = 0;
  while (s.next(true))
    ++extra;
  BOOST_TEST(extra == 3);
}

BOOST_AUTO_TEST_CASE(zero_extra_stops_as_soon_as_parented) {
  measurement_schedule s{0};
  s.trigger();
  BOOST_TEST(s.next(false));
  BOOST_TEST(!s.next(true));
}

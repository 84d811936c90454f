// log_limiter: one line per key per interval, counting the lines held back; time is
// passed in, so this runs in virtual time.

#include <boost/test/unit_test.hpp>

#include <string>

#include "banyan/net/log_limiter.hpp"

namespace net = banyan::net;
using namespace std::chrono_literals;
using tp = net::log_limiter::time_point;

BOOST_AUTO_TEST_SUITE(log_limiter)

BOOST_AUTO_TEST_CASE(one_line_per_key_per_interval_with_the_count_held_back) {
  net::log_limiter l(10s);
  const tp t0{};
  BOOST_TEST((l.admit("10.0.0.1", t0) == std::optional<std::size_t>(0)));
  for (int i = 1; i <= 5; ++i)
    BOOST_TEST(!l.admit("10.0.0.1", t0 + i * 1s).has_value());
  // Another key is not held back by the first.
  BOOST_TEST((l.admit("10.0.0.2", t0 + 1s) == std::optional<std::size_t>(0)));
  // An interval after the last line: the next one says how many were held back.
  BOOST_TEST(!l.admit("10.0.0.1", t0 + 9999ms).has_value());
  BOOST_TEST((l.admit("10.0.0.1", t0 + 10s) == std::optional<std::size_t>(6)));
  BOOST_TEST(!l.admit("10.0.0.1", t0 + 11s).has_value());
  BOOST_TEST((l.admit("10.0.0.1", t0 + 30s) == std::optional<std::size_t>(1)));
}

BOOST_AUTO_TEST_CASE(memory_is_bounded_by_max_keys) {
  net::log_limiter l(10s, 4);
  const tp t0{};
  for (int i = 0; i < 4; ++i)
    BOOST_TEST((l.admit("k" + std::to_string(i), t0) == std::optional<std::size_t>(0)));
  // Full, none idle for an interval: a fifth key is let through but not remembered.
  BOOST_TEST((l.admit("k4", t0 + 1s) == std::optional<std::size_t>(0)));
  BOOST_TEST((l.admit("k4", t0 + 2s) == std::optional<std::size_t>(0)));
  BOOST_TEST(!l.admit("k0", t0 + 2s).has_value());
  // An interval later the idle keys are forgotten and the new one is limited again.
  BOOST_TEST((l.admit("k5", t0 + 10s) == std::optional<std::size_t>(0)));
  BOOST_TEST(!l.admit("k5", t0 + 11s).has_value());
}

BOOST_AUTO_TEST_CASE(a_zero_interval_lets_every_line_through) {
  net::log_limiter l(0s);
  const tp t0{};
  for (int i = 0; i < 3; ++i)
    BOOST_TEST((l.admit("a", t0) == std::optional<std::size_t>(0)));
}

BOOST_AUTO_TEST_SUITE_END()

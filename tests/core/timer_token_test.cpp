#include <boost/test/unit_test.hpp>

#include <set>
#include <vector>

// A private header of banyan::core (the supervisor's internals).
#include "../../core/src/timer_token.hpp"

using banyan::sup::timer_token;

namespace {
std::vector<timer_token> samples() {
  std::vector<timer_token> ts;
  for (std::uint64_t seq : {1u, 2u, 7u, 1000u}) {
    ts.push_back(timer_token::reply_due(seq));
    ts.push_back(timer_token::probe_start(seq));
    ts.push_back(timer_token::offer_due(seq));
    ts.push_back(timer_token::watch(seq));
    ts.push_back(timer_token::seed(seq));
    ts.push_back(timer_token::lend(seq));
    ts.push_back(timer_token::suspect(seq));
    ts.push_back(timer_token::background(seq));
    ts.push_back(timer_token::rtt_watch(seq));
    ts.push_back(timer_token::retire(seq));
    ts.push_back(timer_token::lease(seq));
  }
  for (std::uint64_t n : {1u, 2u, 3u})
    ts.push_back(timer_token::join_attempt(n));
  ts.push_back(timer_token::flush());
  ts.push_back(timer_token::giver_wait());
  ts.push_back(timer_token::adopt());
  ts.push_back(timer_token::summary());
  return ts;
}
} // namespace

// Every token comes back as itself, and no two tokens share an encoding.
BOOST_AUTO_TEST_CASE(tokens_decode_to_what_was_encoded) {
  std::set<std::uint64_t> seen;
  for (auto t : samples()) {
    auto code = t.encode();
    BOOST_TEST(seen.insert(code).second, "encoding " << code << " taken twice");
    auto back = timer_token::decode(code);
    BOOST_TEST_REQUIRE(back.has_value());
    BOOST_TEST((back->what == t.what));
    BOOST_TEST(back->seq == t.seq);
  }
}

// The packing: payload * 16 + a four-bit code; flushes, join attempts (1 + n) and the
// giver wait (10) share code 3.
BOOST_AUTO_TEST_CASE(tokens_pack_the_payload_above_a_code_of_four_bits) {
  BOOST_TEST(timer_token::reply_due(5).encode() == 5u * 16 + 0);
  BOOST_TEST(timer_token::probe_start(5).encode() == 5u * 16 + 1);
  BOOST_TEST(timer_token::flush().encode() == 3u);
  BOOST_TEST(timer_token::join_attempt(1).encode() == 2u * 16 + 3);
  BOOST_TEST(timer_token::giver_wait().encode() == 10u * 16 + 3);
  BOOST_TEST(timer_token::seed(9).encode() == 9u * 16 + 6);
  BOOST_TEST(timer_token::suspect(9).encode() == 9u * 16 + 8);
  BOOST_TEST(timer_token::background(9).encode() == 9u * 16 + 9);
  BOOST_TEST(timer_token::rtt_watch(9).encode() == 9u * 16 + 10);
  BOOST_TEST(timer_token::summary().encode() == 11u);
  BOOST_TEST(timer_token::retire(9).encode() == 9u * 16 + 12);
  BOOST_TEST(timer_token::lease(9).encode() == 9u * 16 + 13);
  BOOST_TEST(!timer_token::decode(14).has_value()); // a code nobody issues
}

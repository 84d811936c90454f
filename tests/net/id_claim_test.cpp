// One process per processor id: the rule an acceptor applies to an authenticated
// initiator's claim (net/id_claim.hpp), case by case. Pure: no sockets, no clock.

#include <boost/test/unit_test.hpp>

#include <ostream>

#include "banyan/net/id_claim.hpp"

using namespace banyan;
using net::claim_verdict;
using net::id_holder;
using hk = id_holder::kind;

namespace banyan::net {
std::ostream& operator<<(std::ostream& os, claim_verdict v) {
  return os << to_string(v);
}
} // namespace banyan::net

namespace {
constexpr proc_id self = 0;
constexpr std::uint64_t live = 0x1111; // the session of the process that holds id 1
constexpr std::uint64_t other = 0x2222;

claim_verdict claim_1(std::uint64_t session, id_holder h) {
  return net::judge_claim(self, 1, session, h);
}
} // namespace

BOOST_AUTO_TEST_CASE(a_claim_to_our_own_id_is_refused_whatever_we_know) {
  for (auto h : {hk::none, hk::answered, hk::pending, hk::idle, hk::unanswered})
    for (std::uint64_t s : {live, other, std::uint64_t{0}})
      BOOST_TEST(net::judge_claim(self, self, s, id_holder{h, s}) == claim_verdict::refuse);
}

BOOST_AUTO_TEST_CASE(an_id_without_an_address_here_is_free) {
  // No member of ours: the first process to claim it is accepted (a newcomer).
  BOOST_TEST(claim_1(other, {hk::none, 0}) == claim_verdict::accept);
}

BOOST_AUTO_TEST_CASE(the_process_answering_at_the_address_holds_the_id) {
  // The live process reconnecting (same session) is accepted; another one is refused.
  BOOST_TEST(claim_1(live, {hk::answered, live}) == claim_verdict::accept);
  BOOST_TEST(claim_1(other, {hk::answered, live}) == claim_verdict::refuse);
  // A restarted process at the member's address answers our connection itself.
  BOOST_TEST(claim_1(other, {hk::answered, other}) == claim_verdict::accept);
}

BOOST_AUTO_TEST_CASE(without_an_answer_yet_the_claim_waits_for_one) {
  BOOST_TEST(claim_1(other, {hk::pending, 0}) == claim_verdict::wait);
  BOOST_TEST(claim_1(other, {hk::idle, 0}) == claim_verdict::connect);
  BOOST_TEST(claim_1(live, {hk::idle, 0}) == claim_verdict::connect);
}

BOOST_AUTO_TEST_CASE(nobody_answering_at_the_address_frees_the_id) {
  // Our connection to the member's address failed (refused, timed out, someone else
  // there): a crashed member's successor takes the id.
  BOOST_TEST(claim_1(other, {hk::unanswered, 0}) == claim_verdict::accept);
}

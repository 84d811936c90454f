// When a processor that has left may stop its engines (core/send_fates.hpp): once it
// holds nothing and none of the frames it sent can come back, by what its runtime knows
// of their fates: their count (the emulated network), a bound in time from when they left
// the runtime's queues (TCP), or only the blind linger.

#include <boost/test/unit_test.hpp>

#include "banyan/core/send_fates.hpp"
#include "core/flat_engines.hpp"

using namespace banyan;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(send_fates_rule)

BOOST_AUTO_TEST_CASE(counts_decide_for_the_frames_they_cover_only) {
  const timestamp sent_at = 10s;
  auto f = send_fates::known(5);
  BOOST_TEST(f.none_can_return(5, sent_at, sent_at));
  BOOST_TEST(f.none_can_return(0, sent_at, sent_at));
  // A sixth frame, sent after the fact was established: no bound in time, so never.
  BOOST_TEST(!f.none_can_return(6, sent_at, sent_at));
  BOOST_TEST(!f.none_can_return(6, sent_at, sent_at + 3600s));
}

BOOST_AUTO_TEST_CASE(blind_linger_counts_from_the_last_send) {
  const timestamp sent_at = 10s;
  auto f = send_fates::blind(2s);
  BOOST_TEST(!f.none_can_return(1, sent_at, sent_at));
  BOOST_TEST(!f.none_can_return(1, sent_at, sent_at + 1999ms));
  BOOST_TEST(f.none_can_return(1, sent_at, sent_at + 2s));
  BOOST_TEST(f.none_can_return(0, sent_at, sent_at)); // nothing sent: nothing comes back
}

BOOST_AUTO_TEST_CASE(bounded_linger_counts_from_when_the_queues_emptied) {
  const timestamp sent_at = 10s;
  // The frames sat in the transport's queue until 12 s: the bound counts from there.
  auto f = send_fates::bounded(12s, 30ms);
  BOOST_TEST(!f.none_can_return(3, sent_at, sent_at + 30ms));
  BOOST_TEST(!f.none_can_return(3, sent_at, 12s + 29ms));
  BOOST_TEST(f.none_can_return(3, sent_at, 12s + 30ms));
  // Sent after the queues were found empty: from the send.
  BOOST_TEST(!f.none_can_return(3, 13s, 13s + 29ms));
  BOOST_TEST(f.none_can_return(3, 13s, 13s + 30ms));
}

BOOST_AUTO_TEST_CASE(an_engine_drains_by_what_its_runtime_knows) {
  // Three broadcast engines over a flat static tree; processor 0 broadcasts a short
  // message, which is one frame to each of the others.
  broadcast_config cfg;
  cfg.rule = tree_rule::threshold;
  banyan::test::flat_engines net{3, cfg};
  auto& origin = net.engine(0);
  timestamp now = 1s;
  BOOST_TEST(origin.frames_sent() == 0u);
  BOOST_TEST(origin.drained(now, send_fates::known(0)));

  broadcast_outbox out;
  BOOST_REQUIRE(origin.broadcast(now, shared_bytes(std::vector<std::uint8_t>(100, 7)), out));
  BOOST_REQUIRE_EQUAL(out.sends.size(), 2u);
  auto frame = out.sends.front();
  out.clear();
  BOOST_TEST(origin.frames_sent() == 2u);
  BOOST_TEST(!origin.holding()); // its own work is done
  // Until its runtime knows the frame's fate, or the blind linger passed, it may not stop.
  BOOST_TEST(!origin.drained(now, send_fates::known(1)));
  BOOST_TEST(!origin.drained(now));
  BOOST_TEST(!origin.drained(now + cfg.drain_linger - 1ms));
  BOOST_TEST(origin.drained(now + cfg.drain_linger));
  // Both frames were taken: known at once.
  BOOST_TEST(origin.drained(now, send_fates::known(2)));

  // Had one come back instead (refused), the origin holds its part again: not drained,
  // whatever was known before, until it has sent it anew (to the other processor: the
  // one that refused is avoided a while) and that frame's fate is known.
  origin.on_undeliverable(now + 1ms, frame.to, frame.body, out);
  BOOST_TEST(origin.holding());
  BOOST_TEST(!origin.drained(now + 1ms, send_fates::known(2)));
  BOOST_REQUIRE_EQUAL(out.timers.size(), 1u);
  const auto retry = out.timers.front();
  out.clear();
  origin.on_timer(now + 1ms + retry.after, retry.token, out);
  BOOST_REQUIRE_EQUAL(out.sends.size(), 1u);
  BOOST_TEST(out.sends.front().to != frame.to);
  BOOST_TEST(!origin.holding());
  const auto sent = origin.frames_sent();
  BOOST_TEST(sent == 3u);
  BOOST_TEST(!origin.drained(now + 1s, send_fates::known(2)));
  BOOST_TEST(origin.drained(now + 1s, send_fates::known(sent)));
}

BOOST_AUTO_TEST_SUITE_END()

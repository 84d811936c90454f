// The payload-free handoff of a broadcast (docs/collectives.md, "Handing over without
// the bytes"): a vnode moves away from a processor that holds a broadcast for it; the
// old owner offers the new one the responsibility (`bcast_offer`), and the bytes go
// only if the new owner holds no copy of that broadcast.
//
// Four broadcast engines over a flat static tree rooted at processor 0, each processor
// owning the vnode of its id, with frames moved by hand, in order per pair of
// processors, so that each case sets up exactly the order of events it is about.

#include <boost/test/unit_test.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/flat_engines.hpp"

using namespace banyan;

namespace {

constexpr proc_id origin = 0, old_owner = 1, heir = 2, third = 3;
constexpr std::size_t procs = 4;
constexpr std::size_t message_size = 16; // 4 segments of 4 bytes
constexpr std::uint32_t segments = 4;

broadcast_config hand_config() {
  broadcast_config cfg;
  cfg.rule = tree_rule::threshold;
  cfg.long_threshold = 8;
  cfg.segment_size = message_size / segments;
  return cfg;
}

// Each processor reads its own routing table (they all agree unless a case says not).
struct hand_cluster : banyan::test::flat_engines {
  std::deque<wire::envelope> wire;              ///< frames in flight, oldest first
  std::vector<wire::envelope> sent;             ///< every frame sent
  std::map<std::pair<vnode_id, std::uint64_t>, int> deliveries; ///< (vnode, seq) -> times
  std::map<vnode_id, proc_id> delivered_at;
  std::function<bool(const wire::envelope&)> bounce; ///< frames the transport hands back
  timestamp now{};
  std::uint64_t epoch = 1;

  hand_cluster() : flat_engines(procs, hand_config()) {}

  void take(proc_id p, broadcast_outbox& out) {
    for (auto& e : out.sends) {
      BOOST_REQUIRE(e.from == p);
      sent.push_back(e);
      wire.push_back(std::move(e));
    }
    for (auto& d : out.deliveries)
      d.vnodes.for_each([&](vnode_id v) {
        ++deliveries[std::make_pair(v, d.op.seq)];
        delivered_at[v] = p;
      });
    // Retry timers (a held part) fire after the wire is empty, in order.
    for (auto& t : out.timers)
      timers.push_back({p, t.token});
    out.clear();
  }

  /// The first segment reaches `p`, which plans its stream (and will deliver there).
  void first_segment_to(proc_id p) {
    BOOST_REQUIRE(step([p](const wire::envelope& e) { return e.to == p; }));
    BOOST_REQUIRE(engine(p).holding());
  }

  wire::collective_id broadcast() {
    broadcast_outbox out;
    auto id = engine(origin).broadcast(now, shared_bytes(std::vector<std::uint8_t>(message_size, 7)),
                                       out);
    BOOST_REQUIRE(id.has_value());
    take(origin, out);
    return *id;
  }

  /// Vnode `v` now belongs to `to`, as every processor knows.
  void move(vnode_id v, proc_id to) {
    ++epoch;
    for (auto& r : routes)
      r->assign(vnode_set{v}, to, epoch);
  }

  /// Delivers the oldest frame `pick` selects (frames of other pairs may pass it: the
  /// order is kept per pair, as the transport promises). False when there is none.
  bool step(const std::function<bool(const wire::envelope&)>& pick) {
    for (auto i = wire.begin(); i != wire.end(); ++i) {
      if (!pick(*i))
        continue;
      for (auto j = wire.begin(); j != i; ++j) // an earlier frame of the same pair first
        BOOST_REQUIRE(!(j->from == i->from && j->to == i->to));
      auto e = std::move(*i);
      wire.erase(i);
      broadcast_outbox out;
      if (bounce && bounce(e)) {
        engine(e.from).on_undeliverable(now, e.to, e.body, out);
        take(e.from, out);
      } else if (!engine(e.to).on_message(now, e.from, e.body, out)) {
        take(e.to, out);
        engine(e.from).on_undeliverable(now, e.to, e.body, out);
        take(e.from, out);
      } else {
        take(e.to, out);
      }
      return true;
    }
    return false;
  }
  /// Every frame to `p` now in flight or sent meanwhile.
  void flush_to(proc_id p) {
    while (step([p](const wire::envelope& e) { return e.to == p; })) {
    }
  }
  /// Everything, timers included.
  void run() {
    for (;;) {
      while (step([](const wire::envelope&) { return true; })) {
      }
      if (timers.empty())
        return;
      now += std::chrono::milliseconds(10);
      auto t = timers.front();
      timers.pop_front();
      broadcast_outbox out;
      engine(t.first).on_timer(now, t.second, out);
      take(t.first, out);
    }
  }

  /// Segment frames `from` sent to `to` (the bytes that crossed that pair).
  std::size_t segments_sent(proc_id from, proc_id to) const {
    std::size_t n = 0;
    for (auto& e : sent)
      n += e.from == from && e.to == to && std::holds_alternative<wire::bcast_segment>(e.body);
    return n;
  }
  template <class M>
  std::size_t frames_of(proc_id from, proc_id to) const {
    std::size_t n = 0;
    for (auto& e : sent)
      n += e.from == from && e.to == to && std::holds_alternative<M>(e.body);
    return n;
  }
  bool in_flight_offer_to(proc_id p) const {
    for (auto& e : wire)
      if (e.to == p && std::holds_alternative<wire::bcast_offer>(e.body))
        return true;
    return false;
  }
  /// Every vnode got broadcast `seq` exactly once.
  void check_exactly_once(std::uint64_t seq) {
    for (vnode_id v = 0; v < procs; ++v) {
      const int times = deliveries[std::make_pair(v, seq)];
      BOOST_TEST(times == 1, "vnode " << v << " delivered " << times << " times");
    }
    for (proc_id p = 0; p < procs; ++p)
      BOOST_TEST(!engine(p).holding(), "processor " << p << " still holds\n"
                                                    << engine(p).describe());
  }

  std::deque<std::pair<proc_id, std::uint64_t>> timers;
};

} // namespace

// The heir's own stream of the broadcast is still coming in when the offer arrives: it
// takes the vnode over and delivers its own copy when its stream completes. The old
// owner sends nothing but the offer.
BOOST_AUTO_TEST_CASE(an_heir_with_the_stream_in_progress_takes_the_vnode_without_bytes) {
  hand_cluster c;
  auto id = c.broadcast();
  c.step([](const wire::envelope& e) { return e.to == heir; }); // 1 of 4 segments there
  BOOST_REQUIRE(c.engine(heir).holding());
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.flush_to(old_owner); // complete at the old owner, whose vnode has moved
  BOOST_TEST(c.in_flight_offer_to(heir));
  BOOST_TEST(c.engine(old_owner).holding()); // responsible until the answer
  // The offer comes after the heir's first segment, before the rest.
  BOOST_REQUIRE(c.step([](const wire::envelope& e) {
    return std::holds_alternative<wire::bcast_offer>(e.body);
  }));
  BOOST_TEST(c.engine(heir).stats().offers_taken == 1u);
  BOOST_TEST(c.deliveries[std::make_pair(vnode_id{old_owner}, id.seq)] == 0); // not yet
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.delivered_at[old_owner] == heir);
  BOOST_TEST(c.segments_sent(old_owner, heir) == 0u); // no payload crossed
  BOOST_TEST(c.frames_of<wire::bcast_offer>(old_owner, heir) == 1u);
  BOOST_TEST(c.engine(old_owner).stats().offered == 1u);
  BOOST_TEST(c.engine(old_owner).stats().redirected == 0u);
}

// The heir has already delivered the broadcast to its own vnode: the completed payload
// it keeps serves the offer at once.
BOOST_AUTO_TEST_CASE(an_heir_whose_stream_finished_delivers_from_the_copy_it_keeps) {
  hand_cluster c;
  auto id = c.broadcast();
  c.flush_to(heir);
  BOOST_REQUIRE(!c.engine(heir).holding());
  BOOST_REQUIRE(c.deliveries[std::make_pair(vnode_id{heir}, id.seq)] == 1);
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.flush_to(old_owner);
  c.flush_to(heir); // the offer: delivered from the kept copy
  BOOST_TEST(c.deliveries[std::make_pair(vnode_id{old_owner}, id.seq)] == 1);
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.delivered_at[old_owner] == heir);
  BOOST_TEST(c.segments_sent(old_owner, heir) == 0u);
  BOOST_TEST(c.engine(heir).stats().offers_taken == 1u);
  BOOST_TEST(c.engine(old_owner).stats().redirected == 0u);
}

// The heir has no copy (its own stream has not started, and it keeps none): it refuses,
// and the old owner, still responsible, sends the message.
BOOST_AUTO_TEST_CASE(an_heir_without_a_copy_refuses_and_the_bytes_are_sent) {
  hand_cluster c;
  auto id = c.broadcast();
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.flush_to(old_owner);
  // The offer overtakes the heir's own segments (they come from another sender).
  BOOST_REQUIRE(c.step([](const wire::envelope& e) {
    return std::holds_alternative<wire::bcast_offer>(e.body);
  }));
  BOOST_TEST(c.engine(heir).stats().offers_refused == 1u);
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.delivered_at[old_owner] == heir);
  BOOST_TEST(c.segments_sent(old_owner, heir) == segments); // the bytes, once
  BOOST_TEST(c.engine(old_owner).stats().offer_fallbacks == 1u);
  BOOST_TEST(c.engine(old_owner).stats().redirected == 1u);
}

// An offer nobody takes (the transport hands it back) leaves the vnode with the old
// owner, which sends the message instead.
BOOST_AUTO_TEST_CASE(a_bounced_offer_falls_back_to_sending_the_bytes) {
  hand_cluster c;
  auto id = c.broadcast();
  c.flush_to(heir); // the heir could take it ...
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  int bounced = 0;
  c.bounce = [&](const wire::envelope& e) { // ... but the offer does not get there
    return std::holds_alternative<wire::bcast_offer>(e.body) && bounced++ == 0;
  };
  c.flush_to(old_owner);
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(bounced == 1);
  BOOST_TEST(c.delivered_at[old_owner] == heir);
  BOOST_TEST(c.engine(old_owner).stats().offer_fallbacks == 1u);
  BOOST_TEST(c.engine(old_owner).stats().redirected == 1u);
  BOOST_TEST(c.engine(heir).stats().offers_taken == 0u);
}

// The vnode moves on from the heir while the offer is on its way: the heir takes it
// (it has a copy) and offers it on to the next owner, as for a vnode of its own that
// moved; the next owner has a copy too, so no bytes cross anywhere.
BOOST_AUTO_TEST_CASE(an_offer_that_crosses_a_further_move_is_offered_on) {
  hand_cluster c;
  auto id = c.broadcast();
  c.flush_to(heir);
  c.flush_to(third);
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.flush_to(old_owner); // the offer is on its way to the heir
  BOOST_REQUIRE(c.in_flight_offer_to(heir));
  c.move(old_owner, third);
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.delivered_at[old_owner] == third);
  BOOST_TEST(c.frames_of<wire::bcast_offer>(heir, third) == 1u);
  BOOST_TEST(c.segments_sent(old_owner, heir) == 0u);
  BOOST_TEST(c.segments_sent(heir, third) == 0u);
  BOOST_TEST(c.engine(heir).stats().offers_taken == 1u);
  BOOST_TEST(c.engine(third).stats().offers_taken == 1u);
}

// The same, but the next owner has no copy yet: the heir, responsible since it took the
// offer, sends it the bytes from its own copy.
BOOST_AUTO_TEST_CASE(an_offer_passed_on_to_an_owner_without_a_copy_ends_in_bytes) {
  hand_cluster c;
  auto id = c.broadcast();
  c.flush_to(heir);
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.flush_to(old_owner);
  c.move(old_owner, third);
  c.flush_to(heir); // takes the offer, offers it on to `third`
  BOOST_REQUIRE(c.step([](const wire::envelope& e) {
    return e.to == third && std::holds_alternative<wire::bcast_offer>(e.body);
  })); // before third's own segments
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.delivered_at[old_owner] == third);
  BOOST_TEST(c.segments_sent(old_owner, heir) == 0u);
  BOOST_TEST(c.segments_sent(heir, third) == segments);
  BOOST_TEST(c.engine(heir).stats().offer_fallbacks == 1u);
}

// With the handoff off, the old owner sends the message as before.
BOOST_AUTO_TEST_CASE(without_offers_the_old_owner_sends_the_message) {
  hand_cluster c;
  for (proc_id p = 0; p < procs; ++p) {
    auto cfg = c.engine(p).config();
    cfg.offer_handoff = false;
    c.engines[p] = std::make_unique<broadcast_engine>(*c.views[p], cfg);
  }
  auto id = c.broadcast();
  c.flush_to(heir);
  c.first_segment_to(old_owner); // planned while it owns the vnode
  c.move(old_owner, heir);
  c.run();
  c.check_exactly_once(id.seq);
  BOOST_TEST(c.segments_sent(old_owner, heir) == segments);
  BOOST_TEST(c.frames_of<wire::bcast_offer>(old_owner, heir) == 0u);
}

// The heir's answer comes back from the transport (its connection to the old owner
// broke: the old owner had left and rejoined since the heir last wrote to it, and the
// offer came from the new incarnation). A bounce of an answer says nothing of the old
// owner, whose offer waits for it: the heir sends it again, on a new connection, and the
// old owner, no longer holding the broadcast, drains. (In churn, the answer was dropped:
// the old owner held the broadcast for good.)
BOOST_AUTO_TEST_CASE(an_answer_the_transport_hands_back_is_sent_again) {
  hand_cluster c;
  auto id = c.broadcast();
  c.flush_to(heir); // the heir has delivered and keeps a copy
  c.first_segment_to(old_owner);
  c.move(old_owner, heir);
  int bounced = 0;
  c.bounce = [&](const wire::envelope& e) {
    return std::holds_alternative<wire::bcast_answer>(e.body) && bounced++ == 0;
  };
  c.run();
  BOOST_TEST(bounced == 2); // the answer, then its second copy (delivered)
  BOOST_TEST(c.frames_of<wire::bcast_answer>(heir, old_owner) == 2u);
  BOOST_TEST(c.engine(heir).stats().offers_taken == 1u);
  c.check_exactly_once(id.seq); // no processor holds it
  BOOST_TEST(c.delivered_at[old_owner] == heir);
  BOOST_TEST(c.segments_sent(old_owner, heir) == 0u);
}

// Sent again once only: where nobody runs any more, the second copy bounces too and is
// dropped (no loop of bounces).
BOOST_AUTO_TEST_CASE(an_answer_that_bounces_twice_is_dropped) {
  hand_cluster c;
  c.broadcast();
  c.flush_to(heir);
  c.first_segment_to(old_owner);
  c.move(old_owner, heir);
  int bounced = 0;
  c.bounce = [&](const wire::envelope& e) {
    if (!std::holds_alternative<wire::bcast_answer>(e.body))
      return false;
    ++bounced;
    return true;
  };
  c.run();
  BOOST_TEST(bounced == 2);
  BOOST_TEST(c.frames_of<wire::bcast_answer>(heir, old_owner) == 2u);
}

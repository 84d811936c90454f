#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "banyan/net/wan_model.hpp"

using namespace banyan;
using namespace banyan::net;
using namespace std::chrono_literals;

namespace {

constexpr rate mbit = 1e6 / 8;
constexpr rate gbit = 1e9 / 8;

topology parse_ok(std::string_view text) {
  auto t = parse_topology(text);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return std::move(t).value();
}

topology builtin(std::string_view name) {
  auto t = builtin_topology(name);
  BOOST_REQUIRE(t);
  return std::move(t).value();
}

/// Runs the model event by event until nothing is in flight; returns deliveries by id.
/// Also checks that every step makes progress and that time never goes backwards.
std::map<std::uint64_t, delivery> drain(wan_model& m) {
  std::map<std::uint64_t, delivery> out;
  timestamp last{0};
  for (auto t = m.next_event(); t; t = m.next_event()) {
    BOOST_REQUIRE(*t >= last);
    const auto before = m.in_flight();
    auto ds = m.advance(*t);
    for (const auto& d : ds) {
      BOOST_CHECK(d.at == *t);
      BOOST_CHECK(out.emplace(d.id, d).second);
    }
    BOOST_REQUIRE_EQUAL(m.in_flight(), before - ds.size());
    // Progress: either something arrived or the next event moved later.
    const auto next = m.next_event();
    BOOST_REQUIRE(!ds.empty() || !next || *next > *t || m.in_flight() == before);
    last = *t;
  }
  BOOST_CHECK_EQUAL(m.in_flight(), 0u);
  return out;
}

/// Checks `got` is `want` to within a few nanoseconds (rounding up of transfer ends).
void check_time(timestamp got, timestamp want) {
  BOOST_CHECK_MESSAGE(std::abs((got - want).count()) <= 3,
                      "time " << got.count() << "ns, expected " << want.count() << "ns");
}

void check_rate(std::optional<rate> got, rate want) {
  BOOST_REQUIRE(got);
  BOOST_CHECK_CLOSE(*got, want, 1e-9);
}

/// Two clusters of 4 with no send overhead: exact arithmetic for the sharing tests.
constexpr std::string_view two_clusters = R"(topology two
default nic 1Gbit
group A procs 4 rtt 0.2ms
group B procs 4 rtt 0.2ms
link A B rtt 2ms bw 100Mbit
)";

} // namespace

// These tests check the sharing model to the nanosecond, small messages included.
const wan_options exact{0};

BOOST_AUTO_TEST_CASE(single_transfer_time) {
  wan_model m(builtin("tiny-2c8"), exact); // 20us overhead, 1Gbit NICs, 100Mbit A-B, 2ms RTT
  const auto wan = m.submit(0ns, 0, 4, 1'000'000);
  const auto lan = m.submit(0ns, 1, 2, 1'000'000);
  BOOST_CHECK_EQUAL(wan, 1u);
  BOOST_CHECK_EQUAL(lan, 2u);
  BOOST_CHECK_EQUAL(m.in_flight(), 2u);
  BOOST_CHECK(m.advance(20us).empty());
  BOOST_CHECK_EQUAL(m.transmitting(), 2u);
  check_rate(m.current_rate(wan), 100 * mbit);
  check_rate(m.current_rate(lan), gbit);
  auto d = drain(m);
  BOOST_REQUIRE_EQUAL(d.size(), 2u);
  // overhead + bytes / bottleneck + one_way
  check_time(d[wan].at, 20us + 80ms + 1ms);
  check_time(d[lan].at, 20us + 8ms + 100us);
  BOOST_CHECK_EQUAL(d[wan].from, 0u);
  BOOST_CHECK_EQUAL(d[wan].to, 4u);
  BOOST_CHECK_EQUAL(d[wan].bytes, 1'000'000u);
  BOOST_CHECK(!m.current_rate(wan));
}

BOOST_AUTO_TEST_CASE(one_sender_two_receivers_halves_the_nic) {
  wan_model m(parse_ok(two_clusters), exact);
  const auto x = m.submit(0ns, 0, 1, 1'000'000);
  const auto y = m.submit(0ns, 0, 2, 1'000'000);
  m.advance(0ns);
  check_rate(m.current_rate(x), gbit / 2);
  check_rate(m.current_rate(y), gbit / 2);
  auto d = drain(m);
  // Twice the 8ms a lone transfer takes, then 0.1ms of latency.
  check_time(d[x].at, 16ms + 100us);
  check_time(d[y].at, 16ms + 100us);

  // With a send overhead the second starts 20us later; the first has the NIC alone for
  // 20us (2500 bytes), they share, then the second has it alone for its last 2500 bytes.
  wan_model o(builtin("tiny-2c8"), exact);
  const auto p = o.submit(0ns, 0, 1, 1'000'000);
  const auto q = o.submit(0ns, 0, 2, 1'000'000);
  auto e = drain(o);
  check_time(e[p].at, 16ms + 100us);
  check_time(e[q].at, 16ms + 20us + 100us);
}

BOOST_AUTO_TEST_CASE(wan_link_shared_only_by_its_users) {
  wan_model m(parse_ok(two_clusters), exact);
  const auto a = m.submit(0ns, 0, 4, 1'000'000); // A -> B
  const auto b = m.submit(0ns, 1, 5, 1'000'000); // A -> B, another sender and receiver
  const auto c = m.submit(0ns, 6, 7, 1'000'000); // inside B
  const auto r = m.submit(0ns, 7, 2, 1'000'000); // B -> A: the other direction
  m.advance(0ns);
  check_rate(m.current_rate(a), 50 * mbit);
  check_rate(m.current_rate(b), 50 * mbit);
  check_rate(m.current_rate(c), gbit);
  check_rate(m.current_rate(r), 100 * mbit);
  auto d = drain(m);
  check_time(d[a].at, 160ms + 1ms);
  check_time(d[b].at, 160ms + 1ms);
  check_time(d[c].at, 8ms + 100us);
  check_time(d[r].at, 80ms + 1ms);
}

BOOST_AUTO_TEST_CASE(max_min_leaves_unused_share_to_others) {
  // Sender 0 has a 100Mbit NIC; its flow to cluster C is held to 10Mbit by the link, so
  // its flow inside A gets the other 90Mbit rather than half.
  wan_model m(parse_ok("default nic 1Gbit\n"
                       "group A procs 2 rtt 0.2ms nic 100Mbit\n"
                       "group C procs 1\n"
                       "link A C rtt 4ms bw 10Mbit\n"), exact);
  const auto local = m.submit(0ns, 0, 1, 22'500'000);
  const auto far = m.submit(0ns, 0, 2, 1'250'000);
  m.advance(0ns);
  check_rate(m.current_rate(far), 10 * mbit);
  check_rate(m.current_rate(local), 90 * mbit);
  // far is sent after 1s; local then has 11.25MB left at the full 100Mbit: 0.9s more.
  BOOST_CHECK(m.advance(999ms).empty());
  m.advance(1s);
  BOOST_CHECK(!m.current_rate(far));
  check_rate(m.current_rate(local), 100 * mbit);
  auto d = drain(m);
  check_time(d[far].at, 1s + 2ms);
  check_time(d[local].at, 1900ms + 100us);
}

BOOST_AUTO_TEST_CASE(max_min_flow_limited_elsewhere) {
  // Link A->B (90Mbit) carries three flows; the one to the slow machine is held to 10Mbit
  // by that machine's NIC, so the other two split the remaining 80Mbit, not 90/3.
  wan_model m(parse_ok("default nic 1Gbit\n"
                       "default rtt 4ms\n"
                       "group A procs 3 rtt 0.2ms\n"
                       "group B rtt 0.5ms\n"
                       "group fast in B procs 2 rtt 0.2ms\n"
                       "group slow in B procs 1 nic 10Mbit\n"
                       "link A B bw 90Mbit\n"), exact);
  const auto f1 = m.submit(0ns, 0, 3, 5'000'000);
  const auto f2 = m.submit(0ns, 1, 4, 10'000'000);
  const auto s = m.submit(0ns, 2, 5, 1'250'000);
  m.advance(0ns);
  check_rate(m.current_rate(f1), 40 * mbit);
  check_rate(m.current_rate(f2), 40 * mbit);
  check_rate(m.current_rate(s), 10 * mbit);
  // f1 and s finish together at 1s; f2 then has 5MB left at 90Mbit: 4/9 s more.
  auto d = drain(m);
  check_time(d[f1].at, 1s + 2ms);
  check_time(d[s].at, 1s + 2ms);
  check_time(d[f2].at, 1s + timestamp{444'444'445} + 2ms);
}

BOOST_AUTO_TEST_CASE(send_overhead_serializes_a_sender) {
  wan_model m(builtin("tiny-2c8"), exact); // 20us per message
  const auto a = m.submit(0ns, 0, 1, 0);
  const auto b = m.submit(0ns, 0, 2, 0);
  const auto c = m.submit(0ns, 0, 3, 0);
  const auto self = m.submit(0ns, 0, 0, 500); // to oneself: delivered at its start
  const auto other = m.submit(0ns, 5, 6, 0);  // another sender is not delayed
  const auto late = m.submit(1ms, 0, 1, 0);   // the CPU is free again by then
  BOOST_REQUIRE(m.next_event());
  check_time(*m.next_event(), 20us);
  auto d = drain(m);
  check_time(d[a].at, 20us + 100us);
  check_time(d[b].at, 40us + 100us);
  check_time(d[c].at, 60us + 100us);
  check_time(d[self].at, 80us);
  check_time(d[other].at, 20us + 100us);
  check_time(d[late].at, 1ms + 20us + 100us);
}

BOOST_AUTO_TEST_CASE(fifo_per_ordered_pair) {
  wan_model m(builtin("tiny-2c8"), exact);
  const auto big = m.submit(0ns, 0, 4, 1'000'000);
  const auto small = m.submit(0ns, 0, 4, 10);
  const auto side = m.submit(0ns, 0, 5, 10); // another pair: not held back
  m.advance(40us);
  // The small message waits for the big one, so it takes no share of the link.
  BOOST_CHECK(!m.current_rate(small));
  check_rate(m.current_rate(big), 100 * mbit);
  m.advance(60us);
  BOOST_CHECK(!m.current_rate(small));
  check_rate(m.current_rate(big), 50 * mbit);
  check_rate(m.current_rate(side), 50 * mbit);
  auto d = drain(m);
  BOOST_CHECK(d[small].at > d[big].at);
  BOOST_CHECK(d[side].at < d[big].at);
  // side: 60us start, shares the link 50/50 for 1.6us; big: alone from then on.
  check_time(d[side].at, 60us + 1600ns + 1ms);
  check_time(d[big].at, 20us + 80ms + 800ns + 1ms);
  check_time(d[small].at, d[big].at + 800ns);

  // Many messages of decreasing size on one pair still arrive in order.
  wan_model n(builtin("paper-3c201"), exact);
  std::vector<std::uint64_t> ids;
  for (std::size_t k = 0; k < 50; ++k)
    ids.push_back(
        n.submit(timestamp{static_cast<std::int64_t>(k) * 1000}, 3, 170, (50 - k) * 10'000));
  auto e = drain(n);
  for (std::size_t k = 1; k < ids.size(); ++k)
    BOOST_CHECK(e[ids[k]].at >= e[ids[k - 1]].at);
}

BOOST_AUTO_TEST_CASE(uplink_shared_by_a_machine) {
  // Two 4-process machines, each behind a 1Gbit uplink; the processes' own paths are
  // 10Gbit. Four transfers between the machines split both uplinks four ways; a
  // transfer inside a machine uses no uplink.
  wan_model m(parse_ok("send_overhead 0s\n"
                       "default rtt 10ms\n"
                       "group S rtt 1ms\n"
                       "group m1 in S procs 4 rtt 0.01ms nic 10Gbit uplink 1Gbit\n"
                       "group m2 in S procs 4 rtt 0.01ms nic 10Gbit uplink 1Gbit\n"), exact);
  std::vector<std::uint64_t> across;
  for (proc_id p = 0; p < 4; ++p)
    across.push_back(m.submit(0ns, p, p + 4, 31'250'000));
  const auto inside = m.submit(0ns, 0, 1, 1'462'500'000);
  m.advance(0ns);
  for (auto id : across)
    check_rate(m.current_rate(id), 250 * mbit);
  check_rate(m.current_rate(inside), 10 * gbit - 250 * mbit); // the rest of 0's NIC
  auto d = drain(m);
  for (auto id : across)
    check_time(d[id].at, 1s + 500us);
  // 1218.75MB sent in the first second, then 243.75MB at the full 10Gbit: 0.195s.
  check_time(d[inside].at, 1195ms + 5us);
}

BOOST_AUTO_TEST_CASE(uplink_inbound_and_outbound_are_separate) {
  wan_model m(parse_ok("send_overhead 0s\n"
                       "default rtt 10ms\n"
                       "group m1 procs 2 rtt 0.01ms uplink 100Mbit\n"
                       "group m2 procs 2 rtt 0.01ms\n"), exact);
  const auto out = m.submit(0ns, 0, 2, 1000);
  const auto in = m.submit(0ns, 3, 1, 1000);
  const auto out2 = m.submit(0ns, 1, 3, 1000);
  m.advance(0ns);
  check_rate(m.current_rate(out), 50 * mbit);
  check_rate(m.current_rate(out2), 50 * mbit);
  check_rate(m.current_rate(in), 100 * mbit);
}

BOOST_AUTO_TEST_CASE(asymmetric_link_directions) {
  wan_model m(parse_ok("default nic 1Gbit\n"
                       "group A procs 2 rtt 0.2ms\n"
                       "group B procs 2 rtt 0.2ms\n"
                       "link A B rtt 2ms bw 200Mbit/150Mbit\n"), exact);
  const auto ab = m.submit(0ns, 0, 2, 1'000'000);
  const auto ba = m.submit(0ns, 2, 0, 1'000'000);
  auto d = drain(m);
  check_time(d[ab].at, 40ms + 1ms);
  check_time(d[ba].at, timestamp{53'333'334} + 1ms);
  const auto& s = m.stats();
  const int a = m.topo().find_group("A"), b = m.topo().find_group("B");
  BOOST_CHECK_EQUAL(s.crossing_bytes.at({a, b}), 1'000'000u);
  BOOST_CHECK_EQUAL(s.crossing_bytes.at({b, a}), 1'000'000u);
}

BOOST_AUTO_TEST_CASE(next_event_and_advance_agree) {
  wan_model m(builtin("tiny-2c8"), exact);
  BOOST_CHECK(!m.next_event());
  BOOST_CHECK(m.advance(1s).empty());
  const auto id = m.submit(1s, 0, 1, 125'000); // 1ms on a 1Gbit NIC
  BOOST_REQUIRE(m.next_event());
  check_time(*m.next_event(), 1s + 20us); // the start
  BOOST_CHECK(m.advance(1s + 19us).empty());
  check_time(*m.next_event(), 1s + 20us); // unchanged by an early advance
  BOOST_CHECK(m.advance(*m.next_event()).empty());
  check_time(*m.next_event(), 1s + 20us + 1ms); // the last byte leaves
  BOOST_CHECK(m.advance(*m.next_event()).empty());
  check_time(*m.next_event(), 1s + 20us + 1ms + 100us); // the arrival
  BOOST_CHECK_EQUAL(m.in_flight(), 1u);
  auto d = m.advance(*m.next_event());
  BOOST_REQUIRE_EQUAL(d.size(), 1u);
  BOOST_CHECK_EQUAL(d[0].id, id);
  BOOST_CHECK(!m.next_event());
  BOOST_CHECK_EQUAL(m.in_flight(), 0u);

  // Events before `now` that were never collected come out of the next advance, in time
  // order, even if the owner submitted more in between.
  const auto x = m.submit(2s, 0, 4, 100);
  const auto y = m.submit(3s, 4, 0, 100);
  const auto z = m.submit(3s, 1, 2, 100);
  auto all = m.advance(4s);
  BOOST_REQUIRE_EQUAL(all.size(), 3u);
  BOOST_CHECK_EQUAL(all[0].id, x);
  BOOST_CHECK_EQUAL(all[1].id, z); // 0.1ms one-way beats y's 1ms
  BOOST_CHECK_EQUAL(all[2].id, y);
  BOOST_CHECK(all[0].at < 3s);
}

BOOST_AUTO_TEST_CASE(simultaneous_deliveries_ordered_by_id) {
  wan_model m(parse_ok(two_clusters), exact);
  // Zero overhead, equal sizes, same latency: all arrive at one instant.
  const auto a = m.submit(0ns, 3, 2, 1000);
  const auto b = m.submit(0ns, 1, 0, 1000);
  const auto c = m.submit(0ns, 2, 2, 1000); // to itself, at 0 + 0
  auto d = m.advance(1s);
  BOOST_REQUIRE_EQUAL(d.size(), 3u);
  BOOST_CHECK_EQUAL(d[0].id, c);
  BOOST_CHECK_EQUAL(d[1].id, a);
  BOOST_CHECK_EQUAL(d[2].id, b);
  BOOST_CHECK(d[1].at == d[2].at);
  BOOST_CHECK_EQUAL(m.stats().messages_delivered, 3u);
  BOOST_CHECK_EQUAL(m.stats().bytes_delivered, 3000u);
  BOOST_CHECK_EQUAL(m.stats().local_bytes, 2000u); // the message to itself crosses nothing
}

namespace {

/// One planned submission of the randomized tests.
struct plan {
  timestamp at;
  proc_id from, to;
  std::size_t bytes;
};

/// Random traffic: bursts of messages from random senders, sizes from 0 to ~4MB with
/// many small ones, some to oneself, some repeated on one pair.
std::vector<plan> random_plans(std::mt19937_64& rng, std::size_t n, std::size_t procs,
                               std::int64_t mean_gap_ns) {
  std::vector<plan> out;
  std::uniform_int_distribution<proc_id> proc(0, static_cast<proc_id>(procs - 1));
  std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_gap_ns));
  std::uniform_int_distribution<int> kind(0, 9);
  timestamp t{0};
  for (std::size_t i = 0; i < n; ++i) {
    t += timestamp{static_cast<std::int64_t>(gap(rng))};
    plan p{t, proc(rng), proc(rng), 0};
    const int k = kind(rng);
    if (k == 0)
      p.to = p.from;
    else if (k == 1 && !out.empty())
      p.from = out.back().from, p.to = out.back().to;
    const int size_kind = kind(rng);
    p.bytes = size_kind < 5   ? std::uniform_int_distribution<std::size_t>(0, 1000)(rng)
              : size_kind < 9 ? std::uniform_int_distribution<std::size_t>(0, 100'000)(rng)
                              : std::uniform_int_distribution<std::size_t>(0, 4'000'000)(rng);
    out.push_back(p);
  }
  return out;
}

/// Feeds `plans` to the model the way an owner would (sometimes advancing before a
/// submission, sometimes not) and checks what can be checked of every delivery.
std::vector<delivery> run_plans(wan_model& m, const std::vector<plan>& plans,
                                std::mt19937_64& rng) {
  const auto& topo = m.topo();
  std::vector<delivery> all;
  std::bernoulli_distribution advance_first(0.5);
  std::size_t i = 0;
  auto collect = [&](std::vector<delivery> ds) {
    for (auto& d : ds) {
      if (!all.empty())
        BOOST_REQUIRE(d.at > all.back().at || (d.at == all.back().at && d.id > all.back().id));
      all.push_back(d);
    }
  };
  while (i < plans.size() || m.in_flight() > 0) {
    const auto ne = m.next_event();
    if (i == plans.size() || (ne && *ne < plans[i].at)) {
      BOOST_REQUIRE(ne);
      collect(m.advance(*ne));
      continue;
    }
    if (advance_first(rng))
      collect(m.advance(plans[i].at));
    const auto id = m.submit(plans[i].at, plans[i].from, plans[i].to, plans[i].bytes);
    BOOST_REQUIRE_EQUAL(id, i + 1);
    ++i;
  }
  BOOST_REQUIRE_EQUAL(all.size(), plans.size());
  std::vector<bool> seen(plans.size() + 1, false);
  std::map<std::pair<proc_id, proc_id>, std::uint64_t> last_on_pair;
  for (const auto& d : all) {
    BOOST_REQUIRE(d.id >= 1 && d.id <= plans.size());
    BOOST_REQUIRE_MESSAGE(!seen[d.id], "delivered twice: " << d.id);
    seen[d.id] = true;
    const auto& p = plans[d.id - 1];
    BOOST_REQUIRE(d.from == p.from && d.to == p.to && d.bytes == p.bytes);
    // No faster than an empty network allows.
    const double wire_ns = static_cast<double>(p.bytes) / topo.path_bandwidth(p.from, p.to) * 1e9;
    const timestamp bound = p.at + topo.send_overhead + topo.one_way(p.from, p.to)
                            + timestamp{static_cast<std::int64_t>(std::floor(wire_ns)) - 1};
    BOOST_REQUIRE_MESSAGE(d.at >= bound, "message " << d.id << " too early");
    // FIFO per ordered pair: delivery order follows submission order.
    auto& last = last_on_pair[{d.from, d.to}];
    BOOST_REQUIRE_MESSAGE(d.id > last, "message " << d.id << " overtook " << last);
    last = d.id;
  }
  return all;
}

} // namespace

BOOST_AUTO_TEST_CASE(randomized_conservation) {
  for (const char* name : {"paper-4c137", "mpichg-3level", "wan-1000"}) {
    BOOST_TEST_CONTEXT(name) {
      std::mt19937_64 rng(42);
      wan_model m(builtin(name), exact);
      const auto plans = random_plans(rng, 3000, m.topo().proc_count(), 200'000);
      const auto all = run_plans(m, plans, rng);
      std::uint64_t bytes = 0;
      for (const auto& p : plans)
        bytes += p.bytes;
      const auto& s = m.stats();
      BOOST_CHECK_EQUAL(s.messages_submitted, plans.size());
      BOOST_CHECK_EQUAL(s.messages_delivered, plans.size());
      BOOST_CHECK_EQUAL(s.bytes_submitted, bytes);
      BOOST_CHECK_EQUAL(s.bytes_delivered, bytes);
      std::uint64_t self = 0, crossing = 0;
      for (const auto& p : plans)
        if (p.from == p.to)
          self += p.bytes;
      for (const auto& [k, v] : s.crossing_bytes)
        crossing += v;
      BOOST_CHECK_EQUAL(s.local_bytes + crossing + self, bytes);
      BOOST_CHECK_EQUAL(m.transmitting(), 0u);
      BOOST_CHECK(!m.next_event());

      // Same inputs, same outputs.
      std::mt19937_64 rng2(42);
      wan_model again(builtin(name), exact);
      const auto plans2 = random_plans(rng2, 3000, again.topo().proc_count(), 200'000);
      const auto all2 = run_plans(again, plans2, rng2);
      BOOST_REQUIRE_EQUAL(all2.size(), all.size());
      for (std::size_t k = 0; k < all.size(); ++k)
        BOOST_REQUIRE(all[k].id == all2[k].id && all[k].at == all2[k].at);
    }
  }
}

namespace {

/// The shared resources a message from `a` to `b` crosses, named independently of the
/// model (kind, group or processor, direction) and with their capacities.
struct resource_name {
  int kind;  ///< 0 nic out, 1 nic in, 2 uplink out, 3 uplink in, 4 link
  long a, b; ///< processor, or group, or the two sides of a link
  friend bool operator<(const resource_name& x, const resource_name& y) {
    return std::tie(x.kind, x.a, x.b) < std::tie(y.kind, y.a, y.b);
  }
};

std::vector<std::pair<resource_name, rate>> path_of(const topology& t, proc_id a, proc_id b) {
  std::vector<std::pair<resource_name, rate>> out;
  const int la = t.leaf_of(a), lb = t.leaf_of(b);
  out.push_back({{0, a, 0}, t.groups[la].nic});
  out.push_back({{1, b, 0}, t.groups[lb].nic});
  const auto s = t.split_of(a, b);
  if (s.side_a < 0)
    return out;
  for (int g = la; g != s.common; g = t.groups[g].parent)
    out.push_back({{2, g, 0}, t.groups[g].uplink});
  for (int g = lb; g != s.common; g = t.groups[g].parent)
    out.push_back({{3, g, 0}, t.groups[g].uplink});
  const int l = t.find_link(s.side_a, s.side_b);
  const rate bw = l >= 0 ? (t.links[l].a == s.side_a ? t.links[l].bw_ab : t.links[l].bw_ba)
                         : (s.common < 0 ? t.root_link_bw : t.groups[s.common].link_bw);
  out.push_back({{4, s.side_a, s.side_b}, bw});
  return out;
}

/// Drives random traffic and, at many instants, checks the rates against the definition
/// of max-min fairness: no resource over capacity, and every transmitting flow has a
/// full resource on which no flow is faster. (That allocation is unique.)
void check_max_min(const topology& topo, std::size_t n, std::int64_t gap_ns,
                   std::size_t min_concurrency) {
  wan_model m(topo, exact);
  std::mt19937_64 rng(7);
  auto plans = random_plans(rng, n, topo.proc_count(), gap_ns);
  for (auto& p : plans)
    p.bytes = p.bytes * 4 + 100'000; // long enough to overlap
  std::size_t i = 0, steps = 0, checked = 0, max_active = 0;
  std::set<std::uint64_t> pending;
  while (i < plans.size() || m.in_flight() > 0) {
    const auto ne = m.next_event();
    if (i < plans.size() && (!ne || plans[i].at <= *ne)) {
      pending.insert(m.submit(plans[i].at, plans[i].from, plans[i].to, plans[i].bytes));
      ++i;
      continue;
    }
    for (const auto& d : m.advance(*ne))
      pending.erase(d.id);
    if (++steps % 5 != 0)
      continue;
    ++checked;
    struct use {
      double sum = 0, max = 0;
      rate cap = 0;
    };
    std::map<resource_name, use> load;
    std::vector<std::pair<std::uint64_t, rate>> active;
    for (auto id : pending)
      if (auto r = m.current_rate(id)) {
        active.emplace_back(id, *r);
        for (const auto& [name, cap] : path_of(topo, plans[id - 1].from, plans[id - 1].to)) {
          auto& u = load[name];
          u.sum += *r;
          u.max = std::max(u.max, *r);
          u.cap = cap;
        }
      }
    BOOST_REQUIRE_EQUAL(active.size(), m.transmitting());
    max_active = std::max(max_active, active.size());
    for (const auto& [name, u] : load)
      BOOST_REQUIRE_MESSAGE(u.sum <= u.cap * (1 + 1e-9), "resource over capacity");
    for (const auto& [id, r] : active) {
      bool bottlenecked = false;
      for (const auto& [name, cap] : path_of(topo, plans[id - 1].from, plans[id - 1].to)) {
        const auto& u = load[name];
        if (!std::isinf(cap) && u.sum >= cap * (1 - 1e-9) && r >= u.max * (1 - 1e-9))
          bottlenecked = true;
      }
      BOOST_REQUIRE_MESSAGE(bottlenecked, "flow " << id << " at " << r << " B/s has no bottleneck");
    }
  }
  BOOST_TEST_MESSAGE(topo.name << ": " << checked << " instants checked, up to " << max_active
                               << " transmitting at once");
  BOOST_CHECK_GE(max_active, min_concurrency); // the check saw real contention
}

} // namespace

BOOST_AUTO_TEST_CASE(randomized_rates_are_max_min_fair) {
  check_max_min(builtin("paper-4c137"), 3000, 200'000, 50);
  check_max_min(builtin("mpichg-3level"), 3000, 100'000, 50);
  check_max_min(parse_ok(R"(topology nested-bw
send_overhead 5us
default nic 1Gbit
default rtt 20ms
default bw 300Mbit
group S1 rtt 2ms bw 200Mbit uplink 400Mbit
group m1 in S1 procs 6 rtt 0.01ms nic 10Gbit uplink 1Gbit
group m2 in S1 procs 6 rtt 0.01ms uplink 500Mbit
group S2 rtt 1ms
group m3 in S2 procs 8 rtt 0.02ms
group m4 in S2 procs 4 rtt 0.02ms nic 100Mbit
group S3 procs 6 rtt 0.1ms
link S1 S3 rtt 30ms bw 250Mbit/150Mbit
)"),
                3000, 100'000, 30);
}

BOOST_AUTO_TEST_CASE(hundred_thousand_messages_run_fast) {
  // A pipelined broadcast along a topology-unaware 4-ary tree over paper-3c201: 500
  // segments of 64KB, each forwarded on arrival; about 100,000 messages with well over
  // a hundred transmitting at once.
  const auto topo = builtin("paper-3c201");
  const auto n = static_cast<proc_id>(topo.proc_count());
  std::vector<proc_id> order(n);
  for (proc_id p = 0; p < n; ++p)
    order[p] = p;
  std::mt19937_64 rng(3);
  std::shuffle(order.begin() + 1, order.end(), rng);
  std::vector<std::vector<proc_id>> children(n);
  for (proc_id k = 1; k < n; ++k)
    children[order[(k - 1) / 4]].push_back(order[k]);
  wan_model m(topo, exact);
  const std::size_t segments = 500;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t s = 0; s < segments; ++s)
    for (auto c : children[0])
      m.submit(0ns, 0, c, 65536);
  std::size_t delivered = 0, max_active = 0;
  std::vector<std::size_t> got(n, 0);
  timestamp end{};
  while (auto t = m.next_event()) {
    for (const auto& d : m.advance(*t)) {
      ++delivered;
      ++got[d.to];
      end = d.at;
      for (auto c : children[d.to])
        m.submit(*t, d.to, c, 65536);
    }
    max_active = std::max(max_active, m.transmitting());
  }
  const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE(delivered << " messages, up to " << max_active << " transmitting at once, "
                               << to_ms(end) << " ms of virtual time, " << secs << " s");
  BOOST_CHECK_EQUAL(delivered, segments * (n - 1));
  for (proc_id p = 1; p < n; ++p)
    BOOST_REQUIRE_EQUAL(got[p], segments);
  BOOST_CHECK_GE(max_active, 100u);
  BOOST_CHECK_LT(secs, 60.0); // generous: shared machines, sanitizer builds
}

BOOST_AUTO_TEST_CASE(small_messages_on_idle_pairs_slip_between_bulk_transfers) {
  // tiny-2c8: 20 us send overhead, 1 Gbit/s NICs. A 1 MB transfer 0 -> 1 takes the
  // whole of 0's NIC; a 100-byte message 0 -> 2 then is not slowed by it (default
  // options), while with squeezing off it shares the NIC like any other flow.
  auto run = [](wan_options o) {
    wan_model m(builtin("tiny-2c8"), o);
    m.submit(timestamp{0}, 0, 1, 1'000'000);
    auto small = m.submit(timestamp{0}, 0, 2, 100);
    timestamp at{};
    while (auto t = m.next_event())
      for (auto& d : m.advance(*t))
        if (d.id == small)
          at = d.at;
    return at;
  };
  auto squeezed = run({});
  auto shared = run(exact);
  auto topo = builtin("tiny-2c8");
  // overheads of two messages, then 100 B at 1 Gbit/s (800 ns), then one way
  auto expected = 2 * topo.send_overhead + duration{800} + topo.one_way(0, 2);
  BOOST_TEST(squeezed.count() == expected.count());
  BOOST_TEST(shared.count() > squeezed.count());
}

// wan_options::share_quantum: the approximation for large runs that recomputes the fair
// rates only at multiples of a quantum.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>
#include <random>

#include "banyan/net/wan_model.hpp"

using namespace banyan;
using namespace banyan::net;
using namespace std::chrono_literals;

namespace {

constexpr rate mbit = 1e6 / 8;

topology builtin(std::string_view name) {
  auto t = builtin_topology(name);
  BOOST_REQUIRE(t);
  return std::move(t).value();
}

wan_options quantum(duration q) {
  wan_options o;
  o.squeeze_bytes = 0; // every message shares: the quantum applies to all of them
  o.share_quantum = q;
  return o;
}

/// Runs the model event by event until nothing is in flight; returns deliveries by id.
std::map<std::uint64_t, delivery> drain(wan_model& m) {
  std::map<std::uint64_t, delivery> out;
  timestamp last{0};
  for (auto t = m.next_event(); t; t = m.next_event()) {
    BOOST_REQUIRE(*t >= last);
    for (const auto& d : m.advance(*t)) {
      BOOST_CHECK(d.at == *t);
      BOOST_CHECK(out.emplace(d.id, d).second);
    }
    last = *t;
  }
  BOOST_CHECK_EQUAL(m.in_flight(), 0u);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lone_transfer_starts_and_ends_on_multiples) {
  // tiny-2c8: 20us overhead, 100Mbit A-B, 2ms RTT. Exact: 20us + 80ms + 1ms.
  wan_model m(builtin("tiny-2c8"), quantum(1ms));
  const auto id = m.submit(0ns, 0, 4, 1'000'000);
  m.advance(20us);
  // Started at 20us, it waits for the 1ms mark before it gets a rate.
  BOOST_REQUIRE(m.current_rate(id));
  BOOST_CHECK_EQUAL(*m.current_rate(id), 0.0);
  m.advance(1ms);
  BOOST_CHECK_CLOSE(*m.current_rate(id), 100 * mbit, 1e-9);
  auto d = drain(m);
  // From 1ms, 80ms at 100Mbit: sent at 81ms (a multiple already), then 1ms of latency.
  BOOST_CHECK(d[id].at == 82ms);
}

BOOST_AUTO_TEST_CASE(zero_is_exact) {
  wan_options o = quantum(0ns);
  wan_model m(builtin("tiny-2c8"), o);
  const auto id = m.submit(0ns, 0, 4, 1'000'000);
  auto d = drain(m);
  BOOST_CHECK(d[id].at == 20us + 80ms + 1ms);
}

BOOST_AUTO_TEST_CASE(every_transfer_ends_on_a_multiple_and_none_is_lost) {
  // Random bulk traffic on the paper's grid: every message is delivered once, a multiple
  // of the quantum plus its one-way latency, FIFO per pair, and never earlier than its
  // uncontended transmission allows. The same run gives the same deliveries.
  const auto topo = builtin("paper-3c201");
  const duration q = 500us;
  auto run = [&] {
    wan_model m(topo, quantum(q));
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<proc_id> who(0, static_cast<proc_id>(topo.proc_count() - 1));
    std::uniform_int_distribution<std::size_t> size(10'000, 400'000);
    struct sent {
      proc_id from, to;
      timestamp at;
      std::size_t bytes;
    };
    std::map<std::uint64_t, sent> all;
    timestamp now{0};
    std::map<std::uint64_t, delivery> got;
    for (int k = 0; k < 400; ++k) {
      now += timestamp{static_cast<std::int64_t>(rng() % 200'000)};
      for (auto& d : m.advance(now))
        got.emplace(d.id, d);
      const auto from = who(rng);
      const auto to = who(rng);
      const auto bytes = size(rng);
      all[m.submit(now, from, to, bytes)] = {from, to, now, bytes};
    }
    for (auto& [id, d] : drain(m))
      got.emplace(id, d);
    BOOST_REQUIRE_EQUAL(got.size(), all.size());
    std::map<std::pair<proc_id, proc_id>, timestamp> last;
    for (const auto& [id, d] : got) {
      const auto& s = all.at(id);
      BOOST_CHECK_EQUAL(d.from, s.from);
      BOOST_CHECK_EQUAL(d.to, s.to);
      if (s.from == s.to)
        continue;
      const auto one_way = topo.one_way(s.from, s.to);
      BOOST_CHECK_EQUAL((d.at - one_way).count() % q.count(), 0);
      const double alone_ns = static_cast<double>(s.bytes) * 1e9 / topo.path_bandwidth(s.from, s.to);
      BOOST_CHECK(d.at - s.at >= one_way + duration{static_cast<duration::rep>(alone_ns) - 1});
      auto& l = last[{s.from, s.to}];
      BOOST_CHECK(d.at >= l);
      l = d.at;
    }
    return got;
  };
  const auto a = run();
  const auto b = run();
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (const auto& [id, d] : a)
    BOOST_CHECK(b.at(id).at == d.at);
}

// A live processor taken for crashed (docs/architecture.md, "False suspicion: the suspect
// yields"): it is suspected while it is only slow (its frames late, one way or both, or
// it does not run for a while without noticing), the suspicion times out, its vnodes are
// adopted, and broadcasts are under way or start around then. Every broadcast must reach
// every vnode exactly once, or fail at its origin naming the vnodes it did not reach;
// never twice. Virtual time, fixed seeds.
#include <boost/test/unit_test.hpp>

#include "core/collective_rider.hpp"
#include "core/message_bytes.hpp"

#include <cstring>
#include <random>

using namespace banyan;
using banyan::test::adaptive_riders;
using banyan::test::collective_rider;
using banyan::test::message_bytes;
using banyan::test::mini_grid;
using banyan::test::rider;
using namespace std::chrono_literals;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

broadcast_config acked() {
  broadcast_config c;
  c.acknowledge = true;
  c.resend_grace = 200ms; // banyan::node's floor
  c.resend_after = 2s;
  c.complete_within = 20s;
  c.stale_stream = 2s;
  return c;
}

wire::collective_id broadcast(mini_grid& g, proc_id from, std::size_t bytes, std::uint64_t salt) {
  wire::collective_id id;
  g.with_rider(from, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    id = dynamic_cast<collective_rider&>(r).broadcast(now, message_bytes(bytes, salt), out);
  });
  return id;
}

/// How the suspect is slow.
enum class slowness { frozen, both_ways, inbound, outbound };

const char* name_of(slowness s) {
  switch (s) {
  case slowness::frozen: return "frozen";
  case slowness::both_ways: return "both ways";
  case slowness::inbound: return "inbound";
  case slowness::outbound: return "outbound";
  }
  return "?";
}

struct tally {
  int runs = 0, false_crashes = 0, broadcasts = 0;
  int exactly_once = 0;   ///< (broadcast, vnode) pairs delivered once
  int duplicates = 0;     ///< delivered twice or more
  int silent_losses = 0;  ///< never delivered, and the origin did not say so
  int explicit_fails = 0; ///< never delivered, named by a failed outcome
  int problems = 0;       ///< deliveries wrong in themselves (at a non-owner, wrong bytes)
  std::string first_problem;
};

/// One run: 8 processors, processor `x` slow by `lag` from `start` on, suspected by
/// another member at `start`; broadcasts from other members at `start + offset` (and a
/// few around it). Adds to `t`.
void run_one(std::uint64_t seed, slowness how, duration lag, duration offset, tally& t) {
  std::mt19937 rng{static_cast<std::uint32_t>(seed * 7919 + static_cast<int>(how))};
  adaptive_riders riders;
  riders.cfg = acked();
  supervisor_config sc;
  mini_grid g{tiny(), seed, sc};
  riders.install(g);
  g.start(8);
  g.run_for(2s);
  std::uniform_int_distribution<proc_id> any(0, 7);
  const proc_id x = any(rng);
  proc_id suspector = any(rng);
  while (suspector == x)
    suspector = any(rng);
  switch (how) {
  case slowness::frozen: g.freeze(x, lag); break;
  case slowness::both_ways:
    g.slow([x](const wire::envelope& e) { return e.to == x || e.from == x; }, lag);
    break;
  case slowness::inbound:
    g.slow([x](const wire::envelope& e) { return e.to == x; }, lag);
    break;
  case slowness::outbound:
    g.slow([x](const wire::envelope& e) { return e.from == x; }, lag);
    break;
  }
  // Broadcasts around the suspicion, from members other than the suspect.
  std::vector<duration> when{offset, offset + 150ms, offset + 600ms};
  std::sort(when.begin(), when.end());
  bool suspected = false;
  duration at{0};
  int k = 0;
  for (auto w : when) {
    if (!suspected && w >= duration{0}) {
      g.run_for(-at);
      at = duration{0};
      g.suspect(suspector, x);
      suspected = true;
    }
    g.run_for(w - at);
    at = w;
    proc_id origin = any(rng);
    while (origin == x)
      origin = any(rng);
    broadcast(g, origin, (k % 3 == 2) ? 256 << 10 : 300 + k, seed * 100 + k);
    ++k;
  }
  if (!suspected)
    g.suspect(suspector, x);
  g.run_for(lag + 2s);
  g.slow(nullptr, duration{0});
  g.run_for(30s);
  ++t.runs;
  for (auto& [p, ev] : g.crash_events())
    if (ev.what == tree_event::kind::disowned && p == x) {
      ++t.false_crashes;
      break;
    }
  for (auto& what : riders.ledger.problems)
    if (t.first_problem.empty())
      t.first_problem = what;
  t.problems += static_cast<int>(riders.ledger.problems.size());
  for (auto& [op, msg] : riders.ledger.sent) {
    ++t.broadcasts;
    auto o = riders.ledger.outcomes.find(op);
    for (vnode_id v = 0; v < 8; ++v) {
      auto c = riders.ledger.count.find({op, v});
      const int n = c == riders.ledger.count.end() ? 0 : c->second;
      std::string what;
      if (n == 1) {
        ++t.exactly_once;
      } else if (n > 1) {
        ++t.duplicates;
        what = "twice";
      } else if (o != riders.ledger.outcomes.end() && !o->second.complete &&
                 o->second.missing.contains(v)) {
        ++t.explicit_fails;
      } else {
        ++t.silent_losses;
        what = "never";
      }
      if (!what.empty() && t.first_problem.empty())
        t.first_problem = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                          std::to_string(lag.count() / 1000000) + " ms offset " +
                          std::to_string(offset.count() / 1000000) + " ms: " +
                          wire::to_string(op) + " at vnode " + std::to_string(v) + " " + what +
                          " (suspect " + std::to_string(x) + ")";
    }
  }
}

} // namespace

// The sweep: seeds x slowness x lag x when the broadcasts start relative to the suspicion.
BOOST_AUTO_TEST_CASE(a_live_processor_taken_for_crashed_delivers_nothing_twice) {
  tally t;
  // `-- --seeds N` for a longer sweep (docs/results.md); 8 here.
  std::uint64_t seeds = 8;
  auto& suite = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i + 1 < suite.argc; ++i)
    if (std::string(suite.argv[i]) == "--seeds")
      seeds = std::stoull(suite.argv[i + 1]);
  for (auto how : {slowness::frozen, slowness::both_ways, slowness::inbound, slowness::outbound}) {
    tally one;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed)
      for (auto lag : {1500ms, 3000ms})
        for (auto offset : {-300ms, 0ms, 900ms, 1300ms})
          run_one(seed, how, lag, offset, one);
    BOOST_TEST_MESSAGE("  " << name_of(how) << ": " << one.runs << " runs, " << one.duplicates
                       << " twice, " << one.explicit_fails << " failed explicitly, "
                       << one.silent_losses << " lost silently");
    t.runs += one.runs;
    t.false_crashes += one.false_crashes;
    t.broadcasts += one.broadcasts;
    t.exactly_once += one.exactly_once;
    t.duplicates += one.duplicates;
    t.silent_losses += one.silent_losses;
    t.explicit_fails += one.explicit_fails;
    if (t.first_problem.empty())
      t.first_problem = one.first_problem;
  }
  BOOST_TEST_MESSAGE("false crash sweep: " << t.runs << " runs, " << t.false_crashes
                     << " false crashes, " << t.broadcasts << " broadcasts; per (broadcast, vnode): "
                     << t.exactly_once << " once, " << t.duplicates << " twice, "
                     << t.explicit_fails << " failed explicitly, " << t.silent_losses
                     << " lost silently");
  BOOST_TEST(t.false_crashes > t.runs / 2);
  BOOST_TEST(t.duplicates == 0, t.first_problem);
  BOOST_TEST(t.silent_losses == 0, t.first_problem);
  BOOST_TEST(t.problems == 0, t.first_problem);
}

namespace {

using banyan::test::reduction_ledger;

/// Int64 sums of small per-(reduction, vnode) values: exact in any order.
std::vector<std::uint8_t> value_of(std::uint64_t op, vnode_id v) {
  std::int64_t x = static_cast<std::int64_t>(op * 1000 + v + 1);
  std::vector<std::uint8_t> b(sizeof x);
  std::memcpy(b.data(), &x, sizeof x);
  return b;
}

struct reduce_tally {
  int runs = 0, reductions = 0;
  int once = 0;       ///< reductions with one right result counting every vnode once
  int wrong = 0;      ///< a vnode taken twice, a wrong value, two results
  int asked_twice = 0; ///< of those: a vnode's value asked of two applications
  int wrong_value = 0; ///< of those: a result that counts a vnode twice or misses one
  int problems = 0;    ///< what the engines report as impossible (a double history...)
  std::string first_reported;
  int unfinished = 0; ///< no result (a runtime's time limit fails it, naming the vnodes)
  std::string first_problem;
};

/// As run_one, with reductions: every member starts reductions 1-3 (roots at random
/// vnodes) around the suspicion of `x`; the slow processor starts them too, as it runs.
void run_reductions(std::uint64_t seed, slowness how, duration lag, duration offset,
                    reduce_tally& t) {
  std::mt19937 rng{static_cast<std::uint32_t>(seed * 104729 + static_cast<int>(how))};
  banyan::test::delivery_ledger deliveries;
  reduction_ledger reductions;
  reductions.value = value_of;
  mini_grid g{tiny(), seed};
  g.set_rider_factory([&](proc_id, const supervisor& s) {
    return std::make_unique<collective_rider>(s, deliveries, acked(), &reductions, reduce_config{});
  });
  g.start(8);
  g.run_for(2s);
  std::uniform_int_distribution<proc_id> any(0, 7);
  const proc_id x = any(rng);
  proc_id suspector = any(rng);
  while (suspector == x)
    suspector = any(rng);
  switch (how) {
  case slowness::frozen: g.freeze(x, lag); break;
  case slowness::both_ways:
    g.slow([x](const wire::envelope& e) { return e.to == x || e.from == x; }, lag);
    break;
  case slowness::inbound:
    g.slow([x](const wire::envelope& e) { return e.to == x; }, lag);
    break;
  case slowness::outbound:
    g.slow([x](const wire::envelope& e) { return e.from == x; }, lag);
    break;
  }
  std::vector<reduce_spec> specs;
  for (std::uint64_t op = 1; op <= 3; ++op)
    specs.push_back({op, static_cast<vnode_id>(any(rng)),
                     {reduce_kind::sum, element_type::int64, 0}, 1});
  auto start_everywhere = [&](const reduce_spec& spec) {
    for (proc_id p = 0; p < 8; ++p)
      g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
        auto e = dynamic_cast<collective_rider&>(r).reduce(now, spec, out);
        if (e && t.first_problem.empty())
          t.first_problem = "processor " + std::to_string(p) + ": " + e->to_string();
      });
  };
  if (offset < duration{0}) {
    start_everywhere(specs[0]);
    g.run_for(-offset);
    g.suspect(suspector, x);
  } else {
    g.suspect(suspector, x);
    g.run_for(offset);
    start_everywhere(specs[0]);
  }
  g.run_for(600ms);
  start_everywhere(specs[1]);
  g.run_for(lag + 2s);
  g.slow(nullptr, duration{0});
  start_everywhere(specs[2]);
  g.run_for(30s);
  ++t.runs;
  for (auto& spec : specs) {
    ++t.reductions;
    std::string what;
    auto res = reductions.results.find(spec.op);
    for (vnode_id v = 0; v < 8; ++v) {
      auto c = reductions.calls.find({spec.op, v});
      if ((c == reductions.calls.end() ? 0 : c->second) > 1)
        what = "took vnode " + std::to_string(v) + " " + std::to_string(c->second) + " times";
    }
    if (!what.empty())
      ++t.asked_twice;
    if (res != reductions.results.end() &&
        (res->second.front().vnodes != vnode_set::range(0, 8) ||
         res->second.front().value.to_vector() != reductions.expected(spec.op, 8)))
      ++t.wrong_value;
    if (what.empty() && res == reductions.results.end()) {
      ++t.unfinished;
      continue;
    }
    if (what.empty() && res->second.size() != 1)
      what = std::to_string(res->second.size()) + " results";
    else if (what.empty() && (res->second.front().vnodes != vnode_set::range(0, 8) ||
                              res->second.front().value.to_vector() != reductions.expected(spec.op, 8)))
      what = "a wrong result";
    if (what.empty()) {
      ++t.once;
    } else {
      ++t.wrong;
      if (t.first_problem.empty())
        t.first_problem = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                          std::to_string(lag.count() / 1000000) + " ms offset " +
                          std::to_string(offset.count() / 1000000) + " ms: reduction " +
                          std::to_string(spec.op) + " " + what + " (suspect " +
                          std::to_string(x) + ")";
    }
  }
  t.problems += static_cast<int>(reductions.problems.size());
  for (auto& p : reductions.problems)
    if (t.first_reported.empty())
      t.first_reported = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                         std::to_string(lag.count() / 1000000) + " ms offset " +
                         std::to_string(offset.count() / 1000000) + " ms (suspect " +
                         std::to_string(x) + "): " + p;
}

} // namespace

// Reductions around the same false crashes: each gives one result that counts every
// vnode once. The suspect's vnode may be asked of both applications (the suspect's, and
// the adopter's, tentatively when the root's owner asks): one of the two is counted.
BOOST_AUTO_TEST_CASE(reductions_around_a_false_crash) {
  reduce_tally t;
  std::uint64_t seeds = 4;
  auto& suite = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i + 1 < suite.argc; ++i)
    if (std::string(suite.argv[i]) == "--seeds")
      seeds = std::stoull(suite.argv[i + 1]);
  for (std::uint64_t seed = 1; seed <= seeds; ++seed)
    for (auto how : {slowness::frozen, slowness::both_ways, slowness::inbound, slowness::outbound})
      for (auto lag : {1500ms, 3000ms})
        for (auto offset : {-300ms, 0ms, 900ms, 1300ms})
          run_reductions(seed, how, lag, offset, t);
  BOOST_TEST_MESSAGE("false crash, reductions: " << t.runs << " runs, " << t.reductions
                     << " reductions: " << t.reductions - t.wrong_value - t.unfinished
                     << " with the right result, " << t.wrong_value << " with a wrong one, "
                     << t.unfinished << " without a result; " << t.asked_twice
                     << " asked a vnode's value of two applications; " << t.problems
                     << " problems reported by the engines (" << t.first_reported << ")");
  BOOST_TEST(t.wrong_value == 0, t.first_problem);
  BOOST_TEST(t.unfinished == 0);
  BOOST_TEST(t.problems == 0, t.first_reported);
  BOOST_TEST(t.runs * 3 == t.reductions);
}

// A live processor taken for crashed (docs/architecture.md, "False suspicion: the suspect
// yields"): it is suspected while it is only slow (its frames late, one way or both, or
// it does not run for a while without noticing), the suspicion times out, its vnodes are
// adopted, and broadcasts are under way or start around then. Every broadcast must reach
// every vnode exactly once, or fail at its origin naming the vnodes it did not reach;
// never twice. Virtual time, fixed seeds.
#include <boost/test/unit_test.hpp>

#include "core/crash_scenario.hpp"

#include <random>

using namespace banyan;
using banyan::test::adaptive_riders;
using banyan::test::broadcast_from;
using banyan::test::collective_rider;
using banyan::test::message_bytes;
using banyan::test::mini_grid;
using banyan::test::name_of;
using banyan::test::slowness;
using banyan::test::tiny_grid;
using banyan::test::rider;
using namespace std::chrono_literals;

namespace {

broadcast_config acked() {
  broadcast_config c;
  c.acknowledge = true;
  c.resend_grace = 200ms; // banyan::node's floor
  c.resend_after = 2s;
  c.complete_within = 20s;
  c.stale_stream = 2s;
  return c;
}

struct tally {
  int runs = 0, false_crashes = 0, broadcasts = 0;
  int exactly_once = 0;   ///< (broadcast, vnode) pairs delivered once
  int duplicates = 0;     ///< delivered twice or more
  int silent_losses = 0;  ///< never delivered, and the origin did not say so
  int explicit_fails = 0; ///< never delivered, named by a failed outcome
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
  mini_grid g{tiny_grid(), seed, sc};
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
    broadcast_from(g, origin, (k % 3 == 2) ? 256 << 10 : 300 + k, seed * 100 + k);
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
}

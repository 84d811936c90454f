// A live processor taken for crashed that lags longer than `past_owner_wait`
// (docs/architecture.md, "Delivery lease"): its frames wait 25 or 40 s (a backlog of
// unread frames, a starved process: inbound, outbound or both ways) or it does not run
// for that long without noticing (frozen), and a member suspects it (a refused
// connection). It is declared crashed, its vnode adopted, and broadcasts from other
// members start around the suspicion. The origins send the unacknowledged vnode to its
// owner at the start first, pass it over after `past_owner_wait` (20 s), and the adopter
// delivers it. Without the lease the lagging processor then delivers the copies it held
// when its backlog is read: the same (broadcast, vnode) twice. With it, the processor
// delivers only while its successor (the adopter) has granted it a lease not yet run
// out, and the adopter claims no earlier than its last grant + the lease: it never
// delivers after the adopter did, and nothing is lost. Duplicates of other origins are
// counted and reported by class (docs/results.md, "A suspect that lags past
// `past_owner_wait`"). Virtual time, fixed seeds.
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
using namespace std::chrono_literals;

namespace {

broadcast_config acked() {
  broadcast_config c;
  c.acknowledge = true;
  c.resend_grace = 200ms; // banyan::node's floor
  c.resend_after = 2s;
  c.complete_within = 60s;
  c.stale_stream = 2s;
  return c; // past_owner_wait: the default 20 s
}

struct tally {
  int runs = 0, false_crashes = 0, broadcasts = 0;
  int exactly_once = 0, duplicates = 0, silent_losses = 0, explicit_fails = 0;
  /// Of the duplicates: the suspect delivered after another processor had, one that it
  /// never took for crashed itself (what the lease prevents), ...
  int suspect_after = 0;
  /// ... the suspect delivered first, and its acknowledgement reached the origin after
  /// `past_owner_wait` (outbound lag: the window the lease leaves), ...
  int suspect_first = 0;
  /// ... the suspect delivered after a processor that it had taken for crashed in turn
  /// before that delivery: deaf
  /// for so long that it buried the others and adopted its vnodes back from its adopter
  /// (a split: two memberships, as in a partition, even where they merge again later
  /// as the others refute their burial and rejoin its side).
  int suspect_split = 0;
  std::uint64_t held = 0; ///< deliveries the suspect held (broadcast_stats::fenced)
  std::string first_problem;
  std::string after_problem; ///< the first of `suspect_after`
  /// ... and duplicates the suspect had no part in: in a run where it took others for
  /// crashed in turn (its false burials of them, as above), ...
  int others_in_split = 0;
  /// ... and in any other run.
  int others = 0;
  std::string others_problem;
  /// Runs in which the suspect took any other member for crashed (a split, duplicates
  /// or not), and the first of them.
  int split_runs = 0;
  std::string split_problem;
  void add(const tally& o) {
    runs += o.runs;
    false_crashes += o.false_crashes;
    broadcasts += o.broadcasts;
    exactly_once += o.exactly_once;
    duplicates += o.duplicates;
    suspect_after += o.suspect_after;
    suspect_first += o.suspect_first;
    suspect_split += o.suspect_split;
    silent_losses += o.silent_losses;
    explicit_fails += o.explicit_fails;
    held += o.held;
    if (first_problem.empty())
      first_problem = o.first_problem;
    if (after_problem.empty())
      after_problem = o.after_problem;
    others += o.others;
    others_in_split += o.others_in_split;
    if (others_problem.empty())
      others_problem = o.others_problem;
    split_runs += o.split_runs;
    if (split_problem.empty())
      split_problem = o.split_problem;
  }
};

/// One run: 8 processors, processor `x` slow by `lag` from the suspicion on; broadcasts
/// from other members at `offset` from the suspicion, 150 and 600 ms after that.
void run_one(std::uint64_t seed, slowness how, duration lag, duration offset, duration lease,
             tally& t) {
  std::mt19937 rng{static_cast<std::uint32_t>(seed * 7919 + static_cast<int>(how))};
  adaptive_riders riders;
  riders.cfg = acked();
  supervisor_config sc;
  sc.lease = lease;
  mini_grid g{tiny_grid(), seed, sc};
  riders.install(g);
  g.start(8);
  g.run_for(2s);
  std::uniform_int_distribution<proc_id> any(0, 7);
  const proc_id x = any(rng);
  proc_id suspector = any(rng);
  while (suspector == x)
    suspector = any(rng);
  std::vector<duration> when{offset, offset + 150ms, offset + 600ms};
  bool suspected = false;
  timestamp suspected_at{0};
  duration at{0};
  int k = 0;
  auto slow_down = [&] {
    switch (how) {
    case slowness::frozen: g.freeze(x, lag); break;
    case slowness::both_ways:
      g.slow([x](const wire::envelope& e) { return e.to == x || e.from == x; }, lag);
      break;
    case slowness::inbound: g.slow([x](const wire::envelope& e) { return e.to == x; }, lag); break;
    case slowness::outbound:
      g.slow([x](const wire::envelope& e) { return e.from == x; }, lag);
      break;
    }
  };
  for (auto w : when) {
    if (!suspected && w >= duration{0}) {
      g.run_for(-at);
      at = duration{0};
      slow_down();
      suspected_at = g.now();
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
  if (!suspected) {
    slow_down();
    suspected_at = g.now();
    g.suspect(suspector, x);
  }
  g.run_for(lag + 2s);
  g.slow(nullptr, duration{0});
  g.run_for(60s);
  ++t.runs;
  for (auto& [p, ev] : g.crash_events())
    if (ev.what == tree_event::kind::disowned && p == x) {
      ++t.false_crashes;
      break;
    }
  t.held += banyan::test::rider(g, x).bcast().stats().fenced;
  bool x_buried_others = false; // the suspect took others for crashed in turn: a split
  for (auto& [p, ev] : g.crash_events())
    if (p == x && ev.what == tree_event::kind::crash_detected) {
      if (!x_buried_others && t.split_problem.empty())
        t.split_problem = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                          std::to_string(lag.count() / 1000000) + " ms offset " +
                          std::to_string(offset.count() / 1000000) + " ms: suspect " +
                          std::to_string(x) + " took " + std::to_string(ev.peer) +
                          " for crashed " +
                          std::to_string(static_cast<long>(to_ms(ev.at) - to_ms(suspected_at))) +
                          " ms after the suspicion";
      x_buried_others = true;
    }
  t.split_runs += x_buried_others ? 1 : 0;
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
        // Who delivered it, in order.
        std::vector<proc_id> before; // who delivered it before the suspect did
        bool counted = false;
        for (auto& r : riders.ledger.log) {
          if (counted || !(r.op == op) || !r.vnodes.contains(v))
            continue;
          if (r.at != x) {
            before.push_back(r.at);
            continue;
          }
          counted = true;
          const bool buried = std::any_of(before.begin(), before.end(), [&](proc_id p) {
            return std::find(r.took_for_crashed.begin(), r.took_for_crashed.end(), p) !=
                   r.took_for_crashed.end();
          });
          if (before.empty())
            ++t.suspect_first;
          else if (buried)
            ++t.suspect_split;
          else {
            ++t.suspect_after;
            if (t.after_problem.empty()) {
              t.after_problem = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                                std::to_string(lag.count() / 1000000) + " ms offset " +
                                std::to_string(offset.count() / 1000000) + " ms: " +
                                wire::to_string(op) + " at vnode " + std::to_string(v) +
                                ": suspect " + std::to_string(x) + " delivered after";
              for (auto p : before)
                t.after_problem += " " + std::to_string(p);
            }
          }
        }
        if (!counted && x_buried_others) {
          ++t.others_in_split;
        } else if (!counted) {
          ++t.others;
          if (t.others_problem.empty()) {
            t.others_problem = "seed " + std::to_string(seed) + " " + name_of(how) + " lag " +
                               std::to_string(lag.count() / 1000000) + " ms offset " +
                               std::to_string(offset.count() / 1000000) + " ms: " +
                               wire::to_string(op) + " at vnode " + std::to_string(v) +
                               " (suspect " + std::to_string(x) + ") delivered by";
            for (auto p : before)
              t.others_problem += " " + std::to_string(p);
          }
        }
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

struct sweep_args {
  std::uint64_t seeds = 3;
  duration lease = 1s;
};

sweep_args args() {
  sweep_args a;
  auto& suite = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i + 1 < suite.argc; ++i) {
    const std::string s = suite.argv[i];
    if (s == "--seeds")
      a.seeds = std::stoull(suite.argv[i + 1]);
    else if (s == "--lease-ms") // 0: without the lease (what it prevents)
      a.lease = std::chrono::milliseconds(std::stoll(suite.argv[i + 1]));
  }
  return a;
}

tally sweep(const sweep_args& a, tally& frozen) {
  tally t;
  for (auto how : {slowness::frozen, slowness::both_ways, slowness::inbound, slowness::outbound}) {
    tally one;
    for (std::uint64_t seed = 1; seed <= a.seeds; ++seed)
      for (auto lag : {25000ms, 40000ms})
        for (auto offset : {-300ms, 0ms, 900ms})
          run_one(seed, how, lag, offset, a.lease, one);
    BOOST_TEST_MESSAGE("  " << name_of(how) << ": " << one.runs << " runs, " << one.duplicates
                       << " twice (the suspect after another " << one.suspect_after
                       << ", first with a late acknowledgement " << one.suspect_first
                       << ", split " << one.suspect_split << ", without it in a split "
                       << one.others_in_split << ", without it otherwise " << one.others << "), " << one.explicit_fails << " failed explicitly, "
                       << one.silent_losses << " lost silently, " << one.held
                       << " deliveries held by the suspect; " << one.split_runs
                       << " runs in which the suspect took others for crashed");
    if (how == slowness::frozen)
      frozen = one;
    t.add(one);
  }
  BOOST_TEST_MESSAGE("lagging suspect sweep (lease " << a.lease.count() / 1000000 << " ms): "
                     << t.runs << " runs, " << t.false_crashes << " false crashes, "
                     << t.broadcasts << " broadcasts; per (broadcast, vnode): "
                     << t.exactly_once << " once, " << t.duplicates << " twice, "
                     << t.explicit_fails << " failed explicitly, " << t.silent_losses
                     << " lost silently; the suspect took others for crashed in "
                     << t.split_runs << " runs");
  return t;
}

} // namespace

// What the lease guarantees: the suspect never delivers a (broadcast, vnode) after
// another processor did, unless it took that processor for crashed in turn
// (`-- --lease-ms 0`, without the lease: it does, in every kind of lag but outbound).
// And local health (core/src/local_health.hpp): however long it lags, the suspect, which
// hears no answer from anyone meanwhile, takes nobody for crashed in turn, so there is
// no split and no duplicate from one, with the lease or without it. What is left
// (counted, reported, not asserted): a delivery the suspect made first, while it held
// the lease, whose acknowledgement its outbound lag kept from the origin past
// `past_owner_wait`.
BOOST_AUTO_TEST_CASE(a_suspect_lagging_past_the_past_owner_wait_never_delivers_after_its_adopter) {
  const auto a = args();
  tally frozen;
  const auto t = sweep(a, frozen);
  BOOST_TEST(t.false_crashes == t.runs); // each run takes the live processor for crashed
  BOOST_TEST(t.suspect_after == 0, t.after_problem);
  BOOST_TEST(t.others == 0, t.others_problem); // every duplicate involves the suspect
  BOOST_TEST(t.split_runs == 0, t.split_problem); // no split ...
  BOOST_TEST(t.suspect_split == 0);              // ... so no duplicate from one
  BOOST_TEST(t.others_in_split == 0);
  BOOST_TEST(t.silent_losses == 0, t.first_problem);
  // Frozen (its frames are not late, it does not run): nothing twice at all.
  BOOST_TEST(frozen.duplicates == 0, frozen.first_problem);
}

namespace {

double g_procs(const std::string& topo) {
  return static_cast<double>(builtin_topology(topo)->proc_count());
}

struct healthy_run {
  std::vector<double> ms;    ///< per broadcast: from its start until every vnode had it
  std::uint64_t held = 0;    ///< deliveries held for want of a lease, all processors
  std::uint64_t pings = 0;   ///< lease pings sent, all processors (each answered: x2 frames)
  double seconds = 0;        ///< virtual time the pings were counted over
};

/// A healthy cluster: 20 broadcasts (1 KiB and 256 KiB alternately) from random members,
/// one every 250 ms, nobody slow or suspected; each timed to its last delivery (1 ms steps).
healthy_run healthy(const std::string& topo, std::uint64_t seed, duration lease) {
  auto t = builtin_topology(topo);
  BOOST_REQUIRE(t.has_value());
  const auto n = static_cast<proc_id>(t->proc_count());
  adaptive_riders riders;
  riders.cfg = acked();
  supervisor_config sc;
  sc.lease = lease;
  mini_grid g{*t, seed, sc};
  riders.install(g);
  g.start();
  g.run_for(5s); // trees formed, leases granted
  std::mt19937 rng{static_cast<std::uint32_t>(seed)};
  std::uniform_int_distribution<proc_id> any(0, n - 1);
  healthy_run r;
  const auto from = g.now();
  std::uint64_t pings_before = 0;
  for (proc_id p = 0; p < n; ++p)
    pings_before += g.sup(p)->lease_pings();
  std::vector<std::pair<wire::collective_id, timestamp>> ops;
  std::vector<bool> done;
  for (int step = 0; step < 20000; ++step) {
    if (step % 250 == 0 && ops.size() < 20) {
      const auto k = static_cast<int>(ops.size());
      ops.emplace_back(broadcast_from(g, any(rng), k % 2 ? 256 << 10 : 1024, seed * 1000 + k), g.now());
      done.push_back(false);
      r.ms.push_back(-1);
    }
    bool all = ops.size() == 20;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (done[i])
        continue;
      vnode_id got = 0;
      for (vnode_id v = 0; v < n; ++v)
        got += riders.ledger.count.count({ops[i].first, v}) ? 1 : 0;
      if (got == n) {
        done[i] = true;
        r.ms[i] = to_ms(g.now()) - to_ms(ops[i].second);
      } else {
        all = false;
      }
    }
    if (all)
      break;
    g.run_for(1ms);
  }
  r.seconds = to_ms(g.now() - from) / 1000.0;
  for (proc_id p = 0; p < n; ++p) {
    r.held += banyan::test::rider(g, p).bcast().stats().unleased;
    r.pings += g.sup(p)->lease_pings();
  }
  r.pings -= pings_before;
  return r;
}

} // namespace

// The lease on the normal path: a member that hears its successor's answers within the
// lease never holds a delivery, so broadcasts complete at the same virtual instants
// with and without it (the cost is the pings: 2 frames per member per lease / 4).
BOOST_AUTO_TEST_CASE(a_healthy_cluster_holds_no_delivery_for_the_lease) {
  // `-- --healthy-topology paper-4c160` for docs/results.md's second row.
  std::string topo = "tiny-2c8";
  auto& suite = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i + 1 < suite.argc; ++i)
    if (std::string(suite.argv[i]) == "--healthy-topology")
      topo = suite.argv[i + 1];
  for (std::uint64_t seed : {1, 2}) {
      const auto off = healthy(topo, seed, duration{0});
      const auto on = healthy(topo, seed, 1s);
      BOOST_TEST(on.held == 0u);
      BOOST_TEST(off.pings == 0u);
      double sum_off = 0, sum_on = 0, max_off = 0, max_on = 0;
      for (auto x : off.ms) sum_off += x, max_off = std::max(max_off, x);
      for (auto x : on.ms) sum_on += x, max_on = std::max(max_on, x);
      const auto n = static_cast<double>(on.ms.size());
      BOOST_TEST_MESSAGE(topo << " seed " << seed << ": broadcast to the last vnode, mean/max ms: "
                         << "no lease " << sum_off / n << "/" << max_off << ", lease 1 s "
                         << sum_on / n << "/" << max_on << "; lease pings "
                         << on.pings / on.seconds << "/s in all ("
                         << on.pings / on.seconds / g_procs(topo) << " per member), "
                         << on.held << " deliveries held");
      for (std::size_t i = 0; i < on.ms.size(); ++i)
        BOOST_TEST(on.ms[i] >= 0); // every broadcast reached every vnode
  }
}

namespace {

/// When processor `x`'s vnodes are adopted after it crashed at `at` and was suspected at
/// once (its connections refused: declared without waiting for `suspect_timeout`).
double adopted_after_crash(std::uint64_t seed, duration lease) {
  supervisor_config sc;
  sc.lease = lease;
  mini_grid g{tiny_grid(), seed, sc};
  g.start(8);
  g.run_for(2s + std::chrono::milliseconds(37 * seed)); // crash at varied lease phases
  const proc_id x = static_cast<proc_id>(seed % 8);
  const auto at = g.now();
  g.crash(x);
  g.suspect((x + 3) % 8, x);
  g.run_for(5s);
  for (auto& [p, ev] : g.crash_events())
    if (ev.what == tree_event::kind::adopted && ev.peer == x)
      return to_ms(ev.at) - to_ms(at);
  return -1;
}

} // namespace

// The grantor keeps its promise with a crash that is found at once: the adoption waits
// until the last lease it granted ran out (its last answer to the dead processor + the
// lease), and no longer than the lease past `adopt_delay`; without a lease, `adopt_delay`.
BOOST_AUTO_TEST_CASE(a_crashed_processor_is_adopted_once_the_lease_it_held_ran_out) {
  const supervisor_config defaults;
  const double delay = to_ms(defaults.adopt_delay);
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const auto off = adopted_after_crash(seed, duration{0});
    const auto on = adopted_after_crash(seed, 1s);
    BOOST_TEST_MESSAGE("seed " << seed << ": adopted " << off << " ms after the crash without a lease, "
                       << on << " ms with a 1 s lease");
    BOOST_TEST(off >= delay);
    BOOST_TEST(off < delay + 50); // the verdict costs round trips only
    // The last lease ping arrived at most a quarter lease (+ a round trip) before the
    // crash, so the claim waits at least about three quarters of the lease ...
    BOOST_TEST(on >= 1000.0 * 3 / 4 - 50);
    // ... and never longer than the lease after the verdict.
    BOOST_TEST(on <= 1000.0 + delay + 50);
  }
}

namespace {

struct silent_crash {
  double detected_ms = -1;  ///< from the freeze to the watcher's crash_detected
  double suspected_ms = -1; ///< from the watcher's suspicion to its verdict
  int max_score = 0;        ///< the highest local health score among the others after
};

/// Processor `x` stops answering for good without refusing anything (a process stopped,
/// a host gone silent: its connections stay open) among 7 healthy members; its
/// predecessor's crash watch (`crash_timeout` 2 s) notices the silence and suspects it.
silent_crash crash_silently(std::uint64_t seed, duration lease) {
  supervisor_config sc;
  sc.lease = lease;
  sc.crash_timeout = 2s;
  mini_grid g{tiny_grid(), seed, sc};
  g.start(8);
  g.run_for(10s + std::chrono::milliseconds(113 * seed)); // varied watch phases
  const proc_id x = static_cast<proc_id>(seed % 8);
  const proc_id watcher = (x + 7) % 8;
  const auto at = g.now();
  g.freeze(x, 600s);
  g.run_for(10s);
  silent_crash r;
  for (auto& [p, ev] : g.crash_events())
    if (ev.what == tree_event::kind::crash_detected && ev.peer == x && p == watcher &&
        r.detected_ms < 0)
      r.detected_ms = to_ms(ev.at) - to_ms(at);
  for (auto& [p, ev] : g.suspicion_events())
    if (ev.what == tree_event::kind::suspected && ev.peer == x && p == watcher &&
        r.suspected_ms < 0 && r.detected_ms >= 0)
      r.suspected_ms = r.detected_ms - (to_ms(ev.at) - to_ms(at));
  for (proc_id p = 0; p < 8; ++p)
    if (p != x)
      r.max_score = std::max(r.max_score, g.sup(p)->local_health());
  return r;
}

} // namespace

// Local health (core/src/local_health.hpp) on the path it must not slow: among healthy
// members one silent crash is declared `suspect_timeout` after the watch suspects it,
// as without local health (the helpers answer the suspector's own pings at once), so
// within `crash_timeout` + one watch period + `suspect_timeout` of the crash.
BOOST_AUTO_TEST_CASE(one_silent_crash_among_healthy_members_is_declared_as_fast_as_before) {
  const supervisor_config defaults;
  for (duration lease : {duration{0}, duration{1s}})
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      const auto r = crash_silently(seed, lease);
      BOOST_TEST_MESSAGE("lease " << lease.count() / 1000000 << " ms, seed " << seed
                         << ": declared " << r.detected_ms << " ms after the crash, "
                         << r.suspected_ms << " ms after the suspicion; highest score "
                         << r.max_score);
      BOOST_TEST_REQUIRE(r.detected_ms >= 0);
      BOOST_TEST(r.suspected_ms == to_ms(defaults.suspect_timeout));
      BOOST_TEST(r.detected_ms <= 2000.0 + 500.0 + to_ms(defaults.suspect_timeout) + 1);
      BOOST_TEST(r.max_score == 0);
    }
}

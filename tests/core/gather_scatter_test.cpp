// Gather (core/gather.hpp) and scatter (core/scatter.hpp) over the adaptive trees of a
// mini_grid, in virtual time: every vnode's block reaches the root exactly once (gather)
// and every vnode gets its own block exactly once (scatter), on stable trees, while the
// trees form, and while processors join and leave at random.

#include <boost/test/unit_test.hpp>

#include <map>
#include <random>

#include "banyan/core/gather.hpp"
#include "banyan/core/scatter.hpp"
#include "core/collective_rider.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::adaptive_riders;
using banyan::test::collective_rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::random_topology;
using banyan::test::reduction_ledger;
using banyan::test::rider;
using bytes = std::vector<std::uint8_t>;
using namespace std::chrono_literals;

namespace {

/// Vnode v's block in gather (or scatter) `op`: `n` bytes, different for every pair.
bytes block_of(std::uint64_t op, vnode_id v, std::size_t n) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(op * 131 + v * 7 + i * 3 + 1);
  return b;
}

/// Riders whose reduction engine is a gather engine.
struct gather_fixture {
  delivery_ledger deliveries;
  reduction_ledger gathers;
  reduce_config cfg = gather_config(reduce_config{});

  gather_fixture() {
    gathers.value = [this](std::uint64_t op, vnode_id v) {
      return block_of(op, v, gathers.specs.at(op).count);
    };
  }
  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id, const supervisor& s) {
      return std::make_unique<collective_rider>(s, deliveries, broadcast_config{}, &gathers, cfg);
    });
  }

  /// Every gather started: each vnode's block taken once, one result, holding every
  /// vnode's block once, in vnode order.
  std::string check(vnode_id vnodes) const {
    std::string r;
    for (auto& [op, spec] : gathers.specs) {
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto i = gathers.calls.find({op, v});
        const int n = i == gathers.calls.end() ? 0 : i->second;
        if (n != 1)
          r += "gather " + std::to_string(op) + " took vnode " + std::to_string(v) + " " +
               std::to_string(n) + " times; ";
      }
      auto res = gathers.results.find(op);
      if (res == gathers.results.end() || res->second.size() != 1) {
        r += "gather " + std::to_string(op) + " has " +
             std::to_string(res == gathers.results.end() ? 0 : res->second.size()) + " results; ";
        continue;
      }
      auto& got = res->second.front();
      if (got.vnodes != vnode_set::range(0, vnodes))
        r += "gather " + std::to_string(op) + " covers " + got.vnodes.to_string() + "; ";
      auto blocks = gathered_blocks(got);
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto b = blocks.find(v);
        if (b == blocks.end() || b->second.to_vector() != block_of(op, v, spec.count)) {
          r += "gather " + std::to_string(op) + ": wrong block for vnode " + std::to_string(v) + "; ";
          break;
        }
      }
    }
    for (std::size_t i = 0; i < gathers.problems.size() && i < 4; ++i)
      r += gathers.problems[i] + "; ";
    return r;
  }
};

void start_gather(mini_grid& g, proc_id p, const reduce_spec& spec) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto e = dynamic_cast<collective_rider&>(r).reduce(now, spec, out);
    if (e)
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

std::uint64_t first_open(const reduction_ledger& l, std::uint64_t after_last) {
  for (std::uint64_t op = 1; op <= after_last; ++op)
    if (!l.results.count(op))
      return op;
  return after_last + 1;
}

void catch_up(mini_grid& g, const reduction_ledger& l, const std::vector<reduce_spec>& specs,
              proc_id p, std::uint64_t upto) {
  auto& r = rider(g, p).reducer();
  auto from = r.last_started() == 0 ? first_open(l, specs.size()) : r.last_started() + 1;
  for (auto op = from; op <= upto && op <= specs.size(); ++op)
    start_gather(g, p, specs[op - 1]);
}

/// Every vnode's block, for a scatter of `n` bytes per vnode over `vnodes` vnodes.
std::map<vnode_id, shared_bytes> scatter_blocks(std::uint64_t op, vnode_id vnodes, std::size_t n) {
  std::map<vnode_id, shared_bytes> m;
  for (vnode_id v = 0; v < vnodes; ++v)
    m[v] = shared_bytes(block_of(op, v, n));
  return m;
}

/// Processor p scatters from one of its vnodes (false when it owns none).
bool start_scatter(mini_grid& g, proc_id p, std::uint64_t op, vnode_id vnodes, std::size_t n) {
  bool started = false;
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto& cr = dynamic_cast<collective_rider&>(r);
    cr.view().refresh();
    if (!cr.view().participating() || cr.view().own_vnodes().empty())
      return;
    auto payload = scatter_payload(cr.view(), cr.view().own_vnodes().front(),
                                   scatter_blocks(op, vnodes, n));
    if (!payload)
      BOOST_FAIL(payload.err().to_string());
    cr.broadcast(now, *payload, out);
    started = true;
  });
  return started;
}

} // namespace

BOOST_AUTO_TEST_CASE(gather_on_stable_trees_brings_every_block_once) {
  std::mt19937 rng{71};
  for (int round = 0; round < 8; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    gather_fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
    f.install(g);
    g.start();
    g.run();
    for (std::uint64_t op = 1; op <= 3; ++op) {
      // The third one is long: up the bandwidth trees.
      auto spec = gather_spec(op, static_cast<vnode_id>(rng() % n), op == 3 ? 40000 : 1 + rng() % 16, n);
      for (proc_id p = 0; p < n; ++p)
        start_gather(g, p, spec);
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.check(n) == "");
      std::uint64_t direct = 0;
      for (proc_id p = 0; p < n; ++p)
        direct += rider(g, p).reducer().stats().direct_partials;
      BOOST_TEST(direct == 0u); // on stable trees everything goes up the tree
    }
  }
}

// Processors join and leave at random and vnodes move while gathers are started at
// random moments: every gather still takes every vnode's block exactly once.
BOOST_AUTO_TEST_CASE(gathers_under_churn_take_every_block_exactly_once) {
  std::mt19937 rng{1606};
  reduce_stats all;
  for (int round = 0; round < 24; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    gather_fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(7000 + round)};
    f.install(g);
    g.start();
    if (round % 2)
      g.run();
    std::vector<reduce_spec> specs;
    for (std::uint64_t op = 1; op <= 5; ++op)
      specs.push_back(gather_spec(op, static_cast<vnode_id>(rng() % n),
                                  op == 5 && round % 4 == 0 ? 30000 : 1 + rng() % 8, n));
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int) {
        auto last = rider(g, p).reducer().last_started();
        catch_up(g, f.gathers, specs, p, last == 0 ? first_open(f.gathers, specs.size()) : last + 1);
      });
    }
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(g, f.gathers, specs, p, specs.size());
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p) {
        if (g.live()[p])
          BOOST_TEST(!rider(g, p).reducer().holding(),
                     "processor " << p << ":\n" << rider(g, p).reducer().describe());
        if (g.rider_of(p)) {
          auto& s = rider(g, p).reducer().stats();
          all.handoffs += s.handoffs;
          all.direct_partials += s.direct_partials;
        }
      }
    }
  }
  BOOST_TEST(all.handoffs > 0u);       // vnodes did move with their histories
  BOOST_TEST(all.direct_partials > 0u); // and partials did go round broken trees
}

BOOST_AUTO_TEST_CASE(a_block_of_the_wrong_size_refuses_the_gather) {
  auto topo = random_topology(*std::make_unique<std::mt19937>(5));
  auto n = static_cast<proc_id>(topo.proc_count());
  gather_fixture f;
  f.gathers.value = [](std::uint64_t, vnode_id v) { return bytes(v == 0 ? 3 : 4, 1); };
  mini_grid g{topo, 3};
  f.install(g);
  g.start();
  g.run();
  g.with_rider(0, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto e = dynamic_cast<collective_rider&>(r).reduce(now, gather_spec(1, 0, 4, n), out);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == errc::invalid_argument));
    BOOST_TEST(e->message.find("vnode 0") != std::string::npos, e->message);
    auto z = dynamic_cast<collective_rider&>(r).reduce(now, gather_spec(1, 0, 0, n), out);
    BOOST_REQUIRE(z.has_value());
    BOOST_TEST((z->code == errc::invalid_argument));
  });
}

BOOST_AUTO_TEST_CASE(scatter_on_stable_trees_gives_each_vnode_its_block_once_from_its_parent) {
  std::mt19937 rng{72};
  for (int round = 0; round < 8; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg = scatter_config(broadcast_config{});
    mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
    riders.install(g);
    g.start();
    g.run();
    for (std::uint64_t op = 1; op <= 3; ++op)
      BOOST_REQUIRE(start_scatter(g, static_cast<proc_id>(rng() % n), op, n,
                                  op == 3 ? 50000 : 1 + rng() % 16));
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      std::uint64_t direct = 0;
      for (proc_id p = 0; p < n; ++p)
        direct += rider(g, p).bcast().stats().direct_frames;
      BOOST_TEST(direct == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(scatters_under_churn_give_each_vnode_its_block_exactly_once) {
  std::mt19937 rng{2606};
  broadcast_stats all;
  for (int round = 0; round < 24; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    adaptive_riders riders;
    riders.cfg = scatter_config(broadcast_config{});
    mini_grid g{topo, static_cast<std::uint64_t>(8000 + round)};
    riders.install(g);
    g.start();
    if (round % 2)
      g.run();
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    std::uint64_t op = 0;
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int) {
        if (start_scatter(g, p, op + 1, n, round % 4 == 0 && step % 7 == 0 ? 30000 : 1 + rng() % 8))
          ++op;
      });
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors, " << op << " scatters") {
      BOOST_TEST(op > 0u);
      BOOST_TEST(riders.ledger.check_exactly_once(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p)
        if (g.rider_of(p)) {
          auto& s = rider(g, p).bcast().stats();
          all.redirected += s.redirected;
          all.direct_frames += s.direct_frames;
          all.offered += s.offered;
        }
    }
  }
  BOOST_TEST(all.direct_frames > 0u); // blocks did go round broken trees
  BOOST_TEST(all.offered == 0u);      // never offered: a new owner's stream lacks the blocks
}

BOOST_AUTO_TEST_CASE(a_scatter_refuses_wrong_blocks_and_a_root_owned_elsewhere) {
  auto topo = random_topology(*std::make_unique<std::mt19937>(6));
  auto n = static_cast<proc_id>(topo.proc_count());
  adaptive_riders riders;
  riders.cfg = scatter_config(broadcast_config{});
  mini_grid g{topo, 4};
  riders.install(g);
  g.start();
  g.run();
  auto& view = rider(g, 0).view();
  view.refresh();
  auto ok = scatter_blocks(1, n, 4);
  BOOST_TEST(scatter_payload(view, 0, ok).has_value());
  auto check = [&](vnode_id root, std::map<vnode_id, shared_bytes> blocks, const char* says) {
    auto r = scatter_payload(view, root, blocks);
    BOOST_REQUIRE(!r.has_value());
    BOOST_TEST((r.err().code == errc::invalid_argument));
    BOOST_TEST(r.err().message.find(says) != std::string::npos, r.err().message);
  };
  check(1, ok, "not owned");                // vnode 1 is processor 1's
  check(n + 5, ok, "does not exist");
  auto missing = ok;
  missing.erase(2);
  check(0, missing, "none for {2}");
  auto extra = ok;
  extra[n + 1] = shared_bytes(bytes(4, 0));
  check(0, extra, "unknown vnodes");
  auto uneven = ok;
  uneven[3] = shared_bytes(bytes(5, 0));
  check(0, uneven, "vnode 3");
  // The engine itself refuses bytes that are not one block per vnode.
  broadcast_outbox bo;
  auto id = rider(g, 0).bcast().broadcast(g.now(), shared_bytes(bytes(n * 4 + 1, 0)), bo);
  BOOST_TEST(!id.has_value());
}

namespace {

/// One round of a gather through a crash and a move of the root vnode (topology and
/// choices from `seed`): a relay R of the root's tree passes its partial on, so the
/// result completes at the root's owner O, and crashes before its acknowledgements get
/// out (they are slowed down); R's children send their partials again, tentatively
/// (slowed down too), and meanwhile O leaves and hands the root vnode to another
/// processor. Returns false when the topology has no relay with children.
struct crash_then_move {
  bool ran = false;
  std::string check;          ///< gather_fixture::check after the round
  std::vector<proc_id> holding; ///< live processors whose engine holds something
  std::string described;      ///< what the first of them holds
  reduce_stats stats;         ///< summed over every processor
};

crash_then_move gather_through_a_crash_and_a_move(std::uint64_t seed) {
  crash_then_move r;
  std::mt19937 rng{static_cast<std::mt19937::result_type>(seed)};
  auto topo = random_topology(rng);
  const auto n = static_cast<proc_id>(topo.proc_count());
  supervisor_config eager;
  eager.suspect_timeout = duration{0}; // one refused connection declares a crash
  gather_fixture f;
  mini_grid g{topo, seed, eager};
  f.install(g);
  g.start();
  g.run();
  const auto root = static_cast<vnode_id>(rng() % n);
  const proc_id owner = root; // one vnode per founder: vnode v is processor v's
  const auto spec = gather_spec(1, root, 8, n);
  const auto t = g.tree_of({owner, tree_kind::latency});
  const auto& parent = t.parents();
  // The relay with the most children.
  proc_id relay = no_proc;
  std::size_t most = 0;
  for (proc_id p = 0; p < n; ++p) {
    if (p == owner)
      continue;
    std::size_t kids = 0;
    for (proc_id q = 0; q < n; ++q)
      kids += parent[q] == p;
    if (kids > most) {
      most = kids;
      relay = p;
    }
  }
  if (relay == no_proc)
    return r;
  proc_id next = no_proc; // takes the root vnode: neither R nor one of R's children
  for (proc_id p = 0; p < n && next == no_proc; ++p)
    if (p != owner && p != relay && parent[p] != relay)
      next = p;
  if (next == no_proc)
    return r;
  r.ran = true;
  g.slow([relay](const wire::envelope& e) {
    if (e.from == relay && std::holds_alternative<wire::reduce_ack>(e.body))
      return true;
    auto* p = std::get_if<wire::reduce_partial>(&e.body);
    return p && p->tentative;
  }, 3s);
  for (proc_id p = 0; p < n; ++p)
    start_gather(g, p, spec);
  g.run_for(1s);
  BOOST_REQUIRE_MESSAGE(f.gathers.results.count(1), "seed " << seed << ": no result before the crash");
  g.crash(relay);
  for (proc_id p = 0; p < n; ++p)
    if (p != relay)
      g.suspect(p, relay);
  g.run_for(400ms); // the tree heals; after `resend_grace` R's children send copies
  g.leave(owner, next);
  g.run();
  r.check = f.check(n);
  for (proc_id p = 0; p < n; ++p) {
    if (g.live()[p] && rider(g, p).reducer().holding()) {
      if (r.holding.empty())
        r.described = rider(g, p).reducer().describe();
      r.holding.push_back(p);
    }
    if (g.rider_of(p)) {
      auto& s = rider(g, p).reducer().stats();
      r.stats.resent += s.resent;
      r.stats.superseded += s.superseded;
    }
  }
  return r;
}

} // namespace

// A relay of a gather's tree crashes after passing its partial on and before its
// acknowledgements get out, and the root vnode then moves: the copies its children send
// again reach the root vnode's new owner, which learns from the old one's handoff that
// the gather completed and drops them. Every block counted once, nothing held.
BOOST_AUTO_TEST_CASE(a_gather_through_a_relay_crash_and_a_root_move_holds_nothing) {
  int ran = 0, resent = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      auto r = gather_through_a_crash_and_a_move(seed);
      if (!r.ran)
        continue;
      ++ran;
      resent += r.stats.resent > 0;
      BOOST_TEST(r.check == "");
      BOOST_TEST(r.holding.empty(), r.holding.size() << " processors hold, the first:\n"
                                                     << r.described);
    }
  }
  BOOST_TEST(ran >= 6);
  BOOST_TEST(resent >= 4); // copies were sent, and had to be dropped at the new owner
}

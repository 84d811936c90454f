// All-to-all (core/alltoall.hpp) over the adaptive trees of a mini_grid, in virtual time:
// every vnode gets the block every vnode has for it, each vnode's contribution counted once
// and each vnode delivered to once, on stable trees and while processors join and leave at
// random; bad blocks are refused with a clear error. MPICH's pairwise exchange
// (core/pairwise_alltoall.hpp), the baseline: the same blocks, k (k - 1) messages.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "banyan/core/alltoall.hpp"
#include "banyan/core/pairwise_alltoall.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/vnode_blocks.hpp"
#include "core/engine_rider.hpp"
#include "core/mini_grid.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::mini_grid;
using banyan::test::random_topology;
using bytes = std::vector<std::uint8_t>;
using namespace std::chrono_literals;

namespace {

/// The block vnode v has for vnode w in all-to-all `op`: `n` bytes, different per triple.
bytes block_of(std::uint64_t op, vnode_id v, vnode_id w, std::size_t n) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(op * 37 + v * 5 + w * 11 + i * 3 + 2);
  return b;
}

/// Vnode v's contribution: its block for every vnode 0..vnodes-1.
bytes contribution_of(std::uint64_t op, vnode_id v, vnode_id vnodes, std::size_t n) {
  bytes all;
  for (vnode_id w = 0; w < vnodes; ++w) {
    auto b = block_of(op, v, w, n);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

/// Whether `d` holds, for each of its vnodes w, the block every vnode had for w.
bool right_blocks(const alltoall_delivery& d, std::size_t n) {
  if (d.block != n || d.blocks.size() != d.vnodes.size())
    return false;
  bool ok = true;
  d.vnodes.for_each([&](vnode_id w) {
    auto i = d.blocks.find(w);
    if (i == d.blocks.end() || i->second.size() != d.from.size() * n) {
      ok = false;
      return;
    }
    std::size_t at = 0;
    d.from.for_each([&](vnode_id v) {
      auto want = block_of(d.op, v, w, n);
      ok = ok && std::equal(want.begin(), want.end(), i->second.data() + at);
      at += n;
    });
  });
  return ok;
}

/// What every processor contributed and was delivered, for the whole grid.
struct ledger {
  std::map<std::uint64_t, std::size_t> block; ///< op -> bytes per vnode
  std::map<std::pair<std::uint64_t, vnode_id>, int> calls;
  std::map<std::pair<std::uint64_t, vnode_id>, int> delivered;
  std::map<std::uint64_t, int> gathered; ///< gather number -> results at a range root
  std::vector<std::string> problems;

  std::string check(vnode_id vnodes) const {
    std::string r;
    int shown = 0;
    for (auto& [op, b] : block)
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto c = calls.find({op, v});
        auto d = delivered.find({op, v});
        const int nc = c == calls.end() ? 0 : c->second;
        const int nd = d == delivered.end() ? 0 : d->second;
        if ((nc != 1 || nd != 1) && shown++ < 8)
          r += "alltoall " + std::to_string(op) + ", vnode " + std::to_string(v) + ": taken " +
               std::to_string(nc) + " times, delivered " + std::to_string(nd) + " times; ";
      }
    for (std::size_t i = 0; i < problems.size() && i < 4; ++i)
      r += problems[i] + "; ";
    return r;
  }
};

class alltoall_rider final : public banyan::test::engine_rider {
public:
  alltoall_rider(const supervisor& s, ledger& l, std::uint64_t first_seq, vnode_id vnodes)
    : engine_rider(s), ledger_(l), vnodes_(vnodes),
      eng_(view_, ops_, reduce_config{}, config(first_seq), founded(s)) {}

  alltoall_collective& engine() override { return eng_; }
  const alltoall_collective& engine() const override { return eng_; }

  std::optional<error> start(timestamp now, std::uint64_t op, vnode_id root, outbox& out) {
    auto* l = &ledger_;
    const auto n = ledger_.block.at(op);
    const auto vnodes = vnodes_;
    auto e = eng_.start(now, op, root, n, [l, op, n, vnodes](vnode_id v) {
      ++l->calls[{op, v}];
      return contribution_of(op, v, vnodes, n);
    });
    take(out);
    return e;
  }

private:
  static broadcast_config config(std::uint64_t first_seq) {
    broadcast_config bc;
    bc.first_seq = first_seq;
    return bc;
  }
  void record() override {
    auto& o = eng_.out();
    for (auto& d : o.deliveries) {
      if (!own_now().includes(d.vnodes))
        ledger_.problems.push_back("delivered " + d.vnodes.to_string() + " at processor " +
                                   std::to_string(view_.self()) + " which owns " +
                                   own_now().to_string());
      auto b = ledger_.block.find(d.op);
      if (b == ledger_.block.end() || d.from != vnode_set::range(0, vnodes_) ||
          !right_blocks(d, b->second))
        ledger_.problems.push_back("wrong blocks of alltoall " + std::to_string(d.op));
      d.vnodes.for_each([&](vnode_id v) { ++ledger_.delivered[{d.op, v}]; });
    }
    for (auto& r : o.gathered)
      ++ledger_.gathered[r.op];
    for (auto& p : o.problems)
      ledger_.problems.push_back("processor " + std::to_string(view_.self()) + ": " + p.detail);
  }

  ledger& ledger_;
  vnode_id vnodes_;
  reduce_op_table ops_;
  alltoall_collective eng_;
};

struct fixture {
  ledger l;
  vnode_id vnodes = 0;
  std::map<proc_id, std::uint64_t> incarnations;
  void install(mini_grid& g, vnode_id n) {
    vnodes = n;
    g.set_rider_factory([this](proc_id p, const supervisor& s) {
      return std::make_unique<alltoall_rider>(s, l, (incarnations[p]++ << 32) + 1, vnodes);
    });
  }
};

alltoall_rider& rider(mini_grid& g, proc_id p) {
  return dynamic_cast<alltoall_rider&>(*g.rider_of(p));
}

void start(mini_grid& g, proc_id p, std::uint64_t op, vnode_id root) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    if (auto e = dynamic_cast<alltoall_rider&>(r).start(now, op, root, out))
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

std::uint64_t first_open(const ledger& l, vnode_id vnodes, std::uint64_t last) {
  // The first all-to-all some vnode has not been delivered yet (where a joiner begins).
  for (std::uint64_t op = 1; op <= last; ++op)
    for (vnode_id v = 0; v < vnodes; ++v)
      if (!l.delivered.count({op, v}))
        return op;
  return last + 1;
}

} // namespace

BOOST_AUTO_TEST_CASE(alltoall_on_stable_trees_gives_every_vnode_its_blocks_once) {
  std::mt19937 rng{81};
  for (int round = 0; round < 8; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
    f.install(g, n);
    g.start();
    g.run();
    for (std::uint64_t op = 1; op <= 3; ++op) {
      f.l.block[op] = op == 3 ? 2000 : 1 + rng() % 16; // the third: n x 2000 bytes a vnode
      const auto root = static_cast<vnode_id>(rng() % n);
      for (proc_id p = 0; p < n; ++p)
        start(g, p, op, root);
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.l.check(n) == "");
      std::uint64_t direct = 0;
      for (proc_id p = 0; p < n; ++p)
        direct += rider(g, p).engine().up().stats().direct_partials +
                  rider(g, p).engine().down().stats().direct_frames;
      BOOST_TEST(direct == 0u); // up and down the trees only
    }
  }
}

BOOST_AUTO_TEST_CASE(alltoalls_under_churn_count_and_deliver_every_vnode_exactly_once) {
  std::mt19937 rng{3606};
  std::uint64_t handoffs = 0, direct = 0;
  for (int round = 0; round < 20; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(5000 + round)};
    f.install(g, n);
    g.start();
    if (round % 2)
      g.run();
    const std::uint64_t ops = 4;
    std::vector<vnode_id> roots;
    for (std::uint64_t op = 1; op <= ops; ++op) {
      f.l.block[op] = op == ops && round % 4 == 0 ? 1500 : 1 + rng() % 8;
      roots.push_back(static_cast<vnode_id>(rng() % n));
    }
    auto catch_up = [&](proc_id p, std::uint64_t upto) {
      auto& up = rider(g, p).engine(); // its all-to-all numbers (not its gathers')
      auto from = up.last_started() == 0 ? first_open(f.l, n, ops) : up.last_started() + 1;
      for (auto op = from; op <= upto && op <= ops; ++op)
        start(g, p, op, roots[op - 1]);
    };
    std::uniform_int_distribution<proc_id> any(0, n - 1);
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      auto p = any(rng);
      auto live = g.live();
      auto what = std::uniform_int_distribution<int>(0, 3)(rng);
      if (what <= 1) {
        if (live[p]) {
          auto last = rider(g, p).engine().last_started();
          catch_up(p, last == 0 ? first_open(f.l, n, ops) : last + 1);
        }
      } else if (live[p] && g.live_count() > 2) {
        g.leave(p);
      } else if (!g.reachable(p) && g.sup(p)->state() == supervisor::status::left) {
        g.rejoin_randomly(p, n, rng);
      }
    }
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(p, ops);
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.l.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p) {
        if (g.live()[p])
          BOOST_TEST(!rider(g, p).engine().holding());
        if (g.rider_of(p)) {
          handoffs += rider(g, p).engine().up().stats().handoffs;
          direct += rider(g, p).engine().up().stats().direct_partials +
                    rider(g, p).engine().down().stats().direct_frames;
        }
      }
    }
  }
  BOOST_TEST(handoffs > 0u); // vnodes did move with their histories
  BOOST_TEST(direct > 0u);   // and blocks did go round broken trees
}

BOOST_AUTO_TEST_CASE(alltoalls_cut_into_ranges_deliver_every_block_once_under_churn) {
  // Blocks of 150-900 bytes over 4-16 vnodes: every all-to-all is cut into 2 .. n ranges,
  // each its own gather and scatter, while processors join and leave at random.
  std::mt19937 rng{7707};
  std::uint64_t handoffs = 0, cut = 0;
  for (int round = 0; round < 10; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(7000 + round)};
    f.install(g, n);
    g.start();
    g.run();
    const std::uint64_t ops = 5;
    std::vector<vnode_id> roots;
    for (std::uint64_t op = 1; op <= ops; ++op) {
      f.l.block[op] = 150 + rng() % 750;
      roots.push_back(static_cast<vnode_id>(rng() % n));
      cut += alltoall_ranges(n, f.l.block[op]) > 1;
    }
    auto catch_up = [&](proc_id p, std::uint64_t upto) {
      auto& e = rider(g, p).engine();
      auto from = e.last_started() == 0 ? first_open(f.l, n, ops) : e.last_started() + 1;
      for (auto op = from; op <= upto && op <= ops; ++op)
        start(g, p, op, roots[op - 1]);
    };
    std::uniform_int_distribution<proc_id> any(0, n - 1);
    for (int step = 0; step < 30; ++step) {
      g.run_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 4000)(rng)));
      auto p = any(rng);
      auto live = g.live();
      auto what = std::uniform_int_distribution<int>(0, 3)(rng);
      if (what <= 1) {
        if (live[p]) {
          auto last = rider(g, p).engine().last_started();
          catch_up(p, last == 0 ? first_open(f.l, n, ops) : last + 1);
        }
      } else if (live[p] && g.live_count() > 2) {
        g.leave(p);
      } else if (!g.reachable(p) && g.sup(p)->state() == supervisor::status::left) {
        g.rejoin_randomly(p, n, rng);
      }
    }
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(p, ops);
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.l.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      // Every range gathered once, at its root's owner, and nothing else gathered.
      std::size_t ranges = 0;
      for (std::uint64_t op = 1; op <= ops; ++op) {
        const auto m = alltoall_ranges(n, f.l.block[op]);
        ranges += m;
        for (std::size_t r = 0; r < m; ++r) {
          auto i = f.l.gathered.find(alltoall_gather_number(1, op, r));
          BOOST_TEST((i != f.l.gathered.end() && i->second == 1),
                     "alltoall " << op << ", range " << r << " of " << m);
        }
      }
      BOOST_TEST(f.l.gathered.size() == ranges);
      for (proc_id p = 0; p < n; ++p) {
        if (g.live()[p]) {
          // Nothing held down the trees, nor up them: no partial was sent again after its
          // result completed (leaves only, no crash: every partial kept for a resend was
          // acknowledged).
          BOOST_TEST(!rider(g, p).engine().down().holding(), "processor " << p);
          BOOST_TEST(!rider(g, p).engine().up().holding(),
                     "processor " << p << ":\n" << rider(g, p).engine().up().describe());
        }
        if (g.rider_of(p))
          handoffs += rider(g, p).engine().up().stats().handoffs;
      }
    }
  }
  BOOST_TEST(cut > 40u);     // nearly all of them were cut
  BOOST_TEST(handoffs > 0u); // and vnodes moved with their histories meanwhile
}

BOOST_AUTO_TEST_CASE(the_ranges_cover_the_namespace_and_grow_with_the_bytes) {
  BOOST_TEST(alltoall_ranges(128, 8) == 10u);       // sqrt(2 x 128^2 x 8 / 2500) = 10.2
  BOOST_TEST(alltoall_ranges(16, 8) == 1u);         // 2 KiB in all: one root
  BOOST_TEST(alltoall_ranges(128, 4096) == 128u);   // at most one range per vnode
  BOOST_TEST(alltoall_ranges(1, 1 << 20) == 1u);
  std::size_t last = 0;
  for (std::size_t b = 1; b <= (1u << 16); b *= 2) {
    const auto m = alltoall_ranges(64, b);
    BOOST_TEST(m >= last); // more bytes, never fewer ranges
    last = m;
  }
  const auto all = vnode_set::range(3, 10) | vnode_set::range(20, 26); // 13 vnodes, two runs
  for (std::size_t m = 1; m <= all.size(); ++m) {
    vnode_set covered;
    std::size_t smallest = all.size(), largest = 0;
    for (std::size_t g = 0; g < m; ++g) {
      auto r = alltoall_range(all, m, g);
      BOOST_TEST(!r.empty());
      BOOST_TEST(!covered.intersects(r));
      if (!r.empty()) // in vnode order: all of the ranges before lie below it
        BOOST_TEST((covered - vnode_set::range(0, r.front())).empty());
      covered |= r;
      smallest = std::min(smallest, r.size());
      largest = std::max(largest, r.size());
    }
    BOOST_TEST(covered.to_string() == all.to_string());
    BOOST_TEST(largest - smallest <= 1u);
  }
}

BOOST_AUTO_TEST_CASE(an_alltoall_cut_into_ranges_refuses_bad_input_as_a_whole) {
  std::mt19937 rng{5};
  auto topo = random_topology(rng);
  auto n = static_cast<proc_id>(topo.proc_count());
  fixture f;
  mini_grid g{topo, 3};
  f.install(g, n);
  g.start();
  g.run();
  constexpr std::size_t b = 2000;
  BOOST_REQUIRE(alltoall_ranges(n, b) > 1u);
  g.with_rider(0, [&](mini_grid::rider& r, timestamp now, outbox&) {
    auto& eng = dynamic_cast<alltoall_rider&>(r).engine();
    const auto own = eng.up().settled();
    BOOST_REQUIRE(!own.empty());
    // A contribution one block short: refused naming the vnode, nothing started.
    auto e = eng.start(now, 1, 0, b, [=](vnode_id) { return bytes((n - 1) * b, 1); });
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == errc::invalid_argument));
    BOOST_TEST(e->message.find("alltoall 1: the contribution of vnode " +
                               std::to_string(own.front()) + " is " +
                               std::to_string((n - 1) * b) + " bytes, not " +
                               std::to_string(n * b)) != std::string::npos, e->message);
    BOOST_TEST(e->message.find("for each of the " + std::to_string(n) + " vnodes") !=
                 std::string::npos, e->message);
    BOOST_TEST(eng.last_started() == 0u);
    // A root outside the namespace, and a number below the first.
    auto root = eng.start(now, 1, n + 7, b, [=](vnode_id) { return bytes(n * b, 1); });
    BOOST_REQUIRE(root.has_value());
    BOOST_TEST((root->code == errc::invalid_argument));
    BOOST_TEST(root->message.find("alltoall 1: root vnode") != std::string::npos, root->message);
    auto zero = eng.start(now, 0, 0, b, [=](vnode_id) { return bytes(n * b, 1); });
    BOOST_REQUIRE(zero.has_value());
    BOOST_TEST((zero->code == errc::invalid_argument));
    BOOST_TEST(eng.last_started() == 0u);
    // The same number starts now, every range at once; each vnode's contribution asked once.
    std::map<vnode_id, int> asked;
    BOOST_TEST(!eng.start(now, 1, 0, b, [=, &asked](vnode_id v) {
                      ++asked[v];
                      return bytes(n * b, 1);
                    }).has_value());
    BOOST_TEST(eng.last_started() == 1u);
    BOOST_TEST(eng.next_op() == 2u);
    BOOST_TEST(eng.up().last_started() ==
               alltoall_gather_number(1, 1, alltoall_ranges(n, b) - 1));
    BOOST_TEST(asked.size() == own.size());
    for (auto& [v, k] : asked)
      BOOST_TEST(k == 1, "vnode " << v);
    // Given up here: every range of it.
    auto gone = eng.abandon(now, 1);
    BOOST_TEST(gone.op == 1u);
    BOOST_TEST(gone.known);
    eng.clear_outbox();
  });
}

BOOST_AUTO_TEST_CASE(an_alltoall_with_a_bad_block_size_is_refused_naming_the_vnode) {
  std::mt19937 rng{5};
  auto topo = random_topology(rng);
  auto n = static_cast<proc_id>(topo.proc_count());
  fixture f;
  mini_grid g{topo, 3};
  f.install(g, n);
  g.start();
  g.run();
  g.with_rider(0, [&](mini_grid::rider& r, timestamp now, outbox&) {
    auto& eng = dynamic_cast<alltoall_rider&>(r).engine();
    // A contribution of one block instead of one per vnode.
    auto e = eng.start(now, 1, 0, 4, [](vnode_id) { return bytes(4, 1); });
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST((e->code == errc::invalid_argument));
    BOOST_TEST(e->message.find("alltoall 1") != std::string::npos, e->message);
    BOOST_TEST(e->message.find("vnode 0") != std::string::npos, e->message);
    BOOST_TEST(e->message.find("for each of the " + std::to_string(n) + " vnodes") !=
                 std::string::npos, e->message);
    auto z = eng.start(now, 1, 0, 0, [n](vnode_id) { return bytes(n * 4, 1); });
    BOOST_REQUIRE(z.has_value());
    BOOST_TEST((z->code == errc::invalid_argument));
    BOOST_TEST(z->message.find("0 bytes") != std::string::npos, z->message);
    auto root = eng.start(now, 1, n + 7, 4, [n](vnode_id) { return bytes(n * 4, 1); });
    BOOST_REQUIRE(root.has_value());
    BOOST_TEST((root->code == errc::invalid_argument));
    // Nothing was started: the same number starts now.
    BOOST_TEST(!eng.start(now, 1, 0, 4, [n](vnode_id) { return bytes(n * 4, 1); }).has_value());
    eng.clear_outbox();
  });
}

BOOST_AUTO_TEST_CASE(the_transpose_puts_each_sources_block_under_its_destination) {
  // Three vnodes, blocks of 2: gathered [v0: 00 01 02 | v1: 10 11 12 | v2: 20 21 22]
  // (xy: x's block for y), scattered [head 00 10 20 | head 01 11 21 | head 02 12 22].
  const auto all = vnode_set::range(0, 3);
  bytes gathered;
  for (std::uint8_t v = 0; v < 3; ++v)
    for (std::uint8_t w = 0; w < 3; ++w)
      for (std::uint8_t i = 0; i < 2; ++i)
        gathered.push_back(static_cast<std::uint8_t>(v * 16 + w * 4 + i));
  auto t = alltoall_transpose(9, 1, all, 2, gathered.data());
  const auto per = alltoall_head_bytes + 3 * 2;
  BOOST_REQUIRE(t.size() == 3 * per);
  for (std::uint8_t w = 0; w < 3; ++w) {
    std::uint64_t op = 0;
    std::uint32_t root = 0;
    std::memcpy(&op, t.data() + w * per, 8);
    std::memcpy(&root, t.data() + w * per + 8, 4);
    BOOST_TEST(op == 9u);
    BOOST_TEST(root == 1u);
    for (std::uint8_t v = 0; v < 3; ++v)
      for (std::uint8_t i = 0; i < 2; ++i)
        BOOST_TEST(t[w * per + alltoall_head_bytes + v * 2 + i] == v * 16 + w * 4 + i);
  }
}

namespace {

/// k pairwise engines over `owners`, frames delivered in random order (seeded); returns
/// the deliveries and counts every frame.
struct pairwise_run {
  std::vector<alltoall_delivery> deliveries;
  std::uint64_t frames = 0;
  std::uint64_t malformed = 0;
  std::vector<std::pair<proc_id, proc_id>> pairs; ///< (from, to) of every frame
};

pairwise_run run_pairwise(const std::vector<vnode_set>& owners, std::uint64_t op, std::size_t b,
                          std::uint32_t seed) {
  const auto k = static_cast<proc_id>(owners.size());
  vnode_id n = 0;
  for (auto& o : owners)
    n = static_cast<vnode_id>(n + o.size());
  std::vector<pairwise_alltoall_engine> engines;
  for (proc_id p = 0; p < k; ++p)
    engines.emplace_back(p, owners);
  std::mt19937 rng{seed};
  std::vector<wire::envelope> flight;
  pairwise_run r;
  alltoall_outbox out;
  auto take = [&] {
    for (auto& e : out.sends) {
      r.pairs.emplace_back(e.from, e.to);
      flight.push_back(std::move(e));
    }
    for (auto& d : out.deliveries)
      r.deliveries.push_back(std::move(d));
    out.clear();
  };
  for (proc_id p = 0; p < k; ++p) {
    auto e = engines[p].start(timestamp{}, op, b, [&](vnode_id v) {
      return contribution_of(op, v, n, b);
    }, out);
    BOOST_REQUIRE(!e.has_value());
    take();
  }
  while (!flight.empty()) {
    auto i = std::uniform_int_distribution<std::size_t>(0, flight.size() - 1)(rng);
    auto e = std::move(flight[i]);
    flight.erase(flight.begin() + static_cast<std::ptrdiff_t>(i));
    BOOST_TEST(engines[e.to].on_message(timestamp{}, e.from, e.body, out));
    take();
  }
  for (auto& eng : engines) {
    r.frames += eng.stats().frames;
    r.malformed += eng.stats().malformed;
    BOOST_TEST(eng.in_progress() == 0u);
  }
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(pairwise_exchange_gives_every_vnode_its_blocks_in_k_k_minus_1_messages) {
  for (std::uint32_t k = 1; k <= 9; ++k) {
    // Processor p owns p+1 vnodes (uneven), laid out consecutively; p = 2 owns none.
    std::vector<vnode_set> owners;
    vnode_id next = 0;
    for (std::uint32_t p = 0; p < k; ++p) {
      const vnode_id count = p == 2 ? 0 : p + 1;
      owners.push_back(vnode_set::range(next, next + count));
      next += count;
    }
    for (std::size_t b : {1u, 7u}) {
      auto r = run_pairwise(owners, 3, b, k * 100 + static_cast<std::uint32_t>(b));
      BOOST_TEST_CONTEXT("k = " << k << ", block " << b) {
        BOOST_TEST(r.frames == std::uint64_t{k} * (k - 1));
        BOOST_TEST(r.malformed == 0u);
        BOOST_TEST(r.deliveries.size() == k);
        std::map<vnode_id, int> got;
        for (auto& d : r.deliveries) {
          BOOST_TEST((d.from == vnode_set::range(0, next)));
          BOOST_TEST(right_blocks(d, b));
          d.vnodes.for_each([&](vnode_id w) { ++got[w]; });
        }
        for (vnode_id w = 0; w < next; ++w)
          BOOST_TEST(got[w] == 1);
        // Each processor pair exchanges exactly one message each way.
        std::map<std::pair<proc_id, proc_id>, int> per_pair;
        for (auto& pr : r.pairs)
          ++per_pair[pr];
        for (auto& [pr, c] : per_pair)
          BOOST_TEST(c == 1);
        BOOST_TEST(per_pair.size() == std::size_t{k} * (k - 1));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(pairwise_exchange_goes_step_by_step_and_refuses_bad_input) {
  // Rank 0 of 4 sends step 1 to rank 1 at its start, and step 2 only once step 1's
  // message (from rank 3) arrived.
  std::vector<vnode_set> owners{{0}, {1}, {2}, {3}};
  const contribution_fn four = [](vnode_id v) { return contribution_of(1, v, 4, 2); };
  pairwise_alltoall_engine a(0, owners);
  alltoall_outbox out;
  BOOST_REQUIRE(!a.start(timestamp{}, 1, 2, four, out));
  BOOST_REQUIRE(out.sends.size() == 1u);
  BOOST_TEST(out.sends[0].to == 1u);
  out.clear();
  // Rank 2's step-2 message arrives before step 1's (from rank 3): kept, nothing sent.
  wire::bcast_segment seg;
  seg.op = {0, 1, collective_kind::pairwise_alltoall, 0};
  seg.vnodes = owners[2];
  seg.index = 2;
  seg.payload = shared_bytes(bytes(2, 0));
  BOOST_TEST(a.on_message(timestamp{}, 2, wire::message{seg}, out));
  BOOST_TEST(out.sends.empty());
  seg.vnodes = owners[3];
  seg.index = 1;
  BOOST_TEST(a.on_message(timestamp{}, 3, wire::message{seg}, out));
  // Step 1 done (from 3), step 2 (to 2) sent, and step 2 was already here: step 3 too.
  BOOST_REQUIRE(out.sends.size() == 2u);
  BOOST_TEST(out.sends[0].to == 2u);
  BOOST_TEST(out.sends[1].to == 3u);
  out.clear();
  // The same sender twice, a wrong step, wrong vnodes: counted and dropped.
  BOOST_TEST(a.on_message(timestamp{}, 3, wire::message{seg}, out));
  seg.index = 3;
  seg.vnodes = owners[1];
  BOOST_TEST(a.on_message(timestamp{}, 1, wire::message{seg}, out)); // step 3 is from 1: ok
  seg.index = 1;
  BOOST_TEST(a.on_message(timestamp{}, 1, wire::message{seg}, out)); // twice
  BOOST_TEST(a.stats().malformed == 2u);
  BOOST_TEST(out.deliveries.size() == 1u); // all three arrived
  // A contribution of the wrong size, block 0, a start twice, an outsider.
  auto bad = a.start(timestamp{}, 2, 2, [](vnode_id) { return bytes(2, 0); }, out);
  BOOST_REQUIRE(bad.has_value());
  BOOST_TEST(bad->message.find("vnode 0") != std::string::npos, bad->message);
  BOOST_TEST(a.start(timestamp{}, 2, 0, [](vnode_id) { return bytes(); }, out).has_value());
  pairwise_alltoall_engine c(2, owners);
  alltoall_outbox co;
  BOOST_REQUIRE(!c.start(timestamp{}, 1, 2, four, co));
  BOOST_TEST(c.start(timestamp{}, 1, 2, four, co).has_value()); // started here already
  pairwise_alltoall_engine stranger(7, owners);
  BOOST_TEST(stranger.start(timestamp{}, 1, 2, four, out).has_value());
}

namespace {

/// One all-to-all cut into ranges through a crash and moves of the ranges' root vnodes
/// (topology and choices from `seed`): the processor X that relays the most in the
/// ranges' gather trees (and owns no range's root vnode) passes its partials on, so
/// every range's gather completes at its root's owner, and crashes before its
/// acknowledgements get out (they are slowed down); its children send their partials
/// again, tentatively (slowed down too), and meanwhile the owners of the ranges' root
/// vnodes leave, one at a time, and hand them on.
struct crash_then_moves {
  bool ran = false;
  std::size_t gathered = 0;     ///< ranges gathered before the crash
  std::string after;            ///< the ledger's check at the end
  std::size_t ranges = 0;
  std::vector<proc_id> holding; ///< live processors whose engine holds something
  std::string described;
  std::uint64_t resent = 0, superseded = 0;
};

crash_then_moves alltoall_through_a_crash_and_moves(std::uint64_t seed) {
  crash_then_moves r;
  std::mt19937 rng{static_cast<std::mt19937::result_type>(seed)};
  auto topo = random_topology(rng);
  const auto n = static_cast<proc_id>(topo.proc_count());
  if (n < 5)
    return r;
  supervisor_config eager;
  eager.suspect_timeout = duration{0}; // one refused connection declares a crash
  fixture f;
  mini_grid g{topo, seed, eager};
  f.install(g, n);
  g.start();
  g.run();
  f.l.block[1] = 150 + rng() % 750;
  const auto root = static_cast<vnode_id>(rng() % n);
  const auto all = vnode_set::range(0, n);
  r.ranges = alltoall_ranges(n, f.l.block[1]);
  std::vector<proc_id> owners; // of the ranges' roots (vnode v is processor v's)
  for (std::size_t k = 0; k < r.ranges; ++k)
    owners.push_back(r.ranges == 1 ? root : alltoall_range(all, r.ranges, k).front());
  // The processor with the most children over the ranges' latency trees.
  std::vector<std::size_t> kids(n);
  for (auto o : owners) {
    const auto t = g.tree_of({o, tree_kind::latency});
    for (proc_id q = 0; q < n; ++q)
      if (auto p = t.parents()[q]; p != no_proc && p != o)
        ++kids[p];
  }
  // Not the owner of a range's root: where the gather completed at the processor that
  // crashes, nobody left knows it did (docs/collectives.md).
  for (auto o : owners)
    kids[o] = 0;
  const auto relay = static_cast<proc_id>(std::max_element(kids.begin(), kids.end()) - kids.begin());
  if (kids[relay] == 0)
    return r;
  r.ran = true;
  // X's acknowledgements are slowed, but not those to its parents in the ranges' trees:
  // X's partials go up behind them (FIFO), and must get out before X crashes.
  std::set<proc_id> ups;
  for (auto o : owners)
    ups.insert(g.tree_of({o, tree_kind::latency}).parents()[relay]);
  g.slow([relay, ups](const wire::envelope& e) {
    if (e.from == relay && std::holds_alternative<wire::reduce_ack>(e.body))
      return ups.count(e.to) == 0;
    auto* p = std::get_if<wire::reduce_partial>(&e.body);
    return p && p->tentative;
  }, 3s);
  for (proc_id p = 0; p < n; ++p)
    start(g, p, 1, root);
  g.run_for(1s);
  // Every range gathered (the scatters down X's links wait behind its slowed
  // acknowledgements: they go on after the crash, from whoever holds the blocks).
  for (std::size_t k = 0; k < r.ranges; ++k)
    r.gathered += f.l.gathered.count(alltoall_gather_number(1, 1, k));
  g.crash(relay);
  for (proc_id p = 0; p < n; ++p)
    if (p != relay)
      g.suspect(p, relay);
  g.run_for(400ms); // the trees heal; after `resend_grace` X's children send copies
  std::size_t members = g.live_count();
  for (auto o : owners)
    if (o != relay && g.live()[o] && members > 2) {
      g.leave(o);
      --members;
      g.run_for(1s); // one at a time: a leaver is not taken for crashed meanwhile
    }
  g.run();
  r.after = f.l.check(n);
  for (proc_id p = 0; p < n; ++p) {
    if (g.live()[p] && rider(g, p).engine().holding()) {
      if (r.holding.empty())
        r.described = rider(g, p).engine().up().describe();
      r.holding.push_back(p);
    }
    if (g.rider_of(p)) {
      r.resent += rider(g, p).engine().up().stats().resent;
      r.superseded += rider(g, p).engine().up().stats().superseded;
    }
  }
  return r;
}

} // namespace

// A processor that relays for several ranges of an all-to-all crashes after passing its
// partials on and before its acknowledgements get out, and the ranges' root vnodes then
// move: the copies its children send again reach the new owners, which learn from the
// old ones' handoffs that those gathers completed and drop them. Every range gathered
// once, every block delivered once, nothing held.
BOOST_AUTO_TEST_CASE(an_alltoall_through_a_crash_and_moves_of_its_roots_holds_nothing) {
  int ran = 0, resent = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      auto r = alltoall_through_a_crash_and_moves(seed);
      if (!r.ran)
        continue;
      ++ran;
      resent += r.resent > 0;
      BOOST_REQUIRE(r.gathered == r.ranges);
      BOOST_TEST(r.after == "");
      BOOST_TEST(r.holding.empty(), r.holding.size() << " processors hold, the first:\n"
                                                     << r.described);
    }
  }
  BOOST_TEST(ran >= 4);
  BOOST_TEST(resent >= 3);
}

// Allgather (core/allgather.hpp) over the adaptive trees of a mini_grid, in virtual time:
// every vnode gets every vnode's block, each vnode's block counted once and each vnode
// delivered to once, on stable trees and while processors join and leave at random.

#include <boost/test/unit_test.hpp>

#include <map>
#include <random>

#include "banyan/core/allgather.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "banyan/core/vnode_blocks.hpp"
#include "core/engine_rider.hpp"
#include "core/mini_grid.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::mini_grid;
using banyan::test::random_topology;
using bytes = std::vector<std::uint8_t>;

namespace {

bytes block_of(std::uint64_t op, vnode_id v, std::size_t n) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::uint8_t>(op * 37 + v * 5 + i + 2);
  return b;
}

/// What every processor contributed and was delivered, for the whole grid.
struct ledger {
  std::map<std::uint64_t, std::size_t> block; ///< op -> bytes per vnode
  std::map<std::pair<std::uint64_t, vnode_id>, int> calls;
  std::map<std::pair<std::uint64_t, vnode_id>, int> delivered;
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
          r += "allgather " + std::to_string(op) + ", vnode " + std::to_string(v) + ": taken " +
               std::to_string(nc) + " times, delivered " + std::to_string(nd) + " times; ";
      }
    for (std::size_t i = 0; i < problems.size() && i < 4; ++i)
      r += problems[i] + "; ";
    return r;
  }
};

class allgather_rider final : public banyan::test::engine_rider {
public:
  allgather_rider(const supervisor& s, ledger& l, std::uint64_t first_seq)
    : engine_rider(s), ledger_(l),
      eng_(view_, ops_, reduce_config{}, config(first_seq), founded(s)) {}

  allgather_collective& engine() override { return eng_; }
  const allgather_collective& engine() const override { return eng_; }

  std::optional<error> start(timestamp now, std::uint64_t op, vnode_id root, outbox& out) {
    auto* l = &ledger_;
    const auto n = ledger_.block.at(op);
    auto e = eng_.start(now, op, root, n, [l, op, n](vnode_id v) {
      ++l->calls[{op, v}];
      return block_of(op, v, n);
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
      auto blocks = split_blocks(d.all, d.blocks);
      bool right = b != ledger_.block.end() && blocks.size() == d.all.size();
      for (auto& [v, x] : blocks)
        right = right && x.to_vector() == block_of(d.op, v, b->second);
      if (!right)
        ledger_.problems.push_back("wrong blocks of allgather " + std::to_string(d.op));
      d.vnodes.for_each([&](vnode_id v) { ++ledger_.delivered[{d.op, v}]; });
    }
    for (auto& p : o.problems)
      ledger_.problems.push_back("processor " + std::to_string(view_.self()) + ": " + p.detail);
  }

  ledger& ledger_;
  reduce_op_table ops_;
  allgather_collective eng_;
};

struct fixture {
  ledger l;
  std::map<proc_id, std::uint64_t> incarnations;
  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id p, const supervisor& s) {
      return std::make_unique<allgather_rider>(s, l, (incarnations[p]++ << 32) + 1);
    });
  }
};

allgather_rider& rider(mini_grid& g, proc_id p) {
  return dynamic_cast<allgather_rider&>(*g.rider_of(p));
}

void start(mini_grid& g, proc_id p, std::uint64_t op, vnode_id root) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    if (auto e = dynamic_cast<allgather_rider&>(r).start(now, op, root, out))
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

std::uint64_t first_open(const ledger& l, vnode_id vnodes, std::uint64_t last) {
  // The first allgather some vnode has not been delivered yet (where a joiner begins).
  for (std::uint64_t op = 1; op <= last; ++op)
    for (vnode_id v = 0; v < vnodes; ++v)
      if (!l.delivered.count({op, v}))
        return op;
  return last + 1;
}

} // namespace

BOOST_AUTO_TEST_CASE(allgather_on_stable_trees_gives_every_vnode_every_block_once) {
  std::mt19937 rng{81};
  std::uint64_t shallow = 0;
  for (int round = 0; round < 8; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
    f.install(g);
    g.start();
    g.run();
    for (std::uint64_t op = 1; op <= 3; ++op) {
      f.l.block[op] = op == 3 ? 30000 : 1 + rng() % 16; // the third long: segments down
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
      BOOST_TEST(direct == 0u); // up and down the trees only (and straight to the root's LAN)
      for (proc_id p = 0; p < n; ++p)
        shallow += rider(g, p).engine().down().stats().shallow_frames;
    }
  }
  // Small gathered blocks went from the root's owner straight to its LAN
  // (broadcast_config::shallow_bytes, from the gather's star).
  BOOST_TEST(shallow > 0u);
}

BOOST_AUTO_TEST_CASE(allgathers_under_churn_count_and_deliver_every_vnode_exactly_once) {
  std::mt19937 rng{3606};
  std::uint64_t shallow = 0;
  for (int round = 0; round < 20; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(5000 + round)};
    f.install(g);
    g.start();
    if (round % 2)
      g.run();
    const std::uint64_t ops = 4;
    std::vector<vnode_id> roots;
    for (std::uint64_t op = 1; op <= ops; ++op) {
      f.l.block[op] = op == ops && round % 4 == 0 ? 20000 : 1 + rng() % 8;
      roots.push_back(static_cast<vnode_id>(rng() % n));
    }
    auto catch_up = [&](proc_id p, std::uint64_t upto) {
      auto& up = rider(g, p).engine().up();
      auto from = up.last_started() == 0 ? first_open(f.l, n, ops) : up.last_started() + 1;
      for (auto op = from; op <= upto && op <= ops; ++op)
        start(g, p, op, roots[op - 1]);
    };
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int) {
        auto last = rider(g, p).engine().up().last_started();
        catch_up(p, last == 0 ? first_open(f.l, n, ops) : last + 1);
      });
    }
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(p, ops);
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.l.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p)
        if (g.live()[p]) {
          BOOST_TEST(!rider(g, p).engine().holding());
          shallow += rider(g, p).engine().down().stats().shallow_frames;
        }
    }
  }
  BOOST_TEST(shallow > 0u); // the shallow release under churn
}

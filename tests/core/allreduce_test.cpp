// The allreduce and barrier engine (core/allreduce.hpp) riding along the supervisors of
// a mini_grid: every vnode contributes to each allreduce once, the result is computed
// once, and every vnode receives it exactly once at the processor owning it, on stable
// trees, while trees form, and under random joins and leaves.

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <random>

#include "banyan/core/allreduce.hpp"
#include "banyan/core/supervisor_view.hpp"
#include "core/engine_rider.hpp"
#include "core/mini_grid.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::mini_grid;
using banyan::test::random_topology;
using bytes = std::vector<std::uint8_t>;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

constexpr std::uint32_t user_xor = 1, user_or = 2;

void add_user_ops(reduce_op_table& t) {
  t.add(user_xor, elementwise<std::int64_t>([](std::int64_t a, std::int64_t b) { return a ^ b; }));
  t.add(user_or, [](std::uint8_t* acc, const std::uint8_t* in, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      acc[i] |= in[i];
  });
}

std::vector<reduce_op> all_operators() {
  std::vector<reduce_op> ops;
  for (auto k : {reduce_kind::sum, reduce_kind::min, reduce_kind::max, reduce_kind::product})
    for (auto t : {element_type::int32, element_type::int64, element_type::float32,
                   element_type::float64})
      ops.push_back({k, t, 0});
  ops.push_back({reduce_kind::user, element_type::int64, user_xor});
  ops.push_back({reduce_kind::user, element_type::bytes, user_or});
  return ops;
}

/// Contributions whose reduction is exact in any order.
bytes contribution(const allreduce_spec& spec, vnode_id v) {
  std::mt19937_64 rng(spec.op * 1000003 + v);
  const auto n = spec.count;
  auto fill = [&](auto zero, auto make) {
    using T = decltype(zero);
    std::vector<T> xs(n);
    for (auto& x : xs)
      x = make();
    bytes b(n * sizeof(T));
    if (n)
      std::memcpy(b.data(), xs.data(), b.size());
    return b;
  };
  auto small = [&] { return static_cast<int>(rng() % 2001) - 1000; };
  auto factor = [&] {
    static const double fs[] = {1, 2, 0.5, -1};
    return fs[rng() % 4];
  };
  const bool product = spec.fn.kind == reduce_kind::product;
  switch (spec.fn.type) {
    case element_type::int32:
      return fill(std::int32_t{}, [&] { return static_cast<std::int32_t>(product ? small() % 5 : small()); });
    case element_type::int64:
      if (spec.fn.kind == reduce_kind::user)
        return fill(std::int64_t{}, [&] { return static_cast<std::int64_t>(rng()); });
      return fill(std::int64_t{}, [&] { return static_cast<std::int64_t>(product ? small() % 7 : small() * 1000003LL); });
    case element_type::float32:
      return fill(float{}, [&] { return static_cast<float>(product ? factor() : small()); });
    case element_type::float64:
      return fill(double{}, [&] { return product ? factor() : small() * 0.25; });
    case element_type::bytes:
      return fill(std::uint8_t{}, [&] { return static_cast<std::uint8_t>(1u << (rng() % 8)); });
  }
  return {};
}

/// What every processor contributed, gathered and received, for the whole grid.
struct ledger {
  reduce_op_table ops;
  vnode_id vnodes = 0;
  std::map<std::uint64_t, allreduce_spec> specs;
  std::map<std::pair<std::uint64_t, vnode_id>, int> calls;     ///< contributions taken
  std::map<std::uint64_t, std::vector<reduce_result>> reduced; ///< results at the root
  std::map<std::pair<std::uint64_t, vnode_id>, int> delivered;
  std::map<std::uint64_t, bytes> want; ///< computed directly
  std::vector<std::string> problems;
  /// Summed over every engine incarnation as it goes (and at the grid's end).
  struct totals {
    std::uint64_t handoffs = 0, direct_partials = 0, direct_release = 0, offered = 0,
                  redirected = 0, bounces = 0, star_partials = 0, shallow_release = 0;
  };
  totals* sums = nullptr;

  ledger() { add_user_ops(ops); }

  const bytes& expected(std::uint64_t op) {
    auto i = want.find(op);
    if (i != want.end())
      return i->second;
    auto& spec = specs.at(op);
    bytes acc = contribution(spec, 0);
    for (vnode_id v = 1; v < vnodes; ++v) {
      auto x = contribution(spec, v);
      if (auto e = ops.combine(spec.fn, acc, x.data(), x.size()))
        throw std::runtime_error(e->to_string());
    }
    return want[op] = acc;
  }

  /// Every allreduce started: each vnode counted once, one result, and each vnode
  /// delivered the right value once.
  std::string check() {
    std::string r;
    int shown = 0;
    auto say = [&](const std::string& s) {
      if (shown++ < 8)
        r += s + "; ";
    };
    for (auto& [op, spec] : specs) {
      for (vnode_id v = 0; v < vnodes; ++v) {
        auto c = calls.count({op, v}) ? calls.at({op, v}) : 0;
        auto d = delivered.count({op, v}) ? delivered.at({op, v}) : 0;
        if (c != 1)
          say("allreduce " + std::to_string(op) + " took vnode " + std::to_string(v) + " " +
              std::to_string(c) + " times");
        if (d != 1)
          say("allreduce " + std::to_string(op) + " reached vnode " + std::to_string(v) + " " +
              std::to_string(d) + " times");
      }
      auto n = reduced.count(op) ? reduced.at(op).size() : 0;
      if (n != 1)
        say("allreduce " + std::to_string(op) + " was reduced " + std::to_string(n) + " times");
    }
    for (std::size_t i = 0; i < problems.size() && i < 4; ++i)
      r += problems[i] + "; ";
    return r;
  }
};

/// The engine of one processor incarnation.
class allreduce_rider final : public banyan::test::engine_rider {
public:
  allreduce_rider(const supervisor& s, ledger& l, allreduce_config cfg)
    : engine_rider(s), l_(l), eng_(view_, l.ops, cfg, founded(s)) {}

  ~allreduce_rider() override {
    if (auto* t = l_.sums) {
      auto& r = eng_.reducer().stats();
      auto& b = eng_.releaser().stats();
      t->handoffs += r.handoffs;
      t->direct_partials += r.direct_partials;
      t->direct_release += b.direct_frames;
      t->offered += b.offered;
      t->redirected += b.redirected;
      t->bounces += r.bounces + b.bounces;
      t->star_partials += r.star_partials;
      t->shallow_release += b.shallow_frames;
    }
  }
  allreduce_collective& engine() override { return eng_; }
  const allreduce_collective& engine() const override { return eng_; }

  std::optional<error> start(timestamp now, const allreduce_spec& spec, outbox& out) {
    l_.specs[spec.op] = spec;
    auto* l = &l_;
    auto op = spec.op;
    auto e = eng_.start(now, spec, [l, op](vnode_id v) {
      ++l->calls[{op, v}];
      return contribution(l->specs.at(op), v);
    });
    take(out);
    return e;
  }

private:
  void record() override {
    auto& o = eng_.out();
    for (auto& r : o.reduced) {
      if (!own_now().contains(r.root))
        l_.problems.push_back("allreduce " + std::to_string(r.op) + " reduced at processor " +
                              std::to_string(view_.self()) + " which does not own its root");
      if (r.vnodes != vnode_set::range(0, l_.vnodes))
        l_.problems.push_back("allreduce " + std::to_string(r.op) + " covers " + r.vnodes.to_string());
      l_.reduced[r.op].push_back(r);
    }
    for (auto& d : o.deliveries) {
      if (!own_now().includes(d.vnodes))
        l_.problems.push_back("allreduce " + std::to_string(d.op) + " delivered " +
                              d.vnodes.to_string() + " at processor " +
                              std::to_string(view_.self()) + " which owns " + own_now().to_string());
      if (eng_.next_op() <= d.op)
        l_.problems.push_back("allreduce " + std::to_string(d.op) + " delivered at processor " +
                              std::to_string(view_.self()) + " which will still start it");
      // Nothing is released before every vnode has arrived (the barrier's promise).
      for (vnode_id v = 0; v < l_.vnodes; ++v)
        if (!l_.calls.count({d.op, v})) {
          l_.problems.push_back("allreduce " + std::to_string(d.op) + " released before vnode " +
                                std::to_string(v) + " arrived");
          break;
        }
      if (d.value.to_vector() != l_.expected(d.op))
        l_.problems.push_back("allreduce " + std::to_string(d.op) + ": a wrong value at processor " +
                              std::to_string(view_.self()));
      d.vnodes.for_each([&](vnode_id v) { ++l_.delivered[{d.op, v}]; });
    }
    for (auto& p : o.problems)
      l_.problems.push_back("processor " + std::to_string(view_.self()) + ", allreduce " +
                            std::to_string(p.op) + ": " + p.detail + " " + p.vnodes.to_string());
  }

  ledger& l_;
  allreduce_collective eng_;
};

struct fixture {
  ledger l;
  allreduce_config cfg;
  std::map<proc_id, std::uint64_t> incarnations;

  void install(mini_grid& g, vnode_id vnodes) {
    l.vnodes = vnodes;
    g.set_rider_factory([this](proc_id p, const supervisor& s) {
      auto c = cfg;
      c.bcast.first_seq = (incarnations[p]++ << 32) + 1;
      return std::make_unique<allreduce_rider>(s, l, c);
    });
  }
};

allreduce_rider& rider(mini_grid& g, proc_id p) {
  auto* r = dynamic_cast<allreduce_rider*>(g.rider_of(p));
  BOOST_REQUIRE(r != nullptr);
  return *r;
}

void start(mini_grid& g, proc_id p, const allreduce_spec& spec) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto e = dynamic_cast<allreduce_rider&>(r).start(now, spec, out);
    if (e)
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

/// The first allreduce without a result: where a processor that joins begins.
std::uint64_t first_open(const ledger& l, std::uint64_t after_last) {
  for (std::uint64_t op = 1; op <= after_last; ++op)
    if (!l.reduced.count(op))
      return op;
  return after_last + 1;
}

void catch_up(mini_grid& g, const ledger& l, const std::vector<allreduce_spec>& specs, proc_id p,
              std::uint64_t upto) {
  auto& e = rider(g, p).engine();
  auto from = e.last_started() == 0 ? first_open(l, specs.size()) : e.last_started() + 1;
  for (auto op = from; op <= upto && op <= specs.size(); ++op)
    start(g, p, specs[op - 1]);
}

} // namespace

namespace {

struct stable_counts {
  std::uint64_t ops = 0, tree_partials = 0, passed_on = 0, star_partials = 0, timeouts = 0,
                direct = 0, bounces = 0, redirected = 0, shallow = 0;
};

/// Every operator and type, a barrier and a long array over converged trees of `tiny()`,
/// with the reductions' `star_bytes` as given; what the engines counted, summed.
stable_counts stable_allreduces(std::size_t star_bytes) {
  fixture f;
  f.cfg.reduce.star_bytes = star_bytes;
  mini_grid g{tiny(), 8};
  f.install(g, 16);
  g.start(0, 2);
  g.run();
  BOOST_REQUIRE(!g.busy());
  std::uint64_t op = 0;
  std::mt19937 rng{5};
  std::vector<allreduce_spec> specs;
  for (auto fn : all_operators())
    specs.push_back({++op, static_cast<vnode_id>(rng() % 16), fn, 1 + rng() % 5});
  specs.push_back({++op, 3, {}, 0}); // a barrier
  specs.push_back({++op, 11, {reduce_kind::sum, element_type::int32, 0}, 70000});
  for (auto& spec : specs) {
    for (proc_id p = 0; p < 8; ++p)
      start(g, p, spec);
    g.run();
  }
  BOOST_TEST(f.l.check() == "");
  stable_counts c;
  c.ops = op;
  for (proc_id p = 0; p < 8; ++p) {
    auto& e = rider(g, p).engine();
    const auto& rs = e.reducer().stats();
    c.tree_partials += rs.tree_partials;
    c.passed_on += rs.passed_on;
    c.star_partials += rs.star_partials;
    c.timeouts += rs.timeouts;
    c.direct += rs.direct_partials + e.releaser().stats().direct_frames;
    c.bounces += rs.bounces + e.releaser().stats().bounces;
    c.redirected += e.releaser().stats().redirected;
    c.shallow += e.releaser().stats().shallow_frames;
    BOOST_TEST(!e.holding());
  }
  return c;
}

} // namespace

// Small ones gather in a star within the root's LAN (reduce_config::star_bytes): each
// non-root processor sends one partial of its own (those from other LANs that reach a
// processor of the star go on as they come), nobody waits for a timeout, nothing goes
// point-to-point, and the release of a small result goes the star's way back: from the
// root's owner straight to its LAN (broadcast_config::shallow_bytes), down the tree
// beyond it.
BOOST_AUTO_TEST_CASE(stable_allreduces_in_a_star) {
  auto c = stable_allreduces(4096);
  BOOST_TEST(c.tree_partials == 7u * c.ops + c.passed_on);
  BOOST_TEST(c.star_partials > 0u); // the star was used
  BOOST_TEST(c.shallow > 0u);       // and so was the shallow release
  BOOST_TEST(c.timeouts == 0u);
  BOOST_TEST(c.direct == 0u);
  BOOST_TEST(c.bounces == 0u);
  BOOST_TEST(c.redirected == 0u);
}

// Without the star (star_bytes 0): tree edges only, both ways (a barrier is an
// allreduce of nothing; the long array is reduced up the bandwidth tree and released in
// segments).
BOOST_AUTO_TEST_CASE(stable_allreduces_with_every_operator_type_and_barriers) {
  auto c = stable_allreduces(0);
  BOOST_TEST(c.tree_partials == 7u * c.ops); // one partial per non-root processor
  BOOST_TEST(c.shallow == 0u);
  BOOST_TEST(c.direct == 0u);
  BOOST_TEST(c.bounces == 0u);
  BOOST_TEST(c.redirected == 0u);
}

BOOST_AUTO_TEST_CASE(a_barrier_is_released_only_once_every_vnode_arrived) {
  fixture f;
  mini_grid g{tiny(), 3};
  f.install(g, 8);
  g.start();
  g.run();
  allreduce_spec b{1, 0, {}, 0};
  for (proc_id p = 0; p < 7; ++p)
    start(g, p, b);
  g.run_for(std::chrono::seconds(2)); // timeouts fire; processor 7 has not arrived
  std::size_t delivered = 0;
  for (auto& [k, n] : f.l.delivered)
    delivered += static_cast<std::size_t>(n);
  BOOST_TEST(delivered == 0u);
  BOOST_TEST(f.l.reduced.count(1) == 0u);
  start(g, 7, b);
  g.run();
  BOOST_TEST(f.l.check() == "");
  for (auto& [k, d] : f.l.reduced)
    BOOST_TEST(d.front().value.size() == 0u);
}

BOOST_AUTO_TEST_CASE(allreduces_during_tree_formation) {
  std::mt19937 rng{77};
  auto ops = all_operators();
  for (int round = 0; round < 6; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(500 + round)};
    f.install(g, n);
    g.start();
    for (std::uint64_t op = 1; op <= 4; ++op) {
      allreduce_spec spec{op, static_cast<vnode_id>(rng() % n), ops[rng() % ops.size()], 1 + rng() % 8};
      for (proc_id p = 0; p < n; ++p)
        start(g, p, spec);
      g.run_for(std::chrono::milliseconds(3));
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round) { BOOST_TEST(f.l.check() == ""); }
  }
}

namespace {

void check_churn_totals(const ledger::totals& all);

/// 30 rounds of allreduces and barriers while processors leave and rejoin, over random
/// topologies, with the reductions' `star_bytes` as given; what the engines counted.
ledger::totals allreduces_under_churn(std::size_t star_bytes) {
  std::mt19937 rng{808};
  auto ops = all_operators();
  ledger::totals all;
  for (int round = 0; round < 30; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    f.cfg.reduce.star_bytes = star_bytes;
    f.l.sums = &all;
    mini_grid g{topo, static_cast<std::uint64_t>(7000 + round)};
    f.install(g, n);
    g.start();
    if (round % 2)
      g.run();
    std::vector<allreduce_spec> specs;
    for (std::uint64_t op = 1; op <= 6; ++op) {
      if (op % 3 == 0)
        specs.push_back({op, static_cast<vnode_id>(rng() % n), {}, 0}); // barrier
      else
        specs.push_back({op, static_cast<vnode_id>(rng() % n), ops[rng() % ops.size()],
                         op == 5 && round % 5 == 0 ? 70000 : 1 + rng() % 4});
    }
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int) {
        auto last = rider(g, p).engine().last_started();
        catch_up(g, f.l, specs, p, last == 0 ? first_open(f.l, specs.size()) : last + 1);
      });
    }
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(g, f.l, specs, p, specs.size());
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.l.check() == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p)
        if (g.live()[p]) {
          auto& e = rider(g, p).engine();
          BOOST_TEST(!e.holding(), "processor " << p << ":\n" << e.describe());
        }
    }
  }
  return all;
}

} // namespace

// Up the latency tree (star_bytes 0) and, for the small ones, in a star within the
// root's LAN (reduce_config::star_bytes): every vnode counted once and released once.
BOOST_AUTO_TEST_CASE(allreduces_and_barriers_under_churn_reach_every_vnode_exactly_once) {
  for (std::size_t star : {std::size_t{0}, std::size_t{4096}}) {
    BOOST_TEST_CONTEXT("star_bytes " << star) {
      auto all = allreduces_under_churn(star);
      check_churn_totals(all);
      if (star == 0) {
        BOOST_TEST(all.star_partials == 0u);
        BOOST_TEST(all.shallow_release == 0u);
      } else {
        BOOST_TEST(all.star_partials > 0u);   // the star was used under churn
        BOOST_TEST(all.shallow_release > 0u); // and so was the shallow release
      }
    }
  }
}

namespace {

void check_churn_totals(const ledger::totals& all) {
  // The churn reached both phases: histories moved, partials and releases went
  // point-to-point, frames bounced.
  BOOST_TEST(all.handoffs > 0u);
  BOOST_TEST(all.direct_partials > 0u);
  BOOST_TEST(all.direct_release > 0u);
  BOOST_TEST(all.bounces > 0u);
  BOOST_TEST_MESSAGE("handoffs " << all.handoffs << ", direct partials " << all.direct_partials
                                 << ", direct release frames " << all.direct_release << ", offers "
                                 << all.offered << ", redirected " << all.redirected << ", bounces "
                                 << all.bounces << ", star partials " << all.star_partials
                                 << ", shallow release frames " << all.shallow_release);
}

} // namespace

BOOST_AUTO_TEST_CASE(refused_starts_change_nothing) {
  fixture f;
  mini_grid g{tiny(), 4};
  f.install(g, 8);
  g.start();
  g.run();
  allreduce_spec spec{1, 2, {reduce_kind::sum, element_type::int64, 0}, 3};
  // A contribution of the wrong size: refused, the same number may be started again.
  g.with_rider(0, [&](mini_grid::rider& r, timestamp now, outbox&) {
    auto& e = dynamic_cast<allreduce_rider&>(r).engine();
    auto err = e.start(now, spec, [](vnode_id) { return bytes(5); });
    BOOST_REQUIRE(err.has_value());
    BOOST_TEST((err->code == errc::invalid_argument));
    BOOST_TEST(e.last_started() == 0u);
    // No values for a non-empty array.
    err = e.start(now, spec, nullptr);
    BOOST_REQUIRE(err.has_value());
    BOOST_TEST((err->code == errc::invalid_argument));
    // A root outside the namespace.
    auto bad = spec;
    bad.root = 99;
    err = e.start(now, bad, [](vnode_id) { return bytes(24); });
    BOOST_REQUIRE(err.has_value());
    BOOST_TEST((err->code == errc::invalid_argument));
    BOOST_TEST(e.out().sends.empty());
  });
  for (proc_id p = 0; p < 8; ++p)
    start(g, p, spec);
  g.run();
  BOOST_TEST(f.l.check() == "");
}

BOOST_AUTO_TEST_CASE(release_payloads_round_trip) {
  auto v = shared_bytes(bytes{1, 2, 3});
  auto p = allreduce_collective::release_payload(0x0102030405060708ull, v);
  auto back = allreduce_collective::parse_release(p);
  BOOST_REQUIRE(back.has_value());
  BOOST_TEST(back->first == 0x0102030405060708ull);
  BOOST_TEST(back->second.to_vector() == v.to_vector());
  BOOST_TEST(!allreduce_collective::parse_release(shared_bytes(bytes{1, 2})).has_value());
  auto empty = allreduce_collective::parse_release(allreduce_collective::release_payload(7, {}));
  BOOST_REQUIRE(empty.has_value());
  BOOST_TEST(empty->second.size() == 0u);
}

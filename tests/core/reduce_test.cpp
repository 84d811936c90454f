#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <random>

#include "banyan/core/tree_builders.hpp"
#include "core/collective_rider.hpp"
#include "core/random_topology.hpp"

using namespace banyan;
using banyan::test::collective_rider;
using banyan::test::rider;
using banyan::test::delivery_ledger;
using banyan::test::mini_grid;
using banyan::test::random_topology;
using banyan::test::reduction_ledger;
using bytes = std::vector<std::uint8_t>;

namespace {

topology tiny() {
  auto t = builtin_topology("tiny-2c8");
  BOOST_REQUIRE(t.has_value());
  return *t;
}

template <class T>
bytes pack(std::initializer_list<T> xs) {
  bytes b(xs.size() * sizeof(T));
  std::size_t at = 0;
  for (T x : xs) {
    std::memcpy(b.data() + at, &x, sizeof(T));
    at += sizeof(T);
  }
  return b;
}

template <class T>
std::vector<T> unpack(const bytes& b) {
  std::vector<T> xs(b.size() / sizeof(T));
  std::memcpy(xs.data(), b.data(), xs.size() * sizeof(T));
  return xs;
}

// User operators every test table knows: 1 = xor over int64, 2 = or over bytes.
constexpr std::uint32_t user_xor = 1, user_or = 2;

void add_user_ops(reduce_op_table& t) {
  t.add(user_xor, elementwise<std::int64_t>([](std::int64_t a, std::int64_t b) { return a ^ b; }));
  t.add(user_or, [](std::uint8_t* acc, const std::uint8_t* in, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      acc[i] |= in[i];
  });
}

/// Every operator the engines are tested with.
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

/// Contributions whose reduction is exact in any order: small integers for sums, powers
/// of two (and -1) for floating-point products, anything for the rest.
bytes contribution(const reduce_spec& spec, vnode_id v) {
  std::mt19937_64 rng(spec.op * 1000003 + v);
  const auto n = spec.count;
  auto fill = [&](auto zero, auto make) {
    using T = decltype(zero);
    std::vector<T> xs(n);
    for (auto& x : xs)
      x = make();
    bytes b(n * sizeof(T));
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

/// Riders with both engines over each processor's supervisor.
struct fixture {
  delivery_ledger deliveries;
  reduction_ledger reductions;
  reduce_config cfg;

  fixture() {
    add_user_ops(reductions.ops);
    reductions.value = [this](std::uint64_t op, vnode_id v) {
      return contribution(reductions.specs.at(op), v);
    };
  }

  void install(mini_grid& g) {
    g.set_rider_factory([this](proc_id, const supervisor& s) {
      return std::make_unique<collective_rider>(s, deliveries, broadcast_config{}, &reductions, cfg);
    });
  }
};


void start(mini_grid& g, proc_id p, const reduce_spec& spec) {
  g.with_rider(p, [&](mini_grid::rider& r, timestamp now, outbox& out) {
    auto e = dynamic_cast<collective_rider&>(r).reduce(now, spec, out);
    if (e)
      BOOST_FAIL("processor " << p << ": " << e->to_string());
  });
}

reduce_stats total_stats(mini_grid& g, std::size_t n) {
  reduce_stats t;
  for (proc_id p = 0; p < n; ++p)
    if (g.rider_of(p)) {
      auto& s = rider(g, p).reducer().stats();
      t.started += s.started;
      t.contributed += s.contributed;
      t.tree_partials += s.tree_partials;
      t.direct_partials += s.direct_partials;
      t.passed_on += s.passed_on;
      t.star_partials += s.star_partials;
      t.star_notices += s.star_notices;
      t.timeouts += s.timeouts;
      t.handoffs += s.handoffs;
      t.holds += s.holds;
      t.bounces += s.bounces;
      t.results += s.results;
    }
  return t;
}

/// The first reduction without a result: where a processor that joins begins.
std::uint64_t first_open(const reduction_ledger& l, std::uint64_t after_last) {
  for (std::uint64_t op = 1; op <= after_last; ++op)
    if (!l.results.count(op))
      return op;
  return after_last + 1;
}

/// Starts at p every reduction of `specs` up to `upto` it has not started yet, in order
/// (a processor that joined begins at the first one without a result).
void catch_up(mini_grid& g, const reduction_ledger& l, const std::vector<reduce_spec>& specs,
              proc_id p, std::uint64_t upto) {
  auto& r = rider(g, p).reducer();
  auto from = r.last_started() == 0 ? first_open(l, specs.size()) : r.last_started() + 1;
  for (auto op = from; op <= upto && op <= specs.size(); ++op)
    start(g, p, specs[op - 1]);
}

} // namespace

// --- operators ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(builtin_operators_on_every_type) {
  reduce_op_table t;
  auto run = [&](reduce_op op, bytes a, const bytes& b) {
    auto e = t.combine(op, a, b.data(), b.size());
    BOOST_REQUIRE_MESSAGE(!e, (e ? e->to_string() : ""));
    return a;
  };
  using K = reduce_kind;
  using E = element_type;
  BOOST_TEST((unpack<std::int32_t>(run({K::sum, E::int32}, pack<std::int32_t>({1, -5, 7}), pack<std::int32_t>({2, 5, -9}))) == std::vector<std::int32_t>{3, 0, -2}));
  BOOST_TEST((unpack<std::int32_t>(run({K::min, E::int32}, pack<std::int32_t>({1, -5}), pack<std::int32_t>({2, -6}))) == std::vector<std::int32_t>{1, -6}));
  BOOST_TEST((unpack<std::int32_t>(run({K::max, E::int32}, pack<std::int32_t>({1, -5}), pack<std::int32_t>({2, -6}))) == std::vector<std::int32_t>{2, -5}));
  BOOST_TEST((unpack<std::int32_t>(run({K::product, E::int32}, pack<std::int32_t>({3, -4}), pack<std::int32_t>({5, 6}))) == std::vector<std::int32_t>{15, -24}));
  // Integers wrap instead of overflowing.
  BOOST_TEST((unpack<std::int32_t>(run({K::sum, E::int32}, pack<std::int32_t>({INT32_MAX}), pack<std::int32_t>({1}))) == std::vector<std::int32_t>{INT32_MIN}));
  BOOST_TEST((unpack<std::int64_t>(run({K::product, E::int64}, pack<std::int64_t>({INT64_MAX}), pack<std::int64_t>({2}))) == std::vector<std::int64_t>{-2}));
  BOOST_TEST((unpack<std::int64_t>(run({K::sum, E::int64}, pack<std::int64_t>({1LL << 40}), pack<std::int64_t>({1}))) == std::vector<std::int64_t>{(1LL << 40) + 1}));
  BOOST_TEST((unpack<std::int64_t>(run({K::min, E::int64}, pack<std::int64_t>({-(1LL << 40)}), pack<std::int64_t>({1}))) == std::vector<std::int64_t>{-(1LL << 40)}));
  BOOST_TEST((unpack<std::int64_t>(run({K::max, E::int64}, pack<std::int64_t>({-(1LL << 40)}), pack<std::int64_t>({1}))) == std::vector<std::int64_t>{1}));
  BOOST_TEST((unpack<float>(run({K::sum, E::float32}, pack<float>({1.5f, -2}), pack<float>({0.25f, 2}))) == std::vector<float>{1.75f, 0}));
  BOOST_TEST((unpack<float>(run({K::product, E::float32}, pack<float>({1.5f}), pack<float>({-2}))) == std::vector<float>{-3}));
  BOOST_TEST((unpack<float>(run({K::min, E::float32}, pack<float>({1.5f}), pack<float>({-2}))) == std::vector<float>{-2}));
  BOOST_TEST((unpack<float>(run({K::max, E::float32}, pack<float>({1.5f}), pack<float>({-2}))) == std::vector<float>{1.5f}));
  BOOST_TEST((unpack<double>(run({K::sum, E::float64}, pack<double>({1e300}), pack<double>({1e300}))) == std::vector<double>{2e300}));
  BOOST_TEST((unpack<double>(run({K::product, E::float64}, pack<double>({0.5}), pack<double>({0.25}))) == std::vector<double>{0.125}));
  BOOST_TEST((unpack<double>(run({K::min, E::float64}, pack<double>({0.5}), pack<double>({0.25}))) == std::vector<double>{0.25}));
  BOOST_TEST((unpack<double>(run({K::max, E::float64}, pack<double>({0.5}), pack<double>({0.25}))) == std::vector<double>{0.5}));
  // Empty arrays combine to empty arrays.
  BOOST_TEST(run({K::sum, E::float64}, {}, {}).empty());
}

BOOST_AUTO_TEST_CASE(user_operators_and_errors) {
  reduce_op_table t;
  add_user_ops(t);
  bytes a = pack<std::int64_t>({0b1100, -1});
  const bytes b = pack<std::int64_t>({0b1010, 5});
  BOOST_TEST(!t.combine({reduce_kind::user, element_type::int64, user_xor}, a, b.data(), b.size()));
  BOOST_TEST((unpack<std::int64_t>(a) == std::vector<std::int64_t>{0b0110, ~std::int64_t{5}}));
  bytes c = {1, 2, 4};
  const bytes d = {8, 2, 1};
  BOOST_TEST(!t.combine({reduce_kind::user, element_type::bytes, user_or}, c, d.data(), d.size()));
  BOOST_TEST((c == bytes{9, 2, 5}));
  // Errors leave the accumulator alone.
  const bytes before = c;
  auto unknown = t.combine({reduce_kind::user, element_type::bytes, 99}, c, d.data(), d.size());
  BOOST_REQUIRE(unknown.has_value());
  BOOST_TEST((unknown->code == errc::not_found));
  auto builtin_bytes = t.combine({reduce_kind::sum, element_type::bytes, 0}, c, d.data(), d.size());
  BOOST_REQUIRE(builtin_bytes.has_value());
  BOOST_TEST((builtin_bytes->code == errc::invalid_argument));
  const bytes three = {1, 2, 3};
  bytes four = {1, 2, 3, 4};
  auto ragged = t.combine({reduce_kind::sum, element_type::int32, 0}, four, three.data(), three.size());
  BOOST_REQUIRE(ragged.has_value());
  auto sizes = t.combine({reduce_kind::user, element_type::bytes, user_or}, c, four.data(), four.size());
  BOOST_REQUIRE(sizes.has_value());
  BOOST_TEST((c == before));
  BOOST_TEST(!t.check({reduce_kind::sum, element_type::float64, 0}, 16));
  BOOST_TEST(t.check({reduce_kind::sum, element_type::float64, 0}, 12).has_value());
}

// --- the engine -------------------------------------------------------------------------

namespace {

/// Every operator and type, then a long array, over converged trees of `tiny()` with
/// `star_bytes` as given; the stats summed over the processors.
reduce_stats stable_reductions(std::size_t star_bytes, std::uint64_t& ops) {
  fixture f;
  f.cfg.star_bytes = star_bytes;
  mini_grid g{tiny(), 8};
  f.install(g);
  g.start();
  g.run();
  BOOST_REQUIRE(!g.busy());
  std::uint64_t op = 0;
  std::mt19937 rng{5};
  for (auto fn : all_operators()) {
    reduce_spec spec{++op, static_cast<vnode_id>(rng() % 8), fn, 1 + rng() % 5};
    for (proc_id p = 0; p < 8; ++p)
      start(g, p, spec);
    g.run();
  }
  reduce_spec big{++op, 6, {reduce_kind::sum, element_type::int32, 0}, 70000};
  for (proc_id p = 0; p < 8; ++p)
    start(g, p, big);
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
  ops = op;
  return total_stats(g, 8);
}

/// What both shapes share: every one of the 8 processors started and contributed to
/// each of the `ops` reductions, one result each, nothing point-to-point, no wait cut
/// short by a timeout, no handoff.
void check_stable(const reduce_stats& t, std::uint64_t ops) {
  BOOST_TEST(t.started == 8u * ops);
  BOOST_TEST(t.contributed == 8u * ops);
  BOOST_TEST(t.results == ops);
  BOOST_TEST(t.direct_partials == 0u);
  BOOST_TEST(t.timeouts == 0u);
  BOOST_TEST(t.handoffs == 0u);
}

} // namespace

// The same in a star within the root's LAN (reduce_config::star_bytes): every vnode
// counted once, each non-root processor sends one partial of its own (those from other
// LANs that reach a processor of the star go on as they come), nobody waits for a
// timeout, nothing goes point-to-point.
BOOST_AUTO_TEST_CASE(stable_reductions_in_a_star) {
  std::uint64_t op = 0;
  auto t = stable_reductions(4096, op);
  check_stable(t, op);
  BOOST_TEST(t.tree_partials == 7u * op + t.passed_on);
  BOOST_TEST(t.star_partials > 0u); // the star was used
}

// Converged trees, everyone starts at once, without the star (star_bytes 0), as the
// paper's tree: every operator and type gives the value computed directly, every vnode
// counted once, partials only up tree edges (a long array up the bandwidth tree) and no
// timeout cut a wait short.
BOOST_AUTO_TEST_CASE(stable_reductions_with_every_operator_and_type) {
  std::uint64_t op = 0;
  auto t = stable_reductions(0, op);
  check_stable(t, op);
  BOOST_TEST(t.passed_on == 0u);
  BOOST_TEST(t.tree_partials == 7u * op); // one partial per non-root processor
}

// Reductions while trees are still forming, over random topologies.
BOOST_AUTO_TEST_CASE(reductions_during_tree_formation) {
  std::mt19937 rng{17};
  auto ops = all_operators();
  for (int round = 0; round < 30; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(300 + round)};
    f.install(g);
    g.start();
    for (std::uint64_t op = 1; op <= 4; ++op) {
      reduce_spec spec{op, static_cast<vnode_id>(rng() % n), ops[rng() % ops.size()], 1 + rng() % 4};
      for (proc_id p = 0; p < n; ++p) {
        start(g, p, spec);
        g.run_for(std::chrono::microseconds(rng() % 500));
      }
    }
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.reductions.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
    }
  }
}

// A processor that starts long after the others: they time out and send what they have;
// its partial is passed on as it arrives, and the result still counts everyone once.
BOOST_AUTO_TEST_CASE(a_late_processor_is_forwarded_as_it_arrives) {
  fixture f;
  mini_grid g{tiny(), 9};
  f.install(g);
  g.start();
  g.run();
  reduce_spec spec{1, 0, {reduce_kind::sum, element_type::int64, 0}, 3};
  // The latest a processor's partial can come: the deepest leaf of the root's tree.
  auto t = g.tree_of({0, tree_kind::latency});
  auto depths = t.depths();
  proc_id late = static_cast<proc_id>(std::max_element(depths.begin(), depths.end()) - depths.begin());
  BOOST_REQUIRE(late != 0);
  for (proc_id p = 0; p < 8; ++p)
    if (p != late)
      start(g, p, spec);
  g.run_for(std::chrono::milliseconds(100)); // far beyond every timeout
  BOOST_TEST(f.reductions.results.empty());
  start(g, late, spec);
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
  auto s = total_stats(g, 8);
  BOOST_TEST(s.timeouts > 0u);
  BOOST_TEST(s.passed_on > 0u); // the late partial went on without waiting
}

// The root vnode moves to a newcomer while the reduction is under way: what was gathered
// for it follows it, and the result appears where it is at the end.
BOOST_AUTO_TEST_CASE(the_root_vnode_moving_mid_reduction) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    fixture f;
    mini_grid g{tiny(), seed};
    f.install(g);
    g.start(7);
    g.run();
    reduce_spec spec{1, 3, {reduce_kind::max, element_type::float64, 0}, 4};
    for (proc_id p = 0; p < 7; ++p)
      if (p != 5)
        start(g, p, spec); // 5 holds the result back
    g.run_for(std::chrono::milliseconds(50));
    g.join(7, 0, vnode_set{3});
    g.run();
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_REQUIRE((g.sup(7)->own_vnodes() == vnode_set{3}));
      BOOST_TEST(f.reductions.results.empty());
      catch_up(g, f.reductions, {spec}, 7, 1); // the newcomer starts the open reduction
      start(g, 5, spec);
      g.run();
      BOOST_TEST(f.reductions.check(7) == "");
      BOOST_REQUIRE(f.reductions.results.count(1));
      // Checked by the rider too: the result came out where vnode 3 is owned.
      BOOST_TEST(rider(g, 7).reducer().stats().results == 1u);
    }
  }
}

// Vnodes change hands between the moments their old and new owners start a reduction:
// contributed before the move, not again after it; not yet contributed, then by the new
// owner. Each vnode exactly once.
BOOST_AUTO_TEST_CASE(vnodes_moving_mid_reduction_count_once) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    fixture f;
    mini_grid g{tiny(), seed};
    f.install(g);
    g.start(6);
    g.run();
    std::vector<reduce_spec> specs = {{1, 0, {reduce_kind::sum, element_type::int32, 0}, 2},
                                      {2, 5, {reduce_kind::product, element_type::int64, 0}, 2}};
    // 2 contributes vnode 2 to reduction 1, then hands it to newcomer 6, which starts
    // reduction 1 too. 4 hands vnode 4 to newcomer 7 before starting anything.
    start(g, 2, specs[0]);
    g.run_for(std::chrono::milliseconds(1));
    g.join(6, 0, vnode_set{2});
    g.join(7, 1, vnode_set{4});
    g.run();
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_REQUIRE((g.sup(6)->own_vnodes() == vnode_set{2}));
      BOOST_REQUIRE((g.sup(7)->own_vnodes() == vnode_set{4}));
      for (proc_id p = 0; p < 8; ++p)
        catch_up(g, f.reductions, specs, p, 2);
      g.run();
      BOOST_TEST(f.reductions.check(6) == "");
      BOOST_TEST(rider(g, 6).reducer().stats().contributed == 1u); // vnode 2 for reduction 2
      BOOST_TEST(rider(g, 7).reducer().stats().contributed == 2u); // vnode 4 for both
      BOOST_TEST(total_stats(g, 8).handoffs >= 2u);
    }
  }
}

// Crash recovery: 3 crashes after reduction 1 and its successor 4 adopts vnode 3, which
// reduction 2 then counts once (asked of 4's application); 5 is taken for crashed while it
// runs, 6 adopts vnode 5 and 5 gives it up, handing its history on: reduction 3 counts it
// once, and no engine reports a double history.
BOOST_AUTO_TEST_CASE(adopted_vnodes_count_once_after_a_crash_and_a_false_suspicion) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    fixture f;
    supervisor_config eager; // no suspicion: one refused connection declares a crash
    eager.suspect_timeout = duration{0};
    mini_grid g{tiny(), seed, eager};
    f.install(g);
    g.start(8);
    g.run();
    std::vector<reduce_spec> specs = {{1, 0, {reduce_kind::sum, element_type::int32, 0}, 2},
                                      {2, 6, {reduce_kind::sum, element_type::int64, 0}, 2},
                                      {3, 1, {reduce_kind::max, element_type::int32, 0}, 2}};
    for (proc_id p = 0; p < 8; ++p)
      start(g, p, specs[0]);
    g.run();
    g.crash(3);
    g.suspect(2, 3); // a refused connection
    g.run();
    BOOST_TEST_CONTEXT("seed " << seed) {
      BOOST_REQUIRE((g.sup(4)->own_vnodes() == vnode_set::range(3, 5)));
      for (proc_id p = 0; p < 8; ++p)
        if (p != 3)
          start(g, p, specs[1]);
      g.run();
      g.suspect(4, 5); // 5 runs
      g.run();
      BOOST_REQUIRE((g.sup(6)->own_vnodes() == vnode_set::range(5, 7)));
      BOOST_REQUIRE(g.sup(5)->own_vnodes().empty());
      for (proc_id p = 0; p < 8; ++p)
        if (p != 3)
          start(g, p, specs[2]);
      g.run();
      BOOST_TEST(f.reductions.check(8) == "");
      BOOST_TEST(rider(g, 4).reducer().stats().contributed >= 3u); // vnode 4 x3, vnode 3 x2
    }
  }
}

// Processors join and leave at random and vnodes move while reductions are started at
// random moments (each processor in order, newcomers from the first one without a
// result). Every reduction counts every vnode exactly once and gives the right value.
BOOST_AUTO_TEST_CASE(reductions_under_churn_count_every_vnode_exactly_once) {
  std::mt19937 rng{606};
  auto ops = all_operators();
  reduce_stats all;
  for (int round = 0; round < 60; ++round) {
    auto topo = random_topology(rng);
    auto n = static_cast<proc_id>(topo.proc_count());
    fixture f;
    mini_grid g{topo, static_cast<std::uint64_t>(9000 + round)};
    f.install(g);
    g.start();
    if (round % 2)
      g.run();
    std::vector<reduce_spec> specs;
    for (std::uint64_t op = 1; op <= 6; ++op)
      specs.push_back({op, static_cast<vnode_id>(rng() % n), ops[rng() % ops.size()],
                       op == 6 && round % 5 == 0 ? 70000 : 1 + rng() % 4});
    std::uniform_int_distribution<int> gap_us(0, round % 3 ? 3000 : 15000);
    for (int step = 0; step < 40; ++step) {
      g.run_for(std::chrono::microseconds(gap_us(rng)));
      g.churn_step(rng, n, 4, 2, [&](proc_id p, int) { // one more reduction started here
        auto last = rider(g, p).reducer().last_started();
        catch_up(g, f.reductions, specs, p, last == 0 ? first_open(f.reductions, specs.size()) : last + 1);
      });
    }
    // Let the membership settle, then every member finishes the reductions.
    g.run();
    for (proc_id p = 0; p < n; ++p)
      if (g.live()[p])
        catch_up(g, f.reductions, specs, p, specs.size());
    g.run();
    BOOST_TEST_CONTEXT("round " << round << " with " << n << " processors") {
      BOOST_TEST(f.reductions.check(n) == "");
      BOOST_TEST(g.lost_rider_messages() == 0u);
      for (proc_id p = 0; p < n; ++p)
        if (g.live()[p])
          BOOST_TEST(!rider(g, p).reducer().holding(),
                     "processor " << p << ":\n" << rider(g, p).reducer().describe());
      auto t = total_stats(g, n);
      all.handoffs += t.handoffs;
      all.passed_on += t.passed_on;
      all.direct_partials += t.direct_partials;
      all.bounces += t.bounces;
      all.timeouts += t.timeouts;
    }
  }
  BOOST_TEST(all.handoffs > 0u);
  BOOST_TEST(all.passed_on > 0u);
  BOOST_TEST(all.direct_partials > 0u);
  BOOST_TEST(all.timeouts > 0u);
}

// The baselines reduce on the same engine, over static trees.
BOOST_AUTO_TEST_CASE(static_baseline_trees_reduce_exactly_once) {
  std::mt19937 rng{23};
  auto ops = all_operators();
  for (int round = 0; round < 10; ++round) {
    auto topo = round == 0 ? tiny() : random_topology(rng);
    auto n = topo.proc_count();
    auto clusters = topo.cluster_of();
    routing_table routes;
    for (proc_id p = 0; p < n; ++p)
      routes.assign(vnode_set{p}, p, 0);
    for (int shape = 0; shape < 2; ++shape) {
      fixture f;
      mini_grid g{topo, static_cast<std::uint64_t>(round + 1)};
      g.set_rider_factory([&](proc_id p, const supervisor&) {
        auto trees = [shape, n, clusters](tree_key k) {
          return shape == 0 ? binomial_tree(n, k.root) : magpie_tree(n, k.root, clusters);
        };
        return std::make_unique<collective_rider>(
          std::make_unique<static_tree_view>(p, routes, trees), f.deliveries, broadcast_config{},
          &f.reductions, f.cfg);
      });
      g.start();
      for (std::uint64_t op = 1; op <= 3; ++op) {
        reduce_spec spec{op, static_cast<vnode_id>(rng() % n), ops[rng() % ops.size()], 3};
        for (proc_id p = 0; p < n; ++p)
          start(g, p, spec);
      }
      g.run();
      BOOST_TEST_CONTEXT("round " << round << ", shape " << shape) {
        BOOST_TEST(f.reductions.check(static_cast<vnode_id>(n)) == "");
        auto t = total_stats(g, n);
        BOOST_TEST(t.direct_partials == 0u);
        BOOST_TEST(t.tree_partials == 3u * (n - 1));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(starting_out_of_order_or_with_unknown_operators_fails) {
  fixture f;
  mini_grid g{tiny(), 1};
  f.install(g);
  g.start();
  g.run();
  auto& r = rider(g, 0).reducer();
  reduce_outbox out;
  auto values = [](vnode_id) { return bytes(4); };
  BOOST_TEST(!r.start(g.now(), {1, 0, {reduce_kind::sum, element_type::int32, 0}, 1}, values, out));
  BOOST_TEST(out.problems.empty());
  auto again = r.start(g.now(), {1, 0, {reduce_kind::sum, element_type::int32, 0}, 1}, values, out);
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST((again->code == errc::invalid_argument));
  auto unknown = r.start(g.now(), {2, 0, {reduce_kind::user, element_type::bytes, 77}, 1}, values, out);
  BOOST_REQUIRE(unknown.has_value());
  BOOST_TEST((unknown->code == errc::not_found));
  auto ragged = r.start(g.now(), {2, 0, {reduce_kind::sum, element_type::bytes, 0}, 1}, values, out);
  BOOST_REQUIRE(ragged.has_value());
  BOOST_TEST(r.last_started() == 1u);
  g.leave(3);
  g.run();
  auto gone = rider(g, 3).reducer().start(g.now(), {1, 0, {reduce_kind::sum, element_type::int32, 0}, 1}, values, out);
  BOOST_REQUIRE(gone.has_value());
  BOOST_TEST((gone->code == errc::stopped));
}

// A start the engine refuses (a contribution of the wrong size, a root vnode outside the
// namespace) changes nothing: nothing is counted, the number is still free, and the same
// reduction started right then completes exactly once everywhere.
BOOST_AUTO_TEST_CASE(a_refused_start_changes_nothing) {
  fixture f;
  mini_grid g{tiny(), 3};
  f.install(g);
  g.start();
  g.run();
  auto& r = rider(g, 2).reducer();
  BOOST_TEST(r.next_op() == 1u);
  const reduce_spec spec{1, 5, {reduce_kind::sum, element_type::int32, 0}, 2};
  int calls = 0;
  reduce_outbox out;
  auto short_one = r.start(g.now(), spec, [&](vnode_id) { ++calls; return bytes(5); }, out);
  BOOST_REQUIRE(short_one.has_value());
  BOOST_TEST((short_one->code == errc::invalid_argument));
  BOOST_TEST(short_one->message.find("5 bytes, not 8") != std::string::npos, short_one->message);
  BOOST_TEST(calls == 1);
  auto nowhere = r.start(g.now(), {1, 100, spec.fn, 2}, [](vnode_id) { return bytes(8); }, out);
  BOOST_REQUIRE(nowhere.has_value());
  BOOST_TEST((nowhere->code == errc::invalid_argument));
  BOOST_TEST(nowhere->message.find("root vnode 100 does not exist") != std::string::npos);
  BOOST_TEST(out.sends.empty());
  BOOST_TEST(out.timers.empty());
  BOOST_TEST(r.last_started() == 0u);
  BOOST_TEST(r.next_op() == 1u);
  BOOST_TEST(r.stats().contributed == 0u);
  for (proc_id p = 0; p < 8; ++p)
    start(g, p, spec);
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
  BOOST_TEST(r.next_op() == 2u);
}

// A reduction one processor never starts cannot complete. Given up at the root's owner
// (a runtime's timeout), the report names the vnodes that never arrived and their owner;
// the late partial that comes afterwards is dropped, not gathered again; and the next
// reduction counts every vnode exactly once.
BOOST_AUTO_TEST_CASE(an_abandoned_reduction_names_what_is_missing_and_the_next_counts_once) {
  fixture f;
  mini_grid g{tiny(), 9};
  f.install(g);
  g.start();
  g.run();
  auto t = g.tree_of({0, tree_kind::latency});
  auto depths = t.depths();
  const auto late = static_cast<proc_id>(std::max_element(depths.begin(), depths.end()) - depths.begin());
  BOOST_REQUIRE(late != 0);
  const reduce_spec one{1, 0, {reduce_kind::sum, element_type::int64, 0}, 3};
  for (proc_id p = 0; p < 8; ++p)
    if (p != late)
      start(g, p, one);
  g.run_for(std::chrono::milliseconds(100)); // far beyond every timeout
  BOOST_TEST(f.reductions.results.empty());
  reduce_abandoned rep;
  g.with_rider(0, [&](mini_grid::rider& rd, timestamp now, outbox& out) {
    rep = dynamic_cast<collective_rider&>(rd).abandon(now, 1, out);
  });
  BOOST_TEST(rep.known);
  BOOST_TEST(rep.at_root);
  BOOST_TEST(rep.root == 0u);
  BOOST_TEST((rep.missing == vnode_set{late}));
  BOOST_TEST((rep.gathered == vnode_set::range(0, 8) - vnode_set{late}));
  BOOST_REQUIRE_EQUAL(rep.missing_owners.size(), 1u);
  BOOST_TEST(rep.missing_owners.begin()->first == late);
  BOOST_TEST(describe_owners(rep.missing_owners)
             == "{" + std::to_string(late) + "} (processor " + std::to_string(late) + ")");
  // Elsewhere the part had gone up long ago.
  g.with_rider(1, [&](mini_grid::rider& rd, timestamp now, outbox& out) {
    auto other = dynamic_cast<collective_rider&>(rd).abandon(now, 1, out);
    BOOST_TEST(!other.at_root);
    BOOST_TEST(other.part_sent);
  });
  start(g, late, one); // too late: its partial reaches the root's owner, which drops it
  g.run();
  BOOST_TEST(f.reductions.results.empty());
  BOOST_TEST(rider(g, 0).reducer().stats().dropped == 1u);
  BOOST_TEST(rider(g, 0).reducer().stats().abandoned == 1u);
  // Reduction 1 is over; reduction 2 counts every vnode once, with the right value.
  f.reductions.specs.erase(1);
  for (vnode_id v = 0; v < 8; ++v)
    f.reductions.calls.erase({1, v});
  const reduce_spec two{2, 0, {reduce_kind::sum, element_type::int64, 0}, 3};
  for (proc_id p = 0; p < 8; ++p)
    start(g, p, two);
  g.run();
  BOOST_TEST(f.reductions.check(8) == "");
}

// The number a processor should start next follows what it started and the histories it
// holds: a joiner's is one above its vnodes' last reduction once their history arrived.
BOOST_AUTO_TEST_CASE(next_op_follows_starts_and_histories) {
  fixture f;
  mini_grid g{tiny(), 4};
  f.install(g);
  g.start(6); // processors 6 and 7 join later
  g.run();
  const reduce_spec one{1, 0, {reduce_kind::sum, element_type::int32, 0}, 1};
  for (proc_id p = 0; p < 6; ++p)
    start(g, p, one);
  g.run();
  BOOST_TEST(rider(g, 3).reducer().next_op() == 2u);
  // A joiner asking for vnode 4 (settled at 4's owner with reduction 1 done): its first
  // is 2 once the history arrived; one that received nothing starts where it is told.
  g.join(6, 0, vnode_set{4});
  g.join(7, 0, vnode_set{});
  g.run();
  BOOST_TEST((g.sup(6)->own_vnodes() == vnode_set{4}));
  BOOST_TEST((rider(g, 6).reducer().settled() == vnode_set{4}));
  BOOST_TEST(rider(g, 6).reducer().next_op() == 2u);
  BOOST_TEST(g.sup(7)->own_vnodes().empty());
  BOOST_TEST(rider(g, 7).reducer().next_op() == 1u);
}

// A processor whose application skips a reduction: the partials its children sent it for
// that one go on up when it starts the next (they would wait there for good, and keep it
// holding), and its skipped vnodes are reported lost.
BOOST_AUTO_TEST_CASE(partials_held_for_a_skipped_reduction_go_on_at_the_next_start) {
  fixture f;
  mini_grid g{tiny(), 9};
  f.install(g);
  g.start();
  g.run();
  auto t = g.tree_of({0, tree_kind::latency});
  auto kids = t.children();
  proc_id skipper = no_proc;
  for (proc_id p = 1; p < 8; ++p)
    if (!kids[p].empty() && (skipper == no_proc || t.descendants(p) > t.descendants(skipper)))
      skipper = p;
  BOOST_REQUIRE(skipper != no_proc);
  const reduce_spec one{1, 0, {reduce_kind::sum, element_type::int32, 0}, 1};
  for (proc_id p = 0; p < 8; ++p)
    if (p != skipper)
      start(g, p, one);
  g.run_for(std::chrono::milliseconds(100));
  auto& r = rider(g, skipper).reducer();
  BOOST_TEST(r.holding()); // its children's partial, waiting for a start that never comes
  const reduce_spec two{2, 0, {reduce_kind::sum, element_type::int32, 0}, 1};
  start(g, skipper, two);
  g.run_for(std::chrono::milliseconds(100));
  // At the root: everything of reduction 1 but the skipper's own vnode arrived.
  reduce_abandoned rep;
  g.with_rider(0, [&](mini_grid::rider& rd, timestamp now, outbox& out) {
    rep = dynamic_cast<collective_rider&>(rd).abandon(now, 1, out);
  });
  BOOST_TEST(rep.at_root);
  BOOST_TEST((rep.missing == vnode_set{skipper}));
  BOOST_REQUIRE_EQUAL(f.reductions.problems.size(), 1u);
  BOOST_TEST(f.reductions.problems[0].find("skipped") != std::string::npos, f.reductions.problems[0]);
  f.reductions.problems.clear();
  for (proc_id p = 0; p < 8; ++p)
    if (p != skipper)
      start(g, p, two);
  g.run();
  BOOST_TEST(!r.holding());
  BOOST_TEST(f.reductions.results.count(1) == 0u);
  BOOST_REQUIRE_EQUAL(f.reductions.results.count(2), 1u);
  BOOST_TEST((f.reductions.results[2].front().vnodes == vnode_set::range(0, 8)));
  BOOST_TEST(f.reductions.problems.empty());
}

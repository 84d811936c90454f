// MPICH's allreduce and barrier baselines (core/mpich_allreduce.hpp): every rank gets the
// value computed directly, for 1-13 processors, counts that divide evenly, do not, or are
// below the number of processors, frames delivered in random order; MPICH's frame counts;
// a barrier completes nowhere before every rank started it; bad starts are refused.

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <deque>
#include <memory>
#include <random>

#include "banyan/core/mpich_allreduce.hpp"

using namespace banyan;
using bytes = std::vector<std::uint8_t>;

namespace {

bytes values_of(vnode_id v, std::size_t count, std::uint64_t salt) {
  bytes b(count * 8);
  for (std::size_t i = 0; i < count; ++i) {
    const auto x = static_cast<std::int64_t>((v * 131 + i * 7 + salt) % 1000) - 500;
    std::memcpy(b.data() + i * 8, &x, 8);
  }
  return b;
}

/// n processors, two vnodes each, frames delivered in random order.
struct world {
  reduce_op_table ops;
  std::vector<std::unique_ptr<mpich_allreduce_collective>> procs;
  std::vector<wire::envelope> wire_;
  std::map<std::pair<proc_id, std::uint64_t>, allreduce_delivery> got;
  std::mt19937 rng;

  world(std::size_t n, mpich_algorithm a, unsigned seed) : rng(seed) {
    for (proc_id p = 0; p < n; ++p)
      procs.push_back(std::make_unique<mpich_allreduce_collective>(
        p, n, [p] { return vnode_set::range(2 * p, 2 * p + 2); }, ops, a));
  }
  void collect(proc_id p) {
    auto& o = procs[p]->out();
    for (auto& e : o.sends)
      wire_.push_back(std::move(e));
    for (auto& d : o.deliveries) {
      BOOST_TEST(got.count({p, d.op}) == 0u, "delivered twice at " << p);
      got[{p, d.op}] = d;
    }
    o.clear();
  }
  void start(proc_id p, const allreduce_spec& spec, std::uint64_t salt) {
    auto c = spec.count;
    auto e = procs[p]->start(timestamp{}, spec, [c, salt](vnode_id v) { return values_of(v, c, salt); });
    BOOST_REQUIRE_MESSAGE(!e, (e ? e->to_string() : ""));
    collect(p);
  }
  void run() {
    while (!wire_.empty()) {
      auto i = std::uniform_int_distribution<std::size_t>(0, wire_.size() - 1)(rng);
      auto e = std::move(wire_[i]);
      wire_.erase(wire_.begin() + static_cast<std::ptrdiff_t>(i));
      BOOST_REQUIRE(procs[e.to]->on_message(timestamp{}, e.from, e.body));
      collect(e.to);
    }
  }
};

bytes truth(std::size_t n, std::size_t count, std::uint64_t salt) {
  reduce_op_table ops;
  bytes acc = values_of(0, count, salt);
  for (vnode_id v = 1; v < 2 * n; ++v) {
    auto x = values_of(v, count, salt);
    BOOST_REQUIRE(!ops.combine({reduce_kind::sum, element_type::int64, 0}, acc, x.data(), x.size()));
  }
  return acc;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_rank_gets_the_sum_in_any_frame_order) {
  for (auto a : {mpich_algorithm::recursive_doubling, mpich_algorithm::ring}) {
    for (std::size_t n = 1; n <= 13; ++n) {
      for (std::size_t count : {std::size_t{1}, n, 3 * n + 2, std::size_t{64}}) {
        BOOST_TEST_CONTEXT(to_string(a) << ", " << n << " processors, " << count << " elements") {
          world w(n, a, static_cast<unsigned>(n * 100 + count));
          allreduce_spec spec{1, 0, {reduce_kind::sum, element_type::int64, 0}, count};
          // Ranks start in random order, frames interleaved with the starts.
          std::vector<proc_id> order(n);
          for (proc_id p = 0; p < n; ++p)
            order[p] = p;
          std::shuffle(order.begin(), order.end(), w.rng);
          for (auto p : order) {
            w.start(p, spec, count);
            if (w.rng() % 2 && !w.wire_.empty()) {
              auto e = w.wire_.front();
              w.wire_.erase(w.wire_.begin());
              w.procs[e.to]->on_message(timestamp{}, e.from, e.body);
              w.collect(e.to);
            }
          }
          w.run();
          auto want = truth(n, count, count);
          for (proc_id p = 0; p < n; ++p) {
            BOOST_REQUIRE(w.got.count({p, 1}) == 1u);
            auto& d = w.got[{p, 1}];
            BOOST_TEST(d.vnodes.to_string() == vnode_set::range(2 * p, 2 * p + 2).to_string());
            BOOST_TEST(d.value.to_vector() == want);
            BOOST_TEST(!w.procs[p]->holding());
            BOOST_TEST(w.procs[p]->stats().malformed == 0u);
          }
          // MPICH's frame counts.
          std::uint64_t frames = 0;
          for (auto& p : w.procs)
            frames += p->stats().frames;
          std::size_t pof2 = 1, log = 0;
          while (pof2 * 2 <= n) {
            pof2 *= 2;
            ++log;
          }
          if (a == mpich_algorithm::ring)
            BOOST_TEST(frames == (n > 1 ? 2 * n * (n - 1) : 0u));
          else
            BOOST_TEST(frames == pof2 * log + 2 * (n - pof2));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_dissemination_barrier_completes_only_once_everyone_started) {
  for (std::size_t n = 1; n <= 13; ++n) {
    BOOST_TEST_CONTEXT(n << " processors") {
      world w(n, mpich_algorithm::dissemination, static_cast<unsigned>(n));
      allreduce_spec spec{1, 0, {}, 0};
      for (proc_id p = 1; p < n; ++p)
        w.start(p, spec, 0);
      w.run();
      if (n > 1)
        BOOST_TEST(w.got.empty()); // processor 0 has not arrived
      w.start(0, spec, 0);
      w.run();
      BOOST_TEST(w.got.size() == n);
      std::uint64_t frames = 0;
      for (auto& p : w.procs)
        frames += p->stats().frames;
      std::size_t rounds = 0;
      while ((std::size_t{1} << rounds) < n)
        ++rounds;
      BOOST_TEST(frames == n * rounds);
      // A second one, on the same engines.
      spec.op = 2;
      for (proc_id p = 0; p < n; ++p)
        w.start(p, spec, 0);
      w.run();
      BOOST_TEST(w.got.size() == 2 * n);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_starts_are_refused) {
  reduce_op_table ops;
  mpich_allreduce_collective e(0, 4, [] { return vnode_set::range(0, 2); }, ops,
                               mpich_algorithm::ring);
  allreduce_spec spec{1, 0, {reduce_kind::sum, element_type::int64, 0}, 3};
  BOOST_TEST(e.start(timestamp{}, spec, [](vnode_id) { return bytes(5); }).has_value());
  BOOST_TEST(e.start(timestamp{}, spec, nullptr).has_value());
  BOOST_TEST(e.out().sends.empty());
  BOOST_TEST(!e.start(timestamp{}, spec, [](vnode_id) { return bytes(24); }).has_value());
  BOOST_TEST(e.start(timestamp{}, spec, [](vnode_id) { return bytes(24); }).has_value()); // again
  mpich_allreduce_collective b(0, 4, [] { return vnode_set::range(0, 2); }, ops,
                               mpich_algorithm::dissemination);
  BOOST_TEST(b.start(timestamp{}, spec, [](vnode_id) { return bytes(24); }).has_value());
  mpich_allreduce_collective outside(7, 4, [] { return vnode_set::range(0, 2); }, ops,
                                     mpich_algorithm::recursive_doubling);
  BOOST_TEST(outside.start(timestamp{}, spec, [](vnode_id) { return bytes(24); }).has_value());
}

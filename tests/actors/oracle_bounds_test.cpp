// The oracles are bounds: on small generated topologies, no broadcast or reduction run
// through the emulated network, with any algorithm, beats them. Per processor, a long
// broadcast's delivery time is at least bytes / maximum flow (stream_ceiling), and for
// an algorithm that sends every byte down one tree at least bytes / the widest path (the
// tree ceiling); a 1-byte broadcast's at least the overhead-aware shortest path
// (static_tree_oracle); a reduction up one tree arrives no sooner than bytes / the
// reduction's tree ceiling.

#include <boost/test/unit_test.hpp>

#include <functional>
#include <string>

#include "banyan/actors/emulated_cluster.hpp"
#include "banyan/core/static_tree_oracle.hpp"
#include "banyan/core/stream_ceiling.hpp"
#include "banyan/core/topology.hpp"
#include "banyan/core/topology_generator.hpp"
#include "banyan/core/tree_builders.hpp"

using namespace banyan;
using namespace banyan::actors;
using namespace std::chrono_literals;

namespace {

topology small_generated(std::uint64_t seed, int levels) {
  topology_generator_options o;
  o.seed = seed;
  o.levels = levels;
  o.min_procs = 5;
  o.max_procs = 10;
  auto t = generate_topology(o);
  BOOST_REQUIRE_MESSAGE(t, (t ? std::string() : t.err().to_string()));
  return *t;
}

/// Runs broadcast `id` to the end and checks every processor's first delivery against
/// `earliest_ms` (by processor; one vnode each).
void check_not_before(emulated_cluster& c, std::optional<wire::collective_id> id,
                      const std::vector<double>& earliest_ms, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE(id.has_value());
    BOOST_REQUIRE(c.run_until_delivered(*id, 600s));
    auto rec = c.deliveries(*id);
    BOOST_REQUIRE_EQUAL(rec.delivered.size(), c.vnode_count());
    for (auto& [v, times] : rec.delivered) {
      BOOST_REQUIRE(!times.empty());
      const double took = to_ms(times.front() - rec.started);
      BOOST_CHECK_MESSAGE(took >= earliest_ms[v] * (1 - 1e-9) - 1e-6,
                          "processor " << v << " after " << took << " ms, bound "
                                       << earliest_ms[v] << " ms");
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(oracle_bounds)

BOOST_AUTO_TEST_CASE(no_algorithm_beats_the_ceilings_or_the_short_bound) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    auto topo = small_generated(seed, seed % 2 ? 2 : 3);
    const auto n = topo.proc_count();
    BOOST_TEST_CONTEXT(topo.name) {
      cluster_config cfg;
      cfg.topo = topo;
      cfg.seed = seed;
      emulated_cluster c(cfg);
      c.start();
      BOOST_REQUIRE(c.run_until_quiet(600s));

      const std::size_t bytes = 2 << 20;
      // Any algorithm against the maximum flow; one tree (every static tree, and banyan's
      // broadcast, which follows one tree per broadcast) against the widest path.
      const auto ceiling = broadcast_ceiling(topo, 0);
      const auto one_tree = broadcast_tree_ceiling(topo, 0);
      std::vector<double> long_bound(n), tree_bound(n);
      for (proc_id p = 0; p < n; ++p) {
        long_bound[p] = p == 0 ? 0 : static_cast<double>(bytes) / ceiling.per_proc[p] * 1000;
        tree_bound[p] = p == 0 ? 0 : static_cast<double>(bytes) / one_tree.per_proc[p] * 1000;
        BOOST_CHECK_GE(tree_bound[p], long_bound[p] * (1 - 1e-9));
      }
      const auto short_bound = short_message_bounds(topo, 0);

      std::vector<std::pair<std::string, tree>> trees{
        {"flat", flat_tree(n, 0)},
        {"binomial", binomial_tree(n, 0)},
        {"magpie", magpie_tree(n, 0, topo.cluster_of())},
        {"chain", chain_tree(widest_chain(bandwidth_matrix(topo), 0))},
        {"best static", best_static_tree(topo, 0, 1, false).winner().t}};
      for (const auto& [name, t] : trees) {
        BOOST_REQUIRE(c.run_until_quiet(600s));
        check_not_before(c, c.broadcast_static(0, t, bytes), tree_bound, name + " long");
        BOOST_REQUIRE(c.run_until_quiet(600s));
        check_not_before(c, c.broadcast_static(0, t, 1), short_bound, name + " 1 byte");
      }
      BOOST_REQUIRE(c.run_until_quiet(600s));
      check_not_before(c, c.broadcast(0, bytes), tree_bound, "dynamic long");
      BOOST_REQUIRE(c.run_until_quiet(600s));
      check_not_before(c, c.broadcast(0, 1), short_bound, "dynamic 1 byte");
      BOOST_REQUIRE(c.run_until_quiet(600s));
      check_not_before(c, c.broadcast_scatter_allgather(0, bytes), long_bound,
                       "scatter-allgather");

      // Reductions of 1 MiB int32 sums into vnode 0.
      const std::size_t count = (1 << 20) / 4;
      // Every reduction here goes up one tree: the widest-path bound (never below the
      // maximum flow's).
      const double reduce_bound =
        static_cast<double>(count * 4) / reduce_tree_ceiling(topo, 0).ceiling * 1000;
      BOOST_CHECK_GE(reduce_bound, static_cast<double>(count * 4) /
                                     reduce_ceiling(topo, 0).ceiling * 1000 * (1 - 1e-9));
      reduction_args a;
      a.root = 0;
      a.fn = {reduce_kind::sum, element_type::int32};
      a.count = count;
      a.values = int32_values(count, [](vnode_id v, std::size_t i) {
        return static_cast<std::int32_t>((v + i) % 7);
      });
      std::vector<std::pair<std::string, std::function<expected<std::uint64_t>()>>> reductions{
        {"dynamic", [&] { return c.reduce(a); }},
        {"binomial", [&] { return c.reduce_static(binomial_tree(n, 0), a); }},
        {"flat", [&] { return c.reduce_static(flat_tree(n, 0), a); }}};
      for (auto& [name, start] : reductions) {
        BOOST_TEST_CONTEXT(name + " reduce") {
          BOOST_REQUIRE(c.run_until_quiet(600s));
          auto op = start();
          BOOST_REQUIRE(op);
          BOOST_REQUIRE(c.run_until_reduced(*op, 600s));
          auto rec = c.reduction(*op);
          BOOST_REQUIRE_EQUAL(rec.results.size(), 1u);
          const double took = to_ms(rec.results.front().when - rec.started);
          BOOST_CHECK_GE(took, reduce_bound * (1 - 1e-9));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

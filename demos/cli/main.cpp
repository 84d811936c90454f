// banyan: the command-line tool. Subcommands:
//   banyan demo                 the main demonstration on an embedded default
//   banyan sim trees ...        trees forming and healing on an emulated grid
//   banyan topology [NAME]      list the built-in topologies or describe one
//   banyan topology generate    write a random topology (topology_generate.hpp)
//   banyan node ...             one processor over TCP as this process
//   banyan cluster ...          local `banyan node --control` processes driven together
//   banyan bench EXPERIMENT     measurements on the emulated network, adaptive vs static
//                               trees: bcast-latency, bcast-bandwidth, reduce, churn
//                               (bench.hpp, bench_common.hpp; --plot draws SVG)

#include <iostream>

#include <CLI/CLI.hpp>

#include "banyan/core/topology.hpp"
#include "bench.hpp"
#include "cluster.hpp"
#include "demo.hpp"
#include "node.hpp"
#include "plan.hpp"
#include "sim_trees.hpp"
#include "topology_generate.hpp"

int main(int argc, char** argv) {
  CLI::App app{"banyan: wide-area collectives over self-healing spanning trees"};
  app.require_subcommand(1);

  banyan::cli::demo_options demo;
  auto demo_cmd = app.add_subcommand("demo", "the main demo on an embedded default grid");
  demo_cmd->add_option("--topology", demo.topology, "built-in name or topology file");
  demo_cmd->add_option("--seed", demo.seed, "random seed");
  demo_cmd->add_option("--out", demo.out_dir, "where pictures go");

  auto sim = app.add_subcommand("sim", "simulations on the emulated wide-area network");
  sim->require_subcommand(1);
  banyan::cli::sim_trees_options st;
  auto trees = sim->add_subcommand("trees", "form trees, optionally churn, report");
  trees->add_option("--topology", st.topology, "built-in name or topology file")->required();
  trees->add_option("--seed", st.seed, "random seed");
  trees->add_option("--clock", st.clock, "virtual or real")->check(CLI::IsMember({"virtual", "real"}));
  trees->add_option("--json", st.json_path, "write results as JSON");
  trees->add_option("--leave-half-at", st.leave_half_at_ms, "ms: half of the processors leave");
  trees->add_option("--rejoin-at", st.rejoin_at_ms, "ms: they rejoin");
  trees->add_option("--dot-dir", st.dot_dir, "write DOT (and SVG/PNG) of the trees of --dot-root");
  trees->add_option("--dot-root", st.dot_roots, "roots to export (default 0)");
  trees->add_option("--limit", st.limit_s, "give up after this many emulated seconds");
  trees->add_option("--rules", st.rules,
                    "banyan (default) or paper: the paper's rules, uniform candidates and "
                    "10 extra measurements after every tree has a parent")
    ->check(CLI::IsMember({"banyan", "paper"}));
  trees->add_option("--extra", st.extra, "extra measurements once every tree has a parent (10)");
  trees->add_option("--local-bias", st.local_bias,
                    "chance a probe goes to a known LAN peer (0.5; 0 = the paper's uniform choice)");
  bool quiet_flag = false;
  trees->add_flag("-q,--quiet", quiet_flag, "no progress lines");

  auto topo_cmd = app.add_subcommand("topology", "list built-in topologies or describe one");
  std::string topo_name;
  topo_cmd->add_option("name", topo_name, "built-in name or topology file");
  std::function<int()> generate_action; // set when `banyan topology generate` is parsed
  banyan::cli::add_topology_generate_command(*topo_cmd, generate_action);

  std::function<int()> plan_action; // set when `banyan plan` is parsed
  banyan::cli::add_plan_command(app, plan_action);
  std::function<int()> node_action; // set when `banyan node` is parsed
  banyan::cli::add_node_command(app, node_action);
  banyan::cli::add_cluster_command(app, node_action); // one subcommand runs: they share it
  std::function<int()> bench_action; // set when `banyan bench ...` is parsed
  banyan::cli::add_bench_command(app, bench_action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (generate_action)
    return generate_action();
  if (plan_action)
    return plan_action();
  if (node_action)
    return node_action();
  if (bench_action)
    return bench_action();
  if (*demo_cmd)
    return banyan::cli::run_demo(demo);
  if (*trees) {
    if (quiet_flag)
      st.verbose = false;
    return banyan::cli::run_sim_trees(st);
  }
  if (*topo_cmd) {
    if (topo_name.empty()) {
      for (auto& n : banyan::builtin_topology_names())
        std::cout << n << "\n";
      return 0;
    }
    auto t = banyan::load_topology(topo_name);
    if (!t) {
      std::cerr << "banyan topology: " << t.err().to_string() << "\n";
      return 2;
    }
    std::cout << t->describe() << "\n";
    return 0;
  }
  return 0;
}

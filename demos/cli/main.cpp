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
//   banyan health FILE          whether a node's --json-status says it is a member
//   banyan --version
//
// Errors, every subcommand alike: one line "banyan <cmd>: <message>" on stderr; exit
// code 2 for a usage error (bad or missing arguments), 1 for a failure while running.

#include <iostream>

#include <CLI/CLI.hpp>

#include "banyan/core/topology.hpp"
#include "banyan/version.hpp"
#include "bench.hpp"
#include "cluster.hpp"
#include "demo.hpp"
#include "health.hpp"
#include "node.hpp"
#include "plan.hpp"
#include "sim_trees.hpp"
#include "topology_generate.hpp"

namespace {

/// The deepest subcommand given on the command line (`app` itself if none).
const CLI::App& deepest(const CLI::App& app) {
  const CLI::App* at = &app;
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (auto* sub : at->get_subcommands()) {
      at = sub;
      deeper = true;
    }
  }
  return *at;
}

/// "banyan node", "banyan bench churn": the command a usage error belongs to.
std::string command_name(const CLI::App& app) {
  std::string name;
  for (const CLI::App* at = &deepest(app); at; at = at->get_parent())
    name = at->get_parent() ? " " + at->get_name() + name : "banyan" + name;
  return name;
}

/// A usage error as one line: "banyan sim trees: --topology is required" (exit 2).
int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  std::string what = e.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == '.'))
    what.pop_back();
  for (auto& c : what)
    if (c == '\n')
      c = ' ';
  if (what == "A subcommand is required") {
    // CLI11 takes an unknown word for an extra argument and asks for a subcommand.
    auto rest = deepest(app).remaining();
    what = !rest.empty() && !rest.front().empty() && rest.front()[0] != '-'
             ? "unknown subcommand \"" + rest.front() + "\""
             : "a subcommand is required";
  }
  const auto name = command_name(app);
  std::cerr << name << ": " << what << " (see " << name << " --help)\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"banyan " BANYAN_VERSION_STRING
               ": wide-area collectives over self-healing spanning trees"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "banyan " BANYAN_VERSION_STRING);

  banyan::cli::demo_options demo;
  auto demo_cmd = app.add_subcommand("demo", "the main demo on an embedded default grid");
  demo_cmd->add_option("--topology", demo.topology, "built-in name or topology file");
  demo_cmd->add_option("--seed", demo.seed, "random seed")->type_name("UINT");
  demo_cmd->add_option("--out", demo.out_dir, "where pictures go");

  auto sim = app.add_subcommand("sim", "simulations on the emulated wide-area network");
  sim->require_subcommand(1);
  banyan::cli::sim_trees_options st;
  auto trees = sim->add_subcommand("trees", "form trees, optionally churn, report");
  trees->add_option("--topology", st.topology, "built-in name or topology file")->required();
  trees->add_option("--seed", st.seed, "random seed")->type_name("UINT");
  trees->add_option("--clock", st.clock, "virtual or real")->check(CLI::IsMember({"virtual", "real"}));
  trees->add_option("--json", st.json_path, "write results as JSON");
  trees->add_option("--leave-half-at", st.leave_half_at_ms, "ms: half of the processors leave")
    ->type_name("MS");
  trees->add_option("--rejoin-at", st.rejoin_at_ms, "ms: they rejoin")->type_name("MS");
  trees->add_option("--dot-dir", st.dot_dir, "write DOT (and SVG/PNG) of the trees of --dot-root");
  trees->add_option("--dot-root", st.dot_roots, "roots to export (default 0)");
  trees->add_option("--limit", st.limit_s, "give up after this many emulated seconds")
    ->type_name("SECONDS");
  trees->add_option("--share-quantum", st.share_quantum_us,
                    "approximate network for large runs: fair rates recomputed only every "
                    "US microseconds (0, the default: exact; net::wan_options::share_quantum)")
    ->type_name("US");
  trees->add_option("--rules", st.rules,
                    "banyan (default) or paper: the paper's rules, uniform candidates and "
                    "10 extra measurements after every tree has a parent")
    ->check(CLI::IsMember({"banyan", "paper"}));
  trees->add_option("--extra", st.extra, "extra measurements once every tree has a parent (10)");
  trees->add_option("--explain-entries", st.explain_entries,
                    "list the extra group entries of up to this many trees per kind (0)");
  trees->add_option("--local-bias", st.local_bias,
                    "chance a probe goes to a known LAN peer (0.5; 0 = the paper's uniform choice)");
  trees->add_option("--events", st.events_path,
                    "FILE of 'at' lines: scheduled changes of the network (docs/topology.md)");
  trees->add_option("--background", st.background_s,
                    "background measurement period once trees are stable (0: off)")
    ->type_name("SECONDS");
  trees->add_option("--observe", st.observe_s,
                    "after forming, run until this emulated time and report again")
    ->type_name("SECONDS");
  trees->add_option("--roots", st.roots,
                    "trees on demand: only these processors root trees, opened at the start "
                    "(default: every member roots trees)")
    ->delimiter(',')
    ->type_name("ID,...");
  trees->add_option("--open-roots", st.open_roots,
                    "trees on demand with K roots spread over the processor ids")
    ->type_name("K");
  trees->add_flag("--no-lan-search", st.no_lan_search,
                  "trees on demand: extra measurements count from the start, without the "
                  "search for the LAN (supervisor_config::lan_search)");
  trees->add_flag("--collectives", st.collectives,
                  "once formed, a broadcast and a reduction from each root opened (processor 0 "
                  "when every member roots trees), each checked to complete exactly once");
  trees->add_option("--collective-bytes", st.collective_bytes,
                    "with --collectives: the broadcasts' size (65536)")
    ->type_name("BYTES");
  trees->add_option("--changes-log", st.changes_log,
                    "with --observe: write each parent change observed to FILE (time in s, "
                    "processor, tree kind, root, old parent, new parent)");
  trees->add_option("--leave-count", st.leave_count,
                    "with --leave-half-at: only K processors leave, spread over the ids")
    ->type_name("K");
  trees->add_option("--view-buckets", st.view_buckets,
                    "probe requests carry digests of the view in N buckets; replies carry "
                    "only the buckets that differ (128; 0: the whole view when it differs)")
    ->type_name("N");
  trees->add_option("--reply-budget", st.reply_budget,
                    "a probe reply carries the buckets that differ only while it stays "
                    "within B bytes without padding; the rest come with later probes "
                    "(4096; 0: no budget)")
    ->type_name("B");
  trees->add_flag("--reply-sizes", st.reply_sizes,
                  "report probe reply sizes without padding (median, p99, max) per phase");
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
  std::function<int()> health_action; // set when `banyan health` is parsed
  banyan::cli::add_health_command(app, health_action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }
  if (health_action)
    return health_action();
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

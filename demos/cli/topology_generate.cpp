#include "topology_generate.hpp"

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "banyan/core/topology.hpp"
#include "banyan/core/topology_generator.hpp"

namespace banyan::cli {

namespace {

struct generate_options {
  topology_generator_options gen;
  std::string out;
};

int run_generate(const generate_options& opt) {
  auto text = generate_topology_text(opt.gen);
  if (!text) {
    std::cerr << "banyan topology generate: " << text.err().message << "\n";
    return 2;
  }
  // The generator's own contract: what it writes parses.
  if (auto parsed = parse_topology(*text); !parsed) {
    std::cerr << "banyan topology generate: internal error: " << parsed.err().to_string() << "\n";
    return 2;
  }
  if (opt.out.empty()) {
    std::cout << *text;
    return 0;
  }
  std::ofstream f(opt.out);
  if (!f || !(f << *text)) {
    std::cerr << "banyan topology generate: cannot write " << opt.out << "\n";
    return 2;
  }
  std::cout << "wrote " << opt.out << "\n";
  return 0;
}

} // namespace

void add_topology_generate_command(CLI::App& topology_cmd, std::function<int()>& action) {
  auto opt = std::make_shared<generate_options>();
  auto cmd = topology_cmd.add_subcommand(
    "generate", "write a random topology (uneven clusters, asymmetric and detoured links)");
  cmd->add_option("--seed", opt->gen.seed, "random seed (default 1); same seed, same text");
  cmd->add_option("--procs", opt->gen.procs, "processors (default: drawn from 8-256)");
  cmd->add_option("--min-procs", opt->gen.min_procs, "without --procs: at least (8)");
  cmd->add_option("--max-procs", opt->gen.max_procs, "without --procs: at most (256)");
  cmd->add_option("--levels", opt->gen.levels,
                  "2: clusters of processors; 3: sites of multi-process machines (default: "
                  "drawn)")
    ->check(CLI::IsMember({2, 3}));
  cmd->add_option("--clusters", opt->gen.clusters,
                  "top-level groups: clusters or sites (default: drawn from 2-8)");
  cmd->add_option("--out", opt->out, "write to this file (default: stdout)");
  cmd->callback([opt, &action] { action = [opt] { return run_generate(*opt); }; });
}

} // namespace banyan::cli

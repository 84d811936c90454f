#pragma once
/// Random topologies in the text format of docs/topology.md, for measuring tree
/// algorithms away from the few grids they were tuned on.
///
/// The distribution (docs/topology.md, "Generated topologies", gives the numbers):
///
///   two levels                          three levels
///   cluster  cluster  cluster           site ------------- site
///     |        |        |               /  \                 |
///   procs    procs    procs          machine machine       machine
///                                     |||     ||            ||||
///                                    processes sharing the machine's uplink
///
///   - top-level groups of uneven sizes (weights skewed towards small ones);
///   - wide-area links placed by distance on a plane, some of them "bad" (a detour: a
///     longer RTT and a narrower pipe than going through a third group), some narrow
///     only, and bandwidths that differ by direction (`bw X/Y`);
///   - with three levels, multi-process machines whose processes share one uplink.
///
/// Deterministic forever for a seed: only the raw outputs of `std::mt19937_64` (whose
/// sequence the C++ standard fixes) are used, mapped to numbers with integer and IEEE
/// arithmetic (no `std::uniform_*_distribution`, whose outputs are left to each standard
/// library, and no transcendental functions, whose last bits vary between libm's).

#include <cstdint>
#include <random>
#include <string>

#include "banyan/core/error.hpp"
#include "banyan/core/topology.hpp"

namespace banyan {

/// What to generate; zero fields are drawn from the distribution.
struct topology_generator_options {
  std::uint64_t seed = 1;
  /// Processors; 0: drawn between `min_procs` and `max_procs`, small sizes more likely.
  std::uint32_t procs = 0;
  std::uint32_t min_procs = 8;
  std::uint32_t max_procs = 256;
  /// 2 (clusters of processors) or 3 (sites of machines of processes); 0: either, evenly.
  int levels = 0;
  /// Top-level groups (clusters or sites); 0: drawn from 2 to 8 (fewer for few processors).
  /// More than `procs` is an error.
  std::uint32_t clusters = 0;
};

/// The topology's text, drawn with `rng` (the options' seed is not used, and is printed
/// only in the name). Errors (`errc::invalid_argument`): levels other than 0, 2 or 3;
/// `procs` or `clusters` impossible together; `min_procs` > `max_procs`.
expected<std::string> generate_topology_text(const topology_generator_options& opt,
                                             std::mt19937_64& rng);

/// The same with `std::mt19937_64(opt.seed)`.
expected<std::string> generate_topology_text(const topology_generator_options& opt);

/// The generated text, parsed.
expected<topology> generate_topology(const topology_generator_options& opt);

} // namespace banyan

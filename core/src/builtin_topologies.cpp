// The topologies built into banyan, each kept as text in the documented format so that
// it doubles as an example (docs/topology.md) and goes through the one parser.

#include "banyan/core/topology.hpp"

namespace banyan {
namespace {

struct builtin {
  std::string_view name;
  std::string_view text;
};

// The four configurations of the paper's Section V: 128 to 201 processors in 3 or 4
// clusters, a few hundred microseconds of RTT inside a cluster, a few milliseconds and a
// few hundred Mbit/s between clusters. The paper gives cluster sizes and orders of
// magnitude; the exact RTTs and bandwidths below are plausible, distinct choices.
constexpr std::string_view paper_3c201 = R"(# Paper, Fig. 6: 201 processors in 3 clusters.
topology paper-3c201
send_overhead 20us
default nic 1Gbit
group A procs 96 rtt 0.25ms
group B procs 64 rtt 0.30ms
group C procs 41 rtt 0.40ms
link A B rtt 4ms bw 400Mbit
link A C rtt 7ms bw 200Mbit
link B C rtt 5ms bw 300Mbit
)";

constexpr std::string_view paper_4c137 = R"(# Paper, Fig. 7: 137 processors in 4 clusters.
topology paper-4c137
send_overhead 20us
default nic 1Gbit
group A procs 48 rtt 0.25ms
group B procs 40 rtt 0.30ms
group C procs 32 rtt 0.35ms
group D procs 17 rtt 0.40ms
link A B rtt 3ms bw 400Mbit
link A C rtt 6ms bw 250Mbit
link A D rtt 9ms bw 100Mbit
link B C rtt 4ms bw 300Mbit
link B D rtt 8ms bw 150Mbit
link C D rtt 5ms bw 200Mbit
)";

constexpr std::string_view paper_3c128 = R"(# Paper, Fig. 8: 128 processors in 3 clusters.
topology paper-3c128
send_overhead 20us
default nic 1Gbit
group A procs 64 rtt 0.20ms
group B procs 32 rtt 0.30ms
group C procs 32 rtt 0.35ms
link A B rtt 2ms bw 500Mbit
link A C rtt 6ms bw 200Mbit
link B C rtt 5ms bw 300Mbit
)";

constexpr std::string_view paper_4c160 = R"(# Paper, Fig. 9: 160 processors in 4 clusters of 40.
topology paper-4c160
send_overhead 20us
default nic 1Gbit
group A procs 40 rtt 0.25ms
group B procs 40 rtt 0.30ms
group C procs 40 rtt 0.35ms
group D procs 40 rtt 0.40ms
link A B rtt 2ms bw 500Mbit
link A C rtt 4ms bw 400Mbit
link A D rtt 10ms bw 100Mbit
link B C rtt 3ms bw 300Mbit
link B D rtt 8ms bw 150Mbit
link C D rtt 6ms bw 250Mbit
)";

// After Figure 1 of the MPICH-G2 multilevel paper: sites over a wide-area network,
// machines on each site's switched LAN, processes inside a machine sharing its network
// interface (the machine's uplink) and talking to each other through shared memory.
constexpr std::string_view mpichg_3level =
    R"(# Three levels: site > machine > processes (64 processes).
topology mpichg-3level
send_overhead 20us
default nic 10Gbit            # a process's path to its machine's interface
# Site LLNL: an IBM SP of 4-way SMP nodes.
group llnl rtt 0.3ms          # switched LAN between machines
group llnl-sp0 in llnl procs 4 rtt 0.02ms uplink 1Gbit
group llnl-sp1 in llnl procs 4 rtt 0.02ms uplink 1Gbit
group llnl-sp2 in llnl procs 4 rtt 0.02ms uplink 1Gbit
group llnl-sp3 in llnl procs 4 rtt 0.02ms uplink 1Gbit
group llnl-sp4 in llnl procs 4 rtt 0.02ms uplink 1Gbit
group llnl-sp5 in llnl procs 4 rtt 0.02ms uplink 1Gbit
# Site ANL: an SGI Origin2000 and an IBM SP on one LAN.
group anl rtt 0.4ms
group anl-o2k in anl procs 16 rtt 0.03ms uplink 1Gbit
group anl-sp0 in anl procs 4 rtt 0.02ms uplink 1Gbit
group anl-sp1 in anl procs 4 rtt 0.02ms uplink 1Gbit
group anl-sp2 in anl procs 4 rtt 0.02ms uplink 1Gbit
group anl-sp3 in anl procs 4 rtt 0.02ms uplink 1Gbit
# Site NCSA: two workstations.
group ncsa rtt 0.3ms
group ncsa-ws0 in ncsa procs 4 rtt 0.02ms uplink 1Gbit
group ncsa-ws1 in ncsa procs 4 rtt 0.02ms uplink 1Gbit
# The wide-area network.
link llnl anl rtt 50ms bw 155Mbit
link llnl ncsa rtt 45ms bw 155Mbit
link anl ncsa rtt 4ms bw 622Mbit
)";

constexpr std::string_view wan_1000 = R"(# 1000 processors in 8 clusters on three continents.
topology wan-1000
send_overhead 20us
default nic 1Gbit
group america rtt 150ms bw 500Mbit  # default between its sites, per pair and direction
group europe rtt 20ms bw 1Gbit
group asia rtt 120ms bw 622Mbit
link america europe rtt 90ms bw 2Gbit
link america asia rtt 150ms bw 1Gbit
link europe asia rtt 200ms bw 500Mbit/400Mbit
group us-east in america procs 160 rtt 0.20ms uplink 10Gbit
group us-west in america procs 140 rtt 0.25ms uplink 10Gbit
group brazil in america procs 120 rtt 0.30ms uplink 2Gbit
link us-east us-west rtt 60ms bw 2Gbit
link us-east brazil rtt 120ms bw 1Gbit
group uk in europe procs 150 rtt 0.20ms uplink 10Gbit
group germany in europe procs 130 rtt 0.25ms uplink 10Gbit
group spain in europe procs 100 rtt 0.30ms uplink 2Gbit
group japan in asia procs 120 rtt 0.20ms uplink 10Gbit
group india in asia procs 80 rtt 0.35ms uplink 1Gbit
)";

constexpr std::string_view tiny_2c8 = R"(# 8 processors in 2 clusters of 4, for tests and examples.
topology tiny-2c8
send_overhead 20us
default nic 1Gbit
group A procs 4 rtt 0.2ms
group B procs 4 rtt 0.2ms
link A B rtt 2ms bw 100Mbit
)";

constexpr builtin builtins[] = {
    {"paper-3c201", paper_3c201}, {"paper-4c137", paper_4c137},     {"paper-3c128", paper_3c128},
    {"paper-4c160", paper_4c160}, {"mpichg-3level", mpichg_3level}, {"wan-1000", wan_1000},
    {"tiny-2c8", tiny_2c8},
};

} // namespace

std::vector<std::string> builtin_topology_names() {
  std::vector<std::string> out;
  for (const auto& b : builtins)
    out.emplace_back(b.name);
  return out;
}

std::string_view builtin_topology_text(std::string_view name) {
  for (const auto& b : builtins)
    if (b.name == name)
      return b.text;
  return {};
}

} // namespace banyan

#pragma once
// Random grids for protocol tests: 2-4 clusters of 2-max_procs processors, random LAN
// RTTs, WAN RTTs and WAN bandwidths.

#include <random>
#include <stdexcept>
#include <string>

#include "banyan/core/topology.hpp"

namespace banyan::test {

inline topology random_topology(std::mt19937& rng, int max_procs = 7) {
  std::uniform_int_distribution<int> clusters(2, 4), procs(2, max_procs), lan_us(100, 400),
    wan_ms(2, 10), wan_mbit(100, 500);
  std::string text = "topology random\nsend_overhead 20us\ndefault nic 1Gbit\n";
  int n = clusters(rng);
  for (int c = 0; c < n; ++c)
    text += "group C" + std::to_string(c) + " procs " + std::to_string(procs(rng)) + " rtt " +
            std::to_string(lan_us(rng)) + "us\n";
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      text += "link C" + std::to_string(a) + " C" + std::to_string(b) + " rtt " +
              std::to_string(wan_ms(rng)) + "ms bw " + std::to_string(wan_mbit(rng)) + "Mbit\n";
  auto t = parse_topology(text);
  if (!t)
    throw std::runtime_error(t.err().to_string());
  return *t;
}

} // namespace banyan::test

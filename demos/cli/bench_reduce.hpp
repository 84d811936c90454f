#pragma once
// `banyan bench reduce`: reduction completion time against array size (the paper's Fig. 8).
//
//   banyan bench reduce --topology T [--seed S] [--clock virtual|real] [--sizes 4,256,16K,...]
//                       [--algorithms dynamic,mpich,magpie] [--segment 16K]
//                       [--json F] [--plot F.svg]
//
// Once banyan's trees have formed, every processor (one vnode each) contributes an int32
// array and the arrays are summed into vnode 0, for sizes 4 B to 4 MiB, one reduction at a
// time, with each algorithm through the same reduction engine (core/reduce) on the same
// emulated network:
//   dynamic  banyan's adaptive trees (latency tree below 256 KiB, bandwidth tree above);
//            arrays longer than --segment (16 KiB) are cut into segments pipelined up
//            the tree
//   mpich    MPICH's binomial tree rooted at processor 0
//   magpie   flat tree between cluster coordinators, binomial inside clusters
// Every result is checked against the sum computed directly. completion_ms runs from the
// moment the reduction starts (at every processor at once) to the result at the root.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "banyan/core/reduce.hpp"
#include "bench_common.hpp"

namespace banyan::cli {

struct bench_reduce_options {
  bench_options common; ///< --topology, --seed, --clock, --json, --plot, --quiet
  std::vector<std::string> sizes;      ///< "4", "16K", "4M": empty for the default set
  std::vector<std::string> algorithms; ///< empty: dynamic, mpich, magpie
  std::string segment;                 ///< dynamic: segment size ("16K"; "0": none); empty: default
};

/// One reduction measured.
struct reduce_result_row {
  std::string algorithm;
  std::size_t size = 0; ///< bytes per vnode
  double completion_ms = 0;
  bool complete = false; ///< a result arrived within the limit
  bool correct = false;  ///< ... covering every vnode once, with the true sum
};

/// Contributions of an int32 sum: vnode v's element i is a small integer that differs
/// per vnode, element and `salt` (a reduction's number).
contribution_fn int32_contributions(std::size_t count, std::uint64_t salt);

/// The sum of `int32_contributions` over vnodes [0, n), computed directly (wrapping).
std::vector<std::uint8_t> int32_true_sum(vnode_id n, std::size_t count, std::uint64_t salt);

/// Whether `rec` is what an exact reduction over vnodes [0, vnodes) leaves: one result and
/// no problem reported, every vnode's contribution taken exactly once, the result covering
/// them all, with the value `want`.
bool reduced_exactly_once(const actors::reduction_record& rec, std::size_t vnodes,
                          const std::vector<std::uint8_t>& want);

/// Runs the benchmark: 0 on success, 1 when a reduction did not complete or was wrong,
/// 2 on bad input.
int run_bench_reduce(const bench_reduce_options& opt);

/// Registers `reduce` under `bench`; when it is used, parsing sets `action`.
void add_bench_reduce_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

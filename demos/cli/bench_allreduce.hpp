#pragma once
// `banyan bench allreduce`: allreduce and barrier completion time, banyan's adaptive
// trees against MPICH's algorithms, side by side on the same emulated network.
//
//   banyan bench allreduce --topology T [--seed S] [--clock virtual|real]
//                          [--sizes 4,256,16K,...] [--algorithms dynamic,recursive_doubling,ring]
//                          [--json F] [--plot F.svg]
//
// Once banyan's trees have formed, every processor (one vnode each) contributes an int32
// array and every vnode receives the sum, one allreduce at a time, for each size and
// algorithm:
//   dynamic             banyan's allreduce (core/allreduce.hpp): the reduction up the
//                       latency tree (bandwidth tree from 256 KiB) to vnode 0's owner,
//                       then the result broadcast down the tree the model picks
//   recursive_doubling  MPICH's recursive-doubling allreduce over ranks 0..n-1
//   ring                MPICH's ring allreduce (reduce-scatter, then allgather)
// then a barrier each way: banyan's (an allreduce of nothing) and MPICH's dissemination
// barrier. Every vnode's result is checked against the sum computed directly (each vnode
// counted and delivered once). completion_ms runs from the start (at every processor at
// once) to the last vnode's delivery.

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace banyan::cli {

struct bench_allreduce_options {
  bench_options common;
  std::vector<std::string> sizes;      ///< empty: the default set
  std::vector<std::string> algorithms; ///< empty: all three
};

/// Runs the benchmark: 0 on success, 1 when an operation did not complete or was wrong,
/// 2 on bad input.
int run_bench_allreduce(const bench_allreduce_options& opt);

/// Registers `allreduce` under `bench`; when it is used, parsing sets `action`.
void add_bench_allreduce_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

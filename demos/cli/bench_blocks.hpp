#pragma once
// `banyan bench blocks`: the per-vnode-block collectives against block size.
//
//   banyan bench blocks --topology T [--seed S] [--sizes 8,1K,16K]
//                       [--algorithms gather,scatter,allgather,ring] [--json F]
//
// Once banyan's trees have formed (one vnode per processor), one operation at a time on
// the same emulated network, each checked (every block once, the right bytes):
//   gather     every vnode's block to vnode 0 over the adaptive trees (core/gather)
//   scatter    vnode 0's owner gives every vnode its block (core/scatter)
//   allgather  every vnode gets every block: a gather to vnode 0, then a broadcast from
//              its owner down the same trees (core/allgather)
//   ring       the same by MPICH's ring allgather over processors 0..k-1 (the baseline)
// completion_ms runs from the start (at every processor at once) to the result at the
// root (gather) or the last delivery (scatter, allgather, ring).

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"

namespace banyan::cli {

struct bench_blocks_options {
  bench_options common;
  std::vector<std::string> sizes;      ///< bytes per vnode; empty: the default set
  std::vector<std::string> algorithms; ///< empty: all four
};

/// 0 on success, 1 when an operation did not complete or was wrong, 2 on bad input.
int run_bench_blocks(const bench_blocks_options& opt);

void add_bench_blocks_command(CLI::App& bench, std::function<int()>& action);

} // namespace banyan::cli

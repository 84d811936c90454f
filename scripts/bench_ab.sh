#!/usr/bin/env bash
# Side by side: two or more banyan binaries (e.g. main's and a branch's) on one workload
# of `banyan cluster`, run alternately PAIRS times each, so that they share the machine's
# load; prints, per binary, the median over its runs of the acked time (each run is
# itself the median over its REPS broadcasts) and every run's figure. For changes too
# small for the 5-repetition medians of scripts/bench_mpi.sh to separate (the cluster
# rows of docs/decisions.md).
#
#   scripts/bench_ab.sh [--procs 4] [--pairs 6] [--workload latency|bandwidth]
#                       [--reps 300] [--size 67108864] [--node-args "ARGS"] BINARY...
#
# A BINARY written BINARY::ARGS runs with ARGS added to its nodes' arguments, so that one
# binary can be compared with itself in two settings (e.g. "banyan::--plaintext" banyan).
set -euo pipefail

procs=4
pairs=6
workload=latency
reps=
size=$((64 << 20))
node_args=
bins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --procs) procs=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --node-args) node_args=$2; shift 2 ;;
    -*) echo "bench_ab.sh: unknown option \"$1\"" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -ge 1 ] || { echo "bench_ab.sh: name at least one banyan binary" >&2; exit 2; }
case "$workload" in
  latency) reps=${reps:-300}; extra=() ;;
  bandwidth) reps=${reps:-5}; extra=(--sizes "$size") ;;
  *) echo "bench_ab.sh: --workload latency or bandwidth" >&2; exit 2 ;;
esac

declare -A runs
for _ in $(seq "$pairs"); do
  for b in "${bins[@]}"; do
    exe=${b%%::*}
    args=$node_args
    [ "$exe" = "$b" ] || args="$node_args ${b#*::}"
    # The CLI's summary line: "bcast ... acked X ms".
    v=$("$exe" cluster --procs "$procs" --workload "$workload" --reps "$reps" "${extra[@]}" \
          --node-args "$args" 2>&1 | sed -n 's/^bcast .*acked \([0-9.]*\) ms.*/\1/p' | tail -1)
    [ -n "$v" ] || { echo "bench_ab.sh: no result from $b" >&2; exit 1; }
    runs[$b]="${runs[$b]:-} $v"
  done
done
echo "$workload, $procs processes, $reps broadcasts per run, node args \"$node_args\"; acked ms:"
for b in "${bins[@]}"; do
  python3 - "$b" ${runs[$b]} <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[2:]]
print(f"{sys.argv[1]}: median {statistics.median(v):.3f} (runs {' '.join(f'{x:.3f}' for x in v)})")
PY
done

#!/usr/bin/env bash
# `banyan bench churn --trace FILE` (from 0): the trace opens with a `formed` line per
# processor and tree of the origin, so that replaying its tree lines gives whole trees:
# here processor 0's bandwidth tree, replayed to the end of the run, must reach the root
# from every processor (all rejoined by then), without a cycle.
#   churn_trace_test.sh PATH/TO/banyan
set -euo pipefail
banyan=$1
work=$(mktemp -d /tmp/banyan-churn-trace-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$banyan" bench churn --topology tiny-2c8 --seed 2 --leave-at 1000 --rejoin-at 2000 \
  --duration 3000 --size 256K --window 4 -q --trace "$work/t.trace" > "$work/out.txt"
formed=$(grep -c '^T 0 [0-9]* formed 0 [LB] -1 ' "$work/t.trace")
[ "$formed" -eq 16 ] || { echo "$formed formed lines, not 16 (8 processors x 2 trees)" >&2; exit 1; }
grep -q '^E [0-9.]* leave$' "$work/t.trace" || { echo "no leave event in the trace" >&2; exit 1; }
grep -q '^E [0-9.]* rejoin$' "$work/t.trace" || { echo "no rejoin event in the trace" >&2; exit 1; }
awk '
  $1 == "T" && $5 == 0 && $6 == "B" { parent[$3] = $8 }
  END {
    if (parent[0] != -1) { print "the root has parent " parent[0] > "/dev/stderr"; exit 1 }
    for (p = 1; p < 8; ++p) {
      q = p; hops = 0
      while (q != 0 && (q in parent) && parent[q] != -1 && hops < 8) { q = parent[q]; ++hops }
      if (q != 0) { print "processor " p " does not reach the root in the replayed tree" > "/dev/stderr"; exit 1 }
    }
  }' "$work/t.trace"
echo "trace: 16 formed lines; the replayed bandwidth tree of 0 spans all 8 processors"

#!/usr/bin/env bash
# `banyan bench churn --seeds ... --jobs N` runs the seeds on N threads: every seed's run
# (its JSON, wall time aside) and the summary must be those of --jobs 1, in seed order.
#   churn_jobs_test.sh PATH/TO/banyan
set -euo pipefail
banyan=$1
work=$(mktemp -d /tmp/banyan-churn-jobs-XXXXXX)
trap 'rm -rf "$work"' EXIT
args=(bench churn --topology tiny-2c8 --seeds 3,1,4,2 --leave-at 1000 --rejoin-at 2000
      --duration 3000 --size 256K --window 4 -q)
"$banyan" "${args[@]}" --jobs 1 --json "$work/one.json" > "$work/one.txt"
"$banyan" "${args[@]}" --jobs 3 --json "$work/three.json" > "$work/three.txt"
for f in one three; do
  grep -v '"wall_s"' "$work/$f.json" > "$work/$f.cmp"
  tail -n 1 "$work/$f.txt" > "$work/$f.summary"
done
grep -q '"runs"' "$work/one.cmp" || { echo "no runs in the JSON" >&2; exit 1; }
[ "$(grep -c '"seed":' "$work/one.cmp")" -ge 4 ] || { echo "fewer than 4 runs" >&2; exit 1; }
diff "$work/one.cmp" "$work/three.cmp" >&2 || { echo "--jobs 3 differs from --jobs 1 (JSON)" >&2; exit 1; }
diff "$work/one.summary" "$work/three.summary" >&2 || { echo "--jobs 3 differs from --jobs 1 (summary)" >&2; exit 1; }
# Seed order as given, not as finished.
order=$(awk 'NR > 2 && $1 ~ /^[0-9]+$/ { printf "%s,", $1 }' "$work/three.txt")
[ "$order" = "3,1,4,2," ] || { echo "rows in order $order, not 3,1,4,2" >&2; exit 1; }
echo "churn --jobs 3 = --jobs 1 over seeds 3,1,4,2"

#!/usr/bin/env bash
# Tree formation and healing on the built-in topologies, banyan's rules next to the
# paper's, on the EMULATED network in virtual time. Writes JSON to out/bench/trees/
# and prints one line per run. Usage: scripts/bench_trees.sh [BUILD_DIR] [TOPOLOGIES...]
set -euo pipefail
build=${1:-build}
shift || true
topos=("$@")
[ ${#topos[@]} -gt 0 ] || topos=(paper-3c201 paper-4c137 paper-3c128 paper-4c160 mpichg-3level)
bin="$build/demos/cli/banyan"
out=out/bench/trees
mkdir -p "$out"
printf "%-14s %-7s %5s %9s %7s %9s %8s %9s %8s %10s %10s\n" topology rules procs conv_ms probes \
  lat_wan lat_dep bw_wan bw_dep leave_ms rejoin_ms
for t in "${topos[@]}"; do
  for rules in banyan paper; do
    j="$out/$t-$rules.json"
    "$bin" sim trees --topology "$t" --seed 1 --rules "$rules" -q --json "$j" \
      --leave-half-at 20000 --rejoin-at 40000 >/dev/null || true
    python3 - "$j" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = {e["event"]: e["restabilize_ms"] for e in d.get("events", [])}
print("%-14s %-7s %5d %9.0f %7.1f %9.2f %8.2f %9.2f %8.2f %10.0f %10.0f" % (
  d["topology"], d["rules"], d["procs"], d["converged_ms"], d["probes_per_proc"],
  d["latency"]["wan_edges_mean"], d["latency"]["depth_mean"],
  d["bandwidth"]["wan_edges_mean"], d["bandwidth"]["depth_mean"],
  ev.get("leave", -1), ev.get("rejoin", -1)))
PY
  done
done

#!/usr/bin/env bash
# Compares what two builds of banyan compute on the emulated network in virtual time:
# a change that should not alter behaviour (a refactoring) must leave every JSON output
# identical, since virtual time is deterministic. Wall-clock fields are dropped first.
#
#   scripts/compare_builds.sh record BUILD_DIR OUT_DIR [--quick]   run and keep the outputs
#   scripts/compare_builds.sh diff OUT_A OUT_B                      compare two recorded sets
#   scripts/compare_builds.sh BUILD_A BUILD_B [--quick]             both, into a temp folder
#
# The runs: `sim trees` on the four paper grids (with a leave and a rejoin), with banyan's
# rules and the paper's; `bench bcast-latency` (paper-3c201), `bench bcast-bandwidth`
# (paper-4c137), `bench reduce` (paper-3c128) and `bench churn --seeds 1-30` (paper-4c160).
# --quick: sim trees on paper-3c128 only, churn on seeds 1-3 (for a first look).
# Prints one line per output, IDENTICAL or DIFFERENT (with the first differing keys), and
# exits 1 if any differs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

record() {
  local build=$1 out=$2 quick=${3:-}
  local bin
  bin=$(cd "$build" && pwd)/demos/cli/banyan
  [ -x "$bin" ] || { echo "compare_builds: no banyan binary at $bin" >&2; exit 2; }
  mkdir -p "$out"
  local grids=(paper-3c201 paper-4c137 paper-3c128 paper-4c160) seeds=1-30
  if [ "$quick" = --quick ]; then grids=(paper-3c128); seeds=1-3; fi
  local step=0 total=$(( ${#grids[@]} * 2 + 4 ))
  say() { step=$((step + 1)); echo "[$step/$total] $*" >&2; }
  for g in "${grids[@]}"; do
    for rules in banyan paper; do
      say "sim trees $g --rules $rules"
      "$bin" sim trees --topology "$g" --seed 1 --rules "$rules" -q --json "$out/sim-$g-$rules.json" \
        --leave-half-at 20000 --rejoin-at 40000 >/dev/null
    done
  done
  say "bench bcast-latency paper-3c201"
  "$bin" bench bcast-latency --topology paper-3c201 -q --json "$out/bcast-latency.json" >/dev/null
  say "bench bcast-bandwidth paper-4c137"
  "$bin" bench bcast-bandwidth --topology paper-4c137 -q --json "$out/bcast-bandwidth.json" >/dev/null
  say "bench reduce paper-3c128"
  "$bin" bench reduce --topology paper-3c128 -q --json "$out/reduce.json" >/dev/null
  say "bench churn paper-4c160 --seeds $seeds"
  "$bin" bench churn --topology paper-4c160 --seeds "$seeds" --jobs 2 -q --json "$out/churn.json" >/dev/null
}

diff_sets() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
def strip(x):
    # wall-clock figures differ from run to run; everything else is virtual time
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not k.startswith("wall")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
def first_diff(x, y, path=""):
    if type(x) != type(y):
        return path or "/"
    if isinstance(x, dict):
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                return f"{path}/{k}"
            d = first_diff(x[k], y[k], f"{path}/{k}")
            if d: return d
        return None
    if isinstance(x, list):
        if len(x) != len(y):
            return f"{path}[len {len(x)} vs {len(y)}]"
        for i, (u, v) in enumerate(zip(x, y)):
            d = first_diff(u, v, f"{path}[{i}]")
            if d: return d
        return None
    return None if x == y else f"{path}: {x!r} vs {y!r}"
names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
bad = 0
for n in names:
    if not n.endswith(".json"): continue
    pa, pb = os.path.join(a, n), os.path.join(b, n)
    if not (os.path.exists(pa) and os.path.exists(pb)):
        print(f"{n:40s} MISSING in {'A' if not os.path.exists(pa) else 'B'}"); bad += 1; continue
    d = first_diff(strip(json.load(open(pa))), strip(json.load(open(pb))))
    print(f"{n:40s} {'IDENTICAL' if d is None else 'DIFFERENT at ' + d}")
    bad += d is not None
print(f"{len([n for n in names if n.endswith('.json')]) - bad} identical, {bad} different")
sys.exit(1 if bad else 0)
PY
}

case "${1:-}" in
  record) record "$2" "$3" "${4:-}" ;;
  diff) diff_sets "$2" "$3" ;;
  ""|-h|--help) sed -n 2,16p "$0" ;;
  *)
    tmp=$(mktemp -d)
    record "$1" "$tmp/a" "${3:-}"
    record "$2" "$tmp/b" "${3:-}"
    diff_sets "$tmp/a" "$tmp/b"
    ;;
esac

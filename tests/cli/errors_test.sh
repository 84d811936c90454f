#!/usr/bin/env bash
# The `banyan` tool's error contract, for a few bad invocations of several subcommands:
# one line "banyan <cmd>: <message>" on stderr, exit 2 for a usage error and 1 for a
# failure while running; `--version` and typed help.
# Usage: errors_test.sh BANYAN
set -uo pipefail
banyan=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

# expect CODE PATTERN CMD...: exit status CODE, and stderr is one line matching PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 2
  "$banyan" "$@" >"$scratch/out" 2>"$scratch/err"
  local got=$?
  local lines
  lines=$(wc -l <"$scratch/err")
  if [ "$got" != "$code" ] || [ "$lines" != 1 ] || ! grep -Eq -- "$pattern" "$scratch/err"; then
    echo "FAIL: banyan $*: exit $got (want $code), stderr ($lines lines, want 1 matching '$pattern'):" >&2
    sed 's/^/  | /' "$scratch/err" >&2
    failures=$((failures + 1))
  fi
}

echo secret >"$scratch/secret"
node=(node --listen 127.0.0.1:0 --secret-file "$scratch/secret")

expect 2 '^banyan: a subcommand is required \(see banyan --help\)$'
expect 2 '^banyan: unknown subcommand "nosuch" \(see banyan --help\)$' nosuch
expect 2 '^banyan sim trees: --topology is required'         sim trees
expect 2 '^banyan sim trees: --clock: .*'                    sim trees --topology tiny-2c8 --clock sundial
expect 2 '^banyan topology: not_found: '                     topology no-such-topology
expect 2 '^banyan node: bad --id "x" \(want 0-'              "${node[@]}" --id x
expect 2 '^banyan node: --id is required$'                   "${node[@]}"
expect 2 '^banyan node: unexpected argument "--bogus"$'      "${node[@]}" --id 1 --bogus
expect 2 '^banyan node: bad --join "nowhere" '               "${node[@]}" --id 1 --join nowhere
expect 2 '^banyan node: cannot read --join-file '            "${node[@]}" --id 1 --join-file "$scratch/none"
expect 2 '^banyan node: bad --join-timeout "soon" '          "${node[@]}" --id 1 --join 127.0.0.1:1 --join-timeout soon
BANYAN_JOIN="1@127.0.0.1:7000, :9" \
expect 2 '^banyan node: bad BANYAN_JOIN: ":9" '              "${node[@]}" --id 1
expect 2 '^banyan node: bad --log-level "loud" '             "${node[@]}" --id 1 --log-level loud
expect 2 '^banyan node: bad --log-format "xml" '             "${node[@]}" --id 1 --log-format xml
expect 2 '^banyan node: -v means --log-level debug: '        "${node[@]}" --id 1 -v --log-level warn
expect 2 '^banyan node: bad --metrics "localhost:9464" '     "${node[@]}" --id 1 --metrics localhost:9464
expect 2 '^banyan node: bad --metrics "127.0.0.1" '          "${node[@]}" --id 1 --metrics 127.0.0.1
expect 2 '^banyan bench: a subcommand is required \(see banyan bench --help\)$' bench
expect 2 '^banyan bench churn: --tree-rule: bogus not in \{model,threshold\}' bench churn --topology tiny-2c8 --tree-rule bogus
expect 2 '^banyan sim: unknown subcommand "forest" '         sim forest
expect 1 '^banyan health: cannot read '                      health "$scratch/none.json"
expect 2 '^banyan health: file is required'                  health
expect 2 '^banyan cluster: unknown workload "allgathr" '      cluster --procs 3 --workload allreduce,allgathr
expect 2 '^banyan cluster: --allreduce-sizes: 6 is not a whole number of int32$' \
  cluster --procs 3 --allreduce-sizes 4,6
expect 2 '^banyan cluster: --allgather-sizes: 1000 bytes per process do not split ' \
  cluster --procs 3 --vnodes-per-proc 3 --allgather-sizes 1000

# A join nobody answers: retried until --join-timeout (each attempt logs a join_failed
# event), then a runtime failure (exit 1) said once, "cannot join: ..." with no repeated
# prefix anywhere; its status file then fails `banyan health`.
start=$(date +%s%N)
"$banyan" "${node[@]}" --id 1 --join localhost:1 --join-timeout 2 \
  --json-status "$scratch/status.json" >"$scratch/out" 2>"$scratch/err"
got=$?
took=$((($(date +%s%N) - start) / 1000000))
if [ "$got" != 1 ] || [ "$(grep -c '^node 1: error: cannot join: ' "$scratch/out")" != 1 ] \
   || [ "$(grep -c '^node 1: warn: join_failed: cannot join: ' "$scratch/out")" -lt 2 ] \
   || grep -q 'cannot join: cannot join' "$scratch/out" "$scratch/status.json" \
   || [ "$took" -lt 1000 ] || [ "$took" -gt 30000 ]; then
  # Attempts at 0, 0.5 and 1.5 s; the next would come after the 2 s deadline.
  echo "FAIL: a join nobody answers: exit $got (want 1) after ${took} ms (want 1-30 s):" >&2
  sed 's/^/  | /' "$scratch/out" "$scratch/err" >&2
  failures=$((failures + 1))
fi
expect 1 '^banyan health: node 1 failed: .*cannot join'      health "$scratch/status.json"

# --version, and help that names each argument's kind.
out=$("$banyan" --version)
want=$(sed -n 's/^project(banyan VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
[ "$out" = "banyan $want" ] || { echo "FAIL: banyan --version says '$out', want 'banyan $want'" >&2; failures=$((failures + 1)); }
help=$("$banyan" node --help)
for kind in '--id UINT' '--threads UINT' '--leave-timeout MS' '--join-timeout SECONDS' \
            '--busy-poll-us MICROSECONDS' '--segment-kib KIB' '--secret-file FILE' \
            '--metrics IP:PORT' '--log-level LEVEL' '--log-format FORMAT'; do
  grep -Eq -- "${kind% *} +${kind#* }" <<<"$help" \
    || { echo "FAIL: banyan node --help does not show '$kind'" >&2; failures=$((failures + 1)); }
done
if grep -q TEXT <<<"$help"; then
  echo "FAIL: banyan node --help still types an argument as TEXT:" >&2
  grep TEXT <<<"$help" >&2
  failures=$((failures + 1))
fi

[ "$failures" = 0 ] && echo "errors_test: all checks passed"
[ "$failures" = 0 ]

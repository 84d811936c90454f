#!/usr/bin/env bash
# Crash recovery over TCP on loopback, real `banyan node` processes: how long from a
# crash until the successor has adopted the dead node's vnodes.
#   kill:   node 2 is SIGKILLed (its connections close; reconnecting is refused)
#   silent: node 1 is SIGSTOPped (connections stay open, nothing answers): only the
#           crash_timeout watch of its predecessor can find it
#   refute: node 1 is then SIGCONTed: it hears it was buried and gives its vnodes up
# Times are wall clock, polled every 10 ms from the nodes' logs (so +-10 ms).
# Prints one line and writes JSON to out/bench/crash.json.
# Usage: scripts/bench_crash.sh [BUILD_DIR] [CRASH_TIMEOUT_MS] [REPS]
set -euo pipefail
build=${1:-build}
timeout_ms=${2:-2000}
reps=${3:-3}
bin="$build/demos/cli/banyan"
out=out/bench
mkdir -p "$out"
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
echo "crash-recovery-bench" > "$dir/secret"
now_ms() { date +%s%3N; }
# wait_for FILE PATTERN LIMIT_MS: the time (ms) the pattern showed up, or exit 1.
wait_for() {
  local deadline=$(( $(now_ms) + $3 ))
  while ! grep -q "$2" "$1" 2>/dev/null; do
    [ "$(now_ms)" -lt "$deadline" ] || { echo "no \"$2\" in $1:" >&2; cat "$1" >&2; return 1; }
    sleep 0.01
  done
  now_ms
}
results=()
for rep in $(seq 1 "$reps"); do
  pids=()
  rm -f "$dir"/*.log "$dir"/*.json
  "$bin" node --id 0 --listen 127.0.0.1:0 --vnodes 0-1023 --secret-file "$dir/secret" \
    --crash-timeout "$timeout_ms" --json-status "$dir/s0.json" > "$dir/n0.log" 2>&1 &
  pids+=($!); disown
  wait_for "$dir/s0.json" '"member"' 10000 > /dev/null
  port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"].split(":")[1])' "$dir/s0.json")
  for k in 1 2 3; do
    "$bin" node --id $k --listen 127.0.0.1:0 --join "0@127.0.0.1:$port" --secret-file "$dir/secret" \
      --crash-timeout "$timeout_ms" --json-status "$dir/s$k.json" > "$dir/n$k.log" 2>&1 &
    pids+=($!); disown
    wait_for "$dir/n$k.log" 'joined' 20000 > /dev/null
  done
  sleep 3 # trees form, vnode shares settle
  t0=$(now_ms)
  kill -KILL "${pids[2]}"
  t_kill=$(wait_for "$dir/n3.log" 'adopted from crashed processor 2' 30000)
  t1=$(now_ms)
  kill -STOP "${pids[1]}"
  t_silent=$(wait_for "$dir/n3.log" 'adopted from crashed processor 1' 60000)
  t2=$(now_ms)
  kill -CONT "${pids[1]}"
  t_refute=$(wait_for "$dir/n1.log" 'vnodes_disowned' 30000)
  results+=("$((t_kill - t0)) $((t_silent - t1)) $((t_refute - t2))")
  if [ "$rep" = "$reps" ]; then for f in "$dir"/n*.log; do cp "$f" "$out/crash-$(basename "$f")"; done; fi # the last run's logs
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  sleep 0.2
done
python3 - "$timeout_ms" "$out/crash.json" "${results[@]}" <<'PY'
import json, statistics, sys
timeout, path, rows = int(sys.argv[1]), sys.argv[2], [list(map(int, r.split())) for r in sys.argv[3:]]
d = {"crash_timeout_ms": timeout, "procs": 4, "network": "TCP loopback",
     "runs": [{"kill_to_adopted_ms": a, "silent_to_adopted_ms": b, "cont_to_disowned_ms": c} for a, b, c in rows]}
for k in ("kill_to_adopted_ms", "silent_to_adopted_ms", "cont_to_disowned_ms"):
    d[k + "_median"] = statistics.median(r[k] for r in d["runs"])
json.dump(d, open(path, "w"), indent=1)
print("crash_timeout %d ms, 4 procs, median of %d: SIGKILL -> adopted %d ms, SIGSTOP -> adopted %d ms, SIGCONT -> disowned %d ms"
      % (timeout, len(rows), d["kill_to_adopted_ms_median"], d["silent_to_adopted_ms_median"], d["cont_to_disowned_ms_median"]))
PY

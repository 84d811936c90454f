#!/usr/bin/env bash
# banyan and Open MPI side by side, the same number of processes on loopback, timed the
# same way (the paper's method: barrier, the root takes a timestamp, the operation, every
# other process sends the root an empty ack, the time ends when the root has them all):
# 1-byte and 64 MiB broadcast and a 4 MiB int32 sum reduction, for 4, 8 and 16 processes,
# median of 3. Also the barrier-plus-acks cost alone. Prints ratios, writes JSON.
#
#   scripts/bench_mpi.sh [--banyan PATH] [--out FILE.json] [--procs "4 8 16"] [--reps 3]
#                        [--node-args "ARGS"]   (extra arguments for every banyan node,
#                                                e.g. "--busy-poll-us 50000")
#
# Installs openmpi-bin and libopenmpi-dev with apt-get when mpicc/mpirun are missing.
# Open MPI runs TCP-only and yields when oversubscribed (see issue 4); banyan runs through
# `banyan cluster` (acks on). See docs/benchmarks.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
banyan=${BANYAN:-}
out=bench_mpi.json
procs="4 8 16"
reps=3
node_args=
small=1
large=$((64 << 20))
reduce=$((4 << 20))
while [ $# -gt 0 ]; do
  case "$1" in
    --banyan) banyan=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --node-args) node_args=$2; shift 2 ;;
    *) echo "bench_mpi.sh: unknown argument \"$1\"" >&2; exit 2 ;;
  esac
done
if [ -z "$banyan" ]; then
  for b in "$root"/build/demos/cli/banyan "$root"/build-*/demos/cli/banyan; do
    [ -x "$b" ] && { banyan=$b; break; }
  done
fi
[ -n "$banyan" ] && [ -x "$banyan" ] || { echo "bench_mpi.sh: no banyan binary (build it, or --banyan PATH)" >&2; exit 2; }

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "bench_mpi.sh: installing openmpi-bin libopenmpi-dev" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev >&2
fi

work=$(mktemp -d /tmp/banyan-bench-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -Wall -Wextra -o "$work/bench" "$root/bench/mpi/bench.c"

mpirun_flags=(--allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self
              --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1)

for n in $procs; do
  echo "bench_mpi.sh: Open MPI, $n processes" >&2
  timeout 600 mpirun "${mpirun_flags[@]}" -np "$n" "$work/bench" "$reps" "$small" "$large" "$reduce" \
    > "$work/mpi-$n.jsonl"
  echo "bench_mpi.sh: banyan, $n processes" >&2
  # Bandwidth sizes: the 1-byte one is the latency workload's.
  timeout 900 "$banyan" cluster --procs "$n" --workload overhead,latency,bandwidth,reduce \
    --reps "$reps" --sizes "$large" --reduce-sizes "$reduce" --node-args "$node_args" \
    --json "$work/banyan-$n.json" >&2
done

python3 - "$work" "$out" "$procs" "$small" "$large" "$reduce" "$node_args" <<'PY'
import json, sys
work, out, procs, small, large, reduce = sys.argv[1], sys.argv[2], sys.argv[3].split(), *map(int, sys.argv[4:7])
node_args = sys.argv[7]
rows = []
for n in map(int, procs):
    mpi = [json.loads(l) for l in open(f"{work}/mpi-{n}.jsonl") if l.strip()]
    b = json.load(open(f"{work}/banyan-{n}.json"))
    def m(op, size):
        for r in mpi:
            if r["op"] == op and r["size"] == size:
                return r
        raise SystemExit(f"no Open MPI result for {op} {size} at {n} processes")
    lat = b["bcast-latency"]["results"][0]
    bw = next(r for r in b["bcast-bandwidth"]["results"] if r["size"] == large)
    red = next(r for r in b["reduce"]["results"] if r["size"] == reduce)
    ov = b["overhead"]["overhead_ms"]
    for name, size, mr, bms, bcompl, ok in [
        ("bcast", small, m("bcast", small), lat["acked_ms"], lat["completion_ms"], lat["complete"]),
        ("bcast", large, m("bcast", large), bw["acked_ms"], bw["completion_ms"], bw["complete"]),
        ("reduce", reduce, m("reduce", reduce), red["completion_ms"], red["completion_ms"], red["ok"]),
    ]:
        rows.append({
            "procs": n, "op": name, "size": size,
            "openmpi_ms": mr["median_us"] / 1000, "openmpi_runs_ms": [x / 1000 for x in mr["runs_us"]],
            "openmpi_overhead_ms": m("overhead", 0)["median_us"] / 1000, "openmpi_ok": mr["ok"],
            "banyan_ms": bms, "banyan_last_delivery_ms": bcompl, "banyan_overhead_ms": ov, "banyan_ok": ok,
            "ratio": bms / (mr["median_us"] / 1000) if mr["median_us"] > 0 else None,
        })
print(f"{'procs':>5} {'op':>7} {'size':>9} {'openmpi_ms':>11} {'banyan_ms':>10} {'ratio':>7} "
      f"{'mpi_ovh_ms':>10} {'byn_ovh_ms':>10} {'byn_last_ms':>11}")
for r in rows:
    print(f"{r['procs']:>5} {r['op']:>7} {r['size']:>9} {r['openmpi_ms']:>11.3f} {r['banyan_ms']:>10.3f} "
          f"{r['ratio']:>7.2f} {r['openmpi_overhead_ms']:>10.3f} {r['banyan_overhead_ms']:>10.3f} "
          f"{r['banyan_last_delivery_ms']:>11.3f}" + ("" if r["openmpi_ok"] and r["banyan_ok"] else "  WRONG DATA"))
print("ratio = banyan / Open MPI time (below 1: banyan faster). Targets: 64 MiB bcast ratio <= 1, "
      "1-byte bcast ratio <= 1.5. banyan reduce is timed from the commands to the result (no acks).")
json.dump({"method": "median of runs; barrier (Open MPI) / command (banyan), root timestamp, op, empty acks",
           "banyan_node_args": node_args, "rows": rows}, open(out, "w"), indent=2)
print(f"wrote {out}")
PY

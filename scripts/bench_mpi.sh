#!/usr/bin/env bash
# banyan and Open MPI side by side, the same number of processes on loopback, timed the
# same way (the paper's method: barrier, the root takes a timestamp, the operation, every
# other process sends the root an empty ack, the time ends when the root has them all):
# 1-byte and 64 MiB broadcast, a 4 MiB int32 sum reduction, 4 B and 4 MiB int32 sum
# allreduces, a barrier and a 1 KiB-per-process allgather, for 4, 8 and 16 processes,
# median of 3. Also the barrier-plus-acks cost alone. Prints ratios, writes JSON.
#
#   scripts/bench_mpi.sh [--banyan PATH] [--out FILE.json] [--plot FILE.svg] [--procs "4 8 16"]
#                        [--reps 3] [--rounds 1] [--ops bcast,reduce,allreduce,barrier,allgather]
#                        [--node-args "ARGS"]   (extra arguments for every banyan node,
#                                                e.g. "--busy-poll-us 50000")
#
# --ops chooses the operations (default all of them): bcast (1 byte and 64 MiB), reduce,
# allreduce (4 B and 4 MiB), barrier, allgather (1 KiB per process).
# --rounds R runs Open MPI then banyan R times per process count (alternating, so that
# both see the same load over time); each round gives a ratio, the table shows every
# round and the median ratio over the rounds.
#
# The allreduce, barrier and allgather: every process takes part and has the result, so
# two times are printed. "acked": Open MPI's time the paper's way (above); "last": the
# last process's return from the operation, after the root's t0 (CLOCK_MONOTONIC, one
# clock on one host), no acks. banyan (`banyan cluster`) is timed from the driver writing
# the commands to the last process's result line, no acks: ratio = banyan / Open MPI
# acked, ratio_last = banyan / Open MPI last. byn_fstart: banyan from the last process's
# own start of the operation (it read its command) to the last result: the commands'
# delivery through the pipes left out. byn_sync: each of them again, started by every
# banyan process right after a banyan barrier of its own (`synced`, docs/cluster.md),
# timed from the root's start to the last process's result, as Open MPI's are timed
# from rank 0's timestamp after MPI_Barrier: ratio_synced = byn_sync / Open MPI acked,
# ratio_synced_last = byn_sync / Open MPI last (the one that times the same span).
#
# --plot draws the times side by side: one panel per operation, banyan's and Open MPI's
# bars per process count, and the ratio above each pair.
#
# Installs openmpi-bin and libopenmpi-dev with apt-get when mpicc/mpirun are missing.
# Open MPI runs TCP-only and yields when oversubscribed (see issue 4); banyan runs through
# `banyan cluster` (acks on). Figures: docs/results.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
banyan=${BANYAN:-}
out=bench_mpi.json
plot=
procs="4 8 16"
reps=3
node_args=
small=1
large=$((64 << 20))
reduce=$((4 << 20))
ops=bcast,reduce,allreduce,barrier,allgather
rounds=1
allreduce_sizes=4,$((4 << 20))
allgather=1024
while [ $# -gt 0 ]; do
  case "$1" in
    --banyan) banyan=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --node-args) node_args=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "bench_mpi.sh: unknown argument \"$1\"" >&2; exit 2 ;;
  esac
done
workloads=overhead
IFS=, read -r -a op_list <<< "$ops"
[ ${#op_list[@]} -gt 0 ] || { echo "bench_mpi.sh: --ops is empty" >&2; exit 2; }
for op in "${op_list[@]}"; do
  case "$op" in
    bcast) workloads+=,latency,bandwidth ;;
    reduce|allreduce|barrier|allgather) workloads+=,$op ;;
    *) echo "bench_mpi.sh: unknown operation \"$op\" (bcast, reduce, allreduce, barrier, allgather)" >&2; exit 2 ;;
  esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "bench_mpi.sh: --rounds must be a positive number" >&2; exit 2 ;; esac
if [ -z "$banyan" ]; then
  for b in "$root"/build/demos/cli/banyan "$root"/build-*/demos/cli/banyan; do
    [ -x "$b" ] && { banyan=$b; break; }
  done
fi
[ -n "$banyan" ] && [ -x "$banyan" ] || { echo "bench_mpi.sh: no banyan binary (build it, or --banyan PATH)" >&2; exit 2; }

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
  echo "bench_mpi.sh: installing openmpi-bin libopenmpi-dev" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y openmpi-bin libopenmpi-dev >&2
fi

work=$(mktemp -d /tmp/banyan-bench-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -Wall -Wextra -o "$work/bench" "$root/bench/mpi/bench.c"

mpirun_flags=(--allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self
              --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1)

for n in $procs; do
  for round in $(seq 1 "$rounds"); do
    echo "bench_mpi.sh: Open MPI, $n processes, round $round of $rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    cut -d' ' -f1 /proc/loadavg > "$work/load-$n-$round-mpi"
    timeout 600 mpirun "${mpirun_flags[@]}" -np "$n" "$work/bench" "$reps" "$small" "$large" "$reduce" \
      "$ops" "$allreduce_sizes" "$allgather" > "$work/mpi-$n-$round.jsonl"
    echo "bench_mpi.sh: banyan, $n processes, round $round of $rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    cut -d' ' -f1 /proc/loadavg > "$work/load-$n-$round-banyan"
    # Bandwidth sizes: the 1-byte one is the latency workload's.
    timeout 900 "$banyan" cluster --procs "$n" --workload "$workloads" \
      --reps "$reps" --sizes "$large" --reduce-sizes "$reduce" --allreduce-sizes "$allreduce_sizes" \
      --allgather-sizes "$allgather" --node-args "$node_args" \
      --json "$work/banyan-$n-$round.json" >&2
  done
done

python3 - "$work" "$out" "$procs" "$small" "$large" "$reduce" "$node_args" "$plot" "$ops" \
  "$allreduce_sizes" "$allgather" "$rounds" <<'PY'
import json, statistics, sys
work, out, procs, small, large, reduce = sys.argv[1], sys.argv[2], sys.argv[3].split(), *map(int, sys.argv[4:7])
node_args, plot, ops = sys.argv[7], sys.argv[8], sys.argv[9].split(",")
allreduce_sizes, allgather, rounds = [int(x) for x in sys.argv[10].split(",")], int(sys.argv[11]), int(sys.argv[12])
rows = []
for n in map(int, procs):
  for rnd in range(1, rounds + 1):
    mpi = [json.loads(l) for l in open(f"{work}/mpi-{n}-{rnd}.jsonl") if l.strip()]
    b = json.load(open(f"{work}/banyan-{n}-{rnd}.json"))
    load = {w: float(open(f"{work}/load-{n}-{rnd}-{w}").read()) for w in ("mpi", "banyan")}
    def m(op, size):
        for r in mpi:
            if r["op"] == op and r["size"] == size:
                return r
        raise SystemExit(f"no Open MPI result for {op} {size} at {n} processes")
    ov = b["overhead"]["overhead_ms"]
    cases = []  # (op, size, Open MPI row, banyan ms, banyan last delivery ms, ok)
    from_start = {}  # (op, size): banyan from the last process's start to the last result
    synced = {}  # (op, size): banyan from the root's start after a barrier to the last result
    if "bcast" in ops:
        lat = b["bcast-latency"]["results"][0]
        bw = next(r for r in b["bcast-bandwidth"]["results"] if r["size"] == large)
        cases.append(("bcast", small, m("bcast", small), lat["acked_ms"], lat["completion_ms"], lat["complete"]))
        cases.append(("bcast", large, m("bcast", large), bw["acked_ms"], bw["completion_ms"], bw["complete"]))
    if "reduce" in ops:
        red = next(r for r in b["reduce"]["results"] if r["size"] == reduce)
        cases.append(("reduce", reduce, m("reduce", reduce), red["completion_ms"], red["completion_ms"], red["ok"]))
    if "allreduce" in ops:
        for size in allreduce_sizes:
            r = next(r for r in b["allreduce"]["results"] if r["size"] == size)
            cases.append(("allreduce", size, m("allreduce", size), r["completion_ms"], r["completion_ms"], r["ok"]))
            from_start[("allreduce", size)] = r["from_last_start_ms"]
            synced[("allreduce", size)] = r.get("synced_ms")
    if "barrier" in ops:
        r = b["barrier"]["results"][0]
        cases.append(("barrier", 0, m("barrier", 0), r["completion_ms"], r["completion_ms"], r["ok"]))
        from_start[("barrier", 0)] = r["from_last_start_ms"]
        synced[("barrier", 0)] = r.get("synced_ms")
    if "allgather" in ops:
        r = next(r for r in b["allgather"]["results"] if r["size"] == allgather)
        cases.append(("allgather", allgather, m("allgather", allgather), r["completion_ms"], r["completion_ms"], r["ok"]))
        from_start[("allgather", allgather)] = r["from_last_start_ms"]
        synced[("allgather", allgather)] = r.get("synced_ms")
    for name, size, mr, bms, bcompl, ok in cases:
        mpi_ms = mr["median_us"] / 1000
        last_ms = mr.get("last_median_us", 0) / 1000
        rows.append({
            "procs": n, "round": rnd, "op": name, "size": size,
            "openmpi_ms": mpi_ms, "openmpi_runs_ms": [x / 1000 for x in mr["runs_us"]],
            "openmpi_last_ms": last_ms, "openmpi_last_runs_ms": [x / 1000 for x in mr.get("last_runs_us", [])],
            "openmpi_overhead_ms": m("overhead", 0)["median_us"] / 1000, "openmpi_ok": mr["ok"],
            "banyan_ms": bms, "banyan_last_delivery_ms": bcompl, "banyan_overhead_ms": ov, "banyan_ok": ok,
            "banyan_from_last_start_ms": from_start.get((name, size)),
            "ratio": bms / mpi_ms if mpi_ms > 0 else None,
            "ratio_last": bms / last_ms if last_ms > 0 and name in ("allreduce", "barrier", "allgather") else None,
            "banyan_synced_ms": synced.get((name, size)),
            "ratio_synced": synced[(name, size)] / mpi_ms if synced.get((name, size)) and mpi_ms > 0 else None,
            "ratio_synced_last": synced[(name, size)] / last_ms if synced.get((name, size)) and last_ms > 0 else None,
            "load_openmpi": load["mpi"], "load_banyan": load["banyan"],
        })
def f(x, w, p=3):
    return f"{x:>{w}.{p}f}" if x is not None else f"{'-':>{w}}"
print(f"{'procs':>5} {'rnd':>3} {'op':>9} {'size':>9} {'openmpi_ms':>11} {'mpi_last':>9} {'banyan_ms':>10} {'ratio':>7} "
      f"{'r_last':>7} {'mpi_ovh_ms':>10} {'byn_ovh_ms':>10} {'byn_last_ms':>11} {'byn_fstart':>10} {'byn_sync':>9} "
      f"{'r_sync':>7} {'rs_last':>7} {'load':>9}")
for r in rows:
    print(f"{r['procs']:>5} {r['round']:>3} {r['op']:>9} {r['size']:>9} {r['openmpi_ms']:>11.3f} {f(r['openmpi_last_ms'] or None, 9)} "
          f"{r['banyan_ms']:>10.3f} {f(r['ratio'], 7, 2)} {f(r['ratio_last'], 7, 2)} {r['openmpi_overhead_ms']:>10.3f} "
          f"{r['banyan_overhead_ms']:>10.3f} {r['banyan_last_delivery_ms']:>11.3f} {f(r['banyan_from_last_start_ms'], 10)} "
          f"{f(r['banyan_synced_ms'], 9)} {f(r['ratio_synced'], 7, 2)} {f(r['ratio_synced_last'], 7, 2)} "
          f"{r['load_openmpi']:>4.1f}/{r['load_banyan']:<4.1f}"
          + ("" if r["openmpi_ok"] and r["banyan_ok"] else "  WRONG DATA"))
summary = []
if rounds > 1:
    print("median ratio over the rounds:")
    keys = []
    for r in rows:
        if (r["procs"], r["op"], r["size"]) not in keys:
            keys.append((r["procs"], r["op"], r["size"]))
    for k in keys:
        mine = [r for r in rows if (r["procs"], r["op"], r["size"]) == k]
        rs = [r["ratio"] for r in mine if r["ratio"] is not None]
        rl = [r["ratio_last"] for r in mine if r["ratio_last"] is not None]
        rsy = [r["ratio_synced"] for r in mine if r["ratio_synced"] is not None]
        rsl = [r["ratio_synced_last"] for r in mine if r["ratio_synced_last"] is not None]
        s = {"procs": k[0], "op": k[1], "size": k[2], "ratio": statistics.median(rs) if rs else None,
             "ratio_last": statistics.median(rl) if rl else None, "ratios": rs, "ratios_last": rl,
             "ratio_synced": statistics.median(rsy) if rsy else None, "ratios_synced": rsy,
             "ratio_synced_last": statistics.median(rsl) if rsl else None, "ratios_synced_last": rsl}
        summary.append(s)
        print(f"{k[0]:>5} {k[1]:>9} {k[2]:>9} ratio {f(s['ratio'], 5, 2)} (rounds: {', '.join(f'{x:.2f}' for x in rs)})"
              + (f", ratio_last {s['ratio_last']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in rl)})" if rl else "")
              + (f", ratio_synced {s['ratio_synced']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in rsy)})"
                 f", ratio_synced_last {s['ratio_synced_last']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in rsl)})" if rsy else ""))
print("ratio = banyan / Open MPI time (below 1: banyan faster); r_last = banyan / Open MPI's last process "
      "(allreduce, barrier, allgather); byn_fstart: banyan from the last process's start of the operation "
      "to the last result (the commands' delivery left out). byn_sync: banyan started by every process right "
      "after a banyan barrier, from the root's start to the last result (as Open MPI after MPI_Barrier); "
      "r_sync = byn_sync / Open MPI acked, rs_last = byn_sync / Open MPI last. load: 1-minute load average at the start of the Open MPI / banyan run. "
      "Targets: 64 MiB bcast <= 1, 1-byte bcast <= 1.5, allreduce 4 MiB <= 1, allreduce 4 B, barrier, "
      "allgather <= 1.5. banyan's reduce, allreduce, barrier and allgather are timed from the commands to "
      "the (last) result (no acks).")
json.dump({"method": "median of runs; barrier (Open MPI) / command (banyan), root timestamp, op, empty acks; "
                     "allreduce/barrier/allgather: banyan from the commands to the last process's result",
           "banyan_node_args": node_args, "rows": rows, "summary": summary}, open(out, "w"), indent=2)
print(f"wrote {out}")

def svg(rows):
    # One panel per operation; per process count two bars (banyan, Open MPI), their
    # heights scaled to the panel's largest time, the ratio written above the pair.
    ops = []
    for r in rows:
        key = (r["op"], r["size"])
        if key not in ops:
            ops.append(key)
    def name(op, size):
        if size == 0:
            return op
        unit = f"{size >> 20} MiB" if size >= 1 << 20 else (f"{size >> 10} KiB" if size >= 1024 else f"{size} B")
        return f"{op} {unit}"
    pw, ph, top, left = 300, 260, 60, 60
    w, h = left + pw * len(ops) + 20, top + ph + 70
    colors = {"banyan": "#1f77b4", "Open MPI": "#ff7f0e"}
    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="22" font-size="15" text-anchor="middle">banyan and Open MPI on loopback (median ms; ratio = banyan / Open MPI){" — " + node_args if node_args else ""}</text>']
    for i, (op, size) in enumerate(ops):
        mine = [r for r in rows if r["op"] == op and r["size"] == size]
        x0 = left + i * pw
        top_ms = max(max(r["banyan_ms"], r["openmpi_ms"]) for r in mine) or 1
        e.append(f'<text x="{x0 + pw / 2 - 10}" y="{top - 18}" font-size="13" text-anchor="middle">{name(op, size)}</text>')
        e.append(f'<line x1="{x0}" y1="{top + ph}" x2="{x0 + pw - 20}" y2="{top + ph}" stroke="#333"/>')
        slot = (pw - 20) / len(mine)
        for k, r in enumerate(mine):
            bx = x0 + k * slot + slot * 0.15
            bw = slot * 0.35
            for j, (label, v) in enumerate((("banyan", r["banyan_ms"]), ("Open MPI", r["openmpi_ms"]))):
                bh = 0.85 * ph * v / top_ms  # headroom for the ratio
                e.append(f'<rect x="{bx + j * bw:.1f}" y="{top + ph - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="{colors[label]}"><title>{label}: {v:.3f} ms</title></rect>')
            hi = 0.85 * ph * max(r["banyan_ms"], r["openmpi_ms"]) / top_ms
            e.append(f'<text x="{bx + bw:.1f}" y="{top + ph - hi - 5:.1f}" text-anchor="middle">{r["ratio"]:.2f}x</text>')
            e.append(f'<text x="{bx + bw:.1f}" y="{top + ph + 16}" text-anchor="middle">{r["procs"]} procs</text>')
        e.append(f'<text x="{x0 + pw / 2 - 10}" y="{top + ph + 34}" fill="#555" text-anchor="middle">tallest: {top_ms:.3f} ms</text>')
    for j, (label, c) in enumerate(colors.items()):
        e.append(f'<rect x="{left + j * 110}" y="{h - 22}" width="12" height="12" fill="{c}"/>')
        e.append(f'<text x="{left + j * 110 + 16}" y="{h - 12}">{label}</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"

if plot:
    # One bar pair per process count and operation: with several rounds, the median times
    # and the median ratio over them.
    plot_rows = []
    for r in rows:
        if r["round"] != 1:
            continue
        mine = [x for x in rows if (x["procs"], x["op"], x["size"]) == (r["procs"], r["op"], r["size"])]
        plot_rows.append(dict(r, banyan_ms=statistics.median(x["banyan_ms"] for x in mine),
                              openmpi_ms=statistics.median(x["openmpi_ms"] for x in mine),
                              ratio=statistics.median(x["ratio"] for x in mine)))
    open(plot, "w").write(svg(plot_rows))
    print(f"wrote {plot}")
PY

#!/usr/bin/env bash
# banyan and Open MPI side by side, the same number of processes on loopback, timed the
# same way (the paper's method: barrier, the root takes a timestamp, the operation, every
# other process sends the root an empty ack, the time ends when the root has them all):
# 1-byte and 64 MiB broadcast and a 4 MiB int32 sum reduction, for 4, 8 and 16 processes,
# median of 3. Also the barrier-plus-acks cost alone. Prints ratios, writes JSON.
#
#   scripts/bench_mpi.sh [--banyan PATH] [--out FILE.json] [--plot FILE.svg] [--procs "4 8 16"]
#                        [--reps 3] [--node-args "ARGS"]   (extra arguments for every banyan
#                                                node, e.g. "--busy-poll-us 50000")
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
while [ $# -gt 0 ]; do
  case "$1" in
    --banyan) banyan=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
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

python3 - "$work" "$out" "$procs" "$small" "$large" "$reduce" "$node_args" "$plot" <<'PY'
import json, sys
work, out, procs, small, large, reduce = sys.argv[1], sys.argv[2], sys.argv[3].split(), *map(int, sys.argv[4:7])
node_args, plot = sys.argv[7], sys.argv[8]
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

def svg(rows):
    # One panel per operation; per process count two bars (banyan, Open MPI), their
    # heights scaled to the panel's largest time, the ratio written above the pair.
    ops = []
    for r in rows:
        key = (r["op"], r["size"])
        if key not in ops:
            ops.append(key)
    def name(op, size):
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
    open(plot, "w").write(svg(rows))
    print(f"wrote {plot}")
PY

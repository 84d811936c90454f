#!/usr/bin/env bash
# `banyan bench churn`: each event's row ends with one tree's ceiling from processor 0
# before -> after it, over the processors running then. Here processor 1, the only one
# in group B, relays the wide path A -> B -> C (1 Gbit/s); once it has left, only the
# direct A -> C link (100 Mbit/s) is left: 125 -> 12.5 MB/s per vnode, 3 vnodes.
#   churn_ceiling_test.sh PATH/TO/banyan
set -euo pipefail
banyan=$1
work=$(mktemp -d /tmp/banyan-churn-ceiling-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/relay.topo" <<'TOPO'
topology relay-3c3
send_overhead 10us
default nic 1Gbit
group A procs 1 rtt 100us
group B procs 1 rtt 100us
group C procs 1 rtt 100us
link A B rtt 2ms bw 1Gbit
link B C rtt 2ms bw 1Gbit
link A C rtt 2ms bw 100Mbit
TOPO
"$banyan" bench churn --topology "$work/relay.topo" --seed 1 --leave-at 1000 \
  --rejoin-at 2000 --duration 3000 --size 256K -q > "$work/out.txt"
grep -Eq '^leave .* 375\.0 -> 37\.5$' "$work/out.txt" ||
  { echo "leave row without 375.0 -> 37.5:" >&2; cat "$work/out.txt" >&2; exit 1; }
grep -Eq '^rejoin .* 37\.5 -> 375\.0$' "$work/out.txt" ||
  { echo "rejoin row without 37.5 -> 375.0:" >&2; cat "$work/out.txt" >&2; exit 1; }
echo "ceilings: 375.0 -> 37.5 at the leave, back to 375.0 at the rejoin"

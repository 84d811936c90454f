#!/usr/bin/env bash
# Shapes a network device's egress with htb (this kernel has tbf/htb but no netem: delay
# stays in user space, `banyan node --topology`). Used by netns.sh for each site link and
# by the containers of docker/ for their eth0.
#
#   shape.sh DEV MBIT [NETNS]    MBIT 0: remove any shaping
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: shape.sh DEV MBIT [NETNS]" >&2; exit 2; }
dev=$1
mbit=$2
[[ "$mbit" =~ ^[0-9]+$ ]] || { echo "shape.sh: bad rate \"$mbit\" (Mbit/s)" >&2; exit 2; }
tc=(tc)
[ $# -eq 3 ] && tc=(ip netns exec "$3" tc)
"${tc[@]}" qdisc del dev "$dev" root 2>/dev/null || true
[ "$mbit" -gt 0 ] || exit 0
"${tc[@]}" qdisc add dev "$dev" root handle 1: htb default 10 r2q 1000
"${tc[@]}" class add dev "$dev" parent 1: classid 1:10 htb rate "${mbit}mbit" burst 64k

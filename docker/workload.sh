#!/usr/bin/env bash
# Drives the running demo cluster of docker/compose.yml from the host: each node runs
# `banyan node --control` reading commands from the FIFO /run/banyan/ctl (docker/node.sh);
# this script writes them there with `docker exec` and reads the nodes' JSON lines
# (docs/cluster.md, "The control protocol") from `docker logs`.
#
#   docker/workload.sh [-f COMPOSE_FILE] [--bcast BYTES,...] [--reduce COUNT] [--from SERVICE]
#
# 1. waits (60 s at most) until every running node is a member, sees the same members,
#    has all its trees parented and nothing busy;
# 2. broadcasts each size from SERVICE (default a0): checks that the computation's 1024
#    vnodes got it, each node exactly as many times as it owns vnodes, with the payload
#    intact (the receivers check its pattern: "ok"), prints the time from
#    the start to the last delivery (the nodes' CLOCK_MONOTONIC stamps: one host, one clock);
# 3. an int32 sum of COUNT elements per vnode (default 262144 = 1 MiB) to vnode 0, started
#    on every node in the same order: checks the root's result covers every vnode and is right.
# Exit 0 when all of it checked out, 1 otherwise. Needs docker and Compose
# (`docker compose`; COMPOSE=docker-compose for the older standalone tool).
set -eu  # no pipefail: a grep finding nothing (yet) is not an error here
here=$(cd "$(dirname "$0")" && pwd)
compose_file=$here/compose.yml
sizes=1,4194304
count=262144
from=a0
while [ $# -gt 0 ]; do
  case $1 in
    -f) compose_file=$2; shift 2 ;;
    --bcast) sizes=$2; shift 2 ;;
    --reduce) count=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    *) echo "usage: workload.sh [-f COMPOSE_FILE] [--bcast BYTES,...] [--reduce COUNT] [--from SERVICE]" >&2
       exit 2 ;;
  esac
done

# The running nodes: service name -> container id.
declare -A cid
services=()
compose=${COMPOSE:-docker compose}
for s in $($compose -f "$compose_file" ps --services --filter status=running | sort); do
  id=$($compose -f "$compose_file" ps -q "$s")
  [ -n "$id" ] || continue
  cid[$s]=$id
  services+=("$s")
done
[ ${#services[@]} -gt 0 ] || { echo "workload: no node is running" >&2; exit 1; }
[ -n "${cid[$from]:-}" ] || { echo "workload: $from is not running" >&2; exit 1; }
echo "workload: nodes ${services[*]}"

# ctl SERVICE COMMAND: one command line to that node.
ctl() { docker exec "${cid[$1]}" sh -c "echo '$2' > /run/banyan/ctl"; }
# json SERVICE SINCE: the node's JSON lines (stdout) written since the docker time SINCE.
json() { docker logs --since "$2" "${cid[$1]}" 2>/dev/null | grep '^{' || true; }
# field NAME: the value of a flat JSON line's field NAME (numbers, booleans, strings).
field() { sed -n -e "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p;t" -e "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
stamp() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
# size TEXT: how many vnodes "0-31,64-127" names.
size() { echo "$1" | tr ',' '\n' | awk -F- 'NF { n += ($2 == "" ? 1 : $2 - $1 + 1) } END { print n + 0 }'; }
declare -A owned
fail=0

# 1. Stable: members, trees parented, idle.
deadline=$((SECONDS + 60))
while :; do
  t=$(stamp)
  for s in "${services[@]}"; do ctl "$s" status; done
  sleep 1
  stable=1
  summary=""
  for s in "${services[@]}"; do
    line=$(json "$s" "$t" | grep '"ev":"status"' | tail -n 1)
    members=$(echo "$line" | sed -n 's/.*"members":\[\([^]]*\)\].*/\1/p')
    state=$(echo "$line" | field state)
    parented=$(echo "$line" | field all_parented)
    busy=$(echo "$line" | field busy)
    owned[$s]=$(size "$(echo "$line" | field vnodes)")
    summary+=" $s:${state:-?}/$(echo "$line" | field vnodes)"
    [ "$state" = member ] && [ "$parented" = true ] && [ "$busy" = false ] || stable=0
    [ -n "$members" ] && [ "$(echo "$members" | tr ',' '\n' | wc -l)" -eq ${#services[@]} ] || stable=0
  done
  if [ $stable -eq 1 ]; then
    echo "workload: stable, ${#services[@]} members [$members], vnodes:$summary"
    break
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "workload: not stable after 60 s:$summary" >&2
    exit 1
  fi
done

total=0
for s in "${services[@]}"; do total=$((total + owned[$s])); done
if [ $total -ne 1024 ]; then
  # A processor that crashed (docker kill, SIGKILL) took its vnodes with it: a broadcast
  # reaches only the others, a reduction cannot complete (docs/api.md, "Exactly once").
  echo "workload: the nodes own $total of the 1024 vnodes (a crashed processor's are lost):" \
       "broadcasts are checked against those, no reduction is tried" >&2
  fail=1
fi

# 2. Broadcasts from $from, one at a time.
for size in ${sizes//,/ }; do
  t=$(stamp)
  ctl "$from" "bcast $size"
  deadline=$((SECONDS + 30))
  op="" start=""
  while :; do
    sleep 0.5
    if [ -z "$op" ]; then
      line=$(json "$from" "$t" | grep '"ev":"bcast"' | tail -n 1)
      op=$(echo "$line" | field op)
      start=$(echo "$line" | field t_us)
    fi
    if [ -n "$op" ]; then
      vnodes=0 ok=1 last=$start per=""
      for s in "${services[@]}"; do
        n=0
        while read -r l; do
          [ -n "$l" ] || continue
          n=$((n + $(echo "$l" | field vnodes)))
          [ "$(echo "$l" | field ok)" = true ] || ok=0
          tu=$(echo "$l" | field t_us)
          if [ "$tu" -gt "$last" ]; then last=$tu; fi
        done < <(json "$s" "$t" | grep '"ev":"delivered"' | grep "\"op\":\"$op\"")
        per+=" $s:$n"
        [ "$n" -eq "${owned[$s]}" ] || ok=0
        vnodes=$((vnodes + n))
      done
      if [ $vnodes -ge $total ]; then break; fi
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "workload: broadcast of $size bytes (${op:-not started}) incomplete after 30 s:${per:-}" >&2
      fail=1
      continue 2
    fi
  done
  ms=$(awk -v a="$start" -v b="$last" 'BEGIN { printf "%.2f", (b - a) / 1000 }')
  if [ $vnodes -eq $total ] && [ $ok -eq 1 ]; then
    echo "workload: broadcast $op of $size bytes from $from: $vnodes deliveries, each node one per vnode it owns, payload ok, $ms ms (vnodes per node:$per)"
  else
    echo "workload: broadcast $op of $size bytes: $vnodes deliveries for $total vnodes, ok=$ok (per node:$per; owned: $(for s in "${services[@]}"; do printf ' %s:%s' "$s" "${owned[$s]}"; done))" >&2
    fail=1
  fi
done

if [ $total -ne 1024 ]; then echo "workload: FAILED" >&2; exit 1; fi

# 3. A reduction to vnode 0, started on every node in the same order. The engine takes
# reductions in increasing order and reports gaps as skipped: one more than the highest
# sequence number any node has logged.
seq=0
for s in "${services[@]}"; do
  for n in $(docker logs "${cid[$s]}" 2>/dev/null | grep '"ev":"reduce' | field seq); do
    if [ "$n" -gt "$seq" ]; then seq=$n; fi
  done
done
seq=$((seq + 1))
t=$(stamp)
for s in "${services[@]}"; do ctl "$s" "reduce $seq 0 $count sum int32"; done
deadline=$((SECONDS + 30))
while :; do
  sleep 0.5
  line=""
  for s in "${services[@]}"; do
    l=$(json "$s" "$t" | grep '"ev":"reduced"' | grep "\"seq\":\"$seq\"" | tail -n 1)
    if [ -n "$l" ]; then line=$l root=$s; fi
  done
  errors=$(for s in "${services[@]}"; do json "$s" "$t" | grep '"ev":"error"' | sed "s/^/$s: /"; done)
  if [ -n "$line" ] || [ -n "$errors" ]; then break; fi
  if [ $SECONDS -ge $deadline ]; then
    echo "workload: reduction $seq: no result after 30 s" >&2
    exit 1
  fi
done
if [ -n "$line" ] && [ "$(echo "$line" | field ok)" = true ] && [ "$(echo "$line" | field vnodes)" = 1024 ]; then
  echo "workload: reduction $seq (int32 sum of $count elements per vnode) to vnode 0 at $root: 1024 vnodes, result ok"
else
  echo "workload: reduction $seq: ${line:-no result} ${errors:-}" >&2
  fail=1
fi
if [ $fail -eq 0 ]; then echo "workload: all checked"; else echo "workload: FAILED" >&2; fi
exit $fail

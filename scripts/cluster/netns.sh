#!/usr/bin/env bash
# Network namespaces for a banyan cluster on one host: one namespace per site, each with
# a veth link to a bridge in the root namespace, and htb shaping the site's link in both
# directions (this kernel has tbf/htb but no netem, so the delay stays in user space:
# `banyan node --topology`). Used by `banyan cluster --netns` and docker/.
#
#   netns.sh up NAME SITE:MBIT ...        make NAME-br and NAME-SITE; prints "SITE ADDRESS"
#                                          per site (MBIT 0: not shaped)
#   netns.sh down NAME                     remove them (idempotent; always safe to run)
#   netns.sh run NAME SITE:MBIT ... -- CMD up, run CMD (it can use `ip netns exec NAME-SITE`),
#                                          then down, also when CMD fails or on a signal
#
# Sites get 10.231.0.1, .2, ... in the order given. NAME: at most 8 characters
# (interface names are limited to 15). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
die() { echo "netns.sh: $*" >&2; exit 1; }

down() {
  local name=$1
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${name}-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  local l
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^${name}h[0-9]" || true); do
    ip link del "$l" 2>/dev/null || true
  done
  ip link del "${name}-br" 2>/dev/null || true
  if command -v iptables >/dev/null 2>&1; then
    while iptables -D FORWARD -i "${name}-br" -o "${name}-br" -j ACCEPT 2>/dev/null; do :; done
  fi
}

up() {
  local name=$1
  shift
  [ ${#name} -le 8 ] || die "NAME \"$name\" is longer than 8 characters"
  [ $# -ge 1 ] || die "up: no sites"
  [ "$(id -u)" = 0 ] || die "needs root"
  # Whatever fails half-way, nothing is left behind.
  trap 'rc=$?; [ $rc -eq 0 ] || down "'"$name"'"; exit $rc' EXIT
  trap 'exit 130' INT TERM
  ip link add "${name}-br" type bridge || die "cannot create a bridge (network namespaces not permitted?)"
  ip link set "${name}-br" up
  # Where bridged traffic goes through iptables (br_netfilter, as Docker sets it up, with
  # a FORWARD policy of DROP), let the sites' traffic across our bridge through.
  if command -v iptables >/dev/null 2>&1 && iptables -S FORWARD >/dev/null 2>&1; then
    iptables -I FORWARD -i "${name}-br" -o "${name}-br" -j ACCEPT
  fi
  local i=0 spec site mbit ns addr
  for spec in "$@"; do
    site=${spec%%:*}
    mbit=${spec##*:}
    [[ "$site" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad site name \"$site\""
    [[ "$mbit" =~ ^[0-9]+$ ]] || die "bad rate \"$mbit\" for site $site (Mbit/s)"
    ns="${name}-${site}"
    addr="10.231.0.$((i + 1))"
    ip netns add "$ns" || die "cannot create network namespace $ns"
    ip link add "${name}h$i" type veth peer name "${name}n$i"
    ip link set "${name}n$i" netns "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "${name}n$i" name eth0
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip link set "${name}h$i" master "${name}-br" up
    # The site's link, both ways: its egress (inside) and its ingress (the bridge side).
    bash "$here/shape.sh" eth0 "$mbit" "$ns"
    bash "$here/shape.sh" "${name}h$i" "$mbit"
    echo "$site $addr"
    i=$((i + 1))
  done
  trap - EXIT INT TERM
}

cmd=${1:-}
[ -n "$cmd" ] || die "usage: netns.sh up NAME SITE:MBIT ... | down NAME | run NAME SITE:MBIT ... -- CMD"
shift
case "$cmd" in
  up)
    [ $# -ge 2 ] || die "usage: netns.sh up NAME SITE:MBIT ..."
    up "$@"
    ;;
  down)
    [ $# -eq 1 ] || die "usage: netns.sh down NAME"
    down "$1"
    ;;
  run)
    name=${1:-}
    shift || true
    sites=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do sites+=("$1"); shift; done
    [ $# -ge 2 ] || die "usage: netns.sh run NAME SITE:MBIT ... -- CMD"
    shift
    trap 'down "'"$name"'"' EXIT
    trap 'exit 130' INT TERM
    ( up "$name" "${sites[@]}" )
    "$@"
    ;;
  *)
    die "unknown command \"$cmd\" (up, down, run)"
    ;;
esac

#!/usr/bin/env bash
# Entry point of one container of docker/compose.yml: shapes eth0 to the site's rate with
# the same script as the namespace cluster (scripts/cluster/shape.sh; needs root and
# NET_ADMIN, skipped with a message without them), then runs `banyan node --control` for
# processor ID of SITE as the unprivileged user banyan. Its commands come from the FIFO
# /run/banyan/ctl (docker/workload.sh writes there through `docker exec`), its JSON lines
# and logs go to the container's log, its status to /run/banyan/status.json (the image's
# HEALTHCHECK: `banyan health`).
#
#   node.sh ID SITE MBIT [banyan node arguments, e.g. --join a0:7000]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: node.sh ID SITE MBIT [banyan node arguments]" >&2; exit 2; }
id=$1 site=$2 mbit=$3
shift 3
if bash /src/banyan/scripts/cluster/shape.sh eth0 "$mbit"; then
  echo "node.sh: eth0 shaped to ${mbit} Mbit/s (htb)" >&2
else
  echo "node.sh: cannot shape eth0 (no NET_ADMIN?): the site link is not rate-limited" >&2
fi
addr=$(hostname -i | awk '{print $1}')
# The FIFO is opened read-write: it always has a writer, so the node never reads an end
# of input (which would make it stop), however many `echo CMD > /run/banyan/ctl` come and go.
install -d -o banyan -g banyan -m 0755 /run/banyan
rm -f /run/banyan/ctl /run/banyan/status.json
mkfifo -m 0600 /run/banyan/ctl
exec 3<>/run/banyan/ctl
# Root only for tc: the node runs as banyan (setpriv execs, so banyan is still PID 1).
# It blocks SIGTERM and takes it with a signalfd, so `docker stop` makes it leave
# gracefully (it hands its vnodes over) before it exits.
# No fixed --seed: a random one per life (each life's incarnations are salted anyway, so a
# restarted container gets back in either way; docs/cluster.md).
exec setpriv --reuid=banyan --regid=banyan --init-groups \
  banyan node --control --id "$id" --listen "0.0.0.0:7000" --advertise "$addr:7000" \
  --secret-file /run/secrets/banyan --json-status /run/banyan/status.json \
  --topology /src/banyan/docker/three-sites.topo --site "$site" \
  --metrics 0.0.0.0:9464 \
  "$@" <&3 3<&-

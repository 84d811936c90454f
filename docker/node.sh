#!/usr/bin/env bash
# Entry point of one container of docker/compose.yml: shapes eth0 to the site's rate with
# the same script as the namespace cluster (scripts/cluster/shape.sh; needs NET_ADMIN,
# skipped with a message without it), then runs `banyan node` for processor ID of SITE.
#
#   node.sh ID SITE MBIT [--join ADDR]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: node.sh ID SITE MBIT [banyan node arguments]" >&2; exit 2; }
id=$1 site=$2 mbit=$3
shift 3
if ! bash /src/banyan/scripts/cluster/shape.sh eth0 "$mbit"; then
  echo "node.sh: cannot shape eth0 (no NET_ADMIN?): the site link is not rate-limited" >&2
fi
addr=$(hostname -i | awk '{print $1}')
exec banyan node --id "$id" --listen "0.0.0.0:7000" --advertise "$addr:7000" \
  --secret-file /run/secrets/banyan --topology /src/banyan/docker/three-sites.topo --site "$site" \
  --seed "$((id + 1))" "$@"

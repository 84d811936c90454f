#!/usr/bin/env bash
# Installs banyan's build and run dependencies from Debian's packages.
# Idempotent: does nothing when everything is already installed.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcaf-dev libuv1-dev libcapnp-dev capnproto
      libboost-test-dev libcli11-dev nlohmann-json3-dev graphviz libssl-dev
      libgcrypt20-dev
      python3-yaml curl) # python3-yaml: the deployment files' offline check (tests/deploy);
                         # curl: reading a node's metrics (README)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs banyan from the build tree into a scratch prefix, builds demos/embed against
# it with find_package(banyan), and runs the example. Usage: find_package_test.sh BUILD SRC
set -euo pipefail
build=$1
src=$2
scratch="$build/find-package-test"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$src/demos/embed" -B "$scratch/build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" -j 2 >/dev/null
"$scratch/build/embed_example"

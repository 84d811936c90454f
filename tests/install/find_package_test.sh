#!/usr/bin/env bash
# Installs banyan from the build tree into a scratch prefix and checks what an embedder
# sees there: the header layout, <banyan/version.hpp>, banyan.pc, and demos/embed (a
# C++-only project) built with find_package(banyan) and run; then configures demos/embed
# against what the library .deb packages hold.
# Usage: find_package_test.sh BUILD SRC
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
scratch="$build/find-package-test"
prefix="$scratch/prefix"
rm -rf "$scratch"
fail() { echo "find_package_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name banyan.pc -printf '%h\n' | head -1)
[ -n "$libdir" ] || fail "no banyan.pc installed"
libdir=$(dirname "$libdir")
inc="$prefix/include"
for h in banyan/version.hpp banyan/schema/banyan.capnp.h banyan/actors/node.hpp \
         banyan/core/vnode_set.hpp banyan/net/tcp_transport.hpp; do
  [ -f "$inc/$h" ] || fail "missing header include/$h"
done
stray=$(find "$inc" -maxdepth 1 -type f | head -1)
[ -z "$stray" ] || fail "a header outside include/banyan/: $stray"
[ -f "$libdir/cmake/banyan/banyanConfig.cmake" ] || fail "no banyanConfig.cmake in $libdir/cmake/banyan"

# The version header, the package version file and banyan.pc agree with project().
want=$(sed -n 's/^project(banyan VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
got=$(sed -n 's/^#define BANYAN_VERSION_STRING "\(.*\)"/\1/p' "$inc/banyan/version.hpp")
[ "$got" = "$want" ] || fail "version.hpp says '$got', CMakeLists.txt '$want'"
grep -q "set(PACKAGE_VERSION \"$want\")" "$libdir/cmake/banyan/banyanConfigVersion.cmake" \
  || fail "banyanConfigVersion.cmake does not say $want"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
got=$(pkg-config --modversion banyan)
[ "$got" = "$want" ] || fail "pkg-config --modversion banyan says '$got', want '$want'"
pc_inc=$(pkg-config --variable=includedir banyan)
[ "$(realpath "$pc_inc")" = "$(realpath "$inc")" ] \
  || fail "banyan.pc's includedir is '$pc_inc', not $inc (relocated prefix)"

# pkg-config alone is enough to compile and link against every layer.
cat > "$scratch/pc_main.cpp" <<'CPP'
#include <banyan/version.hpp>
#include <banyan/core/vnode_set.hpp>
#include <cstdio>
int main() {
  std::printf("%s %zu\n", banyan::version_string, banyan::vnode_set::range(0, 8).size());
  return 0;
}
CPP
# shellcheck disable=SC2046
g++ -std=c++17 "$scratch/pc_main.cpp" -o "$scratch/pc_main" $(pkg-config --cflags --libs banyan)
got=$("$scratch/pc_main")
[ "$got" = "$want 8" ] || fail "the pkg-config program printed '$got', want '$want 8'"

# A C++-only consumer through find_package(banyan): configure, build, run.
grep -q "^project(banyan_embed_example LANGUAGES CXX)" "$src/demos/embed/CMakeLists.txt" \
  || fail "demos/embed is no longer a C++-only project"
cmake -S "$src/demos/embed" -B "$scratch/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$scratch/configure.log" 2>&1 \
  || { cat "$scratch/configure.log" >&2; fail "demos/embed does not configure"; }
cmake --build "$scratch/build" -j 2 >"$scratch/build.log" 2>&1 \
  || { cat "$scratch/build.log" >&2; fail "demos/embed does not build"; }
"$scratch/build/embed_example"

# What the .deb packages hold: `cpack -G DEB` packs the install components lib
# (libbanyan), dev (libbanyan-dev) and cli (banyan). lib + dev alone, installed the same
# way (cpack itself would first build every target of the tree), are a sane package for
# the same consumer, and the tool is in neither.
for c in lib dev; do
  cmake --install "$build" --component "$c" --prefix "$scratch/deb-root/usr" >/dev/null
done
[ ! -e "$scratch/deb-root/usr/bin/banyan" ] || fail "the library packages hold the banyan tool"
cmake -S "$src/demos/embed" -B "$scratch/deb-build" -DCMAKE_PREFIX_PATH="$scratch/deb-root/usr" \
  >"$scratch/deb-configure.log" 2>&1 \
  || { cat "$scratch/deb-configure.log" >&2; fail "demos/embed does not configure against the library packages' files"; }
echo "find_package_test: install tree, pkg-config and the packages' files are sane"

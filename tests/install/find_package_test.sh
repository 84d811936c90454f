#!/usr/bin/env bash
# Installs banyan from the build tree into a scratch prefix and checks what an embedder
# sees there: the header layout, <banyan/version.hpp>, banyan.pc, and demos/embed (a
# C++-only project) built with find_package(banyan) and run. When cpack and dpkg-deb are
# present, also packs the .deb files and configures demos/embed against their contents.
# Usage: find_package_test.sh BUILD SRC
set -euo pipefail
build=$1
src=$2
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

# The .deb files: what they would install is a sane package for the same consumer.
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  (cd "$build" && cpack -G DEB -B "$scratch/deb" >"$scratch/cpack.log" 2>&1) \
    || { cat "$scratch/cpack.log" >&2; fail "cpack -G DEB failed"; }
  for d in "$scratch"/deb/*.deb; do
    dpkg-deb -x "$d" "$scratch/deb-root"
  done
  ls "$scratch"/deb/libbanyan-dev_*.deb >/dev/null || fail "no libbanyan-dev package"
  ls "$scratch"/deb/banyan_*.deb >/dev/null || fail "no banyan (CLI) package"
  dev_prefix=$(dirname "$(dirname "$(find "$scratch/deb-root" -path '*/include/banyan/version.hpp' -printf '%h\n')")")
  cmake -S "$src/demos/embed" -B "$scratch/deb-build" -DCMAKE_PREFIX_PATH="$dev_prefix" \
    >"$scratch/deb-configure.log" 2>&1 \
    || { cat "$scratch/deb-configure.log" >&2; fail "demos/embed does not configure against the .deb contents"; }
fi
echo "find_package_test: install tree, pkg-config and .deb contents are sane"

#!/usr/bin/env bash
# README.md's "Install and embed" shows demos/embed unchanged: each fenced block that
# follows a "<!-- demos/embed/FILE -->" line is that file, byte for byte.
# Usage: readme_embed_test.sh SRC
set -euo pipefail
src=$1
checked=0
for f in main.cpp CMakeLists.txt; do
  shown=$(awk -v mark="<!-- demos/embed/$f -->" '
    $0 == mark { want = 1; next }
    want == 1 && /^```/ { want = 2; next }
    want == 2 && /^```$/ { exit }
    want == 2 { print }' "$src/README.md")
  if [ -z "$shown" ]; then
    echo "readme_embed_test: README.md does not show demos/embed/$f" >&2
    exit 1
  fi
  if ! diff -u "$src/demos/embed/$f" <(printf '%s\n' "$shown") >&2; then
    echo "readme_embed_test: README.md's demos/embed/$f differs from the file (above)" >&2
    exit 1
  fi
  checked=$((checked + 1))
done
echo "readme_embed_test: README.md shows demos/embed's $checked files unchanged"

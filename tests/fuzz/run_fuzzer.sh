#!/usr/bin/env bash
# A short libFuzzer run, as a CTest entry (tests/fuzz/fuzz.cmake):
#
#   run_fuzzer.sh FUZZER WORKDIR SECONDS CORPUS_DIR...
#
# Starts from the corpora (read only: new inputs go to WORKDIR/new, crash artifacts to
# WORKDIR), for SECONDS seconds. Exit 0 when nothing was found; libFuzzer's own exit code
# (a crash, a leak, a timeout) otherwise, with the input that caused it kept in WORKDIR.
set -euo pipefail
fuzzer=$1 work=$2 secs=$3
shift 3
rm -rf "$work"
mkdir -p "$work/new"
exec "$fuzzer" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/new" "$@"

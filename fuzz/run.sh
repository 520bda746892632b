#!/usr/bin/env bash
# Runs one fuzz target with cargo-fuzz on the stable toolchain (see docs/reliability.md).
# Usage: fuzz/run.sh TARGET [RUNS] [extra libFuzzer flags...]
#   TARGET: json_boundary | row_decode | safetext   RUNS: executions (default 10000000)
# The corpus grows in fuzz/corpus/TARGET (not committed), seeded from fuzz/seeds/TARGET;
# a finding is written to fuzz/artifacts/TARGET/ and the run stops with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: fuzz/run.sh TARGET [RUNS] [libFuzzer flags]}"
runs="${2:-10000000}"
shift $(( $# >= 2 ? 2 : 1 ))
mkdir -p "fuzz/corpus/$target"
# cargo-fuzz passes nightly -Z flags to rustc; RUSTC_BOOTSTRAP=1 lets the stable compiler take
# them, and --sanitizer none drops -Zsanitizer=address (its runtime is not shipped on stable).
exec env RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" \
    "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$@"

#!/usr/bin/env bash
# Issue 13 item 8: without the `testing` feature, raw store access and the test hooks are not
# part of the public API. Run after `cargo build --no-default-features` (which leaves
# target/debug/libcountersign.rlib built without `testing`). See tests/api_private/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where cargo put the build: CARGO_TARGET_DIR when it is set, else ./target.
dir="${CARGO_TARGET_DIR:-target}/debug"
rlib="$dir/libcountersign.rlib"
[ -f "$rlib" ] || { echo "api-private: $rlib is missing; run cargo build --no-default-features first"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
probe() {
    rustc --edition 2024 --crate-type lib --crate-name "probe_$(basename "$1" .rs)" \
        --emit=metadata --out-dir "$out" -L dependency="$dir/deps" \
        --extern countersign="$rlib" "$1" 2>"$out/err"
}
probe tests/api_private/control.rs || { echo "api-private: the control probe does not compile:"; cat "$out/err"; exit 1; }
fail=0
for f in tests/api_private/hidden_*.rs; do
    if probe "$f"; then
        echo "api-private: $f compiled: that item is public without the testing feature"
        fail=1
    elif ! grep -q "private" "$out/err"; then
        echo "api-private: $f failed for another reason than privacy:"
        cat "$out/err"
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "api-private: 4 hidden items refused as private, control compiles"
exit "$fail"

#!/usr/bin/env bash
# One lane of scripts/test.sh's lab stage: runs lab test executables one after another, each
# binary's tests one at a time, in its package's directory as `cargo test` would.
#
#   scripts/lab-lane.sh LOG EXE DIR [EXE DIR ...]
#
# Output goes to LOG; the exit status is the number of binaries that failed (every binary runs
# even after a failure, so one run reports them all). Lab runs are named by their run id
# (namespaces, state directories), so two lanes never touch each other's runs.
set -uo pipefail

log=$1
shift
: >"$log"
failed=0
start=$SECONDS
while [ "$#" -ge 2 ]; do
    exe=$1 dir=$2
    shift 2
    printf '\n==> %s (lane at %d s)\n' "$(basename "$exe")" "$((SECONDS - start))" >>"$log"
    # The package directory as the working directory and in CARGO_MANIFEST_DIR, as `cargo test`
    # runs a test binary.
    if ! (cd "$dir" && SIDEKICK_LAB=1 CARGO_MANIFEST_DIR="$dir" "$exe" --test-threads=1) >>"$log" 2>&1; then
        echo "FAILED: $exe" >>"$log"
        failed=$((failed + 1))
    fi
done
printf '\n==> lane done (at %d s), %d failed\n' "$((SECONDS - start))" "$failed" >>"$log"
exit "$failed"

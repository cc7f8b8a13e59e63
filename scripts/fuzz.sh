#!/usr/bin/env bash
# Runs the cargo-fuzz targets of every crate (`<crate>/fuzz/`, outside the workspace).
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]   run every target (or one) for SECONDS each (default 60)
#   scripts/fuzz.sh --list                   list the targets as crate/target
#   scripts/fuzz.sh --setup                  install the nightly toolchain and cargo-fuzz if missing
#   scripts/fuzz.sh --build                  build every target (one cargo-fuzz build per crate)
#   scripts/fuzz.sh --smoke                  what scripts/test.sh runs: build, then a few seconds each
#
# Installs what it needs (the nightly toolchain, cargo-fuzz from crates.io) when missing. All
# crates build into one shared directory, ${CARGO_TARGET_DIR:-target}/fuzz (override with
# SIDEKICK_FUZZ_DIR), so repeat runs only rebuild what changed. Each run reads the committed seeds
# in <crate>/fuzz/corpus/TARGET and writes what it finds to $SIDEKICK_FUZZ_DIR/corpus/TARGET (not
# committed); crashing inputs land in <crate>/fuzz/artifacts/TARGET. libFuzzer runs with
# -rss_limit_mb=512 and a per-input timeout (SIDEKICK_FUZZ_TIMEOUT, default 10 s);
# SIDEKICK_FUZZ_RUNS=N also stops a target after N executions; SIDEKICK_FUZZ_NO_BUILD=1 runs the
# binaries as they are; SIDEKICK_FUZZ_PROFILE=dev|release picks cargo-fuzz's build profile
# (default release; dev for --smoke); SIDEKICK_FUZZ_JOBS=N runs N targets at once (default 1; the
# smoke runs one per core). Prints a summary table and exits non-zero when any target crashed,
# leaked, ran out of memory or timed out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# SIDEKICK_FUZZ_CRATES narrows the crates (e.g. a CI without a cache of target/fuzz may leave
# out examples, whose fuzz build instruments quiche, quinn, h3 and tokio).
read -ra FUZZ_CRATES <<<"${SIDEKICK_FUZZ_CRATES:-wire quack eack protocol proxy client-sdk bindings examples interop}"
FUZZ_ROOT=$PWD
fuzz_dir=${SIDEKICK_FUZZ_DIR:-${CARGO_TARGET_DIR:-target}/fuzz}
case "$fuzz_dir" in /*) ;; *) fuzz_dir="$FUZZ_ROOT/$fuzz_dir" ;; esac
FUZZ_DIR=$fuzz_dir
FUZZ_TIMEOUT=${SIDEKICK_FUZZ_TIMEOUT:-10}
FUZZ_RSS_MB=512
# Seconds per target in the smoke run of scripts/test.sh.
FUZZ_SMOKE_SECONDS=${SIDEKICK_FUZZ_SMOKE_SECONDS:-3}
# cargo-fuzz's build profile: `release` (optimised, debug assertions on) for campaigns; the smoke
# run builds `dev` (same instrumentation and assertions, unoptimised: a cold build of the proxy's
# targets took 151 s against 233 s, and a few seconds per target need no speed).
FUZZ_PROFILE=${SIDEKICK_FUZZ_PROFILE:-release}

# The nightly toolchain and cargo-fuzz, installed only when missing.
fuzz_setup() {
    if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        echo "fuzz: installing the nightly toolchain"
        rustup toolchain install nightly --profile minimal
    fi
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "fuzz: installing cargo-fuzz"
        cargo install cargo-fuzz --locked
    fi
}

# Every target as crate/target (the fuzz_targets/NAME.rs files, one [[bin]] each).
fuzz_list() {
    local c f
    for c in "${FUZZ_CRATES[@]}"; do
        for f in "$FUZZ_ROOT/$c"/fuzz/fuzz_targets/*.rs; do
            [ -e "$f" ] || continue
            f=${f##*/}
            echo "$c/${f%.rs}"
        done
    done
}

# Builds every target of one crate in a single cargo-fuzz build. The fuzz workspace has no
# committed lock file: it starts from the main workspace's, so shared dependencies resolve to the
# same versions (and build once in the shared target directory).
fuzz_build_crate() {
    local c=$1 lock="$FUZZ_ROOT/$1/fuzz/Cargo.lock"
    if [ ! -e "$lock" ] || [ "$FUZZ_ROOT/Cargo.lock" -nt "$lock" ]; then
        cp "$FUZZ_ROOT/Cargo.lock" "$lock"
    fi
    local dev=()
    [ "$FUZZ_PROFILE" = dev ] && dev=(--dev)
    (cd "$FUZZ_ROOT/$c" && cargo +nightly fuzz build "${dev[@]}" --fuzz-dir fuzz --target-dir "$FUZZ_DIR")
}

fuzz_build() {
    local c
    fuzz_setup
    for c in "${FUZZ_CRATES[@]}"; do
        fuzz_build_crate "$c"
    done
}

fuzz_bin() {
    local dir=release
    [ "$FUZZ_PROFILE" = dev ] && dir=debug
    echo "$FUZZ_DIR/x86_64-unknown-linux-gnu/$dir/$1"
}

# Value of a libFuzzer final statistic (`stat::NAME: value`) in a log.
fuzz_stat() {
    sed -n "s/^stat::$2:[[:space:]]*//p" "$1" | tail -1
}

FUZZ_FAILED=0
FUZZ_ROWS=()
# Targets run at once by fuzz_run (each libFuzzer process is single-threaded).
FUZZ_JOBS=${SIDEKICK_FUZZ_JOBS:-1}

# Runs crate/target for $2 seconds (extra libFuzzer flags after) and records a summary row.
fuzz_run_one() {
    local spec=$1 secs=$2
    shift 2
    local c=${spec%%/*} t=${spec#*/}
    local bin seeds work artifacts log rc=0 result execs rate corpus start elapsed
    bin=$(fuzz_bin "$t")
    seeds="$FUZZ_ROOT/$c/fuzz/corpus/$t"
    work="$FUZZ_DIR/${FUZZ_WORK:-corpus}/$t"
    artifacts="$FUZZ_ROOT/$c/fuzz/artifacts/$t"
    log="$FUZZ_DIR/logs/$t.log"
    mkdir -p "$seeds" "$work" "$artifacts" "${log%/*}"
    local runs=()
    [ -n "${SIDEKICK_FUZZ_RUNS:-}" ] && runs=("-runs=$SIDEKICK_FUZZ_RUNS")
    start=$(date +%s)
    "$bin" "$work" "$seeds" -max_total_time="$secs" "${runs[@]}" -rss_limit_mb="$FUZZ_RSS_MB" \
        -timeout="$FUZZ_TIMEOUT" -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" \
        >"$log" 2>&1 || rc=$?
    elapsed=$(($(date +%s) - start))
    if grep -q 'ERROR: libFuzzer: timeout' "$log"; then
        result=timeout
    elif grep -qE 'ERROR: libFuzzer: out-of-memory|ERROR: libFuzzer: malloc limit' "$log"; then
        result=oom
    elif grep -q 'ERROR: LeakSanitizer' "$log"; then
        result=leak
    elif [ "$rc" -ne 0 ]; then
        result="crash (exit $rc)"
    else
        result=ok
    fi
    execs=$(fuzz_stat "$log" number_of_executed_units)
    rate=$(fuzz_stat "$log" average_exec_per_sec)
    corpus=$(find "$work" -type f | wc -l)
    [ "$result" = ok ] || FUZZ_FAILED=1
    FUZZ_ROWS+=("$(printf '%-26s %12s %8s %9s %7s  %s' "$spec" "${execs:-?}" "${elapsed}s" \
        "${rate:-?}" "$corpus" "$result")")
    # Run in the background by fuzz_run (FUZZ_JOBS > 1): the row goes back through a file.
    if [ -n "${FUZZ_ROW_FILE:-}" ]; then
        printf '%s\n' "${FUZZ_ROWS[-1]}" >"$FUZZ_ROW_FILE"
        [ "$result" = ok ] || touch "$FUZZ_ROW_FILE.failed"
    fi
    if [ "$result" != ok ]; then
        echo "fuzz: $spec: $result; log $log, input in $artifacts/" >&2
        grep -m1 -A12 -E 'panicked at|ERROR: ' "$log" >&2 || tail -20 "$log" >&2
    fi
}

fuzz_summary() {
    printf '\n%-26s %12s %8s %9s %7s  %s\n' target executions time exec/s corpus result
    printf '%s\n' "${FUZZ_ROWS[@]}"
}

# Runs the targets matching $1 (a target name, crate/target, or "all") for $2 seconds each.
fuzz_run() {
    local want=${1:-all} secs=${2:-60} spec found=0
    shift 2 || shift $#
    fuzz_setup
    local crates_built=() rows=() rows_dir
    rows_dir=$(mktemp -d)
    for spec in $(fuzz_list); do
        if [ "$want" = all ] || [ "$want" = "${spec#*/}" ] || [ "$want" = "$spec" ]; then
            found=1
            local c=${spec%%/*}
            if [ -z "${SIDEKICK_FUZZ_NO_BUILD:-}" ] && [[ " ${crates_built[*]} " != *" $c "* ]]; then
                fuzz_build_crate "$c"
                crates_built+=("$c")
            fi
            echo "fuzz: $spec for ${secs}s" >&2
            if [ "$FUZZ_JOBS" -le 1 ]; then
                fuzz_run_one "$spec" "$secs" "$@"
                continue
            fi
            # At most FUZZ_JOBS at once; rows are collected in the targets' order below.
            while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do
                wait -n || true
            done
            rows+=("$rows_dir/${#rows[@]}")
            FUZZ_ROW_FILE=${rows[-1]} fuzz_run_one "$spec" "$secs" "$@" &
        fi
    done
    if [ "$FUZZ_JOBS" -gt 1 ]; then
        wait
        local f
        for f in "${rows[@]}"; do
            # A job that died before writing its row (killed, out of disk) is a failure too.
            if [ -s "$f" ]; then FUZZ_ROWS+=("$(cat "$f")"); else FUZZ_FAILED=1; fi
            [ -e "$f.failed" ] && FUZZ_FAILED=1
        done
    fi
    rm -rf "$rows_dir"
    if [ "$found" -eq 0 ]; then
        echo "fuzz: no target '$want'; targets:" >&2
        fuzz_list >&2
        return 2
    fi
    fuzz_summary
    return "$FUZZ_FAILED"
}

# The smoke stage of scripts/test.sh: every target builds and survives a few seconds from its
# seeds.
fuzz_smoke() {
    local start
    start=$(date +%s)
    FUZZ_PROFILE=${SIDEKICK_FUZZ_PROFILE:-dev}
    # From the committed seeds only, as in a clean clone: the campaigns' corpora (thousands of
    # inputs) would take an unoptimised build longer to replay than the smoke's seconds.
    FUZZ_WORK=smoke-corpus
    rm -rf "${FUZZ_DIR:?}/smoke-corpus"
    fuzz_build
    echo "fuzz: build $(($(date +%s) - start))s"
    # Built just now: no second cargo pass per crate. One target per core.
    SIDEKICK_FUZZ_NO_BUILD=1 FUZZ_JOBS=${SIDEKICK_FUZZ_JOBS:-$(nproc)} fuzz_run all "$FUZZ_SMOKE_SECONDS"
    echo "fuzz: smoke $(($(date +%s) - start))s in total"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case "${1:-all}" in
        --list) fuzz_list ;;
        --setup) fuzz_setup ;;
        --build) fuzz_build ;;
        --smoke) fuzz_smoke ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
        *) fuzz_run "$@" ;;
    esac
fi

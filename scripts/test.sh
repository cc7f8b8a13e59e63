#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/integration/doc tests, C tests, lab tests.
# This is what CI runs (.ci/run). Lab tests need root (network namespaces); without root they are
# reported as skipped, in CI they run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage prints the seconds since the start (the CI log shows where the time goes).
stage() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

stage "setup"
bash scripts/setup.sh

stage "cargo fmt --check"
cargo fmt --all --check

stage "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

stage "go: the quic-go RTC server and transfer (examples/quic-go)"
(cd examples/quic-go && test -z "$(gofmt -l .)" && go vet ./... && go test ./...)
bash scripts/build-quicgo.sh
# examples/tests/rtc.rs and transfer_stacks.rs run them against the quinn and quiche binaries
# (and ngtcp2's, which scripts/setup.sh installs); here a missing binary fails.
export SIDEKICK_REQUIRE_QUICGO=1 SIDEKICK_REQUIRE_NGTCP2=1

stage "cargo test --no-run: the workspace's test build"
cargo test --workspace --locked --no-run

stage "curl: HTTP/3 libcurl from registry sources (cached under the target directory)"
# curl on the quiche C library and BoringSSL the test build just made: cold, the curl build
# alone (cmake); cached: 0.03 s.
bash scripts/build-curl.sh
# bindings/tests/curl_adapter.rs runs the curl adapter's C test against it; here a missing
# libcurl or server binary fails instead of skipping.
export SIDEKICK_REQUIRE_CURL=1

stage "cargo test"
cargo test --workspace --locked

# The fuzz smoke: every cargo-fuzz target builds and survives its seeds for a few seconds.
# Every crate's targets but the examples': their instrumented build pulls in quiche, quinn, h3,
# str0m and tokio, more than half of the fuzz build's cold CPU time (docs/fuzzing.md), so
# `scripts/fuzz.sh` smokes them on demand; their bodies are library functions whose committed
# seeds replay on stable in `cargo test` above.
SIDEKICK_FUZZ_CRATES="${SIDEKICK_FUZZ_CRATES:-wire quack eack protocol proxy client-sdk bindings interop}"
export SIDEKICK_FUZZ_CRATES
fuzz_log="${CARGO_TARGET_DIR:-target}/fuzz-smoke.log"
# Starts the smoke in the background in its own process group (stopped with the script), with
# `nice` arguments in front (none for the default priority); fuzz_smoke_report waits for it.
fuzz_smoke_start() {
    setsid -w "$@" bash -c 'source scripts/fuzz.sh && fuzz_smoke' >"$fuzz_log" 2>&1 &
    fuzz_pid=$!
    trap 'kill -- -"$fuzz_pid" 2>/dev/null || true' EXIT
}
# Prints the smoke's log and its outcome; returns the smoke's exit status.
fuzz_smoke_report() {
    local rc=0
    wait "$fuzz_pid" || rc=$?
    trap - EXIT
    stage "fuzz smoke: finished (log $fuzz_log)"
    cat "$fuzz_log"
    [ "$rc" -eq 0 ] || echo "fuzz smoke: FAILED (exit $rc)"
    return "$rc"
}

stage "lab tests (network namespaces, root), the fuzz smoke beside them at nice 19"
if [ "$(id -u)" -eq 0 ]; then
    # The lab tests mostly wait on emulated links and real-time calls, while the smoke's build
    # and runs (about 3 minutes) are CPU-bound: at nice 19 it takes what the lab leaves idle.
    fuzz_smoke_start nice -n 19
    # The lab tests launch sidekick-transfer and sidekick-proxy from the same debug build that
    # `cargo test --workspace` just made (it builds every package's binaries for its integration
    # tests); selecting the whole workspace again keeps the feature set, so nothing is rebuilt.
    # sidekick-curl for the curl lab tests, linked with the debug C library just built (cc only).
    SIDEKICK_CAPI_PROFILE=debug bash scripts/build-sidekick-curl.sh
    # netns_hardening (~8 s): capabilities dropped, sd_notify, bridge mode failing open.
    # netns_reload: SIGHUP reloads the live keys in every worker, sessions kept.
    # lab_stacks (~50 s): one download per quic-go / ngtcp2 server x client pair.
    SIDEKICK_LAB=1 cargo test --workspace --locked --test lab --test lab_webrtc --test lab_webrtc_browser --test lab_multicast --test lab_tcp --test lab_both --test lying_proxy \
        --test lab_handshake \
        --test afpacket --test netns_e2e --test netns_flood \
        --test netns_hardening --test netns_reload --test lab_stacks -- --test-threads=1
    sidekick_lab_bin="${CARGO_TARGET_DIR:-target}/debug/sidekick-lab"
    # Only dead runs: other lab runs on this machine (an experiment, another checkout's tests)
    # may be live, and `clean --all` would break them.
    "$sidekick_lab_bin" clean
    fuzz_smoke_report
else
    echo "lab tests: skipped (need root for network namespaces; run as root, as CI does)"
    fuzz_smoke_start
    fuzz_smoke_report
fi
stage "done"

#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/integration/doc tests, C tests, lab tests.
# This is what CI runs (.ci/run). Lab tests need root (network namespaces); without root they are
# reported as skipped, in CI they run.
set -euo pipefail
cd "$(dirname "$0")/.."

stage() { printf '\n==> %s\n' "$*"; }

stage "setup"
bash scripts/setup.sh

stage "cargo fmt --check"
cargo fmt --all --check

stage "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

stage "go: the quic-go RTC server (examples/quic-go)"
(cd examples/quic-go && test -z "$(gofmt -l .)" && go vet ./... && go test ./...)
bash scripts/build-quicgo.sh
# examples/tests/rtc.rs runs it against the quinn and quiche clients; here a missing binary fails.
export SIDEKICK_REQUIRE_QUICGO=1

stage "cargo test"
cargo test --workspace --locked

stage "fuzz smoke: every cargo-fuzz target builds and survives its seeds for a few seconds"
source scripts/fuzz.sh && fuzz_smoke

stage "lab tests (network namespaces, root)"
if [ "$(id -u)" -eq 0 ]; then
    # The lab tests launch sidekick-transfer and sidekick-proxy from the same debug build that
    # `cargo test --workspace` just made (it builds every package's binaries for its integration
    # tests); selecting the whole workspace again keeps the feature set, so nothing is rebuilt.
    SIDEKICK_LAB=1 cargo test --workspace --locked --test lab --test afpacket --test netns_e2e \
        -- --test-threads=1
    sidekick_lab_bin="${CARGO_TARGET_DIR:-target}/debug/sidekick-lab"
    "$sidekick_lab_bin" clean --all
else
    echo "lab tests: skipped (need root for network namespaces; run as root, as CI does)"
fi

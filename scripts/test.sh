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

stage "cargo test"
cargo test --workspace --locked

#!/usr/bin/env bash
# Builds the quic-go RTC server (examples/quic-go) as OUTDIR/sidekick-rtc-quicgo, beside the
# Rust binaries the lab runs (default: the cargo target's debug directory). Go modules come from
# the Go module proxy (go.sum pins them).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${CARGO_TARGET_DIR:-target}/debug}"
if ! command -v go >/dev/null 2>&1; then
    echo "build-quicgo: go not found (install Go >= 1.26 to build the quic-go server)" >&2
    exit 1
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd examples/quic-go
go build -trimpath -o "$out/sidekick-rtc-quicgo" .
echo "build-quicgo: $out/sidekick-rtc-quicgo"

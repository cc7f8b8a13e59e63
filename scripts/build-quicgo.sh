#!/usr/bin/env bash
# Builds the quic-go programs (examples/quic-go) beside the Rust binaries the lab runs: the RTC
# server OUTDIR/sidekick-rtc-quicgo and the transfer server/client (examples/quic-go/transfer)
# OUTDIR/sidekick-transfer-quicgo (default OUTDIR: the cargo target's debug directory). Go modules
# come from the Go module proxy (go.sum pins them).
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
# Build beside the target and rename over it: a target directory hard-linked to another
# checkout's (cp -al) keeps the other's binary intact.
build() {
    go build -trimpath -o "$out/.$1.tmp" "$2"
    mv -f "$out/.$1.tmp" "$out/$1"
}
build sidekick-rtc-quicgo .
build sidekick-transfer-quicgo ./transfer
echo "build-quicgo: $out/sidekick-rtc-quicgo $out/sidekick-transfer-quicgo"

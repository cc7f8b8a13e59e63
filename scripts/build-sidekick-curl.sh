#!/usr/bin/env bash
# Builds the curl adapter's example program `sidekick-curl` (bindings/curl/) as
# OUTDIR/sidekick-curl, beside the Rust binaries the lab runs (default: the cargo target's debug
# directory). It links the HTTP/3 libcurl of scripts/build-curl.sh (built or taken from its
# cache; the binary finds libcurl and libquiche through its RUNPATH) and the C API's static
# library (by default the release build: cargo build --release -p sidekick-capi).
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
out="${1:-$target_dir/debug}"
mkdir -p "$out" "$target_dir"
out="$(cd "$out" && pwd)"
target_dir="$(cd "$target_dir" && pwd)"
prefix="$(bash scripts/build-curl.sh | tail -1)"
# SIDEKICK_CAPI_PROFILE=debug links the debug library that `cargo test --workspace` just left
# in target/debug/deps (scripts/test.sh, for the lab tests) instead of building the release one.
profile="${SIDEKICK_CAPI_PROFILE:-release}"
lib="$target_dir/$profile/libsidekick_capi.a"
if [ "$profile" = release ]; then
    cargo build --release -p sidekick-capi --quiet
elif [ -f "$target_dir/$profile/deps/libsidekick_capi.a" ]; then
    lib="$target_dir/$profile/deps/libsidekick_capi.a"
else
    cargo build -p sidekick-capi --quiet
fi
cc="${CC:-cc}"
"$cc" -std=c11 -O2 -Wall -Wextra -Werror \
    -I bindings/include -I bindings/curl -I "$prefix/include" \
    bindings/curl/sidekick_curl_main.c bindings/curl/sidekick_curl.c \
    "$lib" \
    -L "$prefix/lib" -Wl,-rpath,"$prefix/lib" -lcurl -lpthread -ldl -lm -lstdc++ \
    -o "$out/sidekick-curl"
echo "build-sidekick-curl: $out/sidekick-curl" >&2

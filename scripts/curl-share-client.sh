#!/usr/bin/env bash
# Two libcurl HTTP/3 uploads at once through the same links, for the throughput share of a
# sidekick flow against a plain CUBIC flow (bindings/README.md, "Congestion response"): the lab
# runs it in place of sidekick-curl (SIDEKICK_SIDEKICK_CURL=$PWD/scripts/curl-share-client.sh,
# scenarios/curl-share.toml). It takes sidekick-curl's arguments; with --sidekick the first flow
# runs the adapter (Robin) and the second stays plain, without it both are plain. Prints one
# JSON line: goodput_mbps (first flow), other_goodput_mbps (second), share_pct (first / sum).
set -euo pipefail
here="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
bin="${SIDEKICK_CURL_BIN:-${CARGO_TARGET_DIR:-$here/target}/debug/sidekick-curl}"
first=() second=()
for a in "$@"; do
    first+=("$a")
    [ "$a" = --sidekick ] || second+=("$a")
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" "${first[@]}" >"$tmp/a" &
a=$!
"$bin" "${second[@]}" >"$tmp/b" &
b=$!
rc=0
wait "$a" || rc=1
wait "$b" || rc=1
goodput() { grep -o '"goodput_mbps":[0-9.]*' "$1" | head -1 | cut -d: -f2; }
ga="$(goodput "$tmp/a")"
gb="$(goodput "$tmp/b")"
[ -n "$ga" ] && [ -n "$gb" ] || { cat "$tmp/a" "$tmp/b" >&2; exit 1; }
share="$(awk -v a="$ga" -v b="$gb" 'BEGIN { printf "%.2f", (a + b > 0) ? 100 * a / (a + b) : 0 }')"
sidekick="$(grep -o '"sidekick":{[^}]*}' "$tmp/a" || true)"
printf '{"stack":"curl-pair","goodput_mbps":%s,"other_goodput_mbps":%s,"share_pct":%s%s}\n' \
    "$ga" "$gb" "$share" "${sidekick:+,$sidekick}"
exit "$rc"

#!/usr/bin/env bash
# Sets up the aioquic transfer client (examples/aioquic) beside the Rust binaries the lab runs:
# a virtual environment under the cargo target directory with aioquic from PyPI (the version
# examples/aioquic/requirements.txt pins), and the launcher OUTDIR/sidekick-transfer-aioquic
# (default OUTDIR: the target's debug directory). Idempotent: the environment is reused while
# it has the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
target="${CARGO_TARGET_DIR:-target}"
out="${1:-$target/debug}"
mkdir -p "$out" "$target"
out="$(cd "$out" && pwd)"
venv="$(cd "$target" && pwd)/aioquic-venv"
req="$root/examples/aioquic/requirements.txt"
want="$(grep -o '^aioquic==[0-9.]*' "$req")"
if ! "$venv/bin/python" -c "import aioquic, sys; sys.exit(aioquic.__version__ != '${want#aioquic==}')" 2>/dev/null; then
    if ! python3 -m venv "$venv" 2>/dev/null; then
        echo "build-aioquic: python3 -m venv failed (install python3-venv)" >&2
        exit 1
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
fi
launcher="$out/sidekick-transfer-aioquic"
cat > "$launcher.tmp" <<LAUNCHER
#!/bin/sh
exec "$venv/bin/python" "$root/examples/aioquic/sidekick_transfer_aioquic.py" "\$@"
LAUNCHER
chmod +x "$launcher.tmp"
mv -f "$launcher.tmp" "$launcher"
echo "build-aioquic: $launcher ($want)"

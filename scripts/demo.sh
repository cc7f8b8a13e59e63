#!/usr/bin/env bash
# The main job: the lab demo. Builds the lab, the proxy and the applications (release), then runs
# the `demo` scenario (interop/scenarios/demo.toml) in network namespaces on an emulated lossy
# link and prints a per-variant goodput table; results and plots go to ./demo-results/.
# Needs root (network namespaces). Extra arguments go to `sidekick-lab demo` (e.g. --trials 5).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "demo: needs root for network namespaces; run: sudo $0" >&2
    exit 1
fi

bash scripts/setup.sh
cargo build --release --locked -p sidekick-lab -p sidekick-examples -p sidekick-proxy
bin="${CARGO_TARGET_DIR:-target}/release"
# Leftovers of an interrupted earlier run would not disturb this one (names are unique), but clean
# them so the machine stays tidy; live runs (an experiment running beside the demo) are left alone.
"$bin/sidekick-lab" clean
exec "$bin/sidekick-lab" demo --bin-dir "$bin" --plot demo-results "$@"

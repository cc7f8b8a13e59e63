#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/integration/doc tests, C tests, lab tests.
# This is what CI runs (.ci/run). Lab tests need root (network namespaces); without root they are
# reported as skipped, in CI they run.
#
# The fuzz smoke and clippy run beside the lab lanes at nice 19: those mostly wait on emulated
# links and real-time calls (in a cold run here the foreground used a sixth of the two cores
# during them), while the builds are CPU-bound. Their logs and results come after the lanes, and
# the lab tests that measure the machine run after them, alone. (Clippy beside `cargo test` cost
# a loopback test its timing: quinn_sidekick's proxy-death test fell back on inconsistent quACKs
# once in three runs; so not there. Without root there are no lanes and clippy runs in front.)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage prints the seconds since the start (the CI log shows where the time goes).
stage() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
# Background jobs (name -> pid), each in its own process group, stopped if this script exits
# early.
declare -A background_pid=()
trap 'for p in "${background_pid[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT
# background NAME CMD...: runs CMD at nice 19, its output in $target/NAME.log.
background() {
    local name=$1
    shift
    setsid -w nice -n 19 "$@" >"$target/$name.log" 2>&1 &
    background_pid[$name]=$!
}
# finish NAME: waits for the job and prints its log; returns the job's status.
finish() {
    local name=$1 rc=0
    wait "${background_pid[$name]}" || rc=$?
    stage "$name: finished beside the tests (log $target/$name.log)"
    cat "$target/$name.log"
    [ "$rc" -eq 0 ] || echo "$name: FAILED (exit $rc)"
    return "$rc"
}

stage "setup"
bash scripts/setup.sh

stage "cargo fmt --check"
cargo fmt --all --check

clippy=(cargo clippy --workspace --all-targets --locked -- -D warnings)
if [ "$(id -u)" -ne 0 ]; then
    stage "cargo clippy"
    "${clippy[@]}"
fi

stage "go: the quic-go RTC server and transfer (examples/quic-go)"
(cd examples/quic-go && test -z "$(gofmt -l .)" && go vet ./... && go test ./...)
bash scripts/build-quicgo.sh
# The aioquic download client (Python, from PyPI) in a virtual environment under target/.
bash scripts/build-aioquic.sh
# The kwik transfer application (Java, kwik from Maven Central), built under target/.
bash scripts/build-kwik.sh
# examples/tests/rtc.rs and transfer_stacks.rs run them against the quinn and quiche binaries
# (and ngtcp2's, which scripts/setup.sh installs); here a missing binary fails.
export SIDEKICK_REQUIRE_QUICGO=1 SIDEKICK_REQUIRE_NGTCP2=1 SIDEKICK_REQUIRE_AIOQUIC=1 SIDEKICK_REQUIRE_KWIK=1

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

# The fuzz smoke: every cargo-fuzz target of every crate builds and survives its seeds for a few
# seconds (the examples' targets build the wire formats without the stacks: docs/fuzzing.md);
# beside the lab tests that costs idle time only.
stage "lab tests (network namespaces, root), the fuzz smoke and clippy beside them (nice 19)"
background fuzz-smoke bash -c 'source scripts/fuzz.sh && fuzz_smoke'
fuzz_rc=0 fuzz_finished=0 clippy_rc=0
if [ "$(id -u)" -eq 0 ]; then
    # The lab tests launch sidekick-transfer and sidekick-proxy from the same debug build that
    # `cargo test --workspace` just made (it builds every package's binaries for its integration
    # tests); selecting the whole workspace again keeps the feature set, so nothing is rebuilt.
    # sidekick-curl for the curl lab tests, linked with the debug C library just built (cc only).
    SIDEKICK_CAPI_PROFILE=debug bash scripts/build-sidekick-curl.sh
    # The lab tests mostly wait on emulated links and real-time calls (the foreground used a sixth
    # of the two cores), so they run in two lanes at once, then alone the four that measure the
    # machine itself: the handshake rescue's milliseconds, Chromium's decoding, AF_PACKET's capture
    # rate, the flood's memory. Each run is named by its own run id (namespaces, state), so lanes
    # never touch each other's runs; the proxy's netns tests share a lane (their client end sits
    # in this namespace). The executables are those `cargo test --workspace` just built (same
    # feature set: nothing is rebuilt); `cargo test` itself would hold the build directory.
    #   lying_proxy (~330 s): every lie against upload, download, curl and both WebRTC calls.
    #   lab (~145 s), lab_stacks (~75 s: one download per quic-go / ngtcp2 pair, kwik through PEMI), lab_webrtc
    #   (~40 s), netns_hardening (~8 s: capabilities dropped, sd_notify, bridge mode failing
    #   open), netns_reload (SIGHUP reloads the live keys in every worker, sessions kept).
    lane_a=(lying_proxy)
    lane_b=(lab lab_both lab_multicast lab_stacks lab_tcp lab_webrtc netns_e2e netns_bridge netns_hardening netns_reload)
    alone=(lab_handshake lab_webrtc_browser afpacket netns_flood)
    declare -A lab_exe=() lab_dir=()
    while IFS=$'\t' read -r name exe dir; do
        lab_exe[$name]=$exe
        lab_dir[$name]=$dir
    done < <(cargo test --workspace --locked --no-run --message-format=json \
        $(printf -- '--test %s ' "${lane_a[@]}" "${lane_b[@]}" "${alone[@]}") |
        jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
            | [.target.name, .executable, (.manifest_path | rtrimstr("/Cargo.toml"))] | @tsv')
    # lane_args TEST...: EXE DIR pairs for scripts/lab-lane.sh.
    lane_args() {
        local t
        for t in "$@"; do
            [ -n "${lab_exe[$t]:-}" ] || { echo "lab test $t: no executable" >&2; return 1; }
            printf '%s\n%s\n' "${lab_exe[$t]}" "${lab_dir[$t]}"
        done
    }
    mapfile -t args_a < <(lane_args "${lane_a[@]}")
    mapfile -t args_b < <(lane_args "${lane_b[@]}")
    mapfile -t args_alone < <(lane_args "${alone[@]}")
    [ "${#args_a[@]}" -eq $((2 * ${#lane_a[@]})) ] && [ "${#args_b[@]}" -eq $((2 * ${#lane_b[@]})) ] &&
        [ "${#args_alone[@]}" -eq $((2 * ${#alone[@]})) ] || { echo "lab tests: executables missing"; exit 1; }
    # Clippy only now: it holds the build directory's lock, which the listing above needs.
    background clippy "${clippy[@]}"
    lab_failed=0
    setsid -w bash scripts/lab-lane.sh "$target/lab-lane-a.log" "${args_a[@]}" &
    background_pid[lab-lane-a]=$!
    setsid -w bash scripts/lab-lane.sh "$target/lab-lane-b.log" "${args_b[@]}" &
    background_pid[lab-lane-b]=$!
    for lane in a b; do
        rc=0
        wait "${background_pid[lab-lane-$lane]}" || rc=$?
        stage "lab lane $lane: finished (log $target/lab-lane-$lane.log)"
        cat "$target/lab-lane-$lane.log"
        lab_failed=$((lab_failed + rc))
    done
    # Alone means without the fuzz smoke and clippy too: the handshake rescue's TTFB, timed
    # beside a cold fuzz build, once came out 86–150 ms instead of 30.
    finish fuzz-smoke || fuzz_rc=$?
    fuzz_finished=1
    finish clippy || clippy_rc=$?
    stage "lab tests that measure the machine, alone"
    rc=0
    bash scripts/lab-lane.sh "$target/lab-alone.log" "${args_alone[@]}" || rc=$?
    cat "$target/lab-alone.log"
    lab_failed=$((lab_failed + rc))
    sidekick_lab_bin="$target/debug/sidekick-lab"
    # Only dead runs: other lab runs on this machine (an experiment, another checkout's tests)
    # may be live, and `clean --all` would break them.
    "$sidekick_lab_bin" clean
    if [ "$lab_failed" -ne 0 ]; then
        echo "lab tests: $lab_failed test binaries FAILED (grep FAILED in the logs above)"
        exit 1
    fi
else
    echo "lab tests: skipped (need root for network namespaces; run as root, as CI does)"
fi

if [ "$fuzz_finished" -eq 0 ]; then
    finish fuzz-smoke || fuzz_rc=$?
fi
stage "done"
[ "$clippy_rc" -eq 0 ] || { echo "cargo clippy: FAILED (log above)"; exit "$clippy_rc"; }
exit "$fuzz_rc"

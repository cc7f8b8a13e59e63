#!/usr/bin/env bash
# Installs what building, testing and the lab need. Idempotent: installs only what is missing.
set -euo pipefail

need_apt=()
# ngtcp2-client / ngtcp2-server: ngtcp2's HTTP/3 example programs (gtlsclient, gtlsserver), a
# transfer stack of the lab (app.stack / app.client_stack = "ngtcp2"). libvpx-dev: the VP8 encoder of
# sidekick-webrtc (a browser far peer decodes real frames); chromium: that browser (webrtc-browser).
# jq: scripts/test.sh reads the lab test executables from cargo's JSON messages.
# libclang-dev: bindgen in the boring-sys crate (the BoringSSL of quiche >= 0.25) loads libclang.
# python3-venv: the aioquic client's environment (scripts/build-aioquic.sh, aioquic from PyPI).
# openjdk-17-jdk-headless, maven: the kwik transfer application (scripts/build-kwik.sh, kwik from
# Maven Central).
for pkg in build-essential cmake pkg-config perl jq libssl-dev libclang-dev iproute2 nftables ethtool iputils-ping procps fonts-dejavu-core ngtcp2-client ngtcp2-server libvpx-dev chromium python3-venv openjdk-17-jdk-headless maven; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    echo "setup: installing apt packages: ${need_apt[*]}"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust with rustup first" >&2
    exit 1
fi
for comp in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$comp" || rustup component add "$comp"
done

# The fuzz smoke of scripts/test.sh: the nightly toolchain and cargo-fuzz.
bash "$(dirname "$0")/fuzz.sh" --setup

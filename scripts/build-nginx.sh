#!/usr/bin/env bash
# Builds an HTTP/3 nginx from registry sources, cached under the cargo target directory
# (TARGET/nginx-h3/prefix/sbin/nginx): the nginx sources the `nginx-src` crate ships (nginx
# 1.28 with its QUIC stack, src/event/quic/), unpacked as crates.io serves them and configured
# with --with-http_v3_module against Debian's OpenSSL 3.0 (nginx's OpenSSL compatibility layer
# for QUIC: no 0-RTT). Nothing is patched. Needs a C compiler, make and libssl-dev
# (scripts/setup.sh). Idempotent: a second run returns at once. Prints the prefix last.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
nginx_src_version="1.28.5"

target_dir="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
out="$target_dir/nginx-h3"
prefix="$out/prefix"
stamp="$prefix/.built-nginx-src-$nginx_src_version-$(sha256sum "$0" | cut -c1-16)"
log() { echo "build-nginx: $*" >&2; }

if [ -f "$stamp" ] && [ -x "$prefix/sbin/nginx" ]; then
    log "cached: $prefix ($("$prefix/sbin/nginx" -v 2>&1))"
    echo "$prefix"
    exit 0
fi
start=$(date +%s)

# The crate, through cargo (a throwaway manifest; cargo metadata says where it was unpacked).
fetch="$out/fetch"
mkdir -p "$fetch/src"
cat >"$fetch/Cargo.toml" <<TOML
[package]
name = "sidekick-nginx-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
nginx-src = "=$nginx_src_version"

[workspace]
TOML
echo "" >"$fetch/src/lib.rs"
crate_dir="$(cargo metadata --format-version 1 --manifest-path "$fetch/Cargo.toml" | perl -MJSON::PP -e '
    my $m = decode_json(join "", <STDIN>);
    for my $p (@{$m->{packages}}) {
        if ($p->{name} eq "nginx-src") { (my $d = $p->{manifest_path}) =~ s{/Cargo\.toml$}{}; print $d; exit 0 }
    }
    exit 1')"
[ -f "$crate_dir/nginx/auto/configure" ] && [ -d "$crate_dir/nginx/src/event/quic" ] \
    || { log "nginx-src $nginx_src_version has no nginx/auto/configure or QUIC sources"; exit 1; }

src="$out/src"
rm -rf "$src"
cp -a "$crate_dir/nginx" "$src"
cd "$src"
# rewrite (PCRE) and gzip are not needed to serve files over HTTP/3.
./auto/configure --prefix="$prefix" --with-http_ssl_module --with-http_v3_module \
    --without-http_rewrite_module --without-http_gzip_module >"$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log" >&2; exit 1; }
make -j "${SIDEKICK_BUILD_JOBS:-$(nproc)}" >"$out/make.log" 2>&1 || { tail -30 "$out/make.log" >&2; exit 1; }
rm -rf "$prefix"
make install >/dev/null
"$prefix/sbin/nginx" -V 2>&1 | grep -q -- '--with-http_v3_module' || { log "no HTTP/3 module"; exit 1; }
touch "$stamp"
log "built in $(( $(date +%s) - start )) s: $("$prefix/sbin/nginx" -v 2>&1)"
echo "$prefix"

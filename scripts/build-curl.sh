#!/usr/bin/env bash
# Builds an HTTP/3 libcurl and curl tool from registry sources, cached under the cargo target
# directory (TARGET/curl-h3/prefix: bin/curl, lib/libcurl.so, lib/libquiche.so, include/):
#
#   - curl: the sources the `curl-sys` crate ships (its `curl/` directory: CMake build, lib/,
#     src/), unpacked as crates.io serves them; nothing is patched;
#   - QUIC and HTTP/3: the `quiche` crate's C API (cargo feature `ffi`) as a shared library,
#     with the BoringSSL that the `boring-sys` crate builds for it (quiche >= 0.25 has no
#     vendored BoringSSL of its own: its default feature `boringssl-boring-crate` takes the one of
#     the `boring` crates), which curl also uses as its TLS library (curl's quiche backend
#     requires BoringSSL).
#
# quiche 0.30's C API suits curl 8.22.0: every quiche_* function cf-quiche.c calls is in
# quiche 0.30's include/quiche.h, and cf-quiche.c already raises the header-section limit that
# quiche 0.29.3 introduced (quiche_h3_config_set_max_field_section_size). curl-sys ships no
# docs/ (so no docs/HTTP3.md); the check is on the sources.
#
# Idempotent: a finished build is recognised by its stamp (crate versions + this script's
# hash) and the script returns at once; a cold build takes several minutes (BoringSSL, quiche,
# curl). Prints the prefix on its last line. Needs cmake, a C/C++ compiler, cargo and perl
# (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

# The versions built. curl-sys's `+curl-X.Y.Z` build metadata names the curl release; quiche is
# the version the workspace pins (Cargo.lock).
curl_sys_version="0.4.91"
quiche_version="0.30.0"

target_dir="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target_dir"
target_dir="$(cd "$target_dir" && pwd)"
out="$target_dir/curl-h3"
prefix="$out/prefix"
script_hash="$(sha256sum "$0" | cut -c1-16)"
stamp="$prefix/.built-curl-sys-$curl_sys_version-quiche-$quiche_version-$script_hash"
jobs="${SIDEKICK_BUILD_JOBS:-$(nproc)}"

log() { echo "build-curl: $*" >&2; }

if [ -f "$stamp" ] && [ -x "$prefix/bin/curl" ]; then
    log "cached: $prefix ($("$prefix/bin/curl" --version | head -1))"
    echo "$prefix"
    exit 0
fi

for tool in cmake cc c++ cargo perl; do
    command -v "$tool" >/dev/null 2>&1 || { log "$tool not found (run scripts/setup.sh)"; exit 1; }
done
start=$(date +%s)

# 1. Fetch both crates with cargo from the registry: a throwaway manifest depending on them
#    exactly, then `cargo metadata` tells where cargo unpacked them.
fetch="$out/fetch"
mkdir -p "$fetch/src"
cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "sidekick-curl-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
curl-sys = { version = "=$curl_sys_version", default-features = false }
quiche = { version = "=$quiche_version", default-features = false }

[workspace]
EOF
echo "" >"$fetch/src/lib.rs"
meta="$(cargo metadata --format-version 1 --manifest-path "$fetch/Cargo.toml")"
crate_dir() {
    # The directory of package $1 in the metadata (manifest_path minus /Cargo.toml).
    printf '%s' "$meta" | perl -MJSON::PP -e '
        my $m = decode_json(join "", <STDIN>);
        for my $p (@{$m->{packages}}) {
            if ($p->{name} eq $ARGV[0]) { (my $d = $p->{manifest_path}) =~ s{/Cargo\.toml$}{}; print $d; exit 0 }
        }
        exit 1' "$1"
}
curl_sys_dir="$(crate_dir curl-sys)"
quiche_dir="$(crate_dir quiche)"
curl_release="$(basename "$curl_sys_dir" | sed -n 's/.*+curl-//p')"
log "curl-sys $curl_sys_version carries curl $curl_release ($curl_sys_dir)"
for f in CMakeLists.txt lib/vquic/cf-quiche.c src/tool_main.c include/curl/curl.h; do
    [ -f "$curl_sys_dir/curl/$f" ] || { log "curl-sys has no curl/$f"; exit 1; }
done

# 2. Unpack copies to build from (the registry's copies stay untouched).
#    Kept between runs (fresh copies would make cargo and CMake rebuild everything).
src="$out/src"
unpacked="$src/.unpacked-curl-sys-$curl_sys_version-quiche-$quiche_version"
if [ ! -f "$unpacked" ]; then
    rm -rf "$src"
    mkdir -p "$src/quiche-ws"
    cp -a "$curl_sys_dir/curl" "$src/curl-$curl_release"
    cp -a "$quiche_dir" "$src/quiche-ws/quiche-$quiche_version"
    touch "$unpacked"
fi

# 3. quiche's C library: the crate is built as a member of a workspace of its own (it lies
#    under this repository's target/, so cargo would otherwise take it for a stray member of
#    the project's workspace), with its own Cargo.lock.
qws="$src/quiche-ws"
cat >"$qws/Cargo.toml" <<EOF
[workspace]
members = ["quiche-$quiche_version"]
resolver = "2"
EOF
cp "$qws/quiche-$quiche_version/Cargo.lock" "$qws/Cargo.lock"
log "building quiche $quiche_version (ffi, BoringSSL of boring-sys)"
(cd "$qws" && cargo build --release -p quiche --features ffi,boringssl-boring-crate \
    --target-dir "$out/quiche-target" -j "$jobs")
qlib="$out/quiche-target/release"
# boring-sys builds BoringSSL under its OUT_DIR: the static libraries somewhere below it, the
# headers it compiled with in boringssl/include.
bssl_ssl="$(find "$qlib/build" -path '*boring-sys-*/out/*' -name libssl.a | head -1)"
bssl_build="$(dirname "$bssl_ssl")"
[ -n "$bssl_ssl" ] && [ -f "$bssl_build/libcrypto.a" ] || { log "BoringSSL libraries not found"; exit 1; }
bssl_include="$(find "$qlib/build" -path '*boring-sys-*/out/boringssl/include' -type d | head -1)"
[ -f "$bssl_include/openssl/ssl.h" ] || { log "BoringSSL headers not found"; exit 1; }

rm -rf "$prefix"
mkdir -p "$prefix/lib"
cp "$qlib/libquiche.so" "$prefix/lib/libquiche.so"
soname="$(objdump -p "$prefix/lib/libquiche.so" 2>/dev/null | awk '/SONAME/ {print $2}')"
[ -n "$soname" ] && [ "$soname" != libquiche.so ] && ln -sf libquiche.so "$prefix/lib/$soname"

# 4. curl with CMake: HTTP/3 over quiche, TLS from the same BoringSSL; optional libraries that
#    the machine may lack are off so the build does not depend on them. curl-sys ships no
#    docs/ directory, which curl's CMakeLists adds whenever it finds Perl (to build the
#    manual): Perl is hidden from CMake.
#    BoringSSL's libssl.a is C++ and needs the C++ runtime at link time, which curl's
#    CMakeLists adds only for Clang with OPENSSL_USE_STATIC_LIBS: the linker flags (of curl's
#    link checks too) carry -lstdc++, before the static libraries, so --no-as-needed keeps it.
#    Without it the check of SSL_set_quic_use_legacy_codepoint fails and curl stops with
#    "QUICTLS API support is missing".
log "building curl $curl_release (USE_QUICHE)"
# A fresh configure: CMake caches the results of its checks (a failed one would stick).
rm -f "$out/curl-build/CMakeCache.txt"
cmake -S "$src/curl-$curl_release" -B "$out/curl-build" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_RPATH="$prefix/lib" \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
    -DBUILD_SHARED_LIBS=ON -DBUILD_STATIC_LIBS=OFF \
    -DBUILD_CURL_EXE=ON -DBUILD_TESTING=OFF -DBUILD_EXAMPLES=OFF \
    -DBUILD_LIBCURL_DOCS=OFF -DBUILD_MISC_DOCS=OFF -DENABLE_CURL_MANUAL=OFF \
    -DCURL_USE_PKGCONFIG=OFF \
    -DCURL_USE_OPENSSL=ON \
    -DOPENSSL_INCLUDE_DIR="$bssl_include" \
    -DOPENSSL_SSL_LIBRARY="$bssl_build/libssl.a" \
    -DOPENSSL_CRYPTO_LIBRARY="$bssl_build/libcrypto.a" \
    -DUSE_QUICHE=ON \
    -DQUICHE_INCLUDE_DIR="$qws/quiche-$quiche_version/include" \
    -DQUICHE_LIBRARY="$prefix/lib/libquiche.so" \
    -DUSE_NGHTTP2=OFF -DUSE_LIBIDN2=OFF -DCURL_USE_LIBPSL=OFF -DCURL_USE_LIBSSH2=OFF \
    -DCURL_BROTLI=OFF -DCURL_ZSTD=OFF -DCURL_ZLIB=OFF -DCURL_DISABLE_LDAP=ON \
    -DCURL_USE_GSSAPI=OFF -DUSE_LIBRTMP=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_Perl=ON \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,--no-as-needed -lstdc++" \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--no-as-needed -lstdc++" \
    >"$out/cmake-configure.log" 2>&1 || { tail -40 "$out/cmake-configure.log" >&2; exit 1; }
cmake --build "$out/curl-build" -j "$jobs" >"$out/cmake-build.log" 2>&1 \
    || { tail -40 "$out/cmake-build.log" >&2; exit 1; }
cmake --install "$out/curl-build" >/dev/null

version="$("$prefix/bin/curl" --version)"
printf '%s\n' "$version" | grep -q '^Features:.* HTTP3' \
    || { log "the built curl does not list HTTP3:"; printf '%s\n' "$version" >&2; exit 1; }
touch "$stamp"
log "built in $(( $(date +%s) - start )) s: $(printf '%s\n' "$version" | head -1)"
echo "$prefix"

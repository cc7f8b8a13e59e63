#!/usr/bin/env bash
# Builds an HTTP/3 libcurl and curl tool from registry sources, cached under the cargo target
# directory (TARGET/curl-h3/prefix: bin/curl, lib/libcurl.so, lib/libquiche.so, include/):
#
#   - curl: the sources the `curl-sys` crate ships (its `curl/` directory: CMake build, lib/,
#     src/), unpacked as crates.io serves them; nothing is patched;
#   - QUIC and HTTP/3: the `quiche` crate's C API (cargo feature `ffi`, which the workspace turns
#     on) as the shared library the workspace's own test build makes of it (quiche declares
#     `cdylib` among its crate types), with the BoringSSL that the `boring-sys` crate builds for
#     it (quiche >= 0.25 has no vendored BoringSSL of its own: its default feature
#     `boringssl-boring-crate` takes the one of the `boring` crates), which curl also uses as its
#     TLS library (curl's quiche backend requires BoringSSL). Taking both from the workspace's
#     build, not a build of their own, spares a CI run a second BoringSSL and quiche build.
#
# quiche 0.30's C API suits curl 8.22.0: every quiche_* function cf-quiche.c calls is in
# quiche 0.30's include/quiche.h, and cf-quiche.c already raises the header-section limit that
# quiche 0.29.3 introduced (quiche_h3_config_set_max_field_section_size). curl-sys ships no
# docs/ (so no docs/HTTP3.md); the check is on the sources.
#
# Idempotent: a finished build is recognised by its stamp (crate versions + this script's
# hash) and the script returns at once. Otherwise it runs the workspace's test build
# (`cargo test --workspace --locked --no-run`, as scripts/test.sh does just before: then it only
# reports its artifacts) and builds curl (about half a minute). Not from inside a `cargo test`
# run: cargo holds the target directory. Prints the prefix on its last line. Needs cmake, a C/C++
# compiler, cargo and perl (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

# The versions built. curl-sys's `+curl-X.Y.Z` build metadata names the curl release; quiche is
# the version the workspace pins (Cargo.lock).
curl_sys_version="0.4.91"
quiche_version="$(awk '/^name = "quiche"$/ { getline; gsub(/"/, "", $3); print $3; exit }' Cargo.lock)"
[ -n "$quiche_version" ] || { echo "build-curl: no quiche in Cargo.lock" >&2; exit 1; }

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

# 1. Fetch curl-sys with cargo from the registry: a throwaway manifest depending on it exactly,
#    then `cargo metadata` tells where cargo unpacked it.
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
curl_release="$(basename "$curl_sys_dir" | sed -n 's/.*+curl-//p')"
log "curl-sys $curl_sys_version carries curl $curl_release ($curl_sys_dir)"
for f in CMakeLists.txt lib/vquic/cf-quiche.c src/tool_main.c include/curl/curl.h; do
    [ -f "$curl_sys_dir/curl/$f" ] || { log "curl-sys has no curl/$f"; exit 1; }
done

src="$out/src"
unpacked="$src/.unpacked-curl-sys-$curl_sys_version"
if [ ! -f "$unpacked" ]; then
    rm -rf "$src"
    mkdir -p "$src"
    cp -a "$curl_sys_dir/curl" "$src/curl-$curl_release"
    touch "$unpacked"
fi

# 2. quiche's shared library, its sources (include/quiche.h) and boring-sys's BoringSSL, from
#    the artifacts of the workspace's test build (the same command as scripts/test.sh's, so
#    nothing is built twice).
log "the workspace's test build: quiche $quiche_version (ffi) and boring-sys's BoringSSL"
artifacts="$out/workspace-artifacts.json"
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$artifacts"
artifact() {
    WANT="$1" perl -MJSON::PP -ne '
        my $m = eval { decode_json($_) } or next;
        my ($r, $w) = ($m->{reason} // "", $ENV{WANT});
        my $quiche = $r eq "compiler-artifact" && $m->{target}{name} eq "quiche";
        if ($w eq "quiche-so" && $quiche) {
            die "quiche built without the ffi feature\n" unless grep { $_ eq "ffi" } @{$m->{features}};
            for (@{$m->{filenames}}) { print "$_\n" if /\.so$/ }
        }
        if ($w eq "quiche-dir" && $quiche) {
            (my $d = $m->{manifest_path}) =~ s{/Cargo\.toml$}{};
            print "$d\n";
        }
        if ($w eq "boringssl" && $r eq "build-script-executed" && $m->{package_id} =~ /#boring-sys@/) {
            print "$m->{out_dir}\n";
        }' <"$artifacts" | tail -1
}
quiche_so="$(artifact quiche-so)"
quiche_dir="$(artifact quiche-dir)"
bssl_out="$(artifact boringssl)"
[ -f "$quiche_so" ] || { log "no quiche shared library among the workspace's artifacts"; exit 1; }
[ -f "$quiche_dir/include/quiche.h" ] || { log "no include/quiche.h in $quiche_dir"; exit 1; }
bssl_build="$bssl_out/build"
bssl_include="$bssl_out/boringssl/include"
[ -f "$bssl_build/libssl.a" ] && [ -f "$bssl_build/libcrypto.a" ] \
    || { log "BoringSSL libraries not found in $bssl_build"; exit 1; }
[ -f "$bssl_include/openssl/ssl.h" ] || { log "BoringSSL headers not found in $bssl_include"; exit 1; }
log "quiche: $quiche_so; BoringSSL: $bssl_out"

# 3. The prefix: curl links quiche's library from there (its run path).
rm -rf "$prefix"
mkdir -p "$prefix/lib"
cp "$quiche_so" "$prefix/lib/libquiche.so"
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
    -DQUICHE_INCLUDE_DIR="$quiche_dir/include" \
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

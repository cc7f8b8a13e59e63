#!/usr/bin/env bash
# Builds the kwik transfer application (examples/kwik: sidekick-transfer's raw-stream protocol
# on kwik, a QUIC stack in Java, from Maven Central) into the cargo target directory, makes the
# server's key and self-signed certificate there, and writes the launcher
# OUTDIR/sidekick-transfer-kwik (default OUTDIR: the target's debug directory). Idempotent:
# Maven runs again only when examples/kwik changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
target="${CARGO_TARGET_DIR:-target}"
out="${1:-$target/debug}"
mkdir -p "$out" "$target/kwik"
out="$(cd "$out" && pwd)"
kwik="$(cd "$target/kwik" && pwd)"
for tool in java mvn keytool; do
    if ! command -v "$tool" >/dev/null; then
        echo "build-kwik: $tool missing (scripts/setup.sh installs a JDK and Maven)" >&2
        exit 1
    fi
done
stamp="$kwik/source.sha256"
sum="$(find examples/kwik -type f \( -name '*.java' -o -name pom.xml \) -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
jar="$kwik/build/sidekick-transfer-kwik.jar"
if [ ! -f "$jar" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
    rm -rf "$kwik/lib"
    # The local repository under target/ as well: a cached target directory keeps it.
    mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$kwik/m2" -f examples/kwik/pom.xml -Dkwik.out="$kwik" package
    echo "$sum" > "$stamp"
fi
keys="$kwik/server.p12"
if [ ! -f "$keys" ]; then
    keytool -genkeypair -alias sidekick -keyalg EC -groupname secp256r1 -dname CN=localhost \
        -ext SAN=dns:localhost -validity 3650 -storetype PKCS12 -keystore "$keys.tmp" \
        -storepass sidekick >/dev/null 2>&1
    mv -f "$keys.tmp" "$keys"
fi
launcher="$out/sidekick-transfer-kwik"
cat > "$launcher.tmp" <<LAUNCHER
#!/bin/sh
# sidekick-transfer-kwik (examples/kwik), written by scripts/build-kwik.sh.
# A server started without --keystore gets the one made at build time.
if [ "\${1:-}" = server ]; then
    case " \$* " in *" --keystore"*) ;; *) set -- "\$@" --keystore "$keys" ;; esac
fi
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$jar:$kwik/lib/*" sidekick.transfer.Main "\$@"
LAUNCHER
chmod +x "$launcher.tmp"
mv -f "$launcher.tmp" "$launcher"
echo "build-kwik: $launcher (kwik $(ls "$kwik/lib" | sed -n 's/^kwik-\(.*\)\.jar$/\1/p'))"

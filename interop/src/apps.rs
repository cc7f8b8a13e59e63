//! The applications a scenario can run (`[app] kind`): which binary of the examples crate, and
//! the command lines of its server (in the server namespace) and client (in a client namespace).
//! Every client prints one JSON line (`--json`) that the runner turns into the trial's metrics.

use crate::scenario::AppSpec;
use crate::topo::Topology;

/// Binary name of an application kind.
pub fn app_binary(kind: &str) -> Option<&'static str> {
    match kind {
        "transfer" => Some("sidekick-transfer"),
        "media" => Some("sidekick-media"),
        "media-fec" => Some("sidekick-media-fec"),
        "multicast" => Some("sidekick-multicast"),
        "rtc" => Some("sidekick-rtc"),
        "webrtc" => Some("sidekick-webrtc"),
        _ => None,
    }
}

/// The stack name that selects the quic-go RTC server (examples/quic-go).
pub const QUIC_GO: &str = "quic-go";

/// The quic-go RTC server's binary (built by scripts/build-quicgo.sh beside the Rust ones).
pub const RTC_QUICGO_BINARY: &str = "sidekick-rtc-quicgo";

/// The client stack that selects libcurl (`sidekick-curl`, bindings/curl) as the `transfer`
/// client over HTTP/3.
pub const CURL: &str = "curl";

/// The curl client's binary (built by scripts/build-sidekick-curl.sh beside the Rust ones).
pub const CURL_BINARY: &str = "sidekick-curl";

/// Whether the scenario's transfer client is libcurl (`app.client_stack = "curl"`).
pub fn curl_client(app: &AppSpec) -> bool {
    app.kind == "transfer" && app.client_stack.as_deref() == Some(CURL)
}

/// A QUIC stack of the `transfer` kind: which binary runs it and what it can do. Every binary
/// takes the same command line (`server --stack S --listen ADDR [--http3]`, `client --stack S
/// --connect ADDR --download|--upload N --json --timeout T [--http3]`) and prints the same JSON
/// report, except libcurl's (`sidekick-curl URL ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferStack {
    /// Name in `app.stack` / `app.client_stack`.
    pub name: &'static str,
    /// Server binary, if the stack serves.
    pub server: Option<&'static str>,
    /// Client binary, if the stack is a client.
    pub client: Option<&'static str>,
    /// Speaks the raw-stream protocol (ALPN `sidekick-transfer`), not only HTTP/3.
    pub raw: bool,
    /// Speaks HTTP/3 (`--http3`), not only the raw-stream protocol.
    pub http3: bool,
    /// As a server, measures uploads (answers `POST /upload/N` with a summary).
    pub serves_uploads: bool,
    /// As a client, runs the sidekick SDK (`--sidekick` in the client's arguments).
    pub sdk: bool,
    /// As a client, uploads too (not only downloads).
    pub client_uploads: bool,
    /// As a server, pads its certificate to `app.cert_bytes` (`--cert-bytes`).
    pub pads_certificate: bool,
}

/// The `transfer` stacks: quinn, quiche, s2n-quic (raw stream only, no SDK) and kernel TCP
/// (`sidekick-transfer`), quic-go (`sidekick-transfer-quicgo`, examples/quic-go/transfer, built by
/// scripts/build-quicgo.sh; with `--stack x-net-quic` the same binary runs golang.org/x/net/quic),
/// kwik (`sidekick-transfer-kwik`, Java, raw stream only), ngtcp2 (`sidekick-transfer-ngtcp2`, driving Debian's
/// `gtlsserver`/`gtlsclient`: HTTP/3 only, no upload measurement on its server), aioquic
/// (`sidekick-transfer-aioquic`, a Python download client) and libcurl (`sidekick-curl`, a
/// client over HTTP/3).
pub const TRANSFER_STACKS: &[TransferStack] = &[
    TransferStack {
        name: "quinn",
        server: Some("sidekick-transfer"),
        client: Some("sidekick-transfer"),
        raw: true,
        http3: true,
        serves_uploads: true,
        sdk: true,
        client_uploads: true,
        pads_certificate: true,
    },
    TransferStack {
        name: "quiche",
        server: Some("sidekick-transfer"),
        client: Some("sidekick-transfer"),
        raw: true,
        http3: true,
        serves_uploads: true,
        sdk: true,
        client_uploads: true,
        pads_certificate: true,
    },
    TransferStack {
        name: S2N_QUIC,
        server: Some("sidekick-transfer"),
        client: Some("sidekick-transfer"),
        raw: true,
        http3: false,
        serves_uploads: true,
        sdk: false,
        client_uploads: true,
        pads_certificate: true,
    },
    TransferStack {
        name: QUIC_GO,
        server: Some("sidekick-transfer-quicgo"),
        client: Some("sidekick-transfer-quicgo"),
        raw: true,
        http3: true,
        serves_uploads: true,
        sdk: false,
        client_uploads: true,
        pads_certificate: true,
    },
    TransferStack {
        name: X_NET_QUIC,
        server: Some("sidekick-transfer-quicgo"),
        client: Some("sidekick-transfer-quicgo"),
        raw: true,
        http3: false,
        serves_uploads: true,
        sdk: false,
        client_uploads: true,
        pads_certificate: true,
    },
    TransferStack {
        name: KWIK,
        server: Some(KWIK_BINARY),
        client: Some(KWIK_BINARY),
        raw: true,
        http3: false,
        serves_uploads: true,
        sdk: false,
        client_uploads: true,
        pads_certificate: false,
    },
    TransferStack {
        name: NGTCP2,
        server: Some("sidekick-transfer-ngtcp2"),
        client: Some("sidekick-transfer-ngtcp2"),
        raw: false,
        http3: true,
        serves_uploads: false,
        sdk: false,
        client_uploads: true,
        pads_certificate: false,
    },
    TransferStack {
        name: TCP,
        server: Some("sidekick-transfer"),
        client: Some("sidekick-transfer"),
        raw: true,
        http3: false,
        serves_uploads: true,
        sdk: false,
        client_uploads: true,
        pads_certificate: false,
    },
    TransferStack {
        name: AIOQUIC,
        server: None,
        client: Some(AIOQUIC_BINARY),
        raw: true,
        http3: true,
        serves_uploads: false,
        sdk: false,
        client_uploads: false,
        pads_certificate: false,
    },
    TransferStack {
        name: CURL,
        server: None,
        client: Some(CURL_BINARY),
        raw: false,
        http3: true,
        serves_uploads: false,
        sdk: true,
        client_uploads: true,
        pads_certificate: false,
    },
];

/// The stack name of the kernel-TCP baseline (`sidekick-transfer --stack tcp`: the raw-stream
/// protocol over one TCP connection, CUBIC; the papers' TCP rows, and with `sidekick-tcp-split`
/// on the ap their split-TCP PEP).
pub const TCP: &str = "tcp";

/// The stack name of aioquic (Python, from PyPI): a download client only
/// (`sidekick-transfer-aioquic`, examples/aioquic, set up by scripts/build-aioquic.sh), a stack
/// none of the proxy's inference was developed against.
pub const AIOQUIC: &str = "aioquic";

/// The aioquic client's launcher (written by scripts/build-aioquic.sh beside the Rust binaries).
pub const AIOQUIC_BINARY: &str = "sidekick-transfer-aioquic";

/// The stack name of Go's own QUIC package, golang.org/x/net/quic (`sidekick-transfer-quicgo
/// --stack x-net-quic`, built with the quic-go programs): the raw-stream protocol only, no
/// transport counters in its reports; a stack none of the proxy's inference was developed
/// against.
pub const X_NET_QUIC: &str = "x-net-quic";

/// The stack name of kwik (Java, from Maven Central): `sidekick-transfer-kwik`
/// (examples/kwik, built by scripts/build-kwik.sh), server and client on the raw-stream
/// protocol only (kwik has no HTTP/3), a stack none of the proxy's inference was developed
/// against.
pub const KWIK: &str = "kwik";

/// The kwik transfer application's launcher (written by scripts/build-kwik.sh beside the Rust
/// binaries).
pub const KWIK_BINARY: &str = "sidekick-transfer-kwik";

/// The stack name of ngtcp2 (Debian's example programs, HTTP/3 only).
pub const NGTCP2: &str = "ngtcp2";

/// The stack name of s2n-quic (`sidekick-transfer --stack s2n-quic`: the raw-stream protocol only,
/// no sidekick SDK).
pub const S2N_QUIC: &str = "s2n-quic";

/// The server and client stacks of a `transfer` scenario (`app.stack` × `app.client_stack`,
/// the client defaulting to the server's stack), or why the pair cannot run, naming the keys:
/// an unknown stack, a client-only stack as server, the raw protocol on an HTTP/3-only stack
/// (`app.http3 = false`) or HTTP/3 on a raw-only one (`app.http3 = true`), an upload to a server
/// that does not measure uploads, or the sidekick SDK (`--sidekick` in `client_args`) on a client
/// without it.
pub fn transfer_pair(
    app: &AppSpec,
    client_args: &[String],
) -> Result<(TransferStack, TransferStack), String> {
    let names = || {
        TRANSFER_STACKS
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let find = |key: &str, name: &str| {
        TRANSFER_STACKS
            .iter()
            .find(|s| s.name == name)
            .copied()
            .ok_or_else(|| {
                format!(
                    "{key} = {name:?}: unknown transfer stack (one of {})",
                    names()
                )
            })
    };
    let server = find("app.stack", &app.stack)?;
    let client_name = app.client_stack.as_deref().unwrap_or(&app.stack);
    let client = find("app.client_stack", client_name)?;
    if server.server.is_none() {
        return Err(format!("app.stack = {:?} has no server", server.name));
    }
    if client.client.is_none() {
        return Err(format!(
            "app.client_stack = {:?} has no client",
            client.name
        ));
    }
    if (server.name == TCP) != (client.name == TCP) {
        return Err(format!(
            "app.stack = {:?} with app.client_stack = {:?}: TCP talks only to TCP              (set both to {TCP:?})",
            server.name, client.name
        ));
    }
    if server.name == TCP && app.http3 {
        return Err(
            "app.stack = \"tcp\" speaks the raw stream protocol: set app.http3 = false".into(),
        );
    }
    for (key, s) in [("app.stack", server), ("app.client_stack", client)] {
        if !app.http3 && !s.raw {
            return Err(format!(
                "{key} = {:?} speaks HTTP/3 only, not the raw stream protocol: set app.http3 = true",
                s.name
            ));
        }
        if app.http3 && !s.http3 {
            return Err(format!(
                "{key} = {:?} speaks the raw stream protocol only, not HTTP/3: set app.http3 = false",
                s.name
            ));
        }
    }
    if app.direction == "upload" && !server.serves_uploads {
        return Err(format!(
            "app.stack = {:?} with app.direction = \"upload\": that server does not report \
             what it received (no upload summary); use it for downloads",
            server.name
        ));
    }
    if app.direction != "download" && !client.client_uploads {
        return Err(format!(
            "app.client_stack = {:?} downloads only: set app.direction = \"download\"",
            client.name
        ));
    }
    if app.cert_bytes > 0 && !server.pads_certificate {
        let padding: Vec<_> = TRANSFER_STACKS
            .iter()
            .filter(|s| s.pads_certificate)
            .map(|s| s.name)
            .collect();
        return Err(format!(
            "app.cert_bytes needs a server that pads its certificate ({}), not app.stack = {:?}",
            padding.join(", "),
            server.name
        ));
    }
    if app.hello_delay_ms > 0 && !matches!(server.name, "quinn" | "quiche") {
        return Err(format!(
            "app.hello_delay_ms needs a quinn or quiche server (sidekick-transfer), not \
             app.stack = {:?}",
            server.name
        ));
    }
    if !client.sdk && client_args.iter().any(|a| a.starts_with("--sidekick")) {
        return Err(format!(
            "app.client_stack = {:?} has no sidekick SDK integration, but the client arguments \
             ask for it (--sidekick): use quinn or quiche",
            client.name
        ));
    }
    Ok((server, client))
}

/// Binary names of an application's server and client. They are the same binary except for
/// `rtc` on `quic-go`: the quic-go server (the sender PEMI assists) with `sidekick-rtc` as the
/// client; and `transfer` with `client_stack = "curl"`: `sidekick-transfer` serves, libcurl
/// (`sidekick-curl`) is the client.
pub fn app_binaries(app: &AppSpec) -> Option<(&'static str, &'static str)> {
    let client = app_binary(&app.kind)?;
    if app.kind == "rtc" && app.stack == QUIC_GO {
        return Some((RTC_QUICGO_BINARY, client));
    }
    if app.kind == "transfer" {
        // The pair was checked when the scenario loaded; the SDK check needs the variants.
        let (s, c) = transfer_pair(app, &[]).ok()?;
        return Some((s.server?, c.client?));
    }
    Some((client, client))
}

/// The server's and the client's command lines (before `app.client_args` and the variant's
/// `client_args`) for an application kind; the server listens on `port` of every address, the
/// client connects to the server's lab address.
///
/// - `transfer`: `sidekick-transfer server --stack S` / `client --stack S --upload|--download
///   BYTES --json --timeout T` (S: quinn, quiche, s2n-quic or tcp; the other stacks' binaries
///   take the same), both with `--http3` when `app.http3` is set; the server with
///   `--cert-bytes B` / `--hello-delay-ms MS` when `app.cert_bytes` / `app.hello_delay_ms` are set.
/// - `media` (Robin #1, the client is the sender): `sidekick-media server --once` (the receiver)
///   / `client --duration D --json`.
/// - `media-fec` (Packrat media, the server is the sender): `sidekick-media-fec server --once` /
///   `client --duration D --json` (the player).
/// - `multicast` (Packrat multicast, the server streams to a group): `sidekick-multicast server
///   --once` / `client --duration D --json` (the receivers, `--receivers N` of them in the one
///   client namespace; the runner carries the group across the ap, `Topology::forward_multicast`).
/// - `rtc` (PEMI RTC frames, the server is the sender): `sidekick-rtc server --stack S --once` /
///   `client --stack S --duration D --json --timeout T`; with `stack = "quic-go"` the server is
///   `sidekick-rtc-quicgo server --once` and the client `sidekick-rtc client --stack C` with
///   `C = app.client_stack` (default quinn); on quinn and quiche `app.client_stack`, when set,
///   overrides the client's stack too (the pairs interoperate).
/// - `transfer` with `client_stack = "curl"` (needs `http3`): the server as above, the client
///   `sidekick-curl https://SERVER:PORT/download/BYTES` (or `/upload/BYTES --upload-bytes
///   BYTES`) `--insecure --timeout T` (the lab's servers have self-signed certificates).
/// - `webrtc` (a WebRTC call on str0m): `sidekick-webrtc server --once` / `client --direction
///   upload|download --duration D --json --timeout T [--rekey-after-ms MS]`; `upload`: the
///   client sends the video (Robin #1's setting), `download`: the server sends and the client
///   plays (Packrat's).
pub fn app_args(app: &AppSpec, port: u16) -> (Vec<String>, Vec<String>) {
    let listen = format!("0.0.0.0:{port}");
    let connect = format!("{}:{port}", Topology::server_addr());
    match app.kind.as_str() {
        "media" | "media-fec" | "multicast" => (
            vec!["server".into(), "--listen".into(), listen, "--once".into()],
            vec![
                "client".into(),
                "--connect".into(),
                connect,
                "--duration".into(),
                format!("{}", app.duration_s),
                "--json".into(),
            ],
        ),
        "webrtc" => {
            let mut cli: Vec<String> = vec![
                "client".into(),
                "--connect".into(),
                connect,
                "--direction".into(),
                app.direction.clone(),
                "--duration".into(),
                format!("{}", app.duration_s),
                "--json".into(),
                "--timeout".into(),
                format!("{}", app.timeout_s),
            ];
            if app.rekey_after_ms > 0 {
                cli.extend(["--rekey-after-ms".into(), app.rekey_after_ms.to_string()]);
            }
            (
                vec!["server".into(), "--listen".into(), listen, "--once".into()],
                cli,
            )
        }
        "rtc" => {
            // The quic-go server binary has no --stack (it is the stack); the client's stack is
            // `client_stack`, else the server's (quinn for quic-go).
            let srv: Vec<String> = if app.stack == QUIC_GO {
                vec!["server".into(), "--listen".into(), listen, "--once".into()]
            } else {
                vec![
                    "server".into(),
                    "--stack".into(),
                    app.stack.clone(),
                    "--listen".into(),
                    listen,
                    "--once".into(),
                ]
            };
            let client_stack = app.client_stack.clone().unwrap_or_else(|| {
                if app.stack == QUIC_GO {
                    "quinn".into()
                } else {
                    app.stack.clone()
                }
            });
            let cli = vec![
                "client".into(),
                "--stack".into(),
                client_stack,
                "--connect".into(),
                connect,
                "--duration".into(),
                format!("{}", app.duration_s),
                "--json".into(),
                "--timeout".into(),
                format!("{}", app.timeout_s),
            ];
            (srv, cli)
        }
        _ => {
            let mut srv: Vec<String> = vec![
                "server".into(),
                "--stack".into(),
                app.stack.clone(),
                "--listen".into(),
                listen,
            ];
            let mut cli: Vec<String> = vec![
                "client".into(),
                "--stack".into(),
                app.client_stack
                    .clone()
                    .unwrap_or_else(|| app.stack.clone()),
                "--connect".into(),
                connect,
                format!("--{}", app.direction),
                app.bytes.to_string(),
                "--json".into(),
                "--timeout".into(),
                format!("{}", app.timeout_s),
            ];
            if app.http3 {
                srv.push("--http3".into());
                cli.push("--http3".into());
            }
            if app.stack == NGTCP2 {
                // gtlsserver serves files: the wrapper makes `/download/N` for this size.
                srv.extend(["--bytes".into(), app.bytes.to_string()]);
            }
            if app.cert_bytes > 0 {
                srv.extend(["--cert-bytes".into(), app.cert_bytes.to_string()]);
            }
            if app.hello_delay_ms > 0 {
                srv.extend(["--hello-delay-ms".into(), app.hello_delay_ms.to_string()]);
            }
            if curl_client(app) {
                cli = vec![format!(
                    "https://{}:{port}/{}/{}",
                    Topology::server_addr(),
                    app.direction,
                    app.bytes
                )];
                if app.direction == "upload" {
                    cli.extend(["--upload-bytes".into(), app.bytes.to_string()]);
                }
                cli.extend([
                    "--insecure".into(),
                    "--timeout".into(),
                    format!("{}", app.timeout_s),
                ]);
            }
            (srv, cli)
        }
    }
}

#[cfg(test)]
#[path = "apps_tests.rs"]
mod tests;

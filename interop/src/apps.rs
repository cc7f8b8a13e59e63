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

/// Binary names of an application's server and client. They are the same binary except for
/// `rtc` on `quic-go`: the quic-go server (the sender PEMI assists) with `sidekick-rtc` as the
/// client; and `transfer` with `client_stack = "curl"`: `sidekick-transfer` serves, libcurl
/// (`sidekick-curl`) is the client.
pub fn app_binaries(app: &AppSpec) -> Option<(&'static str, &'static str)> {
    let client = app_binary(&app.kind)?;
    if app.kind == "rtc" && app.stack == QUIC_GO {
        return Some((RTC_QUICGO_BINARY, client));
    }
    if curl_client(app) {
        return Some((client, CURL_BINARY));
    }
    Some((client, client))
}

/// The server's and the client's command lines (before `app.client_args` and the variant's
/// `client_args`) for an application kind; the server listens on `port` of every address, the
/// client connects to the server's lab address.
///
/// - `transfer`: `sidekick-transfer server --stack S` / `client --stack S --upload|--download
///   BYTES --json --timeout T`, both with `--http3` when `app.http3` is set; the server with
///   `--cert-bytes B` / `--hello-delay-ms MS` when `app.cert_bytes` / `app.hello_delay_ms` are set.
/// - `media` (Robin #1, the client is the sender): `sidekick-media server --once` (the receiver)
///   / `client --duration D --json`.
/// - `media-fec` (Packrat media, the server is the sender): `sidekick-media-fec server --once` /
///   `client --duration D --json` (the player).
/// - `rtc` (PEMI RTC frames, the server is the sender): `sidekick-rtc server --stack S --once` /
///   `client --stack S --duration D --json --timeout T`; with `stack = "quic-go"` the server is
///   `sidekick-rtc-quicgo server --once` and the client `sidekick-rtc client --stack C` with
///   `C = app.client_stack` (default quinn); on quinn and quiche `app.client_stack`, when set,
///   overrides the client's stack too (the pairs interoperate).
/// - `transfer` with `client_stack = "curl"` (needs `http3`): the server as above, the client
///   `sidekick-curl https://SERVER:PORT/download/BYTES` (or `/upload/BYTES --upload-bytes
///   BYTES`) `--insecure --timeout T` (the lab's servers have self-signed certificates).
/// - `webrtc` (a WebRTC call on str0m): `sidekick-webrtc server --once` / `client --direction
///   upload|download --duration D --json --timeout T`; `upload`: the client sends the video
///   (Robin #1's setting), `download`: the server sends and the client plays (Packrat's).
pub fn app_args(app: &AppSpec, port: u16) -> (Vec<String>, Vec<String>) {
    let listen = format!("0.0.0.0:{port}");
    let connect = format!("{}:{port}", Topology::server_addr());
    match app.kind.as_str() {
        "media" | "media-fec" => (
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
        "webrtc" => (
            vec!["server".into(), "--listen".into(), listen, "--once".into()],
            vec![
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
            ],
        ),
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
                app.stack.clone(),
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
mod tests {
    use super::*;

    #[test]
    fn app_command_lines_per_kind() {
        let mut app = AppSpec {
            kind: "transfer".into(),
            stack: "quiche".into(),
            direction: "upload".into(),
            bytes: 5000,
            duration_s: 30.0,
            timeout_s: 60.0,
            http3: false,
            client_args: Vec::new(),
            client_stack: None,
            cert_bytes: 0,
            hello_delay_ms: 0,
        };
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(
            srv,
            ["server", "--stack", "quiche", "--listen", "0.0.0.0:4433"]
        );
        assert_eq!(
            cli,
            [
                "client",
                "--stack",
                "quiche",
                "--connect",
                "10.0.1.1:4433",
                "--upload",
                "5000",
                "--json",
                "--timeout",
                "60"
            ]
        );
        app.http3 = true;
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(srv.last().map(String::as_str), Some("--http3"));
        assert_eq!(cli.last().map(String::as_str), Some("--http3"));
        app.http3 = false;
        app.kind = "webrtc".into();
        app.duration_s = 20.0;
        let (srv, cli) = app_args(&app, 5000);
        assert_eq!(srv, ["server", "--listen", "0.0.0.0:5000", "--once"]);
        assert_eq!(
            cli,
            [
                "client",
                "--connect",
                "10.0.1.1:5000",
                "--direction",
                "upload",
                "--duration",
                "20",
                "--json",
                "--timeout",
                "60"
            ]
        );
        for kind in ["media", "media-fec"] {
            app.kind = kind.into();
            app.duration_s = 12.5;
            let (srv, cli) = app_args(&app, 5000);
            assert_eq!(srv, ["server", "--listen", "0.0.0.0:5000", "--once"]);
            assert_eq!(
                cli,
                [
                    "client",
                    "--connect",
                    "10.0.1.1:5000",
                    "--duration",
                    "12.5",
                    "--json"
                ]
            );
        }
        app.kind = "rtc".into();
        app.stack = "quinn".into();
        app.duration_s = 20.0;
        app.timeout_s = 90.0;
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(
            srv,
            [
                "server",
                "--stack",
                "quinn",
                "--listen",
                "0.0.0.0:4433",
                "--once"
            ]
        );
        assert_eq!(
            cli,
            [
                "client",
                "--stack",
                "quinn",
                "--connect",
                "10.0.1.1:4433",
                "--duration",
                "20",
                "--json",
                "--timeout",
                "90"
            ]
        );
        assert_eq!(app_binary("media"), Some("sidekick-media"));
        assert_eq!(app_binary("media-fec"), Some("sidekick-media-fec"));
        assert_eq!(app_binary("rtc"), Some("sidekick-rtc"));
        assert_eq!(app_binary("webrtc"), Some("sidekick-webrtc"));
        assert_eq!(app_binaries(&app), Some(("sidekick-rtc", "sidekick-rtc")));
        app.stack = QUIC_GO.into();
        assert_eq!(
            app_binaries(&app),
            Some(("sidekick-rtc-quicgo", "sidekick-rtc"))
        );
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(srv, ["server", "--listen", "0.0.0.0:4433", "--once"]);
        assert_eq!(&cli[..3], ["client", "--stack", "quinn"]);
        app.client_stack = Some("quiche".into());
        let (_, cli) = app_args(&app, 4433);
        assert_eq!(&cli[..3], ["client", "--stack", "quiche"]);
        app.stack = "quinn".into();
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(&srv[..3], ["server", "--stack", "quinn"]);
        assert_eq!(&cli[..3], ["client", "--stack", "quiche"]);
    }

    #[test]
    fn curl_client_command_lines() {
        let mut app = AppSpec {
            kind: "transfer".into(),
            stack: "quiche".into(),
            direction: "download".into(),
            bytes: 25_000_000,
            duration_s: 30.0,
            timeout_s: 420.0,
            http3: true,
            client_args: Vec::new(),
            client_stack: Some(CURL.into()),
            cert_bytes: 0,
            hello_delay_ms: 0,
        };
        assert_eq!(
            app_binaries(&app),
            Some(("sidekick-transfer", "sidekick-curl"))
        );
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(
            srv,
            [
                "server",
                "--stack",
                "quiche",
                "--listen",
                "0.0.0.0:4433",
                "--http3"
            ]
        );
        assert_eq!(
            cli,
            [
                "https://10.0.1.1:4433/download/25000000",
                "--insecure",
                "--timeout",
                "420"
            ]
        );
        app.direction = "upload".into();
        app.bytes = 10_000_000;
        let (_, cli) = app_args(&app, 4433);
        assert_eq!(
            cli,
            [
                "https://10.0.1.1:4433/upload/10000000",
                "--upload-bytes",
                "10000000",
                "--insecure",
                "--timeout",
                "420"
            ]
        );
        // Only `transfer` has a curl client.
        app.kind = "rtc".into();
        assert!(!curl_client(&app));
    }
}

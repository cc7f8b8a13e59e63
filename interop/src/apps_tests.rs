//! Unit tests of the application binaries and arguments the lab chooses per stack.

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
        server_args: Vec::new(),
        client_stack: None,
        cert_bytes: 0,
        hello_delay_ms: 0,
        prior_connections: 0,
        rekey_after_ms: 0,
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
    app.rekey_after_ms = 9000;
    let (_, cli) = app_args(&app, 5000);
    assert_eq!(cli[cli.len() - 2..], ["--rekey-after-ms", "9000"]);
    app.rekey_after_ms = 0;
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

fn transfer_app(stack: &str, client: Option<&str>, http3: bool, direction: &str) -> AppSpec {
    AppSpec {
        kind: "transfer".into(),
        stack: stack.into(),
        direction: direction.into(),
        bytes: 5_000_000,
        duration_s: 30.0,
        timeout_s: 120.0,
        http3,
        client_args: Vec::new(),
        server_args: Vec::new(),
        client_stack: client.map(String::from),
        cert_bytes: 0,
        hello_delay_ms: 0,
        prior_connections: 0,
        rekey_after_ms: 0,
    }
}

#[test]
fn every_transfer_pair_has_binaries_and_one_command_line() {
    let servers = ["quinn", "quiche", QUIC_GO, NGTCP2];
    let clients = ["quinn", "quiche", QUIC_GO, NGTCP2, CURL];
    let bin = |s: &str| match s {
        "quinn" | "quiche" => "sidekick-transfer",
        QUIC_GO => "sidekick-transfer-quicgo",
        NGTCP2 => "sidekick-transfer-ngtcp2",
        _ => CURL_BINARY,
    };
    for srv in servers {
        for cli in clients {
            let app = transfer_app(srv, Some(cli), true, "download");
            assert_eq!(
                app_binaries(&app),
                Some((bin(srv), bin(cli))),
                "{srv} x {cli}"
            );
            let (sargs, cargs) = app_args(&app, 4433);
            assert_eq!(&sargs[..3], ["server", "--stack", srv]);
            assert!(sargs.contains(&"--http3".to_string()));
            // Only the file server needs the size up front.
            assert_eq!(
                sargs.windows(2).any(|w| w == ["--bytes", "5000000"]),
                srv == NGTCP2
            );
            if cli == CURL {
                assert_eq!(cargs[0], "https://10.0.1.1:4433/download/5000000");
            } else {
                assert_eq!(&cargs[..3], ["client", "--stack", cli]);
                assert!(cargs.windows(2).any(|w| w == ["--download", "5000000"]));
                assert_eq!(cargs.last().map(String::as_str), Some("--http3"));
            }
        }
    }
    // Without client_stack the client runs the server's stack.
    let app = transfer_app(QUIC_GO, None, false, "upload");
    assert_eq!(
        app_binaries(&app),
        Some(("sidekick-transfer-quicgo", "sidekick-transfer-quicgo"))
    );
    assert_eq!(&app_args(&app, 1).1[..3], ["client", "--stack", QUIC_GO]);
}

#[test]
fn impossible_transfer_pairs_are_refused_naming_the_keys() {
    let err = |app: &AppSpec, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        transfer_pair(app, &args).unwrap_err()
    };
    // Raw protocol on ngtcp2, either side.
    let e = err(&transfer_app(NGTCP2, Some("quinn"), false, "download"), &[]);
    assert!(
        e.contains("app.stack") && e.contains("app.http3 = true"),
        "{e}"
    );
    let e = err(&transfer_app("quinn", Some(NGTCP2), false, "download"), &[]);
    assert!(
        e.contains("app.client_stack") && e.contains("app.http3"),
        "{e}"
    );
    assert_eq!(
        app_binaries(&transfer_app(NGTCP2, None, false, "download")),
        None
    );
    // Uploads to the ngtcp2 server are not measured.
    let e = err(&transfer_app(NGTCP2, Some("quiche"), true, "upload"), &[]);
    assert!(e.contains("app.direction") && e.contains("upload"), "{e}");
    // Unknown stacks, client-only stacks as servers.
    let e = err(&transfer_app("msquic", None, true, "download"), &[]);
    assert!(e.contains("app.stack") && e.contains("unknown"), "{e}");
    let e = err(&transfer_app(CURL, None, true, "download"), &[]);
    assert!(e.contains("has no server"), "{e}");
    // The SDK only on quinn, quiche and curl clients; the handshake experiments' server
    // options: a padded certificate on quinn, quiche, quic-go and x-net-quic servers, the ServerHello
    // delay on sidekick-transfer's only.
    assert_no_sdk_client_and_no_hello_delay(QUIC_GO, "quinn", true);
    // Both options on a quiche server.
    let mut app = transfer_app("quiche", Some("quinn"), true, "download");
    app.cert_bytes = 5113;
    app.hello_delay_ms = 50;
    assert!(transfer_pair(&app, &[]).is_ok());
    let mut app = transfer_app(NGTCP2, Some("quinn"), true, "download");
    app.cert_bytes = 1212;
    assert!(err(&app, &[]).contains("app.cert_bytes"));
    // The Go binary pads its certificate on either of its stacks.
    let mut app = transfer_app(X_NET_QUIC, Some("quinn"), false, "download");
    app.cert_bytes = 5113;
    assert!(transfer_pair(&app, &[]).is_ok());
    // What can run does.
    assert!(transfer_pair(&transfer_app("quiche", Some(NGTCP2), true, "upload"), &[]).is_ok());
    assert!(
        transfer_pair(
            &transfer_app(QUIC_GO, Some("quiche"), false, "download"),
            &[]
        )
        .is_ok()
    );
}

#[test]
fn s2n_quic_runs_the_raw_protocol_with_every_raw_stack() {
    // Its own pair, both directions: sidekick-transfer on both sides, `--stack s2n-quic`.
    for direction in ["download", "upload"] {
        let app = transfer_app(S2N_QUIC, None, false, direction);
        assert_eq!(
            transfer_pair(&app, &[]).map(|(s, c)| (s.name, c.name)),
            Ok((S2N_QUIC, S2N_QUIC))
        );
        assert_eq!(
            app_binaries(&app),
            Some(("sidekick-transfer", "sidekick-transfer"))
        );
        let (srv, cli) = app_args(&app, 4433);
        assert_eq!(
            srv,
            ["server", "--stack", "s2n-quic", "--listen", "0.0.0.0:4433"]
        );
        assert_eq!(&cli[..3], ["client", "--stack", "s2n-quic"]);
        assert!(
            cli.windows(2)
                .any(|w| w == [format!("--{direction}"), "5000000".into()])
        );
        assert!(!srv.contains(&"--http3".to_string()) && !cli.contains(&"--http3".to_string()));
    }
    // Across stacks on the raw protocol, either side.
    for (srv, cli) in [
        (S2N_QUIC, "quinn"),
        (S2N_QUIC, "quiche"),
        (S2N_QUIC, QUIC_GO),
        ("quinn", S2N_QUIC),
        ("quiche", S2N_QUIC),
        (QUIC_GO, S2N_QUIC),
    ] {
        let app = transfer_app(srv, Some(cli), false, "upload");
        assert!(transfer_pair(&app, &[]).is_ok(), "{srv} x {cli}");
        let (sargs, cargs) = app_args(&app, 1);
        if srv == S2N_QUIC {
            assert_eq!(&sargs[..3], ["server", "--stack", S2N_QUIC]);
        }
        assert_eq!(&cargs[..3], ["client", "--stack", cli]);
    }
    // No HTTP/3, on either side; so nothing in common with the HTTP/3-only stacks.
    let e = transfer_pair(
        &transfer_app(S2N_QUIC, Some("quinn"), true, "download"),
        &[],
    )
    .unwrap_err();
    assert!(
        e.contains("app.stack") && e.contains("app.http3 = false"),
        "{e}"
    );
    let e = transfer_pair(
        &transfer_app("quiche", Some(S2N_QUIC), true, "download"),
        &[],
    )
    .unwrap_err();
    assert!(
        e.contains("app.client_stack") && e.contains("app.http3 = false"),
        "{e}"
    );
    for http3 in [false, true] {
        assert!(
            transfer_pair(
                &transfer_app(NGTCP2, Some(S2N_QUIC), http3, "download"),
                &[]
            )
            .is_err()
        );
        assert!(
            transfer_pair(&transfer_app(S2N_QUIC, Some(CURL), http3, "download"), &[]).is_err()
        );
    }
    // No sidekick SDK on its client; a padded certificate on its server, not the ServerHello
    // delay.
    assert_no_sdk_client_and_no_hello_delay(S2N_QUIC, "quiche", false);
}

/// `stack`'s client takes no sidekick SDK while its server serves an SDK client of another
/// stack; its server pads its certificate (`--cert-bytes`) but cannot delay its ServerHello
/// (sidekick-transfer's quinn and quiche servers only). `peer` is a client `stack`'s server
/// runs with.
fn assert_no_sdk_client_and_no_hello_delay(stack: &str, peer: &str, http3: bool) {
    let sidekick = ["--sidekick".to_string()];
    let e = transfer_pair(
        &transfer_app("quinn", Some(stack), false, "upload"),
        &sidekick,
    )
    .unwrap_err();
    assert!(
        e.contains("app.client_stack") && e.contains("--sidekick"),
        "{stack}: {e}"
    );
    assert!(
        transfer_pair(
            &transfer_app(stack, Some("quinn"), false, "upload"),
            &sidekick
        )
        .is_ok(),
        "{stack}"
    );
    let mut app = transfer_app(stack, Some(peer), http3, "download");
    app.cert_bytes = 5113;
    assert!(transfer_pair(&app, &[]).is_ok(), "{stack}");
    let (srv, _) = app_args(&app, 1);
    assert!(
        srv.windows(2).any(|w| w == ["--cert-bytes", "5113"]),
        "{stack}: {srv:?}"
    );
    app.hello_delay_ms = 50;
    let e = transfer_pair(&app, &[]).unwrap_err();
    assert!(
        e.contains("app.hello_delay_ms") && e.contains(stack),
        "{stack}: {e}"
    );
}

#[test]
fn tcp_runs_only_against_tcp_on_the_raw_protocol() {
    let app = transfer_app(TCP, None, false, "upload");
    assert_eq!(
        app_binaries(&app),
        Some(("sidekick-transfer", "sidekick-transfer"))
    );
    let (srv, cli) = app_args(&app, 4433);
    assert_eq!(&srv[..3], ["server", "--stack", "tcp"]);
    assert_eq!(&cli[..3], ["client", "--stack", "tcp"]);
    assert!(transfer_pair(&transfer_app(TCP, None, false, "download"), &[]).is_ok());
    for (srv, cli) in [
        (TCP, Some("quinn")),
        ("quinn", Some(TCP)),
        ("quiche", Some(TCP)),
    ] {
        let e = transfer_pair(&transfer_app(srv, cli, false, "upload"), &[]).unwrap_err();
        assert!(e.contains("TCP talks only to TCP"), "{e}");
    }
    let e = transfer_pair(&transfer_app(TCP, None, true, "upload"), &[]).unwrap_err();
    assert!(e.contains("app.http3 = false"), "{e}");
    let e = transfer_pair(&app, &["--sidekick".into()]).unwrap_err();
    assert!(e.contains("--sidekick"), "{e}");
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
        server_args: Vec::new(),
        client_stack: Some(CURL.into()),
        cert_bytes: 0,
        hello_delay_ms: 0,
        prior_connections: 0,
        rekey_after_ms: 0,
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

/// Each server → client pair loads on the raw stream for downloads and uploads (the aioquic
/// client's uploads refused) and gets the stacks' names on both command lines.
fn raw_pairs_run_both_ways(pairs: &[(&str, &str)]) {
    for &(srv, cli) in pairs {
        for dir in ["download", "upload"] {
            let app = transfer_app(srv, Some(cli), false, dir);
            if dir == "upload" && cli == AIOQUIC {
                assert!(transfer_pair(&app, &[]).is_err());
                continue;
            }
            assert!(transfer_pair(&app, &[]).is_ok(), "{srv} -> {cli} {dir}");
            let (sargs, cargs) = app_args(&app, 4433);
            assert_eq!(&sargs[..3], ["server", "--stack", srv]);
            assert_eq!(&cargs[..3], ["client", "--stack", cli]);
        }
    }
}

#[test]
fn x_net_quic_runs_the_go_binary_on_the_raw_protocol_both_ways() {
    raw_pairs_run_both_ways(&[
        (X_NET_QUIC, X_NET_QUIC),
        (X_NET_QUIC, "quinn"),
        ("quinn", X_NET_QUIC),
        (S2N_QUIC, X_NET_QUIC),
        (X_NET_QUIC, AIOQUIC),
    ]);
    let app = transfer_app(X_NET_QUIC, None, false, "download");
    assert_eq!(
        app_binaries(&app),
        Some(("sidekick-transfer-quicgo", "sidekick-transfer-quicgo"))
    );
    // No HTTP/3 in golang.org/x/net/quic.
    let e = transfer_pair(
        &transfer_app(X_NET_QUIC, Some("quinn"), true, "download"),
        &[],
    )
    .unwrap_err();
    assert!(
        e.contains("app.stack") && e.contains("app.http3 = false"),
        "{e}"
    );
}

#[test]
fn kwik_runs_the_java_launcher_on_the_raw_protocol_both_ways() {
    raw_pairs_run_both_ways(&[
        (KWIK, KWIK),
        (KWIK, "quinn"),
        ("quinn", KWIK),
        (S2N_QUIC, KWIK),
        (KWIK, X_NET_QUIC),
        (KWIK, AIOQUIC),
    ]);
    assert_eq!(
        app_binaries(&transfer_app(KWIK, Some("quinn"), false, "download")),
        Some((KWIK_BINARY, "sidekick-transfer"))
    );
    // kwik has no HTTP/3, no SDK and no padded certificate.
    let e = transfer_pair(&transfer_app(KWIK, Some("quinn"), true, "download"), &[]).unwrap_err();
    assert!(
        e.contains("app.stack") && e.contains("app.http3 = false"),
        "{e}"
    );
    let e = transfer_pair(
        &transfer_app("quinn", Some(KWIK), false, "download"),
        &["--sidekick".into()],
    )
    .unwrap_err();
    assert!(e.contains("no sidekick SDK"), "{e}");
    let mut app = transfer_app(KWIK, Some("quinn"), false, "download");
    app.cert_bytes = 5113;
    assert!(
        transfer_pair(&app, &[])
            .unwrap_err()
            .contains("app.cert_bytes")
    );
}

#[test]
fn aioquic_is_a_download_client_of_every_server() {
    for (srv, http3) in [
        ("quinn", true),
        ("quinn", false),
        ("quiche", true),
        (QUIC_GO, false),
        (NGTCP2, true),
        (S2N_QUIC, false),
    ] {
        let app = transfer_app(srv, Some(AIOQUIC), http3, "download");
        assert!(transfer_pair(&app, &[]).is_ok(), "{srv} -> aioquic");
        let (_, cli) = app_binaries(&app).expect("binaries");
        assert_eq!(cli, AIOQUIC_BINARY);
        let (_, cargs) = app_args(&app, 4433);
        assert_eq!(&cargs[..3], ["client", "--stack", AIOQUIC]);
        assert_eq!(cargs.contains(&"--http3".to_string()), http3);
    }
    // It uploads nothing, serves nothing, and has no SDK.
    for dir in ["upload", "both"] {
        let e = transfer_pair(&transfer_app("quinn", Some(AIOQUIC), true, dir), &[]).unwrap_err();
        assert!(e.contains("downloads only"), "{e}");
    }
    let e =
        transfer_pair(&transfer_app(AIOQUIC, Some("quinn"), true, "download"), &[]).unwrap_err();
    assert!(e.contains("has no server"), "{e}");
    let e = transfer_pair(
        &transfer_app("quinn", Some(AIOQUIC), true, "download"),
        &["--sidekick".to_string()],
    )
    .unwrap_err();
    assert!(e.contains("no sidekick SDK"), "{e}");
}

//! The transfer across stacks on loopback through the real binaries: the quinn, quiche and
//! s2n-quic clients (`sidekick-transfer`; s2n-quic on the raw stream only) against the quic-go
//! server (`sidekick-transfer-quicgo`, raw stream and HTTP/3) and the ngtcp2 server
//! (`sidekick-transfer-ngtcp2` → Debian's `gtlsserver`, HTTP/3), the quic-go and ngtcp2 clients
//! against the quinn server, and s2n-quic (`--stack s2n-quic`) against itself, against the quinn
//! and quiche servers and as the server of the quinn, quiche and quic-go clients; downloads and
//! uploads of 1 MB; and the aioquic client (Python, `sidekick-transfer-aioquic`) downloading
//! from the quinn, quiche, s2n-quic and quic-go servers; kwik (Java, `sidekick-transfer-kwik`)
//! as client and server of the raw-stream stacks. The quic-go binary is skipped when absent
//! unless `SIDEKICK_REQUIRE_QUICGO=1` (scripts/test.sh); ngtcp2's programs likewise unless
//! `SIDEKICK_REQUIRE_NGTCP2=1`, aioquic's launcher unless `SIDEKICK_REQUIRE_AIOQUIC=1`, kwik's
//! unless `SIDEKICK_REQUIRE_KWIK=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;

use apps::{Server, free_port, one_json_line, optional_bin};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-transfer");
const NGTCP2_BIN: &str = env!("CARGO_BIN_EXE_sidekick-transfer-ngtcp2");
const BYTES: u64 = 1_000_000;

fn quicgo_bin() -> Option<PathBuf> {
    optional_bin(
        "SIDEKICK_SIDEKICK_TRANSFER_QUICGO",
        BIN,
        "sidekick-transfer-quicgo",
        "SIDEKICK_REQUIRE_QUICGO",
        "scripts/build-quicgo.sh builds it; needs go",
    )
}

/// The aioquic client's launcher (scripts/build-aioquic.sh writes it beside the Rust binaries).
fn aioquic_bin() -> Option<PathBuf> {
    optional_bin(
        "SIDEKICK_SIDEKICK_TRANSFER_AIOQUIC",
        BIN,
        "sidekick-transfer-aioquic",
        "SIDEKICK_REQUIRE_AIOQUIC",
        "scripts/build-aioquic.sh sets it up; needs python3-venv",
    )
}

/// The kwik launcher (scripts/build-kwik.sh writes it beside the Rust binaries).
fn kwik_bin() -> Option<PathBuf> {
    optional_bin(
        "SIDEKICK_SIDEKICK_TRANSFER_KWIK",
        BIN,
        "sidekick-transfer-kwik",
        "SIDEKICK_REQUIRE_KWIK",
        "scripts/build-kwik.sh builds it; needs a JDK and Maven",
    )
}

fn ngtcp2_installed() -> bool {
    let ok = ["gtlsserver", "gtlsclient"]
        .iter()
        .all(|p| Command::new(p).arg("--help").output().is_ok());
    assert!(
        ok || std::env::var_os("SIDEKICK_REQUIRE_NGTCP2").is_none(),
        "gtlsserver/gtlsclient missing (scripts/setup.sh installs ngtcp2-server, ngtcp2-client)"
    );
    if !ok {
        eprintln!("skipped: Debian's ngtcp2 programs not installed");
    }
    ok
}

fn start(bin: &Path, args: &[&str]) -> (Server, SocketAddr) {
    let addr = free_port();
    let child = Command::new(bin)
        .args(["server"])
        .args(args)
        .args(["--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    (Server(child), addr)
}

/// Runs one client transfer and checks the report's common keys.
fn transfer(
    bin: &Path,
    stack: &str,
    addr: SocketAddr,
    dir: &str,
    http3: bool,
) -> serde_json::Value {
    let mut cmd = Command::new(bin);
    cmd.args(["client", "--stack", stack, "--connect", &addr.to_string()])
        .args([
            &format!("--{dir}"),
            &BYTES.to_string(),
            "--json",
            "--timeout",
            "60",
        ]);
    if http3 {
        cmd.arg("--http3");
    }
    let v = one_json_line(&cmd.output().unwrap());
    assert_eq!(v["stack"], stack, "{v}");
    assert_eq!(v["direction"], dir, "{v}");
    assert_eq!(v["bytes"].as_u64(), Some(BYTES), "{v}");
    assert!(v["goodput_mbps"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["receiver_sent_packets"].as_u64().unwrap() > 0, "{v}");
    // The quiche client's own upload counts the losses that proved spurious; no other stack
    // reports them.
    let spurious = v
        .get("spurious_lost_packets")
        .and_then(serde_json::Value::as_u64);
    assert_eq!(
        spurious.is_some(),
        stack == "quiche" && dir == "upload",
        "{v}"
    );
    if let (Some(s), Some(l)) = (spurious, v["lost_packets"].as_u64()) {
        assert!(s <= l, "{v}");
    }
    v
}

#[test]
fn rust_clients_against_the_quicgo_server() {
    let Some(go) = quicgo_bin() else { return };
    for http3 in [false, true] {
        let srv_args: &[&str] = if http3 { &["--http3"] } else { &[] };
        let (_srv, addr) = start(&go, srv_args);
        // s2n-quic speaks the raw stream only.
        let stacks: &[&str] = if http3 {
            &["quinn", "quiche"]
        } else {
            &["quinn", "quiche", "s2n-quic"]
        };
        for stack in stacks {
            for dir in ["download", "upload"] {
                let v = transfer(Path::new(BIN), stack, addr, dir, http3);
                // quic-go reports its counters (summary or /stats): ≥ one packet per 1500 bytes.
                assert!(v["sent_packets"].as_u64().unwrap() >= BYTES / 1500, "{v}");
            }
        }
    }
}

#[test]
fn rust_clients_against_the_ngtcp2_server() {
    if !ngtcp2_installed() {
        return;
    }
    let (_srv, addr) = start(
        Path::new(NGTCP2_BIN),
        &["--http3", "--bytes", &BYTES.to_string()],
    );
    for stack in ["quinn", "quiche"] {
        let v = transfer(Path::new(BIN), stack, addr, "download", true);
        // gtlsserver has no /stats: the sender's counters are left out, not made up.
        assert!(v.get("sent_packets").is_none(), "{v}");
        assert!(v.get("lost_packets").is_none(), "{v}");
    }
}

#[test]
fn quicgo_and_ngtcp2_clients_against_the_quinn_server() {
    let go = quicgo_bin();
    let ng = ngtcp2_installed();
    let (_srv, addr) = start(Path::new(BIN), &["--stack", "quinn", "--http3"]);
    for dir in ["download", "upload"] {
        if let Some(go) = &go {
            transfer(go, "quic-go", addr, dir, true);
        }
        if ng {
            let v = transfer(Path::new(NGTCP2_BIN), "ngtcp2", addr, dir, true);
            if dir == "upload" {
                // The client's own packets, counted from its log.
                assert!(v["sent_packets"].as_u64().unwrap() >= BYTES / 1500, "{v}");
            }
        }
    }
    // ngtcp2 speaks HTTP/3 only: the raw protocol is refused with a reason.
    let out = Command::new(NGTCP2_BIN)
        .args(["client", "--connect", &addr.to_string(), "--download", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP/3 only"));
}

/// The report of a raw-stream transfer carries the data sender's counters (≥ one packet per
/// 1500 bytes; loss counters present) and, for a download, the time to first byte.
fn check_sender_counters(v: &serde_json::Value, dir: &str) {
    assert!(v["sent_packets"].as_u64().unwrap() >= BYTES / 1500, "{v}");
    for k in ["lost_packets", "retransmissions"] {
        assert!(v[k].as_u64().is_some(), "{k}: {v}");
    }
    assert_eq!(v["ttfb_ms"].as_f64().is_some(), dir == "download", "{v}");
    if let Some(t) = v["ttfb_ms"].as_f64() {
        assert!(t > 0.0 && t < 60_000.0, "{v}");
    }
}

#[test]
fn s2n_quic_client_against_the_s2n_quic_server() {
    let (_srv, addr) = start(Path::new(BIN), &["--stack", "s2n-quic"]);
    for dir in ["download", "upload"] {
        let v = transfer(Path::new(BIN), "s2n-quic", addr, dir, false);
        check_sender_counters(&v, dir);
    }
}

#[test]
fn quinn_quiche_and_quicgo_clients_against_the_s2n_quic_server() {
    // A padded certificate (beyond the anti-amplification limit) on the way.
    let (_srv, addr) = start(
        Path::new(BIN),
        &["--stack", "s2n-quic", "--cert-bytes", "5113"],
    );
    let go = quicgo_bin();
    let mut clients = vec![
        (PathBuf::from(BIN), "quinn"),
        (PathBuf::from(BIN), "quiche"),
    ];
    clients.extend(go.map(|go| (go, "quic-go")));
    for (bin, stack) in &clients {
        for dir in ["download", "upload"] {
            let v = transfer(bin, stack, addr, dir, false);
            check_sender_counters(&v, dir);
        }
    }
}

#[test]
fn s2n_quic_client_against_the_quinn_and_quiche_servers() {
    for server in ["quinn", "quiche"] {
        let (_srv, addr) = start(Path::new(BIN), &["--stack", server]);
        for dir in ["download", "upload"] {
            let v = transfer(Path::new(BIN), "s2n-quic", addr, dir, false);
            check_sender_counters(&v, dir);
        }
    }
}

/// What s2n-quic cannot do here is refused with the reason, not attempted: HTTP/3, the sidekick
/// SDK, NewReno, the ServerHello delay.
#[test]
fn s2n_quic_refuses_http3_sidekick_and_reno() {
    let addr = free_port().to_string();
    for (role, args, word) in [
        ("client", &["--http3"][..], "--http3"),
        ("client", &["--sidekick"][..], "--sidekick"),
        ("client", &["--cc", "reno"][..], "NewReno"),
        ("server", &["--http3"][..], "--http3"),
        (
            "server",
            &["--hello-delay-ms", "10"][..],
            "--hello-delay-ms",
        ),
    ] {
        let mut cmd = Command::new(BIN);
        cmd.args([role, "--stack", "s2n-quic"]).args(args);
        if role == "client" {
            cmd.args(["--connect", &addr, "--download", "1000", "--json"]);
        } else {
            cmd.args(["--listen", &addr]);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{role} {args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("s2n-quic") && err.contains(word),
            "{role} {args:?}: {err}"
        );
    }
}

/// The aioquic client (Python, PyPI) downloads from the quinn, quiche and quic-go servers over
/// the raw stream and HTTP/3, from the s2n-quic server over the raw stream and from the ngtcp2
/// server over HTTP/3 (whose header blocks use QPACK's dynamic table), with the sender's
/// counters where the server reports them (the raw protocol's summary or `/stats`; not
/// ngtcp2's); an upload is refused with the reason.
#[test]
fn aioquic_client_against_every_server() {
    let Some(aio) = aioquic_bin() else { return };
    let go = quicgo_bin();
    let bytes = BYTES.to_string();
    let mut servers: Vec<(PathBuf, Vec<&str>, bool)> = vec![
        (PathBuf::from(BIN), vec!["--stack", "quinn"], false),
        (
            PathBuf::from(BIN),
            vec!["--stack", "quinn", "--http3"],
            true,
        ),
        (
            PathBuf::from(BIN),
            vec!["--stack", "quiche", "--http3"],
            true,
        ),
        (PathBuf::from(BIN), vec!["--stack", "s2n-quic"], false),
    ];
    if let Some(go) = &go {
        servers.push((go.clone(), vec![], false));
        servers.push((go.clone(), vec!["--http3"], true));
    }
    if ngtcp2_installed() {
        servers.push((
            PathBuf::from(NGTCP2_BIN),
            vec!["--http3", "--bytes", &bytes],
            true,
        ));
    }
    for (bin, args, http3) in &servers {
        let (_srv, addr) = start(bin, args);
        let v = transfer(&aio, "aioquic", addr, "download", *http3);
        let counters = !bin.ends_with("sidekick-transfer-ngtcp2");
        assert_eq!(
            v["sent_packets"].as_u64().is_some(),
            counters,
            "{args:?}: {v}"
        );
        if counters {
            assert!(
                v["sent_packets"].as_u64().unwrap() >= BYTES / 1500,
                "{args:?}: {v}"
            );
            for k in ["lost_packets", "retransmissions"] {
                assert!(v[k].as_u64().is_some(), "{args:?} {k}: {v}");
            }
        }
        // The time to first byte, as the other clients, on the raw stream only.
        assert_eq!(v["ttfb_ms"].as_f64().is_some(), !http3, "{args:?}: {v}");
    }
    let out = Command::new(&aio)
        .args(["client", "--connect", "127.0.0.1:9", "--upload", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("downloads only"),
        "{out:?}"
    );
}

/// kwik (Java, from Maven Central; `sidekick-transfer-kwik`) as the client of the quinn,
/// quiche, s2n-quic and quic-go servers and as the server of their clients and of aioquic's,
/// on the raw stream, both directions (aioquic downloads only), each report with the data
/// sender's counters; HTTP/3 and the SDK are refused with the reason.
#[test]
fn kwik_against_the_raw_stream_stacks() {
    let Some(kwik) = kwik_bin() else { return };
    let go = quicgo_bin();
    let mut servers: Vec<(PathBuf, &[&str])> = vec![
        (PathBuf::from(BIN), &["--stack", "quinn"]),
        (PathBuf::from(BIN), &["--stack", "quiche"]),
        (PathBuf::from(BIN), &["--stack", "s2n-quic"]),
    ];
    servers.extend(go.clone().map(|g| (g, &[][..])));
    for (bin, args) in &servers {
        let (_srv, addr) = start(bin, args);
        for dir in ["download", "upload"] {
            let v = transfer(&kwik, "kwik", addr, dir, false);
            check_sender_counters(&v, dir);
        }
    }
    // The JVM binds the server's port some 0.5 s after it starts; `start` waits 0.5 s and the
    // first client's Initials may wait out a PTO, which the timeout allows.
    let (_srv, addr) = start(&kwik, &[]);
    let mut clients = vec![
        (PathBuf::from(BIN), "quinn"),
        (PathBuf::from(BIN), "quiche"),
        (PathBuf::from(BIN), "s2n-quic"),
        (kwik.clone(), "kwik"),
    ];
    clients.extend(go.map(|g| (g, "quic-go")));
    for (bin, stack) in &clients {
        for dir in ["download", "upload"] {
            let v = transfer(bin, stack, addr, dir, false);
            check_sender_counters(&v, dir);
        }
    }
    if let Some(aio) = aioquic_bin() {
        let v = transfer(&aio, "aioquic", addr, "download", false);
        check_sender_counters(&v, "download");
    }
    for (args, why) in [
        (&["--http3"][..], "no HTTP/3"),
        (&["--sidekick"][..], "no kwik integration"),
    ] {
        let out = Command::new(&kwik)
            .args(["client", "--connect", &addr.to_string(), "--download", "10"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

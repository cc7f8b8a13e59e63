//! `sidekick-rtc` end to end on loopback through the real binary: quinn ↔ quinn, quiche ↔ quiche
//! and both cross pairs, 2-second runs at the default 30 fps / 3000 kbit/s. Only counts and the
//! shape of the report are asserted: the machine may be loaded, so no delay or jitter bound.
//! The quic-go server (examples/quic-go, built by scripts/test.sh) is tested against both
//! clients when its binary is there; `SIDEKICK_REQUIRE_QUICGO=1` (set by scripts/test.sh) makes
//! a missing binary a failure instead of a skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;

use apps::{Server, free_port, optional_bin};

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-rtc");

const KEYS: [&str; 11] = [
    "stack",
    "frames_sent",
    "frames_received",
    "frame_delay_p50_ms",
    "frame_delay_p90_ms",
    "frame_delay_p99_ms",
    "frame_jitter_p50_ms",
    "frame_jitter_p90_ms",
    "frame_jitter_p99_ms",
    "goodput_mbps",
    "duration_s",
];

/// The quic-go server binary: `$SIDEKICK_SIDEKICK_RTC_QUICGO` (the lab's override), else beside
/// `sidekick-rtc`.
fn quicgo_bin() -> Option<PathBuf> {
    optional_bin(
        "SIDEKICK_SIDEKICK_RTC_QUICGO",
        BIN,
        "sidekick-rtc-quicgo",
        "SIDEKICK_REQUIRE_QUICGO",
        "scripts/test.sh builds it with go",
    )
}

fn server(stack: &str) -> (Server, SocketAddr) {
    let addr = free_port();
    let mut cmd = if stack == "quic-go" {
        let mut c = Command::new(quicgo_bin().unwrap());
        c.arg("server");
        c
    } else {
        let mut c = Command::new(BIN);
        c.args(["server", "--stack", stack]);
        c
    };
    let child = cmd
        .args(["--listen", &addr.to_string(), "--once"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), addr)
}

fn client(stack: &str, addr: SocketAddr) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["client", "--stack", stack, "--connect", &addr.to_string()])
        .args(["--duration", "2", "--json", "--timeout", "60"])
        .output()
        .unwrap();
    apps::one_json_line(&out)
}

fn check(v: &serde_json::Value, stack: &str) {
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = KEYS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want, "{v}");
    assert_eq!(v["stack"], stack);
    // 2 s at 30 fps: 60 frames, every one received.
    assert_eq!(v["frames_sent"], 60, "{v}");
    assert_eq!(v["frames_received"], v["frames_sent"], "{v}");
    for k in &KEYS[3..] {
        let x = v[*k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is a number: {v}"));
        assert!(x.is_finite() && x >= 0.0, "{k} = {x}");
    }
    assert!(v["duration_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["goodput_mbps"].as_f64().unwrap() > 0.0, "{v}");
}

fn pair(client_stack: &str, server_stack: &str) {
    let (mut srv, addr) = server(server_stack);
    let v = client(client_stack, addr);
    check(&v, client_stack);
    assert!(srv.exited_ok(), "--once server did not exit cleanly");
}

#[test]
fn quinn_to_quinn() {
    pair("quinn", "quinn");
}

#[test]
fn quiche_to_quiche() {
    pair("quiche", "quiche");
}

#[test]
fn quinn_client_quiche_server() {
    pair("quinn", "quiche");
}

#[test]
fn quiche_client_quinn_server() {
    pair("quiche", "quinn");
}

#[test]
fn quicgo_server_with_both_clients() {
    if quicgo_bin().is_none() {
        return;
    }
    pair("quinn", "quic-go");
    pair("quiche", "quic-go");
}

/// A UDP relay in front of `server` that drops every `every`-th short-header datagram (first bit
/// 0: 1-RTT packets, so the handshake is untouched) towards the client. Returns its address and
/// the number dropped so far.
fn lossy_relay(server: SocketAddr, every: u64) -> (SocketAddr, Arc<AtomicU64>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    let dropped = Arc::new(AtomicU64::new(0));
    let counter = dropped.clone();
    std::thread::spawn(move || {
        let mut client = None;
        let mut short = 0u64;
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let to = if from == server {
                let Some(c) = client else { continue };
                if buf[0] & 0x80 == 0 {
                    short += 1;
                    if short.is_multiple_of(every) {
                        counter.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                c
            } else {
                client = Some(from);
                server
            };
            let _ = sock.send_to(&buf[..n], to);
        }
    });
    (addr, dropped)
}

#[test]
fn lossy_path_every_frame_arrives() {
    let mut pairs = vec![("quinn", "quiche"), ("quiche", "quinn")];
    if quicgo_bin().is_some() {
        pairs.push(("quinn", "quic-go"));
    }
    for (client_stack, server_stack) in pairs {
        let (mut srv, addr) = server(server_stack);
        let (relay, dropped) = lossy_relay(addr, 12);
        let v = client(client_stack, relay);
        check(&v, client_stack);
        assert!(
            dropped.load(Ordering::Relaxed) > 0,
            "the relay dropped nothing"
        );
        assert!(srv.exited_ok(), "--once server did not exit cleanly");
    }
}

#[test]
fn help_lists_the_flags() {
    let out = Command::new(BIN)
        .args(["server", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for f in ["--stack", "--listen", "--once", "--fps", "--kbps"] {
        assert!(s.contains(f), "{f}: {s}");
    }
    let out = Command::new(BIN)
        .args(["client", "--help"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    for f in ["--connect", "--duration", "--json", "--timeout"] {
        assert!(s.contains(f), "{f}: {s}");
    }
}

//! `sidekick-webrtc` with a real browser as the far peer (Debian's `chromium`, which
//! scripts/setup.sh installs): on loopback, the server starts headless Chromium, the page answers
//! the client's offer, and the browser decodes the real VP8 frames the client sends (its own
//! `getStats()`); the browser is gone (process group and profile) when the server exits; a
//! browser that cannot start or a download call fail cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;

use apps::Server;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-webrtc");

fn free_tcp_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn server(chromium: &str) -> (Server, SocketAddr) {
    let addr = free_tcp_port();
    let child = Command::new(BIN)
        .args(["server", "--once", "--chromium", chromium, "--listen"])
        .arg(addr.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), addr)
}

fn client(connect: SocketAddr, direction: &str) -> std::process::Output {
    Command::new(BIN)
        .args([
            "client",
            "--json",
            "--linger-ms",
            "1000",
            "--far-peer",
            "chromium",
        ])
        .args(["--duration", "3", "--direction", direction, "--connect"])
        .arg(connect.to_string())
        .output()
        .unwrap()
}

/// Profile directories the server `pid` left behind.
fn leftovers(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("sidekick-chromium-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
fn chromium_decodes_the_vp8_call_and_is_gone_after_it() {
    let (mut srv, addr) = server("chromium");
    let pid = srv.0.id();
    let v = apps::one_json_line(&client(addr, "upload"));
    assert_eq!(v["far_peer"], "chromium", "{v}");
    assert_eq!(v["frames_sent"], 90, "{v}");
    // Loopback: nothing lost; the browser decoded (nearly) every frame at the encoded size,
    // both keyframes (frames 0 and 60) among them.
    let decoded = v["browser_frames_decoded"].as_f64().unwrap();
    assert!(decoded >= 85.0, "{v}");
    assert!(
        v["browser_key_frames_decoded"].as_f64().unwrap() >= 2.0,
        "{v}"
    );
    assert_eq!(v["browser_frame_width"], 640.0, "{v}");
    assert_eq!(v["browser_packets_lost"], 0.0, "{v}");
    assert_eq!(
        v["browser_packets_received"].as_f64(),
        v["packets_sent"].as_f64(),
        "{v}"
    );
    assert!(
        v["browser_jitter_buffer_delay_ms"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert!(srv.exited_ok(), "server failed");
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

#[test]
fn a_browser_that_cannot_start_or_a_download_fails_cleanly() {
    // `false` exits at once: the caller's offer is refused, the server reports the failure.
    let (mut srv, addr) = server("false");
    let pid = srv.0.id();
    let out = client(addr, "upload");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("browser exited"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!srv.exited_ok());
    assert!(leftovers(pid).is_empty());
    // The browser only receives: a download call is refused before anything starts.
    let out = client(free_tcp_port(), "download");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only receives"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

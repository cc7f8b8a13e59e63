//! `sidekick-media client --sidekick` (Robin #1) through the in-process proxy (`tests/common`):
//! the near link loses one media datagram in 28 (≈ 3.6 %, Sidekick (NSDI '24) Table 5 #1) before the proxy
//! sees it, the far segment has 25 ms one way; the proxy quACKs every 2 packets with t = 8 and
//! the sender resends what a quACK shows lost (also with a quACK every 32 packets plus one after
//! each silence, `--sidekick-quack-on-gap`). Without a proxy the stream falls back to NACKs.
//! `sidekick-media-fec client --sidekick` (Packrat media): the link after the proxy loses one
//! datagram in 10 (Packrat (CoNEXT '26) Table 3, cellular), the player's eACKs let the proxy retransmit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;
mod common;

use apps::Server;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-media");
const FEC_BIN: &str = env!("CARGO_BIN_EXE_sidekick-media-fec");

fn server() -> (Server, SocketAddr) {
    let addr = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let child = Command::new(BIN)
        .args(["server", "--once", "--linger-ms", "500", "--listen"])
        .arg(addr.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), addr)
}

fn links() -> common::Links {
    common::Links {
        loss_every: 28,
        far_delay: Duration::from_millis(25),
        far_rate_bps: 10e6,
        ..common::Links::default()
    }
}

fn run(proxy: bool, extra: &[&str]) -> (serde_json::Value, u64) {
    let (_server, addr) = server();
    let relay = common::start(addr, proxy, links());
    let out = Command::new(BIN)
        .args(["client", "--connect"])
        .arg(relay.front.to_string())
        .args(["--duration", "4", "--json", "--sidekick"])
        .args(extra)
        .output()
        .unwrap();
    let dropped = relay.stats.dropped.load(Ordering::Relaxed);
    (apps::one_json_line(&out), dropped)
}

#[test]
fn media_sender_retransmits_on_quack_loss() {
    let (v, dropped) = run(true, &[]);
    eprintln!("media with sidekick: {v}\ndropped {dropped}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert_eq!(sk["mode"], "robin");
    assert!(dropped > 0);
    assert!(sk["quacks"].as_u64().unwrap() > 10, "{v}");
    assert!(sk["losses_detected"].as_u64().unwrap() > 0, "{v}");
    assert!(sk["retransmissions"].as_u64().unwrap() > 0, "{v}");
    // Every packet reached the receiver (early copies or NACK-triggered resends).
    assert_eq!(v["packets_missing"], 0, "{v}");
}

#[test]
fn media_without_proxy_falls_back_to_nacks() {
    let (v, _) = run(
        false,
        &[
            "--sidekick-discovery-retry-ms",
            "20",
            "--sidekick-discovery-attempts",
            "2",
        ],
    );
    eprintln!("media without proxy: {v}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "fallback", "{v}");
    assert_eq!(sk["fallback_cause"], "no_proxy");
    assert_eq!(sk["quacks"], 0);
    assert_eq!(v["packets_missing"], 0, "{v}");
}

/// A 4 s `sidekick-media-fec` call with `--sidekick` and `extra` client flags, through a relay
/// that drops every 10th datagram on the near link and runs the proxy; the client's JSON report
/// and the relay (its counters).
fn fec_call_with_proxy(extra: &[&str]) -> (serde_json::Value, common::Running) {
    let addr = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let _server = Server(
        Command::new(FEC_BIN)
            .args(["server", "--once", "--listen"])
            .arg(addr.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let relay = common::start(
        addr,
        true,
        common::Links {
            loss_every: 10,
            far_delay: Duration::from_millis(30),
            ..common::Links::default()
        },
    );
    let out = Command::new(FEC_BIN)
        .args(["client", "--connect"])
        .arg(relay.front.to_string())
        .args([
            "--duration",
            "4",
            "--json",
            "--linger-ms",
            "500",
            "--sidekick",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (apps::one_json_line(&out), relay)
}

#[test]
fn fec_player_eacks_drive_proxy_retransmissions() {
    let (v, relay) = fec_call_with_proxy(&[]);
    let st = &relay.stats;
    eprintln!(
        "media-fec with sidekick: {v}\nrelay: dropped {} eacks {} proxy retx {}",
        st.dropped.load(Ordering::Relaxed),
        st.eacks.load(Ordering::Relaxed),
        st.proxy_retransmissions.load(Ordering::Relaxed)
    );
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert_eq!(sk["mode"], "packrat");
    assert!(sk["eacks_sent"].as_u64().unwrap() > 10, "{v}");
    assert!(st.dropped.load(Ordering::Relaxed) > 0);
    assert!(st.eacks.load(Ordering::Relaxed) > 0);
    assert!(
        st.proxy_retransmissions.load(Ordering::Relaxed) > 0,
        "the proxy retransmitted from its cache"
    );
}

/// `--sidekick-eack nack`: eACKs only where the player's NACK layer sees a missing packet (one
/// at once, again every 25 ms while it is missing, for at most 60 ms): the proxy still repairs
/// the losses, with far fewer eACKs than the periodic cadence (one per 2 packets: ≈ 100 in 4 s).
#[test]
fn fec_player_nack_driven_eacks_repair_losses_with_few_eacks() {
    let (v, relay) = fec_call_with_proxy(&[
        "--sidekick-eack",
        "nack",
        "--sidekick-eack-interval-ms",
        "25",
        "--sidekick-reorder-ms",
        "60",
    ]);
    let st = &relay.stats;
    let dropped = st.dropped.load(Ordering::Relaxed);
    let retx = st.proxy_retransmissions.load(Ordering::Relaxed);
    eprintln!("media-fec with NACK-driven eACKs: {v}\nrelay: dropped {dropped} proxy retx {retx}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    let eacks = sk["eacks_sent"].as_u64().unwrap();
    assert!(dropped > 5, "{v}");
    // At least one eACK per loss the player saw; at most three (60 ms / 25 ms) and a few for
    // losses of the proxy's own repairs.
    assert!(
        eacks >= dropped / 2 && eacks <= 3 * dropped + 4,
        "{eacks} eACKs: {v}"
    );
    assert!(eacks < 60, "periodic would send ≈ 100: {v}");
    assert!(
        retx >= dropped / 2,
        "the proxy repaired the losses: {retx} of {dropped}"
    );
    assert_eq!(v["frames_missing"], 0, "{v}");
}

/// `--sidekick-quack-on-gap`: with a quACK only every 32 packets, the packet after each
/// near-link loss still carries a quACK (so does the next one, and the first packet, to sync),
/// so every loss is resent early — with about a third of the quACKs of the every-2 cadence.
#[test]
fn quack_on_gap_finds_every_loss_with_sparse_quacks() {
    let (v, dropped) = run(
        true,
        &[
            "--sidekick-quack-every-packets",
            "32",
            "--sidekick-quack-on-gap",
            "150",
        ],
    );
    eprintln!("media with quACK on gap: {v}\ndropped {dropped}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert!(dropped > 3, "{v}");
    // Every near-link loss found by a quACK and resent early.
    assert_eq!(sk["losses_detected"].as_u64().unwrap(), dropped, "{v}");
    assert_eq!(sk["retransmissions"].as_u64().unwrap(), dropped, "{v}");
    // One quACK to sync, two per loss, one per 32 packets (200 packets in 4 s). The count alone
    // would give 200 / 32 = 6, and would still find every loss, only later: the lower bound is
    // what shows the silences triggered the quACKs.
    let quacks = sk["quacks"].as_u64().unwrap();
    assert!(quacks >= 2 * dropped, "{quacks} quACKs: {v}");
    assert!(
        quacks <= 1 + 2 * dropped + 200 / 32 + 1,
        "{quacks} quACKs: {v}"
    );
    assert_eq!(v["packets_missing"], 0, "{v}");
}

//! `sidekick-webrtc` (str0m) on loopback with real UDP sockets: a call completes in both
//! directions and every frame arrives; through the in-process proxy (`tests/common`) with SRTP
//! datagrams lost on the proxy's client side, Robin (upload) resends the identical SRTP datagram
//! on quACK evidence and Packrat (download) gets the proxy to resend cached ones; without a
//! proxy the call falls back to NACK/RTX and still completes; a relay that mangles datagrams
//! (bad RTP/STUN) does not break the call; nor does an SRTP key change mid-call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;
mod common;

use apps::Server;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use sidekick_examples::webrtc::rtp_lens::{Kind, classify};

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-webrtc");

fn free_tcp_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A `--once` server on a free loopback port, optionally advertising another media address.
fn server(advertise: Option<SocketAddr>) -> (Server, SocketAddr) {
    let addr = free_tcp_port();
    let mut cmd = Command::new(BIN);
    cmd.args(["server", "--once", "--listen"])
        .arg(addr.to_string());
    if let Some(a) = advertise {
        cmd.arg("--advertise").arg(a.to_string());
    }
    let child = cmd.stdout(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), addr)
}

fn client(connect: SocketAddr, direction: &str, secs: &str, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["client", "--json", "--linger-ms", "1000", "--connect"])
        .arg(connect.to_string())
        .args(["--direction", direction, "--duration", secs])
        .args(extra)
        .output()
        .unwrap();
    apps::one_json_line(&out)
}

fn assert_every_frame(v: &serde_json::Value) {
    assert_every_frame_but_tail(v, 0);
}

/// Every frame sent arrived complete but for a loss of the stream's last `tail` datagrams: after
/// them the sender sends no more RTP, so no later packet reveals the gap, neither to str0m's
/// NACKs nor to the receiver's eACKs (which go out while a gap is open). A lost datagram inside
/// the stream is still a failure (`lost` counts the gaps below the highest sequence number).
fn assert_every_frame_but_tail(v: &serde_json::Value, tail: u64) {
    let expected = v["frames_expected"].as_u64().unwrap();
    assert!(expected > 0, "{v}");
    assert_eq!(v["frames_sent"].as_u64(), Some(expected), "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    let missing = v["packets_sent"]
        .as_u64()
        .unwrap()
        .checked_sub(v["packets"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("more packets received than sent: {v}"));
    assert!(missing <= tail, "{v}");
    let complete = v["frames_complete"].as_u64().unwrap();
    assert!(complete + missing.min(1) >= expected, "{v}");
    assert_eq!(
        complete + v["frames_incomplete"].as_u64().unwrap(),
        expected,
        "{v}"
    );
    for k in [
        "dejitter_p50_ms",
        "dejitter_p99_ms",
        "frame_delay_p90_ms",
        "frozen_ms_total",
        "nacks",
        "retransmissions",
    ] {
        assert!(v[k].as_f64().is_some_and(|x| x >= 0.0), "{k}: {v}");
    }
}

#[test]
fn upload_call_delivers_every_frame() {
    let (mut srv, addr) = server(None);
    let v = client(addr, "upload", "2", &[]);
    eprintln!("upload: {v}");
    assert_every_frame(&v);
    assert_eq!(v["direction"], "upload");
    assert_eq!(v["frames_expected"], 60);
    // Loopback loses nothing: no NACK, no RTX.
    assert_eq!(v["nacks"], 0, "{v}");
    assert_eq!(v["retransmissions"], 0, "{v}");
    assert!(srv.exited_ok());
}

#[test]
fn download_call_delivers_every_frame() {
    let (mut srv, addr) = server(None);
    let v = client(addr, "download", "2", &["--kbps", "2000"]);
    eprintln!("download: {v}");
    assert_every_frame(&v);
    assert_eq!(v["direction"], "download");
    assert!(srv.exited_ok());
}

fn srtp(d: &[u8]) -> bool {
    matches!(classify(d), Kind::Rtp { .. })
}

fn relay_links(loss_every: u64, far_ms: u64) -> common::Links {
    common::Links {
        loss_every,
        far_delay: Duration::from_millis(far_ms),
        far_rate_bps: 20e6,
        droppable: srtp,
        ..common::Links::default()
    }
}

/// A call through the relay (the server advertises the relay's front address as its media
/// candidate); returns the report and the SRTP datagrams the lossy link dropped.
fn relayed(
    direction: &str,
    proxy: bool,
    links: common::Links,
    extra: &[&str],
) -> (serde_json::Value, u64, common::Running) {
    // The relay needs the server's media address first: take a free port for both.
    let addr = free_tcp_port();
    let relay = common::start(addr, proxy, links);
    let mut cmd = Command::new(BIN);
    cmd.args(["server", "--once", "--listen"])
        .arg(addr.to_string())
        .arg("--advertise")
        .arg(relay.front.to_string());
    let _srv = Server(cmd.stdout(Stdio::null()).spawn().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let v = client(addr, direction, "3", extra);
    let dropped = relay.stats.dropped.load(Ordering::Relaxed);
    (v, dropped, relay)
}

#[test]
fn robin_resends_srtp_on_quack_loss() {
    // One SRTP datagram in 28 (≈ 3.6 %) lost before the proxy; 25 ms far segment.
    let (v, dropped, _relay) = relayed("upload", true, relay_links(28, 25), &["--sidekick"]);
    eprintln!("upload with sidekick: {v}\ndropped {dropped}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert_eq!(sk["mode"], "robin");
    assert!(dropped > 5, "{v}");
    assert!(sk["quacks"].as_u64().unwrap() > 5, "{v}");
    assert!(sk["losses_detected"].as_u64().unwrap() > 0, "{v}");
    assert!(sk["retransmissions"].as_u64().unwrap() > 0, "{v}");
    // No loss but the relay's: ICE's STUN checks to other candidates never cross the proxy
    // and are not the session's to count.
    assert!(sk["losses_detected"].as_u64().unwrap() <= dropped, "{v}");
    assert_eq!(sk["inconsistent_quacks"], 0, "{v}");
    assert_every_frame(&v);
}

#[test]
fn packrat_proxy_resends_cached_srtp() {
    // One SRTP datagram in 10 lost after the proxy; 30 ms far segment.
    let (v, dropped, relay) = relayed("download", true, relay_links(10, 30), &["--sidekick"]);
    let repaired = relay.stats.proxy_retransmissions.load(Ordering::Relaxed);
    eprintln!("download with sidekick: {v}\ndropped {dropped}, proxy resent {repaired}");
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert_eq!(sk["mode"], "packrat");
    assert!(dropped > 10, "{v}");
    assert!(sk["eacks_sent"].as_u64().unwrap() > 5, "{v}");
    assert!(sk["gaps_opened"].as_u64().unwrap() > 0, "{v}");
    assert!(repaired > dropped / 2, "{v}");
    // The relay drops only once the session is up: NACKs then are all "while active", and the
    // session's setup time is reported.
    let nacks = v["nacks"].as_u64().unwrap();
    assert_eq!(v["nacks_while_active"].as_u64(), Some(nacks), "{v}");
    assert!(
        v["sidekick_setup_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{v}"
    );
    // The relay drops every 10th datagram once the session is up, so one call in ten loses the
    // stream's last one (seen on 26 Nov 2026: 566 of 567 datagrams, 89 of 90 frames).
    assert_every_frame_but_tail(&v, 1);
}

#[test]
fn without_proxy_the_call_falls_back_and_completes() {
    let (v, _, _relay) = relayed(
        "upload",
        false,
        relay_links(0, 10),
        &[
            "--sidekick",
            "--sidekick-discovery-retry-ms",
            "50",
            "--sidekick-discovery-attempts",
            "2",
        ],
    );
    eprintln!("no proxy: {v}");
    assert_eq!(v["sidekick"]["state"], "fallback", "{v}");
    assert_eq!(v["sidekick"]["fallback_cause"], "no_proxy", "{v}");
    assert_every_frame(&v);
}

#[test]
fn malformed_rtp_and_stun_through_the_proxy_do_not_break_the_call() {
    // Every 15th datagram each way is followed by a malformed one (truncated SRTP, bytes under a
    // forged RTP header, a bad STUN header, one byte), through the proxy core, with a Packrat
    // player and 1 in 20 SRTP datagrams lost after the proxy.
    let links = common::Links {
        garbage_every: 15,
        ..relay_links(20, 20)
    };
    let (v, _, _relay) = relayed("download", true, links, &["--sidekick"]);
    eprintln!("garbage, download: {v}");
    assert_every_frame(&v);
    // str0m refused the garbage on both sides; the call went on.
    let refused = v["datagrams_refused"].as_u64().unwrap()
        + v["input_errors"].as_u64().unwrap()
        + v["server_datagrams_refused"].as_u64().unwrap()
        + v["server_input_errors"].as_u64().unwrap();
    assert!(refused > 10, "{v}");
    assert_eq!(v["sidekick"]["state"], "active", "{v}");
    // And the same for a Robin sender.
    let links = common::Links {
        garbage_every: 15,
        ..relay_links(28, 20)
    };
    let (v, _, _relay) = relayed("upload", true, links, &["--sidekick"]);
    eprintln!("garbage, upload: {v}");
    assert_every_frame(&v);
}

/// A counter's growth since the key change began (`sidekick` minus `sidekick_at_rekey`).
fn since_rekey(v: &serde_json::Value, key: &str) -> u64 {
    let now = v["sidekick"][key].as_u64().unwrap();
    let then = v["sidekick_at_rekey"][key].as_u64().unwrap();
    now.checked_sub(then).unwrap()
}

/// Both peers' halves of a key change: one each, no error, media under the new keys on both
/// sides (the old instance did not simply carry the call to its end).
fn assert_rekeyed(v: &serde_json::Value) {
    assert_eq!(v["rekeys"], 1, "{v}");
    assert_eq!(v["server_rekeys"], 1, "{v}");
    assert!(v.get("rekey_error").is_none(), "{v}");
    assert!(v["rekey_connect_ms"].as_f64().unwrap() >= 0.0, "{v}");
    assert!(v["server_rekey_connect_ms"].as_f64().unwrap() >= 0.0, "{v}");
    // 3 s at 30 fps, about 6 packets a frame; the change starts at 1.5 s.
    assert!(v["media_after_rekey"].as_u64().unwrap() > 150, "{v}");
    assert!(v["server_media_after_rekey"].as_u64().unwrap() > 150, "{v}");
}

/// An SRTP key change mid-call (a new DTLS handshake on the same 5-tuple, new SSRC, new keys;
/// `--rekey-after-ms`) through the proxy with losses on its client side: the call keeps every
/// frame and the assistance goes on under the new keys — Robin detects and resends losses after
/// the change (upload), the proxy repairs gaps the player opens after it (download).
#[test]
fn an_srtp_key_change_mid_call_keeps_the_call_and_its_assistance() {
    let rekey = ["--sidekick", "--rekey-after-ms", "1500"];
    let (v, dropped, _relay) = relayed("upload", true, relay_links(28, 25), &rekey);
    eprintln!("key change, upload with sidekick: {v}\ndropped {dropped}");
    assert_rekeyed(&v);
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert_eq!(sk["inconsistent_quacks"], 0, "{v}");
    assert!(sk["losses_detected"].as_u64().unwrap() <= dropped, "{v}");
    assert!(since_rekey(&v, "quacks") > 3, "{v}");
    assert!(since_rekey(&v, "retransmissions") > 0, "{v}");
    assert_every_frame(&v);

    let (v, dropped, relay) = relayed("download", true, relay_links(10, 30), &rekey);
    let repaired = relay.stats.proxy_retransmissions.load(Ordering::Relaxed);
    eprintln!(
        "key change, download with sidekick: {v}\ndropped {dropped}, proxy resent {repaired}"
    );
    assert_rekeyed(&v);
    let sk = &v["sidekick"];
    assert_eq!(sk["state"], "active", "{v}");
    assert!(since_rekey(&v, "eacks_sent") > 3, "{v}");
    assert!(since_rekey(&v, "gaps_filled") > 3, "{v}");
    assert!(repaired > dropped / 2, "{v}");
    assert_every_frame_but_tail(&v, 1);
}

/// The far peer falls silent mid-call (nothing crosses the proxy–server segment either way from
/// 1 s after the first media datagram): each call still ends on schedule with its report, and
/// the sidekick neither breaks nor invents work.
/// - Download (Packrat): the player got the first part of the stream and nothing after; no gap
///   inside what it got (no datagram held back and lost), at most the one frame the silence cut.
/// - Upload (Robin): the proxy saw every datagram the client sent (the silence is beyond it), so
///   its quACKs show no loss and the client resends nothing; the sender sends every frame. (This
///   found the sender logging ICE's STUN checks to other candidates, which never cross the
///   proxy: 7 false losses and resends per call before the sidekick kept to the media peer.)
#[test]
fn a_far_peer_gone_silent_mid_call_ends_the_call_with_its_report() {
    let links = common::Links {
        far_silent_after: Some(Duration::from_secs(1)),
        ..relay_links(0, 20)
    };
    let (v, _, relay) = relayed("download", true, links, &["--sidekick"]);
    eprintln!("silent sender, download: {v}");
    let silenced = relay.stats.silenced.load(Ordering::Relaxed);
    let expected = v["frames_expected"].as_u64().unwrap();
    let complete = v["frames_complete"].as_u64().unwrap();
    assert!(silenced > 50, "{v}");
    assert!(complete > 10 && complete < expected, "{v}");
    assert!(v["frames_incomplete"].as_u64().unwrap() <= 1, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["end"], "done", "{v}");
    assert_eq!(v["sidekick"]["mode"], "packrat", "{v}");
    assert_eq!(v["sidekick"]["gaps_opened"], 0, "{v}");

    let links = common::Links {
        far_silent_after: Some(Duration::from_secs(1)),
        ..relay_links(0, 20)
    };
    let (v, _, relay) = relayed("upload", true, links, &["--sidekick"]);
    eprintln!("silent receiver, upload: {v}");
    assert!(relay.stats.silenced.load(Ordering::Relaxed) > 50, "{v}");
    assert_eq!(v["frames_sent"], v["frames_expected"], "{v}");
    let sk = &v["sidekick"];
    assert_eq!(sk["mode"], "robin", "{v}");
    assert_eq!(sk["state"], "active", "{v}");
    assert!(sk["quacks"].as_u64().unwrap() > 5, "{v}");
    assert_eq!(sk["losses_detected"], 0, "{v}");
    assert_eq!(sk["retransmissions"], 0, "{v}");
    assert_eq!(sk["inconsistent_quacks"], 0, "{v}");
}

//! The committed fuzz seeds of the proxy's targets (`fuzz/corpus/TARGET/`): real QUIC datagrams
//! (the long-header handshake packets of a recorded quinn download, `proxy-core/tests/data/`) in Ethernet,
//! VLAN, IPv4, IPv6 and raw-IP frames; real eACKs; and scripts for the stateful bodies. Every
//! seed runs through its fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p
//! sidekick-proxy --test fuzz_corpus` rewrites them.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use eack::ReceiverEack;
use sidekick_proxy::fuzz_support::{fuzz_core_sessions, fuzz_multicast_eack};
use sidekick_proxy::packet::build_udp_ip;
use sidekick_proxy::pemi::trace::parse_trace;

/// The committed seeds of `target` (`fuzz/corpus/TARGET/`).
fn corpus(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// With `SIDEKICK_WRITE_FUZZ_SEEDS=1`, (re)writes the seeds of `target`; then runs every seed
/// of `target` through its fuzz body (a seed that once crashed stays a regression test).
fn seeds(target: &str, make: impl FnOnce() -> Vec<(&'static str, Vec<u8>)>, body: fn(&[u8])) {
    let dir = corpus(target);
    if std::env::var_os("SIDEKICK_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in make() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        body(&bytes);
        n += 1;
    }
    assert!(n > 0, "no seeds in {}", dir.display());
}

const TRACE: &str = include_str!("../../proxy-core/tests/data/pemi-quinn-download.trace");

/// Whole QUIC datagrams of the recorded download: long-header handshake packets (client and
/// server, coalesced ones included) and short-header packets rebuilt around their first byte.
fn quic_datagrams() -> Vec<Vec<u8>> {
    let records = parse_trace(TRACE).unwrap();
    let mut out: Vec<Vec<u8>> = records
        .iter()
        .filter(|r| r.head.len() == r.len && r.len > 0)
        .take(3)
        .map(|r| r.head.clone())
        .collect();
    // A short-header packet: the recorded first byte, an 8-byte connection id, protected bytes.
    let first = records.iter().find(|r| r.head.len() == 1).unwrap().head[0];
    let mut short = vec![first, 1, 2, 3, 4, 5, 6, 7, 8];
    short.extend((0..40u8).map(|i| i.wrapping_mul(37)));
    out.push(short);
    out
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// An Ethernet frame around `ip` (with an 802.1Q tag when `vlan`).
fn eth(ip: &[u8], vlan: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    }
    f.extend_from_slice(if ip[0] >> 4 == 6 {
        &[0x86, 0xdd]
    } else {
        &[0x08, 0x00]
    });
    f.extend_from_slice(ip);
    f
}

fn frame_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let d = quic_datagrams();
    let c4 = addr("10.0.0.2:34966");
    let s4 = addr("198.51.100.10:4433");
    let c6 = addr("[fd00::2]:34966");
    let s6 = addr("[2001:db8::10]:4433");
    vec![
        (
            "eth-ipv4-initial",
            eth(&build_udp_ip(c4, s4, &d[0], 64), false),
        ),
        (
            "eth-ipv6-handshake",
            eth(&build_udp_ip(s6, c6, &d[1], 64), false),
        ),
        (
            "vlan-ipv4-short",
            eth(&build_udp_ip(s4, c4, &d[3], 64), true),
        ),
        ("raw-ipv4-short", build_udp_ip(c4, s4, &d[3], 64)),
    ]
}

fn eack_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // The body caches identifiers 0..20; the client lost 3 and 11 of them.
    let mut rx = ReceiverEack::new(40);
    for id in (0..20u32).filter(|&i| i != 3 && i != 11) {
        rx.on_receive(id);
    }
    let mut full = Vec::new();
    rx.encode(40, &mut full).unwrap();
    let mut short = Vec::new();
    rx.encode(6, &mut short).unwrap();
    // The same client at 2- and 8-byte identifiers (the engines of those widths in the body).
    let mut r16 = eack::WidthReceiverEack::new(quack::Width::U16, 40, eack::HashKey::DEFAULT);
    let mut r64 = eack::WidthReceiverEack::new(quack::Width::U64, 40, eack::HashKey::DEFAULT);
    for id in (0..20u64).filter(|&i| i != 3 && i != 11) {
        r16.on_receive(id);
        r64.on_receive(id);
    }
    let mut w16 = Vec::new();
    r16.encode(40, &mut w16).unwrap();
    let mut w64 = Vec::new();
    r64.encode(40, &mut w64).unwrap();
    vec![
        ("lost-3-11", full),
        ("lost-3-11-short", short),
        ("lost-3-11-u16", w16),
        ("lost-3-11-u64", w64),
    ]
}

fn core_frames_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Frames alternate direction at each 0xff byte: a client packet, then the server's answer.
    let d = quic_datagrams();
    let c = addr("10.0.0.2:34966");
    let s = addr("198.51.100.10:4433");
    let mut two = eth(&build_udp_ip(c, s, &d[3], 64), false);
    two.push(0xff);
    two.extend(eth(&build_udp_ip(s, c, &d[3], 64), false));
    vec![
        ("initial", eth(&build_udp_ip(c, s, &d[0], 64), false)),
        ("short-pair", two),
    ]
}

fn handshake_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Datagrams alternate direction at each 0x5a byte.
    let d = quic_datagrams();
    vec![
        ("client-initial", d[0].clone()),
        ("server-handshake", d[1].clone()),
    ]
}

fn rescue_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Steps separated by 0x5a: a control byte (bits 0-3: ms / 3 to advance, bit 4: towards the
    // client, bit 5: pad to 1200 bytes, bits 6-7: client port) and a datagram.
    let d = quic_datagrams();
    let script = |steps: &[(u8, &[u8])]| {
        let mut v = Vec::new();
        for (ctl, dg) in steps {
            v.push(*ctl);
            v.extend_from_slice(dg);
            v.push(0x5a);
        }
        v
    };
    vec![
        (
            "flight-then-silence",
            script(&[(0x20, &d[0]), (0x11, &d[1]), (0x11, &d[2]), (0x0f, &[])]),
        ),
        (
            "flight-then-completion",
            script(&[(0x20, &d[0]), (0x11, &d[1]), (0x01, &d[3])]),
        ),
        (
            "repeated-initial",
            script(&[(0x20, &d[0]), (0x11, &d[1]), (0x21, &d[0])]),
        ),
    ]
}

fn step(op: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![op, payload.len() as u8];
    v.extend_from_slice(payload);
    v
}

fn datagram(id: u32) -> Vec<u8> {
    let mut p = vec![0x40, 1, 2, 3, 4, 5, 6, 7, 8];
    p.extend_from_slice(&[0x33; 40]);
    p.extend_from_slice(&id.to_le_bytes());
    p
}

fn core_sessions_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // mode 0: Robin every 2 packets; mode 2: Packrat; mode 4: Packrat multicast.
    let upload = {
        let mut s = vec![0];
        for id in 0..10 {
            s.extend(step(0, &datagram(id)));
        }
        s.extend(step(7, &[5]));
        s
    };
    let download = |mode: u8, op: u8| {
        let mut s = vec![mode];
        for id in 0..12 {
            let lost = if id % 5 == 2 { 0x08 } else { 0 };
            s.extend(step(op | lost, &datagram(id)));
        }
        s.extend(step(5, &[0, 40]));
        s.extend(step(8, &[0]));
        s
    };
    // Modes 8 and 14: Packrat at 2- and 8-byte identifiers (IPv6); the datagrams' last bytes
    // differ at either width.
    let download_at_width = |mode: u8| {
        let mut s = vec![mode];
        for id in 0..12u32 {
            let lost = if id % 5 == 2 { 0x08 } else { 0 };
            let mut d = datagram(id);
            d.extend_from_slice(&(id + 1).wrapping_mul(0x0101_0101).to_le_bytes());
            s.extend(step(1 | lost, &d));
        }
        s.extend(step(5, &[0, 40]));
        s.extend(step(8, &[0]));
        s
    };
    vec![
        ("robin-upload", upload),
        ("packrat-download", download(2, 1)),
        ("multicast", download(4, 2)),
        ("packrat-download-2-byte-ids", download_at_width(8)),
        ("packrat-download-8-byte-ids", download_at_width(14)),
    ]
}

fn multicast_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut s = vec![64];
    for k in 0..3u8 {
        s.extend(step(1 | (k << 4), &[1]));
        s.extend(step(3 | (k << 4), &[]));
    }
    for id in 0..12u32 {
        let mut p = vec![if id % 4 == 1 { 0x10 << (id % 3) } else { 0 }; 20];
        p.extend_from_slice(&id.to_le_bytes());
        s.extend(step(0, &p));
    }
    for k in 0..3u8 {
        s.extend(step(5 | (k << 4), &[40]));
    }
    vec![("three-clients", s)]
}

#[test]
fn fuzz_seeds() {
    seeds(
        "parse_frame",
        frame_seeds,
        sidekick_proxy::packet::fuzz_parse,
    );
    seeds(
        "packrat_eack",
        eack_seeds,
        sidekick_proxy::packrat::fuzz_eack,
    );
    seeds(
        "core_frames",
        core_frames_seeds,
        sidekick_proxy::core::fuzz_core,
    );
    seeds(
        "pemi_handshake",
        handshake_seeds,
        sidekick_proxy::pemi::handshake::fuzz_handshake,
    );
    seeds(
        "handshake_rescue",
        rescue_seeds,
        sidekick_proxy::core::fuzz_rescue,
    );
    seeds("core_sessions", core_sessions_seeds, fuzz_core_sessions);
    seeds("multicast_eack", multicast_seeds, fuzz_multicast_eack);
}

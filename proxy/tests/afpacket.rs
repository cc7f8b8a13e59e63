//! AF_PACKET backend on a real veth pair: capture with direction and checksum state, injection of
//! a frame that a socket in another network namespace receives, and a short capture-rate run.
//! Needs root (network namespaces); skipped with a message otherwise. Always cleans up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{lab, sh};

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use sidekick_proxy::packet::{
    LinkType, build_udp_ipv4, fill_udp_checksum, parse_frame, udp_checksum_ok,
};
use sidekick_proxy::sys::{PacketSocket, RingOptions, poll_readable};

/// A veth pair: `host` stays in this namespace (10.222.x.1), `peer` lives in namespace `ns`
/// (10.222.x.2). Removed on drop.
struct Veth {
    ns: String,
    host: String,
}

impl Veth {
    fn new(tag: &str, subnet: u8) -> Self {
        let id = std::process::id() % 100_000;
        let v = Self {
            ns: format!("skp{tag}{id}"),
            host: format!("skh{tag}{id}"),
        };
        let peer = format!("skv{tag}{id}");
        let h = format!("10.222.{subnet}.1/24");
        let p = format!("10.222.{subnet}.2/24");
        let ok = sh(&["ip", "netns", "add", &v.ns])
            && sh(&[
                "ip", "link", "add", &v.host, "type", "veth", "peer", "name", &peer,
            ])
            && sh(&["ip", "link", "set", &peer, "netns", &v.ns])
            && sh(&["ip", "addr", "add", &h, "dev", &v.host])
            && sh(&["ip", "link", "set", &v.host, "up"])
            && sh(&[
                "ip", "netns", "exec", &v.ns, "ip", "addr", "add", &p, "dev", &peer,
            ])
            && sh(&[
                "ip", "netns", "exec", &v.ns, "ip", "link", "set", &peer, "up",
            ])
            && sh(&[
                "ip", "netns", "exec", &v.ns, "ip", "link", "set", "lo", "up",
            ]);
        assert!(ok, "could not create veth/netns");
        // Let the link come up (DAD is off for IPv4; ARP on first send).
        std::thread::sleep(Duration::from_millis(200));
        v
    }

    fn peer_mac(&self) -> [u8; 6] {
        let id = std::process::id() % 100_000;
        let _ = id;
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "cat"])
            .arg(format!(
                "/sys/class/net/{}/address",
                self.host.replacen("skh", "skv", 1)
            ))
            .output()
            .unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        let mut mac = [0u8; 6];
        for (i, b) in s.trim().split(':').enumerate().take(6) {
            mac[i] = u8::from_str_radix(b, 16).unwrap();
        }
        mac
    }

    fn host_mac(&self) -> [u8; 6] {
        let s = std::fs::read_to_string(format!("/sys/class/net/{}/address", self.host)).unwrap();
        let mut mac = [0u8; 6];
        for (i, b) in s.trim().split(':').enumerate().take(6) {
            mac[i] = u8::from_str_radix(b, 16).unwrap();
        }
        mac
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = sh(&["ip", "link", "del", &self.host]);
        let _ = sh(&["ip", "netns", "del", &self.ns]);
    }
}

fn collect(sock: &mut PacketSocket, want: usize, timeout: Duration) -> Vec<(bool, bool, Vec<u8>)> {
    let mut got = Vec::new();
    let end = Instant::now() + timeout;
    while got.len() < want && Instant::now() < end {
        let _ = poll_readable(&[sock.fd()], 20);
        sock.for_each_frame(64, |info, frame| {
            got.push((info.outgoing, info.csum_not_ready, frame.to_vec()));
        });
    }
    got
}

#[test]
fn capture_direction_checksum_and_injection() {
    if !lab() {
        eprintln!("skipping AF_PACKET test: needs root");
        return;
    }
    let v = Veth::new("a", 201);
    let mut sock = PacketSocket::open(
        &v.host,
        RingOptions {
            block_size: 1 << 16,
            block_nr: 8,
            ..RingOptions::default()
        },
    )
    .unwrap();
    // Outgoing: a datagram sent from this namespace leaves through the host end.
    let udp = UdpSocket::bind("10.222.201.1:0").unwrap();
    let dst: SocketAddr = "10.222.201.2:9999".parse().unwrap();
    for _ in 0..3 {
        udp.send_to(b"sidekick-capture-test", dst).unwrap();
    }
    let got = collect(&mut sock, 64, Duration::from_secs(2));
    let mut seen = 0;
    let mut partial = 0;
    for (outgoing, csum_not_ready, frame) in &got {
        let Ok(p) = parse_frame(frame, LinkType::Ethernet) else {
            continue;
        };
        if p.payload(frame) != b"sidekick-capture-test" {
            continue;
        }
        seen += 1;
        assert!(outgoing, "sent by this host: PACKET_OUTGOING");
        let mut copy = frame.clone();
        if *csum_not_ready {
            fill_udp_checksum(&mut copy, &p);
        }
        let q = parse_frame(&copy, LinkType::Ethernet).unwrap();
        assert!(udp_checksum_ok(&copy, &q), "checksum after filling");
        partial += usize::from(*csum_not_ready);
    }
    assert_eq!(seen, 3, "captured {} frames", got.len());
    eprintln!("{partial} of 3 captured frames had TP_STATUS_CSUMNOTREADY");

    // Injection: a complete frame sent on the host end reaches a socket in the namespace.
    let port = 7000 + (std::process::id() % 1000) as u16;
    let mut rx = Command::new("ip")
        .args(["netns", "exec", &v.ns, "python3", "-c"])
        .arg(format!(
            "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.222.201.2',{port}));s.settimeout(15);print(s.recv(100).decode())"
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ip = build_udp_ipv4(
        "10.222.201.1:4444".parse().unwrap(),
        SocketAddr::from(([10, 222, 201, 2], port)),
        b"injected-by-proxy",
        64,
    );
    let mut frame = Vec::new();
    frame.extend_from_slice(&v.peer_mac());
    frame.extend_from_slice(&v.host_mac());
    frame.extend_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(&ip);
    // Re-send until the receiver (slow to start) got one.
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end && rx.try_wait().unwrap().is_none() {
        sock.send(&frame, None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = rx.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "injected-by-proxy"
    );
    // The injecting socket does not capture its own frames (the kernel skips the originating
    // packet socket), so a retransmission is never cached twice. (ICMP errors quoting the frame
    // come back once the receiver is gone; they are not the frame.)
    let again = collect(&mut sock, 1, Duration::from_millis(300));
    let looped = again.iter().filter(|(_, _, f)| *f == frame).count();
    assert_eq!(looped, 0);
}

#[test]
fn ringless_capture_reads_each_frame_with_its_kernel_time() {
    if !lab() {
        eprintln!("skipping AF_PACKET test: needs root");
        return;
    }
    let v = Veth::new("r", 203);
    let mut sock = PacketSocket::open(
        &v.host,
        RingOptions {
            mmap_ring: false,
            ..RingOptions::default()
        },
    )
    .unwrap();
    let udp = UdpSocket::bind("10.222.203.1:0").unwrap();
    let dst: SocketAddr = "10.222.203.2:9999".parse().unwrap();
    let sent_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for _ in 0..3 {
        udp.send_to(b"sidekick-ringless-test", dst).unwrap();
    }
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    while seen.len() < 3 && Instant::now() < end {
        let _ = poll_readable(&[sock.fd()], 20);
        sock.for_each_frame(4, |info, frame| {
            if let Ok(p) = parse_frame(frame, LinkType::Ethernet)
                && p.payload(frame) == b"sidekick-ringless-test"
            {
                let mut copy = frame.to_vec();
                if info.csum_not_ready {
                    fill_udp_checksum(&mut copy, &p);
                }
                let q = parse_frame(&copy, LinkType::Ethernet).unwrap();
                seen.push((info.outgoing, info.kernel_ts_ns, udp_checksum_ok(&copy, &q)));
            }
        });
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (outgoing, ts, csum_ok) in seen {
        assert!(outgoing, "sent by this host: PACKET_OUTGOING");
        assert!(csum_ok, "checksum complete after filling");
        // SCM_TIMESTAMPNS: the kernel's receive time, after the send started (ordering only:
        // no bound on how late a loaded machine runs this test).
        assert!(
            ts >= sent_at,
            "kernel time {ts} before the send at {sent_at}"
        );
    }
}

/// PEMI's echo-reply socket (`RingOptions::echo_replies_only`, a classic BPF filter): of a UDP
/// datagram and a ping's request and reply crossing the interface, it receives only the reply.
#[test]
fn echo_reply_socket_receives_only_echo_replies() {
    if !lab() {
        eprintln!("skipping AF_PACKET test: needs root");
        return;
    }
    let v = Veth::new("e", 204);
    let mut sock = PacketSocket::open(
        &v.host,
        RingOptions {
            mmap_ring: false,
            vnet_hdr: false,
            echo_replies_only: true,
            ..RingOptions::default()
        },
    )
    .unwrap();
    let udp = UdpSocket::bind("10.222.204.1:0").unwrap();
    for _ in 0..3 {
        udp.send_to(b"sidekick-echo-filter-test", "10.222.204.2:9999")
            .unwrap();
    }
    assert!(sh(&[
        "ping",
        "-c",
        "2",
        "-i",
        "0.2",
        "-W",
        "1",
        "10.222.204.2"
    ]));
    let got = collect(&mut sock, 2, Duration::from_secs(2));
    assert_eq!(got.len(), 2, "two echo replies");
    for (outgoing, _, frame) in &got {
        assert!(!outgoing, "the peer's reply arrives");
        // IPv4, ICMP, type 0 (echo reply) after a 20-byte header.
        assert_eq!(
            (&frame[12..14], frame[23], frame[34]),
            (&[8u8, 0][..], 1, 0)
        );
    }
}

#[test]
fn capture_rate_without_drops() {
    if !lab() {
        eprintln!("skipping AF_PACKET rate test: needs root");
        return;
    }
    let v = Veth::new("b", 202);
    let mut sock = PacketSocket::open(&v.host, RingOptions::default()).unwrap();
    let _ = sock.stats();
    let udp = UdpSocket::bind("10.222.202.1:0").unwrap();
    let dst: SocketAddr = "10.222.202.2:9".parse().unwrap();
    let n = 100_000u32;
    let payload = [0x55u8; 100];
    let reader = std::thread::spawn(move || {
        let mut count = 0u64;
        let end = Instant::now() + Duration::from_secs(20);
        let t0 = Instant::now();
        let mut cpu_start = None;
        while count < u64::from(n) && Instant::now() < end {
            let _ = poll_readable(&[sock.fd()], 10);
            cpu_start.get_or_insert_with(Instant::now);
            sock.for_each_frame(64, |_, frame| {
                if frame.len() > 100 {
                    count += 1;
                }
            });
        }
        let (_, drops) = sock.stats().unwrap_or((0, 0));
        (count, drops, t0.elapsed())
    });
    let t0 = Instant::now();
    for _ in 0..n {
        let _ = udp.send_to(&payload, dst);
    }
    let send_time = t0.elapsed();
    let (count, drops, elapsed) = reader.join().unwrap();
    let pps = f64::from(n) / send_time.as_secs_f64();
    eprintln!(
        "capture: {count}/{n} frames, kernel drops {drops}, offered {pps:.0} packets/s, reader done after {elapsed:?}"
    );
    assert!(count + u64::from(drops) >= u64::from(n) * 9 / 10);
}

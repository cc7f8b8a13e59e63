//! The proxy binary in network namespaces. Sniff mode, between a protocol client and a server:
//! discovery, quACKs for an upload, retransmissions from the cache for a download, metrics, clean
//! stop on SIGTERM (bridge mode: netns_bridge.rs). Needs root; skipped with a message otherwise.
//! Always cleans up.
//!
//! ```text
//! this process (client, 10.222.240.2) ── veth ── ns ap (10.222.240.1 | 10.222.241.1) ── veth ── ns srv (10.222.241.2)
//!                                                 sidekick-proxy sniffing on the client side
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::{lab, sh};

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use eack::ReceiverEack;
use quack::PowerSumQuack;
use sidekick_protocol::messages::{IdentifierSpec, PackratConfig};
use sidekick_protocol::{
    ClientConfig, ClientEvent, ClientSession, Destination, SessionConfig, Time,
};

struct Topo {
    ap: String,
    srv: String,
    c: String,
    proxy: Option<Child>,
    server: Option<Child>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ch in [self.proxy.as_mut(), self.server.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        let _ = sh(&["ip", "link", "del", &self.c]);
        let _ = sh(&["ip", "netns", "del", &self.ap]);
        let _ = sh(&["ip", "netns", "del", &self.srv]);
    }
}

fn setup() -> Option<Topo> {
    setup_with(&[])
}

/// The namespaces, the server and the proxy binary run with `extra` arguments.
fn setup_with(extra: &[&str]) -> Option<Topo> {
    let id = std::process::id() % 100_000;
    let t = Topo {
        ap: format!("skeap{id}"),
        srv: format!("skesrv{id}"),
        c: format!("skec{id}"),
        proxy: None,
        server: None,
    };
    let apc = format!("skea{id}");
    let aps = format!("skeb{id}");
    let srv = format!("skes{id}");
    let (ap_name, srv_name) = (t.ap.clone(), t.srv.clone());
    let (ap, sv) = (ap_name.as_str(), srv_name.as_str());
    let mut t = t;
    let ok = sh(&["ip", "netns", "add", ap])
        && sh(&["ip", "netns", "add", sv])
        && sh(&[
            "ip", "link", "add", &t.c, "type", "veth", "peer", "name", &apc,
        ])
        && sh(&["ip", "link", "set", &apc, "netns", ap])
        && sh(&[
            "ip", "link", "add", &aps, "netns", ap, "type", "veth", "peer", "name", &srv, "netns",
            sv,
        ])
        && sh(&["ip", "addr", "add", "10.222.240.2/24", "dev", &t.c])
        && sh(&["ip", "link", "set", &t.c, "up"])
        && sh(&[
            "ip",
            "route",
            "add",
            "10.222.241.0/24",
            "via",
            "10.222.240.1",
            "dev",
            &t.c,
        ])
        && sh(&[
            "ip",
            "netns",
            "exec",
            ap,
            "ip",
            "addr",
            "add",
            "10.222.240.1/24",
            "dev",
            &apc,
        ])
        && sh(&[
            "ip",
            "netns",
            "exec",
            ap,
            "ip",
            "addr",
            "add",
            "10.222.241.1/24",
            "dev",
            &aps,
        ])
        && sh(&["ip", "netns", "exec", ap, "ip", "link", "set", &apc, "up"])
        && sh(&["ip", "netns", "exec", ap, "ip", "link", "set", &aps, "up"])
        && sh(&["ip", "netns", "exec", ap, "ip", "link", "set", "lo", "up"])
        && sh(&[
            "ip",
            "netns",
            "exec",
            ap,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])
        && sh(&[
            "ip",
            "netns",
            "exec",
            sv,
            "ip",
            "addr",
            "add",
            "10.222.241.2/24",
            "dev",
            &srv,
        ])
        && sh(&["ip", "netns", "exec", sv, "ip", "link", "set", &srv, "up"])
        && sh(&[
            "ip",
            "netns",
            "exec",
            sv,
            "ip",
            "route",
            "add",
            "default",
            "via",
            "10.222.241.1",
        ]);
    assert!(ok, "could not build the namespaces");
    t.proxy = Some(
        Command::new("ip")
            .args(["netns", "exec", ap, env!("CARGO_BIN_EXE_sidekick-proxy")])
            .args(["--interface", &apc, "--faces", "client"])
            .args(["--sidekick-listen", "10.222.240.1:7788"])
            .args([
                "--metrics-listen",
                "10.222.240.1:19465",
                "--ring-blocks",
                "8",
            ])
            .args(["--log", "sidekick_proxy=debug"])
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .ok()?,
    );
    // Server: answers "go N" with N numbered datagrams whose last 4 bytes are their identifiers.
    t.server = Some(
        Command::new("ip")
            .args(["netns", "exec", sv, "python3", "-c"])
            .arg(
                "import socket,struct\n\
                 s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
                 s.bind(('10.222.241.2',4433))\n\
                 while True:\n\
                 \x20 d,a=s.recvfrom(2000)\n\
                 \x20 if d.startswith(b'go'):\n\
                 \x20\x20 for i in range(int(d[2:])): s.sendto(b'D'*800+struct.pack('<I',5000+i),a)\n",
            )
            .spawn()
            .ok()?,
    );
    std::thread::sleep(Duration::from_millis(800));
    Some(t)
}

fn metrics() -> String {
    let Ok(mut s) = TcpStream::connect("10.222.240.1:19465") else {
        return String::new();
    };
    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

struct Client {
    base: UdpSocket,
    sk: UdpSocket,
    /// The session's clock counts from here.
    origin: Instant,
    session: ClientSession,
    events: Vec<ClientEvent>,
    base_rx: Vec<Vec<u8>>,
}

impl Client {
    /// The session's time now.
    fn now(&self) -> Time {
        Time::since(self.origin, Instant::now())
    }

    fn pump(&mut self, dur: Duration) {
        let server: SocketAddr = "10.222.241.2:4433".parse().unwrap();
        let end = Instant::now() + dur;
        let mut buf = vec![0u8; 4096];
        while Instant::now() < end {
            let now = self.now();
            while let Some(t) = self.session.poll_transmit() {
                match t.dest {
                    Destination::Base => {
                        self.base.send_to(&t.bytes, server).unwrap();
                    }
                    Destination::Sidekick(p) => {
                        self.sk.send_to(&t.bytes, p).unwrap();
                    }
                }
            }
            if let Ok((n, from)) = self.sk.recv_from(&mut buf)
                && let Ok(ev) = self.session.handle_datagram(now, from, &buf[..n])
            {
                self.events.push(ev);
            }
            if let Ok((n, _)) = self.base.recv_from(&mut buf) {
                match self.session.handle_base_datagram(now, &buf[..n]) {
                    Ok(ClientEvent::Nothing) | Err(_) => self.base_rx.push(buf[..n].to_vec()),
                    Ok(ev) => self.events.push(ev),
                }
            }
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
            }
            while let Some(ev) = self.session.poll_event() {
                self.events.push(ev);
            }
        }
    }
}

fn client(config: SessionConfig, base_port: u16) -> Client {
    let base = UdpSocket::bind(("10.222.240.2", base_port)).unwrap();
    let sk = UdpSocket::bind(("10.222.240.2", base_port + 1)).unwrap();
    for s in [&base, &sk] {
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
    }
    let mut session = ClientSession::new(ClientConfig::new(config));
    session.start(Time::ZERO).unwrap();
    Client {
        base,
        origin: Instant::now(),
        sk,
        session,
        events: Vec::new(),
        base_rx: Vec::new(),
    }
}

#[test]
fn proxy_binary_robin_and_packrat_in_namespaces() {
    if !lab() {
        eprintln!("skipping netns end-to-end test: needs root");
        return;
    }
    let Some(mut topo) = setup() else { return };

    // Robin: discovery, then quACKs for an upload.
    let mut c = client(common::robin_config(), 41000);
    c.pump(Duration::from_secs(3));
    assert!(
        c.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Established { .. })),
        "no session: {:?} metrics:\n{}",
        c.events,
        metrics()
    );
    for i in 0..20u32 {
        let mut p = vec![0x40u8; 300];
        p.extend_from_slice(&(100 + i).to_le_bytes());
        c.base.send_to(&p, "10.222.241.2:4433").unwrap();
        c.pump(Duration::from_millis(5));
    }
    c.pump(Duration::from_millis(500));
    let quacks: Vec<PowerSumQuack<u32>> = c
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Quack { data, .. } => PowerSumQuack::from_bytes(data).ok(),
            _ => None,
        })
        .collect();
    assert!(!quacks.is_empty(), "no quACKs; metrics:\n{}", metrics());
    let last = quacks.iter().max_by_key(|q| q.count()).unwrap();
    // The quACK holds exactly the upload's packets seen so far (the discovery request crossed the
    // proxy before the session existed and is not in it).
    let mut expect = PowerSumQuack::<u32>::new(8);
    for i in 0..last.count() {
        expect.insert(100 + i);
    }
    assert_eq!(*last, expect);

    // Packrat: a download of 32 packets; the client "loses" two, the proxy repairs them.
    let packrat = SessionConfig {
        robin: None,
        packrat: Some(PackratConfig {
            eack_interval_ms: 10,
            eack_interval_packets: 16,
            local_symbols: 160,
            cache_capacity_bytes: 48 * 1024,
            reorder_delay_ms: 30,
            multicast_group: Vec::new(),
        }),
        identifier: Some(IdentifierSpec::quic_default()),
    };
    let mut d = client(packrat, 42000);
    d.pump(Duration::from_secs(3));
    assert!(
        d.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Established { .. }))
    );
    let mut rx = ReceiverEack::new(160);
    rx.reset(d.session.epoch());
    d.base_rx.clear();
    d.base.send_to(b"go32", "10.222.241.2:4433").unwrap();
    d.pump(Duration::from_millis(500));
    let ids: Vec<u32> = d
        .base_rx
        .iter()
        .filter(|p| p.len() == 804)
        .map(|p| u32::from_le_bytes(p[800..804].try_into().unwrap()))
        .collect();
    assert_eq!(ids.len(), 32, "download did not arrive");
    let lost = [5005u32, 5009];
    for id in &ids {
        if !lost.contains(id) {
            rx.on_receive(*id);
        }
    }
    let before = d.base_rx.len();
    let mut wire = Vec::new();
    rx.encode(20, &mut wire).unwrap();
    let now = d.now();
    d.session.send_eack(now, &wire).unwrap();
    d.pump(Duration::from_millis(500));
    let mut again: Vec<u32> = d.base_rx[before..]
        .iter()
        .filter(|p| p.len() == 804)
        .map(|p| u32::from_le_bytes(p[800..804].try_into().unwrap()))
        .collect();
    again.sort_unstable();
    assert_eq!(again, lost.to_vec(), "retransmissions");

    std::thread::sleep(Duration::from_millis(1200)); // metrics refresh once a second
    let m = metrics();
    eprintln!("{m}");
    assert!(metric(&m, "sidekick_quacks_sent_total") >= 1);
    assert_eq!(metric(&m, "sidekick_retransmissions_total"), 2);
    assert_eq!(metric(&m, "sidekick_discovery_replied_total"), 2);
    assert_eq!(metric(&m, "sidekick_sessions"), 2);

    // Clean stop on SIGTERM.
    let mut proxy = topo.proxy.take().unwrap();
    let pid = proxy.id().to_string();
    assert!(sh(&["kill", "-TERM", &pid]));
    let end = Instant::now() + Duration::from_secs(3);
    let status = loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > end {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

/// Two capture workers: flows hash to both (`PACKET_FANOUT`), and each flow's session reaches
/// the worker that sees its flow (worker k answers on the sidekick port + k): every one of a
/// dozen clients gets quACKs of exactly its own upload.
#[test]
fn sessions_reach_their_flows_worker_with_two_workers() {
    if !lab() {
        eprintln!("skipping two-worker test: needs root");
        return;
    }
    let Some(_topo) = setup_with(&["--workers", "2"]) else {
        return;
    };
    let mut clients: Vec<Client> = (0..12u16)
        .map(|i| client(common::robin_config(), 41100 + 2 * i))
        .collect();
    let established = |c: &Client| {
        c.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Established { .. }))
    };
    for _ in 0..100 {
        for c in &mut clients {
            c.pump(Duration::from_millis(5));
        }
        if clients.iter().all(established) {
            break;
        }
    }
    for (k, c) in clients.iter().enumerate() {
        assert!(established(c), "client {k}: {:?}\n{}", c.events, metrics());
    }
    for i in 0..10u32 {
        for (k, c) in clients.iter_mut().enumerate() {
            let mut p = vec![0x40u8; 300];
            p.extend_from_slice(&(1000 * k as u32 + i).to_le_bytes());
            c.base.send_to(&p, "10.222.241.2:4433").unwrap();
            c.pump(Duration::from_millis(2));
        }
    }
    for _ in 0..30 {
        for c in &mut clients {
            c.pump(Duration::from_millis(5));
        }
    }
    for (k, c) in clients.iter().enumerate() {
        let best = c
            .events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Quack { data, .. } => PowerSumQuack::<u32>::from_bytes(data).ok(),
                _ => None,
            })
            .max_by_key(PowerSumQuack::count)
            .unwrap_or_else(|| panic!("client {k}: no quACK\n{}", metrics()));
        // Only this client's packets: another worker's flows never leak into its quACK.
        let mut expect = PowerSumQuack::<u32>::new(8);
        for i in 0..best.count() {
            expect.insert(1000 * k as u32 + i);
        }
        assert_eq!(best, expect, "client {k}");
    }
    // No wait: a scrape has every worker publish its counters first.
    let m = metrics();
    assert_eq!(metric(&m, "sidekick_workers"), 2, "{m}");
    for w in 0..2 {
        let frames = metric(
            &m,
            &format!("sidekick_worker_frames_total{{worker=\"{w}\"}}"),
        );
        // 12 flows hashed over 2 workers: all on one has probability 2⁻¹¹.
        assert!(frames > 0, "worker {w} saw no frame:\n{m}");
    }
}

/// The SDK's client (`SidekickClient`) on real sockets against the proxy binary: a Robin
/// session, then a reconfiguration mid-flow (another quACK threshold and interval, through the
/// protocol's Config): the proxy's echo starts a new epoch whose quACKs carry the new threshold.
#[test]
fn sdk_client_reconfigures_its_session_mid_flow() {
    use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
    if !lab() {
        eprintln!("skipping reconfiguration test: needs root");
        return;
    }
    let Some(_topo) = setup() else { return };
    let server: SocketAddr = "10.222.241.2:4433".parse().unwrap();
    let base = UdpSocket::bind("10.222.240.2:41400").unwrap();
    let sk = UdpSocket::bind("10.222.240.2:41401").unwrap();
    for s in [&base, &sk] {
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
    }
    let mut c = SidekickClient::new(SidekickConfig::robin(30, 8));
    c.set_base_peer(server);
    c.start(Instant::now()).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut pump = |c: &mut SidekickClient, dur: Duration| {
        let end = Instant::now() + dur;
        while Instant::now() < end {
            let now = Instant::now();
            while let Some(t) = c.poll_transmit() {
                match t {
                    Transmit::Base(b) => {
                        base.send_to(&b, server).unwrap();
                    }
                    Transmit::Sidekick(a, b) => {
                        sk.send_to(&b, a).unwrap();
                    }
                }
            }
            if let Ok((n, from)) = sk.recv_from(&mut buf) {
                c.on_sidekick_datagram(now, from, &buf[..n]);
            }
            if let Ok((n, _)) = base.recv_from(&mut buf) {
                c.on_base_received(now, buf[..n].to_vec());
            }
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while c.poll_deliver().is_some() {}
        }
    };
    let upload = |c: &mut SidekickClient, first: u32, n: u32| {
        for i in first..first + n {
            let mut p = vec![0x40u8; 300];
            p.extend_from_slice(&i.to_le_bytes());
            c.on_base_sent(Instant::now(), &p);
            base.send_to(&p, server).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    for _ in 0..60 {
        pump(&mut c, Duration::from_millis(50));
        if c.is_active() {
            break;
        }
    }
    assert!(c.is_active(), "no session:\n{}", metrics());
    upload(&mut c, 100, 20);
    pump(&mut c, Duration::from_millis(300));
    let quacks = c.stats().quacks;
    assert!(
        quacks > 0,
        "no quACKs before the reconfiguration:\n{}",
        metrics()
    );
    assert!(c.robin().is_some());

    let denser = SidekickConfig::robin(10, 16).protocol.session;
    c.reconfigure(Instant::now(), denser).unwrap();
    for _ in 0..40 {
        pump(&mut c, Duration::from_millis(50));
        if c.stats().reconfigurations == 1 {
            break;
        }
    }
    assert_eq!(c.stats().reconfigurations, 1, "{:?}", c.stats());
    let cfg = c.session_config().and_then(|s| s.robin.clone()).unwrap();
    assert_eq!((cfg.threshold, cfg.interval_ms), (16, 10));
    assert_eq!(c.robin().map(|r| r.config().threshold), Some(16));
    // The new epoch's quACKs arrive and decode against the fresh engine.
    upload(&mut c, 200, 20);
    pump(&mut c, Duration::from_millis(300));
    let st = c.stats();
    assert!(st.quacks > quacks, "{st:?}\n{}", metrics());
    assert_eq!(st.inconsistent_quacks, 0, "{st:?}");
    assert!(c.is_active());
}

/// Robin at each identifier width the protocol negotiates (2, 4, 8 bytes; Sidekick (NSDI '24)
/// §3): an SDK client on real sockets asks the real proxy for `width`-byte identifiers, uploads
/// datagrams whose last `width` bytes differ, and "sends" one that never leaves (a loss before
/// the proxy). The proxy's quACKs, at that width, decode against the client's log: that datagram
/// and only it is a near loss.
#[test]
fn sdk_client_robin_at_each_identifier_width() {
    use sidekick::session::{SdkEvent, SidekickClient, SidekickConfig, Transmit};
    if !lab() {
        return;
    }
    let Some(_topo) = setup() else { return };
    let server: SocketAddr = "10.222.241.2:4433".parse().unwrap();
    for (k, width) in [2u32, 4, 8].into_iter().enumerate() {
        let port = 41_500 + 10 * k as u16;
        let base = UdpSocket::bind(("10.222.240.2", port)).unwrap();
        let sk = UdpSocket::bind(("10.222.240.2", port + 1)).unwrap();
        for s in [&base, &sk] {
            s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        }
        let cfg = SidekickConfig::robin(5, 8).with_identifier_width(width);
        let mut c = SidekickClient::new(cfg);
        c.set_base_peer(server);
        c.start(Instant::now()).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut losses = Vec::new();
        let mut pump = |c: &mut SidekickClient, dur: Duration, losses: &mut Vec<u64>| {
            let end = Instant::now() + dur;
            while Instant::now() < end {
                let now = Instant::now();
                while let Some(t) = c.poll_transmit() {
                    match t {
                        Transmit::Base(b) => {
                            base.send_to(&b, server).unwrap();
                        }
                        Transmit::Sidekick(a, b) => {
                            sk.send_to(&b, a).unwrap();
                        }
                    }
                }
                if let Ok((n, from)) = sk.recv_from(&mut buf) {
                    c.on_sidekick_datagram(now, from, &buf[..n]);
                }
                // The discovery reply comes on the base path.
                if let Ok((n, _)) = base.recv_from(&mut buf) {
                    c.on_base_received(now, buf[..n].to_vec());
                }
                if c.poll_timeout().is_some_and(|t| t <= now) {
                    c.handle_timeout(now);
                }
                while let Some(ev) = c.poll_event() {
                    if let SdkEvent::NearLoss(l) = ev {
                        losses.push(l.id);
                    }
                }
            }
        };
        for _ in 0..60 {
            pump(&mut c, Duration::from_millis(50), &mut losses);
            if c.is_active() {
                break;
            }
        }
        assert!(c.is_active(), "width {width}: no session:\n{}", metrics());
        assert_eq!(
            c.session_config()
                .and_then(|s| s.identifier.clone())
                .map(|i| i.width),
            Some(width)
        );
        // Identifiers: the last `width` bytes, distinct in every byte position used.
        let id_of =
            |i: u64| 0x0101_0101_0101_0101u64.wrapping_mul(i + 7) & (u64::MAX >> (64 - 8 * width));
        let lost = 12;
        for i in 0..30u64 {
            let mut p = vec![0x40u8; 200];
            p.extend_from_slice(&id_of(i).to_le_bytes()[..width as usize]);
            c.on_base_sent(Instant::now(), &p);
            if i != lost {
                base.send_to(&p, server).unwrap();
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        pump(&mut c, Duration::from_millis(400), &mut losses);
        let st = c.stats();
        assert!(st.quacks > 0, "width {width}: {st:?}\n{}", metrics());
        assert_eq!(st.inconsistent_quacks, 0, "width {width}: {st:?}");
        assert_eq!(losses, vec![id_of(lost)], "width {width}: {st:?}");
    }
}

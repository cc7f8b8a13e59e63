//! `sidekick-transfer client --sidekick` through an in-process sidekick proxy, for every stack ×
//! direction, raw stream and HTTP/3.
//!
//! The proxy is the real proxy's sans-IO core (`sidekick_proxy::core::ProxyCore` with the real
//! session layer) inside a UDP relay: the client connects to the relay's front socket as if it
//! were the server; the relay builds the IP packet each datagram would be on the wire, hands it to
//! the core (discovery, Robin quACKs, Packrat cache), forwards the payload, and carries out the
//! core's actions (discovery replies and cached retransmissions injected towards the client,
//! sidekick messages from the proxy's sidekick socket). The lossy link sits on the proxy's client
//! side, as in the papers: on uploads a datagram is dropped *before* the proxy sees it (Robin,
//! seed 001 Table 5 #2), on downloads *after* the proxy cached it (Packrat, seed 002 Table 3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sidekick_protocol::ProxyPolicy;
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore};
use sidekick_proxy::engine::{Action, Direction};
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::session::ProtocolSessions;
use tokio::net::UdpSocket;

const BIN: &str = env!("CARGO_BIN_EXE_sidekick-transfer");
const BYTES: u64 = 2_000_000;
/// One short-header datagram in this many is lost on the proxy's client side.
const LOSS_EVERY: u64 = 40;
/// One-way delay of the far segment (relay → server), so the end-to-end RTT is well above the
/// proxy's feedback interval, as in the papers' settings (loopback alone has ~0.1 ms).
const FAR_DELAY: Duration = Duration::from_millis(15);

/// Rate of the far segment server → relay (seed 002 Table 3: 20 Mbit/s server–proxy): the
/// bottleneck is upstream of the proxy, as in the papers, so the proxy's cache holds roughly
/// one client–proxy RTT of data.
const FAR_RATE_BPS: f64 = 20e6;
/// Drop-tail limit of the far segment's queue.
const FAR_QUEUE: Duration = Duration::from_millis(100);

/// Receives the server's datagrams on `socket` and hands them over at [`FAR_RATE_BPS`] after
/// [`FAR_DELAY`], in order.
fn far_link(socket: Arc<UdpSocket>) -> tokio::sync::mpsc::UnboundedReceiver<Vec<u8>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        let mut queue: std::collections::VecDeque<(Instant, Vec<u8>)> =
            std::collections::VecDeque::new();
        let mut last_out = Instant::now();
        let mut buf = vec![0u8; 65536];
        loop {
            let next = queue
                .front()
                .map_or(Instant::now() + Duration::from_secs(1), |(t, _)| *t);
            tokio::select! {
                r = socket.recv_from(&mut buf) => {
                    let Ok((n, _)) = r else { return };
                    let now = Instant::now();
                    let tx_time = Duration::from_secs_f64(n as f64 * 8.0 / FAR_RATE_BPS);
                    let out = last_out.max(now) + tx_time;
                    if out.saturating_duration_since(now) > FAR_QUEUE {
                        continue; // queue full: drop-tail
                    }
                    last_out = out;
                    queue.push_back((out + FAR_DELAY, buf[..n].to_vec()));
                }
                () = tokio::time::sleep_until(next.into()) => {
                    while queue.front().is_some_and(|(t, _)| *t <= Instant::now()) {
                        if let Some((_, d)) = queue.pop_front() {
                            if tx.send(d).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    });
    rx
}

/// Sends datagrams to `to` after [`FAR_DELAY`], in order.
fn delayed_sender(
    socket: Arc<UdpSocket>,
    to: SocketAddr,
) -> tokio::sync::mpsc::UnboundedSender<(Instant, Vec<u8>)> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((at, d)) = rx.recv().await {
            tokio::time::sleep_until((at + FAR_DELAY).into()).await;
            let _ = socket.send_to(&d, to).await;
        }
    });
    tx
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(stack: &str, http3: bool) -> (Server, SocketAddr) {
    let addr = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut args = vec!["server", "--stack", stack, "--listen"];
    let a = addr.to_string();
    args.push(&a);
    if http3 {
        args.push("--http3");
    }
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), addr)
}

#[derive(Default)]
struct RelayStats {
    dropped: AtomicU64,
    quacks: AtomicU64,
    eacks: AtomicU64,
    proxy_retransmissions: AtomicU64,
    discovery_replies: AtomicU64,
    debug: std::sync::Mutex<String>,
}

/// Relay + proxy core. With `proxy == false` it only forwards (no sidekick on path).
async fn relay(
    front: UdpSocket,
    sk: UdpSocket,
    server: SocketAddr,
    proxy: bool,
    stats: Arc<RelayStats>,
) {
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let to_server = delayed_sender(back.clone(), server);
    let mut from_server = far_link(back.clone());
    let front_addr = front.local_addr().unwrap();
    let sk_addr = sk.local_addr().unwrap();
    let mut core = ProxyCore::new(
        CoreConfig {
            link: LinkType::RawIp,
            ..CoreConfig::default()
        },
        ProtocolSessions::new(ProxyPolicy::new(sk_addr)),
        (7, 11),
    );
    let mut client: Option<SocketAddr> = None;
    let (mut up, mut down) = (0u64, 0u64);
    let mut out = Vec::new();
    let (mut b1, mut b3) = (vec![0u8; 65536], vec![0u8; 65536]);
    loop {
        let deadline = core
            .next_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_millis(100))
            .min(Instant::now() + Duration::from_millis(100));
        let now = tokio::select! {
            r = front.recv_from(&mut b1) => {
                let Ok((n, from)) = r else { return };
                client = Some(from);
                let d = &b1[..n];
                let now = Instant::now();
                let assisted = core.snapshot().assisted_flows > 0;
                if d[0] & 0x80 == 0 && assisted {
                    up += 1;
                    if up % LOSS_EVERY == 0 {
                        // Lost between the client and the proxy: the proxy never sees it.
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                if proxy {
                    let ip = build_udp_ip(from, front_addr, d, 64);
                    core.on_frame(now, Direction::FromClient, &ip, FrameMeta::default(), &mut out);
                }
                let _ = to_server.send((now, d.to_vec()));
                now
            }
            r = from_server.recv() => {
                let Some(d) = r else { return };
                let Some(c) = client else { continue };
                let d = &d[..];
                let now = Instant::now();
                if proxy {
                    let ip = build_udp_ip(front_addr, c, d, 64);
                    core.on_frame(now, Direction::ToClient, &ip, FrameMeta::default(), &mut out);
                }
                let assisted = core.snapshot().assisted_flows > 0;
                let mut lost = false;
                if d[0] & 0x80 == 0 && assisted {
                    down += 1;
                    if down % LOSS_EVERY == 0 {
                        // Lost between the proxy (which cached it) and the client.
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        lost = true;
                    }
                }
                if !lost {
                    let _ = front.send_to(d, c).await;
                }
                now
            }
            r = sk.recv_from(&mut b3) => {
                let Ok((n, from)) = r else { return };
                let now = Instant::now();
                if proxy {
                    core.on_sidekick(now, from, &b3[..n], &mut out);
                }
                now
            }
            () = tokio::time::sleep_until(deadline.into()) => {
                let now = Instant::now();
                if proxy {
                    core.on_timeout(now, &mut out);
                }
                now
            }
        };
        if proxy && core.next_timeout().is_some_and(|t| t <= now) {
            core.on_timeout(now, &mut out);
        }
        for a in out.drain(..) {
            match a {
                Action::SendSidekick { to, bytes } => {
                    let _ = sk.send_to(&bytes, to).await;
                }
                Action::Inject { dir, frame } => {
                    let Ok(udp) = parse_frame(&frame, LinkType::RawIp) else {
                        continue;
                    };
                    let payload = udp.payload(&frame);
                    match dir {
                        Direction::ToClient => {
                            let _ = front.send_to(payload, udp.dst).await;
                        }
                        Direction::FromClient => {
                            let _ = to_server.send((Instant::now(), payload.to_vec()));
                        }
                    }
                }
                _ => {}
            }
        }
        let snap = core.snapshot();
        stats.quacks.store(snap.quacks_sent, Ordering::Relaxed);
        stats
            .eacks
            .store(snap.packrat.eacks_decoded, Ordering::Relaxed);
        stats
            .proxy_retransmissions
            .store(snap.packrat.retransmissions, Ordering::Relaxed);
        stats
            .discovery_replies
            .store(snap.discovery_replied, Ordering::Relaxed);
        *stats.debug.lock().unwrap() = format!("{:?}", snap.packrat);
    }
}

struct Run {
    report: serde_json::Value,
    stats: Arc<RelayStats>,
}

fn run(stack: &str, dir: &str, http3: bool, proxy: bool, extra: &[&str]) -> Run {
    let (_server, server_addr) = server(stack, http3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stats = Arc::new(RelayStats::default());
    let (front_addr, relay_task) = rt.block_on(async {
        let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sk = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = front.local_addr().unwrap();
        (
            addr,
            tokio::spawn(relay(front, sk, server_addr, proxy, stats.clone())),
        )
    });
    let out = Command::new(BIN)
        .args(["client", "--stack", stack, "--connect"])
        .arg(front_addr.to_string())
        .args([
            dir,
            &BYTES.to_string(),
            "--json",
            "--timeout",
            "60",
            "--sidekick",
        ])
        .args(if http3 { &["--http3"][..] } else { &[][..] })
        .args(extra)
        .output()
        .unwrap();
    relay_task.abort();
    drop(rt);
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one JSON line: {stdout}");
    Run {
        report: serde_json::from_str(lines[0]).unwrap(),
        stats,
    }
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v["sidekick"][k]
        .as_u64()
        .unwrap_or_else(|| panic!("{k} in {v}"))
}

fn assisted(stack: &str, dir: &str, http3: bool) {
    let Run { report: v, stats } = run(stack, dir, http3, true, &[]);
    eprintln!(
        "{stack} {dir} http3={http3}: {v}\nrelay: dropped {} quacks {} eacks {} proxy retx {}",
        stats.dropped.load(Ordering::Relaxed),
        stats.quacks.load(Ordering::Relaxed),
        stats.eacks.load(Ordering::Relaxed),
        stats.proxy_retransmissions.load(Ordering::Relaxed)
    );
    eprintln!("proxy packrat: {}", stats.debug.lock().unwrap());
    // The transfer completed with every byte (the client fails otherwise: it checks the count
    // it received, or the server's summary of what it received).
    assert_eq!(v["bytes"], BYTES);
    assert_eq!(v["stack"], stack);
    assert_eq!(v["direction"], &dir[2..]);
    assert_eq!(v["sidekick"]["state"], "active", "{v}");
    assert_eq!(v["sidekick"]["fallback"], false);
    assert!(v["sidekick"]["fallback_cause"].is_null());
    assert_eq!(stats.discovery_replies.load(Ordering::Relaxed), 1);
    assert!(
        stats.dropped.load(Ordering::Relaxed) > 0,
        "the link lost datagrams"
    );
    if dir == "--upload" {
        assert_eq!(v["sidekick"]["mode"], "robin");
        assert!(n(&v, "quacks") > 0, "{v}");
        assert!(stats.quacks.load(Ordering::Relaxed) >= n(&v, "quacks"));
        assert!(n(&v, "losses_detected") > 0, "{v}");
        assert!(n(&v, "retransmissions") > 0, "early retransmissions: {v}");
        assert_eq!(n(&v, "eacks_sent"), 0);
        if stack == "quinn" {
            assert!(n(&v, "cc_events") > 0, "PACUBIC saw quACK losses: {v}");
        }
    } else {
        assert_eq!(v["sidekick"]["mode"], "packrat");
        assert!(n(&v, "eacks_sent") > 0, "{v}");
        assert!(stats.eacks.load(Ordering::Relaxed) > 0);
        assert!(
            stats.proxy_retransmissions.load(Ordering::Relaxed) > 0,
            "the proxy retransmitted from its cache"
        );
        assert!(n(&v, "gaps_opened") > 0, "{v}");
        assert!(n(&v, "held") > 0, "the reorder window held datagrams: {v}");
        assert_eq!(n(&v, "quacks"), 0);
    }
}

#[test]
fn quinn_upload_robin() {
    assisted("quinn", "--upload", false);
}

#[test]
fn quinn_download_packrat() {
    assisted("quinn", "--download", false);
}

#[test]
fn quiche_upload_robin() {
    assisted("quiche", "--upload", false);
}

#[test]
fn quiche_download_packrat() {
    assisted("quiche", "--download", false);
}

#[test]
fn quinn_http3_download_packrat() {
    assisted("quinn", "--download", true);
}

#[test]
fn quiche_http3_upload_robin() {
    assisted("quiche", "--upload", true);
}

/// No proxy on path: discovery goes unanswered, the client falls back and the transfer completes
/// end to end; the JSON says so.
fn unassisted(stack: &str, dir: &str) {
    let Run { report: v, stats } = run(
        stack,
        dir,
        false,
        false,
        &[
            "--sidekick-discovery-retry-ms",
            "20",
            "--sidekick-discovery-attempts",
            "2",
        ],
    );
    eprintln!("{stack} {dir} without proxy: {v}");
    assert_eq!(v["bytes"], BYTES);
    assert_eq!(stats.discovery_replies.load(Ordering::Relaxed), 0);
    assert_eq!(v["sidekick"]["fallback"], true, "{v}");
    assert_eq!(v["sidekick"]["active"], false);
    // Discovery gives up after 20 + 40 ms; the transfer (≥ 2 MB) outlasts that on loopback
    // only if slow, so either outcome names the absence of a proxy.
    let cause = v["sidekick"]["fallback_cause"].as_str().unwrap();
    assert!(
        cause == "no_proxy" || cause == "discovery_unanswered",
        "{v}"
    );
    assert_eq!(n(&v, "quacks") + n(&v, "eacks_sent"), 0);
}

#[test]
fn quinn_without_proxy_falls_back() {
    unassisted("quinn", "--upload");
    unassisted("quinn", "--download");
}

#[test]
fn quiche_without_proxy_falls_back() {
    unassisted("quiche", "--upload");
    unassisted("quiche", "--download");
}

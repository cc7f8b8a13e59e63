//! An in-process sidekick proxy for the integration tests: the proxy crate's sans-IO core
//! (`ProxyCore` + the real session layer) inside a UDP relay.
//!
//! The client sends to the relay's front socket as if it were the server; the relay builds the
//! IP packet each datagram would be on the wire, hands it to the core (discovery, Robin quACKs,
//! Packrat cache), forwards the payload, and carries out the core's actions (discovery replies
//! and cached retransmissions injected towards the client, sidekick messages from the proxy's
//! sidekick socket). The lossy link sits on the proxy's client side, as in the papers: towards
//! the server a datagram is dropped *before* the proxy sees it (Robin, Sidekick (NSDI '24) Table 5), towards
//! the client *after* the proxy cached it (Packrat, Packrat (CoNEXT '26) Table 3). Only datagrams that
//! `Links::droppable` selects (by default those whose first bit is 0: QUIC short headers, media
//! packets) are dropped, and only once a session exists. The
//! far segment (relay ↔ server) has a delay and, towards the client, a rate limit.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sidekick_protocol::ProxyPolicy;
use sidekick_proxy::Time;
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore, Transmit};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::session::ProtocolSessions;
use tokio::net::UdpSocket;

/// Link settings of the relay.
#[derive(Debug, Clone, Copy)]
pub struct Links {
    /// One datagram in this many is lost on the proxy's client side (0: none).
    pub loss_every: u64,
    /// One-way delay of the far segment (each direction).
    pub far_delay: Duration,
    /// Rate of the far segment server → relay, bit/s.
    pub far_rate_bps: f64,
    /// Drop-tail limit of that segment's queue.
    pub far_queue: Duration,
    /// Rate of the far segment relay → server, bit/s (`None`: unlimited). Paces an upload so the
    /// server sees datagrams spread out, as behind a real bottleneck, instead of in bursts.
    pub up_rate_bps: Option<f64>,
    /// The far segment (proxy ↔ server) carries nothing either way from this long after the
    /// first datagram `droppable` selects (a far peer gone silent mid-call); `None`: never.
    pub far_silent_after: Option<Duration>,
    /// Which datagrams the lossy link may drop (default: first bit 0, QUIC short headers and
    /// the media apps' packets; the WebRTC tests drop SRTP).
    pub droppable: fn(&[u8]) -> bool,
    /// After every this many datagrams in each direction, also send a malformed one (0: never):
    /// a truncated copy, random bytes under an RTP header, a STUN header with a bad length, a
    /// single byte. The proxy core sees it as part of the flow.
    pub garbage_every: u64,
}

/// The `k`-th malformed datagram derived from `d`.
fn garbage(k: u64, d: &[u8]) -> Vec<u8> {
    match k % 4 {
        0 => d[..d.len().min(20)].to_vec(),
        1 => {
            let mut g = vec![0x80, 96, 0xff, 0xfe, 1, 2, 3, 4, 0xde, 0xad, 0xbe, 0xef];
            g.extend((0..60u8).map(|i| i.wrapping_mul(37)));
            g
        }
        2 => {
            let mut g = vec![0x00, 0x01, 0xff, 0xf0, 0x21, 0x12, 0xa4, 0x42];
            g.extend_from_slice(&[7; 12]);
            g
        }
        _ => vec![0x80],
    }
}

fn first_bit_clear(d: &[u8]) -> bool {
    d.first().is_some_and(|b| b & 0x80 == 0)
}

impl Default for Links {
    fn default() -> Self {
        Self {
            loss_every: 40,
            far_delay: Duration::from_millis(15),
            far_rate_bps: 20e6,
            far_queue: Duration::from_millis(100),
            up_rate_bps: None,
            far_silent_after: None,
            droppable: first_bit_clear,
            garbage_every: 0,
        }
    }
}

/// Receives the server's datagrams on `socket` and hands them over at [`links.far_rate_bps`] after
/// [`FAR_DELAY`], in order.
fn far_link(socket: Arc<UdpSocket>, links: Links) -> tokio::sync::mpsc::UnboundedReceiver<Vec<u8>> {
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
                    let tx_time = Duration::from_secs_f64(n as f64 * 8.0 / links.far_rate_bps);
                    let out = last_out.max(now) + tx_time;
                    if out.saturating_duration_since(now) > links.far_queue {
                        continue; // queue full: drop-tail
                    }
                    last_out = out;
                    queue.push_back((out + links.far_delay, buf[..n].to_vec()));
                }
                () = tokio::time::sleep_until(next.into()) => {
                    while queue.front().is_some_and(|(t, _)| *t <= Instant::now()) {
                        if let Some((_, d)) = queue.pop_front()
                            && tx.send(d).is_err() {
                                return;
                            }
                    }
                }
            }
        }
    });
    rx
}

/// Sends datagrams to `to` after `delay`, in order, serialised at `rate_bps` if given (no queue
/// limit: the transfers are short).
fn delayed_sender(
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    delay: Duration,
    rate_bps: Option<f64>,
) -> tokio::sync::mpsc::UnboundedSender<(Instant, Vec<u8>)> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut last_out = Instant::now();
        while let Some((at, d)) = rx.recv().await {
            let out = match rate_bps {
                Some(bps) => {
                    let tx_time = Duration::from_secs_f64(d.len() as f64 * 8.0 / bps);
                    last_out = last_out.max(at) + tx_time;
                    last_out
                }
                None => at,
            };
            tokio::time::sleep_until((out + delay).into()).await;
            let _ = socket.send_to(&d, to).await;
        }
    });
    tx
}

#[derive(Default)]
pub struct RelayStats {
    pub dropped: AtomicU64,
    pub quacks: AtomicU64,
    pub eacks: AtomicU64,
    pub proxy_retransmissions: AtomicU64,
    pub discovery_replies: AtomicU64,
    /// Datagrams the silent far segment swallowed (either way).
    pub silenced: AtomicU64,
    pub debug: std::sync::Mutex<String>,
}

/// Relay + proxy core. With `proxy == false` it only forwards (no sidekick on path).
pub async fn relay(
    front: UdpSocket,
    sk: UdpSocket,
    server: SocketAddr,
    proxy: bool,
    links: Links,
    stats: Arc<RelayStats>,
) {
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let to_server = delayed_sender(back.clone(), server, links.far_delay, links.up_rate_bps);
    let mut from_server = far_link(back.clone(), links);
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
    // The core's clock: time since the relay started.
    let origin = Instant::now();
    let at = |i: Instant| Time::since(origin, i);
    let mut client: Option<SocketAddr> = None;
    let (mut up, mut down) = (0u64, 0u64);
    let (mut up_all, mut down_all) = (0u64, 0u64);
    // When the far segment falls silent (`Links::far_silent_after`), once media has flowed.
    let mut silent_from: Option<Instant> = None;
    let silent = |at: Option<Instant>, now: Instant| at.is_some_and(|t| now >= t);
    let (mut b1, mut b3) = (vec![0u8; 65536], vec![0u8; 65536]);
    loop {
        let deadline = core
            .poll_timeout()
            .and_then(|t| t.to_instant(origin))
            .unwrap_or_else(|| Instant::now() + Duration::from_millis(100))
            .min(Instant::now() + Duration::from_millis(100));
        let now = tokio::select! {
            r = front.recv_from(&mut b1) => {
                let Ok((n, from)) = r else { return };
                client = Some(from);
                let d = &b1[..n];
                let now = Instant::now();
                if (links.droppable)(d) && silent_from.is_none() {
                    silent_from = links.far_silent_after.map(|after| now + after);
                }
                let assisted = core.snapshot().assisted_flows > 0;
                if (links.droppable)(d) && assisted {
                    up += 1;
                    if links.loss_every > 0 && up % links.loss_every.max(1) == 0 {
                        // Lost between the client and the proxy: the proxy never sees it.
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                if proxy {
                    let ip = build_udp_ip(from, front_addr, d, 64);
                    core.handle_frame(at(now), Direction::FromClient, &ip, FrameMeta::default());
                }
                if silent(silent_from, now) {
                    stats.silenced.fetch_add(1, Ordering::Relaxed);
                } else {
                    let _ = to_server.send((now, d.to_vec()));
                }
                up_all += 1;
                if links.garbage_every > 0 && up_all % links.garbage_every == 0 {
                    let g = garbage(up_all / links.garbage_every, d);
                    if proxy {
                        let ip = build_udp_ip(from, front_addr, &g, 64);
                        core.handle_frame(at(now), Direction::FromClient, &ip, FrameMeta::default());
                    }
                    let _ = to_server.send((now, g));
                }
                now
            }
            r = from_server.recv() => {
                let Some(d) = r else { return };
                let Some(c) = client else { continue };
                let d = &d[..];
                let now = Instant::now();
                if (links.droppable)(d) && silent_from.is_none() {
                    silent_from = links.far_silent_after.map(|after| now + after);
                }
                if silent(silent_from, now) {
                    // Swallowed on the far segment: the proxy never sees it.
                    stats.silenced.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if proxy {
                    let ip = build_udp_ip(front_addr, c, d, 64);
                    core.handle_frame(at(now), Direction::ToClient, &ip, FrameMeta::default());
                }
                let assisted = core.snapshot().assisted_flows > 0;
                let mut lost = false;
                if (links.droppable)(d) && assisted {
                    down += 1;
                    if links.loss_every > 0 && down % links.loss_every.max(1) == 0 {
                        // Lost between the proxy (which cached it) and the client.
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                        lost = true;
                    }
                }
                if !lost {
                    let _ = front.send_to(d, c).await;
                }
                down_all += 1;
                if links.garbage_every > 0 && down_all % links.garbage_every == 0 {
                    let g = garbage(down_all / links.garbage_every, d);
                    if proxy {
                        let ip = build_udp_ip(front_addr, c, &g, 64);
                        core.handle_frame(at(now), Direction::ToClient, &ip, FrameMeta::default());
                    }
                    let _ = front.send_to(&g, c).await;
                }
                now
            }
            r = sk.recv_from(&mut b3) => {
                let Ok((n, from)) = r else { return };
                let now = Instant::now();
                if proxy {
                    core.handle_sidekick(at(now), from, &b3[..n]);
                }
                now
            }
            () = tokio::time::sleep_until(deadline.into()) => {
                let now = Instant::now();
                if proxy {
                    core.handle_timeout(at(now));
                }
                now
            }
        };
        if proxy && core.poll_timeout().is_some_and(|t| t <= at(now)) {
            core.handle_timeout(at(now));
        }
        while let Some(a) = core.poll_transmit() {
            match a {
                Transmit::Sidekick { to, bytes } => {
                    let _ = sk.send_to(&bytes, to).await;
                }
                Transmit::Inject { dir, frame } => {
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

/// A running relay: the address clients connect to, its counters, and the runtime it runs on.
pub struct Running {
    /// Where clients send ("the server" for them).
    pub front: SocketAddr,
    /// Counters.
    pub stats: Arc<RelayStats>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Starts a relay towards `server` on its own runtime (`proxy`: run the proxy core).
pub fn start(server: SocketAddr, proxy: bool, links: Links) -> Running {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let stats = Arc::new(RelayStats::default());
    let front = rt.block_on(async {
        let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sk = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = front.local_addr().unwrap();
        tokio::spawn(relay(front, sk, server, proxy, links, stats.clone()));
        addr
    });
    Running {
        front,
        stats,
        rt: Some(rt),
    }
}

//! A reliable multicast media stream (Packrat (CoNEXT '26) §6.2 "Reliable IP multicast stream",
//! §7.2.3): one server streams media packets to a multicast group; several receivers subscribe
//! to the group and NACK what they miss to the server, which resends it by unicast to the
//! receiver that asked. With `--sidekick` each receiver also runs a Packrat session whose
//! `multicast_group` names the group (`SidekickConfig::with_multicast_group`): the on-path proxy
//! keeps one cache of the group's stream and a virtual cache per receiver, and repairs each
//! receiver's losses from it, so fewer NACKs reach the server.
//!
//! Sockets: the server sends the stream to the group *from the socket it listens on*, so the
//! group's stream and each receiver's unicast path share the server's address — the proxy keys a
//! group by (group, server address) and finds it from the receiver's session, which runs on that
//! unicast path (docs/proxy.md, "Packrat multicast"). A receiver has a socket joined to the group
//! (bound to the group's port, shared with other receivers on the host) and a unicast socket for
//! its HELLO, NACKs and SUMMARY, the server's resends and the sidekick's discovery.
//!
//! Session: receivers send HELLO (every [`HELLO_EVERY`](crate::media_session::HELLO_EVERY)) until media flows; the server waits
//! `join_wait` after the first HELLO, then streams DATA to the group for the requested duration,
//! answers NACKs, then sends FIN to the group every 100 ms until every receiver it knows has sent
//! its SUMMARY, answering each SUMMARY with its own counters ([`ServerCounters`] as JSON).
//!
//! ```
//! use sidekick_examples::multicast::ServerCounters;
//! let c = ServerCounters { server_nacks: 3, ..ServerCounters::default() };
//! let back: ServerCounters = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
//! assert_eq!(back.server_nacks, 3);
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sidekick::session::SidekickClient;
use tokio::net::UdpSocket;

use crate::fec::playout;
use crate::media::{MediaConfig, ReceiverMetrics};
use crate::media_io::{FecHooks, NoHooks, unix_us};
use crate::media_session::ReceiverTiming;
use crate::media_sidekick::MediaSidekick;
use crate::transfer::sidekick::SidekickCounters;

mod args;
mod core;
pub use args::MulticastClientArgs;
pub use core::{MulticastReceiver, MulticastServer};

/// The server's counters, sent back in answer to each receiver's SUMMARY.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerCounters {
    /// NACK datagrams that reached the server (end-to-end NACKs).
    pub server_nacks: u64,
    /// Sequence numbers those NACKs named.
    pub server_nacked_seqs: u64,
    /// Unicast resends the server sent.
    pub server_retransmissions: u64,
    /// Original packets sent to the group.
    pub server_packets_sent: u64,
    /// Receivers the server knew (HELLO, NACK or SUMMARY).
    pub server_receivers: u64,
}

/// Most receivers a server keeps track of (HELLO, NACK or SUMMARY senders); beyond it a new
/// address is still answered but not waited for.
pub const MAX_RECEIVERS: usize = 1024;

/// Records a receiver's address, within [`MAX_RECEIVERS`].
fn note_receiver(receivers: &mut BTreeMap<SocketAddr, bool>, from: SocketAddr, done: bool) {
    if receivers.len() < MAX_RECEIVERS || receivers.contains_key(&from) {
        let e = receivers.entry(from).or_insert(false);
        *e |= done;
    }
}

/// Opens a socket joined to `group` on the host's default interface, bound to the group's port
/// with `SO_REUSEADDR` so that several receivers on one host each get every datagram.
///
/// # Errors
/// Socket creation, bind or join failures.
pub fn group_socket(group: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(group), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    let bind = match group.ip() {
        IpAddr::V4(_) => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), group.port()),
        IpAddr::V6(_) => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), group.port()),
    };
    s.bind(&bind.into())?;
    match group.ip() {
        IpAddr::V4(a) => s.join_multicast_v4(&a, &Ipv4Addr::UNSPECIFIED)?,
        IpAddr::V6(a) => s.join_multicast_v6(&a, 0)?,
    }
    UdpSocket::from_std(s.into())
}

async fn send(socket: &UdpSocket, buf: &[u8], to: SocketAddr) {
    if let Err(e) = socket.send_to(buf, to).await {
        tracing::debug!(%to, "send failed: {e}");
    }
}

/// Serves one multicast stream on `socket` (which must be the socket the receivers send to):
/// the [`MulticastServer`] on the socket and the runtime's clock.
///
/// # Errors
/// Socket errors while waiting for the first HELLO.
pub async fn serve_multicast(
    socket: &UdpSocket,
    group: SocketAddr,
    cfg: &MediaConfig,
    join_wait: Duration,
    max_duration: Duration,
    summary_wait: Duration,
) -> std::io::Result<ServerCounters> {
    let mut core = MulticastServer::new(
        group,
        cfg,
        join_wait,
        max_duration,
        summary_wait,
        crate::media_io::random_nonce_start(),
    );
    let mut buf = vec![0u8; 65_536];
    let start = Instant::now();
    while !core.is_done() {
        let r = match core.poll_timeout(start.elapsed()) {
            Some(at) => {
                let deadline = tokio::time::Instant::from_std(start + at);
                tokio::time::timeout_at(deadline, socket.recv_from(&mut buf)).await
            }
            None => Ok(socket.recv_from(&mut buf).await),
        };
        match r {
            Ok(Ok((n, from))) => core.handle_datagram(start.elapsed(), unix_us(), from, &buf[..n]),
            Ok(Err(e)) if core.is_waiting() => return Err(e),
            Ok(Err(e)) => tracing::debug!("recv failed: {e}"),
            Err(_) => core.handle_timeout(start.elapsed(), unix_us()),
        }
        while let Some((to, d)) = core.poll_transmit() {
            send(socket, &d, to).await;
        }
    }
    Ok(core.counters())
}

/// What one receiver reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiverReport {
    /// The receiver's media metrics (NACKs it sent, losses, latency).
    #[serde(flatten)]
    pub metrics: ReceiverMetrics,
    /// Total stall time of a player with a 40 ms buffer over the packets' arrivals
    /// ([`crate::fec::playout`], one 20 ms frame per packet), ms.
    pub stall_ms_total: f64,
    /// Number of stalls.
    pub stall_count: u64,
    /// Sidekick counters (with `--sidekick`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidekick: Option<SidekickCounters>,
    /// The server's counters as its answer to this receiver's SUMMARY said.
    #[serde(skip)]
    pub server: Option<ServerCounters>,
}

impl ReceiverReport {
    /// The report of a receiver that has finished (`None`: no media came).
    pub fn of(
        r: MulticastReceiver,
        cfg: &MediaConfig,
        sidekick: Option<SidekickCounters>,
    ) -> Option<Self> {
        let (session, server) = r.into_parts();
        let session = session?;
        let rx = session.receiver();
        let p = playout(&rx.arrivals(), cfg.interval, 2);
        Some(ReceiverReport {
            metrics: rx.metrics(),
            stall_ms_total: p.stall_total.as_secs_f64() * 1000.0,
            stall_count: u64::from(p.stalls),
            sidekick,
            server,
        })
    }
}

/// One receiver: the [`MulticastReceiver`] on a unicast socket and a socket joined to the
/// group, on the runtime's clock. `sidekick`: a Packrat client whose configuration names the
/// group.
///
/// # Errors
/// Socket errors, or no media within `timing.idle`.
pub async fn run_receiver(
    server: SocketAddr,
    group: SocketAddr,
    cfg: &MediaConfig,
    duration: Duration,
    timing: ReceiverTiming,
    sidekick: Option<SidekickClient>,
) -> std::io::Result<ReceiverReport> {
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let uni = Arc::new(UdpSocket::bind(bind).await?);
    let grp = group_socket(group)?;
    let mut sk = None;
    let mut hooks: Box<dyn FecHooks> = match sidekick {
        Some(client) => {
            let sk_socket = UdpSocket::bind(bind).await?;
            let (handle, h) = MediaSidekick::spawn_receiver(client, uni.clone(), server, sk_socket);
            sk = Some(handle);
            Box::new(h)
        }
        None => Box::new(NoHooks),
    };
    let mut core = MulticastReceiver::new(server, cfg, duration, timing);
    let start = Instant::now();
    let (mut gbuf, mut ubuf) = (vec![0u8; 65_536], vec![0u8; 65_536]);
    core.handle_timeout(Duration::ZERO, &mut *hooks);
    while let Some(wake) = core.poll_timeout() {
        while let Some(d) = core.poll_transmit() {
            send(&uni, &d, server).await;
        }
        tokio::select! {
            r = grp.recv_from(&mut gbuf) => {
                if let Ok((n, from)) = r {
                    core.handle_group_datagram(start.elapsed(), unix_us(), from, &gbuf[..n],
                        &mut *hooks);
                }
            }
            r = uni.recv_from(&mut ubuf) => {
                if let Ok((n, from)) = r {
                    core.handle_unicast_datagram(start.elapsed(), unix_us(), from, &ubuf[..n],
                        &mut *hooks);
                }
            }
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(start + wake)) => {
                core.handle_timeout(start.elapsed(), &mut *hooks);
            }
        }
    }
    while let Some(d) = core.poll_transmit() {
        send(&uni, &d, server).await;
    }
    let sidekick = sk.map(|h| {
        let c = h.counters();
        h.stop();
        c
    });
    ReceiverReport::of(core, cfg, sidekick).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no media from {server} on {group}"),
        )
    })
}

/// The JSON line `sidekick-multicast client --json` prints (and the lab reads): the server's
/// counters (the most complete answer any receiver got), the receivers' totals and medians,
/// and each receiver's report.
#[derive(Debug, Serialize)]
pub struct MulticastReport {
    /// Always `multicast`.
    pub app: &'static str,
    /// Stream duration, seconds.
    pub duration_s: f64,
    /// Receivers run.
    pub receivers: usize,
    /// Receivers that finished with a report.
    pub receivers_reporting: usize,
    /// The server's counters.
    #[serde(flatten)]
    pub server: ServerCounters,
    /// NACK datagrams all receivers sent (some may be lost before the server).
    pub receiver_nacks: u64,
    /// Packets never received, all receivers.
    pub packets_missing: u64,
    /// Stall time, summed over the receivers, ms.
    pub stall_ms_total: f64,
    /// Median of the receivers' stall times, ms.
    pub stall_ms_median: f64,
    /// Largest receiver stall time, ms.
    pub stall_ms_max: f64,
    /// Stalls, all receivers.
    pub stall_count: u64,
    /// Median of the receivers' one-way latency p99, ms.
    pub latency_p99_ms: f64,
    /// eACKs all receivers sent.
    pub eacks_sent: u64,
    /// Receivers whose sidekick session was active at the end.
    pub sidekick_active: u64,
    /// Receivers whose sidekick session fell back (or found no proxy).
    pub sidekick_fallback: u64,
    /// Their fallback causes, `cause:count` joined by spaces.
    pub sidekick_fallback_causes: String,
    /// Each receiver's report.
    pub per_receiver: Vec<ReceiverReport>,
}

impl MulticastReport {
    /// Aggregates the receivers' reports.
    pub fn new(duration: Duration, receivers: usize, reports: Vec<ReceiverReport>) -> Self {
        let median = |v: Vec<f64>| crate::stats::percentile(&v, 50.0).unwrap_or(0.0);
        let server = reports
            .iter()
            .filter_map(|r| r.server)
            .max_by_key(|s| (s.server_nacks, s.server_receivers))
            .unwrap_or_default();
        Self {
            app: "multicast",
            duration_s: duration.as_secs_f64(),
            receivers,
            receivers_reporting: reports.len(),
            server,
            receiver_nacks: reports.iter().map(|r| r.metrics.nack_datagrams).sum(),
            packets_missing: reports.iter().map(|r| r.metrics.packets_missing).sum(),
            stall_ms_total: reports.iter().map(|r| r.stall_ms_total).sum(),
            stall_ms_median: median(reports.iter().map(|r| r.stall_ms_total).collect()),
            stall_ms_max: reports.iter().map(|r| r.stall_ms_total).fold(0.0, f64::max),
            stall_count: reports.iter().map(|r| r.stall_count).sum(),
            latency_p99_ms: median(reports.iter().map(|r| r.metrics.latency_p99_ms).collect()),
            eacks_sent: reports
                .iter()
                .filter_map(|r| r.sidekick.as_ref())
                .map(|s| s.eacks_sent)
                .sum(),
            sidekick_active: reports
                .iter()
                .filter_map(|r| r.sidekick.as_ref())
                .filter(|s| s.active)
                .count() as u64,
            sidekick_fallback: reports
                .iter()
                .filter_map(|r| r.sidekick.as_ref())
                .filter(|s| s.fallback)
                .count() as u64,
            sidekick_fallback_causes: {
                let mut causes: BTreeMap<&str, u64> = BTreeMap::new();
                for c in reports
                    .iter()
                    .filter_map(|r| r.sidekick.as_ref()?.fallback_cause)
                {
                    *causes.entry(c).or_default() += 1;
                }
                causes
                    .iter()
                    .map(|(c, n)| format!("{c}:{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            per_receiver: reports,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_tracks_receivers_within_its_cap() {
        let mut r = BTreeMap::new();
        let a = |i: usize| SocketAddr::from(([10, 0, 2, 2], u16::try_from(i).unwrap()));
        for i in 0..MAX_RECEIVERS + 5 {
            note_receiver(&mut r, a(i), false);
        }
        assert_eq!(r.len(), MAX_RECEIVERS);
        note_receiver(&mut r, a(3), true);
        note_receiver(&mut r, a(3), false);
        assert_eq!(r.get(&a(3)), Some(&true), "a SUMMARY is not forgotten");
    }

    #[test]
    fn report_takes_the_most_complete_server_answer_and_aggregates_receivers() {
        let r = |stall: f64, nacks: u64, server: Option<u64>| ReceiverReport {
            metrics: ReceiverMetrics {
                nack_datagrams: nacks,
                latency_p99_ms: stall / 10.0,
                ..ReceiverMetrics::default()
            },
            stall_ms_total: stall,
            stall_count: 1,
            sidekick: None,
            server: server.map(|n| ServerCounters {
                server_nacks: n,
                ..ServerCounters::default()
            }),
        };
        let rep = MulticastReport::new(
            Duration::from_secs(30),
            3,
            vec![
                r(100.0, 4, Some(7)),
                r(300.0, 2, None),
                r(200.0, 1, Some(9)),
            ],
        );
        assert_eq!(rep.server.server_nacks, 9);
        assert_eq!(rep.receiver_nacks, 7);
        assert_eq!(
            (rep.stall_ms_total, rep.stall_ms_median, rep.stall_ms_max),
            (600.0, 200.0, 300.0)
        );
        assert_eq!(rep.stall_count, 3);
        assert_eq!(rep.latency_p99_ms, 20.0);
        let json = serde_json::to_string(&rep).unwrap();
        assert!(json.contains("\"server_nacks\":9"), "{json}");
    }
}

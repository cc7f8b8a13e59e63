//! The I/O backends around [`ProxyCore`]: `sniff` (capture on one interface, the kernel forwards,
//! copies are injected) and `bridge` (user-space forwarding between two interfaces), plus the
//! sidekick UDP socket, the metrics endpoint and clean shutdown on SIGINT/SIGTERM.

use std::collections::VecDeque;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sidekick_protocol::ProxyPolicy;

use crate::config::{Config, Faces, Mode};
use crate::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use crate::engine::Direction;
use crate::flow::FlowTableConfig;
use crate::notify::Notifier;
use crate::packet::LinkType;
use crate::session::ProtocolSessions;
use crate::sys::{FrameInfo, PacketSocket, RingOptions, StopSignals, poll_readable};

/// Build the core a configuration describes (its flow table keyed at random).
pub fn build_core(cfg: &Config) -> ProxyCore<ProtocolSessions> {
    build_core_keyed(cfg, (rand::random(), rand::random()))
}

/// Build the core a configuration describes with the flow table's SipHash key `hash_key` (the
/// simulator seeds it, so runs are reproducible).
pub fn build_core_keyed(cfg: &Config, hash_key: (u64, u64)) -> ProxyCore<ProtocolSessions> {
    let mut policy = ProxyPolicy::new(cfg.advertise());
    policy.max_threshold = cfg.max_threshold;
    policy.min_quack_interval_ms = cfg.min_quack_interval_ms;
    policy.max_symbols = cfg.max_symbols;
    policy.max_cache_bytes = cfg.max_cache_bytes;
    policy.max_sessions = cfg.max_sessions;
    policy.max_half_open = cfg.max_half_open;
    policy.idle_timeout = Duration::from_secs(cfg.session_idle_timeout_s);
    policy.discovery_rate = cfg.discovery_rate;
    policy.discovery_burst = cfg.discovery_burst;
    let core_cfg = CoreConfig {
        link: LinkType::Ethernet,
        flows: FlowTableConfig {
            shards: cfg.shards,
            max_flows: cfg.max_flows,
            max_assisted: cfg.max_sessions,
            idle_timeout: cfg.idle_timeout(),
        },
        track_unassisted: cfg.track_unassisted,
        max_flow_memory: cfg.max_flow_memory,
        memory_budget: cfg.memory_budget,
        ..CoreConfig::default()
    };
    ProxyCore::new(
        core_cfg,
        ProtocolSessions::new(policy).with_packrat_retx_budget(cfg.packrat_retx_budget_percent),
        hash_key,
    )
    .with_pemi(cfg.pemi_config())
    .with_handshake_rescue(cfg.handshake_rescue_config())
}

/// Serve `text` as Prometheus metrics on `listener` from a background thread.
fn spawn_metrics(listener: TcpListener, text: Arc<Mutex<String>>) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let _ = s.set_write_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let body = text.lock().map(|t| t.clone()).unwrap_or_default();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
            }
        })
        .context("spawn metrics thread")?;
    Ok(())
}

fn ring_opts(cfg: &Config, ignore_outgoing: bool) -> RingOptions {
    RingOptions {
        block_size: cfg.ring_block_size,
        block_nr: cfg.ring_blocks,
        frame_size: 2048,
        retire_ms: cfg.ring_retire_ms,
        vnet_hdr: cfg.vnet_hdr,
        fanout_group: None,
        ignore_outgoing,
        mmap_ring: cfg.mmap_ring(),
    }
}

struct Delayed {
    until: Instant,
    to_client: bool,
    frame: Vec<u8>,
    vnet: Option<[u8; 10]>,
}

/// Nanoseconds since the epoch on CLOCK_REALTIME (the clock of the ring's frame timestamps).
fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// How long ago (before `wall_ns`) the kernel captured a frame stamped `kernel_ts_ns`; `None`
/// without a stamp or when the stamp is implausible (in the future, or older than a second — a
/// clock step), in which case the frame counts as captured now.
fn capture_delay(wall_ns: u64, kernel_ts_ns: u64) -> Option<Duration> {
    if kernel_ts_ns == 0 || kernel_ts_ns > wall_ns {
        return None;
    }
    let d = Duration::from_nanos(wall_ns - kernel_ts_ns);
    (d < Duration::from_secs(1)).then_some(d)
}

/// Writes a PEMI trace (`pemi::trace`) of every UDP datagram captured.
struct TraceWriter {
    out: std::io::BufWriter<std::fs::File>,
    origin: Instant,
    path: std::path::PathBuf,
    failed: bool,
}

impl TraceWriter {
    fn create(path: &std::path::Path) -> anyhow::Result<Self> {
        let f = std::fs::File::create(path)
            .with_context(|| format!("create PEMI trace {}", path.display()))?;
        Ok(Self {
            out: std::io::BufWriter::new(f),
            origin: Instant::now(),
            path: path.to_path_buf(),
            failed: false,
        })
    }

    fn record(&mut self, now: Instant, dir: Direction, frame: &[u8]) {
        let Ok(udp) = crate::packet::parse_frame(frame, LinkType::Ethernet) else {
            return;
        };
        let t = u64::try_from(now.saturating_duration_since(self.origin).as_nanos())
            .unwrap_or(u64::MAX);
        let rec = crate::pemi::trace::TraceRecord::new(
            t,
            dir,
            udp.src.port(),
            udp.dst.port(),
            udp.payload(frame),
        );
        if !self.failed && writeln!(self.out, "{}", rec.to_line()).is_err() {
            // A full disk must not stop the proxy: the trace is diagnostic only.
            tracing::warn!(path = %self.path.display(), "PEMI trace write failed; tracing stopped");
            self.failed = true;
        }
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.out
            .flush()
            .with_context(|| format!("flush PEMI trace {}", self.path.display()))
    }
}

/// Cap on frames held for PEMI's reply delay; beyond it frames are forwarded at once.
const DELAY_CAP: usize = 4096;

/// Run the proxy until SIGINT/SIGTERM.
///
/// Every socket is opened first; then the process gives up all its capabilities (they are
/// needed only to create AF_PACKET sockets, and capabilities are per thread: this happens
/// before the metrics thread starts), tells the service manager it is ready (`READY=1`,
/// [`Notifier`]) and feeds its watchdog from the loop.
pub fn run(cfg: &Config) -> anyhow::Result<()> {
    let signals = StopSignals::new().context("block SIGINT/SIGTERM")?;
    let mut notifier = Notifier::from_env().context("NOTIFY_SOCKET")?;
    let mut core = build_core(cfg);
    let udp = UdpSocket::bind(cfg.sidekick_listen)
        .with_context(|| format!("bind sidekick socket {}", cfg.sidekick_listen))?;
    udp.set_nonblocking(true)?;
    let metrics = Arc::new(Mutex::new(String::new()));
    let metrics_listener = match cfg.metrics_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr).with_context(|| format!("metrics listen {addr}"))?;
            tracing::info!(%addr, "metrics endpoint");
            Some(l)
        }
        None => None,
    };
    use std::os::fd::AsRawFd as _;
    let (mut a, mut b) = match cfg.mode {
        Mode::Sniff => {
            let s = PacketSocket::open(&cfg.interface, ring_opts(cfg, false))
                .with_context(|| format!("AF_PACKET on {} (needs CAP_NET_RAW)", cfg.interface))?;
            tracing::info!(interface = %cfg.interface, vnet = s.has_vnet_hdr(), "sniffing");
            (s, None)
        }
        Mode::Bridge => {
            let c = PacketSocket::open(&cfg.client_interface, ring_opts(cfg, true))
                .with_context(|| format!("AF_PACKET on {}", cfg.client_interface))?;
            let s = PacketSocket::open(&cfg.server_interface, ring_opts(cfg, true))
                .with_context(|| format!("AF_PACKET on {}", cfg.server_interface))?;
            tracing::info!(client = %cfg.client_interface, server = %cfg.server_interface, "bridging");
            (c, Some(s))
        }
    };
    let mut trace = match &cfg.pemi_trace {
        Some(p) => Some(TraceWriter::create(p)?),
        None => None,
    };
    crate::sys::caps::restrict_to(&[]).context("drop capabilities")?;
    tracing::info!("capabilities dropped");
    if let Some(l) = metrics_listener {
        spawn_metrics(l, Arc::clone(&metrics))?;
    }
    if let Some(n) = &notifier {
        n.send("READY=1").context("notify READY=1")?;
    }
    let mut fds = vec![signals.fd(), udp.as_raw_fd(), a.fd()];
    if let Some(s) = &b {
        fds.push(s.fd());
    }
    let mut fwd: Vec<(bool, Vec<u8>, Option<[u8; 10]>)> = Vec::new();
    let mut delayed: VecDeque<Delayed> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    let mut last_housekeeping = Instant::now();
    let faces = cfg.faces;
    let bridge = b.is_some();
    loop {
        let now = Instant::now();
        if let Some(n) = notifier.as_mut() {
            n.feed_watchdog(now);
        }
        let wait = core
            .poll_timeout()
            .into_iter()
            .chain(delayed.front().map(|d| d.until))
            .min()
            .map_or(100, |t| {
                t.saturating_duration_since(now).as_millis().min(100) as i32
            });
        let ready = poll_readable(&fds, wait).context("poll")?;
        if ready[0]
            && let Some(sig) = signals.pending()
        {
            tracing::info!(signal = sig, "stopping");
            break;
        }
        let now = Instant::now();
        let wall_ns = wall_clock_ns();
        // Capture: a batch of ring blocks per interface.
        let mut on_frames = |sock: &mut PacketSocket, from_client_side: bool| {
            sock.for_each_frame(16, |info: FrameInfo, frame: &[u8]| {
                let dir = if bridge {
                    if from_client_side {
                        Direction::FromClient
                    } else {
                        Direction::ToClient
                    }
                } else {
                    match (faces, info.outgoing) {
                        (Faces::Client, false) | (Faces::Server, true) => Direction::FromClient,
                        (Faces::Client, true) | (Faces::Server, false) => Direction::ToClient,
                    }
                };
                let meta = FrameMeta {
                    csum_not_ready: info.csum_not_ready,
                    gso_size: info.gso_size,
                };
                // Engines get the frame's capture time, not the batch's: a ring block reaches
                // user space up to its retire timeout after its first frame arrived, and PEMI's
                // inference (PEMI §4.2) works on sub-millisecond gaps.
                let delay = capture_delay(wall_ns, info.kernel_ts_ns);
                if let Some(d) = delay {
                    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
                    core.counters.capture_delay_frames += 1;
                    core.counters.capture_delay_us_sum += us;
                    core.counters.capture_delay_us_max = core.counters.capture_delay_us_max.max(us);
                }
                let at = now.checked_sub(delay.unwrap_or_default()).unwrap_or(now);
                if let Some(t) = trace.as_mut() {
                    t.record(at, dir, frame);
                }
                let verdict = core.handle_frame(at, dir, frame, meta);
                if bridge {
                    let to_client = dir == Direction::ToClient;
                    match verdict {
                        Verdict::Delay { until } if delayed.len() < DELAY_CAP => {
                            delayed.push_back(Delayed {
                                until,
                                to_client,
                                frame: frame.to_vec(),
                                vnet: info.vnet,
                            });
                        }
                        _ => fwd.push((to_client, frame.to_vec(), info.vnet)),
                    }
                }
            })
        };
        on_frames(&mut a, true);
        if let Some(s) = b.as_mut() {
            on_frames(s, false);
        }
        // Sidekick socket: a batch of datagrams.
        for _ in 0..64 {
            match udp.recv_from(&mut buf) {
                Ok((n, from)) => core.handle_sidekick(now, from, &buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(error = %e, "sidekick recv");
                    break;
                }
            }
        }
        core.handle_timeout(now);
        while delayed.front().is_some_and(|d| d.until <= now) {
            if let Some(d) = delayed.pop_front() {
                fwd.push((d.to_client, d.frame, d.vnet));
            }
        }
        // Transmit: forwarded frames first (order preserved), then side actions.
        for (to_client, frame, vnet) in fwd.drain(..) {
            let sock = match (&b, to_client) {
                (Some(_), true) => Some(&a),
                (Some(s), false) => Some(s),
                (None, _) => None,
            };
            if let Some(sock) = sock
                && sock.send(&frame, vnet.as_ref()).is_err()
            {
                core.counters.send_errors += 1;
            }
        }
        while let Some(t) = core.poll_transmit() {
            match t {
                Transmit::Sidekick { to, bytes } => {
                    let failed = udp.send_to(&bytes, to).is_err();
                    core.counters.send_errors += u64::from(failed);
                }
                Transmit::Inject { dir, frame } => {
                    // Sent on the capture socket itself: the kernel does not hand a packet
                    // socket its own frames back, so an injected copy is never captured (and
                    // cached) again — verified by tests/afpacket.rs.
                    let sock = match (&b, dir) {
                        (Some(s), Direction::FromClient) => s,
                        _ => &a,
                    };
                    if let Err(e) = sock.send(&frame, None) {
                        tracing::debug!(error = %e, "inject");
                        core.counters.send_errors += 1;
                    }
                }
            }
        }
        if now.saturating_duration_since(last_housekeeping) >= Duration::from_secs(1) {
            last_housekeeping = now;
            for s in std::iter::once(&a).chain(b.as_ref()) {
                if let Ok((_, drops)) = s.stats() {
                    core.counters.capture_drops += u64::from(drops);
                }
            }
            if let Ok(mut m) = metrics.lock() {
                *m = core.snapshot().render_prometheus();
            }
        }
    }
    if let Some(n) = &notifier {
        let _ = n.send("STOPPING=1");
    }
    if let Some(t) = trace {
        t.finish()?;
    }
    let snap = core.snapshot();
    tracing::info!(
        frames = snap.frames,
        quacks = snap.quacks_sent,
        retransmissions = snap.packrat.retransmissions,
        "stopped"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_delay_from_kernel_stamps() {
        let wall = 10_000_000_000;
        assert_eq!(capture_delay(wall, 0), None);
        assert_eq!(capture_delay(wall, wall + 1), None);
        assert_eq!(
            capture_delay(wall, wall - 1_500_000),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(capture_delay(wall, wall - 2_000_000_000), None);
        assert!(wall_clock_ns() > 1_700_000_000_000_000_000);
    }
}

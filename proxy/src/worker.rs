//! One capture worker of the daemon: its capture sockets (members of a `PACKET_FANOUT` group
//! when there are several workers, so that both directions of a flow reach the same worker), its
//! sidekick UDP socket (port `sidekick_listen + k`, so that a session reaches the worker of its
//! flow) and its own [`ProxyCore`]. Workers share nothing but a stop flag and the metrics slots.
//!
//! Call order of one turn ([`Worker::turn`]): capture a batch of frames per socket
//! (`handle_frame`), read a batch of sidekick datagrams (`handle_sidekick`), read the capture
//! sockets' drop counts (`on_capture_drops` when the ring dropped frames), `handle_timeout`,
//! forward what bridge mode holds, then drain `poll_transmit`. [`Worker::wait_ms`] says how
//! long the worker may sleep in `poll` before its next turn.

use std::collections::VecDeque;
use std::io::Write as _;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd as _, RawFd};
use std::time::Duration;

use anyhow::Context as _;

use crate::Time;
use crate::config::{Config, Faces, Mode};
use crate::core::{FrameMeta, ProxyCore, Transmit, Verdict};
use crate::engine::Direction;
use crate::metrics::Counters;
use crate::pace_board::PaceBoard;
use crate::packet::LinkType;
use crate::session::ProtocolSessions;
use crate::sys::{FrameInfo, PacketSocket, RingOptions};

/// Cap on frames held for PEMI's reply delay; beyond it frames are forwarded at once.
const DELAY_CAP: usize = 4096;

/// Fanout group ids of the workers' capture sockets: one group per interface (a group binds
/// one device), the same id base in every proxy process would collide, so the process id picks
/// it.
fn fanout_group(interface_index: u16) -> u16 {
    let pid = std::process::id();
    (pid as u16).wrapping_mul(2).wrapping_add(interface_index)
}

fn ring_opts(cfg: &Config, ignore_outgoing: bool, fanout_group: Option<u16>) -> RingOptions {
    RingOptions {
        block_size: cfg.ring_block_size,
        block_nr: cfg.ring_blocks,
        frame_size: 2048,
        retire_ms: cfg.ring_retire_ms,
        vnet_hdr: cfg.vnet_hdr,
        fanout_group,
        ignore_outgoing,
        mmap_ring: cfg.mmap_ring(),
        echo_replies_only: false,
    }
}

/// A frame held for PEMI's bounded reply delay (bridge mode).
struct Delayed {
    until: Time,
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
pub struct TraceWriter {
    out: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    failed: bool,
}

impl TraceWriter {
    /// A trace file at `path` (created or truncated).
    pub fn create(path: &std::path::Path) -> anyhow::Result<Self> {
        let f = std::fs::File::create(path)
            .with_context(|| format!("create PEMI trace {}", path.display()))?;
        Ok(Self {
            out: std::io::BufWriter::new(f),
            path: path.to_path_buf(),
            failed: false,
        })
    }

    fn record(&mut self, now: Time, dir: Direction, frame: &[u8]) {
        let Ok(udp) = crate::packet::parse_frame(frame, LinkType::Ethernet) else {
            return;
        };
        // The trace's times are the worker's (nanoseconds since the daemon started).
        let rec = crate::pemi::trace::TraceRecord::new(
            now.as_nanos(),
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

    /// Flush the trace.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.out
            .flush()
            .with_context(|| format!("flush PEMI trace {}", self.path.display()))
    }
}

/// One worker: its sockets and its core.
pub struct Worker {
    /// Index (0-based); its sidekick port is `sidekick_listen + index`.
    pub index: usize,
    core: ProxyCore<ProtocolSessions>,
    /// The capture socket (sniff mode) or the client-side one (bridge mode).
    a: PacketSocket,
    /// Bridge mode: the server-side capture socket.
    b: Option<PacketSocket>,
    /// With several workers: a socket per captured interface that receives every ICMP echo
    /// reply, outside the fanout. An echo has no ports, so the fanout's flow hash gives a reply
    /// to any worker — before these, to the one whose flow sent the probe in about half of the
    /// flows, and PEMI there never got its calibration samples. Opened even with PEMI off, since
    /// a reload may turn it on after the capabilities are gone (the filter passes echo replies
    /// only, so an idle one costs nothing).
    echo: Vec<PacketSocket>,
    udp: UdpSocket,
    trace: Option<TraceWriter>,
    faces: Faces,
    fwd: Vec<(bool, Vec<u8>, Option<[u8; 10]>)>,
    delayed: VecDeque<Delayed>,
    buf: Vec<u8>,
}

impl Worker {
    /// Apply a reloaded configuration's live keys (`config::LIVE_KEYS`) to this worker's core,
    /// taking the worker's share of `cfg` (`Config::for_worker`); sessions and flows are kept.
    pub fn reload(&mut self, cfg: &Config, n: usize) {
        let own = cfg.for_worker(self.index, n);
        self.core.sessions_mut().apply_limits(&own.session_limits());
        self.core.set_pemi(own.pemi_config());
    }

    /// Opens worker `k` of `n`'s sockets for `cfg` (the whole configuration; the worker takes
    /// its share with [`Config::for_worker`]). Needs CAP_NET_RAW; call every worker's `open`
    /// before dropping capabilities. With `n > 1` the capture sockets join the fanout groups,
    /// so open the workers in index order (a group hands flows out by member order).
    pub fn open(cfg: &Config, k: usize, n: usize) -> anyhow::Result<Self> {
        let own = cfg.for_worker(k, n);
        let core = crate::daemon::build_core(&own);
        let udp = UdpSocket::bind(own.sidekick_listen)
            .with_context(|| format!("bind sidekick socket {}", own.sidekick_listen))?;
        udp.set_nonblocking(true)?;
        let group = |i: u16| (n > 1).then(|| fanout_group(i));
        let (a, b) = match cfg.mode {
            Mode::Sniff => {
                let s = PacketSocket::open(&cfg.interface, ring_opts(&own, false, group(0)))
                    .with_context(|| {
                        format!("AF_PACKET on {} (needs CAP_NET_RAW)", cfg.interface)
                    })?;
                (s, None)
            }
            Mode::Bridge => {
                let c = PacketSocket::open(&cfg.client_interface, ring_opts(&own, true, group(0)))
                    .with_context(|| format!("AF_PACKET on {}", cfg.client_interface))?;
                let s = PacketSocket::open(&cfg.server_interface, ring_opts(&own, true, group(1)))
                    .with_context(|| format!("AF_PACKET on {}", cfg.server_interface))?;
                (c, Some(s))
            }
        };
        let echo_opts = RingOptions {
            mmap_ring: false,
            vnet_hdr: false,
            echo_replies_only: true,
            ..RingOptions::default()
        };
        let echo_ifaces: Vec<&str> = match cfg.mode {
            _ if n < 2 => Vec::new(),
            Mode::Sniff => vec![cfg.interface.as_str()],
            Mode::Bridge => vec![cfg.client_interface.as_str(), cfg.server_interface.as_str()],
        };
        let echo = echo_ifaces
            .into_iter()
            .map(|i| {
                PacketSocket::open(i, echo_opts)
                    .with_context(|| format!("AF_PACKET for echo replies on {i}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let trace = match &cfg.pemi_trace {
            Some(p) if k == 0 => Some(TraceWriter::create(p)?),
            _ => None,
        };
        tracing::info!(
            worker = k,
            sidekick = %own.sidekick_listen,
            vnet = a.has_vnet_hdr(),
            "worker sockets open"
        );
        Ok(Self {
            index: k,
            core,
            a,
            b,
            echo,
            udp,
            trace,
            faces: cfg.faces,
            fwd: Vec::new(),
            delayed: VecDeque::new(),
            buf: vec![0u8; 65536],
        })
    }

    /// Posts the client paces this worker's core learned and hands it the other workers' new ones
    /// (`pace_board`; `seen` is this worker's read mark).
    pub fn share_paces(&mut self, now: Time, board: &PaceBoard, seen: &mut u64) {
        let core = &mut self.core;
        board.post(self.index, std::iter::from_fn(|| core.poll_pace_lesson()));
        board.read_new(self.index, seen, |l| self.core.handle_pace_lesson(now, l));
    }

    /// The descriptors to poll for this worker's input.
    pub fn fds(&self) -> Vec<RawFd> {
        let mut fds = vec![self.udp.as_raw_fd(), self.a.fd()];
        if let Some(s) = &self.b {
            fds.push(s.fd());
        }
        fds.extend(self.echo.iter().map(PacketSocket::fd));
        fds
    }

    /// How long (ms, at most 100) the worker may wait for input before its next turn.
    pub fn wait_ms(&self, now: Time) -> i32 {
        self.core
            .poll_timeout()
            .into_iter()
            .chain(self.delayed.front().map(|d| d.until))
            .min()
            .map_or(100, |t| {
                t.saturating_duration_since(now).as_millis().min(100) as i32
            })
    }

    /// One turn at `now` (see the module's call order). `ready`: the poll's answer for
    /// [`Self::fds`], in that order; the echo-reply sockets, idle nearly always, are read only
    /// when it says they have input (no `recvmsg` that finds nothing on every turn).
    pub fn turn(&mut self, now: Time, ready: &[bool]) {
        let wall_ns = wall_clock_ns();
        let bridge = self.b.is_some();
        let faces = self.faces;
        let core = &mut self.core;
        let trace = &mut self.trace;
        let delayed = &mut self.delayed;
        let fwd = &mut self.fwd;
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
                // A frame addressed to the interface itself (the ap's own address, e.g. the
                // sidekick socket's) is the host's: the kernel delivers it, a bridge does not
                // forward it.
                if bridge && !info.to_host {
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
        on_frames(&mut self.a, true);
        if let Some(s) = self.b.as_mut() {
            on_frames(s, false);
        }
        let first_echo = ready.len().saturating_sub(self.echo.len());
        for (i, s) in self.echo.iter_mut().enumerate() {
            if !ready.get(first_echo + i).copied().unwrap_or(false) {
                continue;
            }
            s.for_each_frame(1, |info: FrameInfo, frame: &[u8]| {
                let delay = capture_delay(wall_ns, info.kernel_ts_ns).unwrap_or_default();
                self.core
                    .handle_echo_reply(now.checked_sub(delay).unwrap_or(now), frame);
            });
        }
        // Sidekick socket: a batch of datagrams.
        for _ in 0..64 {
            match self.udp.recv_from(&mut self.buf) {
                Ok((n, from)) => self.core.handle_sidekick(now, from, &self.buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(error = %e, "sidekick recv");
                    break;
                }
            }
        }
        // Before any quACK goes out: frames the ring dropped must not read as losses.
        if self.capture_drops() > 0 {
            self.core.on_capture_drops(now);
        }
        self.core.handle_timeout(now);
        while self.delayed.front().is_some_and(|d| d.until <= now) {
            if let Some(d) = self.delayed.pop_front() {
                self.fwd.push((d.to_client, d.frame, d.vnet));
            }
        }
        self.transmit();
    }

    /// Forwarded frames first (order preserved), then the core's side output.
    fn transmit(&mut self) {
        for (to_client, frame, vnet) in self.fwd.drain(..) {
            let sock = match (&self.b, to_client) {
                (Some(_), true) => Some(&self.a),
                (Some(s), false) => Some(s),
                (None, _) => None,
            };
            if let Some(sock) = sock
                && sock.send(&frame, vnet.as_ref()).is_err()
            {
                self.core.counters.send_errors += 1;
            }
        }
        while let Some(t) = self.core.poll_transmit() {
            match t {
                Transmit::Sidekick { to, bytes } => {
                    let failed = self.udp.send_to(&bytes, to).is_err();
                    self.core.counters.send_errors += u64::from(failed);
                }
                Transmit::Inject { dir, frame } => {
                    // Sent on the capture socket itself: the kernel does not hand a packet
                    // socket its own frames back, so an injected copy is never captured (and
                    // cached) again — verified by tests/afpacket.rs.
                    let sock = match (&self.b, dir) {
                        (Some(s), Direction::FromClient) => s,
                        _ => &self.a,
                    };
                    if let Err(e) = sock.send(&frame, None) {
                        tracing::debug!(error = %e, "inject");
                        self.core.counters.send_errors += 1;
                    }
                }
            }
        }
    }

    /// Frames the capture sockets dropped since the last call (the kernel resets its count on
    /// each read), added to the core's counters.
    fn capture_drops(&mut self) -> u64 {
        let mut n = 0;
        for s in std::iter::once(&self.a).chain(self.b.as_ref()) {
            if let Ok((_, drops)) = s.stats() {
                n += u64::from(drops);
            }
        }
        self.core.counters.capture_drops += n;
        n
    }

    /// The core's counters (capture drops are read every turn, see [`Self::turn`]).
    pub fn snapshot(&mut self) -> Counters {
        self.core.snapshot()
    }

    /// Flush the PEMI trace, if this worker writes one.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        match self.trace.take() {
            Some(t) => t.finish(),
            None => Ok(()),
        }
    }
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

    #[test]
    fn workers_take_consecutive_ports_and_shares_of_the_caps() {
        let cfg = Config {
            sidekick_advertise: Some("10.0.2.1:7788".parse().unwrap()),
            max_flows: 65_536,
            max_sessions: 4096,
            ..Config::default()
        };
        let w = cfg.for_worker(1, 2);
        assert_eq!(w.sidekick_listen.port(), 7789);
        assert_eq!(w.advertise(), "10.0.2.1:7789".parse().unwrap());
        assert_eq!((w.max_flows, w.max_sessions), (32_768, 2048));
        assert_eq!(w.memory_budget, cfg.memory_budget / 2);
        assert_eq!(w.ring_blocks, cfg.ring_blocks / 2);
        let w0 = cfg.for_worker(0, 2);
        assert_eq!(w0.advertise(), cfg.advertise());
    }
}

//! Low-latency media with FEC by repetition (Packrat media workload, Packrat (CoNEXT '26) §6.2, §7.2.2).
//!
//! The server sends a packet every 20 ms carrying the last 40 ms of audio: packet `k` carries
//! frames `k` and `k−1` (20 ms, 240 B each; 480 B of payload). The client starts playback with
//! 40 ms in its buffer, stalls when the next frame has not arrived, and fast-forwards when it is
//! behind the target buffer size. It NACKs *frames* missing from its playback buffer (a frame is
//! missing once a packet two or more ahead arrived without it, i.e. both packets carrying it were
//! lost) and re-NACKs at most once per RTT until the frame arrives; the server retransmits packet
//! `j` (frames `j` and `j−1`) on a NACK for frame `j`.
//!
//! # Latency definitions
//!
//! - `latency_*` (per frame): time from when the frame's audio started being produced (the first
//!   sample of its 20 ms, at the sender's `CLOCK_REALTIME`) to when the frame is first available
//!   at the client (its `CLOCK_REALTIME`). Minimum: 20 ms + one-way delay.
//! - `packet_latency_*` (per received packet, the paper's Fig. 6 definition): from when the oldest
//!   data in the packet was produced to when the packet arrived — minimum 40 ms + one-way delay
//!   ("a frame containing 40 ms of data sent over a network path with 80 ms delay has a minimum
//!   one-way latency of 120 ms", Packrat (CoNEXT '26) §6.2).
//!
//! Stalls are computed by [`playout`] from the frames' availability times.
//!
//! ```
//! use std::time::Duration;
//! use sidekick_examples::fec::playout;
//! let ms = |v| Some(Duration::from_millis(v));
//! // Frame 2 arrives 60 ms after its play-out time: one 60 ms stall, then fast-forward.
//! let p = playout(&[ms(30), ms(50), ms(150), ms(90), ms(110), ms(130), ms(170)], Duration::from_millis(20), 2);
//! assert_eq!(p.stall_total, Duration::from_millis(60));
//! assert_eq!(p.frames_skipped, 2);
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::nack::NackTracker;
use crate::stats::percentile;
use crate::wire::{Codec, Message, encode_nacks};

/// Parameters of the FEC media stream.
#[derive(Debug, Clone)]
pub struct FecConfig {
    /// Frame duration and packet interval (20 ms).
    pub frame: Duration,
    /// Bytes per frame (240); a packet carries two frames.
    pub frame_len: usize,
    /// Playback buffer target in frames (2 = 40 ms).
    pub target_frames: usize,
    /// Largest frame index the client records (bounds its tables).
    pub max_frames: u32,
    /// Most missing frames tracked for NACKs.
    pub nack_cap: usize,
    /// RTT assumed for re-NACKs before the first sample.
    pub initial_rtt: Duration,
}

impl Default for FecConfig {
    fn default() -> Self {
        Self {
            frame: Duration::from_millis(20),
            frame_len: 240,
            target_frames: 2,
            max_frames: 1 << 20,
            nack_cap: 4096,
            initial_rtt: Duration::from_millis(200),
        }
    }
}

impl FecConfig {
    /// The matching sender configuration (packet interval = frame, payload = two frames).
    pub fn sender_config(&self) -> crate::media::MediaConfig {
        crate::media::MediaConfig {
            interval: self.frame,
            payload_len: 2 * self.frame_len,
            ..crate::media::MediaConfig::default()
        }
    }
}

/// Result of the play-out model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Playout {
    /// Time playback started (availability of the first `target` frames).
    pub start: Option<Duration>,
    /// Total stall time.
    pub stall_total: Duration,
    /// Number of stalls.
    pub stalls: u32,
    /// Stalls shorter than one frame interval: a frame a little late (arrival timing), where a
    /// loss waits at least a repair's round trip.
    pub short_stalls: u32,
    /// Frames played.
    pub frames_played: u64,
    /// Frames skipped by fast-forwarding.
    pub frames_skipped: u64,
    /// Frames that never arrived and were concealed when their turn came.
    pub frames_concealed: u64,
}

/// Play-out model of the client (Packrat (CoNEXT '26) §6.2): frame `j` becomes available at `avail[j]`.
/// Playback starts once the first `target` frames are available; each frame plays for `frame`.
/// When frame `j`'s turn comes and it is not available, playback stalls until it is. Before each
/// frame, if more than `target` consecutive frames are already buffered, the oldest are skipped
/// (fast-forward) down to `target`. A frame that never arrives (`None`) is concealed once a later
/// frame is available; playback ends when no later frame ever arrives.
pub fn playout(avail: &[Option<Duration>], frame: Duration, target: usize) -> Playout {
    let n = avail.len();
    let target = target.max(1);
    // Effective availability: a never-arriving frame is given up when its next successor arrives.
    let mut eff: Vec<Option<Duration>> = vec![None; n];
    let mut next: Option<Duration> = None;
    for j in (0..n).rev() {
        eff[j] = avail[j].or(next);
        next = match (avail[j], next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let mut out = Playout::default();
    let head = &eff[..target.min(n)];
    if head.is_empty() || head.iter().any(Option::is_none) {
        return out;
    }
    let Some(mut t) = head.iter().flatten().max().copied() else {
        return out;
    };
    out.start = Some(t);
    let mut j = 0;
    while j < n {
        let Some(e) = eff[j] else { break };
        let buffered = eff[j..]
            .iter()
            .take_while(|x| x.is_some_and(|x| x <= t))
            .count();
        if buffered > target {
            let skip = buffered - target;
            out.frames_skipped += skip as u64;
            j += skip;
            continue;
        }
        if e > t {
            out.stall_total += e.saturating_sub(t);
            out.stalls += 1;
            out.short_stalls += u32::from(e.saturating_sub(t) < frame);
            t = e;
            continue;
        }
        if avail[j].is_some() {
            out.frames_played += 1;
        } else {
            out.frames_concealed += 1;
        }
        t += frame;
        j += 1;
    }
    out
}

/// Client metrics (JSON field names are the lab's metric names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FecMetrics {
    /// Packets announced by the server (FIN).
    pub packets_expected: u64,
    /// Distinct packets received.
    pub packets_received: u64,
    /// Duplicate packets received.
    pub duplicates: u64,
    /// Frames available at the end.
    pub frames_received: u64,
    /// Frames never available.
    pub frames_missing: u64,
    /// Frames recovered only thanks to the FEC copy (their own packet was lost).
    pub frames_from_fec: u64,
    /// NACK datagrams sent.
    pub nack_datagrams: u64,
    /// Frames NACKed (a re-NACK counts again).
    pub nacked_frames: u64,
    /// Median per-frame one-way latency, ms.
    pub latency_p50_ms: f64,
    /// 99th percentile per-frame one-way latency, ms.
    pub latency_p99_ms: f64,
    /// 99th percentile per-packet latency (oldest data in the packet → arrival), ms.
    pub packet_latency_p99_ms: f64,
    /// The same over the packets that arrived in order (after every lower-numbered packet
    /// that arrived at all): the stream without its repairs.
    pub packet_latency_in_order_p99_ms: f64,
    /// Packets that arrived after a higher-numbered one: repairs (a proxy's retransmission or
    /// the server's resend) or reordering. Without a repair such a packet never arrives and
    /// counts in no packet latency; with one it counts late.
    pub late_packets: u64,
    /// Median latency of the late packets, ms.
    pub late_packet_latency_p50_ms: f64,
    /// Total stall time, ms.
    pub stall_ms_total: f64,
    /// Number of stalls.
    pub stall_count: u64,
    /// Stalls shorter than one frame interval (a frame a little late, not a loss).
    pub stall_count_short: u64,
    /// Frames skipped by fast-forward.
    pub frames_skipped: u64,
    /// Frames concealed (never arrived).
    pub frames_concealed: u64,
    /// Smoothed RTT at the end (NACK → retransmission), ms.
    pub rtt_ms: f64,
    /// Undecodable datagrams.
    pub bad_datagrams: u64,
    /// Frames beyond the table cap, or NACK state given up (cap).
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct FrameArrival {
    at: Duration,
    latency_ms: f64,
}

/// Sans-IO FEC media client: frame availability, NACKs, metrics.
#[derive(Debug)]
pub struct FecReceiver {
    cfg: FecConfig,
    codec: Codec,
    frames: Vec<Option<FrameArrival>>,
    packets_seen: Vec<bool>,
    packet_latency: Vec<f64>,
    /// Latencies of the packets that arrived in order, and of the late ones.
    in_order_latency: Vec<f64>,
    late_latency: Vec<f64>,
    highest_seq: Option<u32>,
    nack: NackTracker,
    total: Option<u32>,
    counters: FecMetrics,
}

impl FecReceiver {
    /// New client state.
    pub fn new(cfg: &FecConfig) -> Self {
        Self {
            cfg: cfg.clone(),
            codec: Codec::new(0),
            frames: Vec::new(),
            packets_seen: Vec::new(),
            packet_latency: Vec::new(),
            in_order_latency: Vec::new(),
            late_latency: Vec::new(),
            highest_seq: None,
            nack: NackTracker::new(cfg.nack_cap, cfg.initial_rtt),
            total: None,
            counters: FecMetrics::default(),
        }
    }

    /// Handle a datagram from the server at `now` (monotonic) / `wall_unix_us` (`CLOCK_REALTIME`);
    /// returns NACK datagrams to send.
    pub fn on_datagram(&mut self, buf: &[u8], now: Duration, wall_unix_us: u64) -> Vec<Vec<u8>> {
        let Ok(msg) = self.codec.decode(buf) else {
            self.counters.bad_datagrams += 1;
            return Vec::new();
        };
        let to_nack = match msg {
            Message::Data(p) => {
                if p.echo_us != 0 {
                    let echo = Duration::from_micros(p.echo_us);
                    if let Some(rtt) = now.checked_sub(echo) {
                        self.nack.on_rtt_sample(rtt);
                    }
                }
                let k = p.seq;
                if k >= self.cfg.max_frames {
                    self.counters.dropped += 1;
                    return Vec::new();
                }
                let ki = k as usize;
                if self.packets_seen.len() <= ki {
                    self.packets_seen.resize(ki + 1, false);
                    self.frames.resize(ki + 1, None);
                }
                if self.packets_seen[ki] {
                    self.counters.duplicates += 1;
                    return Vec::new();
                }
                self.packets_seen[ki] = true;
                self.counters.packets_received += 1;
                let frame_us = u64::try_from(self.cfg.frame.as_micros()).unwrap_or(u64::MAX);
                let wall = wall_unix_us as f64;
                // Oldest data in the packet started 2 frames before its generation time.
                let latency = (wall - (p.gen_unix_us as f64 - 2.0 * frame_us as f64)) / 1000.0;
                self.packet_latency.push(latency);
                if self.highest_seq.is_some_and(|h| k < h) {
                    self.late_latency.push(latency);
                } else {
                    self.highest_seq = Some(k);
                    self.in_order_latency.push(latency);
                }
                let mut nacks = Vec::new();
                let first = k.saturating_sub(1);
                for j in first..=k {
                    let age = u64::from(k - j) + 1; // frame j started `age` frames before gen
                    let start = p.gen_unix_us as f64 - (age * frame_us) as f64;
                    let slot = &mut self.frames[j as usize];
                    if slot.is_none() {
                        *slot = Some(FrameArrival {
                            at: now,
                            latency_ms: (wall - start) / 1000.0,
                        });
                    }
                    nacks.extend(self.nack.on_received(j, now));
                }
                nacks
            }
            Message::Fin { total } => {
                let total = total.min(self.cfg.max_frames);
                self.total = Some(total);
                self.nack.on_end(total, now)
            }
            _ => Vec::new(),
        };
        self.nack_datagrams(&to_nack, now)
    }

    fn nack_datagrams(&mut self, seqs: &[u32], now: Duration) -> Vec<Vec<u8>> {
        if seqs.is_empty() {
            return Vec::new();
        }
        let ts = u64::try_from(now.as_micros()).unwrap_or(u64::MAX).max(1);
        let out = encode_nacks(ts, seqs);
        self.counters.nack_datagrams += out.len() as u64;
        out
    }

    /// Re-NACKs due at `now` (and NACKs whose hold ended).
    pub fn on_timeout(&mut self, now: Duration) -> Vec<Vec<u8>> {
        let due = self.nack.due(now);
        self.nack_datagrams(&due, now)
    }

    /// Holds the end-to-end NACK of every frame that goes missing from now on for `hold`
    /// (`None`: NACK at once). A player whose Packrat proxy repairs losses holds its own NACK
    /// while the repair is under way (Packrat (CoNEXT '26) §6.2) and NACKs end to end only a
    /// frame still missing after the hold.
    pub fn set_nack_hold(&mut self, hold: Option<Duration>) {
        self.nack.set_first_delay(hold.unwrap_or(Duration::ZERO));
    }

    /// When [`FecReceiver::on_timeout`] next has work.
    pub fn next_timeout(&self) -> Option<Duration> {
        self.nack.next_deadline()
    }

    /// Has any media arrived?
    pub fn started(&self) -> bool {
        self.counters.packets_received > 0
    }

    /// Has the server's FIN arrived and every frame been received?
    pub fn is_complete(&self) -> bool {
        self.total.is_some() && self.nack.missing_count() == 0
    }

    /// Has the server's FIN arrived?
    pub fn fin_received(&self) -> bool {
        self.total.is_some()
    }

    /// Frame availability times indexed by frame.
    pub fn availability(&self) -> Vec<Option<Duration>> {
        let n = self.total.map_or(self.frames.len(), |t| t as usize);
        let mut v: Vec<Option<Duration>> = self.frames.iter().map(|f| f.map(|f| f.at)).collect();
        v.resize(n, None);
        v
    }

    /// Per-frame trace lines `frame,available_ms,latency_ms` (empty fields for frames never
    /// available), for CDF plots.
    pub fn trace_csv(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::from("frame,available_ms,latency_ms\n");
        let n = self.availability().len();
        for j in 0..n {
            // Writing to a String cannot fail.
            let _ = match self.frames.get(j).copied().flatten() {
                Some(f) => writeln!(
                    s,
                    "{j},{:.3},{:.3}",
                    f.at.as_secs_f64() * 1000.0,
                    f.latency_ms
                ),
                None => writeln!(s, "{j},,"),
            };
        }
        s
    }

    /// Compute the metrics.
    pub fn metrics(&self) -> FecMetrics {
        let mut m = self.counters.clone();
        let avail = self.availability();
        let p = playout(&avail, self.cfg.frame, self.cfg.target_frames);
        let lat: Vec<f64> = self.frames.iter().flatten().map(|f| f.latency_ms).collect();
        m.packets_expected = self.total.map_or(self.packets_seen.len() as u64, u64::from);
        m.frames_received = avail.iter().flatten().count() as u64;
        m.frames_missing = avail.len() as u64 - m.frames_received;
        m.frames_from_fec = self
            .frames
            .iter()
            .enumerate()
            .filter(|(j, f)| f.is_some() && !self.packets_seen.get(*j).copied().unwrap_or(false))
            .count() as u64;
        m.nacked_frames = self.nack.nacked();
        m.dropped += self.nack.dropped();
        m.latency_p50_ms = percentile(&lat, 50.0).unwrap_or(0.0);
        m.latency_p99_ms = percentile(&lat, 99.0).unwrap_or(0.0);
        m.packet_latency_p99_ms = percentile(&self.packet_latency, 99.0).unwrap_or(0.0);
        m.packet_latency_in_order_p99_ms = percentile(&self.in_order_latency, 99.0).unwrap_or(0.0);
        m.late_packets = self.late_latency.len() as u64;
        m.late_packet_latency_p50_ms = percentile(&self.late_latency, 50.0).unwrap_or(0.0);
        m.stall_ms_total = p.stall_total.as_secs_f64() * 1000.0;
        m.stall_count = u64::from(p.stalls);
        m.stall_count_short = u64::from(p.short_stalls);
        m.frames_skipped = p.frames_skipped;
        m.frames_concealed = p.frames_concealed;
        m.rtt_ms = self.nack.rtt().srtt().as_secs_f64() * 1000.0;
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::MediaSender;

    const F: Duration = Duration::from_millis(20);

    #[allow(clippy::unnecessary_wraps)]
    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn playout_without_loss_never_stalls() {
        let p = playout(&[ms(30), ms(50), ms(70), ms(90)], F, 2);
        assert_eq!(
            p,
            Playout {
                start: ms(50),
                stall_total: Duration::ZERO,
                stalls: 0,
                short_stalls: 0,
                frames_played: 4,
                frames_skipped: 0,
                frames_concealed: 0
            }
        );
    }

    #[test]
    fn playout_late_frame_stalls_then_fast_forwards() {
        let p = playout(
            &[ms(30), ms(50), ms(150), ms(90), ms(110), ms(130), ms(170)],
            F,
            2,
        );
        assert_eq!(p.start, ms(50));
        assert_eq!(p.stall_total, Duration::from_millis(60));
        assert_eq!(p.stalls, 1);
        // 60 ms is longer than a frame: a repair's wait, not a little lateness.
        assert_eq!(p.short_stalls, 0);
        // At 150 ms frames 2..=5 are buffered: skip 2 and 3, play 4, 5, 6.
        assert_eq!(p.frames_skipped, 2);
        assert_eq!(p.frames_played, 5);
    }

    #[test]
    fn playout_two_short_stalls() {
        // Frame 1 is 10 ms late, frame 3 is 25 ms late: stalls of 10 and 25 ms.
        // start = max(30, 60) = 60: frame 0 at 60, frame 1 at 80 (available at 60).
        let p = playout(&[ms(30), ms(60), ms(110), ms(145), ms(150)], F, 2);
        // t: 0@60, 1@80, 2 due 100 but arrives 110 → stall 10, plays 110; 3 due 130,
        // arrives 145 → stall 15; 4 @165.
        assert_eq!(p.stall_total, Duration::from_millis(25));
        assert_eq!(p.stalls, 2);
        // Both shorter than the 20 ms frame interval.
        assert_eq!(p.short_stalls, 2);
        assert_eq!(p.frames_played, 5);
        assert_eq!(p.frames_skipped, 0);
    }

    #[test]
    fn playout_never_arriving_frame_is_concealed() {
        let p = playout(&[ms(30), ms(50), None, ms(90)], F, 2);
        assert_eq!(p.stall_total, Duration::ZERO);
        assert_eq!((p.frames_played, p.frames_concealed), (3, 1));
        // Trailing frames that never arrive end playback without a stall.
        let p = playout(&[ms(30), ms(50), None, None], F, 2);
        assert_eq!((p.frames_played, p.stall_total), (2, Duration::ZERO));
        assert_eq!(playout(&[], F, 2), Playout::default());
    }

    #[test]
    fn receiver_fec_recovery_nack_and_latency() {
        let cfg = FecConfig::default();
        let mut tx = MediaSender::new(&cfg.sender_config(), 0);
        let mut rx = FecReceiver::new(&cfg);
        let g0 = 1_000_000_000u64; // gen time of packet 0 (µs)
        let pkts: Vec<Vec<u8>> = (0..6).map(|k| tx.next_packet(g0 + k * 20_000)).collect();
        let d = 50_000u64; // one-way delay 50 ms
        let deliver = |rx: &mut FecReceiver, k: u64| {
            let wall = g0 + k * 20_000 + d;
            rx.on_datagram(&pkts[k as usize], Duration::from_micros(wall - g0), wall)
        };
        assert!(deliver(&mut rx, 0).is_empty());
        // Packet 1 lost: frame 1 comes with packet 2 (FEC), no NACK.
        assert!(deliver(&mut rx, 2).is_empty());
        // Packets 3 and 4 lost: frame 3 is gone; packet 5 reveals it.
        let nacks = deliver(&mut rx, 5);
        assert_eq!(nacks.len(), 1);
        assert_eq!(
            Codec::new(0).decode(&nacks[0]),
            Ok(Message::Nack {
                ts_us: 150_000,
                seqs: vec![3]
            })
        );
        let retx = tx.on_datagram(&nacks[0]);
        assert_eq!(retx.len(), 1);
        // Retransmitted packet 3 (frames 2, 3) arrives 100 ms after the NACK (RTT 100 ms).
        let wall = g0 + 250_000;
        assert!(
            rx.on_datagram(&retx[0].1, Duration::from_millis(250), wall)
                .is_empty()
        );
        assert!(
            rx.on_datagram(
                &crate::wire::encode_fin(6),
                Duration::from_millis(260),
                wall
            )
            .is_empty()
        );
        assert!(rx.is_complete());
        assert!(rx.trace_csv().contains("\n3,250.000,210.000\n"));
        let m = rx.metrics();
        assert_eq!(m.packets_received, 4);
        assert_eq!(m.frames_received, 6);
        assert_eq!(m.frames_from_fec, 2, "frames 1 and 4");
        assert_eq!((m.nack_datagrams, m.nacked_frames), (1, 1));
        assert_eq!(m.rtt_ms, 100.0);
        // Frame latencies: a frame in its own packet: 20 + 50 = 70 ms; frame 1 via packet 2:
        // 40 + 50 = 90 ms; frame 4 via packet 5: 90 ms; frame 3 via the retransmission at 250 ms,
        // started at 40 ms: 210 ms.
        assert_eq!(m.latency_p50_ms, 70.0);
        assert_eq!(m.latency_p99_ms, 210.0);
        // Packet latency: 40 + 50 = 90 ms except the retransmitted packet 3 (gen 60 ms, oldest
        // data from 20 ms, arrived 250 ms: 230 ms).
        assert_eq!(m.packet_latency_p99_ms, 230.0);
        // Packet 3 arrived after packet 5: late (a repair); the in-order packets stay at 90 ms.
        assert_eq!(m.late_packets, 1);
        assert_eq!(m.late_packet_latency_p50_ms, 230.0);
        assert_eq!(m.packet_latency_in_order_p99_ms, 90.0);
        // Availability (since gen of packet 0): f0 50, f1 90, f2 90, f3 250, f4 150, f5 150.
        // Playback starts at 90 with frames 0, 1, 2 buffered: fast-forward over frame 0; f1@90,
        // f2@110, f3 due 130 arrives 250 → stall 120 ms; at 250 frames 3, 4, 5 are buffered →
        // skip frame 3, play 4 and 5.
        assert_eq!(m.stall_ms_total, 120.0);
        assert_eq!(
            (m.stall_count, m.frames_skipped, m.frames_concealed),
            (1, 2, 0)
        );
    }

    #[test]
    fn nack_hold_lets_a_repair_arrive_before_the_end_to_end_nack() {
        let cfg = FecConfig::default();
        let mut tx = MediaSender::new(&cfg.sender_config(), 0);
        let mut rx = FecReceiver::new(&cfg);
        rx.set_nack_hold(Some(Duration::from_millis(50)));
        let pkts: Vec<Vec<u8>> = (0..12).map(|k| tx.next_packet(k * 20_000)).collect();
        let at = |k: u64| Duration::from_millis(k * 20 + 10);
        rx.on_datagram(&pkts[0], at(0), 0);
        // Packets 1 and 2 lost: frame 1 is missing once packet 3 arrives, but its NACK is held.
        assert!(rx.on_datagram(&pkts[3], at(3), 0).is_empty());
        assert_eq!(rx.next_timeout(), Some(at(3) + Duration::from_millis(50)));
        // The proxy's repair of packet 2 (frames 1 and 2) arrives within the hold: no NACK.
        assert!(
            rx.on_datagram(&pkts[2], at(3) + Duration::from_millis(30), 0)
                .is_empty()
        );
        assert!(rx.on_timeout(at(3) + Duration::from_millis(50)).is_empty());
        // Packets 5 and 6 lost and never repaired: frame 5 is NACKed when the hold ends.
        rx.on_datagram(&pkts[4], at(4), 0);
        assert!(rx.on_datagram(&pkts[7], at(7), 0).is_empty());
        assert!(rx.on_timeout(at(7) + Duration::from_millis(49)).is_empty());
        let nacks = rx.on_timeout(at(7) + Duration::from_millis(50));
        assert_eq!(nacks.len(), 1);
        assert!(matches!(
            Codec::new(0).decode(&nacks[0]),
            Ok(Message::Nack { ref seqs, .. }) if seqs == &vec![5]
        ));
        // Without a hold (the session fell back) a new gap is NACKed at once: packets 8 and 9
        // lost, frame 8 missing when packet 10 arrives.
        rx.set_nack_hold(None);
        assert_eq!(rx.on_datagram(&pkts[10], at(10), 0).len(), 1, "frame 8");
        assert_eq!(rx.metrics().nack_datagrams, 2);
    }

    proptest::proptest! {
        /// Any arrival trace: stalls are bounded by the span of arrivals and every frame is
        /// accounted for exactly once (played, skipped or concealed) up to the last arrival.
        #[test]
        fn playout_accounts_for_frames(avail in proptest::collection::vec(proptest::option::of(0u64..2000), 0..80)) {
            let a: Vec<Option<Duration>> = avail.iter().map(|x| x.map(Duration::from_millis)).collect();
            let p = playout(&a, F, 2);
            let last_arrival = a.iter().flatten().max().copied().unwrap_or_default();
            proptest::prop_assert!(p.stall_total <= last_arrival);
            let accounted = p.frames_played + p.frames_skipped + p.frames_concealed;
            proptest::prop_assert!(accounted <= a.len() as u64);
            if p.start.is_some() {
                // Playback runs up to the last frame that ever arrives.
                let last_idx = a.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
                proptest::prop_assert_eq!(accounted, last_idx as u64);
            }
        }

        /// Arbitrary packets and junk never panic the FEC client.
        #[test]
        fn fec_receiver_handles_any_order(
            seqs in proptest::collection::vec(0u32..200, 0..100),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut rx = FecReceiver::new(&FecConfig::default());
            let mut c = Codec::new(0);
            for (i, s) in seqs.iter().enumerate() {
                let d = c.seal(&crate::wire::MediaPacket { seq: *s, gen_unix_us: 1_000_000, echo_us: 0, payload: vec![] });
                let _ = rx.on_datagram(&d, Duration::from_millis(i as u64), 2_000_000);
            }
            let _ = rx.on_datagram(&junk, Duration::from_secs(1), 0);
            let _ = rx.on_timeout(Duration::from_secs(10));
            let m = rx.metrics();
            let distinct: std::collections::BTreeSet<u32> = seqs.iter().copied().collect();
            proptest::prop_assert_eq!(m.packets_received, distinct.len() as u64);
            proptest::prop_assert!(m.frames_received <= m.packets_expected);
        }
    }
}

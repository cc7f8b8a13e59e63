//! The receiver's jitter buffer and its metrics (sans-IO: arrival times are passed in).
//!
//! - **De-jitter delay** per packet (Sidekick (NSDI '24) §5.1, as `media::dejitter_delays`): in
//!   RTP sequence order a packet plays at `max(arrival, previous play)`; its delay is
//!   `play − arrival`. A packet that never arrived does not hold back the others.
//! - **Frame delay**: from the frame's capture (sender `CLOCK_REALTIME`, in the payload header)
//!   to the arrival of its last missing packet (receiver `CLOCK_REALTIME`; the lab's namespaces
//!   and loopback share the clock).
//! - **Frozen time**: frame `i` is due for display at `capture_i + D`, where `D` is the smallest
//!   frame delay of the call plus the playout delay (`playout_delay`, the jitter buffer's target).
//!   A frame is shown at `max(due_i, complete_i, shown_{i−1})` — it cannot be decoded before the
//!   frames it refers to — and the screen is frozen for whatever the interval between two shown
//!   frames exceeds their capture interval: `frozen = Σ max(0, (shown_i − shown_j) − (capture_i −
//!   capture_j))` over consecutive complete frames `j < i`. Frames that never complete are
//!   counted (`frames_incomplete`) and skipped.
//!
//! ```
//! use std::time::Duration;
//! use sidekick_examples::webrtc::playout::Playout;
//! use sidekick_examples::webrtc::source::PayloadHeader;
//! let ms = |x: u64| x * 1_000_000;
//! let h = |frame, packet| PayloadHeader { frame, packet, count: 2, keyframe: false,
//!                                          capture_unix_ns: ms(33 * u64::from(frame)) };
//! let mut p = Playout::new(Duration::from_millis(50));
//! p.on_packet(0, ms(10), h(0, 0));
//! p.on_packet(1, ms(12), h(0, 1));
//! p.on_packet(3, ms(45), h(1, 1));
//! p.on_packet(2, ms(150), h(1, 0)); // repaired late: packet 3 waited 105 ms
//! let m = p.metrics();
//! assert_eq!((m.packets, m.lost, m.frames_complete), (4, 0, 2));
//! assert_eq!(m.dejitter_max_ms, Some(105.0));
//! // Frame 1 was due at 33 + 12 + 50 = 95 ms, shown at 150 ms: 55 ms frozen.
//! assert_eq!(m.frozen_ms_total, 55.0);
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::source::PayloadHeader;
use crate::media::dejitter_delays;
use crate::stats::percentile;

/// Packets tracked at most (about 2.5 hours at 1.5 Mbit/s); later ones are counted and dropped.
pub const MAX_PACKETS: usize = 2_000_000;

#[derive(Debug, Clone, Copy)]
struct FrameState {
    capture_ns: u64,
    count: u16,
    received: u16,
    complete_ns: Option<u64>,
}

/// Receiver-side state for the metrics.
#[derive(Debug, Clone)]
pub struct Playout {
    target: Duration,
    /// Extended sequence number → arrival (ns since the Unix epoch) of the first copy.
    arrivals: BTreeMap<u64, u64>,
    frames: BTreeMap<u32, FrameState>,
    duplicates: u64,
    untracked: u64,
}

/// The receiver's report (JSON field names are the lab's metric names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlayoutMetrics {
    /// Distinct media packets received.
    pub packets: u64,
    /// Media packets never received (holes between the lowest and highest sequence number).
    pub lost: u64,
    /// Copies of packets already received that reached the jitter buffer.
    pub duplicates: u64,
    /// Frames with every packet.
    pub frames_complete: u64,
    /// Frames seen but never completed.
    pub frames_incomplete: u64,
    /// Per-packet de-jitter delay, median.
    pub dejitter_p50_ms: Option<f64>,
    /// Per-packet de-jitter delay, 99th percentile.
    pub dejitter_p99_ms: Option<f64>,
    /// Per-packet de-jitter delay, maximum.
    pub dejitter_max_ms: Option<f64>,
    /// Frame delay (capture → complete), median.
    pub frame_delay_p50_ms: Option<f64>,
    /// Frame delay, 90th percentile.
    pub frame_delay_p90_ms: Option<f64>,
    /// Frame delay, 99th percentile.
    pub frame_delay_p99_ms: Option<f64>,
    /// Total time the picture stood still beyond the frames' own intervals.
    pub frozen_ms_total: f64,
    /// Number of freezes (intervals between shown frames longer than their capture interval).
    pub freezes: u64,
    /// The playout delay the deadlines used.
    pub playout_delay_ms: f64,
}

impl Playout {
    /// A jitter buffer with the given playout delay (target beyond the smallest frame delay).
    pub fn new(playout_delay: Duration) -> Self {
        Self {
            target: playout_delay,
            arrivals: BTreeMap::new(),
            frames: BTreeMap::new(),
            duplicates: 0,
            untracked: 0,
        }
    }

    /// A media packet (extended sequence number `seq`) reached the jitter buffer at
    /// `arrival_unix_ns`.
    pub fn on_packet(&mut self, seq: u64, arrival_unix_ns: u64, h: PayloadHeader) {
        if self.arrivals.contains_key(&seq) {
            self.duplicates += 1;
            return;
        }
        if self.arrivals.len() >= MAX_PACKETS || self.frames.len() >= MAX_PACKETS {
            self.untracked += 1;
            return;
        }
        self.arrivals.insert(seq, arrival_unix_ns);
        let f = self.frames.entry(h.frame).or_insert(FrameState {
            capture_ns: h.capture_unix_ns,
            count: h.count,
            received: 0,
            complete_ns: None,
        });
        if f.complete_ns.is_some() || f.count != h.count {
            // A packet beyond the frame's announced count: not ours to count twice.
            return;
        }
        f.received += 1;
        if f.received >= f.count {
            f.complete_ns = Some(arrival_unix_ns);
        }
    }

    /// Per-packet CSV (`seq,arrival_ms,dejitter_ms`; arrival from the first packet; empty
    /// fields for packets never received), for looking at where delays come from.
    pub fn trace_csv(&self) -> String {
        let mut out = String::from("seq,arrival_ms,dejitter_ms\n");
        let (Some((&lo, _)), Some((&hi, _))) = (
            self.arrivals.first_key_value(),
            self.arrivals.last_key_value(),
        ) else {
            return out;
        };
        let t0 = self.arrivals.values().min().copied().unwrap_or(0);
        let seq: Vec<Option<Duration>> = (lo..=hi)
            .map(|s| {
                self.arrivals
                    .get(&s)
                    .map(|a| Duration::from_nanos(a.saturating_sub(t0)))
            })
            .collect();
        for (i, (a, d)) in seq.iter().zip(dejitter_delays(&seq)).enumerate() {
            let f = |x: Option<Duration>| {
                x.map_or(String::new(), |x| format!("{:.3}", x.as_secs_f64() * 1e3))
            };
            let _ = writeln!(out, "{},{},{}", lo + i as u64, f(*a), f(d));
        }
        out
    }

    /// Frames completed so far.
    pub fn frames_complete(&self) -> u64 {
        self.frames
            .values()
            .filter(|f| f.complete_ns.is_some())
            .count() as u64
    }

    /// The metrics of everything received so far.
    pub fn metrics(&self) -> PlayoutMetrics {
        let mut m = PlayoutMetrics {
            packets: self.arrivals.len() as u64,
            duplicates: self.duplicates,
            playout_delay_ms: ms(self.target.as_nanos() as u64),
            ..PlayoutMetrics::default()
        };
        if let (Some((&lo, _)), Some((&hi, _))) = (
            self.arrivals.first_key_value(),
            self.arrivals.last_key_value(),
        ) {
            m.lost = (hi - lo + 1) - m.packets;
            let t0 = self.arrivals.values().min().copied().unwrap_or(0);
            let seq: Vec<Option<Duration>> = (lo..=hi)
                .map(|s| {
                    self.arrivals
                        .get(&s)
                        .map(|a| Duration::from_nanos(a.saturating_sub(t0)))
                })
                .collect();
            let d: Vec<f64> = dejitter_delays(&seq)
                .into_iter()
                .flatten()
                .map(|d| d.as_secs_f64() * 1000.0)
                .collect();
            m.dejitter_p50_ms = percentile(&d, 50.0);
            m.dejitter_p99_ms = percentile(&d, 99.0);
            m.dejitter_max_ms = d.iter().copied().reduce(f64::max);
        }
        let complete: Vec<(u64, u64)> = self
            .frames
            .values()
            .filter_map(|f| f.complete_ns.map(|c| (f.capture_ns, c)))
            .collect();
        m.frames_complete = complete.len() as u64;
        m.frames_incomplete = self.frames.len() as u64 - m.frames_complete;
        let delays: Vec<i128> = complete
            .iter()
            .map(|&(cap, c)| i128::from(c) - i128::from(cap))
            .collect();
        let delays_ms: Vec<f64> = delays.iter().map(|&d| d as f64 / 1e6).collect();
        m.frame_delay_p50_ms = percentile(&delays_ms, 50.0);
        m.frame_delay_p90_ms = percentile(&delays_ms, 90.0);
        m.frame_delay_p99_ms = percentile(&delays_ms, 99.0);
        if let Some(&min_delay) = delays.iter().min() {
            let d = min_delay + self.target.as_nanos() as i128;
            let mut prev: Option<(i128, i128)> = None; // (capture, shown)
            let mut frozen: i128 = 0;
            for &(cap, c) in &complete {
                let (cap, c) = (i128::from(cap), i128::from(c));
                let due = cap + d;
                let shown = prev.map_or(due.max(c), |(_, s)| due.max(c).max(s));
                if let Some((pcap, pshown)) = prev {
                    let extra = (shown - pshown) - (cap - pcap);
                    if extra > 0 {
                        frozen += extra;
                        m.freezes += 1;
                    }
                }
                prev = Some((cap, shown));
            }
            m.frozen_ms_total = frozen as f64 / 1e6;
        }
        m
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(frame: u32, packet: u16, count: u16, capture_ms: u64) -> PayloadHeader {
        PayloadHeader {
            frame,
            packet,
            count,
            keyframe: false,
            capture_unix_ns: capture_ms * 1_000_000,
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn clean_stream_has_no_freeze_and_no_dejitter_delay() {
        let mut p = Playout::new(Duration::from_millis(40));
        let mut seq = 0;
        for f in 0..30u32 {
            let cap = u64::from(f) * 33;
            for k in 0..3 {
                p.on_packet(seq, (cap + 20 + u64::from(k) * 10) * MS, hdr(f, k, 3, cap));
                seq += 1;
            }
        }
        let m = p.metrics();
        assert_eq!((m.packets, m.lost, m.frames_complete), (90, 0, 30));
        assert_eq!(m.dejitter_p99_ms, Some(0.0));
        assert_eq!(m.frame_delay_p90_ms, Some(40.0));
        assert_eq!((m.frozen_ms_total, m.freezes), (0.0, 0));
    }

    #[test]
    fn a_late_frame_freezes_once_and_its_successors_catch_up() {
        let mut p = Playout::new(Duration::from_millis(20));
        // Frames 0..5, one packet each, 10 ms after capture; frame 2 arrives 100 ms late.
        for f in 0..5u32 {
            let cap = u64::from(f) * 33;
            let late = if f == 2 { 100 } else { 0 };
            p.on_packet(u64::from(f), (cap + 10 + late) * MS, hdr(f, 0, 1, cap));
        }
        let m = p.metrics();
        // Due at cap + 30; frame 2 shown at 176 instead of 96: 80 ms frozen. Frames 3 and 4 (due
        // at 129 and 162) are shown right after it: no further freeze.
        assert_eq!(m.frozen_ms_total, 80.0);
        assert_eq!(m.freezes, 1);
        assert_eq!(m.frame_delay_p99_ms, Some(110.0));
        // Packets 3 and 4 waited for packet 2 (played at 176): 176 − 109 = 67 ms and 34 ms.
        assert_eq!(m.dejitter_max_ms, Some(67.0));
    }

    #[test]
    fn missing_packets_are_lost_and_do_not_block() {
        let mut p = Playout::new(Duration::from_millis(20));
        p.on_packet(10, 0, hdr(0, 0, 2, 0));
        p.on_packet(12, MS, hdr(1, 0, 1, 33));
        p.on_packet(12, 2 * MS, hdr(1, 0, 1, 33));
        let m = p.metrics();
        assert_eq!((m.packets, m.lost, m.duplicates), (2, 1, 1));
        assert_eq!((m.frames_complete, m.frames_incomplete), (1, 1));
        assert_eq!(m.dejitter_max_ms, Some(0.0));
    }

    #[test]
    fn empty_has_no_percentiles() {
        let m = Playout::new(Duration::from_millis(20)).metrics();
        assert_eq!(m.dejitter_p99_ms, None);
        assert_eq!(m.frame_delay_p90_ms, None);
        assert_eq!(m.frozen_ms_total, 0.0);
    }
}

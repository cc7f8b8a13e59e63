//! Low-latency media with NACK retransmission (Robin scenario #1, Sidekick (NSDI '24) §5.1, §6.2).
//!
//! The sender emits a packet of [`MediaConfig::payload_len`] bytes (240) every
//! [`MediaConfig::interval`] (20 ms) with an encrypted sequence number. The receiver NACKs every
//! gap at once and re-NACKs at most once per RTT until the packet arrives; the sender retransmits
//! on every NACK. The receiver stores packets in a de-jitter buffer and plays each as soon as all
//! its predecessors have played; the **de-jitter buffer delay** of a packet is the time between
//! its arrival (when it is stored) and when it can be played in order (Sidekick (NSDI '24) §5.1: "the length
//! of time between when the packet is stored to when it can be played in-order. Some packets can
//! be played immediately"), computed by [`dejitter_delays`].
//!
//! # Sidekick hook
//!
//! [`MediaSender::retransmit`] is the "retransmit sequence X now" entry point: a sidekick
//! (quACK-driven) variant calls it when it detects a loss, exactly as the NACK path does. The
//! tokio adapter exposes the same through [`RetransmitHandle`], and reports every datagram it sends
//! to a [`SendObserver`] so a sidekick engine can log identifiers.
//!
//! ```
//! use std::time::Duration;
//! use sidekick_examples::media::{MediaConfig, MediaReceiver, MediaSender};
//!
//! let cfg = MediaConfig::default();
//! let mut tx = MediaSender::new(&cfg, 1);
//! let mut rx = MediaReceiver::new(&cfg);
//! let p0 = tx.next_packet(1_000_000);
//! let _lost = tx.next_packet(1_020_000);
//! let p2 = tx.next_packet(1_040_000);
//! rx.on_datagram(&p0, Duration::from_millis(0), 1_010_000);
//! let nacks = rx.on_datagram(&p2, Duration::from_millis(40), 1_050_000);
//! assert_eq!(nacks.len(), 1); // NACK for seq 1
//! let retx = tx.on_datagram(&nacks[0]);
//! rx.on_datagram(&retx[0].1, Duration::from_millis(90), 1_100_000);
//! let m = rx.metrics();
//! assert_eq!(m.packets_received, 3);
//! assert_eq!(m.dejitter_max_ms, 50.0); // packet 2 waited 50 ms for packet 1
//! ```

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::nack::NackTracker;
use crate::stats::percentile;
use crate::wire::{Codec, MediaPacket, Message, encode_nacks};

/// Media stream parameters.
#[derive(Debug, Clone)]
pub struct MediaConfig {
    /// Packet interval (20 ms).
    pub interval: Duration,
    /// Payload bytes per packet (240).
    pub payload_len: usize,
    /// Packets the sender keeps for retransmission (oldest evicted first).
    pub history_cap: usize,
    /// Largest sequence number the receiver records (bounds its arrival table).
    pub max_packets: u32,
    /// Most missing packets tracked for NACKs.
    pub nack_cap: usize,
    /// RTT assumed for re-NACKs before the first sample.
    pub initial_rtt: Duration,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(20),
            payload_len: 240,
            history_cap: 4096,
            max_packets: 1 << 20,
            nack_cap: 4096,
            initial_rtt: Duration::from_millis(100),
        }
    }
}

/// Sender counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SenderCounters {
    /// Original packets sent.
    pub packets_sent: u64,
    /// Retransmissions sent (NACK- or hook-triggered).
    pub retransmissions: u64,
    /// NACK datagrams received.
    pub nacks_received: u64,
    /// Retransmission requests for packets no longer (or never) in the history.
    pub retransmit_unknown: u64,
    /// Packets evicted from the history because of its cap.
    pub history_evicted: u64,
    /// Datagrams that failed to decode (at the sender).
    #[serde(rename = "sender_bad_datagrams")]
    pub bad_datagrams: u64,
}

/// Sans-IO media sender: builds packets, keeps a bounded history, answers NACKs.
#[derive(Debug)]
pub struct MediaSender {
    codec: Codec,
    next_seq: u32,
    payload_len: usize,
    /// (seq, generation time) of recent packets; the payload is regenerated from the seq.
    history: VecDeque<(u32, u64)>,
    history_cap: usize,
    counters: SenderCounters,
}

impl MediaSender {
    /// New sender; `nonce_start` seeds the AEAD nonce counter (use a random value).
    pub fn new(cfg: &MediaConfig, nonce_start: u64) -> Self {
        Self {
            codec: Codec::new(nonce_start),
            next_seq: 0,
            payload_len: cfg.payload_len,
            history: VecDeque::new(),
            history_cap: cfg.history_cap.max(1),
            counters: SenderCounters::default(),
        }
    }

    fn payload(&self, seq: u32) -> Vec<u8> {
        // Synthetic audio: deterministic bytes derived from the sequence number.
        let s = seq.to_be_bytes();
        (0..self.payload_len)
            .map(|i| s[i % 4] ^ (i as u8))
            .collect()
    }

    /// Next original packet, produced at `gen_unix_us` (µs since the Unix epoch).
    pub fn next_packet(&mut self, gen_unix_us: u64) -> Vec<u8> {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        if self.history.len() == self.history_cap {
            self.history.pop_front();
            self.counters.history_evicted += 1;
        }
        self.history.push_back((seq, gen_unix_us));
        self.counters.packets_sent += 1;
        let p = MediaPacket {
            seq,
            gen_unix_us,
            echo_us: 0,
            payload: self.payload(seq),
        };
        self.codec.seal(&p)
    }

    /// Retransmit `seq` now (the sidekick hook, also used for NACKs). `echo_us` is echoed to the
    /// receiver for its RTT estimate (0 when not answering a NACK). `None` if `seq` is no longer
    /// in the history.
    pub fn retransmit(&mut self, seq: u32, echo_us: u64) -> Option<Vec<u8>> {
        let Some(&(_, gen_unix_us)) = self.find(seq) else {
            self.counters.retransmit_unknown += 1;
            return None;
        };
        self.counters.retransmissions += 1;
        let p = MediaPacket {
            seq,
            gen_unix_us,
            echo_us,
            payload: self.payload(seq),
        };
        Some(self.codec.seal(&p))
    }

    fn find(&self, seq: u32) -> Option<&(u32, u64)> {
        let (first, _) = *self.history.front()?;
        let idx = seq.wrapping_sub(first) as usize;
        self.history.get(idx).filter(|(s, _)| *s == seq)
    }

    /// Handle a datagram from the receiver: returns `(seq, datagram)` retransmissions to send
    /// (answering a NACK), nothing for anything else. Summaries are returned by
    /// [`MediaSender::summary_of`].
    pub fn on_datagram(&mut self, buf: &[u8]) -> Vec<(u32, Vec<u8>)> {
        match self.codec.decode(buf) {
            Ok(Message::Nack { ts_us, seqs }) => {
                self.counters.nacks_received += 1;
                seqs.into_iter()
                    .filter_map(|s| Some((s, self.retransmit(s, ts_us)?)))
                    .collect()
            }
            Ok(_) => Vec::new(),
            Err(_) => {
                self.counters.bad_datagrams += 1;
                Vec::new()
            }
        }
    }

    /// The receiver's summary JSON if `buf` is a SUMMARY datagram.
    pub fn summary_of(&self, buf: &[u8]) -> Option<String> {
        match self.codec.decode(buf) {
            Ok(Message::Summary(s)) => Some(s),
            _ => None,
        }
    }

    /// Original packets sent so far (= next sequence number).
    pub fn total(&self) -> u32 {
        self.next_seq
    }

    /// Counters.
    pub fn counters(&self) -> SenderCounters {
        self.counters
    }
}

/// Per-packet de-jitter buffer delay (Sidekick (NSDI '24) §5.1): packet `i` arrives at `arrivals[i]`, is
/// stored, and plays at `max(arrival_i, play_{i-1})` — as soon as its predecessor has played. The
/// delay is `play_i − arrival_i`. A packet that never arrived (`None`) is skipped: it does not hold
/// back its successors (the stream has no later chance to play it) and has no delay.
pub fn dejitter_delays(arrivals: &[Option<Duration>]) -> Vec<Option<Duration>> {
    let mut prev_play: Option<Duration> = None;
    arrivals
        .iter()
        .map(|a| {
            let a = (*a)?;
            let play = prev_play.map_or(a, |p| p.max(a));
            prev_play = Some(play);
            Some(play.saturating_sub(a))
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Arrival {
    at: Duration,
    latency_ms: f64,
}

/// Receiver metrics (JSON field names are the lab's metric names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiverMetrics {
    /// Distinct packets received.
    pub packets_received: u64,
    /// Packets announced by the sender (FIN) or implied by the highest seq, never received.
    pub packets_missing: u64,
    /// Duplicate copies received.
    pub duplicates: u64,
    /// NACK datagrams sent.
    pub nack_datagrams: u64,
    /// Sequence numbers NACKed (a re-NACK counts again).
    pub nacked_seqs: u64,
    /// Median de-jitter buffer delay, ms.
    pub dejitter_p50_ms: f64,
    /// 99th percentile de-jitter buffer delay, ms.
    pub dejitter_p99_ms: f64,
    /// Largest de-jitter buffer delay, ms.
    pub dejitter_max_ms: f64,
    /// Median one-way latency (generation → first arrival), ms.
    pub latency_p50_ms: f64,
    /// 99th percentile one-way latency (generation → first arrival), ms.
    pub latency_p99_ms: f64,
    /// 99th percentile of generation → in-order playout, ms.
    pub playout_latency_p99_ms: f64,
    /// Smoothed RTT at the end (NACK → retransmission), ms.
    pub rtt_ms: f64,
    /// Undecodable datagrams.
    pub bad_datagrams: u64,
    /// Packets beyond the arrival table's cap, or NACK state given up (cap).
    pub dropped: u64,
}

/// Sans-IO media receiver: records arrivals, produces NACKs, computes metrics.
#[derive(Debug)]
pub struct MediaReceiver {
    codec: Codec,
    arrivals: Vec<Option<Arrival>>,
    max_packets: u32,
    nack: NackTracker,
    total: Option<u32>,
    counters: ReceiverMetrics,
}

impl MediaReceiver {
    /// New receiver.
    pub fn new(cfg: &MediaConfig) -> Self {
        Self {
            codec: Codec::new(0),
            arrivals: Vec::new(),
            max_packets: cfg.max_packets,
            nack: NackTracker::new(cfg.nack_cap, cfg.initial_rtt),
            total: None,
            counters: ReceiverMetrics::default(),
        }
    }

    /// Handle a datagram from the sender received at `now` (receiver's monotonic clock) and
    /// `wall_unix_us` (its `CLOCK_REALTIME`); returns NACK datagrams to send back.
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
                if p.seq >= self.max_packets {
                    self.counters.dropped += 1;
                    return Vec::new();
                }
                let idx = p.seq as usize;
                if self.arrivals.len() <= idx {
                    self.arrivals.resize(idx + 1, None);
                }
                if self.arrivals[idx].is_some() {
                    self.counters.duplicates += 1;
                    return Vec::new();
                }
                let latency_ms = (wall_unix_us as f64 - p.gen_unix_us as f64) / 1000.0;
                self.arrivals[idx] = Some(Arrival {
                    at: now,
                    latency_ms,
                });
                self.counters.packets_received += 1;
                self.nack.on_received(p.seq, now)
            }
            Message::Fin { total } => {
                let total = total.min(self.max_packets);
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

    /// Holds the end-to-end NACK of every packet that goes missing from now on for `hold`
    /// (`None`: NACK at once), while an on-path Packrat proxy repairs it (Packrat (CoNEXT '26)
    /// §6.2).
    pub fn set_nack_hold(&mut self, hold: Option<Duration>) {
        self.nack.set_first_delay(hold.unwrap_or(Duration::ZERO));
    }

    /// When [`MediaReceiver::on_timeout`] next has work.
    pub fn next_timeout(&self) -> Option<Duration> {
        self.nack.next_deadline()
    }

    /// Has the sender's FIN arrived and every announced packet been received?
    pub fn is_complete(&self) -> bool {
        self.total.is_some() && self.nack.missing_count() == 0
    }

    /// Has the sender's FIN arrived?
    pub fn fin_received(&self) -> bool {
        self.total.is_some()
    }

    /// Arrival times (receiver clock) indexed by sequence number.
    pub fn arrivals(&self) -> Vec<Option<Duration>> {
        self.arrivals.iter().map(|a| a.map(|a| a.at)).collect()
    }

    /// Compute the metrics from the arrivals so far.
    pub fn metrics(&self) -> ReceiverMetrics {
        let mut m = self.counters.clone();
        let arrivals = self.arrivals();
        let delays = dejitter_delays(&arrivals);
        let dj: Vec<f64> = delays
            .iter()
            .flatten()
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        let lat: Vec<f64> = self
            .arrivals
            .iter()
            .flatten()
            .map(|a| a.latency_ms)
            .collect();
        let play: Vec<f64> = self
            .arrivals
            .iter()
            .zip(&delays)
            .filter_map(|(a, d)| Some(a.as_ref()?.latency_ms + d.as_ref()?.as_secs_f64() * 1000.0))
            .collect();
        let expected = self.total.map_or(self.arrivals.len() as u64, u64::from);
        m.packets_missing = expected.saturating_sub(m.packets_received);
        m.nacked_seqs = self.nack.nacked();
        m.dropped += self.nack.dropped();
        m.dejitter_p50_ms = percentile(&dj, 50.0).unwrap_or(0.0);
        m.dejitter_p99_ms = percentile(&dj, 99.0).unwrap_or(0.0);
        m.dejitter_max_ms = percentile(&dj, 100.0).unwrap_or(0.0);
        m.latency_p50_ms = percentile(&lat, 50.0).unwrap_or(0.0);
        m.latency_p99_ms = percentile(&lat, 99.0).unwrap_or(0.0);
        m.playout_latency_p99_ms = percentile(&play, 99.0).unwrap_or(0.0);
        m.rtt_ms = self.nack.rtt().srtt().as_secs_f64() * 1000.0;
        m
    }

    /// Per-packet trace lines `seq,arrival_ms,latency_ms,dejitter_ms` (empty fields for packets
    /// never received), for CDF plots.
    pub fn trace_csv(&self) -> String {
        use std::fmt::Write as _;
        let delays = dejitter_delays(&self.arrivals());
        let mut s = String::from("seq,arrival_ms,latency_ms,dejitter_ms\n");
        for (i, (a, d)) in self.arrivals.iter().zip(&delays).enumerate() {
            // Writing to a String cannot fail.
            let _ = match (a, d) {
                (Some(a), Some(d)) => writeln!(
                    s,
                    "{i},{:.3},{:.3},{:.3}",
                    a.at.as_secs_f64() * 1000.0,
                    a.latency_ms,
                    d.as_secs_f64() * 1000.0
                ),
                _ => writeln!(s, "{i},,,"),
            };
        }
        s
    }
}

/// Observer of every datagram the media sender puts on the wire (e.g. a sidekick engine logging
/// quACK identifiers).
pub trait SendObserver: Send {
    /// `datagram` for `seq` was sent; `retransmission` tells whether it is a resend.
    fn on_send(&mut self, seq: u32, datagram: &[u8], retransmission: bool);

    /// A datagram other than media data was sent to the peer (FIN). Default: ignored.
    fn on_control_sent(&mut self, _datagram: &[u8]) {}

    /// A datagram arrived from the peer's address; return true to consume it (e.g. a sidekick
    /// discovery reply, which an on-path proxy sends "from" the peer). Default: not consumed.
    fn on_receive(&mut self, _datagram: &[u8]) -> bool {
        false
    }
}

/// Observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl SendObserver for NoObserver {
    fn on_send(&mut self, _seq: u32, _datagram: &[u8], _retransmission: bool) {}
}

/// Cloneable handle through which another task (a sidekick engine) asks the running sender to
/// "retransmit sequence X now".
#[derive(Debug, Clone)]
pub struct RetransmitHandle(tokio::sync::mpsc::UnboundedSender<u32>);

impl RetransmitHandle {
    /// Create a handle and the receiving end to pass to [`crate::media_io::run_sender`].
    pub fn new() -> (Self, tokio::sync::mpsc::UnboundedReceiver<u32>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Ask for a retransmission of `seq`; false if the sender has stopped.
    pub fn retransmit(&self, seq: u32) -> bool {
        self.0.send(seq).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_wraps)]
    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn dejitter_in_order_is_zero() {
        let d = dejitter_delays(&[ms(0), ms(20), ms(40)]);
        assert_eq!(d, vec![ms(0), ms(0), ms(0)]);
    }

    #[test]
    fn dejitter_one_late_packet_delays_its_successors() {
        // Packet 1 lost and retransmitted, arrives at 92 ms (20 ms + 72 ms, the paper's e2e
        // case); packets 2, 3, 4 wait for it; packet 5 (at 100 ms) plays at once.
        let d = dejitter_delays(&[ms(0), ms(92), ms(40), ms(60), ms(80), ms(100)]);
        assert_eq!(d, vec![ms(0), ms(0), ms(52), ms(32), ms(12), ms(0)]);
    }

    #[test]
    fn dejitter_missing_packet_is_skipped() {
        let d = dejitter_delays(&[ms(0), None, ms(40), ms(30)]);
        assert_eq!(d, vec![ms(0), None, ms(0), ms(10)]);
    }

    #[test]
    fn nack_retransmit_cycle_and_metrics() {
        let cfg = MediaConfig::default();
        let mut tx = MediaSender::new(&cfg, 0);
        let mut rx = MediaReceiver::new(&cfg);
        let base = 1_000_000_000u64;
        let pkts: Vec<Vec<u8>> = (0..5).map(|i| tx.next_packet(base + i * 20_000)).collect();
        // Packet 1 lost. One-way delay 10 ms.
        for (i, p) in pkts.iter().enumerate() {
            if i == 1 {
                continue;
            }
            let at = Duration::from_millis(i as u64 * 20 + 10);
            let nacks = rx.on_datagram(p, at, base + i as u64 * 20_000 + 10_000);
            if i == 2 {
                assert_eq!(nacks.len(), 1);
                let retx = tx.on_datagram(&nacks[0]);
                assert_eq!(retx.len(), 1);
                // Retransmission arrives 20 ms after the NACK (RTT 20 ms) at 70 ms.
                assert!(
                    rx.on_datagram(&retx[0].1, Duration::from_millis(70), base + 70_000)
                        .is_empty()
                );
            } else {
                assert!(nacks.is_empty());
            }
        }
        assert!(
            rx.on_datagram(&crate::wire::encode_fin(5), Duration::from_millis(100), 0)
                .is_empty()
        );
        assert!(rx.is_complete());
        let m = rx.metrics();
        assert_eq!(m.packets_received, 5);
        assert_eq!(m.packets_missing, 0);
        assert_eq!(m.nack_datagrams, 1);
        assert_eq!(m.nacked_seqs, 1);
        // Arrivals: 10, 70, 50, 70, 90 → delays 0, 0, 20, 0, 0.
        assert_eq!(m.dejitter_max_ms, 20.0);
        assert_eq!(m.dejitter_p50_ms, 0.0);
        assert_eq!(m.rtt_ms, 20.0);
        // Latency: 10 ms for all but packet 1 (generated at 20 ms, arrived at 70 ms).
        assert_eq!(m.latency_p50_ms, 10.0);
        assert_eq!(m.latency_p99_ms, 50.0);
        assert_eq!(tx.counters().retransmissions, 1);
        assert!(rx.trace_csv().contains("2,50.000,10.000,20.000"));
    }

    #[test]
    fn sidekick_hook_retransmits_from_history_only() {
        let cfg = MediaConfig {
            history_cap: 2,
            ..MediaConfig::default()
        };
        let mut tx = MediaSender::new(&cfg, 0);
        for i in 0..3 {
            tx.next_packet(i);
        }
        assert!(tx.retransmit(0, 0).is_none(), "evicted");
        assert!(tx.retransmit(2, 0).is_some());
        assert!(tx.retransmit(9, 0).is_none());
        let c = tx.counters();
        assert_eq!(
            (c.history_evicted, c.retransmit_unknown, c.retransmissions),
            (1, 2, 1)
        );
    }

    #[test]
    fn tail_loss_nacked_on_fin_and_duplicates_counted() {
        let cfg = MediaConfig::default();
        let mut tx = MediaSender::new(&cfg, 0);
        let mut rx = MediaReceiver::new(&cfg);
        let p0 = tx.next_packet(0);
        let _p1 = tx.next_packet(0);
        rx.on_datagram(&p0, Duration::ZERO, 0);
        rx.on_datagram(&p0, Duration::ZERO, 0);
        let n = rx.on_datagram(
            &crate::wire::encode_fin(tx.total()),
            Duration::from_millis(30),
            0,
        );
        assert_eq!(n.len(), 1);
        assert!(!rx.is_complete());
        // Re-NACK after the re-NACK interval (initial RTT 100 ms → 200 ms).
        assert!(rx.on_timeout(Duration::from_millis(100)).is_empty());
        assert_eq!(rx.on_timeout(Duration::from_millis(230)).len(), 1);
        let m = rx.metrics();
        assert_eq!((m.duplicates, m.packets_missing, m.nacked_seqs), (1, 1, 2));
        assert_eq!(rx.on_datagram(&[0xff], Duration::ZERO, 0).len(), 0);
        assert_eq!(rx.metrics().bad_datagrams, 1);
    }

    proptest::proptest! {
        /// Any arrival order, duplicates and FIN values: no panic, consistent counters, and the
        /// de-jitter delays are never negative and zero for in-order arrivals.
        #[test]
        fn receiver_handles_any_order(
            seqs in proptest::collection::vec(0u32..200, 0..100),
            fin in proptest::option::of(0u32..300),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let cfg = MediaConfig::default();
            let mut rx = MediaReceiver::new(&cfg);
            let mut c = Codec::new(0);
            for (i, s) in seqs.iter().enumerate() {
                let d = c.seal(&MediaPacket { seq: *s, gen_unix_us: 0, echo_us: 0, payload: vec![] });
                let _ = rx.on_datagram(&d, Duration::from_millis(i as u64), 1000);
            }
            let _ = rx.on_datagram(&junk, Duration::from_secs(1), 0);
            if let Some(f) = fin {
                let _ = rx.on_datagram(&crate::wire::encode_fin(f), Duration::from_secs(1), 0);
            }
            let _ = rx.on_timeout(Duration::from_secs(10));
            let m = rx.metrics();
            let distinct: std::collections::BTreeSet<u32> = seqs.iter().copied().collect();
            proptest::prop_assert_eq!(m.packets_received, distinct.len() as u64);
            proptest::prop_assert_eq!(m.duplicates, (seqs.len() - distinct.len()) as u64);
            proptest::prop_assert!(m.dejitter_p99_ms >= 0.0);
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted == seqs {
                proptest::prop_assert_eq!(m.dejitter_max_ms, 0.0);
            }
        }
    }
}

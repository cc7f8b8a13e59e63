//! The Robin sender engine (Sidekick (NSDI '24) §4.3.1): loss detection from the proxy's quACKs.
//!
//! The engine logs the identifier, send time and (when the packet-number lens read it) packet
//! number of every datagram the transport sends. On a quACK it subtracts the proxy's power sums
//! from those of the sent log up to the proxy's last received element and decodes the difference
//! against the log (Sidekick (NSDI '24) §3.4). Entries not missing were received by the proxy; a missing
//! entry is declared lost once at least three later-sent packets were received (the 3-duplicate
//! rule, reordering-aware) or when a time rule expires (RACK-like, Sidekick (NSDI '24) §4.3.1). The engine
//! never releases data on a quACK: only end-to-end ACKs do; it reports losses so that the
//! adapter resends the identical datagram (same packet number, so the receiver accepts it once)
//! and the congestion controller reacts with PACUBIC's quACK constants. It also estimates the
//! near-segment RTT and the ratio `r` of PACUBIC.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use quack::PowerSumQuack;
//! use sidekick::robin::{RobinSenderConfig, RobinEvent, RobinSender};
//!
//! let t0 = Instant::now();
//! let mut robin = RobinSender::new(RobinSenderConfig { threshold: 8, ..RobinSenderConfig::default() });
//! let mut proxy = PowerSumQuack::<u32>::new(8);
//! // The first quACK of an epoch is the baseline (here: nothing counted yet).
//! robin.on_quack(t0, &proxy.to_bytes()).unwrap();
//! for i in 0u32..10 {
//!     let datagram = [vec![0u8; 20], i.to_le_bytes().to_vec()].concat(); // id = last 4 bytes
//!     robin.on_sent(t0, &datagram, Some(u64::from(i)));
//!     if i != 3 {
//!         proxy.insert(i); // the proxy saw all but datagram 3
//!     }
//! }
//! robin.on_quack(t0 + Duration::from_millis(5), &proxy.to_bytes()).unwrap();
//! let lost: Vec<_> = robin.poll_events().filter_map(|e| match e {
//!     RobinEvent::Lost(l) => Some(l.packet_number),
//!     _ => None,
//! }).collect();
//! assert_eq!(lost, vec![Some(3)]);
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use quack::{IdSource, Width};

use crate::rtt::RttEstimator;

#[path = "robin_sums.rs"]
mod sums;
use sums::Sums;

/// The client's Robin sender: loss detection and early resends on quACK evidence (the session
/// negotiates the quACK side of it as `sidekick_protocol::messages::RobinConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct RobinSenderConfig {
    /// quACK threshold `t` agreed with the proxy.
    pub threshold: usize,
    /// How identifiers are read from datagrams (default: last 4 bytes, the AEAD tag).
    pub id_source: IdSource,
    /// Identifier width agreed with the proxy: 2, 4 (default) or 8 bytes (Sidekick (NSDI '24)
    /// §3). The quACKs the proxy sends must have this width.
    pub width: Width,
    /// A missing packet is lost once this many later-sent packets were received (Sidekick (NSDI '24)
    /// §4.3.1: three, as TCP's duplicate-ACK rule).
    pub reorder_threshold: u32,
    /// Time rule: lost when a later packet was received and the packet is older than
    /// `time_factor · near RTT + quack_interval` (RFC 9002's 9/8).
    pub time_factor: f64,
    /// The proxy's quACK interval (slack for the time rule).
    pub quack_interval: Duration,
    /// Cap on logged datagrams not yet resolved; beyond it the oldest is evicted (counted) and
    /// the quACK state must be reset.
    pub max_log: usize,
    /// Bytes of sent datagrams kept for early retransmission (0 disables retransmission).
    pub retransmit_buffer_bytes: usize,
    /// How many times one datagram may be resent on quACK evidence.
    pub max_retransmissions: u8,
    /// An identical resend is made only while at most this many packets were sent after the
    /// lost one (by packet number where the lens read it, else by send order); 0: no limit.
    /// Receivers discard a packet number far below the highest they have seen as a possible
    /// duplicate (quinn-proto keeps a window of 128 behind the highest, RFC 9000 §12.3 leaves it
    /// to them), and a resend reaches the receiver after everything sent before it. Behind a
    /// deep queue (Robin #3: up to 1 000 packets) a late resend only spends bottleneck time,
    /// and the transport's own retransmission (a new packet number) is what repairs the loss.
    pub resend_window: u64,
}

impl Default for RobinSenderConfig {
    fn default() -> Self {
        Self {
            threshold: 10,
            id_source: IdSource::QUIC_DEFAULT,
            width: Width::U32,
            reorder_threshold: 3,
            time_factor: 9.0 / 8.0,
            quack_interval: Duration::from_millis(30),
            max_log: 8192,
            retransmit_buffer_bytes: 4 << 20,
            max_retransmissions: 2,
            resend_window: 128,
        }
    }
}

/// Which rule declared a packet lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossRule {
    /// At least `reorder_threshold` later-sent packets were received by the proxy.
    Reordering,
    /// The time rule expired.
    Time,
}

/// A datagram found lost on the near segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostDatagram {
    /// Engine-local sequence number of the send.
    pub seq: u64,
    /// Identifier (zero-extended from the session's width).
    pub id: u64,
    /// QUIC packet number if the lens read it.
    pub packet_number: Option<u64>,
    /// When it was sent.
    pub sent: Instant,
    /// Size in bytes.
    pub len: usize,
    /// Why it was declared lost.
    pub rule: LossRule,
}

/// Output of the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RobinEvent {
    /// A datagram was lost between the sender and the proxy (congestion event for PACUBIC).
    Lost(LostDatagram),
    /// Resend this identical datagram now (early retransmission).
    Retransmit(Vec<u8>),
    /// The proxy received these bytes (ACK-reduction input; data stays unreleased).
    Delivered {
        /// Bytes newly confirmed received by the proxy.
        bytes: u64,
        /// Send time of the newest of them.
        newest_sent: Instant,
    },
    /// The quACK state is unusable: ask the proxy for a reset (new epoch) and call
    /// [`RobinSender::reset`].
    NeedReset,
}

/// Why a quACK was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuackError {
    /// Malformed bytes.
    #[error("malformed quACK: {0}")]
    Wire(#[from] quack::WireError),
    /// Threshold differs from the configured one.
    #[error("quACK threshold {got}, configured {want}")]
    Threshold {
        /// In the quACK.
        got: usize,
        /// Configured.
        want: usize,
    },
    /// The count went backwards: an old quACK arriving late.
    #[error("stale quACK (count {count} < {previous})")]
    Stale {
        /// In the quACK.
        count: u32,
        /// Largest seen.
        previous: u32,
    },
    /// The proxy claims more receipts than were sent.
    #[error("quACK counts {count} packets, only {sent} sent")]
    NeverSent {
        /// In the quACK.
        count: u32,
        /// Sent in this epoch.
        sent: u64,
    },
    /// The last element is not a sent identifier awaiting a verdict.
    #[error("quACK's last element was never sent")]
    UnknownLast,
    /// More than `t` packets missing, or the power sums do not decode against the log.
    #[error("quACK does not decode: {0}")]
    Undecodable(quack::DecodeError),
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RobinStats {
    /// Datagrams logged.
    pub sent_logged: u64,
    /// Datagrams too short to carry an identifier.
    pub unidentifiable: u64,
    /// quACKs accepted.
    pub quacks: u64,
    /// quACKs rejected, by reason.
    pub wire_errors: u64,
    /// Stale quACKs ignored.
    pub stale: u64,
    /// quACKs claiming receipts of packets never sent.
    pub never_sent: u64,
    /// quACKs whose last element is unknown.
    pub unknown_last: u64,
    /// quACKs that did not decode (including more than `t` missing).
    pub undecodable: u64,
    /// Bytes of the well-formed quACKs received (their wire form; the width sets the size,
    /// Sidekick (NSDI '24) §3).
    pub quack_bytes: u64,
    /// Groups of logged datagrams whose identifiers collided within a decoded quACK, so that
    /// which of them the proxy missed was indeterminate (each entry then waits for a later
    /// quACK or the time rule); the cost of narrow identifiers.
    pub indeterminate: u64,
    /// Threshold mismatches.
    pub threshold_mismatch: u64,
    /// Packets confirmed received by the proxy.
    pub delivered: u64,
    /// Losses by the reordering rule.
    pub lost_by_reordering: u64,
    /// Losses by the time rule.
    pub lost_by_time: u64,
    /// Datagrams resent.
    pub retransmitted: u64,
    /// Losses with no copy to resend (buffer full, or retransmission limit).
    pub retransmit_unavailable: u64,
    /// Losses not resent because more than `resend_window` packets were sent after them (the
    /// receiver would discard the copy as a possible duplicate).
    pub resends_too_late: u64,
    /// Log entries evicted by the cap.
    pub log_evicted: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// Resets performed.
    pub resets: u64,
    /// Epoch baselines taken from a first quACK.
    pub syncs: u64,
    /// First quACKs of a fresh engine naming a datagram sent before it logged anything (the
    /// proxy counted a send from the handshake window); the baseline waits for the next.
    pub syncs_deferred: u64,
    /// Early resends whose fate the end-to-end ACKs told.
    pub resends_assessed: u64,
    /// Of which unneeded: the receiver acknowledged the packet sooner than the resend could
    /// have reached it, so the original had arrived (a proxy that reported it lost was wrong).
    pub resends_unneeded: u64,
}

/// Cap on resends awaiting an end-to-end verdict.
const MAX_RESENDS_TRACKED: usize = 1024;

#[derive(Debug, Clone)]
struct Entry {
    seq: u64,
    id: u64,
    sent: Instant,
    pn: Option<u64>,
    len: usize,
    copy: Option<Vec<u8>>,
    retransmissions: u8,
    /// Later-sent packets known received by the proxy.
    received_after: u32,
    /// Whether a later-sent packet was received (arms the time rule).
    missing_since: Option<Instant>,
}

/// Cap on queued events.
const MAX_EVENTS: usize = 4096;

/// The Robin sender engine (sans-IO).
#[derive(Debug)]
pub struct RobinSender {
    config: RobinSenderConfig,
    log: VecDeque<Entry>,
    /// Power sums of every identifier the proxy is known to have received this epoch.
    received: Sums,
    next_seq: u64,
    /// Highest packet number logged (the lens's reading), for the resend window.
    newest_pn: Option<u64>,
    last_count: Option<u32>,
    /// Whether the first quACK of the epoch set the baseline.
    synced: bool,
    /// Datagrams sent before this engine logged anything that the proxy may have counted in
    /// its first epoch ([`Self::set_unlogged_sends`]).
    unlogged_sends: u64,
    copy_bytes: usize,
    near_rtt: RttEstimator,
    e2e_min_rtt: Option<Duration>,
    /// Resent packet numbers and when, until an end-to-end ACK tells whether it was needed.
    resends: VecDeque<(u64, Instant)>,
    events: VecDeque<RobinEvent>,
    stats: RobinStats,
}

impl RobinSender {
    /// A new engine.
    pub fn new(config: RobinSenderConfig) -> Self {
        Self {
            received: Sums::new(config.width, config.threshold),
            config,
            log: VecDeque::new(),
            next_seq: 0,
            newest_pn: None,
            last_count: None,
            synced: false,
            unlogged_sends: 0,
            copy_bytes: 0,
            near_rtt: RttEstimator::default(),
            e2e_min_rtt: None,
            resends: VecDeque::new(),
            events: VecDeque::new(),
            stats: RobinStats::default(),
        }
    }

    /// Tells a fresh engine how many datagrams were sent since the Init or Config that starts
    /// its first epoch, before it logged anything (call before the first [`Self::on_quack`]).
    ///
    /// The proxy starts counting when that message reaches it, so its first quACK may name one
    /// of those sends as its last element: a baseline this engine cannot take, but not an
    /// inconsistency either. Such a quACK is deferred while its count is at most `n` (the proxy
    /// cannot have counted more of them); a larger count with an unknown last element is
    /// rejected as before.
    pub fn set_unlogged_sends(&mut self, n: u64) {
        self.unlogged_sends = n;
    }

    /// The configuration.
    pub fn config(&self) -> &RobinSenderConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> RobinStats {
        self.stats
    }

    /// Datagrams awaiting a verdict.
    pub fn outstanding(&self) -> usize {
        self.log.len()
    }

    /// The near-segment RTT estimator (samples from quACK timing).
    pub fn near_rtt(&self) -> &RttEstimator {
        &self.near_rtt
    }

    /// Feeds the end-to-end RTT measured by the transport (for `r`).
    pub fn on_e2e_rtt(&mut self, rtt: Duration) {
        if rtt > Duration::ZERO {
            self.e2e_min_rtt = Some(self.e2e_min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
    }

    /// The receiver acknowledged `acked` (read by the lens from an authenticated ACK frame) at
    /// `now`: settles the early resends it covers. A resend acknowledged less than one minimum
    /// end-to-end RTT after it left cannot be what the receiver got: the original arrived,
    /// and the resend was not needed.
    pub fn on_e2e_ack(&mut self, now: Instant, acked: &crate::lens::AckRanges) {
        let Some(rtt) = self.e2e_min_rtt else {
            return;
        };
        let mut i = 0;
        while i < self.resends.len() {
            let (pn, at) = self.resends[i];
            if acked.contains(pn) {
                self.resends.remove(i);
                self.stats.resends_assessed += 1;
                if now.saturating_duration_since(at) < rtt {
                    self.stats.resends_unneeded += 1;
                }
            } else {
                i += 1;
            }
        }
    }

    /// PACUBIC's `r`: minimum near-segment RTT over minimum end-to-end RTT (Sidekick (NSDI '24) §4.3.2).
    pub fn rtt_ratio(&self) -> Option<f64> {
        let near = self.near_rtt.min()?;
        let e2e = self.e2e_min_rtt?;
        Some((near.as_secs_f64() / e2e.as_secs_f64()).clamp(0.0, 1.0))
    }

    fn push_event(&mut self, e: RobinEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// Drains pending events.
    pub fn poll_events(&mut self) -> impl Iterator<Item = RobinEvent> + '_ {
        self.events.drain(..)
    }

    /// Logs a datagram the transport sent at `now`. Returns its engine sequence number, or
    /// `None` if it carries no identifier.
    pub fn on_sent(&mut self, now: Instant, datagram: &[u8], pn: Option<u64>) -> Option<u64> {
        self.log_send(now, datagram, pn, 0)
    }

    /// Withdraws the last `n` logged sends (the socket refused them; the transport retries).
    pub fn withdraw_last(&mut self, n: usize) {
        for _ in 0..n {
            let Some(e) = self.log.pop_back() else { return };
            self.copy_bytes -= e.copy.as_ref().map_or(0, Vec::len);
            self.stats.sent_logged -= 1;
            self.next_seq -= 1;
        }
    }

    fn log_send(
        &mut self,
        now: Instant,
        datagram: &[u8],
        pn: Option<u64>,
        retransmissions: u8,
    ) -> Option<u64> {
        let Some(id) = sums::extract(self.config.id_source, self.config.width, datagram) else {
            self.stats.unidentifiable += 1;
            return None;
        };
        if self.log.len() >= self.config.max_log {
            if let Some(old) = self.log.pop_front() {
                self.copy_bytes -= old.copy.as_ref().map_or(0, Vec::len);
            }
            self.stats.log_evicted += 1;
            // The evicted entry may have been received: the sums no longer match the proxy's.
            self.push_event(RobinEvent::NeedReset);
        }
        let copy = (self.config.retransmit_buffer_bytes > 0
            && retransmissions < self.config.max_retransmissions
            && self.copy_bytes + datagram.len() <= self.config.retransmit_buffer_bytes)
            .then(|| datagram.to_vec());
        self.copy_bytes += copy.as_ref().map_or(0, Vec::len);
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(pn) = pn {
            self.newest_pn = Some(self.newest_pn.map_or(pn, |n| n.max(pn)));
        }
        self.log.push_back(Entry {
            seq,
            id,
            sent: now,
            pn,
            len: datagram.len(),
            copy,
            retransmissions,
            received_after: 0,
            missing_since: None,
        });
        self.stats.sent_logged += 1;
        Some(seq)
    }

    /// Starts a new epoch (after a Reset): forgets the sums; the log is kept so that the first
    /// quACK of the new epoch can synchronise on it (see [`Self::on_quack`]).
    pub fn reset(&mut self) {
        self.received = Sums::new(self.config.width, self.config.threshold);
        self.last_count = None;
        self.synced = false;
        // The log was kept: every send of the new epoch is in it.
        self.unlogged_sends = 0;
        for e in &mut self.log {
            e.received_after = 0;
            e.missing_since = None;
        }
        self.stats.resets += 1;
    }

    /// Whether the first quACK of the epoch has been seen.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The first quACK of an epoch is the baseline: the proxy started counting at a moment the
    /// sender cannot know exactly (Init or Reset in flight while base packets were), so what it
    /// counted up to its last element is adopted as received, and log entries up to that
    /// element are settled without a loss verdict (the end-to-end mechanisms cover them).
    ///
    /// An empty quACK is a baseline only while nothing is logged. With sends outstanding it
    /// cannot say which of them the proxy saw before it started counting (they will never be
    /// counted) and which are still on their way (they will be): adopting it would turn every
    /// packet received before a Reset into a "loss" once later packets are counted, resending
    /// up to a queue's worth of packets that had arrived. So the engine waits for a quACK that
    /// names a last element.
    fn sync(&mut self, q: Sums, now: Instant) -> Result<(), QuackError> {
        let Some(last) = q.last_value() else {
            if q.count() == 0 {
                self.stats.quacks += 1;
                if self.log.is_empty() {
                    self.last_count = Some(0);
                    self.received = q;
                    self.synced = true;
                    self.stats.syncs += 1;
                }
                return Ok(());
            }
            return Err(self.reject(QuackError::UnknownLast));
        };
        let Some(idx) = self.log.iter().rposition(|e| e.id == last) else {
            if u64::from(q.count()) <= self.unlogged_sends {
                self.stats.syncs_deferred += 1;
                return Ok(());
            }
            return Err(self.reject(QuackError::UnknownLast));
        };
        if let Some(e) = self.log.get(idx) {
            self.near_rtt
                .on_sample(now.saturating_duration_since(e.sent));
        }
        for e in self.log.drain(..=idx) {
            self.copy_bytes -= e.copy.as_ref().map_or(0, Vec::len);
        }
        self.last_count = Some(q.count());
        self.received = q;
        self.synced = true;
        self.stats.quacks += 1;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Sent in this epoch and not declared lost.
    fn epoch_sent(&self) -> u64 {
        u64::from(self.received.count()) + self.log.len() as u64
    }

    fn reject(&mut self, e: QuackError) -> QuackError {
        match &e {
            QuackError::Wire(_) => self.stats.wire_errors += 1,
            QuackError::Threshold { .. } => self.stats.threshold_mismatch += 1,
            QuackError::Stale { .. } => self.stats.stale += 1,
            QuackError::NeverSent { .. } => self.stats.never_sent += 1,
            QuackError::UnknownLast => self.stats.unknown_last += 1,
            QuackError::Undecodable(_) => {
                self.stats.undecodable += 1;
                self.push_event(RobinEvent::NeedReset);
            }
        }
        e
    }

    /// Processes a quACK received at `now`.
    ///
    /// Errors are counted; an undecodable quACK also queues [`RobinEvent::NeedReset`]. A
    /// rejected quACK changes no state, so it can never cause data to be forgotten.
    pub fn on_quack(&mut self, now: Instant, bytes: &[u8]) -> Result<(), QuackError> {
        let q = match Sums::from_bytes(self.config.width, bytes) {
            Ok(q) => q,
            Err(e) => return Err(self.reject(e.into())),
        };
        self.stats.quack_bytes += bytes.len() as u64;
        if q.threshold() != self.config.threshold {
            let e = QuackError::Threshold {
                got: q.threshold(),
                want: self.config.threshold,
            };
            return Err(self.reject(e));
        }
        if !self.synced {
            return self.sync(q, now);
        }
        let count = q.count();
        if let Some(previous) = self.last_count
            && count < previous
        {
            return Err(self.reject(QuackError::Stale { count, previous }));
        }
        let sent = self.epoch_sent();
        if u64::from(count) > sent {
            return Err(self.reject(QuackError::NeverSent { count, sent }));
        }
        let Some(last) = q.last_value() else {
            // Nothing received yet this epoch.
            if count == 0 {
                self.last_count = Some(0);
                self.stats.quacks += 1;
                return Ok(());
            }
            return Err(self.reject(QuackError::UnknownLast));
        };
        // The proxy's last element: the most recent send with that identifier.
        let Some(idx) = self.log.iter().rposition(|e| e.id == last) else {
            if count == self.received.count() {
                // Nothing new since the last quACK.
                self.last_count = Some(count);
                self.stats.quacks += 1;
                self.apply_time_rule(now);
                return Ok(());
            }
            return Err(self.reject(QuackError::UnknownLast));
        };
        let candidates: Vec<u64> = self.log.iter().take(idx + 1).map(|e| e.id).collect();
        let (unknown_idx, collisions) = match self.received.unknown_after(&candidates, &q) {
            Ok(d) => d,
            Err(e) => return Err(self.reject(QuackError::Undecodable(e))),
        };
        self.stats.quacks += 1;
        self.stats.indeterminate += collisions as u64;
        self.last_count = Some(count);
        // Entries whose fate is unknown: determinately missing, or in an indeterminate group.
        let mut unknown = vec![false; idx + 1];
        for i in unknown_idx {
            if let Some(u) = unknown.get_mut(i) {
                *u = true;
            }
        }
        // Near-segment RTT from the last element's send time (Sidekick (NSDI '24) §7 suggests timing the
        // proxy's receipts; the quACK interval inflates samples, the minimum filters it).
        if let Some(e) = self.log.get(idx)
            && !unknown[idx]
        {
            self.near_rtt
                .on_sample(now.saturating_duration_since(e.sent));
        }
        // Move received entries into the cumulative sums; count later receipts for the rest.
        let mut kept = VecDeque::with_capacity(self.log.len());
        let mut delivered_bytes = 0u64;
        let mut newest_sent = None;
        let mut received_seqs = Vec::new();
        for (i, e) in self.log.drain(..).enumerate() {
            if i <= idx && !unknown[i] {
                self.received.insert(e.id);
                self.copy_bytes -= e.copy.as_ref().map_or(0, Vec::len);
                delivered_bytes += e.len as u64;
                newest_sent = Some(e.sent);
                received_seqs.push(e.seq);
                self.stats.delivered += 1;
            } else {
                kept.push_back(e);
            }
        }
        self.log = kept;
        for e in &mut self.log {
            let later = received_seqs.iter().filter(|&&s| s > e.seq).count() as u32;
            if later > 0 {
                e.received_after += later;
                e.missing_since.get_or_insert(now);
            }
        }
        if let Some(newest_sent) = newest_sent {
            self.push_event(RobinEvent::Delivered {
                bytes: delivered_bytes,
                newest_sent,
            });
        }
        self.declare_losses(now);
        Ok(())
    }

    fn time_threshold(&self) -> Duration {
        let rtt = self
            .near_rtt
            .smoothed()
            .unwrap_or(self.config.quack_interval);
        // Saturating: the factor and the interval come from the application (the C API passes
        // any finite factor and any interval), and `Duration` arithmetic panics on overflow.
        Duration::try_from_secs_f64(rtt.as_secs_f64() * self.config.time_factor.max(1.0))
            .unwrap_or(Duration::MAX)
            .saturating_add(self.config.quack_interval)
    }

    /// Applies the time rule at `now` (call on timer expiry; see [`Self::poll_timeout`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.apply_time_rule(now);
    }

    fn apply_time_rule(&mut self, now: Instant) {
        self.declare_losses(now);
    }

    /// When the time rule next needs to run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let threshold = self.time_threshold();
        self.log
            .iter()
            .filter(|e| e.missing_since.is_some())
            // A threshold beyond the clock's range never expires.
            .filter_map(|e| e.sent.checked_add(threshold))
            .min()
    }

    fn declare_losses(&mut self, now: Instant) {
        let threshold = self.time_threshold();
        let reorder = self.config.reorder_threshold;
        let mut lost = Vec::new();
        self.log.retain(|e| {
            let rule = if e.received_after >= reorder {
                Some(LossRule::Reordering)
            } else if e.missing_since.is_some()
                && now.saturating_duration_since(e.sent) >= threshold
            {
                Some(LossRule::Time)
            } else {
                None
            };
            match rule {
                Some(r) => {
                    lost.push((e.clone(), r));
                    false
                }
                None => true,
            }
        });
        for (e, rule) in lost {
            self.copy_bytes -= e.copy.as_ref().map_or(0, Vec::len);
            match rule {
                LossRule::Reordering => self.stats.lost_by_reordering += 1,
                LossRule::Time => self.stats.lost_by_time += 1,
            }
            self.push_event(RobinEvent::Lost(LostDatagram {
                seq: e.seq,
                id: e.id,
                packet_number: e.pn,
                sent: e.sent,
                len: e.len,
                rule,
            }));
            let sent_after = match (e.pn, self.newest_pn) {
                (Some(pn), Some(newest)) => newest.saturating_sub(pn),
                _ => self.next_seq.saturating_sub(e.seq + 1),
            };
            let window = self.config.resend_window;
            match e.copy {
                Some(_) if window > 0 && sent_after > window => {
                    self.stats.resends_too_late += 1;
                }
                Some(copy) => {
                    self.stats.retransmitted += 1;
                    if let Some(pn) = e.pn {
                        if self.resends.len() >= MAX_RESENDS_TRACKED {
                            self.resends.pop_front();
                        }
                        self.resends.push_back((pn, now));
                    }
                    // The resend is a new send of the same identifier (multiset semantics).
                    self.log_send(now, &copy, e.pn, e.retransmissions.saturating_add(1));
                    self.push_event(RobinEvent::Retransmit(copy));
                }
                None => self.stats.retransmit_unavailable += 1,
            }
        }
    }
}

/// Fuzz body: arbitrary bytes as a quACK never panic the engine.
pub fn fuzz_quack(data: &[u8]) {
    let t0 = Instant::now();
    let mut robin = RobinSender::new(RobinSenderConfig {
        threshold: 4,
        ..RobinSenderConfig::default()
    });
    for i in 0u32..8 {
        robin.on_sent(t0, &i.to_le_bytes(), Some(u64::from(i)));
    }
    let _ = robin.on_quack(t0 + Duration::from_millis(1), data);
    robin.handle_timeout(t0 + Duration::from_secs(1));
    let _ = robin.poll_events().count();
}

#[cfg(test)]
#[path = "robin_tests.rs"]
mod tests;

//! Robin engine (Sidekick (NSDI '24) §4, §5.3): insert the identifier of every client→server packet of a
//! session into the flow's power-sum quACK and emit the quACK every N ms or every N packets.
//!
//! A session may also ask for a quACK at once when a packet arrives after a silence longer than
//! a given percentage of the flow's smoothed packet spacing (`quack_on_gap_percent`): for a
//! paced media stream that silence is the near-segment loss of the packet before, and the quACK
//! that reveals it (reorder threshold 1, Sidekick (NSDI '24) §5.2) then leaves with the very next packet.
//! Sidekick (NSDI '24) §6.2 notes that with a quACK every 2 packets the packet after a loss waits "20+2=22 ms
//! or 20×2+2=42 ms"; this closes that wait without a quACK per packet. The packet after that one
//! carries a second quACK: it covers the sender's resend (which arrives between the two), so a
//! lost resend — or a lost first quACK — costs one packet interval, not the end-to-end NACK.
//!
//! The quota (Sidekick (NSDI '24) §4.1 "Security") is enforced by the session layer in the core: an engine
//! asks for an emission, the session refuses it beyond the client's quota and the refusal is
//! counted. The engine emits only when something new was inserted since its last quACK.

use std::time::Duration;

use crate::Time;

mod rtp_gap;
pub use rtp_gap::RtpGaps;

use quack::{IdSource, PowerSumQuack, Width};

use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};

/// A power-sum quACK over identifiers of one width: 16, 32 or 64 bits (Sidekick (NSDI '24) §3:
/// `b` bits per identifier and per power sum; a quACK costs `(t + 1)·b/8` bytes plus its header,
/// and two packets of one window collide with probability about `n²/2^(b+1)`). The width is the
/// session's, negotiated in its `IdentifierSpec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WidthQuack {
    /// 2-byte identifiers.
    U16(PowerSumQuack<u16>),
    /// 4-byte identifiers (the default).
    U32(PowerSumQuack<u32>),
    /// 8-byte identifiers.
    U64(PowerSumQuack<u64>),
}

macro_rules! each_width {
    ($self:expr, $q:ident => $e:expr) => {
        match $self {
            WidthQuack::U16($q) => $e,
            WidthQuack::U32($q) => $e,
            WidthQuack::U64($q) => $e,
        }
    };
}

impl WidthQuack {
    /// An empty quACK of `width` with threshold `t` (clamped to 1..=[`quack::MAX_THRESHOLD`]).
    ///
    /// ```
    /// use quack::{IdSource, Width};
    /// use sidekick_proxy_core::robin::WidthQuack;
    /// let mut q = WidthQuack::new(Width::U16, 4);
    /// assert!(q.insert_from(IdSource::Offset(-2), &[9, 9, 1, 2]));
    /// assert_eq!((q.count(), q.width()), (1, Width::U16));
    /// // Header (4 bytes) + count/last element + 4 power sums, 2 bytes each.
    /// assert_eq!(q.to_bytes().len(), quack::wire::encoded_len::<u16>(4));
    /// ```
    pub fn new(width: Width, threshold: usize) -> Self {
        let t = threshold.clamp(1, quack::MAX_THRESHOLD);
        match width {
            Width::U16 => Self::U16(PowerSumQuack::new(t)),
            Width::U32 => Self::U32(PowerSumQuack::new(t)),
            Width::U64 => Self::U64(PowerSumQuack::new(t)),
        }
    }

    /// The identifier width.
    pub fn width(&self) -> Width {
        match self {
            Self::U16(_) => Width::U16,
            Self::U32(_) => Width::U32,
            Self::U64(_) => Width::U64,
        }
    }

    /// Identifiers inserted (modulo 2^32, as on the wire).
    pub fn count(&self) -> u32 {
        each_width!(self, q => q.count())
    }

    /// The threshold `t`.
    pub fn threshold(&self) -> usize {
        each_width!(self, q => q.threshold())
    }

    /// Forget every identifier (a new epoch).
    pub fn clear(&mut self) {
        each_width!(self, q => q.clear());
    }

    /// The wire form (quack::wire; the header names the width).
    pub fn to_bytes(&self) -> Vec<u8> {
        each_width!(self, q => q.to_bytes())
    }

    /// Insert the identifier `src` reads from `payload`; false when the payload is too short
    /// to carry one.
    #[inline]
    pub fn insert_from(&mut self, src: IdSource, payload: &[u8]) -> bool {
        each_width!(self, q => match src.extract(payload) {
            Ok(id) => {
                q.insert(id);
                true
            }
            Err(_) => false,
        })
    }

    /// Heap bytes of the power sums.
    pub fn memory_bytes(&self) -> usize {
        self.threshold() * self.width().bytes()
    }
}

/// The proxy's Robin engine: when it emits quACKs (Sidekick (NSDI '24) §4.2 "Protocol parameters"),
/// from the session's negotiated `sidekick_protocol::messages::RobinConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobinEngineConfig {
    /// Threshold t: number of power sums.
    pub threshold: usize,
    /// Emit every this many packets (0: not count-driven).
    pub every_packets: u32,
    /// Emit every this long (zero: not time-driven).
    pub every: Duration,
    /// Also emit at once when a packet follows a silence longer than this percentage of the
    /// smoothed packet spacing (0: off).
    pub quack_on_gap_percent: u32,
    /// How to compute identifiers.
    pub id: IdSource,
    /// Identifier width (2, 4 or 8 bytes, the session's `IdentifierSpec::width`).
    pub width: Width,
}

impl Default for RobinEngineConfig {
    /// Robin #2 (Sidekick (NSDI '24) Table 5): every 30 ms, t = 10, last 4 bytes of the datagram.
    fn default() -> Self {
        Self {
            threshold: 10,
            every_packets: 0,
            every: Duration::from_millis(30),
            quack_on_gap_percent: 0,
            id: IdSource::QUIC_DEFAULT,
            width: Width::U32,
        }
    }
}

/// Spacing samples needed before a silence can trigger a quACK.
const GAP_WARMUP_SAMPLES: u32 = 8;

/// The smoothed spacing between a flow's client packets, and whether the latest was late.
#[derive(Debug, Clone, Copy, Default)]
struct SpacingTracker {
    last_arrival: Option<Time>,
    smoothed: Duration,
    samples: u32,
}

impl SpacingTracker {
    /// Records an arrival; true when it follows a silence longer than `percent` % of the
    /// smoothed spacing so far.
    fn on_arrival(&mut self, now: Time, percent: u32) -> bool {
        let Some(last) = self.last_arrival.replace(now) else {
            return false;
        };
        let gap = now.saturating_duration_since(last);
        let late = self.samples >= GAP_WARMUP_SAMPLES
            && gap.as_nanos() * 100 > self.smoothed.as_nanos() * u128::from(percent);
        // The plain mean of the warm-up samples (an EWMA seeded with one jittered sample would
        // stay biased for a while), then an EWMA with gain 1/8 (as RFC 6298's SRTT). A sample
        // is capped at 4x the mean so one idle period does not blind the tracker for dozens of
        // packets.
        let n = self.samples;
        self.smoothed = if n == 0 {
            gap
        } else if n < GAP_WARMUP_SAMPLES {
            (self.smoothed * n + gap.min(self.smoothed * 4)) / (n + 1)
        } else {
            (self.smoothed * 7 + gap.min(self.smoothed * 4)) / 8
        };
        self.samples = n.saturating_add(1);
        late
    }
}

/// Counters of one Robin engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RobinCounters {
    /// Identifiers inserted.
    pub inserted: u64,
    /// Packets whose identifier could not be read (payload shorter than the identifier).
    pub id_errors: u64,
    /// quACKs requested.
    pub quacks: u64,
    /// Resets applied.
    pub resets: u64,
    /// Silences that triggered a quACK (`quack_on_gap_percent`); each also repeats it with the
    /// next packet.
    pub gap_quacks: u64,
    /// Of those, the ones only an RTP sequence gap revealed (`robin::rtp_gap`): the silence
    /// detector did not see them.
    pub rtp_gaps: u64,
}

impl RobinCounters {
    /// Add another engine's (or core's) counters.
    pub fn add(&mut self, o: &RobinCounters) {
        self.inserted += o.inserted;
        self.id_errors += o.id_errors;
        self.quacks += o.quacks;
        self.resets += o.resets;
        self.gap_quacks += o.gap_quacks;
        self.rtp_gaps += o.rtp_gaps;
    }
}

/// The per-flow Robin state.
///
/// ```
/// use std::time::Duration;
/// use sidekick_proxy_core::Time;
/// use sidekick_proxy_core::robin::{RobinEngineConfig, RobinEngine};
/// let cfg = RobinEngineConfig { every_packets: 2, every: Duration::ZERO, ..RobinEngineConfig::default() };
/// let e = RobinEngine::new(cfg, Time::ZERO);
/// assert_eq!(e.quack().count(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct RobinEngine {
    cfg: RobinEngineConfig,
    quack: WidthQuack,
    since_emit: u32,
    /// The next time-driven quACK; `None` while no packet arrived since the last slot (an idle
    /// flow has no timer, so idle sessions cost the core's timer index nothing).
    next_emit: Option<Time>,
    /// The last slot of the time-driven cadence: a packet after a silence re-arms the timer at
    /// the next slot of the same grid.
    last_slot: Time,
    spacing: SpacingTracker,
    /// Gap mode: the cleartext RTP sequence numbers of a media flow (`rtp_gap`).
    rtp: RtpGaps,
    /// Emit with the next packet: the first of an epoch in gap mode, so the sender syncs on it
    /// at once rather than at the first loss (a loss before the sync goes unseen), and the one
    /// after a silence's quACK (the second quACK of a silence).
    quack_next: bool,
    /// Counters.
    pub counters: RobinCounters,
}

impl RobinEngine {
    /// A fresh engine; the first time-driven quACK is due one interval after `now`.
    pub fn new(cfg: RobinEngineConfig, now: Time) -> Self {
        Self {
            cfg,
            quack: WidthQuack::new(cfg.width, cfg.threshold),
            since_emit: 0,
            next_emit: (!cfg.every.is_zero()).then(|| now + cfg.every),
            last_slot: now,
            spacing: SpacingTracker::default(),
            rtp: RtpGaps::default(),
            quack_next: cfg.quack_on_gap_percent > 0,
            counters: RobinCounters::default(),
        }
    }

    /// The current quACK.
    pub fn quack(&self) -> &WidthQuack {
        &self.quack
    }

    /// The configuration in force.
    pub fn config(&self) -> &RobinEngineConfig {
        &self.cfg
    }

    /// Apply a new configuration (Config message): the quACK restarts (new epoch).
    pub fn reconfigure(&mut self, cfg: RobinEngineConfig, now: Time) {
        *self = Self {
            counters: self.counters,
            ..Self::new(cfg, now)
        };
    }

    /// Reinitialise the quACK (Reset, Sidekick (NSDI '24) §4.2 "Resets").
    pub fn reset(&mut self, now: Time) {
        self.quack.clear();
        self.since_emit = 0;
        self.next_emit = (!self.cfg.every.is_zero()).then(|| now + self.cfg.every);
        self.last_slot = now;
        self.quack_next = self.cfg.quack_on_gap_percent > 0;
        self.counters.resets += 1;
    }

    /// Insert one identifier (the hot path).
    #[inline]
    pub fn insert_payload(&mut self, payload: &[u8]) -> bool {
        if self.quack.insert_from(self.cfg.id, payload) {
            self.since_emit += 1;
            self.counters.inserted += 1;
            true
        } else {
            self.counters.id_errors += 1;
            false
        }
    }

    fn emit(&mut self, out: &mut Vec<Action>) {
        self.since_emit = 0;
        self.counters.quacks += 1;
        out.push(Action::Message(Outgoing::Quack(self.quack.to_bytes())));
    }
}

impl FlowEngine for RobinEngine {
    fn on_packet(&mut self, now: Time, dir: Direction, pkt: &Packet<'_>, out: &mut Vec<Action>) {
        if dir != Direction::FromClient {
            return;
        }
        let gap_mode = self.cfg.quack_on_gap_percent > 0;
        let silent = gap_mode && self.spacing.on_arrival(now, self.cfg.quack_on_gap_percent);
        // A jump in an RTP stream's sequence number is the same news as a silence, exactly.
        let rtp_gap = gap_mode && self.rtp.on_datagram(pkt.payload);
        let late = silent || rtp_gap;
        if !self.insert_payload(pkt.payload) {
            return;
        }
        if self.next_emit.is_none() && !self.cfg.every.is_zero() {
            // The first packet after a silence: the cadence resumes at its next slot.
            let every = self.cfg.every.as_nanos().max(1);
            let behind = now.saturating_duration_since(self.last_slot).as_nanos();
            let slots = u32::try_from(behind / every + 1).unwrap_or(u32::MAX);
            self.next_emit = Some(self.last_slot + self.cfg.every.saturating_mul(slots));
        }
        let counted = self.cfg.every_packets > 0 && self.since_emit >= self.cfg.every_packets;
        if counted || late || self.quack_next {
            if late && !counted {
                self.counters.gap_quacks += 1;
                if !silent {
                    self.counters.rtp_gaps += 1;
                }
            }
            // A silence's quACK is repeated with the next packet.
            self.quack_next = late;
            self.emit(out);
            if !self.cfg.every.is_zero() {
                self.next_emit = Some(now + self.cfg.every);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time, out: &mut Vec<Action>) {
        let Some(due) = self.next_emit else { return };
        if now < due {
            return;
        }
        if self.since_emit == 0 {
            // Nothing new: no quACK, and no timer until a packet comes.
            self.last_slot = due;
            self.next_emit = None;
            return;
        }
        self.emit(out);
        // Keep the cadence; skip missed slots rather than bursting.
        let slot = if due + self.cfg.every <= now {
            now
        } else {
            due
        };
        self.last_slot = slot;
        self.next_emit = Some(slot + self.cfg.every);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.next_emit
    }

    fn memory_bytes(&self) -> usize {
        self.quack.memory_bytes() + std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{LinkType, build_udp_ipv4, parse_frame};

    fn pkt_with_id(id: u32) -> Vec<u8> {
        let mut payload = vec![0x40u8; 20];
        payload.extend_from_slice(&id.to_le_bytes());
        build_udp_ipv4(
            "10.0.0.2:5000".parse().unwrap(),
            "10.9.9.9:443".parse().unwrap(),
            &payload,
            64,
        )
    }

    fn feed(e: &mut RobinEngine, now: Time, id: u32, out: &mut Vec<Action>) {
        let mut payload = vec![0x40u8; 20];
        payload.extend_from_slice(&id.to_le_bytes());
        feed_payload(e, now, &payload, out);
    }

    /// A client → server datagram carrying `payload`, through the engine.
    fn feed_payload(e: &mut RobinEngine, now: Time, payload: &[u8], out: &mut Vec<Action>) {
        let f = build_udp_ipv4(
            "10.0.0.2:5000".parse().unwrap(),
            "10.9.9.9:443".parse().unwrap(),
            payload,
            64,
        );
        let u = parse_frame(&f, LinkType::RawIp).unwrap();
        let p = Packet {
            frame: &f,
            udp: &u,
            payload: u.payload(&f),
            whole_frame: true,
        };
        e.on_packet(now, Direction::FromClient, &p, out);
    }

    #[test]
    fn every_two_packets_cadence() {
        let now = Time::ZERO;
        let cfg = RobinEngineConfig {
            threshold: 8,
            every_packets: 2,
            every: Duration::ZERO,
            quack_on_gap_percent: 0,
            id: IdSource::QUIC_DEFAULT,
            width: Width::U32,
        };
        let mut e = RobinEngine::new(cfg, now);
        let mut out = Vec::new();
        for i in 0..10 {
            feed(&mut e, now, 1000 + i, &mut out);
        }
        assert_eq!(out.len(), 5);
        let Action::Message(Outgoing::Quack(bytes)) = &out[4] else {
            panic!("not a quack")
        };
        let q = PowerSumQuack::<u32>::from_bytes(bytes).unwrap();
        assert_eq!(q.count(), 10);
        assert_eq!(q.last_value(), Some(1009));
        // Sender-side reconstruction matches exactly.
        let mut mine = PowerSumQuack::<u32>::new(8);
        for i in 0..10 {
            mine.insert(1000 + i);
        }
        assert_eq!(q, mine);
        assert_eq!(e.poll_timeout(), None);
    }

    #[test]
    fn time_driven_cadence_and_silence_when_idle() {
        let t0 = Time::ZERO;
        let mut e = RobinEngine::new(RobinEngineConfig::default(), t0);
        let mut out = Vec::new();
        assert_eq!(e.poll_timeout(), Some(t0 + Duration::from_millis(30)));
        feed(&mut e, t0, 1, &mut out);
        assert!(out.is_empty());
        e.handle_timeout(t0 + Duration::from_millis(29), &mut out);
        assert!(out.is_empty());
        e.handle_timeout(t0 + Duration::from_millis(30), &mut out);
        assert_eq!(out.len(), 1);
        // Nothing new: no quACK at the next tick, and no timer while the flow is idle.
        e.handle_timeout(t0 + Duration::from_millis(60), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(e.poll_timeout(), None);
        // A packet re-arms the timer at the next slot of the same 30 ms grid.
        feed(&mut e, t0 + Duration::from_millis(130), 2, &mut out);
        assert_eq!(e.poll_timeout(), Some(t0 + Duration::from_millis(150)));
        e.handle_timeout(t0 + Duration::from_millis(150), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(e.poll_timeout(), Some(t0 + Duration::from_millis(180)));
    }

    #[test]
    fn reset_and_server_packets_ignored() {
        let t0 = Time::ZERO;
        let mut e = RobinEngine::new(RobinEngineConfig::default(), t0);
        let mut out = Vec::new();
        feed(&mut e, t0, 5, &mut out);
        let f = pkt_with_id(6);
        let u = parse_frame(&f, LinkType::RawIp).unwrap();
        let p = Packet {
            frame: &f,
            udp: &u,
            payload: u.payload(&f),
            whole_frame: true,
        };
        e.on_packet(t0, Direction::ToClient, &p, &mut out);
        assert_eq!(e.quack().count(), 1);
        e.reset(t0);
        assert_eq!(e.quack().count(), 0);
        assert_eq!(e.counters.resets, 1);
        // A short payload is counted, not inserted.
        feed_payload(&mut e, t0, &[1, 2], &mut out);
        assert_eq!(e.counters.id_errors, 1);
        assert_eq!(e.quack().count(), 0);
    }

    fn gap_config() -> RobinEngineConfig {
        RobinEngineConfig {
            threshold: 8,
            every_packets: 32,
            every: Duration::ZERO,
            quack_on_gap_percent: 150,
            id: IdSource::QUIC_DEFAULT,
            width: Width::U32,
        }
    }

    /// Feeds a 20 ms paced stream; `skip` ids are "lost" before the proxy; `jitter(i)` shifts
    /// each arrival. Returns (id, at ms) of every packet that triggered a quACK.
    fn paced(
        e: &mut RobinEngine,
        t0: Time,
        ids: std::ops::Range<u32>,
        skip: &[u32],
        jitter: impl Fn(u32) -> i64,
    ) -> Vec<u32> {
        let mut fired = Vec::new();
        for i in ids {
            if skip.contains(&i) {
                continue;
            }
            let at_ms = (i64::from(i) * 20 + jitter(i)).max(0) as u64;
            let mut out = Vec::new();
            feed(e, t0 + Duration::from_millis(at_ms), i, &mut out);
            if !out.is_empty() {
                fired.push(i);
            }
        }
        fired
    }

    #[test]
    fn the_packet_after_a_silence_carries_a_quack_at_once() {
        let t0 = Time::ZERO;
        let mut e = RobinEngine::new(gap_config(), t0);
        // 40 paced packets, ids 10 and 11 lost (Sidekick (NSDI '24) §6.2: the packet after a loss), 3 ms
        // of sender jitter on every packet.
        let jitter = |i: u32| if i.is_multiple_of(2) { 3 } else { -3 };
        let fired = paced(&mut e, t0, 0..40, &[10, 20, 21], jitter);
        // The first packet (the sender syncs on it), then the first two packets after each
        // silence (the count of 32 restarts with each quACK).
        assert_eq!(fired, vec![0, 11, 12, 22, 23]);
        assert_eq!(e.counters.gap_quacks, 2);
        let fired = paced(&mut e, t0, 40..80, &[], jitter);
        assert_eq!(
            fired,
            vec![55],
            "the 32nd packet after the last quACK (24..=55)"
        );
        assert_eq!(e.counters.gap_quacks, 2);
        // The quACK sent with packet 11 covers it: the sender sees 10 missing before 11.
        let mut out = Vec::new();
        let mut e = RobinEngine::new(gap_config(), t0);
        for i in 0..10 {
            feed(
                &mut e,
                t0 + Duration::from_millis(u64::from(i) * 20),
                i,
                &mut out,
            );
        }
        feed(&mut e, t0 + Duration::from_millis(220), 11, &mut out);
        let Some(Action::Message(Outgoing::Quack(bytes))) = out.last() else {
            panic!("no quack")
        };
        let q = PowerSumQuack::<u32>::from_bytes(bytes).unwrap();
        assert_eq!((q.count(), q.last_value()), (11, Some(11)));
    }

    #[test]
    fn jitter_and_warmup_do_not_trigger_and_an_idle_period_costs_two_quacks() {
        let t0 = Time::ZERO;
        let mut e = RobinEngine::new(gap_config(), t0);
        // A loss during the warm-up (id 2) is not acted on; ±4 ms jitter (spacings of 12 and
        // 28 ms, below 150 % of 20) never triggers.
        let jitter = |i: u32| if i.is_multiple_of(2) { 4 } else { -4 };
        assert_eq!(paced(&mut e, t0, 0..30, &[2], jitter), vec![0]);
        // Five seconds of silence: the two packets that resume the stream carry quACKs, and the
        // capped sample lets a loss eight packets later be seen again.
        let resume = t0 + Duration::from_millis(29 * 20 + 5_000);
        let fired = paced(&mut e, resume, 0..20, &[9], |_| 0);
        assert_eq!(fired, vec![0, 1, 10, 11]);
        // A reset (new epoch) syncs again with its first packet.
        e.reset(resume);
        assert_eq!(paced(&mut e, resume, 20..22, &[], |_| 0), vec![20]);
        // Off by default: the same stream with a loss triggers nothing early.
        let mut e = RobinEngine::new(
            RobinEngineConfig {
                quack_on_gap_percent: 0,
                ..gap_config()
            },
            t0,
        );
        assert_eq!(paced(&mut e, t0, 0..30, &[10], |_| 0), Vec::<u32>::new());
        assert_eq!(e.counters.gap_quacks, 0);
    }

    /// The engine at each identifier width (Sidekick (NSDI '24) §3): it reads the datagram's
    /// last `b` bytes, its quACK's header names the width, its power sums are that wide, and the
    /// sender's quACK of the same width minus it names the missing datagram.
    #[test]
    fn quacks_at_every_identifier_width() {
        fn at<T: quack::Identifier>(width: Width, id_of: fn(u64) -> T, wide: fn(T) -> u64) {
            let now = Time::ZERO;
            let b = width.bytes();
            let cfg = RobinEngineConfig {
                threshold: 4,
                every_packets: 6,
                every: Duration::ZERO,
                id: IdSource::Offset(-(b as isize)),
                width,
                ..RobinEngineConfig::default()
            };
            let mut e = RobinEngine::new(cfg, now);
            let mut sender = PowerSumQuack::<T>::new(4);
            let mut ids = Vec::new();
            let mut out = Vec::new();
            for i in 0..7u64 {
                let mut payload = vec![0x40u8; 20];
                payload.extend_from_slice(&wide(id_of(i)).to_le_bytes()[..b]);
                sender.insert(id_of(i));
                ids.push(id_of(i));
                if i == 3 {
                    continue; // lost before the proxy
                }
                feed_payload(&mut e, now, &payload, &mut out);
            }
            let [Action::Message(Outgoing::Quack(bytes))] = out.as_slice() else {
                panic!("one quACK after 6 packets: {out:?}");
            };
            assert_eq!(quack::peek_width(bytes).unwrap(), width);
            assert_eq!(bytes.len(), quack::wire::encoded_len::<T>(4));
            assert_eq!(e.quack().width(), width);
            assert_eq!(e.memory_bytes(), 4 * b + std::mem::size_of::<RobinEngine>());
            sender -= &PowerSumQuack::<T>::from_bytes(bytes).unwrap();
            let lost: Vec<usize> = sender
                .decode_with_log(&ids)
                .unwrap()
                .missing_indices()
                .collect();
            assert_eq!(lost, vec![3]);
        }
        at::<u16>(Width::U16, |i| 0x1234 + i as u16 * 0x0101, u64::from);
        at::<u32>(
            Width::U32,
            |i| 0x1234_5678 + i as u32 * 0x0101_0101,
            u64::from,
        );
        at::<u64>(
            Width::U64,
            |i| 0x1234_5678_9abc_def0 + i * 0x0101_0101_0101_0101,
            |v| v,
        );
        // A payload shorter than the identifier is counted, not inserted.
        let mut q = WidthQuack::new(Width::U64, 4);
        assert!(!q.insert_from(IdSource::Offset(-8), &[1, 2, 3]));
        assert_eq!(q.count(), 0);
    }

    /// A video keyframe: its packets come 4 ms apart within a stream paced at 20 ms. A loss among
    /// them leaves a silence of 8 ms, well below 150 % of the smoothed spacing, so only the RTP
    /// sequence number (cleartext in SRTP) shows it; the packet after the loss carries the
    /// quACK, and the next one its repeat.
    #[test]
    fn an_rtp_sequence_gap_in_a_burst_carries_a_quack_at_once() {
        let t0 = Time::ZERO;
        let mut e = RobinEngine::new(gap_config(), t0);
        let srtp = |seq: u16| {
            let mut p = vec![0x80, 96];
            p.extend_from_slice(&seq.to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
            p.extend_from_slice(&[0x5a; 20]);
            p.extend_from_slice(&u32::from(seq).to_le_bytes());
            p
        };
        let mut fired = Vec::new();
        let mut at = 0u64;
        for seq in 0..40u16 {
            // Delta frames 20 ms apart, then a keyframe burst from 20 on, 4 ms apart.
            at += if seq > 20 { 4 } else { 20 };
            if seq == 25 {
                continue;
            }
            let mut out = Vec::new();
            feed_payload(&mut e, t0 + Duration::from_millis(at), &srtp(seq), &mut out);
            if !out.is_empty() {
                fired.push(seq);
            }
        }
        assert_eq!(fired, vec![0, 26, 27]);
        assert_eq!((e.counters.gap_quacks, e.counters.rtp_gaps), (1, 1));
        // The same stream as QUIC datagrams (no RTP header): the loss goes unseen until the
        // count.
        let mut e = RobinEngine::new(gap_config(), t0);
        let mut at = 0u64;
        for id in 0..40u32 {
            at += if id > 20 { 4 } else { 20 };
            if id == 25 {
                continue;
            }
            let mut out = Vec::new();
            feed(&mut e, t0 + Duration::from_millis(at), id, &mut out);
        }
        assert_eq!(e.counters.gap_quacks, 0);
    }
}

//! Reply-size gap signal: per-packet loss inference from the length of the receiver's
//! acknowledgements (our extension to PEMI §4.3; measured in docs/results.md).
//!
//! QUIC encrypts ACK frames but not their length, and ACK-only packets are not padded. A
//! receiver that sees a packet-number gap reports it as one more ACK range — a Gap and an ACK
//! Range Length varint, 2 bytes while both are small (RFC 9000 §19.3.1) — in every ACK until the
//! gap closes, and it acknowledges at once when a packet arrives out of order (RFC 9000
//! §13.2.1). So a pure-ACK reply that answers a protected packet promptly and is 2–4 bytes
//! longer than the previous prompt reply says: the packet just before the one it answers is
//! missing.
//!
//! Why: the timing-only matching (§4.2–4.3) infers a loss from a missing reply, but with delayed
//! ACKs (eliciting threshold 2) a loss in an odd position leaves the reply count and timing
//! unchanged — the next packet's immediate ACK takes the place of the lost one's — so about half
//! of the losses are invisible to it; and it decides only when a flowlet ends, after the sender's
//! own packet-threshold detection (RFC 9002 §6.1.1) has usually fired. The size signal arrives
//! one proxy–receiver RTT after the loss.
//!
//! Optionally (bridge mode) the replies that reveal the gap are *held* until the retransmission
//! has closed it: the reply that shows the gap closed (back to the pre-gap length) is forwarded
//! at once and overtakes them, so the sender never acknowledges around a hole and does not cut
//! its window for a loss the proxy repaired. This is §4.5.2's reply reordering used to hide a
//! repaired loss; fairness stays with PEMI's own window (§4.5), which stops retransmissions — and
//! with them the holds — when the flow exceeds its target rate.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::Time;

/// How far a prompt reply's lag may stray from the learned one (the receiver's processing
/// jitter; a reply flushed by the ACK timer is milliseconds late).
pub const PROMPT_TOLERANCE: Duration = Duration::from_micros(250);

/// ACK-sized replies in a row that fit no prompt lag after which the lag is relearned.
pub const RELEARN_AFTER: u32 = 32;

/// Prompt replies after which the signal counts as measuring the flow.
pub const MEASURING_AFTER: u64 = 8;

/// Settings of the gap signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapConfig {
    /// Longest reply treated as ACK-only; longer ones carry other frames (data, flow control)
    /// and neither signal nor move the baseline.
    pub max_ack_len: usize,
    /// Smallest growth over the previous prompt reply that signals a new gap (one ACK range).
    pub min_growth: usize,
    /// Largest such growth (a range with 2-byte varints; more is another frame).
    pub max_growth: usize,
    /// Most recent protected packets kept (a cap on state).
    pub ring_packets: usize,
    /// Most bytes of recent frames kept (a cap on state).
    pub ring_bytes: usize,
}

impl Default for GapConfig {
    fn default() -> Self {
        Self {
            max_ack_len: 96,
            min_growth: 2,
            max_growth: 4,
            ring_packets: 256,
            ring_bytes: 256 * 1024,
        }
    }
}

/// A recent protected packet.
#[derive(Debug)]
struct Recent {
    seq: u64,
    at: Time,
    /// Shared with the flowlet that records the same packet (one copy per captured frame).
    frame: Option<Arc<[u8]>>,
    /// A prompt reply answered it.
    replied: bool,
    /// Retransmitted by PEMI (by either inference).
    retransmitted: bool,
    /// PEMI's own copy, not an original.
    is_retx: bool,
}

/// A packet the gap signal says is lost, with its frame to retransmit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapLoss {
    /// The packet's sequence number (the engine's count of protected packets).
    pub seq: u64,
    /// The captured frame.
    pub frame: Arc<[u8]>,
}

/// What one reply told the tracker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapReply {
    /// The reply signals a new gap; the packet before the one it answers, when retransmittable.
    pub lost: Option<GapLoss>,
    /// The reply signals a new gap but no packet could be named (answered, already repaired or
    /// not buffered).
    pub unnamed: bool,
    /// Hold this reply until then (a gap is open and holding is enabled).
    pub hold_until: Option<Time>,
}

/// A gap being repaired (its revealing replies are held when holding is on).
#[derive(Debug, Clone, Copy)]
struct Repair {
    until: Time,
    /// Reply length before the gap opened: a reply this short again means it closed.
    base: usize,
}

/// Recent protected packets, the reply-length baseline and the hold state of one flow.
///
/// ```
/// use std::time::Duration;
/// use sidekick_proxy_core::Time;
/// use sidekick_proxy_core::pemi::gap::{GapConfig, GapTracker};
/// let (t0, ms) = (Time::ZERO, Duration::from_millis);
/// let floor = ms(2); // the ICMP-measured RTT to the receiver
/// let mut g = GapTracker::new(GapConfig::default(), true);
/// for seq in 0..6 {
///     g.on_sent(t0 + ms(seq), seq, Some(vec![0u8; 1200].into()), false, floor);
/// }
/// // The receiver answers packet 1 two milliseconds later with a 34-byte ACK...
/// assert!(g.on_reply(t0 + ms(3), 34, floor).lost.is_none());
/// // ...packet 2 is lost, and its answer to packet 3 carries one more ACK range.
/// let r = g.on_reply(t0 + ms(5), 36, floor);
/// assert_eq!(r.lost.map(|l| l.seq), Some(2));
/// assert!(r.hold_until.is_some()); // held until the repair's ACK has gone by
/// ```
#[derive(Debug)]
pub struct GapTracker {
    cfg: GapConfig,
    ring: VecDeque<Recent>,
    bytes: usize,
    /// Lengths of the last two prompt replies (latest first).
    base_len: Option<usize>,
    prev_len: Option<usize>,
    /// Learned proxy → receiver → proxy lag of prompt replies (ACK delay ≈ 0).
    lag: Option<Duration>,
    repair: Option<Repair>,
    holding: bool,
    /// Packets are kept at least this long (the engine sets it from the end-to-end RTT: a
    /// flight's last packet is only found missing when the next flight arrives).
    retention: Duration,
    /// Prompt replies seen since the lag was (re)learned.
    prompt_replies: u64,
    /// The floor the lag was learned against.
    lag_floor: Duration,
    /// ACK-sized replies in a row that were not prompt.
    unprompt_run: u32,
}

impl GapTracker {
    /// An empty tracker; `holding` enables holding of gap-revealing replies (bridge mode only).
    pub fn new(cfg: GapConfig, holding: bool) -> Self {
        Self {
            cfg,
            ring: VecDeque::new(),
            bytes: 0,
            base_len: None,
            prev_len: None,
            lag: None,
            repair: None,
            holding,
            retention: Duration::ZERO,
            prompt_replies: 0,
            lag_floor: Duration::ZERO,
            unprompt_run: 0,
        }
    }

    /// Record a protected packet numbered `seq` (increasing), forwarded at `now`; `frame` is
    /// kept for retransmission while the packet is recent. `rtt` is the engine's RTT to the
    /// receiver (used until prompt replies have taught the tracker the real lag).
    pub fn on_sent(
        &mut self,
        now: Time,
        seq: u64,
        frame: Option<Arc<[u8]>>,
        is_retx: bool,
        rtt: Duration,
    ) {
        self.prune(now, rtt);
        self.bytes += frame.as_ref().map_or(0, |f| f.len());
        self.ring.push_back(Recent {
            seq,
            at: now,
            frame,
            replied: false,
            retransmitted: false,
            is_retx,
        });
        while self.ring.len() > self.cfg.ring_packets || self.bytes > self.cfg.ring_bytes {
            self.pop_front();
        }
    }

    /// PEMI retransmitted packet `seq` (by the flowlet inference): the gap signal must not
    /// retransmit it again (§4.3.2, once per packet).
    pub fn mark_retransmitted(&mut self, seq: u64) {
        if let Some(r) = self.find_mut(seq) {
            r.retransmitted = true;
            if let Some(f) = r.frame.take() {
                self.bytes -= f.len();
            }
        }
    }

    /// Keep packets at least `d` (beyond the 4 lags + 10 ms a prompt reply needs).
    pub fn set_retention(&mut self, d: Duration) {
        self.retention = d;
    }

    /// Stop holding replies (the named packet could not be retransmitted).
    pub fn cancel_hold(&mut self) {
        self.repair = None;
    }

    /// The signal is measuring this flow: enough prompt replies ([`MEASURING_AFTER`]) have
    /// been seen for a growth in their length to mean something.
    pub fn measuring(&self) -> bool {
        self.prompt_replies >= MEASURING_AFTER
    }

    /// Learned reply lag, once prompt replies have been seen.
    pub fn lag(&self) -> Option<Duration> {
        self.lag
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bytes + self.ring.capacity() * std::mem::size_of::<Recent>()
    }

    /// A reply of `len` bytes (UDP payload) arrived at `now`. `floor` is a lower bound of the
    /// proxy → receiver → proxy path RTT (the calibrated minimum, ICMP echo or spin bit, §4.4.3):
    /// the reply answers at best the last packet forwarded before `now − floor`. With evenly
    /// spaced packets any lag `L + k · spacing` fits the reply times equally well; the floor is
    /// what picks the right `k`.
    pub fn on_reply(&mut self, now: Time, len: usize, floor: Duration) -> GapReply {
        // Relearn the lag when the floor it was learned against has moved (a first or a new
        // minimum calibration sample: the old alignment may be off by a packet), or when it no
        // longer fits any reply (the path's delay changed).
        if self.lag.is_some()
            && (floor.abs_diff(self.lag_floor) > PROMPT_TOLERANCE
                || self.unprompt_run >= RELEARN_AFTER)
        {
            self.lag = None;
            self.prompt_replies = 0;
            self.unprompt_run = 0;
        }
        let lag = self.lag.unwrap_or(floor);
        self.prune(now, lag.max(floor));
        let mut out = GapReply::default();
        if let Some(h) = self.repair
            && (now >= h.until || len <= h.base)
        {
            // Closed (or given up on): this reply goes at once, overtaking the held ones.
            self.repair = None;
        }
        out.hold_until = self.repair.filter(|_| self.holding).map(|h| h.until);
        if len > self.cfg.max_ack_len {
            return out;
        }
        let Some(ix) = self.prompt_trigger(now, floor) else {
            // Not answering a recent packet promptly: flushed by the receiver's ACK timer, whose
            // longer ACK Delay field may take a byte more; it sets no baseline.
            self.unprompt_run = self.unprompt_run.saturating_add(1);
            return out;
        };
        self.unprompt_run = 0;
        let sample = now.saturating_duration_since(self.ring[ix].at);
        if self.lag.is_none() {
            self.lag_floor = floor;
        }
        self.lag = Some(self.lag.map_or(sample, |l| (l * 7 + sample) / 8));
        self.ring[ix].replied = true;
        self.prompt_replies += 1;
        let (latest, before) = (self.base_len.replace(len), self.prev_len);
        self.prev_len = latest;
        let Some(mut base) = latest else {
            return out;
        };
        // A one-byte bump of the previous reply is its ACK Delay varint taking two bytes (a
        // receiver that was slow to answer), not a range: measure against the one before it.
        if let Some(b) = before
            && base == b + 1
        {
            base = b;
        }
        if len < base + self.cfg.min_growth || len > base + self.cfg.max_growth {
            return out;
        }
        // A new gap: the packet before the answered one (originals only) is missing.
        let cand = (0..ix).rev().find(|&k| !self.ring[k].is_retx);
        let named = cand.and_then(|k| {
            let r = &mut self.ring[k];
            if r.replied || r.retransmitted {
                return None;
            }
            let frame = r.frame.take()?;
            r.retransmitted = true;
            Some((r.seq, frame))
        });
        match named {
            Some((seq, frame)) => {
                self.bytes -= frame.len();
                out.lost = Some(GapLoss { seq, frame });
                // The repair reaches the receiver after half a lag and its ACK comes back after
                // a whole one; a little more covers the receiver's processing.
                let until = now + lag * 3 / 2 + Duration::from_millis(1);
                let base = self.repair.map_or(base, |h| h.base.min(base));
                self.repair = Some(Repair { until, base });
                if self.holding {
                    out.hold_until = Some(until);
                }
            }
            None => out.unnamed = true,
        }
        out
    }

    /// The recent packet a reply at `now` answers promptly: the last one forwarded before
    /// `now − floor`, when the reply's lag behind it is within [`PROMPT_TOLERANCE`] of the lag
    /// learned from earlier prompt replies (before any, within a quarter of the floor).
    fn prompt_trigger(&self, now: Time, floor: Duration) -> Option<usize> {
        let t = now.checked_sub(floor)?;
        let ix = self.ring.partition_point(|r| r.at <= t).checked_sub(1)?;
        let sample = now.saturating_duration_since(self.ring[ix].at);
        let prompt = match self.lag {
            Some(lag) => sample.abs_diff(lag) <= PROMPT_TOLERANCE,
            None => sample.saturating_sub(floor) <= floor / 4,
        };
        prompt.then_some(ix)
    }

    /// Forget packets too old for any prompt reply to name: older than 4 lags + 10 ms, or the
    /// retention the engine set.
    fn prune(&mut self, now: Time, lag: Duration) {
        let keep = (lag * 4 + Duration::from_millis(10)).max(self.retention);
        while self
            .ring
            .front()
            .is_some_and(|r| now.saturating_duration_since(r.at) > keep)
        {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some(r) = self.ring.pop_front() {
            self.bytes -= r.frame.as_ref().map_or(0, |f| f.len());
        }
    }

    fn find_mut(&mut self, seq: u64) -> Option<&mut Recent> {
        let i = self.ring.binary_search_by_key(&seq, |r| r.seq).ok()?;
        self.ring.get_mut(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn frame(len: usize) -> Arc<[u8]> {
        vec![1u8; len].into()
    }

    /// A tracker that saw `n` packets 1 ms apart, from `t0` (floor 2 ms).
    fn sent(n: u64, holding: bool) -> (GapTracker, Time) {
        let t0 = Time::ZERO;
        let mut g = GapTracker::new(GapConfig::default(), holding);
        for s in 0..n {
            g.on_sent(t0 + us(s * 1_000), s, Some(frame(100)), false, us(2_000));
        }
        (g, t0)
    }

    /// A receiver 1.15 ms beyond the proxy ACKing every second packet and at once on a gap
    /// (34 bytes + 2 per missing packet); packets leave the proxy 1.2 ms apart, `lost` are
    /// dropped after it, and the packets the tracker names are retransmitted at once and arrive.
    /// Returns the packets named and how many replies were held.
    fn run(lost: &[u64], n: u64, holding: bool) -> (Vec<u64>, usize) {
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        enum Ev {
            Reply(usize),
            Arrive(u64),
            Send(u64),
        }
        let t0 = Time::ZERO;
        let half = us(1_150);
        let floor = half * 2;
        let mut events: std::collections::BTreeSet<(Time, Ev)> =
            (0..n).map(|s| (t0 + us(s * 1_200), Ev::Send(s))).collect();
        let mut g = GapTracker::new(GapConfig::default(), holding);
        let mut received = std::collections::BTreeSet::new();
        let mut since_ack = 0;
        let (mut named, mut held) = (Vec::new(), 0);
        while let Some((t, ev)) = events.pop_first() {
            match ev {
                Ev::Send(s) => {
                    g.on_sent(t, s, Some(frame(1200)), false, floor);
                    if !lost.contains(&s) {
                        events.insert((t + half, Ev::Arrive(s)));
                    }
                }
                Ev::Arrive(s) => {
                    let in_order = received.last().is_none_or(|&l: &u64| s == l + 1);
                    received.insert(s);
                    since_ack += 1;
                    if since_ack >= 2 || !in_order {
                        since_ack = 0;
                        let largest = received.last().copied().unwrap_or(0);
                        let holes = (0..largest).filter(|x| !received.contains(x)).count();
                        events.insert((t + half, Ev::Reply(34 + 2 * holes)));
                    }
                }
                Ev::Reply(len) => {
                    let r = g.on_reply(t, len, floor);
                    held += usize::from(r.hold_until.is_some());
                    if let Some(l) = r.lost {
                        named.push(l.seq);
                        g.on_sent(t, 1_000_000 + l.seq, None, true, floor);
                        events.insert((t + half, Ev::Arrive(l.seq)));
                    }
                }
            }
        }
        (named, held)
    }

    #[test]
    fn names_losses_in_both_ack_positions() {
        // 9 is lost where an ACK was due; after the immediate ACK of 10 the receiver ACKs even
        // packets, so 21 is lost where none was.
        let (named, held) = run(&[9, 21], 40, false);
        assert_eq!(named, vec![9, 21]);
        assert_eq!(held, 0);
    }

    #[test]
    fn no_loss_no_signal() {
        let (named, _) = run(&[], 60, false);
        assert!(named.is_empty());
    }

    #[test]
    fn timer_flushed_and_data_replies_set_no_baseline() {
        let rtt = us(2_000);
        let (mut g, t0) = sent(4, false);
        // Prompt reply to packet 1 sets the baseline (34).
        assert_eq!(g.on_reply(t0 + us(3_000), 34, rtt), GapReply::default());
        // A reply 12 ms late (ACK timer) is 2 bytes longer: ignored.
        assert_eq!(g.on_reply(t0 + us(15_000), 36, rtt), GapReply::default());
        // A data-bearing reply: ignored.
        assert_eq!(g.on_reply(t0 + us(5_000), 900, rtt), GapReply::default());
        // A prompt reply to packet 3, 2 bytes longer than the baseline: packet 2 is missing.
        let r = g.on_reply(t0 + us(5_050), 36, rtt);
        assert_eq!(r.lost.map(|l| l.seq), Some(2));
        assert!(g.find_mut(2).is_some_and(|r| r.retransmitted));
        // Learned lag moved towards the observed 2.05 ms.
        assert!(g.lag().is_some_and(|l| l > us(2_000) && l < us(2_050)));
    }

    #[test]
    fn lag_is_relearned_when_the_floor_moves() {
        let t0 = Time::ZERO;
        let mut g = GapTracker::new(GapConfig::default(), false);
        for s in 0..14 {
            g.on_sent(t0 + us(s * 1_000), s, Some(frame(100)), false, us(1_000));
        }
        // Packets 1 ms apart, each answered 2.5 ms later. An uncalibrated floor of 1.4 ms pairs
        // every reply with the packet after its own: a consistent but wrong lag of 1.5 ms.
        for k in 0..10 {
            let _ = g.on_reply(t0 + us(2_000 + k * 1_000) + us(500), 34, us(1_400));
        }
        assert!(g.measuring());
        let wrong = g.lag().expect("learned");
        assert!(wrong < us(2_000), "{wrong:?}");
        // A calibration sample moves the floor to 2.0 ms: the lag is relearned (2.5 ms) and the
        // flow counts as measured again only after new prompt replies.
        let _ = g.on_reply(t0 + us(12_500), 34, us(2_000));
        assert!(!g.measuring());
        assert!(g.lag().is_some_and(|l| l >= us(2_000)), "{:?}", g.lag());
    }

    #[test]
    fn a_one_byte_ack_delay_bump_is_not_a_gap() {
        let rtt = us(2_000);
        let (mut g, t0) = sent(7, true);
        let _ = g.on_reply(t0 + us(3_000), 34, rtt);
        // The reply to 3 took a byte more (its ACK Delay): no gap.
        assert!(g.on_reply(t0 + us(5_000), 35, rtt).lost.is_none());
        // 4 is lost: the reply to 5 is 2 bytes over 34 (1 over the bumped 35).
        let r = g.on_reply(t0 + us(7_000), 36, rtt);
        assert_eq!(r.lost.map(|l| l.seq), Some(4));
    }

    #[test]
    fn retention_keeps_a_flights_last_packet_until_the_next_flight() {
        let rtt = us(2_000);
        let (mut g, t0) = sent(3, false);
        g.set_retention(us(60_000));
        let _ = g.on_reply(t0 + us(3_000), 34, rtt);
        // 2 (the flight's last) is lost; the next flight starts 40 ms later.
        g.on_sent(t0 + us(42_000), 3, Some(frame(100)), false, rtt);
        let r = g.on_reply(t0 + us(44_000), 36, rtt);
        assert_eq!(r.lost.map(|l| l.seq), Some(2));
    }

    #[test]
    fn once_per_packet_and_caps() {
        let t0 = Time::ZERO;
        let rtt = us(2_000);
        let cfg = GapConfig {
            ring_packets: 8,
            ring_bytes: 5 * 100,
            ..GapConfig::default()
        };
        let mut g = GapTracker::new(cfg, false);
        for s in 0..20 {
            g.on_sent(t0 + us(s * 100), s, Some(frame(100)), false, rtt);
            assert!(g.ring.len() <= 8 && g.bytes <= 500);
        }
        g.mark_retransmitted(18);
        assert!(g.find_mut(18).is_some_and(|r| r.retransmitted));
        assert!(g.find_mut(17).is_some_and(|r| !r.retransmitted));
        // Packet 19 answered with a grown reply: 18 is already repaired, nothing is named.
        let _ = g.on_reply(t0 + us(3_800), 34, rtt);
        let r = g.on_reply(t0 + us(3_900), 36, rtt);
        assert!(r.lost.is_none() && r.unnamed);
        // Everything ages out.
        let _ = g.on_reply(t0 + us(60_000), 34, rtt);
        assert!(g.ring.is_empty() && g.bytes == 0);
    }

    #[test]
    fn holds_until_the_gap_closes() {
        let rtt = us(2_000);
        let (mut g, t0) = sent(6, true);
        assert!(g.on_reply(t0 + us(3_000), 34, rtt).hold_until.is_none());
        // Packet 2 lost: the reply to 3 is 2 bytes longer and is held.
        let r = g.on_reply(t0 + us(5_000), 36, rtt);
        assert_eq!(r.lost.as_ref().map(|l| l.seq), Some(2));
        let until = r.hold_until.expect("held");
        assert!(until > t0 + us(5_000));
        // The reply to 5 still shows the gap: held as well.
        g.on_sent(t0 + us(5_000), 6, None, true, rtt);
        assert_eq!(g.on_reply(t0 + us(7_000), 36, rtt).hold_until, Some(until));
        // The repair's ACK (back to 34 bytes) goes at once; later replies are not held.
        assert_eq!(g.on_reply(t0 + us(7_010), 34, rtt).hold_until, None);
        assert_eq!(g.on_reply(t0 + us(7_500), 34, rtt).hold_until, None);
    }

    #[test]
    fn hold_expires() {
        let rtt = us(2_000);
        let (mut g, t0) = sent(4, true);
        let _ = g.on_reply(t0 + us(3_000), 34, rtt);
        let until = g
            .on_reply(t0 + us(5_000), 36, rtt)
            .hold_until
            .expect("held");
        // The repair was lost too: after `until` replies flow again, gap or not.
        assert_eq!(g.on_reply(until, 36, rtt).hold_until, None);
    }

    #[test]
    fn simulated_receiver_hold_counts() {
        let (named, held) = run(&[11], 30, true);
        assert_eq!(named, vec![11]);
        assert!(held >= 1);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any interleaving of packets and replies (times, lengths, frames from the network):
            /// no panic, the caps hold, the byte count is exact, a packet is named at most once
            /// and a reply is only held before the deadline its signal set (1.5 lags + 1 ms).
            #[test]
            fn arbitrary_traffic_keeps_the_invariants(
                ops in proptest::collection::vec(
                    (any::<bool>(), 0u64..3_000, 0usize..1600, any::<bool>()),
                    1..300,
                ),
                floor_us in 100u64..20_000,
                holding in any::<bool>(),
            ) {
                let cfg = GapConfig { ring_packets: 32, ring_bytes: 16 * 1024, ..GapConfig::default() };
                let mut g = GapTracker::new(cfg, holding);
                let t0 = Time::ZERO;
                let floor = us(floor_us);
                let (mut now, mut seq) = (t0, 0u64);
                let mut named = std::collections::HashSet::new();
                let mut latest_until = None;
                for (is_reply, step_us, len, with_frame) in ops {
                    now += us(step_us);
                    if is_reply {
                        let lag = g.lag().unwrap_or(floor);
                        let r = g.on_reply(now, len, floor);
                        if let Some(l) = &r.lost {
                            prop_assert!(named.insert(l.seq), "named twice: {}", l.seq);
                            prop_assert_eq!(holding, r.hold_until.is_some());
                            if let Some(u) = r.hold_until {
                                prop_assert!(u <= now + lag * 3 / 2 + Duration::from_millis(1));
                                latest_until = latest_until.max(Some(u));
                            }
                        }
                        prop_assert!(r.hold_until <= latest_until);
                        prop_assert!(r.hold_until.is_none_or(|u| u > now));
                    } else {
                        g.on_sent(now, seq, with_frame.then(|| frame(len)), false, floor);
                        seq += 1;
                    }
                    prop_assert!(g.ring.len() <= 32);
                    prop_assert!(g.bytes <= 16 * 1024);
                    let sum: usize = g.ring.iter().map(|r| r.frame.as_ref().map_or(0, |f| f.len())).sum();
                    prop_assert_eq!(sum, g.bytes);
                }
            }
        }
    }
}

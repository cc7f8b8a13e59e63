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
//!
//! A receiver that delays its ACKs (aioquic: 1 ms after the first unacknowledged packet, gap or
//! not) answers an earlier packet than the timing pairs its reply with, so the packet named is
//! one that arrived. A gap that outlives its repair therefore *walks back*: the original before
//! the one named is retransmitted and the replies held one more round ([`MAX_WALK_BACK`] per
//! gap, [`WALK_TRIAL`] walks per flow before walking must have closed gaps; a flow whose walks
//! do close them names pairs from then on, [`PAIR_AFTER`]). A receiver that acknowledges every
//! second packet and not at once on reordering answers the second packet after a loss, so when
//! the packet before the candidate also came after the previous reply's packet, it is named too
//! (a second guess, at most one per [`SECOND_GUESS_SHARE`] packets of the flow).
//!
//! Which packet a reply answers is found from its time: the last packet forwarded one lag
//! before it. In a steady stream any lag `L + k · spacing` fits the reply times equally well,
//! so the lag learned from them is only known modulo the packet spacing, and the path's RTT
//! floor picks `k`. That is right for a receiver that answers at once and one spacing off for a
//! receiver whose ACK waits on a timer longer than the spacing. The ends and starts of flights
//! (packets after a silence) give the lag without that ambiguity: the last reply before the
//! next flight answers the flight's last packet, and the first reply after a flight starts
//! answers (at least) its first. A receiver that waits as long after a lone packet at both ends
//! is a timer receiver, and its wait takes the floor's place ([`FlightLags`]).
//!
//! A timer receiver's replies are not paired with one packet: its timer and processing jitter
//! by up to a packet spacing, so a reply may cover one packet more or less than its time says.
//! What does hold is that a reply covers everything that arrived before it was sent, so a range
//! new in it belongs to a packet between the previous reply's newest and its own, and those
//! packets are named together ([`TIMER_WINDOW`] at most). A packet that armed a reply's timer
//! is left out: such a receiver's reply comes one wait after the first packet since its
//! previous reply, that wait is learned at flight starts, and a lost packet arms nothing. It
//! matters behind a sender that skips packet numbers (RFC 9000 §21.4): each skipped number is a
//! range that no loss made and no repair closes (s2n-quic with a small window skips about one
//! per window), whose window would otherwise be retransmitted whole.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::Time;

mod receiver;
mod timer;
use receiver::ReplyLengths;
pub use receiver::{
    BASE_REPLIES, FLIGHT_SAMPLES, FLIGHT_SAMPLES_NEEDED, FlightLags, TIMED_ENDS, TIMED_ENDS_KEPT,
    TIMED_ENDS_KEPT_SHARE,
};
pub use timer::{ARMED_TOLERANCE, TIMER_WINDOW};

/// How far a prompt reply's lag may stray from the learned one (the receiver's processing
/// jitter; a reply flushed by the ACK timer is milliseconds late).
pub const PROMPT_TOLERANCE: Duration = Duration::from_micros(250);

/// ACK-sized replies in a row that fit no prompt lag after which the lag is relearned.
pub const RELEARN_AFTER: u32 = 32;

/// Prompt replies after which the signal counts as measuring the flow.
pub const MEASURING_AFTER: u64 = 8;

/// The longest ACK wait learned from flight ends: a reply later than this beyond the floor
/// after a flight's last packet is a delayed-ACK timer (RFC 9000 §13.2.1: `max_ack_delay`,
/// 25 ms by default) that no gap-revealing reply waits for, and is not counted.
pub const MAX_LEARNED_ACK_WAIT: Duration = Duration::from_millis(8);

/// Settings of the gap signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapConfig {
    /// Longest reply treated as ACK-only; longer ones carry other frames (data, flow control)
    /// and neither signal nor move the baseline.
    pub max_ack_len: usize,
    /// Bytes of one ACK range while its varints are small: ranges are counted in these steps
    /// above the shortest recent reply, and one more than the previous reply has is a new gap.
    pub min_growth: usize,
    /// Largest growth over the previous reply that is one range (a range with 2-byte varints;
    /// a byte more is allowed for the ACK Delay, more than that is another frame).
    pub max_growth: usize,
    /// Most recent protected packets kept (a cap on state).
    pub ring_packets: usize,
    /// Most bytes of recent frames kept (a cap on state).
    pub ring_bytes: usize,
    /// Older packets a gap that outlives its repair may try ([`MAX_WALK_BACK`]; 0: none, and
    /// no pairs either).
    pub max_walk_back: u8,
    /// At most one second guess per this many protected packets of the flow
    /// ([`SECOND_GUESS_SHARE`]; 0: none).
    pub second_guess_share: u64,
}

impl Default for GapConfig {
    fn default() -> Self {
        Self {
            max_ack_len: 96,
            min_growth: 2,
            max_growth: 4,
            ring_packets: 256,
            ring_bytes: 256 * 1024,
            max_walk_back: MAX_WALK_BACK,
            second_guess_share: SECOND_GUESS_SHARE,
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
    /// It armed a timer receiver's reply, so it arrived ([`GapTracker::mark_armed`]).
    armed: bool,
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
    /// Named with `lost`: the original packet before it ([`GapTracker::pairing`], or a second
    /// guess, [`SECOND_GUESS_SHARE`]), or the rest of a timer receiver's window
    /// ([`TIMER_WINDOW`]).
    pub also: Vec<GapLoss>,
    /// The reply signals a new gap but no packet could be named (answered, already repaired or
    /// not buffered).
    pub unnamed: bool,
    /// Hold this reply until then (a gap is open and holding is enabled).
    pub hold_until: Option<Time>,
    /// `lost` is not a new gap's packet but an older one tried for a gap its first repair did
    /// not close ([`MAX_WALK_BACK`]).
    pub walked_back: bool,
    /// The open gap closed within its repair's round (this reply is less than one range over
    /// the pre-gap length).
    pub closed: bool,
    /// `lost` (and `also`) were named as a timer receiver's window, from the pairing floor
    /// moved by its learned wait ([`FlightLags`], [`TIMER_WINDOW`]).
    pub timer_paired: bool,
}

/// A gap being repaired (its revealing replies are held when holding is on).
#[derive(Debug, Clone, Copy)]
struct Repair {
    until: Time,
    /// Reply length before the gap opened: a reply less than one range over it means it
    /// closed.
    base: usize,
    /// Length of the reply that revealed the gap: replies at least this long after `until`
    /// say the repair did not close it.
    open_len: usize,
    /// The packet retransmitted for it.
    named: u64,
    /// Older packets already tried in its place ([`MAX_WALK_BACK`] at most).
    walked: u8,
    /// Named as a timer receiver's window or with a second guess ([`SECOND_GUESS_SHARE`]): its
    /// closing teaches the walk-back counts nothing.
    window: bool,
}

/// A reply's lag behind a packet less the floor, when it may be the receiver's wait before
/// answering that packet: not below the floor (then it answered an earlier packet) and not
/// beyond [`MAX_LEARNED_ACK_WAIT`].
fn ack_wait(lag: Duration, floor: Duration) -> Option<Duration> {
    lag.checked_sub(floor)
        .filter(|w| *w <= MAX_LEARNED_ACK_WAIT)
}

/// The end of a repair's round started at `now`: the repair reaches the receiver after half a
/// lag and its ACK comes back after a whole one; a little more covers the receiver's processing.
fn round_end(now: Time, lag: Duration) -> Time {
    now + lag * 3 / 2 + Duration::from_millis(1)
}

/// Older packets a gap that outlives its repair may try, one per expiry. A reply is paired with
/// the last packet forwarded one floor before it; a receiver that delays its ACKs (aioquic's
/// ACK every 1 ms, gap or not) answers an earlier one, so the packet named is too new — never
/// too old, since the floor is a lower bound of the path's RTT — and the lost one lies before
/// it.
pub const MAX_WALK_BACK: u8 = 2;

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
    /// Lengths of the last replies the signal measured.
    lens: ReplyLengths,
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
    /// When the last original or copy was forwarded, and the last ACK-sized reply came.
    last_sent: Option<Time>,
    last_reply: Option<Time>,
    /// When the current flight started, until its first ACK-sized reply.
    flight_start: Option<Time>,
    /// The receiver's waits learned at flight ends and starts.
    flight_lags: FlightLags,
    /// Gaps closed by their first repair, and by a walk back: once walks back have closed
    /// [`PAIR_AFTER`] gaps and more than first repairs have, each new gap names the packet
    /// before its candidate too (the flow's receiver answers earlier packets than the timing
    /// pairs its replies with, so the first repair of each gap would cost a round).
    closed_first: u32,
    closed_walking: u32,
    /// Walks back taken: after [`WALK_TRIAL`] of them, walking back goes on only while at least
    /// a quarter have closed their gap within the round (on a receiver that answers at once, a
    /// gap that outlives its repair is one the repair could not close — the repair lost, or a
    /// reply grown for another reason — and walking back only costs packets and held replies).
    walks: u32,
    /// The packet the previous prompt reply answered: it arrived, and so did everything the
    /// receiver acknowledged with it.
    last_answered: Option<u64>,
    /// Second packets named beside a gap's candidate because both came after the previous
    /// prompt reply's packet ([`SECOND_GUESS_SHARE`]).
    second_guesses: u32,
}

/// Walks back a flow may take before walking back must have proven itself (see `walks`).
pub const WALK_TRIAL: u32 = 4;

/// Gaps a walk back must have closed before new gaps name two packets at once.
pub const PAIR_AFTER: u32 = 3;

/// Most second guesses a flow may send, as a share of its protected packets (1 in this many).
///
/// A receiver that acknowledges every second packet and not at once on reordering (kwik; RFC
/// 9000 §13.2.1 asks for an immediate ACK, and quinn, quiche, quic-go and ngtcp2 send one)
/// reveals a gap with its ACK of the second packet to arrive after it, so the packet before the
/// one a gap reply answers has arrived about half the time and the lost one lies a packet
/// earlier. Both came after the previous prompt reply's packet, which bounds where the loss can
/// be; naming the older one too finds it, and costs a packet where the receiver did answer at
/// once. The share keeps that cost a bound, whatever the receiver: behind a sender that skips
/// packet numbers (RFC 9000 §21.4) gaps that no loss made are frequent, and second guesses stop
/// at 2 % of the flow's packets.
pub const SECOND_GUESS_SHARE: u64 = 50;

impl GapTracker {
    /// An empty tracker; `holding` enables holding of gap-revealing replies (bridge mode only).
    pub fn new(cfg: GapConfig, holding: bool) -> Self {
        Self {
            cfg,
            ring: VecDeque::new(),
            bytes: 0,
            lens: ReplyLengths::default(),
            lag: None,
            repair: None,
            holding,
            retention: Duration::ZERO,
            prompt_replies: 0,
            lag_floor: Duration::ZERO,
            unprompt_run: 0,
            last_sent: None,
            last_reply: None,
            flight_start: None,
            flight_lags: FlightLags::default(),
            closed_first: 0,
            closed_walking: 0,
            walks: 0,
            last_answered: None,
            second_guesses: 0,
        }
    }

    /// Whether new gaps name the packet before their candidate as well.
    pub fn pairing(&self) -> bool {
        self.cfg.max_walk_back > 0
            && self.closed_walking >= PAIR_AFTER
            && self.closed_walking > self.closed_first
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
        debug_assert!(
            self.ring.back().is_none_or(|r| r.seq < seq),
            "sequence numbers increase"
        );
        self.note_flight_start(now, rtt);
        self.last_sent = Some(now);
        self.prune(now, rtt);
        self.bytes += frame.as_ref().map_or(0, |f| f.len());
        self.ring.push_back(Recent {
            seq,
            at: now,
            frame,
            replied: false,
            armed: false,
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
        let prev_reply = self.last_reply;
        if len <= self.cfg.max_ack_len {
            self.last_reply = Some(now);
            if let Some(wait) = self
                .flight_start
                .take()
                .and_then(|start| ack_wait(now.saturating_duration_since(start), floor))
            {
                self.flight_lags.record_start(wait);
            }
        }
        let raw_floor = floor;
        let floor = self.flight_lags.pairing_floor(floor);
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
        // A reply less than one range longer than the pre-gap length has no range the gap
        // added: a byte more is its ACK Delay varint taking two bytes (aioquic's reply to a
        // repair often is), as for a new gap's growth below.
        let closes = |h: &Repair| len < h.base + self.cfg.min_growth;
        if let Some(h) = self.repair
            && (now >= h.until || closes(&h))
        {
            // Closed (or given up on): this reply goes at once, overtaking the held ones.
            self.repair = None;
            // Closed within its round: by the repair (a gap that closes later was closed by the
            // sender's own recovery or by the receiver forgetting old ranges).
            out.closed = closes(&h) && now < h.until;
            if out.closed && !h.window {
                if h.walked == 0 {
                    self.closed_first = self.closed_first.saturating_add(1);
                } else {
                    self.closed_walking = self.closed_walking.saturating_add(1);
                }
            }
            if !closes(&h) && len >= h.open_len && len <= self.cfg.max_ack_len {
                // The repair's time is up and the gap is still there: the packet named was
                // not the lost one. Try the original before it.
                if let Some(lost) = self.walk_back(now, lag, h) {
                    out.lost = Some(lost);
                    out.walked_back = true;
                }
            }
        }
        out.hold_until = self.repair.filter(|_| self.holding).map(|h| h.until);
        if out.lost.is_some() {
            return out;
        }
        if len > self.cfg.max_ack_len {
            return out;
        }
        // With a learned wait the receiver is a timer receiver: its replies jitter by up to a
        // packet spacing, so no single packet is paired with them (see `on_timer_reply`).
        let timer = floor > raw_floor;
        if timer {
            self.mark_armed(now, raw_floor);
        }
        let Some(ix) = self.prompt_trigger(now, floor) else {
            // Not answering a recent packet promptly: flushed by the receiver's ACK timer, whose
            // longer ACK Delay field may take a byte more; it sets no baseline.
            self.unprompt_run = self.unprompt_run.saturating_add(1);
            if timer {
                return self.on_timer_reply(now, len, floor, prev_reply, lag, out);
            }
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
        let last_answered = self.last_answered.replace(self.ring[ix].seq);
        if timer {
            return self.on_timer_reply(now, len, floor, prev_reply, lag, out);
        }
        let Some(base) = self.adds_range(len) else {
            return out;
        };
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
                let mut named = seq;
                let pairing = self.pairing();
                let second_guess =
                    !pairing && cand.is_some_and(|k| self.second_guess_fits(k, last_answered));
                if (pairing || second_guess)
                    && let Some(k) = cand
                    && let Some(also) = self.take_original_before(k)
                {
                    named = also.seq;
                    out.also.push(also);
                    self.second_guesses =
                        self.second_guesses.saturating_add(u32::from(second_guess));
                }
                // A pair counts as walked: its closing says nothing about first repairs. Nor
                // does a second guess's closing say anything about walks back: it is kept out
                // of both counts, as a timer receiver's window is.
                let guessed = !out.also.is_empty();
                let walked = u8::from(pairing && guessed);
                let window = second_guess && guessed;
                self.open_repair(now, lag, base, len, named, walked, window, &mut out);
            }
            None => out.unnamed = true,
        }
        out
    }

    /// Record an ACK-sized reply of `len` bytes measured by the signal; `Some(base)` when it
    /// adds a range to the previous one, `base` being the length a reply returns to when the
    /// gap closes ([`ReplyLengths`]).
    fn adds_range(&mut self, len: usize) -> Option<usize> {
        let (base, prev) = (self.lens.shortest(), self.lens.last());
        self.lens.push(len);
        let (base, prev) = (base?, prev?);
        let step = self.cfg.min_growth.max(1);
        let ranges = |l: usize| l.saturating_sub(base) / step;
        (ranges(len) > ranges(prev) && len <= prev + self.cfg.max_growth + 1).then_some(base)
    }

    /// Start (or widen) the repair of a gap whose reply of `len` bytes came at `now`, `base`
    /// the length before it; `named` is the oldest packet retransmitted for it.
    #[allow(clippy::too_many_arguments)]
    fn open_repair(
        &mut self,
        now: Time,
        lag: Duration,
        base: usize,
        len: usize,
        named: u64,
        walked: u8,
        window: bool,
        out: &mut GapReply,
    ) {
        let until = round_end(now, lag);
        let base = self.repair.map_or(base, |h| h.base.min(base));
        self.repair = Some(Repair {
            until,
            base,
            open_len: len,
            named,
            walked,
            window,
        });
        if self.holding {
            out.hold_until = Some(until);
        }
    }

    /// A repair `h` expired with its gap open: name the original packet forwarded before the
    /// one it named (not yet retransmitted, its frame kept; whether a reply was paired with it
    /// does not count, since the pairing is what was off), and hold for another round.
    fn walk_back(&mut self, now: Time, lag: Duration, h: Repair) -> Option<GapLoss> {
        let pays = self.walks < WALK_TRIAL || self.closed_walking.saturating_mul(4) >= self.walks;
        if h.walked >= self.cfg.max_walk_back || !pays {
            return None;
        }
        let at = self.ring.binary_search_by_key(&h.named, |r| r.seq).ok()?;
        let GapLoss { seq, frame } = self.take_original_before(at)?;
        self.walks = self.walks.saturating_add(1);
        self.repair = Some(Repair {
            until: round_end(now, lag),
            named: seq,
            walked: h.walked + 1,
            ..h
        });
        Some(GapLoss { seq, frame })
    }

    /// Whether a gap whose candidate is ring index `k` may name the original before it as well
    /// ([`SECOND_GUESS_SHARE`]): that packet came after `last_answered` (the previous prompt
    /// reply's packet, which arrived) and the flow's second guesses are within their share.
    fn second_guess_fits(&self, k: usize, last_answered: Option<u64>) -> bool {
        let Some(answered) = last_answered else {
            return false;
        };
        let Some(before) = (0..k).rev().find(|&j| !self.ring[j].is_retx) else {
            return false;
        };
        let share = self.cfg.second_guess_share;
        let packets = self.ring.back().map_or(0, |r| r.seq + 1);
        share > 0
            && self.ring[before].seq > answered
            && u64::from(self.second_guesses).saturating_mul(share) < packets
    }

    /// The last original packet before ring index `at`, taken for retransmission unless it
    /// was retransmitted already or its frame is gone (whether a reply was paired with it does
    /// not count).
    fn take_original_before(&mut self, at: usize) -> Option<GapLoss> {
        let k = (0..at).rev().find(|&k| !self.ring[k].is_retx)?;
        let r = &mut self.ring[k];
        if r.retransmitted {
            return None;
        }
        let frame = r.frame.take()?;
        r.retransmitted = true;
        self.bytes -= frame.len();
        Some(GapLoss { seq: r.seq, frame })
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

    /// A packet forwarded at `now` after a silence of more than the floor and
    /// [`MAX_LEARNED_ACK_WAIT`] starts a new flight (its first reply gives a start wait, taken
    /// in [`Self::on_reply`]): the last reply since the previous one answered that flight's
    /// last packet, and its lag beyond `floor` is an end wait.
    fn note_flight_start(&mut self, now: Time, floor: Duration) {
        let Some(sent) = self.last_sent else {
            return;
        };
        if now.saturating_duration_since(sent) <= floor + MAX_LEARNED_ACK_WAIT {
            return;
        }
        self.flight_start = Some(now);
        let Some(lag) = self
            .last_reply
            .filter(|&reply| reply > sent)
            .map(|reply| reply.saturating_duration_since(sent))
        else {
            // No reply since the last packet (it elicited none, or its reply was lost).
            return;
        };
        match ack_wait(lag, floor) {
            Some(wait) => self.flight_lags.record_end(wait),
            // Sooner than the floor: that reply answered an earlier packet, and the last one's
            // ACK waits beyond the next flight's start.
            None if lag < floor => self.flight_lags.record_early_end(),
            None => {}
        }
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
mod tests;

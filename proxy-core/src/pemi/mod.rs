//! PEMI: transparent performance enhancement for QUIC flows whose endpoints never opted into a
//! sidekick session (PEMI, "PEMI: Transparent Performance Enhancements for QUIC").
//!
//! The engine sees only what a middlebox sees in encrypted QUIC: UDP timing and sizes, the long
//! header types of the handshake and, when enabled, the spin bit. From these it
//!
//! 1. tracks the handshake and measures an initial RTT to each side ([`handshake`], App. A);
//! 2. finds the dominant direction by normalised volume per smoothed RTT (§4.1);
//! 3. groups the dominant direction's packets into flowlets and assigns every reply packet to the
//!    nearest flowlet ([`flowlet`], §4.2.1–4.2.2);
//! 4. matches replies to sent packets per flowlet with a DP and infers losses ([`matching`],
//!    §4.2.3, §4.3.1);
//! 5. retransmits an inferred-lost datagram once from its buffer (§4.3.2);
//! 6. keeps RTT estimates from matched pairs, the spin bit and an external calibration hook
//!    ([`rtt`], §4.4, App. A);
//! 7. runs a Copa-derived window and enforces its rate by stopping retransmissions and delaying
//!    replies ([`copa`], §4.5);
//! 8. gives up where inference is unreliable and counts why (§4.6), per flowlet and, where the
//!    receiver's replies cannot be read at all, per flow ([`readable`]).
//!
//! Everything is sans-IO with an explicit `now`. ICMP calibration needs I/O: the engine exposes
//! [`PemiEngine::on_echo_sample`] for a backend that pings the protected endpoint.

pub mod copa;
pub mod engine;
pub mod flowlet;
pub mod gap;
pub mod handshake;
pub mod matching;
pub mod probe;
pub mod readable;
pub mod rtt;
pub mod trace;

use std::time::Duration;

pub use engine::PemiEngine;

/// PEMI parameters; defaults are the paper's values (§4.2–4.6, §6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PemiConfig {
    /// Flowlet timeout factor α: `F_timeout = α · sINV` (§4.2.1; α = 2).
    pub alpha: f64,
    /// Exclusion-window factor β: `Δ_margin = β · F_timeout` (§4.2.2, eq. 1; β = 0.5).
    pub beta: f64,
    /// Packets closer than this may be acknowledged by one reply (§4.3.1; 0.1 ms).
    pub close_interval: Duration,
    /// Largest flowlet protected (§4.6; N = 100).
    pub max_flowlet_packets: usize,
    /// Retransmissions allowed as a fraction of forwarded protected packets (§4.6; 10 %).
    pub retx_budget: f64,
    /// Price of an implied loss in the reply matching, as a fraction of the flowlet's mean packet
    /// interval (our extension to §4.2.3, see `matching::match_flowlet_penalised`; 0 = the
    /// paper's DP). 0.5: a loss must save more than half a packet interval of timing misfit.
    pub loss_penalty_spacing: f64,
    /// Reply ratio above which the eliciting threshold is 1, else 2 (App. A; 60 %).
    pub eliciting_cutoff: f64,
    /// Bytes of buffered datagrams per flow (only unfinished flowlets are buffered, §4.3.2).
    pub buffer_bytes: usize,
    /// Slack after the expected reply time before a flowlet without later replies is finished
    /// (covers the receiver's `max_ack_delay`; QUIC's default is 25 ms).
    pub ack_delay_slack: Duration,
    /// Copa aggressiveness δ (§4.5.1; Copa's default 0.5).
    pub copa_delta: f64,
    /// Delay replies to enforce the window (§4.5.2). Only possible in bridge mode: in sniff mode
    /// the kernel forwards every packet and PEMI can only infer losses and inject copies.
    pub enforce_delay: bool,
    /// Largest reply delay applied by enforcement.
    pub max_reply_delay: Duration,
    /// How enforcement perturbs the replies (§4.5.2 names both): delay every reply, or reorder
    /// them (hold one in [`REORDER_EVERY`] so that later replies overtake it).
    pub reply_enforcement: ReplyEnforcement,
    /// Infer losses from the receiver's ACK lengths as well (our extension to §4.3, see
    /// [`gap`]): a prompt reply one ACK range longer than the previous one names the packet
    /// before the one it answers, and PEMI retransmits it at once.
    pub gap_signal: bool,
    /// Retransmit what the timing-only flowlet inference (§4.3) names even while the gap signal
    /// is measuring the flow (see [`gap::GapTracker::measuring`]). Off by default: on recorded
    /// quinn flows the timing inference's extra retransmissions were mostly spurious; the
    /// flowlet matching still gives RTT samples, and its retransmissions resume on flows where
    /// the gap signal sees no prompt replies.
    pub timing_retx: bool,
    /// Hold the replies that reveal a gap the gap signal is repairing until the repair's ACK
    /// has passed them (bounded by 1.5 receiver RTTs + 1 ms per round, one round more per walk
    /// back; see [`gap`]). Bridge mode only.
    pub hold_on_gap: bool,
    /// Older packets the gap signal may retransmit, one per round, for a gap its repair did not
    /// close ([`gap::MAX_WALK_BACK`]; 0 turns walking back, and with it naming pairs, off).
    pub gap_walk_back: u8,
    /// At most one second guess (the packet before a gap's candidate, when both came after
    /// the previous prompt reply's packet) per this many protected packets of a flow
    /// ([`gap::SECOND_GUESS_SHARE`]; 0 turns second guesses off).
    pub gap_second_guess_share: u64,
    /// Calibrate the receiver-side RTT by an ICMP echo to the protected endpoint once per
    /// end-to-end RTT (§4.4.3, §5; see [`probe`]).
    pub icmp_calibration: bool,
    /// A loss estimate above this fraction of a flowlet (with at least 3 losses) is implausible
    /// and the flowlet is not retransmitted (§4.6).
    pub implausible_loss: f64,
}

/// How a flow over its target rate is slowed once it has lost its retransmissions (PEMI
/// §4.5.2: "PEMI will reorder or delay the reply packets to make the overspeed sender slow
/// down"). Bridge mode only (`enforce_delay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplyEnforcement {
    /// Every reply waits the enforcement delay: the sender's RTT grows by it.
    #[default]
    Delay,
    /// One reply in [`REORDER_EVERY`] waits the enforcement delay while the following replies
    /// pass: the sender sees its replies reordered, the paper's packet-threshold trigger. A QUIC
    /// ACK frame repeats the ranges of the ACKs before it, so the overtaken reply carries nothing
    /// the later ones lack: for QUIC this is expected to slow nothing (measured:
    /// docs/results.md, "PEMI's reply enforcement: delaying against reordering").
    Reorder,
}

/// [`ReplyEnforcement::Reorder`]: one reply in this many is held, so that at least
/// `kPacketThreshold` (3, RFC 9002 §6.1.1) replies overtake it.
pub const REORDER_EVERY: u64 = 4;

impl ReplyEnforcement {
    /// How long to hold the `nth` reply (counted from 1) while enforcing with `delay`, if at
    /// all: every reply under [`Self::Delay`], the first of every [`REORDER_EVERY`] under
    /// [`Self::Reorder`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use sidekick_proxy_core::pemi::ReplyEnforcement;
    /// let d = Duration::from_millis(8);
    /// let held = |e: ReplyEnforcement| (1..=8).filter(|&n| e.hold(d, n).is_some()).count();
    /// assert_eq!(held(ReplyEnforcement::Delay), 8);
    /// assert_eq!(held(ReplyEnforcement::Reorder), 2);
    /// assert_eq!("reorder".parse(), Ok(ReplyEnforcement::Reorder));
    /// ```
    pub fn hold(self, delay: Duration, nth: u64) -> Option<Duration> {
        match self {
            Self::Delay => Some(delay),
            Self::Reorder => (nth % REORDER_EVERY == 1).then_some(delay),
        }
    }
}

impl std::str::FromStr for ReplyEnforcement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "delay" => Ok(Self::Delay),
            "reorder" => Ok(Self::Reorder),
            other => Err(format!("{other:?} is not delay or reorder")),
        }
    }
}

impl Default for PemiConfig {
    fn default() -> Self {
        Self {
            alpha: 2.0,
            beta: 0.5,
            close_interval: Duration::from_micros(100),
            max_flowlet_packets: 100,
            retx_budget: 0.10,
            loss_penalty_spacing: 0.5,
            eliciting_cutoff: 0.60,
            buffer_bytes: 1 << 20,
            ack_delay_slack: Duration::from_millis(25),
            copa_delta: 0.5,
            enforce_delay: true,
            max_reply_delay: Duration::from_millis(200),
            reply_enforcement: ReplyEnforcement::Delay,
            gap_signal: true,
            timing_retx: false,
            hold_on_gap: true,
            gap_walk_back: gap::MAX_WALK_BACK,
            gap_second_guess_share: gap::SECOND_GUESS_SHARE,
            implausible_loss: 0.5,
            icmp_calibration: true,
        }
    }
}

/// PEMI counters of one flow (summed over flows by the core); each give-up has its reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PemiStats {
    /// Handshakes whose initial RTTs were measured (App. A).
    pub handshakes: u64,
    /// Handshakes with an instant ACK (an ACK-only server Initial before the ServerHello).
    pub instant_acks: u64,
    /// Protected (dominant-direction) packets forwarded.
    pub protected: u64,
    /// Reply packets assigned to a flowlet.
    pub replies_assigned: u64,
    /// Reply packets outside the exclusion window (§4.2.2).
    pub replies_excluded: u64,
    /// Flowlets finished and evaluated.
    pub flowlets: u64,
    /// RTT samples from matched pairs.
    pub rtt_samples: u64,
    /// Packets inferred lost.
    pub inferred_lost: u64,
    /// Datagrams retransmitted (injected once each).
    pub retransmissions: u64,
    /// Give-up: flowlet longer than N packets (§4.6).
    pub giveup_flowlet_too_long: u64,
    /// Give-up: implausible loss estimate for a flowlet (§4.6).
    pub giveup_implausible_loss: u64,
    /// Give-up: a flowlet's inferred losses on a flow the timing inference cannot read (its
    /// recent estimates implausible as a whole, [`readable`]).
    pub giveup_unreadable_flow: u64,
    /// Give-up: retransmission budget (10 % of forwarded) exhausted (§4.6).
    pub giveup_budget: u64,
    /// Retransmissions withheld because the flow exceeds its target rate (§4.5.2).
    pub giveup_rate_limited: u64,
    /// Lost packets that were not buffered (buffer cap or partial frame).
    pub not_buffered: u64,
    /// Reply packets delayed to enforce the window (§4.5.2).
    pub replies_delayed: u64,
    /// Prompt replies one ACK range longer than the previous one (new gaps, see [`gap`]).
    pub gap_signals: u64,
    /// Retransmissions named by the gap signal (counted in `retransmissions` too).
    pub gap_retransmissions: u64,
    /// Of those, older packets tried for a gap its first repair did not close (a receiver
    /// whose ACKs answer an earlier packet than the timing pairs them with, [`gap::MAX_WALK_BACK`]).
    pub gap_walk_backs: u64,
    /// Of those, the second packet named with a new gap: once walks back have proven the flow's
    /// pairing late ([`gap::PAIR_AFTER`]), or as a second guess ([`gap::SECOND_GUESS_SHARE`]).
    pub gap_paired: u64,
    /// Of those, packets named in a timer receiver's window, from the pairing moved by its
    /// learned ACK wait ([`gap::FlightLags`], [`gap::TIMER_WINDOW`]).
    pub gap_timer_paired: u64,
    /// Gaps the gap signal repaired that closed within the repair's round (a reply less than
    /// one ACK range over the pre-gap length): the repairs that hid a loss from the sender.
    pub gap_closed: u64,
    /// Reply packets held while a gap the gap signal repairs was open.
    pub replies_held: u64,
    /// Flowlet resets after a large RTT deviation (App. A).
    pub rtt_resets: u64,
    /// Spin-bit RTT samples (§4.4.3).
    pub spin_samples: u64,
    /// ICMP echo probes sent to the protected endpoint (§4.4.3).
    pub icmp_probes: u64,
    /// ICMP echo replies matched to a probe (calibration samples).
    pub icmp_samples: u64,
}

impl PemiStats {
    /// Add another flow's counters.
    pub fn add(&mut self, o: &PemiStats) {
        macro_rules! add {
            ($($f:ident),+) => { $( self.$f += o.$f; )+ };
        }
        add!(
            handshakes,
            instant_acks,
            protected,
            replies_assigned,
            replies_excluded,
            flowlets,
            rtt_samples,
            inferred_lost,
            retransmissions,
            giveup_flowlet_too_long,
            giveup_implausible_loss,
            giveup_unreadable_flow,
            giveup_budget,
            giveup_rate_limited,
            not_buffered,
            replies_delayed,
            gap_signals,
            gap_retransmissions,
            gap_walk_backs,
            gap_paired,
            gap_timer_paired,
            gap_closed,
            replies_held,
            rtt_resets,
            spin_samples,
            icmp_probes,
            icmp_samples
        );
    }
}

//! The PEMI per-flow engine: the [`FlowEngine`] that ties handshake tracking, dominant direction,
//! flowlets, matching, loss inference, retransmission, RTT and congestion control together
//! (PEMI §4, Fig. 5).

use std::sync::Arc;
use std::time::Duration;

use crate::Time;

use crate::engine::{Action, Direction, FlowEngine, Packet};

use super::copa::{CopaWindow, Enforcer};
use super::flowlet::{Flowlet, Flowlets, ReplyOutcome, SentOutcome};
use super::gap::{GapConfig, GapTracker};
use super::handshake::{HandshakeTracker, PacketKind, coalesced};
use super::matching::{eliciting_threshold, evaluate};
use super::readable::TimingLoss;
use super::rtt::{RttEstimator, SpinTracker};
use super::{PemiConfig, PemiStats};

/// Fewest sent packets before the eliciting-threshold estimate is trusted (App. A: it converges
/// "within tens to hundreds of packets"); until then the conservative threshold 2 is used.
const THRESHOLD_WARMUP: u64 = 10;

/// Spin-bit samples outside `[srtt / 4, 4 · srtt]` are ignored: endpoints that disable the spin
/// bit may randomise it per packet (RFC 9000 §17.4).
const SPIN_PLAUSIBLE: u32 = 4;

/// Probes awaiting their echo reply (older ones are forgotten: their reply counts as lost).
const MAX_OUTSTANDING_PROBES: usize = 8;

/// The PEMI engine of one flow.
#[derive(Debug)]
pub struct PemiEngine {
    cfg: PemiConfig,
    origin: Time,
    hs: HandshakeTracker,
    /// RTT proxy ↔ client and proxy ↔ server.
    rtt_client: Option<RttEstimator>,
    rtt_server: Option<RttEstimator>,
    spin: SpinTracker,
    dominant: Option<Direction>,
    volume: [u64; 2],
    b_min: Option<usize>,
    volume_since: Option<Time>,
    flowlets: Flowlets,
    /// Smallest ICMP echo sample per side: the gap signal's floor.
    echo_min: [Option<Duration>; 2],
    /// Smallest spin-bit sample per side: the floor while no echo has come back.
    spin_min: [Option<Duration>; 2],
    /// Recent packets and reply lengths for the gap signal ([`super::gap`]).
    gap: GapTracker,
    /// Number of the next protected packet recorded (originals and PEMI's copies).
    next_seq: u64,
    copa: CopaWindow,
    enforcer: Enforcer,
    /// Replies seen while enforcing by reordering (which of them is held).
    replies_while_enforcing: u64,
    sent_evaluated: u64,
    replied_evaluated: u64,
    /// The timing inference's recent loss share on this flow ([`super::readable`]).
    timing_loss: TimingLoss,
    forwarded: u64,
    retransmitted: u64,
    /// ICMP calibration: the identifier the core gave this flow's probes, the next sequence
    /// number, when the last probe left, and the probes awaiting a reply.
    probe_id: Option<u16>,
    probe_seq: u16,
    probe_last: Option<Time>,
    probes: std::collections::VecDeque<(u16, Time)>,
    /// Counters (summed by the core).
    pub stats: PemiStats,
}

fn vidx(d: Direction) -> usize {
    match d {
        Direction::FromClient => 0,
        Direction::ToClient => 1,
    }
}

fn keep_min(slot: &mut Option<Duration>, sample: Duration) {
    *slot = Some(slot.map_or(sample, |m| m.min(sample)));
}

impl PemiEngine {
    /// A new engine for a flow first seen at `now` (its first client Initial).
    pub fn new(cfg: PemiConfig, now: Time) -> Self {
        Self {
            cfg,
            origin: now,
            hs: HandshakeTracker::new(),
            rtt_client: None,
            rtt_server: None,
            spin: SpinTracker::default(),
            dominant: None,
            volume: [0; 2],
            b_min: None,
            volume_since: None,
            flowlets: Flowlets::new(
                cfg.alpha,
                cfg.beta,
                cfg.max_flowlet_packets,
                cfg.buffer_bytes,
            ),
            echo_min: [None; 2],
            spin_min: [None; 2],
            gap: GapTracker::new(gap_config(&cfg), cfg.hold_on_gap),
            next_seq: 0,
            copa: CopaWindow::new(cfg.copa_delta),
            enforcer: Enforcer::new(cfg.enforce_delay, cfg.max_reply_delay),
            replies_while_enforcing: 0,
            sent_evaluated: 0,
            timing_loss: TimingLoss::default(),
            replied_evaluated: 0,
            forwarded: 0,
            retransmitted: 0,
            probe_id: None,
            probe_seq: 0,
            probe_last: None,
            probes: std::collections::VecDeque::new(),
            stats: PemiStats::default(),
        }
    }

    /// Enable ICMP calibration with this identifier (unique among the core's PEMI flows).
    pub fn set_probe_id(&mut self, id: u16) {
        self.probe_id = Some(id);
    }

    /// The probe to send now, if one is due: `(identifier, sequence)`. Once the handshake is
    /// tracked and the protected direction known, one probe per end-to-end smoothed RTT (§5).
    /// The caller builds it from a packet of the protected direction
    /// ([`super::probe::echo_request`]) and injects it towards the receiver. The receiver's
    /// RTT need not be known yet: when the handshake could not measure it, the first reply
    /// is what starts the engine.
    pub fn take_probe(&mut self, now: Time) -> Option<(u16, u16)> {
        let id = self.probe_id.filter(|_| self.cfg.icmp_calibration)?;
        let e2e = self.e2e()?;
        self.dominant?;
        if !self.hs.done() || self.probe_last.is_some_and(|t| now < t + e2e) {
            return None;
        }
        self.probe_last = Some(now);
        self.probe_seq = self.probe_seq.wrapping_add(1);
        if self.probes.len() >= MAX_OUTSTANDING_PROBES {
            self.probes.pop_front();
        }
        self.probes.push_back((self.probe_seq, now));
        self.stats.icmp_probes += 1;
        Some((id, self.probe_seq))
    }

    /// An echo reply to probe `seq` arrived: a calibration sample of the receiver-side RTT.
    pub fn on_probe_reply(&mut self, now: Time, seq: u16) {
        let Some(pos) = self.probes.iter().position(|&(s, _)| s == seq) else {
            return;
        };
        let Some((_, sent)) = self.probes.remove(pos) else {
            return;
        };
        let Some(side) = self.dominant else {
            return;
        };
        self.stats.icmp_samples += 1;
        self.on_echo_sample(now, side, now.saturating_duration_since(sent));
    }

    /// An ICMP echo RTT to one side (§4.4.3): a calibration sample, and the gap signal's floor
    /// (the smallest such sample; a kernel answers an echo at once, so it bounds the path RTT
    /// from below, which spin-bit samples — taken at packet granularity — do not).
    pub fn on_echo_sample(&mut self, now: Time, side: Direction, rtt: Duration) {
        keep_min(&mut self.echo_min[vidx(side)], rtt);
        self.on_calibration_sample(now, side, rtt);
    }

    /// Park the engine while a sidekick session assists its flow (the core keeps it as the
    /// session's fallback): the transient state — flowlets and their buffered frames, the gap
    /// signal's packets, the enforcement level, the volume count, outstanding probes — is
    /// dropped, since the flow's packets no longer pass through the engine and a later match
    /// against it would infer losses that never happened. What describes the path is kept:
    /// the handshake's and later RTT estimates and their floors, the protected direction, the
    /// Copa window, the eliciting-threshold statistics and the counters.
    pub fn suspend(&mut self) {
        self.flowlets.clear();
        self.gap = GapTracker::new(gap_config(&self.cfg), self.cfg.hold_on_gap);
        self.enforcer = Enforcer::new(self.cfg.enforce_delay, self.cfg.max_reply_delay);
        self.volume = [0; 2];
        self.volume_since = None;
        self.probes.clear();
        self.probe_last = None;
    }

    /// A datagram of the flow while the engine is suspended: only the handshake is followed
    /// (a session may start before the handshake ends; PEMI needs its initial RTTs, App. A).
    pub fn observe(&mut self, now: Time, dir: Direction, payload: &[u8]) {
        if !self.hs.done() {
            self.on_handshake(now, dir, payload);
        }
    }

    /// The protected (dominant) direction, once decided (§4.1).
    pub fn dominant(&self) -> Option<Direction> {
        self.dominant
    }

    /// The smoothed RTT from the proxy to the client (`ToClient`) or server (`FromClient`) side.
    pub fn rtt_to(&self, side: Direction) -> Option<Duration> {
        self.estimator(side).map(RttEstimator::srtt)
    }

    /// The Copa window in packets.
    pub fn cwnd(&self) -> f64 {
        self.copa.cwnd()
    }

    /// The enforcer (level and delay).
    pub fn enforcer(&self) -> &Enforcer {
        &self.enforcer
    }

    fn estimator(&self, side: Direction) -> Option<&RttEstimator> {
        match side {
            Direction::ToClient => self.rtt_client.as_ref(),
            Direction::FromClient => self.rtt_server.as_ref(),
        }
    }

    fn estimator_mut(&mut self, side: Direction) -> &mut Option<RttEstimator> {
        match side {
            Direction::ToClient => &mut self.rtt_client,
            Direction::FromClient => &mut self.rtt_server,
        }
    }

    /// End-to-end smoothed RTT (sum of both sides known so far).
    fn e2e(&self) -> Option<Duration> {
        match (self.rtt_client, self.rtt_server) {
            (Some(a), Some(b)) => Some(a.srtt() + b.srtt()),
            (a, b) => a.or(b).map(|r| r.srtt()),
        }
    }

    /// RTT to the receiver of the protected direction.
    fn receiver_rtt(&self) -> Option<Duration> {
        self.estimator(self.dominant?).map(RttEstimator::srtt)
    }

    /// A lower bound of the RTT to the receiver: the smallest ICMP echo sample, else the
    /// smallest spin-bit sample, else the estimator's windowed minimum (which mismatched replies
    /// can pull below the path RTT).
    fn receiver_rtt_floor(&self) -> Option<Duration> {
        let side = self.dominant?;
        let i = vidx(side);
        self.echo_min[i]
            .or(self.spin_min[i])
            .or_else(|| self.estimator(side).map(RttEstimator::min))
    }

    fn ns(&self, t: Time) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A calibration RTT sample for one side, from the spin bit or an external prober (ICMP echo
    /// to the protected endpoint once per end-to-end RTT, §4.4.3; that prober needs I/O and is
    /// not part of this sans-IO engine). App. A: when the sample deviates from the smoothed RTT
    /// by more than Δ_margin, the estimate is reset to it and replied flowlets are cleared.
    pub fn on_calibration_sample(&mut self, now: Time, side: Direction, rtt: Duration) {
        let margin = self.flowlets.margin();
        let protected_side = self.dominant == Some(side);
        let slot = self.estimator_mut(side);
        let Some(est) = slot.as_mut() else {
            *slot = Some(RttEstimator::new(rtt, now));
            return;
        };
        if est.srtt().abs_diff(rtt) > margin && margin > Duration::ZERO {
            est.reset_to(rtt, now);
            if protected_side {
                self.flowlets.clear_replied();
                self.stats.rtt_resets += 1;
            }
        } else {
            est.sample(rtt, now);
        }
        if protected_side && let Some(e) = self.estimator(side).copied() {
            self.copa.on_rtt(now, rtt, e.srtt(), e.min());
            self.cap_window(e.srtt());
        }
    }

    fn on_handshake(&mut self, now: Time, dir: Direction, payload: &[u8]) {
        let was_done = self.hs.done();
        self.hs.on_datagram(now, dir, payload);
        let r = self.hs.rtts();
        if self.rtt_server.is_none()
            && let Some(d) = r.to_server
        {
            self.rtt_server = Some(RttEstimator::new(d, now));
        }
        if self.rtt_client.is_none()
            && let Some(d) = r.to_client
        {
            self.rtt_client = Some(RttEstimator::new(d, now));
        }
        if !was_done && self.hs.done() && r.to_client.is_some() && r.to_server.is_some() {
            self.stats.handshakes += 1;
            if r.instant_ack {
                self.stats.instant_acks += 1;
            }
        }
    }

    /// §4.1: V = Σ (B_i − B_min) per direction, counted over one end-to-end smoothed RTT;
    /// `2·V_client < V_server` → protect server→client, `V_client > 2·V_server` → client→server,
    /// else keep the last decision. A change clears the flowlets.
    fn count_volume(&mut self, now: Time, dir: Direction, len: usize) {
        let b_min = *self.b_min.get_or_insert(len);
        if len < b_min {
            self.b_min = Some(len);
        }
        self.volume[vidx(dir)] += len.saturating_sub(b_min.min(len)) as u64;
        let Some(period) = self.e2e() else {
            return;
        };
        let since = *self.volume_since.get_or_insert(now);
        if now.saturating_duration_since(since) < period {
            return;
        }
        let [vc, vs] = self.volume;
        let next = if 2 * vc < vs {
            Some(Direction::ToClient)
        } else if vc > 2 * vs {
            Some(Direction::FromClient)
        } else {
            self.dominant
        };
        if next != self.dominant {
            self.flowlets.clear();
            self.dominant = next;
        }
        self.volume = [0; 2];
        self.volume_since = Some(now);
    }

    fn process(&mut self, now: Time, finished: Vec<Flowlet>, out: &mut Vec<Action>) {
        let Some(dir) = self.dominant else {
            return;
        };
        for f in finished {
            self.stats.flowlets += 1;
            if f.too_long {
                continue;
            }
            let sent: Vec<u64> = f.sent.iter().map(|p| self.ns(p.at)).collect();
            let replies: Vec<u64> = f.replies.iter().map(|&t| self.ns(t)).collect();
            let srtt = self.receiver_rtt().map_or(0, |d| d.as_nanos() as u64);
            let threshold = if self.sent_evaluated < THRESHOLD_WARMUP {
                2
            } else {
                eliciting_threshold(
                    self.sent_evaluated,
                    self.replied_evaluated,
                    self.cfg.eliciting_cutoff,
                )
            };
            let v = evaluate(
                &sent,
                &replies,
                srtt,
                threshold,
                self.cfg.close_interval,
                self.cfg.loss_penalty_spacing,
            );
            self.sent_evaluated += sent.len() as u64;
            self.replied_evaluated += v.replied as u64;
            for s in &v.rtt_samples {
                let d = Duration::from_nanos(*s);
                if let Some(e) = self.estimator_mut(dir).as_mut() {
                    e.sample(d, now);
                    let (srtt, min) = (e.srtt(), e.min());
                    self.copa.on_rtt(now, d, srtt, min);
                    self.cap_window(srtt);
                    self.stats.rtt_samples += 1;
                }
            }
            let lost: Vec<usize> = v
                .lost
                .into_iter()
                .filter(|&i| !f.sent[i].is_retx && !f.sent[i].repaired)
                .collect();
            self.stats.inferred_lost += lost.len() as u64;
            let originals = f.sent.iter().filter(|p| !p.is_retx && !p.repaired).count();
            self.timing_loss.note(originals, lost.len());
            if !self.cfg.timing_retx && self.cfg.gap_signal && self.gap.measuring() {
                continue;
            }
            // Replies this flow's inference cannot read: forward the flow as it is.
            if !lost.is_empty() && self.timing_loss.unreadable(self.cfg.implausible_loss) {
                self.stats.giveup_unreadable_flow += 1;
                continue;
            }
            // §4.6: an implausible loss estimate (likely a wrong RTT or a very low ACK frequency).
            if lost.len() >= 3 && lost.len() as f64 > self.cfg.implausible_loss * sent.len() as f64
            {
                self.stats.giveup_implausible_loss += 1;
                continue;
            }
            for i in lost {
                let Some(frame) = f.sent[i].frame.as_ref() else {
                    self.stats.not_buffered += 1;
                    continue;
                };
                if self.retransmit(now, dir, frame, out) {
                    self.gap.mark_retransmitted(f.sent[i].seq);
                }
            }
        }
    }

    /// Inject PEMI's one copy of a protected packet unless the budget (§4.6) or the rate
    /// enforcement (§4.5.2) forbids it; the copy is recorded (the receiver may answer it) but
    /// never retransmitted again. Returns whether it was sent.
    fn retransmit(
        &mut self,
        now: Time,
        dir: Direction,
        frame: &[u8],
        out: &mut Vec<Action>,
    ) -> bool {
        // §4.6: retransmissions ≤ 10 % of forwarded protected packets.
        if (self.retransmitted + 1) as f64 > self.cfg.retx_budget * self.forwarded as f64 {
            self.stats.giveup_budget += 1;
            return false;
        }
        // §4.5.2: over the target rate, fast retransmissions stop first.
        if !self.enforcer.may_retransmit() {
            self.stats.giveup_rate_limited += 1;
            return false;
        }
        let len = frame.len();
        out.push(Action::Inject {
            dir,
            frame: frame.to_vec(),
        });
        self.retransmitted += 1;
        self.stats.retransmissions += 1;
        self.enforcer.on_sent(now, true);
        let seq = self.take_seq();
        self.flowlets.on_sent(now, seq, len, None, true);
        if self.cfg.gap_signal
            && let Some(floor) = self.receiver_rtt_floor()
        {
            self.gap.on_sent(now, seq, None, true, floor);
        }
        true
    }

    /// The Copa window never exceeds twice what the flow sends per smoothed RTT
    /// ([`CopaWindow::cap`]).
    fn cap_window(&mut self, srtt: Duration) {
        if let Some(rate) = self.enforcer.last_rate() {
            self.copa.cap(2.0 * rate * srtt.as_secs_f64());
        }
    }

    fn take_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// A reply's length against the gap signal: retransmit the packet it names at once, and
    /// say until when to hold the reply (none when the gap signal is off or nothing is open).
    fn on_reply_len(
        &mut self,
        now: Time,
        dir: Direction,
        len: usize,
        out: &mut Vec<Action>,
    ) -> Option<Time> {
        let floor = self.receiver_rtt_floor().filter(|_| self.cfg.gap_signal)?;
        let r = self.gap.on_reply(now, len, floor);
        let mut hold = r.hold_until;
        self.stats.gap_closed += u64::from(r.closed);
        self.stats.gap_signals += u64::from(!r.walked_back && (r.unnamed || r.lost.is_some()));
        let mut repairing = false;
        if let Some(lost) = r.lost {
            self.stats.inferred_lost += 1;
            repairing = self.retransmit(now, dir, &lost.frame, out);
            if repairing {
                self.stats.gap_retransmissions += 1;
                self.stats.gap_walk_backs += u64::from(r.walked_back);
                self.stats.gap_timer_paired += u64::from(r.timer_paired);
                self.flowlets.mark_repaired(lost.seq);
            } else {
                // Nothing repairs the gap: let the sender see it.
                self.gap.cancel_hold();
                hold = None;
            }
        }
        // Named with `lost`, and only worth sending when `lost` was.
        for also in if repairing { &r.also[..] } else { &[] } {
            if !self.retransmit(now, dir, &also.frame, out) {
                break;
            }
            self.stats.gap_retransmissions += 1;
            if r.timer_paired {
                self.stats.gap_timer_paired += 1;
            } else {
                self.stats.gap_paired += 1;
            }
            self.flowlets.mark_repaired(also.seq);
        }
        hold
    }

    fn housekeeping(&mut self, now: Time, out: &mut Vec<Action>) {
        if let Some(rtt) = self.receiver_rtt() {
            let done = self
                .flowlets
                .finish_overdue(now, rtt, self.cfg.ack_delay_slack);
            self.process(now, done, out);
        }
        if let Some(e2e) = self.e2e() {
            // A flight's lost last packet is revealed by the next flight, up to an end-to-end
            // RTT later.
            self.gap.set_retention(e2e * 2);
        }
        if let (Some(e2e), Some(side)) = (self.e2e(), self.dominant)
            && let Some(est) = self.estimator(side)
        {
            let target = self.copa.target_rate(est.min());
            self.enforcer.tick(now, target, e2e, self.retransmitted > 0);
        }
    }
}

impl FlowEngine for PemiEngine {
    fn on_packet(&mut self, now: Time, dir: Direction, pkt: &Packet<'_>, out: &mut Vec<Action>) {
        let payload = pkt.payload;
        if !self.hs.done() {
            self.on_handshake(now, dir, payload);
        } else if let [PacketKind::Short { spin }] = coalesced(payload, 1).as_slice()
            && let Some(s) = self.spin.on_spin(now, dir, *spin)
            && let Some(cur) = self.rtt_to(s.side)
            && s.rtt >= cur / SPIN_PLAUSIBLE
            && s.rtt <= cur * SPIN_PLAUSIBLE
        {
            self.stats.spin_samples += 1;
            keep_min(&mut self.spin_min[vidx(s.side)], s.rtt);
            self.on_calibration_sample(now, s.side, s.rtt);
        }
        self.count_volume(now, dir, payload.len());
        let (Some(dominant), Some(rtt)) = (self.dominant, self.receiver_rtt()) else {
            return;
        };
        if dir == dominant {
            self.stats.protected += 1;
            self.forwarded += 1;
            self.enforcer.on_sent(now, false);
            // One copy of the captured frame, shared by the flowlet and the gap signal.
            let frame: Option<Arc<[u8]>> = pkt.whole_frame.then(|| pkt.frame.into());
            let seq = self.take_seq();
            if self.cfg.gap_signal
                && let Some(floor) = self.receiver_rtt_floor()
            {
                self.gap.on_sent(now, seq, frame.clone(), false, floor);
            }
            if self.flowlets.on_sent(now, seq, payload.len(), frame, false) == SentOutcome::TooLong
            {
                self.stats.giveup_flowlet_too_long += 1;
            }
        } else {
            let hold = self.on_reply_len(now, dominant, payload.len(), out);
            match self.flowlets.on_reply(now, rtt) {
                ReplyOutcome::Excluded => self.stats.replies_excluded += 1,
                ReplyOutcome::Assigned(done) => {
                    self.stats.replies_assigned += 1;
                    self.process(now, done, out);
                }
            }
            let enforced = self
                .enforcer
                .reply_delay()
                .filter(|_| self.cfg.enforce_delay)
                .and_then(|d| {
                    self.replies_while_enforcing += 1;
                    self.cfg
                        .reply_enforcement
                        .hold(d, self.replies_while_enforcing)
                })
                .map(|d| now + d);
            if enforced.is_some() {
                self.stats.replies_delayed += 1;
            }
            if hold.is_some() {
                self.stats.replies_held += 1;
            }
            if let Some(until) = enforced.max(hold) {
                out.push(Action::Delay { until });
            }
        }
        self.housekeeping(now, out);
    }

    fn handle_timeout(&mut self, now: Time, out: &mut Vec<Action>) {
        self.housekeeping(now, out);
    }

    fn poll_timeout(&self) -> Option<Time> {
        let rtt = self.receiver_rtt()?;
        self.flowlets.next_deadline(rtt, self.cfg.ack_delay_slack)
    }

    fn memory_bytes(&self) -> usize {
        self.flowlets.memory_bytes() + self.gap.memory_bytes()
    }
}

/// Does this UDP payload start a QUIC connection (a long-header Initial, App. A)? The core
/// creates a PEMI engine only for such flows; other UDP is forwarded untouched.
pub fn starts_connection(payload: &[u8]) -> bool {
    matches!(
        coalesced(payload, 1).first(),
        Some(PacketKind::Initial { .. })
    )
}

/// The gap signal's settings from PEMI's.
fn gap_config(cfg: &PemiConfig) -> GapConfig {
    GapConfig {
        max_walk_back: cfg.gap_walk_back,
        second_guess_share: cfg.gap_second_guess_share,
        ..GapConfig::default()
    }
}

#[cfg(test)]
mod tests;

//! Black-box congestion control (PEMI §4.5): a Copa-derived window updated on every RTT update
//! with a Δt-scaled step (§4.5.1), a target rate `CWND / RTT_min` (eq. 2) and its enforcement by
//! stopping retransmissions, then delaying replies, doubling the perturbation when the sender has
//! not slowed after one end-to-end RTT (§4.5.2).

use std::time::Duration;

use crate::Time;

/// Smallest window (packets).
pub const MIN_CWND: f64 = 2.0;
/// Initial window (packets).
pub const INIT_CWND: f64 = 10.0;

/// The Copa-derived window (Copa: Arun & Balakrishnan, NSDI '18, as adapted by PEMI §4.5.1).
#[derive(Debug, Clone)]
pub struct CopaWindow {
    cwnd: f64,
    delta: f64,
    slow_start: bool,
    velocity: f64,
    last_update: Option<Time>,
    /// Direction of the last RTT-long period (true = up) and how many periods it persisted.
    dir_up: Option<bool>,
    same_dir_periods: u32,
    period_start: Option<Time>,
    period_dir_up: Option<bool>,
    /// Recent samples for the standing RTT (min over srtt/2).
    recent: std::collections::VecDeque<(Time, Duration)>,
}

/// Samples kept for the standing RTT (cap on state).
const RECENT_CAP: usize = 256;

impl CopaWindow {
    /// A window with aggressiveness δ.
    pub fn new(delta: f64) -> Self {
        Self {
            cwnd: INIT_CWND,
            delta,
            slow_start: true,
            velocity: 1.0,
            last_update: None,
            dir_up: None,
            same_dir_periods: 0,
            period_start: None,
            period_dir_up: None,
            recent: std::collections::VecDeque::new(),
        }
    }

    /// The window in packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// Still in slow start (no decrease decided yet).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Copa's velocity parameter ν.
    pub fn velocity(&self) -> f64 {
        self.velocity
    }

    /// One RTT update: `sample` is the new RTT sample, `srtt` the smoothed RTT and `min_rtt` the
    /// windowed minimum. Copa's decision: standing RTT = min over the last srtt/2, queueing delay
    /// `d_q = RTT_standing − RTT_min`, target rate `1 / (δ · d_q)`; the window grows when the current
    /// rate `CWND / RTT_standing` is at most the target, else shrinks. The step is
    /// `min(Δt, srtt) / srtt · ν / δ` packets (§4.5.1), Δt since the previous update (the first
    /// update only seeds Δt).
    pub fn on_rtt(&mut self, now: Time, sample: Duration, srtt: Duration, min_rtt: Duration) {
        self.recent.push_back((now, sample));
        while self.recent.len() > RECENT_CAP
            || self
                .recent
                .front()
                .is_some_and(|&(t, _)| now.saturating_duration_since(t) > srtt / 2)
        {
            self.recent.pop_front();
        }
        let standing = self
            .recent
            .iter()
            .map(|&(_, r)| r)
            .min()
            .unwrap_or(sample)
            .max(Duration::from_micros(1));
        let dq = standing.saturating_sub(min_rtt).as_secs_f64();
        let rate = self.cwnd / standing.as_secs_f64();
        let up = dq <= 0.0 || rate <= 1.0 / (self.delta * dq);
        let srtt_s = srtt.as_secs_f64().max(1e-6);
        let dt = self
            .last_update
            .map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        self.last_update = Some(now);
        let frac = dt.min(srtt_s) / srtt_s;
        let step = frac * self.velocity / self.delta;
        if up && self.slow_start {
            // Copa's slow start: the window doubles per RTT until the first decrease.
            self.cwnd += frac * self.cwnd;
        } else if up {
            self.cwnd += step;
        } else {
            self.slow_start = false;
            self.cwnd = (self.cwnd - step).max(MIN_CWND);
        }
        self.update_velocity(now, srtt, up);
    }

    /// Copa's velocity: doubles each RTT once the direction persisted three RTTs; resets to 1 on
    /// a change of direction.
    fn update_velocity(&mut self, now: Time, srtt: Duration, up: bool) {
        if self.period_dir_up != Some(up) && self.period_dir_up.is_some() {
            self.velocity = 1.0;
            self.same_dir_periods = 0;
            self.period_start = Some(now);
            self.period_dir_up = Some(up);
            return;
        }
        self.period_dir_up = Some(up);
        let start = *self.period_start.get_or_insert(now);
        if now.saturating_duration_since(start) >= srtt {
            self.period_start = Some(now);
            if self.dir_up == Some(up) {
                self.same_dir_periods += 1;
                if self.same_dir_periods >= 3 {
                    self.velocity = (self.velocity * 2.0).min(1024.0);
                }
            } else {
                self.same_dir_periods = 0;
                self.velocity = 1.0;
            }
            self.dir_up = Some(up);
        }
    }

    /// Keep the window within `max` packets: what an application-limited sender actually uses
    /// (see [`Enforcer::last_rate`]). Why (our addition; Copa and BBR do not grow the window of
    /// an application-limited sender either): a light flow never fills the window, so slow start
    /// would grow it without bound, and the first small standing-RTT excess (a mismatched reply
    /// is enough) would then bring it down with doubling velocity all the way to the minimum —
    /// below the rate the flow was sending at, which the enforcement then punishes.
    pub fn cap(&mut self, max: f64) {
        self.cwnd = self.cwnd.min(max.max(INIT_CWND));
    }

    /// The target sending rate in packets per second: `CWND / RTT_min` (eq. 2).
    pub fn target_rate(&self, min_rtt: Duration) -> f64 {
        self.cwnd / min_rtt.as_secs_f64().max(1e-6)
    }
}

/// The enforcement level (§4.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Within the target rate.
    Normal,
    /// Over the target: no fast retransmissions.
    NoRetransmit,
    /// Still over the target without retransmissions: replies are delayed by `delay`.
    DelayReplies {
        /// Current perturbation.
        delay: Duration,
    },
}

/// The feedback loop measuring the flow's sending rate (forwarded + retransmitted protected
/// packets) once per end-to-end RTT and choosing the [`Level`].
#[derive(Debug, Clone)]
pub struct Enforcer {
    level: Level,
    period_start: Option<Time>,
    forwarded: u64,
    retransmitted: u64,
    /// Forwarding rate when delaying started or was last doubled.
    rate_at_escalation: f64,
    escalated_at: Option<Time>,
    /// Total rate (packets/s) of the last closed period.
    last_rate: Option<f64>,
    allow_delay: bool,
    max_delay: Duration,
}

impl Enforcer {
    /// An enforcer; `allow_delay` is false in sniff mode (only retransmissions can be stopped).
    pub fn new(allow_delay: bool, max_delay: Duration) -> Self {
        Self {
            level: Level::Normal,
            period_start: None,
            forwarded: 0,
            retransmitted: 0,
            rate_at_escalation: 0.0,
            escalated_at: None,
            last_rate: None,
            allow_delay,
            max_delay,
        }
    }

    /// The current level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Packets per second the flow sent (forwarded + retransmitted) in the last closed period.
    pub fn last_rate(&self) -> Option<f64> {
        self.last_rate
    }

    /// Retransmissions are allowed.
    pub fn may_retransmit(&self) -> bool {
        self.level == Level::Normal
    }

    /// The delay to apply to a reply now, if any.
    pub fn reply_delay(&self) -> Option<Duration> {
        match self.level {
            Level::DelayReplies { delay } => Some(delay),
            _ => None,
        }
    }

    /// Count a forwarded protected packet (`retx` for PEMI's own retransmissions).
    pub fn on_sent(&mut self, now: Time, retx: bool) {
        self.period_start.get_or_insert(now);
        if retx {
            self.retransmitted += 1;
        } else {
            self.forwarded += 1;
        }
    }

    /// Close the measurement period when one end-to-end RTT has passed and re-decide the level
    /// against `target` (packets/s). A sender over the target first loses its retransmissions; if
    /// its forwarding alone is still over, replies are delayed by `e2e_rtt / 8` (past QUIC's 9/8
    /// time threshold, RFC 9002 §6.1.2); if it has not slowed one RTT later the delay doubles.
    /// Replies are only delayed for a flow PEMI has `intervened` in (retransmitted for): the
    /// window exists for fairness because PEMI's retransmissions hide losses from the sender
    /// (§4.5); a flow it never helped sees every loss itself.
    pub fn tick(&mut self, now: Time, target: f64, e2e_rtt: Duration, intervened: bool) {
        let Some(start) = self.period_start else {
            return;
        };
        let period = now.saturating_duration_since(start);
        if period < e2e_rtt.max(Duration::from_millis(1)) {
            return;
        }
        let secs = period.as_secs_f64();
        let fwd_rate = self.forwarded as f64 / secs;
        let total = (self.forwarded + self.retransmitted) as f64 / secs;
        self.last_rate = Some(total);
        self.period_start = Some(now);
        self.forwarded = 0;
        self.retransmitted = 0;
        if total <= target {
            self.level = Level::Normal;
            self.escalated_at = None;
            return;
        }
        self.level = match self.level {
            _ if fwd_rate <= target || !self.allow_delay || !intervened => Level::NoRetransmit,
            Level::DelayReplies { delay } => {
                let slowed = fwd_rate < self.rate_at_escalation;
                let due = self
                    .escalated_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= e2e_rtt);
                if !slowed && due {
                    self.rate_at_escalation = fwd_rate;
                    self.escalated_at = Some(now);
                    Level::DelayReplies {
                        delay: (delay * 2).min(self.max_delay),
                    }
                } else {
                    Level::DelayReplies { delay }
                }
            }
            _ => {
                self.rate_at_escalation = fwd_rate;
                self.escalated_at = Some(now);
                Level::DelayReplies {
                    delay: (e2e_rtt / 8).clamp(Duration::from_millis(1), self.max_delay),
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn window_slow_start_then_copa_steps() {
        let t0 = Time::ZERO;
        let mut c = CopaWindow::new(0.5);
        // RTT at its minimum: slow start, the window compounds to about 2.5× in one RTT of
        // 1 ms updates (1.05^19).
        for i in 0..20 {
            c.on_rtt(t0 + ms(i), ms(20), ms(20), ms(20));
        }
        assert!(c.in_slow_start());
        assert!(
            (c.cwnd() - INIT_CWND * 1.05f64.powi(19)).abs() < 1e-6,
            "{}",
            c.cwnd()
        );
        // Queueing delay of 20 ms: target rate 1/(0.5·0.02) = 100 pkt/s, current rate ≫ 100:
        // slow start ends and each update takes ν/δ · 1/40 = 0.05 packet.
        // (The standing RTT, a minimum over srtt/2, needs 20 ms to forget the old samples.)
        for i in 20..45 {
            c.on_rtt(t0 + ms(i), ms(40), ms(40), ms(20));
        }
        assert!(!c.in_slow_start());
        let high = c.cwnd();
        for i in 45..85 {
            c.on_rtt(t0 + ms(i), ms(40), ms(40), ms(20));
        }
        assert!((high - c.cwnd() - 2.0).abs() < 1e-6, "{high} {}", c.cwnd());
        assert_eq!(c.velocity(), 1.0);
        // Queue drained: linear growth, ν/δ = 2 packets per RTT.
        let low = c.cwnd();
        for i in 85..105 {
            c.on_rtt(t0 + ms(i), ms(20), ms(20), ms(20));
        }
        assert!((c.cwnd() - low - 2.0).abs() < 1e-6, "{low} {}", c.cwnd());
        // Several RTTs in the same direction: the velocity doubles.
        for i in 105..300 {
            c.on_rtt(t0 + ms(i), ms(20), ms(20), ms(20));
        }
        assert!(c.velocity() > 1.0);
    }

    #[test]
    fn step_is_scaled_by_elapsed_time() {
        let t0 = Time::ZERO;
        let mut a = CopaWindow::new(0.5);
        // A queueing sample ends slow start (Δt = 0 on the first update: no step).
        a.on_rtt(t0, ms(40), ms(20), ms(20));
        assert!(!a.in_slow_start());
        let base = a.cwnd();
        // Δt = 5 ms of a 20 ms srtt: a quarter of ν/δ = 0.5 packet.
        a.on_rtt(t0 + ms(5), ms(20), ms(20), ms(20));
        assert!((a.cwnd() - base - 0.5).abs() < 1e-9);
        // Δt ≥ srtt is capped at one full ν/δ step.
        let b = a.cwnd();
        a.on_rtt(t0 + ms(500), ms(20), ms(20), ms(20));
        assert!((a.cwnd() - b - 2.0).abs() < 1e-9);
        assert!((a.target_rate(ms(20)) - a.cwnd() / 0.02).abs() < 1e-6);
    }

    #[test]
    fn enforcement_escalates_and_doubles() {
        let t0 = Time::ZERO;
        let e2e = ms(50);
        let mut e = Enforcer::new(true, ms(200));
        // 100 packets + 20 retransmissions per 50 ms = 2400 pkt/s against a target of 2200:
        // only retransmissions are stopped.
        let mut t = t0;
        let run = |e: &mut Enforcer, t: &mut Time, fwd: u64, retx: u64, target: f64| {
            for _ in 0..fwd {
                e.on_sent(*t, false);
            }
            for _ in 0..retx {
                e.on_sent(*t, true);
            }
            *t += e2e;
            e.tick(*t, target, e2e, true);
        };
        run(&mut e, &mut t, 100, 20, 2200.0);
        assert_eq!(e.level(), Level::NoRetransmit);
        assert!(!e.may_retransmit());
        // Forwarding alone is over the target: replies delayed by e2e/8.
        run(&mut e, &mut t, 100, 0, 1000.0);
        assert_eq!(
            e.level(),
            Level::DelayReplies {
                delay: Duration::from_micros(6250)
            }
        );
        // Not slowed after one RTT: the perturbation doubles, then doubles again.
        run(&mut e, &mut t, 100, 0, 1000.0);
        assert_eq!(e.reply_delay(), Some(Duration::from_micros(12500)));
        run(&mut e, &mut t, 100, 0, 1000.0);
        assert_eq!(e.reply_delay(), Some(ms(25)));
        // Slowed down (but still over): the delay is kept.
        run(&mut e, &mut t, 80, 0, 1000.0);
        assert_eq!(e.reply_delay(), Some(ms(25)));
        // Under the target: back to normal.
        run(&mut e, &mut t, 40, 0, 1000.0);
        assert_eq!(e.level(), Level::Normal);
        // Sniff mode never delays.
        let mut s = Enforcer::new(false, ms(200));
        run(&mut s, &mut t, 100, 0, 1000.0);
        assert_eq!(s.level(), Level::NoRetransmit);
        // Nor does a flow PEMI never retransmitted for.
        let mut n = Enforcer::new(true, ms(200));
        for _ in 0..100 {
            n.on_sent(t, false);
        }
        t += e2e;
        n.tick(t, 1000.0, e2e, false);
        assert_eq!(n.level(), Level::NoRetransmit);
    }
}

//! PACUBIC: path-aware CUBIC congestion control (Sidekick (NSDI '24) §4.3.2 and Appendix A).
//!
//! CUBIC (RFC 9438) grows its window along `W(T) = C·(T − K)³ + W_max` with
//! `K = ∛(W_max·(1 − β)/C)` and reduces it multiplicatively by `β` on a congestion event.
//! PACUBIC keeps one end-to-end window but picks the constants by *where* the last congestion
//! event was detected:
//!
//! - end-to-end (an ACK of the base connection): `β = β* = 0.7`, `C = C* = 0.4`;
//! - near segment (a quACK from the sidekick proxy): `β = 1 − r(1 − β*)` and `C = C*/r³`, where
//!   `r` is the near-segment RTT over the end-to-end RTT. The reduction is `r` times smaller and
//!   `K = r^{4/3}·K*`, so the window regrows faster (App. A).
//!
//! With `r = 1` a quACK-detected event is exactly a CUBIC event. The controller is sans-IO: every
//! entry point takes an explicit `now`.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use sidekick::pacubic::{CongestionSource, Pacubic, PacubicConfig};
//!
//! let t0 = Instant::now();
//! let mut cc = Pacubic::new(PacubicConfig { mss: 1000, initial_window: 100_000, ..Default::default() });
//! cc.set_rtt_ratio(0.1); // near RTT is a tenth of the end-to-end RTT
//! cc.on_congestion_event(t0, t0, CongestionSource::Quack);
//! // β = 1 − 0.1·0.3 = 0.97: the window loses 3 %, not 30 %.
//! assert_eq!(cc.window(), 97_000);
//! ```

use std::time::{Duration, Instant};

/// CUBIC's multiplicative decrease factor for end-to-end events (RFC 9438 §4.6; Sidekick (NSDI '24) §4.3.2).
pub const BETA_STAR: f64 = 0.7;
/// CUBIC's scaling constant for end-to-end events (RFC 9438 §4.2; Sidekick (NSDI '24) §4.3.2).
pub const C_STAR: f64 = 0.4;
/// Smallest RTT ratio used in the formulas: `C*/r³` grows without bound as `r → 0`.
pub const MIN_RTT_RATIO: f64 = 0.01;

/// Where a congestion event was detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionSource {
    /// Loss reported by the end-to-end connection (its ACKs or timers).
    EndToEnd,
    /// Loss on the near path segment, detected from a sidekick quACK.
    Quack,
}

/// PACUBIC parameters. Windows are in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacubicConfig {
    /// Maximum segment size in bytes: CUBIC's formulas count segments.
    pub mss: u64,
    /// Initial congestion window in bytes.
    pub initial_window: u64,
    /// Minimum congestion window in bytes.
    pub minimum_window: u64,
    /// β* (end-to-end multiplicative decrease).
    pub beta_star: f64,
    /// C* (end-to-end cubic scaling constant).
    pub c_star: f64,
    /// RFC 9438 §4.7 fast convergence: release bandwidth when `W_max` is shrinking.
    pub fast_convergence: bool,
}

impl Default for PacubicConfig {
    fn default() -> Self {
        Self {
            mss: 1200,
            initial_window: 10 * 1200,
            minimum_window: 2 * 1200,
            beta_star: BETA_STAR,
            c_star: C_STAR,
            fast_convergence: true,
        }
    }
}

/// The constants in force for the current congestion epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicConstants {
    /// Multiplicative decrease factor applied at the start of the epoch.
    pub beta: f64,
    /// Cubic scaling constant used for growth during the epoch.
    pub c: f64,
}

impl CubicConstants {
    /// Constants for an event from `source` with RTT ratio `r` (Sidekick (NSDI '24) §4.3.2).
    pub fn for_event(source: CongestionSource, r: f64, beta_star: f64, c_star: f64) -> Self {
        match source {
            CongestionSource::EndToEnd => Self {
                beta: beta_star,
                c: c_star,
            },
            CongestionSource::Quack => {
                let r = r.clamp(MIN_RTT_RATIO, 1.0);
                Self {
                    beta: 1.0 - r * (1.0 - beta_star),
                    c: c_star / (r * r * r),
                }
            }
        }
    }
}

/// State of the current congestion-avoidance epoch.
#[derive(Debug, Clone, Copy)]
struct Epoch {
    start: Instant,
    /// `W_max` in segments.
    w_max: f64,
    /// `K` in seconds.
    k: f64,
    constants: CubicConstants,
    /// Reno-friendly estimate `W_est` in segments (RFC 9438 §4.3).
    w_est: f64,
}

/// Counters kept by the controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacubicStats {
    /// Congestion events that reduced the window after an end-to-end loss.
    pub e2e_events: u64,
    /// Congestion events that reduced the window after a quACK-detected loss.
    pub quack_events: u64,
    /// Events ignored because they belonged to the current recovery period.
    pub events_in_recovery: u64,
}

/// The PACUBIC congestion controller (sans-IO).
#[derive(Debug, Clone)]
pub struct Pacubic {
    config: PacubicConfig,
    /// Congestion window in bytes (fractional so slow per-ACK growth is not lost to rounding).
    cwnd: f64,
    ssthresh: f64,
    rtt_ratio: f64,
    epoch: Option<Epoch>,
    /// Constants chosen at the last reduction; kept while no epoch is running.
    last_constants: CubicConstants,
    /// Packets sent before this instant belong to the current recovery period.
    recovery_start: Option<Instant>,
    last_source: Option<CongestionSource>,
    stats: PacubicStats,
}

impl Pacubic {
    /// A controller in slow start with the configured initial window.
    pub fn new(config: PacubicConfig) -> Self {
        Self {
            cwnd: config.initial_window as f64,
            ssthresh: f64::INFINITY,
            rtt_ratio: 1.0,
            epoch: None,
            last_constants: CubicConstants {
                beta: config.beta_star,
                c: config.c_star,
            },
            recovery_start: None,
            last_source: None,
            stats: PacubicStats::default(),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PacubicConfig {
        &self.config
    }

    /// Current congestion window in bytes.
    pub fn window(&self) -> u64 {
        self.cwnd as u64
    }

    /// Slow-start threshold in bytes (`u64::MAX` before the first event).
    pub fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() {
            self.ssthresh as u64
        } else {
            u64::MAX
        }
    }

    /// Whether the controller is in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// The RTT ratio `r` (near segment / end to end) used for the next quACK-detected event.
    pub fn rtt_ratio(&self) -> f64 {
        self.rtt_ratio
    }

    /// Sets `r`; values are clamped to `[MIN_RTT_RATIO, 1]`, non-finite values are ignored.
    pub fn set_rtt_ratio(&mut self, r: f64) {
        if r.is_finite() {
            self.rtt_ratio = r.clamp(MIN_RTT_RATIO, 1.0);
        }
    }

    /// Where the last congestion event came from.
    pub fn last_source(&self) -> Option<CongestionSource> {
        self.last_source
    }

    /// The constants of the current (or last) epoch.
    pub fn constants(&self) -> CubicConstants {
        self.epoch.map_or(self.last_constants, |e| e.constants)
    }

    /// `K` of the current epoch in seconds, if one is running.
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }

    /// `W_max` of the current epoch in bytes, if one is running.
    pub fn w_max(&self) -> Option<u64> {
        self.epoch
            .map(|e| (e.w_max * self.config.mss as f64) as u64)
    }

    /// Counters.
    pub fn stats(&self) -> PacubicStats {
        self.stats
    }

    /// The cubic curve of the current epoch `W(T) = C·(T − K)³ + W_max`, in bytes, at `T` after
    /// the epoch start (Sidekick (NSDI '24) §4.3.2). `None` outside congestion avoidance.
    pub fn cubic_window_at(&self, t: Duration) -> Option<u64> {
        self.epoch
            .map(|e| (Self::w_cubic(&e, t.as_secs_f64()) * self.config.mss as f64) as u64)
    }

    fn w_cubic(e: &Epoch, t: f64) -> f64 {
        let d = t - e.k;
        e.constants.c * d * d * d + e.w_max
    }

    /// Whether a packet sent at `sent` belongs to the current recovery period.
    pub fn in_recovery(&self, sent: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent <= start)
    }

    /// `bytes` newly acknowledged at `now`, with smoothed end-to-end RTT `rtt`.
    ///
    /// `sent` is the send time of the newest acknowledged packet: ACKs of packets sent during
    /// recovery do not grow the window (RFC 9002 §7.3.2).
    pub fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, rtt: Duration) {
        if self.in_recovery(sent) {
            return;
        }
        let mss = self.config.mss as f64;
        if self.in_slow_start() {
            self.cwnd += bytes as f64;
            return;
        }
        let cwnd_seg = self.cwnd / mss;
        // Congestion avoidance entered without a reduction (ssthresh reached): the epoch
        // starts here with W_max = cwnd and K = 0.
        let epoch = self.epoch.get_or_insert(Epoch {
            start: now,
            w_max: cwnd_seg,
            k: 0.0,
            constants: self.last_constants,
            w_est: cwnd_seg,
        });
        let t = now.saturating_duration_since(epoch.start).as_secs_f64();
        let acked_seg = bytes as f64 / mss;
        // RFC 9438 §4.3: Reno-friendly region, α = 3(1 − β)/(1 + β).
        let beta = epoch.constants.beta;
        let alpha = 3.0 * (1.0 - beta) / (1.0 + beta);
        epoch.w_est += alpha * acked_seg / cwnd_seg.max(1.0);
        // RFC 9438 §4.4: target is W(t + RTT), clamped to [cwnd, 1.5·cwnd].
        let target = Self::w_cubic(epoch, t + rtt.as_secs_f64()).clamp(cwnd_seg, 1.5 * cwnd_seg);
        let new_seg = if Self::w_cubic(epoch, t) < epoch.w_est {
            epoch.w_est.max(cwnd_seg)
        } else {
            cwnd_seg + (target - cwnd_seg) * acked_seg / cwnd_seg.max(1.0)
        };
        self.cwnd = new_seg * mss;
    }

    /// A congestion event detected at `now` for a packet sent at `sent`.
    ///
    /// At most one reduction happens per recovery period (a packet sent before the last
    /// reduction does not reduce again). Returns whether the window was reduced.
    pub fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        source: CongestionSource,
    ) -> bool {
        if self.in_recovery(sent) {
            self.stats.events_in_recovery += 1;
            return false;
        }
        let constants = CubicConstants::for_event(
            source,
            self.rtt_ratio,
            self.config.beta_star,
            self.config.c_star,
        );
        let mss = self.config.mss as f64;
        let cwnd_seg = self.cwnd / mss;
        // RFC 9438 §4.7 fast convergence.
        let shrinking = self.epoch.is_some_and(|e| cwnd_seg < e.w_max);
        let w_max = if self.config.fast_convergence && shrinking {
            cwnd_seg * (1.0 + constants.beta) / 2.0
        } else {
            cwnd_seg
        };
        let reduced = (self.cwnd * constants.beta).max(self.config.minimum_window as f64);
        self.cwnd = reduced;
        self.ssthresh = reduced;
        // Sidekick (NSDI '24) §4.3.2: K = ∛(W_max(1 − β)/C), with the event's β and C.
        let k = (w_max * (1.0 - constants.beta) / constants.c).cbrt();
        self.epoch = Some(Epoch {
            start: now,
            w_max,
            k,
            constants,
            w_est: reduced / mss,
        });
        self.last_constants = constants;
        self.recovery_start = Some(now);
        self.last_source = Some(source);
        match source {
            CongestionSource::EndToEnd => self.stats.e2e_events += 1,
            CongestionSource::Quack => self.stats.quack_events += 1,
        }
        true
    }

    /// Persistent congestion (RFC 9002 §7.6): collapse to the minimum window.
    pub fn on_persistent_congestion(&mut self, now: Instant) {
        self.cwnd = self.config.minimum_window as f64;
        self.epoch = None;
        self.recovery_start = Some(now);
        self.last_source = Some(CongestionSource::EndToEnd);
    }

    /// A new maximum datagram size (e.g. after path MTU discovery).
    pub fn on_mtu_update(&mut self, mss: u64) {
        if mss == 0 {
            return;
        }
        self.config.mss = mss;
        // Saturating: the MSS comes from the caller (the C API passes any u64 through).
        self.config.minimum_window = self.config.minimum_window.max(mss.saturating_mul(2));
        self.cwnd = self.cwnd.max(self.config.minimum_window as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn cc(window: u64) -> Pacubic {
        Pacubic::new(PacubicConfig {
            mss: MSS,
            initial_window: window,
            minimum_window: 2 * MSS,
            fast_convergence: false,
            ..PacubicConfig::default()
        })
    }

    /// Found by the C API fuzz target (`c_api_calls`): `sk_pacubic_on_mtu_update` with an MSS
    /// above `u64::MAX / 2` overflowed computing the two-segment minimum window.
    #[test]
    fn an_absurd_mtu_update_saturates() {
        let mut c = cc(10 * MSS);
        c.on_mtu_update(u64::MAX);
        assert_eq!(c.config.minimum_window, u64::MAX);
        assert!(c.window() >= u64::MAX / 2);
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn constants_follow_the_paper() {
        let e2e = CubicConstants::for_event(CongestionSource::EndToEnd, 0.1, 0.7, 0.4);
        assert_eq!(e2e, CubicConstants { beta: 0.7, c: 0.4 });
        let q = CubicConstants::for_event(CongestionSource::Quack, 0.1, 0.7, 0.4);
        assert!(close(q.beta, 0.97, 1e-12));
        assert!(close(q.c, 400.0, 1e-9));
        let q1 = CubicConstants::for_event(CongestionSource::Quack, 1.0, 0.7, 0.4);
        assert_eq!(q1, e2e);
    }

    #[test]
    fn r_equal_one_reduces_to_cubic() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(50);
        let mut cubic = cc(100 * MSS);
        let mut pa = cc(100 * MSS);
        pa.set_rtt_ratio(1.0);
        assert!(cubic.on_congestion_event(t0, t0, CongestionSource::EndToEnd));
        assert!(pa.on_congestion_event(t0, t0, CongestionSource::Quack));
        assert_eq!(cubic.window(), 70 * MSS);
        assert_eq!(pa.window(), cubic.window());
        assert_eq!(pa.k(), cubic.k());
        // Identical ACK streams give identical windows at every step.
        let mut now = t0;
        for _ in 0..2000 {
            now += Duration::from_millis(5);
            let sent = now.checked_sub(rtt).unwrap();
            cubic.on_ack(now, sent, MSS, rtt);
            pa.on_ack(now, sent, MSS, rtt);
            assert_eq!(pa.window(), cubic.window());
        }
        assert!(cubic.window() > 70 * MSS);
    }

    #[test]
    fn cubic_curve_values_at_specific_times() {
        let t0 = Instant::now();
        let mut cubic = cc(100 * MSS);
        cubic.on_congestion_event(t0, t0, CongestionSource::EndToEnd);
        // K* = ∛(100·0.3/0.4) = ∛75 ≈ 4.2172 s.
        let k_star = 75f64.cbrt();
        assert!(close(cubic.k().unwrap(), k_star, 1e-9));
        // W(0) = β*·W_max = 70 segments, W(K) = W_max = 100, W(K+1) = 100 + 0.4.
        assert_eq!(cubic.cubic_window_at(Duration::ZERO).unwrap(), 70 * MSS);
        let at_k = cubic
            .cubic_window_at(Duration::from_secs_f64(k_star))
            .unwrap();
        assert!(at_k.abs_diff(100 * MSS) <= 1);
        let after = cubic
            .cubic_window_at(Duration::from_secs_f64(k_star + 1.0))
            .unwrap();
        assert!(after.abs_diff(100_400) <= 1);
    }

    #[test]
    fn small_r_reduces_gently_and_regrows_faster() {
        let t0 = Instant::now();
        let r = 0.1;
        let mut cubic = cc(100 * MSS);
        let mut pa = cc(100 * MSS);
        pa.set_rtt_ratio(r);
        cubic.on_congestion_event(t0, t0, CongestionSource::EndToEnd);
        pa.on_congestion_event(t0, t0, CongestionSource::Quack);
        // β = 1 − r(1 − β*) = 0.97 → 97 segments; CUBIC drops to 70.
        assert_eq!(pa.window(), 97 * MSS);
        assert_eq!(cubic.window(), 70 * MSS);
        // K = r^{4/3}·K* (App. A).
        let k_star = cubic.k().unwrap();
        assert!(close(pa.k().unwrap(), r.powf(4.0 / 3.0) * k_star, 1e-9));
        // W(T) = C(T − K)³ + W_max with C = C*/r³ = 400: at T = 0.5 s,
        // 400·(0.5 − K)³ + 100 segments.
        let k = pa.k().unwrap();
        let expected = (400.0 * (0.5 - k).powi(3) + 100.0) * MSS as f64;
        let got = pa.cubic_window_at(Duration::from_millis(500)).unwrap();
        assert!(close(got as f64, expected, 1.0), "{got} vs {expected}");
        // The PACUBIC curve regains W_max at K ≈ 0.195 s, CUBIC only at ≈ 4.2 s.
        assert!(pa.cubic_window_at(Duration::from_millis(200)).unwrap() >= 100 * MSS);
        // CUBIC: 0.4·(0.2 − 4.217)³ + 100 ≈ 74.07 segments.
        let cubic_at = cubic.cubic_window_at(Duration::from_millis(200)).unwrap();
        assert!(cubic_at.abs_diff(74_075) <= 10, "{cubic_at}");
    }

    #[test]
    fn window_evolution_under_acks_tracks_the_curve() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(20);
        let mut cubic = cc(100 * MSS);
        let mut pa = cc(100 * MSS);
        pa.set_rtt_ratio(0.2);
        cubic.on_congestion_event(t0, t0, CongestionSource::EndToEnd);
        pa.on_congestion_event(t0, t0, CongestionSource::Quack);
        // One RTT of ACKs per 20 ms for 1 s (packets sent after the reduction).
        let mut now = t0;
        for _ in 0..50 {
            now += rtt;
            let w = pa.window() / MSS;
            for _ in 0..w {
                pa.on_ack(now, now.checked_sub(rtt / 2).unwrap(), MSS, rtt);
            }
            let w = cubic.window() / MSS;
            for _ in 0..w {
                cubic.on_ack(now, now.checked_sub(rtt / 2).unwrap(), MSS, rtt);
            }
        }
        // PACUBIC (r = 0.2: K = 0.2^{4/3}·K* ≈ 0.49 s) is back above W_max after 1 s.
        assert!(pa.window() >= 100 * MSS, "{}", pa.window());
        // CUBIC (K* ≈ 4.2 s) is still below W_max, in its Reno-friendly region at this short
        // RTT, and never above max(curve one RTT ahead, Reno estimate).
        assert!(cubic.window() < 100 * MSS, "{}", cubic.window());
        assert!(cubic.window() < pa.window());
        let bound = cubic.cubic_window_at(Duration::from_secs(1) + rtt).unwrap();
        // The Reno-friendly estimate may exceed the curve early on; it grows ≈ α·1 per RTT.
        let alpha = 3.0 * 0.3 / 1.7;
        let reno = 70.0 + alpha * 50.0;
        assert!(cubic.window() as f64 <= (bound as f64).max(reno * MSS as f64) + MSS as f64);
    }

    #[test]
    fn one_reduction_per_recovery_period() {
        let t0 = Instant::now();
        let mut pa = cc(100 * MSS);
        assert!(pa.on_congestion_event(t0, t0, CongestionSource::Quack));
        let later = t0 + Duration::from_millis(1);
        // A second loss of a packet sent before the reduction is the same event.
        assert!(!pa.on_congestion_event(
            later,
            t0.checked_sub(Duration::from_millis(1)).unwrap(),
            CongestionSource::EndToEnd
        ));
        assert_eq!(pa.stats().events_in_recovery, 1);
        assert!(pa.on_congestion_event(later, later, CongestionSource::EndToEnd));
        assert_eq!(pa.last_source(), Some(CongestionSource::EndToEnd));
        assert_eq!(
            pa.stats(),
            PacubicStats {
                e2e_events: 1,
                quack_events: 1,
                events_in_recovery: 1
            }
        );
    }

    #[test]
    fn slow_start_then_minimum_window() {
        let t0 = Instant::now();
        let mut pa = cc(10 * MSS);
        assert!(pa.in_slow_start());
        pa.on_ack(t0, t0, 5 * MSS, Duration::from_millis(10));
        assert_eq!(pa.window(), 15 * MSS);
        for i in 0..20 {
            let now = t0 + Duration::from_millis(100 * (i + 1));
            pa.on_congestion_event(now, now, CongestionSource::EndToEnd);
        }
        assert_eq!(pa.window(), 2 * MSS);
        pa.on_persistent_congestion(t0 + Duration::from_secs(10));
        assert_eq!(pa.window(), 2 * MSS);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let t0 = Instant::now();
        let mut pa = Pacubic::new(PacubicConfig {
            mss: MSS,
            initial_window: 100 * MSS,
            ..PacubicConfig::default()
        });
        pa.on_congestion_event(t0, t0, CongestionSource::EndToEnd);
        assert_eq!(pa.w_max(), Some(100 * MSS));
        let t1 = t0 + Duration::from_millis(10);
        pa.on_congestion_event(t1, t1, CongestionSource::EndToEnd);
        // cwnd 70 < W_max 100: W_max = 70·(1 + 0.7)/2 = 59.5 segments.
        assert_eq!(pa.w_max(), Some(59_500));
        assert_eq!(pa.window(), 49 * MSS);
    }

    #[test]
    fn rtt_ratio_is_clamped() {
        let mut pa = cc(10 * MSS);
        pa.set_rtt_ratio(0.0);
        assert_eq!(pa.rtt_ratio(), MIN_RTT_RATIO);
        pa.set_rtt_ratio(7.0);
        assert_eq!(pa.rtt_ratio(), 1.0);
        pa.set_rtt_ratio(f64::NAN);
        assert_eq!(pa.rtt_ratio(), 1.0);
    }
}

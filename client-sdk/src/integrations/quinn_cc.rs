//! PACUBIC as a quinn congestion controller, fed by the Robin engine through shared signals.
//!
//! quinn calls its controller only from inside the connection; the SDK learns of near-segment
//! losses elsewhere (the socket wrapper running [`SidekickClient`](crate::session::SidekickClient)).
//! [`SharedSignals`] carries them across: the wrapper posts quACK-detected losses, bytes the
//! proxy confirmed and the ratio `r`; the controller applies them on its next callback and
//! publishes the end-to-end RTT back. Use one factory (and one [`SharedSignals`]) per connection.
//!
//! ```
//! use std::sync::Arc;
//! use sidekick::integrations::quinn_cc::{PacubicFactory, SharedSignals};
//! use sidekick::pacubic::PacubicConfig;
//!
//! let signals = SharedSignals::new();
//! let mut transport = quinn::TransportConfig::default();
//! transport.congestion_controller_factory(Arc::new(PacubicFactory::new(
//!     PacubicConfig::default(),
//!     signals.clone(),
//! )));
//! signals.set_rtt_ratio(0.1);
//! ```

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use quinn_proto::RttEstimator;
use quinn_proto::congestion::{Controller, ControllerFactory, ControllerMetrics};

use crate::pacubic::{CongestionSource, Pacubic, PacubicConfig};

/// Cap on queued near-segment losses not yet applied.
const MAX_PENDING_LOSSES: usize = 1024;

#[derive(Debug, Default)]
struct Signals {
    near_losses: VecDeque<Instant>,
    dropped_losses: u64,
    delivered: u64,
    rtt_ratio: Option<f64>,
    e2e_min_rtt: Option<Duration>,
    ack_reduction: bool,
    quack_events_applied: u64,
}

/// Signals shared between the SDK's engines and the controller inside quinn.
#[derive(Debug, Clone, Default)]
pub struct SharedSignals(Arc<Mutex<Signals>>);

impl SharedSignals {
    /// Fresh signals.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Signals> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A datagram sent at `sent` was lost on the near segment (from a quACK).
    pub fn near_loss(&self, sent: Instant) {
        let mut s = self.lock();
        if s.near_losses.len() >= MAX_PENDING_LOSSES {
            s.near_losses.pop_front();
            s.dropped_losses += 1;
        }
        s.near_losses.push_back(sent);
    }

    /// The proxy confirmed receipt of `bytes` (ACK-reduction mode only).
    pub fn delivered(&self, bytes: u64) {
        let mut s = self.lock();
        if s.ack_reduction {
            s.delivered = s.delivered.saturating_add(bytes);
        }
    }

    /// Sets PACUBIC's `r`.
    pub fn set_rtt_ratio(&self, r: f64) {
        self.lock().rtt_ratio = Some(r);
    }

    /// Turns ACK-reduction mode (Robin #3) on or off.
    pub fn set_ack_reduction(&self, on: bool) {
        let mut s = self.lock();
        s.ack_reduction = on;
        if !on {
            s.delivered = 0;
        }
    }

    /// The end-to-end minimum RTT the controller last saw.
    pub fn e2e_min_rtt(&self) -> Option<Duration> {
        self.lock().e2e_min_rtt
    }

    /// quACK congestion events the controller has applied.
    pub fn quack_events_applied(&self) -> u64 {
        self.lock().quack_events_applied
    }

    /// Losses dropped because the queue was full.
    pub fn dropped_losses(&self) -> u64 {
        self.lock().dropped_losses
    }

    /// Clears pending signals (on fallback: back to plain CUBIC behaviour).
    pub fn clear(&self) {
        let mut s = self.lock();
        s.near_losses.clear();
        s.delivered = 0;
        s.rtt_ratio = None;
        s.ack_reduction = false;
    }
}

/// PACUBIC behind quinn's [`Controller`] trait.
#[derive(Debug, Clone)]
pub struct PacubicController {
    cc: Pacubic,
    signals: SharedSignals,
    /// Bytes the proxy confirmed and not yet acknowledged end to end (ACK reduction).
    credit: u64,
    last_rtt: Duration,
}

impl PacubicController {
    /// A controller sharing `signals` with the SDK.
    pub fn new(config: PacubicConfig, signals: SharedSignals) -> Self {
        Self {
            cc: Pacubic::new(config),
            signals,
            credit: 0,
            last_rtt: Duration::from_millis(100),
        }
    }

    /// The inner PACUBIC state.
    pub fn pacubic(&self) -> &Pacubic {
        &self.cc
    }

    fn pull(&mut self, now: Instant) {
        let (losses, delivered, r) = {
            let mut s = self.signals.lock();
            let losses: Vec<Instant> = s.near_losses.drain(..).collect();
            let delivered = std::mem::take(&mut s.delivered);
            (losses, delivered, s.rtt_ratio)
        };
        if let Some(r) = r {
            self.cc.set_rtt_ratio(r);
        }
        let mut applied = 0;
        for sent in losses {
            if self
                .cc
                .on_congestion_event(now, sent, CongestionSource::Quack)
            {
                applied += 1;
            }
        }
        if applied > 0 {
            self.signals.lock().quack_events_applied += applied;
        }
        if delivered > 0 {
            // Robin #3: quACK-driven advance while end-to-end ACKs are rare. The bytes grow the
            // window now and count as delivered until the end-to-end ACK arrives.
            self.cc.on_ack(now, now, delivered, self.last_rtt);
            self.credit = (self.credit + delivered).min(self.cc.window());
        }
    }
}

impl Controller for PacubicController {
    fn on_sent(&mut self, now: Instant, _bytes: u64, _last_packet_number: u64) {
        self.pull(now);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.pull(now);
        self.last_rtt = rtt.get();
        {
            let mut s = self.signals.lock();
            let m = rtt.min();
            s.e2e_min_rtt = Some(s.e2e_min_rtt.map_or(m, |x| x.min(m)));
        }
        // Bytes already credited from quACKs do not grow the window twice.
        let credited = bytes.min(self.credit);
        self.credit -= credited;
        if app_limited || credited == bytes {
            return;
        }
        self.cc.on_ack(now, sent, bytes - credited, rtt.get());
    }

    fn on_congestion_event(&mut self, now: Instant, sent: Instant, persistent: bool, _lost: u64) {
        self.pull(now);
        if persistent {
            self.cc.on_persistent_congestion(now);
        } else {
            self.cc
                .on_congestion_event(now, sent, CongestionSource::EndToEnd);
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.cc.on_mtu_update(u64::from(new_mtu));
    }

    fn window(&self) -> u64 {
        self.cc.window() + self.credit
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = ControllerMetrics::default();
        m.congestion_window = self.window();
        m.ssthresh = Some(self.cc.ssthresh());
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.cc.config().initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds [`PacubicController`]s for quinn's `TransportConfig::congestion_controller_factory`.
#[derive(Debug, Clone)]
pub struct PacubicFactory {
    config: PacubicConfig,
    signals: SharedSignals,
}

impl PacubicFactory {
    /// A factory whose controllers share `signals`.
    pub fn new(config: PacubicConfig, signals: SharedSignals) -> Self {
        Self { config, signals }
    }
}

impl ControllerFactory for PacubicFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let mss = u64::from(current_mtu.max(1200));
        let config = PacubicConfig {
            mss,
            initial_window: self.config.initial_window.max(2 * mss),
            minimum_window: 2 * mss,
            ..self.config
        };
        Box::new(PacubicController::new(config, self.signals.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller() -> (PacubicController, SharedSignals) {
        let s = SharedSignals::new();
        let cfg = PacubicConfig {
            mss: 1000,
            initial_window: 100_000,
            minimum_window: 2000,
            ..PacubicConfig::default()
        };
        (PacubicController::new(cfg, s.clone()), s)
    }

    #[test]
    fn quack_losses_reduce_with_pacubic_constants() {
        let (mut c, s) = controller();
        let t0 = Instant::now();
        s.set_rtt_ratio(0.1);
        s.near_loss(t0);
        c.on_sent(t0 + Duration::from_millis(1), 1000, 1);
        // β = 1 − 0.1·0.3 = 0.97.
        assert_eq!(c.window(), 97_000);
        assert_eq!(s.quack_events_applied(), 1);
        // An end-to-end loss of a packet sent later reduces with β* = 0.7.
        let t1 = t0 + Duration::from_millis(50);
        c.on_congestion_event(t1, t1, false, 1000);
        assert_eq!(c.window(), 67_900);
    }

    #[test]
    fn ack_reduction_credits_quack_deliveries_once() {
        let (mut c, s) = controller();
        let t0 = Instant::now();
        s.delivered(5000);
        c.on_sent(t0, 1000, 1);
        assert_eq!(c.window(), 100_000, "not in ACK-reduction mode: ignored");
        s.set_ack_reduction(true);
        s.delivered(5000);
        c.on_sent(t0, 1000, 2);
        // Slow start: +5000 growth, and 5000 bytes counted as delivered.
        assert_eq!(c.window(), 110_000);
        let fac = Arc::new(PacubicFactory::new(*c.pacubic().config(), s.clone()));
        assert_eq!(fac.build(t0, 1200).initial_window(), 100_000);
        s.clear();
        assert_eq!(s.e2e_min_rtt(), None);
    }
}

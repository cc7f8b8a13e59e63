//! RTT estimation for PEMI (PEMI §4.4): smoothed estimate from matched sent–reply pairs,
//! windowed minimum for the congestion controller (§4.5.2), calibration samples (spin bit or an
//! external ICMP prober) with the reset rule of App. A.

use std::time::Duration;

use crate::Time;

use crate::engine::Direction;

/// How long the minimum RTT is remembered ("RTT_min … in a long period of time", §4.5.2).
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

/// A smoothed RTT with variance (the shared estimator, `sidekick_wire::rtt`) and a minimum over
/// [`MIN_RTT_WINDOW`].
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    smoothed: sidekick_wire::rtt::RttEstimator,
    min: Duration,
    min_at: Time,
}

impl RttEstimator {
    /// An estimator seeded with an initial RTT (from the handshake, §4.4.1).
    pub fn new(initial: Duration, now: Time) -> Self {
        Self {
            smoothed: sidekick_wire::rtt::RttEstimator::seeded(initial),
            min: initial,
            min_at: now,
        }
    }

    /// Add a sample: `srtt ← 7/8 srtt + 1/8 sample`, `rttvar ← 3/4 rttvar + 1/4 |srtt − sample|`.
    pub fn sample(&mut self, rtt: Duration, now: Time) {
        self.smoothed.on_sample(rtt);
        if rtt <= self.min || now.saturating_duration_since(self.min_at) > MIN_RTT_WINDOW {
            self.min = rtt;
            self.min_at = now;
        }
    }

    /// Replace the estimate by a trusted sample (App. A reset after a large deviation).
    pub fn reset_to(&mut self, rtt: Duration, now: Time) {
        self.smoothed.reset_to(rtt);
        if rtt < self.min || now.saturating_duration_since(self.min_at) > MIN_RTT_WINDOW {
            self.min = rtt;
            self.min_at = now;
        }
    }

    /// The smoothed RTT.
    pub fn srtt(&self) -> Duration {
        // Seeded, so always set.
        self.smoothed.smoothed().unwrap_or(self.min)
    }

    /// The RTT variation.
    pub fn rttvar(&self) -> Duration {
        self.smoothed.variation()
    }

    /// The latest sample.
    pub fn latest(&self) -> Duration {
        self.smoothed.latest().unwrap_or(self.min)
    }

    /// The minimum over [`MIN_RTT_WINDOW`].
    pub fn min(&self) -> Duration {
        self.min
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.smoothed.samples()
    }
}

/// Spin-bit RTT measurement at a middlebox (RFC 9000 §17.4, RFC 9312 §3.8.2; PEMI §4.4.3).
///
/// An edge (value change) seen towards the client at `t1` comes back from the client as an edge
/// at `t2`: `t2 − t1` is the proxy↔client RTT; symmetrically an edge from the client at `t2`
/// returns from the server: the proxy↔server RTT. Only short-header packets carry the bit.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinTracker {
    last: [Option<bool>; 2],
    edge_at: [Option<Time>; 2],
}

fn idx(d: Direction) -> usize {
    match d {
        Direction::FromClient => 0,
        Direction::ToClient => 1,
    }
}

/// A spin-bit RTT sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinSample {
    /// `ToClient`: the proxy↔client RTT; `FromClient`: the proxy↔server RTT (the side that
    /// reflected the edge is the receiver of the first edge).
    pub side: Direction,
    /// The RTT.
    pub rtt: Duration,
}

impl SpinTracker {
    /// Observe the spin bit of a short-header packet travelling in `dir`.
    pub fn on_spin(&mut self, now: Time, dir: Direction, spin: bool) -> Option<SpinSample> {
        let i = idx(dir);
        let prev = self.last[i].replace(spin);
        if prev.is_none_or(|p| p == spin) {
            return None;
        }
        self.edge_at[i] = Some(now);
        // This edge answers the latest edge of the opposite direction.
        let other = self.edge_at[idx(dir.reverse())].take()?;
        Some(SpinSample {
            side: dir.reverse(),
            rtt: now.saturating_duration_since(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn smoothing_and_min() {
        let t0 = Time::ZERO;
        let mut r = RttEstimator::new(ms(40), t0);
        for _ in 0..50 {
            r.sample(ms(20), t0);
        }
        assert!(r.srtt().abs_diff(ms(20)) < ms(1));
        assert_eq!(r.min(), ms(20));
        // The minimum expires after the window.
        r.sample(ms(30), t0 + MIN_RTT_WINDOW + ms(1));
        assert_eq!(r.min(), ms(30));
        r.reset_to(ms(5), t0 + MIN_RTT_WINDOW + ms(2));
        assert_eq!(r.srtt(), ms(5));
        assert_eq!(r.min(), ms(5));
    }

    #[test]
    fn spin_edges_give_both_sides() {
        let t0 = Time::ZERO;
        let mut s = SpinTracker::default();
        assert_eq!(s.on_spin(t0, Direction::ToClient, false), None);
        assert_eq!(s.on_spin(t0, Direction::FromClient, false), None);
        // The server flips: seen towards the client at 10 ms, reflected by the client at 14 ms.
        assert_eq!(s.on_spin(t0 + ms(10), Direction::ToClient, true), None);
        assert_eq!(s.on_spin(t0 + ms(12), Direction::ToClient, true), None);
        assert_eq!(
            s.on_spin(t0 + ms(14), Direction::FromClient, true),
            Some(SpinSample {
                side: Direction::ToClient,
                rtt: ms(4)
            })
        );
        // Back from the server after 30 ms.
        assert_eq!(
            s.on_spin(t0 + ms(44), Direction::ToClient, false),
            Some(SpinSample {
                side: Direction::FromClient,
                rtt: ms(30)
            })
        );
    }
}

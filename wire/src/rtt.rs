//! A smoothed round-trip time estimator: RFC 6298 §2 gains (α = 1/8, β = 1/4), which RFC 9002
//! §5.3 uses too, and the minimum sample.

use std::time::Duration;

/// Smoothed RTT, its variation, the minimum and the latest sample of a path.
///
/// Call [`RttEstimator::on_sample`] for every sample; read the estimate any time. A path whose
/// first estimate comes from elsewhere (the handshake, a configured default) starts from
/// [`RttEstimator::seeded`], which smooths later samples into it as if it were one.
///
/// ```
/// use std::time::Duration;
/// use sidekick_wire::rtt::RttEstimator;
/// let ms = Duration::from_millis;
/// let mut r = RttEstimator::new();
/// r.on_sample(ms(80));
/// r.on_sample(ms(40));
/// assert_eq!(r.smoothed(), Some(ms(75)));
/// assert_eq!(r.variation(), ms(40));
/// assert_eq!(r.min(), Some(ms(40)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    smoothed: Option<Duration>,
    var: Duration,
    min: Option<Duration>,
    latest: Option<Duration>,
    samples: u64,
}

impl RttEstimator {
    /// An estimator without samples.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            smoothed: None,
            var: Duration::ZERO,
            min: None,
            latest: None,
            samples: 0,
        }
    }

    /// An estimator whose first estimate is `rtt` (not counted in [`RttEstimator::samples`]).
    #[must_use]
    pub fn seeded(rtt: Duration) -> Self {
        let mut r = Self::new();
        r.reset_to(rtt);
        r
    }

    /// Adds a sample: the first sets the estimate (variation half of it, RFC 6298 §2.2); later
    /// ones smooth it (§2.3).
    pub fn on_sample(&mut self, rtt: Duration) {
        self.samples += 1;
        self.latest = Some(rtt);
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
        match self.smoothed {
            None => {
                self.smoothed = Some(rtt);
                self.var = rtt / 2;
            }
            Some(s) => {
                self.var = (self.var * 3 + s.abs_diff(rtt)) / 4;
                self.smoothed = Some((s * 7 + rtt) / 8);
            }
        }
    }

    /// Replaces the estimate by `rtt`, as a first sample would set it (a trusted sample after a
    /// large deviation); the minimum keeps its history.
    pub fn reset_to(&mut self, rtt: Duration) {
        self.smoothed = Some(rtt);
        self.var = rtt / 2;
        self.latest = Some(rtt);
        self.min = Some(self.min.map_or(rtt, |m| m.min(rtt)));
    }

    /// Smoothed RTT; `None` before the first sample of an estimator that was not seeded.
    #[must_use]
    pub fn smoothed(&self) -> Option<Duration> {
        self.smoothed
    }

    /// RTT variation.
    #[must_use]
    pub fn variation(&self) -> Duration {
        self.var
    }

    /// Smallest sample (or seed).
    #[must_use]
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// Latest sample (or seed).
    #[must_use]
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Samples added (a seed is not one).
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_smoothed_like_a_first_sample() {
        let ms = Duration::from_millis;
        let mut r = RttEstimator::seeded(ms(100));
        assert_eq!(
            (r.smoothed(), r.variation(), r.samples()),
            (Some(ms(100)), ms(50), 0)
        );
        r.on_sample(ms(20));
        // 7/8·100 + 1/8·20 = 90; 3/4·50 + 1/4·80 = 57.5.
        assert_eq!(r.smoothed(), Some(ms(90)));
        assert_eq!(r.variation(), Duration::from_micros(57_500));
        assert_eq!(r.min(), Some(ms(20)));
        r.reset_to(ms(30));
        assert_eq!(
            (r.smoothed(), r.min(), r.samples()),
            (Some(ms(30)), Some(ms(20)), 1)
        );
    }
}

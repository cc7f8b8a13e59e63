//! A small RTT estimator (RFC 6298 smoothing plus a minimum).

use std::time::Duration;

/// Smoothed and minimum RTT of a path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    smoothed: Option<Duration>,
    var: Duration,
    min: Option<Duration>,
    latest: Option<Duration>,
    samples: u64,
}

impl RttEstimator {
    /// Adds a sample (RFC 6298 §2: α = 1/8, β = 1/4).
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
                let diff = s.abs_diff(rtt);
                self.var = (self.var * 3 + diff) / 4;
                self.smoothed = Some((s * 7 + rtt) / 8);
            }
        }
    }

    /// Smoothed RTT.
    pub fn smoothed(&self) -> Option<Duration> {
        self.smoothed
    }

    /// RTT variation.
    pub fn variation(&self) -> Duration {
        self.var
    }

    /// Minimum sample.
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// Latest sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Number of samples.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_and_min() {
        let mut r = RttEstimator::default();
        assert_eq!(r.smoothed(), None);
        r.on_sample(Duration::from_millis(80));
        assert_eq!(r.smoothed(), Some(Duration::from_millis(80)));
        r.on_sample(Duration::from_millis(40));
        assert_eq!(r.smoothed(), Some(Duration::from_millis(75)));
        assert_eq!(r.min(), Some(Duration::from_millis(40)));
        assert_eq!(r.samples(), 2);
    }
}

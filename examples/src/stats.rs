//! Small statistics helpers shared by the media applications: percentiles and an RTT estimator.

use std::time::Duration;

/// Nearest-rank percentile (`p` in 0..=100) of `values`; `None` when empty. NaNs sort last.
///
/// ```
/// use sidekick_examples::stats::percentile;
/// assert_eq!(percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 50.0), Some(3.0));
/// assert_eq!(percentile(&[5.0, 1.0, 3.0, 2.0, 4.0], 99.0), Some(5.0));
/// ```
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// Smoothed RTT (the shared estimator, `sidekick_wire::rtt`) that reports an initial value until
/// the first sample.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    initial: Duration,
    est: sidekick_wire::rtt::RttEstimator,
}

impl RttEstimator {
    /// Estimator reporting `initial` until the first sample.
    pub fn new(initial: Duration) -> Self {
        Self {
            initial,
            est: sidekick_wire::rtt::RttEstimator::new(),
        }
    }

    /// Add a sample.
    pub fn on_sample(&mut self, rtt: Duration) {
        self.est.on_sample(rtt);
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Duration {
        self.est.smoothed().unwrap_or(self.initial)
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.est.samples()
    }

    /// Interval between two NACKs of the same packet: at least one RTT (Sidekick (NSDI '24) §5.1: "up to one
    /// per RTT"), padded by the RTT variation so a retransmission that is merely late is not
    /// NACKed again.
    pub fn renack_interval(&self) -> Duration {
        // Before the first sample the variation is taken as half the initial value (RFC 6298 §2.1).
        let var = if self.est.samples() == 0 {
            self.initial / 2
        } else {
            self.est.variation()
        };
        self.srtt() + (var * 2).max(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn rtt_estimator() {
        let mut r = RttEstimator::new(Duration::from_millis(100));
        assert_eq!(r.srtt(), Duration::from_millis(100));
        r.on_sample(Duration::from_millis(40));
        assert_eq!(r.srtt(), Duration::from_millis(40));
        assert_eq!(r.renack_interval(), Duration::from_millis(80));
        r.on_sample(Duration::from_millis(40));
        assert_eq!(r.srtt(), Duration::from_millis(40));
        // rttvar = (20*3 + 0)/4 = 15 ms.
        assert_eq!(r.renack_interval(), Duration::from_millis(70));
    }
}

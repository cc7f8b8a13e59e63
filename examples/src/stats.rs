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

/// Smoothed RTT estimator (RFC 6298 gains), seeded with an initial value until the first sample.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: Duration,
    rttvar: Duration,
    samples: u64,
}

impl RttEstimator {
    /// Estimator reporting `initial` until the first sample.
    pub fn new(initial: Duration) -> Self {
        Self {
            srtt: initial,
            rttvar: initial / 2,
            samples: 0,
        }
    }

    /// Add a sample.
    pub fn on_sample(&mut self, rtt: Duration) {
        if self.samples == 0 {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let diff = self.srtt.abs_diff(rtt);
            self.rttvar = (self.rttvar * 3 + diff) / 4;
            self.srtt = (self.srtt * 7 + rtt) / 8;
        }
        self.samples += 1;
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Duration {
        self.srtt
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Interval between two NACKs of the same packet: at least one RTT (Sidekick (NSDI '24) §5.1: "up to one
    /// per RTT"), padded by the RTT variation so a retransmission that is merely late is not
    /// NACKed again.
    pub fn renack_interval(&self) -> Duration {
        self.srtt + (self.rttvar * 2).max(Duration::from_millis(1))
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

//! A fixed histogram of short delays in 1 ms buckets: how long the Packrat receiver's gaps took
//! to fill (the proxy's repair latency as the client sees it, set against the reorder window).
//!
//! Fixed size and `Copy`, so it travels in [`crate::packrat::PackratStats`]; recording is one
//! saturating increment.
//!
//! ```
//! use std::time::Duration;
//! use sidekick::delay_histogram::DelayHistogram;
//!
//! let mut h = DelayHistogram::default();
//! for ms in [3, 4, 4, 5, 40] {
//!     h.record(Duration::from_millis(ms));
//! }
//! assert_eq!(h.count(), 5);
//! assert_eq!(h.quantile_ms(0.5), Some(5.0)); // the upper edge of the median's bucket
//! assert_eq!(h.quantile_ms(0.99), Some(41.0));
//! ```

use std::time::Duration;

/// Buckets of 1 ms: `[0, 1)`, `[1, 2)`, … and the last, `[63 ms, ∞)`.
pub const DELAY_BUCKETS: usize = 64;

/// Counts of delays in 1 ms buckets (the last bucket holds everything from 63 ms on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayHistogram {
    buckets: [u32; DELAY_BUCKETS],
}

impl Default for DelayHistogram {
    fn default() -> Self {
        Self {
            buckets: [0; DELAY_BUCKETS],
        }
    }
}

impl DelayHistogram {
    /// Counts one delay.
    pub fn record(&mut self, delay: Duration) {
        let i = usize::try_from(delay.as_millis())
            .unwrap_or(usize::MAX)
            .min(DELAY_BUCKETS - 1);
        self.buckets[i] = self.buckets[i].saturating_add(1);
    }

    /// Delays recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|&c| u64::from(c)).sum()
    }

    /// The upper edge (ms) of the bucket holding quantile `q` (0..=1) of the recorded delays;
    /// `None` when nothing was recorded. The last bucket reports 64 ms: at least that long.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        // The rank of the quantile, 1-based: the smallest delay with at least q·n at or below it.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some((i + 1) as f64);
            }
        }
        Some(DELAY_BUCKETS as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_has_no_quantile() {
        assert_eq!(DelayHistogram::default().quantile_ms(0.5), None);
    }

    #[test]
    fn long_delays_land_in_the_last_bucket() {
        let mut h = DelayHistogram::default();
        h.record(Duration::from_secs(3600));
        h.record(Duration::from_micros(999));
        assert_eq!(h.quantile_ms(1.0), Some(64.0));
        assert_eq!(h.quantile_ms(0.5), Some(1.0));
        assert_eq!(h.count(), 2);
    }

    #[test]
    fn quantiles_follow_the_ranks() {
        let mut h = DelayHistogram::default();
        for ms in 0..100u64 {
            h.record(Duration::from_millis(ms % 10));
        }
        // 10 of each of 0..=9 ms: the median's rank (50) is the last 4 ms delay.
        assert_eq!(h.quantile_ms(0.5), Some(5.0));
        assert_eq!(h.quantile_ms(0.9), Some(9.0));
        assert_eq!(h.quantile_ms(0.91), Some(10.0));
        assert_eq!(h.quantile_ms(0.0), Some(1.0));
    }
}

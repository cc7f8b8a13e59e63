//! Summary statistics for trial results: median, quartiles, IQR.
//!
//! Quartiles use linear interpolation between closest ranks (the "type 7" estimator of
//! Hyndman & Fan, the default of R and numpy), so the median of an even-length sample is the
//! mean of the two middle values.

use serde::{Deserialize, Serialize};

/// Median, quartiles and extremes of one metric over a variant's trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Smallest sample.
    pub min: f64,
    /// First quartile (25th percentile).
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile (75th percentile).
    pub q3: f64,
    /// Largest sample.
    pub max: f64,
    /// Interquartile range `q3 - q1`.
    pub iqr: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// The `q`-quantile (`0.0..=1.0`) of an ascending-sorted, non-empty slice, by linear
/// interpolation between closest ranks. Returns `None` for an empty slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// Sorts a copy of `samples` (NaNs removed) ascending.
pub fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Summarises `samples`; `None` if there is no (non-NaN) sample.
///
/// ```
/// use sidekick_lab::stats::summarize;
/// let s = summarize(&[4.0, 1.0, 3.0, 2.0]).unwrap();
/// assert_eq!(s.median, 2.5);
/// assert_eq!(s.q1, 1.75);
/// assert_eq!(s.q3, 3.25);
/// assert_eq!(s.iqr, 1.5);
/// ```
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let v = sorted(samples);
    let q1 = quantile_sorted(&v, 0.25)?;
    let median = quantile_sorted(&v, 0.5)?;
    let q3 = quantile_sorted(&v, 0.75)?;
    Some(Summary {
        n: v.len(),
        min: v[0],
        q1,
        median,
        q3,
        max: v[v.len() - 1],
        iqr: q3 - q1,
        mean: v.iter().sum::<f64>() / v.len() as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn odd_and_even_medians() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(summarize(&[1.0, 2.0, 3.0, 10.0]).unwrap().median, 2.5);
        assert_eq!(summarize(&[7.0]).unwrap().iqr, 0.0);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::NAN]).is_none());
    }

    #[test]
    fn quartiles_match_numpy_default() {
        // numpy.percentile([1..=9], [25, 75]) == [3, 7]
        let v: Vec<f64> = (1..=9).map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (3.0, 5.0, 7.0));
        // numpy.percentile([1, 2, 3, 4, 5, 6], [25, 75]) == [2.25, 4.75]
        let s = summarize(&[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]).unwrap();
        assert_eq!((s.q1, s.q3), (2.25, 4.75));
        assert_eq!(s.mean, 3.5);
    }

    proptest! {
        #[test]
        fn ordered_and_bounded(v in proptest::collection::vec(-1e6f64..1e6, 1..50)) {
            let s = summarize(&v).unwrap();
            prop_assert!(s.min <= s.q1 && s.q1 <= s.median && s.median <= s.q3 && s.q3 <= s.max);
            prop_assert!(s.iqr >= 0.0);
            prop_assert_eq!(s.n, v.len());
        }
    }
}

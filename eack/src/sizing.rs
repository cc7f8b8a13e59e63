//! How many coded symbols to send (Packrat (CoNEXT '26) §5.2.2, Fig. 4).
//!
//! The client knows how many packets it is missing and sends the shortest prefix that decodes
//! with the desired probability. [`SIZING_TABLE`] is measured by this crate's own experiment;
//! regenerate it with
//!
//! ```text
//! cargo run --release -p eack --example sizing
//! ```
//!
//! which prints the table below (100 000 random differences per row, as in Fig. 4).
//!
//! Each column for probability `p` holds the measured quantile at the slightly higher level
//! [`table_level`]`(p)` (0.9925 for `p = 0.99`): the sizes then decode with probability at least
//! `p` also on fresh trials, not only on the trials they were read from, where an exact
//! quantile would sit right at `p` and an independent estimate would fall below it half of the
//! time. `cargo run --release -p eack --example sizing -- check 20000` measures the success
//! rate of [`symbols_for`] at every row on independent trials.

/// Success probabilities of the table's columns.
pub const SIZING_PROBABILITIES: [f64; 6] = [0.5, 0.8, 0.9, 0.95, 0.99, 0.999];

/// The quantile level at which the table's column for success probability `p` is measured:
/// `p + min((1 − p)/4, 0.005)`, i.e. 0.505, 0.805, 0.905, 0.955, 0.9925 and 0.99925 for the
/// columns of [`SIZING_PROBABILITIES`]. The margin (0.25 % at `p = 0.99`) is several standard
/// errors of a 20 000-trial estimate (0.07 %), so the recommended sizes meet `p` on independent
/// measurements.
///
/// ```
/// assert!((eack::sizing::table_level(0.99) - 0.9925).abs() < 1e-12);
/// ```
pub fn table_level(p: f64) -> f64 {
    (p + ((1.0 - p) / 4.0).min(0.005)).min(1.0)
}

/// `(m, [symbols needed to decode m missing elements with probability SIZING_PROBABILITIES[k]])`,
/// measured by `cargo run --release -p eack --example sizing` (100 000 trials per row; the
/// quantile at level [`table_level`]`(p)`).
pub const SIZING_TABLE: &[(usize, [usize; 6])] = &[
    (1, [1, 1, 1, 1, 1, 1]),
    (2, [3, 4, 5, 7, 11, 21]),
    (3, [4, 6, 8, 10, 15, 28]),
    (4, [6, 9, 10, 13, 20, 35]),
    (5, [8, 11, 13, 15, 23, 38]),
    (6, [10, 13, 15, 18, 26, 44]),
    (8, [13, 16, 19, 22, 32, 53]),
    (10, [16, 20, 23, 26, 36, 61]),
    (12, [19, 24, 27, 30, 41, 63]),
    (15, [24, 29, 32, 35, 47, 72]),
    (20, [32, 37, 40, 44, 55, 84]),
    (25, [39, 44, 48, 52, 63, 94]),
    (30, [46, 52, 56, 60, 72, 106]),
    (40, [61, 67, 71, 75, 87, 121]),
    (50, [75, 82, 86, 90, 102, 133]),
    (60, [89, 96, 101, 105, 117, 159]),
    (80, [117, 125, 130, 135, 146, 181]),
    (100, [145, 154, 159, 164, 176, 201]),
    (160, [228, 239, 245, 251, 263, 280]),
];

/// Number of coded symbols to send so that a difference of `expected_missing` elements decodes
/// with probability at least `success_probability` (from the measured [`SIZING_TABLE`]; the
/// smallest tabulated probability ≥ the requested one is used, 0.999 for anything above).
///
/// Between tabulated `m` the count is interpolated linearly; above the largest row it scales
/// with the largest row's multiplier (the rIBLT's overhead shrinks with `m`, so this is
/// conservative). `expected_missing = 0` yields 1: one symbol still proves that nothing is
/// missing and reveals a single unexpected loss.
///
/// ```
/// assert!(eack::symbols_for(20, 0.99) >= 20);
/// assert!(eack::symbols_for(20, 0.8) <= eack::symbols_for(20, 0.99));
/// ```
pub fn symbols_for(expected_missing: usize, success_probability: f64) -> usize {
    let col = SIZING_PROBABILITIES
        .iter()
        .position(|&p| p >= success_probability)
        .unwrap_or(SIZING_PROBABILITIES.len() - 1);
    let m = expected_missing.max(1);
    let Some(&(first_m, first)) = SIZING_TABLE.first() else {
        return 2 * m;
    };
    if m <= first_m {
        return first[col];
    }
    for w in SIZING_TABLE.windows(2) {
        let (m0, r0) = w[0];
        let (m1, r1) = w[1];
        if m <= m1 {
            let (a, b) = (r0[col] as f64, r1[col] as f64);
            let x = (m - m0) as f64 / (m1 - m0) as f64;
            return (a + (b - a) * x).ceil() as usize;
        }
    }
    let &(last_m, last) = SIZING_TABLE.last().unwrap_or(&(first_m, first));
    (m as f64 * last[col] as f64 / last_m as f64).ceil() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::NeededDistribution;

    #[test]
    fn monotone_in_m_and_p() {
        for m in 0..300 {
            for w in SIZING_PROBABILITIES.windows(2) {
                assert!(symbols_for(m, w[0]) <= symbols_for(m, w[1]), "m={m}");
            }
            assert!(symbols_for(m, 0.99) <= symbols_for(m + 1, 0.99), "m={m}");
            assert!(symbols_for(m, 0.5) >= m.min(1));
        }
    }

    #[test]
    fn table_rows_are_sorted() {
        assert!(SIZING_TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            SIZING_TABLE
                .iter()
                .all(|(_, r)| r.windows(2).all(|w| w[0] <= w[1]))
        );
    }

    #[test]
    fn recommended_sizes_decode_at_99_percent() {
        // Independent trials (a different seed from the table's): success at the recommended
        // size for p = 0.99. 3000 trials: a true rate of 99 % is observed above 98.4 % with
        // probability > 0.99.
        for m in [10usize, 20, 40] {
            let d = NeededDistribution::measure(m, 3000, 0xfeed);
            let n = symbols_for(m, 0.99);
            let s = d.success_at(n);
            assert!(s >= 0.984, "m={m}: {n} symbols decode {s}");
        }
    }
}

//! The sizing experiment (Packrat (CoNEXT '26) Fig. 4): how many coded symbols does a difference of `m`
//! elements need before it peels? Used by `examples/sizing.rs` to regenerate
//! [`crate::sizing::SIZING_TABLE`], by the benchmarks to print the multiplier distribution, and by
//! the tests that check the sizing function.

use crate::decode::{Decoder, Difference};
use crate::hash::HashKey;
use crate::sketch::{MAX_SYMBOLS, Sketch};

/// A small deterministic PRNG (SplitMix64) for experiments and benchmarks.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `m` distinct random `u32` identifiers.
    pub fn distinct_ids(&mut self, m: usize) -> Vec<u32> {
        let mut v: Vec<u32> = Vec::with_capacity(m);
        while v.len() < m {
            let x = self.next_u64() as u32;
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v
    }
}

/// Scratch for repeated trials.
#[derive(Debug, Default)]
pub struct Trials {
    decoder: Decoder,
    out: Difference,
}

impl Trials {
    /// New scratch.
    pub fn new() -> Self {
        Trials::default()
    }

    /// The smallest prefix length (number of coded symbols) from which a difference of the
    /// given identifiers peels, or `None` if `max_symbols` are not enough. Peeling success is
    /// monotone in the prefix length (a longer prefix contains every step of a shorter one's
    /// peeling), so this binary-searches.
    pub fn symbols_needed(
        &mut self,
        ids: &[u32],
        max_symbols: usize,
        key: HashKey,
    ) -> Option<usize> {
        let max_symbols = max_symbols.min(MAX_SYMBOLS);
        let mut full = Sketch::<u32>::with_key(max_symbols, key);
        full.insert_all(ids.iter().copied());
        let ok = |n: usize, dec: &mut Decoder, out: &mut Difference| {
            let mut p = full.clone();
            p.truncate(n);
            dec.decode(&p, out).is_ok() && out.missing.len() == ids.len()
        };
        if !ok(max_symbols, &mut self.decoder, &mut self.out) {
            return None;
        }
        let (mut lo, mut hi) = (0usize, max_symbols); // ok(hi), and ok(lo) unknown/false
        if ids.is_empty() {
            return Some(0);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if ok(mid, &mut self.decoder, &mut self.out) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }
}

/// Distribution of symbols needed for `m` missing elements over `trials` random differences.
#[derive(Clone, Debug)]
pub struct NeededDistribution {
    /// Number of missing elements.
    pub m: usize,
    /// Symbols needed per trial, sorted; trials that failed at the cap are `cap + 1`.
    pub needed: Vec<usize>,
}

impl NeededDistribution {
    /// Runs the experiment: `trials` random differences of `m` distinct identifiers, cap
    /// `max(8m, 64)` symbols, deterministic from `seed`.
    pub fn measure(m: usize, trials: usize, seed: u64) -> Self {
        let mut rng = SplitMix::new(seed ^ (m as u64).wrapping_mul(0x1000_0000_01b3));
        let mut t = Trials::new();
        let cap = (8 * m).max(64);
        let mut needed: Vec<usize> = (0..trials)
            .map(|_| {
                let ids = rng.distinct_ids(m);
                let key = HashKey::new(rng.next_u64(), rng.next_u64());
                t.symbols_needed(&ids, cap, key).unwrap_or(cap + 1)
            })
            .collect();
        needed.sort_unstable();
        NeededDistribution { m, needed }
    }

    /// Smallest symbol count that decoded in at least a fraction `p` of the trials.
    pub fn quantile(&self, p: f64) -> usize {
        if self.needed.is_empty() {
            return 0;
        }
        let k = ((p * self.needed.len() as f64).ceil() as usize).clamp(1, self.needed.len());
        self.needed[k - 1]
    }

    /// Mean of symbols needed divided by `m` (the multiplier of Fig. 4).
    pub fn mean_multiplier(&self) -> f64 {
        if self.needed.is_empty() || self.m == 0 {
            return 0.0;
        }
        self.needed.iter().sum::<usize>() as f64 / self.needed.len() as f64 / self.m as f64
    }

    /// Quantile of the multiplier.
    pub fn multiplier_quantile(&self, p: f64) -> f64 {
        self.quantile(p) as f64 / self.m.max(1) as f64
    }

    /// Fraction of trials that decode with `n` symbols.
    pub fn success_at(&self, n: usize) -> f64 {
        if self.needed.is_empty() {
            return 0.0;
        }
        self.needed.partition_point(|&x| x <= n) as f64 / self.needed.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_is_exactly_the_threshold() {
        let mut rng = SplitMix::new(1);
        let mut t = Trials::new();
        for m in [1usize, 5, 20] {
            let ids = rng.distinct_ids(m);
            let n = t.symbols_needed(&ids, 200, HashKey::DEFAULT).unwrap();
            let mut s = Sketch::new(200);
            s.insert_all(ids.iter().copied());
            let mut p = s.clone();
            p.truncate(n);
            assert!(p.decode().is_ok());
            if n > 0 {
                let mut q = s.clone();
                q.truncate(n - 1);
                assert!(q.decode().is_err());
            }
        }
        assert_eq!(t.symbols_needed(&[9], 10, HashKey::DEFAULT), Some(1));
        assert_eq!(t.symbols_needed(&[], 10, HashKey::DEFAULT), Some(0));
    }

    #[test]
    fn distribution_statistics() {
        let d = NeededDistribution::measure(10, 300, 5);
        assert_eq!(d.needed.len(), 300);
        assert!(d.quantile(0.5) <= d.quantile(0.99));
        assert!(d.success_at(d.quantile(0.9)) >= 0.9);
        let mean = d.mean_multiplier();
        assert!(mean > 1.0 && mean < 3.0, "{mean}");
    }
}

//! The rIBLT's pseudorandom mapping of an element to an infinite, increasing sequence of
//! coded-symbol indices (Yang, Gilad, Alizadeh, "Practical Rateless Set Reconciliation",
//! SIGCOMM '24, §4; Packrat (CoNEXT '26) §5.1).
//!
//! Index `i` must be hit with probability `ρ(i) = 1/(1 + i/2)`. Index 0 is always hit. From a hit
//! at index `j`, the next hit lies beyond `j + x` with probability
//! `∏_{k=j+1}^{j+x} (1 − ρ(k)) = (j+1)(j+2)/((j+x+1)(j+x+2)) ≈ ((j+1.5)/(j+x+1.5))²`,
//! so the gap is sampled by inversion as `ceil((j + 1.5)·(F − 1))` with `P(F > f) = 1/f²`
//! (`f ≥ 1`), the reference code's continuous approximation. The reference draws
//! `F = (1 − u)^(−1/2)` with a square root *and* a division; this crate draws `F` in the log
//! domain with neither:
//!
//! - `log₂ F` is exponential with `P(log₂ F > x) = 4^(−x)`, so its integer part `K` is geometric
//!   with `P(K ≥ k) = 4^(−k)` — half the number of leading zero bits of a uniform 64-bit word
//!   (`P(lz ≥ 2k) = 4^(−k)`) — and its fractional part `Φ`, independent of `K` (memorylessness),
//!   has density `∝ 4^(−φ)` on `[0, 1)`;
//! - `2^Φ = (1 − 3u/4)^(−1/2)` for a uniform `u` is read from a 2048-entry fixed-point table
//!   (`POW`, bin midpoints, relative error of `F` below 2^-11, inside the continuous
//!   approximation's own error), so `F·2^24 = POW[v] << K` is one load and one shift.
//!
//! The random bits come from a 64-bit multiplicative congruential generator seeded with the
//! element's keyed hash: one multiplication per step, whose high bits give `K` and a middle
//! field gives `v`. The only loop-carried chain that depends on the previous index is one
//! multiply, shift and add (`y' = y + 2 + 2·⌊y·G/2⌋`, `y = 2·index + 3`); the generator and
//! the table lookup run ahead of it. The mapping is deterministic integer arithmetic (the table
//! is computed at compile time), so the client and the proxy agree on every platform.
//!
//! Because the hits at different indices are independent Bernoulli(ρ(i)) events (the survival
//! function above is a product), any sampler with these gap laws yields the rIBLT's
//! distribution; decoding performance (symbols per missing element) is measured by
//! `examples/sizing.rs` and matches the paper's.

/// Exclusive bound on indices this mapping is used for. Every sketch is smaller
/// ([`crate::MAX_SYMBOLS`]); beyond this bound the walk's arithmetic is not meaningful.
pub(crate) const INDEX_BOUND: u64 = 1 << 16;

/// Fixed-point fraction bits of `F` and `G = F − 1`.
const G_FRAC: u32 = 24;

/// log₂ of the number of entries of [`POW`].
const POW_BITS: u32 = 11;

/// Bit position of the table index `v` in the generator output (below every bit the leading-zero
/// count can examine, see [`IndexWalk::advance`]).
const POW_SHIFT: u32 = 29;

/// A walk over one element's coded-symbol indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexWalk {
    /// Multiplicative congruential generator state (odd).
    state: u64,
    /// `2·index + 3`, i.e. twice `index + 1.5`: keeps the gap formula in integers.
    y: u64,
    /// `y + 2`, kept beside `y` so that the next `y` is one addition after the gap (see
    /// [`IndexWalk::advance`]).
    y_next_base: u64,
}

impl IndexWalk {
    /// Starts a walk at index 0 for an element with keyed hash `seed`.
    #[inline(always)]
    pub fn new(seed: u64) -> Self {
        IndexWalk {
            state: seed | 1,
            y: 3,
            y_next_base: 5,
        }
    }

    /// The current index.
    #[inline(always)]
    pub fn index(&self) -> usize {
        ((self.y >> 1) - 1) as usize
    }

    /// The bound to pass to [`IndexWalk::below`] for "index < `n`" (`n` at most 2^16, beyond any sketch).
    #[inline(always)]
    pub fn bound(n: usize) -> u64 {
        2 * n as u64 + 3
    }

    /// True while the current index is below `n`, given `bound = IndexWalk::bound(n)`: one
    /// comparison on the walk's state (`2·index + 3 < 2n + 3`), so the loop exit that ends a
    /// walk — usually mispredicted — resolves one shift and one subtraction sooner than a
    /// comparison of [`IndexWalk::index`].
    #[inline(always)]
    pub fn below(&self, bound: u64) -> bool {
        self.y < bound
    }

    /// Moves to the next index of the sequence (strictly larger than the current one).
    #[inline(always)]
    pub fn advance(&mut self) {
        // Generator step; independent of the index, so the CPU computes it ahead of the index
        // chain.
        self.state = self.state.wrapping_mul(PRNG_MUL);
        let r = self.state;
        // K = ⌊lz/2⌋ from the top bits. Bit 24 is forced so that lz ≤ 39 (K ≤ 19: F ≥ 2^19
        // already jumps past INDEX_BOUND from any index; the clipped mass is 2^-39) and the
        // table index (bits 29..40) is only examined by lz with probability 2^-24.
        let k = (r | (1 << 24)).leading_zeros() >> 1;
        let v = (r >> POW_SHIFT) as usize & ((1 << POW_BITS) - 1);
        // G·2^24 = (2^Φ·2^24 << K) − 2^24.
        let g = (u64::from(POW[v]) << k) - (1 << G_FRAC);
        // gap = ceil((index + 1.5)·G), computed as ⌊y·G_fixed / 2^(G_FRAC+1)⌋ + 1 (equal unless
        // the product is an exact multiple, and at least 1). y < 2^18 and g < 2^45 while the
        // index is below INDEX_BOUND, so the product does not wrap. `y + 2` does not depend on
        // the product, so the chain from one index to the next is multiply, shift, add.
        let gap = self.y.wrapping_mul(g) >> (G_FRAC + 1);
        // `y + 2` was computed during the previous step, off the chain: the loop-carried
        // dependency is multiply (3 cycles), shift and one add. Written as `y + 2 + 2·gap` the
        // compiler emits shift, mask and two dependent adds (7 cycles per index instead of 5).
        self.y = self.y_next_base.wrapping_add(gap << 1);
        self.y_next_base = self.y.wrapping_add(2);
    }
}

/// Multiplier of the generator (an odd 64-bit constant with good spectral properties, from
/// L'Ecuyer's tables of MCG multipliers).
const PRNG_MUL: u64 = 0xd1342543de82ef95;

/// `POW[v] = round(2^24 · (1 − 3u/4)^(−1/2))` at the bin midpoint `u = (v + 0.5)/2048`: the
/// inverse CDF of `2^Φ`, where `Φ ∈ [0, 1)` has density `∝ 4^(−φ)`. Values lie in
/// `[2^24, 2^25)`.
pub(crate) const POW: [u32; 1 << POW_BITS] = {
    let mut t = [0u32; 1 << POW_BITS];
    let mut v = 0;
    while v < t.len() {
        let u = (v as f64 + 0.5) / (t.len() as f64);
        let a = 1.0 - 0.75 * u;
        // Newton's iteration for a^(-1/2) (a ∈ (1/4, 1]), converged well before 64 rounds.
        let mut r = 1.0f64;
        let mut i = 0;
        while i < 64 {
            r *= 1.5 - 0.5 * a * r * r;
            i += 1;
        }
        t[v] = (r * (1u64 << G_FRAC) as f64 + 0.5) as u32;
        v += 1;
    }
    t
};

/// Iterates the indices of `seed`'s sequence that are below `limit` (at most `INDEX_BOUND`).
#[derive(Clone, Debug)]
pub struct Indices {
    walk: IndexWalk,
    limit: usize,
}

impl Indices {
    /// Indices below `limit` (clamped to `INDEX_BOUND`).
    pub fn new(seed: u64, limit: usize) -> Self {
        Indices {
            walk: IndexWalk::new(seed),
            limit: limit.min(INDEX_BOUND as usize),
        }
    }
}

impl Iterator for Indices {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        let i = self.walk.index();
        if i < self.limit {
            self.walk.advance();
            Some(i)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashKey;

    #[test]
    fn indices_strictly_increase_and_start_at_zero() {
        let k = HashKey::DEFAULT;
        for id in 0..2_000u64 {
            let v: Vec<usize> = Indices::new(k.hash(id), 5_000).collect();
            assert_eq!(v[0], 0);
            assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
            assert!(v.iter().all(|&i| i < 5_000));
        }
    }

    #[test]
    fn marginal_hit_probability_is_one_over_one_plus_half_index() {
        // ρ(i) = 1/(1+i/2) (SIGCOMM '24 rIBLT; Packrat (CoNEXT '26) §5.1). 200k elements, check indices
        // 1..200 within 4 standard deviations plus 5 %: the gap formula uses the paper's
        // continuous approximation ((j+1.5)/(j+x+1.5))², which gives 0.64 instead of 2/3 at
        // index 1 and converges to ρ(i) as i grows.
        let k = HashKey::new(3, 4);
        let n = 200_000u64;
        let mut hits = vec![0u32; 200];
        for id in 0..n {
            for i in Indices::new(k.hash(id), 200) {
                hits[i] += 1;
            }
        }
        assert_eq!(hits[0] as u64, n);
        for (i, &h) in hits.iter().enumerate().skip(1) {
            let p = 1.0 / (1.0 + i as f64 / 2.0);
            let expect = p * n as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            let diff = (f64::from(h) - expect).abs();
            assert!(
                diff < 4.0 * sd + 0.05 * expect,
                "index {i}: {h} hits, expected {expect:.0} ± {sd:.0}"
            );
        }
    }

    #[test]
    fn pow_table_is_the_inverse_cdf() {
        // 2^Φ at the bin midpoints, against the closed form with f64 sqrt; monotone; in range.
        for (v, &p) in POW.iter().enumerate() {
            let u = (v as f64 + 0.5) / POW.len() as f64;
            let want = (1.0 - 0.75 * u).sqrt().recip() * f64::from(1u32 << G_FRAC);
            assert!((f64::from(p) - want).abs() <= 1.0, "v = {v}: {p} vs {want}");
            assert!((1 << G_FRAC..1 << (G_FRAC + 1)).contains(&p));
        }
        assert!(POW.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn gap_law_is_inverse_square() {
        // From index 0 (y = 3) the gap exceeds x with probability ≈ (1.5/(1.5 + x))²
        // (continuous approximation): check the first gap's survival at a few points.
        let k = HashKey::new(11, 12);
        let n = 200_000u64;
        let mut beyond = [0u32; 4];
        let xs = [1usize, 3, 10, 40];
        for id in 0..n {
            let mut w = IndexWalk::new(k.hash(id));
            w.advance();
            for (b, &x) in beyond.iter_mut().zip(&xs) {
                *b += u32::from(w.index() > x);
            }
        }
        for (&b, &x) in beyond.iter().zip(&xs) {
            let p = (1.5 / (1.5 + x as f64)).powi(2);
            let got = f64::from(b) / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (got - p).abs() < 5.0 * sd + 0.01 * p,
                "x = {x}: {got} vs {p}"
            );
        }
    }

    #[test]
    fn below_is_index_below() {
        for seed in 0..500u64 {
            for n in [0usize, 1, 2, 7, 40, 160, 4096] {
                let mut w = IndexWalk::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let bound = IndexWalk::bound(n);
                for _ in 0..40 {
                    assert_eq!(w.below(bound), w.index() < n, "seed {seed}, n {n}");
                    w.advance();
                }
            }
        }
    }

    #[test]
    fn walk_is_deterministic() {
        let a: Vec<usize> = Indices::new(42, 1000).collect();
        let b: Vec<usize> = Indices::new(42, 1000).collect();
        assert_eq!(a, b);
        let mut w = IndexWalk::new(42);
        for &i in &a {
            assert_eq!(w.index(), i);
            w.advance();
        }
    }

    /// The walk as the module documentation states it, written plainly: `advance` must produce
    /// exactly these indices (client and proxy agree only if the arithmetic never changes).
    fn reference_indices(seed: u64, limit: u64) -> Vec<u64> {
        let mut state = seed | 1;
        let mut y = 3u64;
        let mut out = Vec::new();
        while (y >> 1) - 1 < limit {
            out.push((y >> 1) - 1);
            state = state.wrapping_mul(PRNG_MUL);
            let k = (state | (1 << 24)).leading_zeros() >> 1;
            let v = (state >> POW_SHIFT) as usize & ((1 << POW_BITS) - 1);
            let g = (u64::from(POW[v]) << k) - (1 << G_FRAC);
            y = y + 2 + 2 * ((y * g) >> (G_FRAC + 1));
        }
        out
    }

    #[test]
    fn walk_matches_the_documented_formula() {
        let k = HashKey::DEFAULT;
        for id in 0..20_000u64 {
            let seed = k.hash(id);
            let got: Vec<u64> = Indices::new(seed, 4096).map(|i| i as u64).collect();
            assert_eq!(got, reference_indices(seed, 4096), "id {id}");
        }
    }

    #[test]
    fn walk_of_a_fixed_seed_never_changes() {
        // Pinned: a change here changes every eACK on the wire.
        let got: Vec<usize> = Indices::new(0x0123_4567_89ab_cdef, 4096).collect();
        assert_eq!(got, GOLDEN_WALK);
    }

    const GOLDEN_WALK: [usize; 14] = [
        0, 1, 4, 10, 16, 22, 98, 232, 846, 2528, 2712, 2777, 2845, 3591,
    ];

    #[test]
    fn mean_degree_is_about_two_log_half_t() {
        let k = HashKey::DEFAULT;
        let t = 160usize;
        let n = 20_000u64;
        let total: usize = (0..n).map(|id| Indices::new(k.hash(id), t).count()).sum();
        let mean = total as f64 / n as f64;
        // Σ_{i<t} 2/(i+2) = 2(H_{t+1} − 1) ≈ 9.3 for t = 160.
        let expect: f64 = (0..t).map(|i| 2.0 / (i as f64 + 2.0)).sum();
        assert!(
            (mean - expect).abs() < 0.2,
            "mean {mean}, expected {expect}"
        );
    }
}

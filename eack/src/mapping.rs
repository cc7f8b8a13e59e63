//! The rIBLT's pseudorandom mapping of an element to an infinite, increasing sequence of
//! coded-symbol indices (Yang, Gilad, Alizadeh, "Practical Rateless Set Reconciliation",
//! SIGCOMM '24, §4; seed 002 §5.1).
//!
//! Index `i` must be hit with probability `ρ(i) = 1/(1 + i/2)`. Index 0 is always hit. From a hit
//! at index `j`, the next hit lies beyond `j + x` with probability
//! `∏_{k=j+1}^{j+x} (1 − ρ(k)) = (j+1)(j+2)/((j+x+1)(j+x+2)) ≈ ((j+1.5)/(j+x+1.5))²`,
//! so the gap is sampled by inversion as `ceil((j + 1.5)·(F − 1))` with `P(F > f) = 1/f²`
//! (`f ≥ 1`). The reference code draws `F = (1 − u)^(−1/2)` with a square root *and* a division;
//! here `F = 1 / max(U₁, U₂)` for two independent uniforms, which has exactly the same law
//! (`P(max(U₁,U₂) < 1/f) = 1/f²`) and needs no square root. `F − 1 = (1 − M)/M` with
//! `M = max(U₁, U₂)` is then computed in integer fixed point from an 8-bit reciprocal table
//! (relative error below 2^-9 on the gap, far inside the paper's own continuous approximation),
//! so no floating-point division either. The two uniforms are the halves of one output of a
//! 64-bit multiplicative generator seeded by the element's keyed hash.
//!
//! Because the hits at different indices are independent Bernoulli(ρ(i)) events (the survival
//! function above is a product), any sampler with these gap laws yields the rIBLT's
//! distribution; decoding performance (symbols per missing element) is measured by
//! `examples/sizing.rs` and matches the paper's.
//!
//! The per-step chain that depends on the previous index is kept short (integer multiply, add,
//! shift, add); the PRNG and reciprocal depend only on the PRNG state, so successive steps
//! overlap in the CPU. The mapping is deterministic integer arithmetic, so the client and the
//! proxy always agree on every platform.

/// Exclusive bound on indices this mapping is used for. Every sketch is smaller
/// ([`crate::MAX_SYMBOLS`]); beyond this bound the walk's arithmetic is not meaningful.
pub(crate) const INDEX_BOUND: u64 = 1 << 16;

/// Fixed-point fraction bits of `G = F − 1`.
const G_FRAC: u32 = 24;

/// A walk over one element's coded-symbol indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexWalk {
    /// Weyl-sequence PRNG state.
    state: u64,
    /// `2·index + 3`, i.e. twice `index + 1.5`: keeps the gap formula in integers.
    y: u64,
}

impl IndexWalk {
    /// Starts a walk at index 0 for an element with keyed hash `seed`.
    #[inline(always)]
    pub fn new(seed: u64) -> Self {
        IndexWalk { state: seed, y: 3 }
    }

    /// The current index.
    #[inline(always)]
    pub fn index(&self) -> usize {
        ((self.y >> 1) - 1) as usize
    }

    /// Moves to the next index of the sequence (strictly larger than the current one).
    #[inline(always)]
    pub fn advance(&mut self) {
        // PRNG step: 64-bit multiplicative congruential state; the output folds the two halves
        // of the 128-bit product (the high half alone is bounded by the multiplier, the low
        // half alone has weak low bits). Independent of the index, so the CPU computes it
        // ahead of the index chain.
        let prod = u128::from(self.state) * u128::from(PRNG_MUL);
        self.state = prod as u64;
        let z = (prod >> 64) as u64 ^ prod as u64;
        // P = max(U1, U2) + 1 over two 32-bit uniforms; F = 2^32 / P has P(F > f) = 1/f².
        // P is kept ≥ 2^16 (F ≤ 2^16, which already jumps past INDEX_BOUND from any index;
        // the clipped mass is 2^-32), so G below needs no upper clamp.
        let p = ((z >> 32).max(z & 0xffff_ffff) + 1) | (1 << 16);
        // G = F − 1 = (2^32 − P) / P, in fixed point with G_FRAC fraction bits, from an 8-bit
        // reciprocal table (relative error < 2^-9, see RECIP), plus one ulp (2^-24) so that
        // every gap is ≥ 1.
        let lz = p.leading_zeros(); // 31..=47
        let idx = ((p << lz) >> 55) as usize & 0xff;
        let d = (1u64 << 32) - p;
        let g = ((d * u64::from(RECIP[idx])) >> (70 - lz)) + 1;
        // gap = ceil((index + 1.5)·G) = ceil(y·G_fixed / 2^(G_FRAC+1)).
        let gap = self.y.wrapping_mul(g).wrapping_add((1 << (G_FRAC + 1)) - 1) >> (G_FRAC + 1);
        self.y = self.y.wrapping_add(gap << 1);
    }
}

/// Multiplier of the PRNG (an odd 64-bit constant with good spectral properties, from
/// L'Ecuyer's tables of MCG multipliers).
const PRNG_MUL: u64 = 0xd1342543de82ef95;

/// `RECIP[k] = round(2^31 / (1 + (k + 0.5)/256))`: reciprocal of a normalised mantissa whose top
/// eight fraction bits are `k`. For `P = 2^e·(1 + f)`, `1/P ≈ RECIP[k]·2^-(31+e)`, so
/// `G·2^24 = (2^32 − P)·2^24/P ≈ ((2^32 − P)·RECIP[k]) >> (e + 7)` with `e = 63 − lz`.
const RECIP: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut k = 0;
    while k < 256 {
        // 2^31 / (1 + (k+0.5)/256) = 2^39 / (256 + k + 0.5) = 2^40 / (513 + 2k), rounded.
        let den = 513 + 2 * k as u64;
        t[k] = (((1u64 << 40) + den / 2) / den) as u32;
        k += 1;
    }
    t
};

/// Iterates the indices of `seed`'s sequence that are below `limit` (at most [`INDEX_BOUND`]).
#[derive(Clone, Debug)]
pub struct Indices {
    walk: IndexWalk,
    limit: usize,
}

impl Indices {
    /// Indices below `limit` (clamped to [`INDEX_BOUND`]).
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
        // ρ(i) = 1/(1+i/2) (SIGCOMM '24 rIBLT; seed 002 §5.1). 200k elements, check indices
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

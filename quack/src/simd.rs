//! Hot loops of the 32-bit field (`p = 2^32 - 5`): power-sum insertion and candidate evaluation.
//!
//! Values stay lazily reduced below `2^32` between multiplications (see [`fold32`]). Two
//! implementations:
//! - portable scalar code that interleaves independent chains for instruction-level parallelism;
//! - on x86-64 with AVX2 (detected at run time), 4 × 64-bit lanes per vector, each lane one
//!   identifier (insertion) or one candidate (evaluation), two vectors interleaved.
//!
//! This module needs `unsafe` for exactly one thing: calling a `#[target_feature(enable =
//! "avx2")]` function, which is sound only after checking that the CPU supports AVX2. Each such
//! call site checks `is_x86_feature_detected!("avx2")` first.
#![allow(unsafe_code)]

use crate::field::fold32;

const P32: u64 = 4_294_967_291;

/// Canonical representative of a 32-bit identifier.
#[inline(always)]
fn canon(x: u32) -> u64 {
    let x = u64::from(x);
    if x >= P32 { x - P32 } else { x }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Adds `x^1..x^len` to the lazily reduced accumulators. `x < p`.
#[inline]
pub(crate) fn insert_u32(acc: &mut [u64], x: u64) {
    // Two interleaved chains (odd and even powers, stepping by x²) halve the dependency chain.
    let x2 = fold32(x * x);
    let mut odd = x;
    let mut even = x2;
    let mut pairs = acc.chunks_exact_mut(2);
    for pair in &mut pairs {
        pair[0] += odd;
        pair[1] += even;
        odd = fold32(odd * x2);
        even = fold32(even * x2);
    }
    if let [last] = pairs.into_remainder() {
        *last += odd;
    }
}

/// Inserts exactly 8 identifiers (the insert buffer of a quACK).
#[inline]
pub(crate) fn insert8_u32(acc: &mut [u64], xs: &[u32; 8]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: AVX2 support was checked just above.
        unsafe { avx2::insert8(acc, xs) };
        return;
    }
    insert_batch_u32(acc, xs);
}

/// Inserts several identifiers (each accumulator grows by less than `1.5·2^34` per identifier).
pub(crate) fn insert_batch_u32(acc: &mut [u64], xs: &[u32]) {
    let mut rest = xs;
    #[cfg(target_arch = "x86_64")]
    if xs.len() >= 8 && has_avx2() {
        let mut it = xs.chunks_exact(8);
        for chunk in &mut it {
            let block: [u32; 8] = core::array::from_fn(|i| chunk[i]);
            // SAFETY: AVX2 support was checked just above.
            unsafe { avx2::insert8(acc, &block) };
        }
        rest = it.remainder();
    }
    let mut it = rest.chunks_exact(2);
    for pair in &mut it {
        let a = canon(pair[0]);
        let b = canon(pair[1]);
        let (mut ya, mut yb) = (a, b);
        for s in acc.iter_mut() {
            *s += ya + yb;
            ya = fold32(ya * a);
            yb = fold32(yb * b);
        }
    }
    for &x in it.remainder() {
        insert_u32(acc, canon(x));
    }
}

/// Horner evaluation of the monic polynomial at each candidate; pushes the indices of the
/// candidates where it vanishes.
pub(crate) fn find_roots_u32(coeffs: &[u64], candidates: &[u32], hits: &mut Vec<usize>) {
    #[cfg(target_arch = "x86_64")]
    if candidates.len() >= 4 && has_avx2() {
        const B: usize = avx2::ROOTS_BLOCK;
        let push = |mask: u32, base: usize, hits: &mut Vec<usize>| {
            let mut m = mask;
            while m != 0 {
                hits.push(base + m.trailing_zeros() as usize);
                m &= m - 1;
            }
        };
        if candidates.len() <= B {
            // Small logs are latency-bound: one pass with all candidates in flight.
            // SAFETY: AVX2 support was checked just above.
            let mask = unsafe {
                match candidates.len() {
                    0..=8 => avx2::roots_block::<2>(coeffs, candidates),
                    9..=16 => avx2::roots_block::<4>(coeffs, candidates),
                    _ => avx2::roots_block::<{ B / 4 }>(coeffs, candidates),
                }
            };
            push(mask, 0, hits);
            return;
        }
        let mut base = 0usize;
        let mut it = candidates.chunks_exact(B);
        for chunk in &mut it {
            // SAFETY: AVX2 support was checked just above.
            let mask = unsafe { avx2::roots_block::<{ B / 4 }>(coeffs, chunk) };
            push(mask, base, hits);
            base += B;
        }
        let rest = it.remainder();
        if !rest.is_empty() {
            // SAFETY: AVX2 support was checked above.
            let mask = unsafe { avx2::roots_block::<{ B / 4 }>(coeffs, rest) };
            push(mask, base, hits);
        }
        return;
    }
    find_roots_scalar(coeffs, candidates, 0, hits);
}

/// Portable evaluation: four interleaved Horner chains.
fn find_roots_scalar(coeffs: &[u64], rest: &[u32], mut base: usize, hits: &mut Vec<usize>) {
    const LANES: usize = 4;
    let mut chunks = rest.chunks_exact(LANES);
    for chunk in &mut chunks {
        let x: [u64; LANES] = core::array::from_fn(|i| canon(chunk[i]));
        let mut acc = [1u64; LANES];
        for &c in coeffs {
            for i in 0..LANES {
                // acc, x < 2^32 and c < p: acc·x + c < 2^64.
                acc[i] = fold32(acc[i] * x[i] + c);
            }
        }
        for (i, a) in acc.iter().enumerate() {
            if *a == 0 || *a == P32 {
                hits.push(base + i);
            }
        }
        base += LANES;
    }
    for (i, &cand) in chunks.remainder().iter().enumerate() {
        let x = canon(cand);
        let mut acc = 1u64;
        for &c in coeffs {
            acc = fold32(acc * x + c);
        }
        if acc == 0 || acc == P32 {
            hits.push(base + i);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::{
        __m256i, _mm_add_epi64, _mm_cvtsi128_si64, _mm_unpackhi_epi64, _mm256_add_epi64,
        _mm256_and_si256, _mm256_castsi256_pd, _mm256_castsi256_si128, _mm256_cmpeq_epi64,
        _mm256_cmpgt_epi64, _mm256_extracti128_si256, _mm256_movemask_pd, _mm256_mul_epu32,
        _mm256_or_si256, _mm256_set_epi64x, _mm256_set1_epi64x, _mm256_setzero_si256,
        _mm256_slli_epi64, _mm256_srli_epi64, _mm256_sub_epi64,
    };

    use super::{P32, canon};

    const MUL5: bool = false;

    /// One fold modulo `2^32 - 5` per lane: `lo + 5·hi` (the multiplication by 5 reads the
    /// low 32 bits of `hi`, which is all of it).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn fold(v: __m256i) -> __m256i {
        let hi = _mm256_srli_epi64::<32>(v);
        let lo = _mm256_and_si256(v, _mm256_set1_epi64x(0xFFFF_FFFF));
        _mm256_add_epi64(lo, times5(hi))
    }

    /// For `v < 2^32 + 25`: a value whose LOW 32 bits are a representative of `v` (the high
    /// bits are garbage). When `v ≥ 2^32` its low part is `< 25`, so adding 5 cannot carry
    /// out of the low 32 bits. Only for feeding `_mm256_mul_epu32`, which ignores the high half.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn low32(v: __m256i) -> __m256i {
        _mm256_add_epi64(v, times5(_mm256_srli_epi64::<32>(v)))
    }

    /// `5·v` per lane for `v < 2^32`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn times5(v: __m256i) -> __m256i {
        if MUL5 {
            _mm256_mul_epu32(v, _mm256_set1_epi64x(5))
        } else {
            _mm256_add_epi64(_mm256_slli_epi64::<2>(v), v)
        }
    }

    /// Lane-wise `a·b + c` folded twice: `< 2^32 + 25` and congruent, for `a, b` read as their
    /// low 32 bits and `c < 2^32` (`a·b + c < 2^64`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mul_add_fold2(a: __m256i, b: __m256i, c: __m256i) -> __m256i {
        fold(fold(_mm256_add_epi64(_mm256_mul_epu32(a, b), c)))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(x: &[u32]) -> __m256i {
        _mm256_set_epi64x(
            canon(x[3]) as i64,
            canon(x[2]) as i64,
            canon(x[1]) as i64,
            canon(x[0]) as i64,
        )
    }

    /// Lanes reduced from `v < 2^32 + 25` to the canonical representative `< p`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn canonical(v: __m256i) -> __m256i {
        let w = _mm256_and_si256(low32(v), _mm256_set1_epi64x(0xFFFF_FFFF));
        // w < 2^32: subtract p where w ≥ p (signed compare is exact below 2^63).
        let ge = _mm256_cmpgt_epi64(w, _mm256_set1_epi64x(P32 as i64 - 1));
        _mm256_sub_epi64(w, _mm256_and_si256(ge, _mm256_set1_epi64x(P32 as i64)))
    }

    /// One step of a power chain: `r·m` for `r < 6·2^32` (any representative) and canonical
    /// `m`, `m5 = 5·m mod p`. With `r = lo + hi·2^32` (`hi ≤ 5`), `r·m ≡ lo·m + hi·(5m)`, and
    /// `lo·m + hi·m5 ≤ (2^32−1)(p−1) + 5(p−1) < 2^64`; one fold brings the result back below
    /// `2^32 + 5·2^32 = 6·2^32`. Two multiplications and one fold instead of three folds.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn chain_step(r: __m256i, m: __m256i, m5: __m256i) -> __m256i {
        let p = _mm256_add_epi64(
            _mm256_mul_epu32(r, m),
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(r), m5),
        );
        fold(p)
    }

    /// Adds the powers of 8 identifiers to the accumulators.
    #[target_feature(enable = "avx2")]
    pub(super) fn insert8(acc: &mut [u64], xs: &[u32; 8]) {
        let zero = _mm256_setzero_si256();
        let five = _mm256_set1_epi64x(5);
        let xa = lanes(&xs[..4]);
        let xb = lanes(&xs[4..]);
        // Four independent chains: odd and even powers of both vectors, each stepping by x²
        // (canonical, with 5·x² mod p for the high part of the running value).
        let xa2 = canonical(mul_add_fold2(xa, xa, zero));
        let xb2 = canonical(mul_add_fold2(xb, xb, zero));
        let xa25 = canonical(mul_add_fold2(xa2, five, zero));
        let xb25 = canonical(mul_add_fold2(xb2, five, zero));
        let (mut oa, mut ob) = (xa, xb);
        let (mut ea, mut eb) = (xa2, xb2);
        let mut pairs = acc.chunks_exact_mut(2);
        for pair in &mut pairs {
            // 8 lanes < 6·2^32 each: a horizontal sum is < 48·2^32, i.e. < 1.5·2^34 per
            // identifier (the u32 lazy bound).
            pair[0] += hsum(_mm256_add_epi64(oa, ob));
            pair[1] += hsum(_mm256_add_epi64(ea, eb));
            oa = chain_step(oa, xa2, xa25);
            ob = chain_step(ob, xb2, xb25);
            ea = chain_step(ea, xa2, xa25);
            eb = chain_step(eb, xb2, xb25);
        }
        if let [last] = pairs.into_remainder() {
            *last += hsum(_mm256_add_epi64(oa, ob));
        }
    }

    /// Sum of the four 64-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum(v: __m256i) -> u64 {
        let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
        _mm_cvtsi128_si64(s) as u64
    }

    /// Candidates per [`roots_block`] call in the main loop: 8 vectors of 4 lanes, evaluated in
    /// lock step so that their Horner chains overlap (a single chain is latency-bound; 8 chains
    /// make the loop throughput-bound).
    pub(super) const ROOTS_BLOCK: usize = 32;

    /// Evaluates the monic polynomial at up to `4·V ≤ 32` candidates (`xs.len() ≤ 4·V`; missing
    /// lanes are padding and never reported); bit `i` of the result is set when it vanishes at
    /// `xs[i]`.
    #[target_feature(enable = "avx2")]
    pub(super) fn roots_block<const V: usize>(coeffs: &[u64], xs: &[u32]) -> u32 {
        let x: [__m256i; V] = core::array::from_fn(|v| {
            let lane = |i: usize| canon(xs.get(4 * v + i).copied().unwrap_or(0)) as i64;
            _mm256_set_epi64x(lane(3), lane(2), lane(1), lane(0))
        });
        // 5·x mod p, canonical, for the high part of the running value (see `chain_step`).
        let five = _mm256_set1_epi64x(5);
        let zero = _mm256_setzero_si256();
        let x5: [__m256i; V] = core::array::from_fn(|v| canonical(mul_add_fold2(x[v], five, zero)));
        // Horner: acc ← acc·x + c with acc kept below 6·2^32 (one fold per step); the
        // coefficients are canonical, so acc = lo + hi·2^32 gives
        // lo·x + hi·(5x) + c ≤ (2^32−1)(p−1) + 6(p−1) < 2^64.
        let mut acc = [_mm256_set1_epi64x(1); V];
        for &c in coeffs {
            let c = _mm256_set1_epi64x(c as i64);
            for v in 0..V {
                let a = acc[v];
                let prod = _mm256_add_epi64(
                    _mm256_mul_epu32(a, x[v]),
                    _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), x5[v]),
                );
                acc[v] = fold(_mm256_add_epi64(prod, c));
            }
        }
        let p = _mm256_set1_epi64x(P32 as i64);
        let mut mask = 0u32;
        for (v, a) in acc.iter().enumerate() {
            // Two more folds give the exact representative < 2^32 (< 2^32 + 25, then < 2^32);
            // zero mod p is 0 or p.
            let a = fold(fold(*a));
            let z = _mm256_or_si256(_mm256_cmpeq_epi64(a, zero), _mm256_cmpeq_epi64(a, p));
            mask |= (_mm256_movemask_pd(_mm256_castsi256_pd(z)) as u32) << (4 * v);
        }
        let valid = if xs.len() >= 32 {
            u32::MAX
        } else {
            (1u32 << xs.len()) - 1
        };
        mask & valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_sums(xs: &[u32], t: usize) -> Vec<u64> {
        let mut out = vec![0u64; t];
        for &x in xs {
            let x = u64::from(x) % P32;
            let mut y = x;
            for o in &mut out {
                *o = (*o + y) % P32;
                y = ((u128::from(y) * u128::from(x)) % u128::from(P32)) as u64;
            }
        }
        out
    }

    #[test]
    fn batch_paths_match_reference() {
        let xs: Vec<u32> = (0..37u32)
            .map(|i| i.wrapping_mul(0x9E37_79B9) ^ (i << 7))
            .chain([u32::MAX, u32::MAX - 4, u32::MAX - 5, 0, 1])
            .collect();
        for t in [0usize, 1, 2, 3, 7, 20] {
            let mut acc = vec![0u64; t];
            insert_batch_u32(&mut acc, &xs);
            let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
            assert_eq!(got, reference_sums(&xs, t), "t = {t}");
        }
    }

    #[test]
    fn batch_paths_match_reference_at_the_lazy_extremes() {
        // Identifiers whose powers keep the lanes near their bounds (−1, −2, 4 = 2^32 − 1 mod p,
        // values just below p and 2^32), long chains (t = 64), and 8-identifier blocks.
        let xs: Vec<u32> = [
            u32::MAX,
            u32::MAX - 1,
            u32::MAX - 4,
            u32::MAX - 5,
            u32::MAX - 6,
            (P32 - 1) as u32,
            (P32 - 2) as u32,
            0x8000_0000,
        ]
        .iter()
        .copied()
        .cycle()
        .take(8 * 5 + 3)
        .collect();
        for t in [1usize, 2, 9, 10, 20, 64] {
            let mut acc = vec![0u64; t];
            insert_batch_u32(&mut acc, &xs);
            let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
            assert_eq!(got, reference_sums(&xs, t), "t = {t}");
        }
    }

    proptest::proptest! {
        #[test]
        fn lazy_batches_equal_naive_sums(
            xs in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..70),
            t in 0usize..40,
        ) {
            let mut acc = vec![0u64; t];
            insert_batch_u32(&mut acc, &xs);
            let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
            proptest::prop_assert_eq!(got, reference_sums(&xs, t));
            // Exactly 8 at a time (the insert buffer's path).
            let mut acc8 = vec![0u64; t];
            for c in xs.chunks_exact(8) {
                let block: [u32; 8] = core::array::from_fn(|i| c[i]);
                insert8_u32(&mut acc8, &block);
            }
            let whole = xs.len() / 8 * 8;
            let got8: Vec<u64> = acc8.iter().map(|a| a % P32).collect();
            proptest::prop_assert_eq!(got8, reference_sums(&xs[..whole], t));
        }
    }

    /// Coefficients (highest degree first, leading 1 omitted) of `Π (x − r)` mod p.
    fn poly_from_roots(roots: &[u32]) -> Vec<u64> {
        let mulm = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(P32)) as u64;
        let mut c = vec![1u64]; // c[0] = leading coefficient
        for &r in roots {
            let r = u64::from(r) % P32;
            let mut next = c.clone();
            next.push(0);
            for (i, &ci) in c.iter().enumerate() {
                next[i + 1] = (next[i + 1] + P32 - mulm(ci, r)) % P32;
            }
            c = next;
        }
        c.remove(0);
        c
    }

    proptest::proptest! {
        #[test]
        fn simd_roots_match_naive_evaluation(
            roots in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<u32>(),
                    proptest::strategy::Strategy::prop_map(0u32..8, |d| u32::MAX - d),
                    (0u32..8),
                ],
                1..24,
            ),
            others in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..80),
        ) {
            let coeffs = poly_from_roots(&roots);
            let mut cands = others.clone();
            cands.extend(roots.iter().copied());
            cands.extend([u32::MAX, u32::MAX - 4, (P32 - 1) as u32, 0, 1]);
            let naive = |x: u32| {
                let x = u128::from(u64::from(x) % P32);
                coeffs.iter().fold(1u128, |acc, &c| (acc * x + u128::from(c)) % u128::from(P32))
            };
            let want: Vec<usize> = (0..cands.len()).filter(|&i| naive(cands[i]) == 0).collect();
            let mut hits = Vec::new();
            find_roots_u32(&coeffs, &cands, &mut hits);
            proptest::prop_assert_eq!(&hits, &want);
            hits.clear();
            find_roots_scalar(&coeffs, &cands, 0, &mut hits);
            proptest::prop_assert_eq!(&hits, &want);
        }
    }

    #[test]
    fn roots_found_in_every_lane_position() {
        // P(x) = (x - 5)(x - (p + 3)) = (x - 5)(x - 3) = x² - 8x + 15.
        let coeffs = [P32 - 8, 15];
        let mut cands: Vec<u32> = (100..120).collect();
        cands[3] = 5;
        cands[8] = (P32 + 3) as u32;
        cands[13] = 3;
        cands[18] = 5;
        let mut hits = Vec::new();
        find_roots_u32(&coeffs, &cands, &mut hits);
        assert_eq!(hits, vec![3, 8, 13, 18]);
        // The portable path, and every block size of the SIMD path.
        hits.clear();
        find_roots_scalar(&coeffs, &cands, 0, &mut hits);
        assert_eq!(hits, vec![3, 8, 13, 18]);
        for n in [1usize, 4, 7, 9, 16, 17, 31, 32, 33, 64, 70] {
            let mut c: Vec<u32> = (1000..1000 + n as u32).collect();
            c[n - 1] = 3;
            c[n / 2] = 5;
            let mut want = vec![n / 2, n - 1];
            want.dedup();
            hits.clear();
            find_roots_u32(&coeffs, &c, &mut hits);
            assert_eq!(hits, want, "n = {n}");
        }
    }
}

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

/// Inserts several identifiers (each accumulator grows by less than `2^33` per identifier).
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
        _mm256_extracti128_si256, _mm256_movemask_pd, _mm256_mul_epu32, _mm256_or_si256,
        _mm256_set_epi64x, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_slli_epi64,
        _mm256_srli_epi64,
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

    /// Adds the powers of 8 identifiers to the accumulators.
    #[target_feature(enable = "avx2")]
    pub(super) fn insert8(acc: &mut [u64], xs: &[u32; 8]) {
        let zero = _mm256_setzero_si256();
        let xa = lanes(&xs[..4]);
        let xb = lanes(&xs[4..]);
        // Four independent chains: odd and even powers of both vectors, each stepping by x².
        // Every y is congruent to its power and < 2^32 + 25; low32(y) feeds multiplications.
        let sa2 = mul_add_fold2(xa, xa, zero);
        let sb2 = mul_add_fold2(xb, xb, zero);
        let (xa2, xb2) = (low32(sa2), low32(sb2));
        let (mut oa, mut ob) = (xa, xb);
        let (mut ea, mut eb) = (sa2, sb2);
        let mut pairs = acc.chunks_exact_mut(2);
        for pair in &mut pairs {
            // 8 lanes < 2^32 + 25 each: a horizontal sum is < 2^36 (the u32 lazy bound allows
            // < 2^33 per identifier).
            pair[0] += hsum(_mm256_add_epi64(oa, ob));
            pair[1] += hsum(_mm256_add_epi64(ea, eb));
            oa = mul_add_fold2(low32(oa), xa2, zero);
            ob = mul_add_fold2(low32(ob), xb2, zero);
            ea = mul_add_fold2(low32(ea), xa2, zero);
            eb = mul_add_fold2(low32(eb), xb2, zero);
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
        let mut acc = [_mm256_set1_epi64x(1); V];
        for &c in coeffs {
            let c = _mm256_set1_epi64x(c as i64);
            for v in 0..V {
                acc[v] = mul_add_fold2(low32(acc[v]), x[v], c);
            }
        }
        let zero = _mm256_setzero_si256();
        let p = _mm256_set1_epi64x(P32 as i64);
        let mut mask = 0u32;
        for (v, a) in acc.iter().enumerate() {
            // One more fold gives the exact representative < 2^32; zero mod p is 0 or p.
            let a = fold(*a);
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

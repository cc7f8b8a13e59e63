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

/// Inserts several identifiers (each accumulator grows by less than `2^32` per identifier).
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
    let mut base = 0usize;
    let mut rest = candidates;
    #[cfg(target_arch = "x86_64")]
    if candidates.len() >= 8 && has_avx2() {
        let mut it = candidates.chunks_exact(8);
        for chunk in &mut it {
            let block: [u32; 8] = core::array::from_fn(|i| chunk[i]);
            // SAFETY: AVX2 support was checked just above.
            let mask = unsafe { avx2::roots8(coeffs, &block) };
            if mask != 0 {
                for i in 0..8 {
                    if mask & (1 << i) != 0 {
                        hits.push(base + i);
                    }
                }
            }
            base += 8;
        }
        rest = it.remainder();
        if !rest.is_empty() {
            // Pad the tail to a full block and ignore the padding lanes.
            let mut block = [0u32; 8];
            block[..rest.len()].copy_from_slice(rest);
            // SAFETY: AVX2 support was checked above.
            let mask = unsafe { avx2::roots8(coeffs, &block) } & ((1u32 << rest.len()) - 1);
            for i in 0..rest.len() {
                if mask & (1 << i) != 0 {
                    hits.push(base + i);
                }
            }
            return;
        }
    }
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
        _mm256_set_epi64x, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_srli_epi64,
    };

    use super::{P32, canon};

    /// One fold modulo `2^32 - 5` per lane: `lo + 5·hi` (the multiplication by 5 reads the
    /// low 32 bits of `hi`, which is all of it).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn fold(v: __m256i) -> __m256i {
        let hi = _mm256_srli_epi64::<32>(v);
        let lo = _mm256_and_si256(v, _mm256_set1_epi64x(0xFFFF_FFFF));
        _mm256_add_epi64(lo, _mm256_mul_epu32(hi, _mm256_set1_epi64x(5)))
    }

    /// For `v < 2^32 + 25`: a value whose LOW 32 bits are a representative of `v` (the high
    /// bits are garbage). When `v ≥ 2^32` its low part is `< 25`, so adding 5 cannot carry
    /// out of the low 32 bits. Only for feeding `_mm256_mul_epu32`, which ignores the high half.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn low32(v: __m256i) -> __m256i {
        _mm256_add_epi64(
            v,
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(v), _mm256_set1_epi64x(5)),
        )
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
        // ya, yb: congruent to the current power and < 2^32 + 25; their low32() feeds the
        // next multiplication.
        let (mut ya, mut yb) = (xa, xb);
        for a in acc.iter_mut() {
            // 8 lanes < 2^32 + 25 each: the horizontal sum is < 2^36 (the u32 lazy bound allows
            // < 2^33 per identifier).
            let s = _mm256_add_epi64(ya, yb);
            let s = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
            *a += _mm_cvtsi128_si64(s) as u64;
            ya = mul_add_fold2(low32(ya), xa, zero);
            yb = mul_add_fold2(low32(yb), xb, zero);
        }
    }

    /// Evaluates the monic polynomial at 8 candidates; bit `i` of the result is set when it
    /// vanishes at candidate `i`.
    #[target_feature(enable = "avx2")]
    pub(super) fn roots8(coeffs: &[u64], xs: &[u32; 8]) -> u32 {
        let xa = lanes(&xs[..4]);
        let xb = lanes(&xs[4..]);
        let one = _mm256_set1_epi64x(1);
        let (mut aa, mut ab) = (one, one);
        for &c in coeffs {
            let c = _mm256_set1_epi64x(c as i64);
            aa = mul_add_fold2(low32(aa), xa, c);
            ab = mul_add_fold2(low32(ab), xb, c);
        }
        // One more fold: exact representatives < 2^32.
        let (aa, ab) = (fold(aa), fold(ab));
        // Zero modulo p: the lazily reduced value is 0 or p.
        let zero = _mm256_setzero_si256();
        let p = _mm256_set1_epi64x(P32 as i64);
        let za = _mm256_or_si256(_mm256_cmpeq_epi64(aa, zero), _mm256_cmpeq_epi64(aa, p));
        let zb = _mm256_or_si256(_mm256_cmpeq_epi64(ab, zero), _mm256_cmpeq_epi64(ab, p));
        let ma = _mm256_movemask_pd(_mm256_castsi256_pd(za)) as u32;
        let mb = _mm256_movemask_pd(_mm256_castsi256_pd(zb)) as u32;
        ma | (mb << 4)
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
    }
}

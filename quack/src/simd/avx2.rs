//! AVX2 kernels of the 32-bit field: every function here is `#[target_feature(enable = "avx2")]`
//! and is called only through a [`Kernels`](super::Kernels) value that detected AVX2.
//!
//! Lanes are 64 bits wide and hold one value each. Two representations occur:
//! - a *value*: a 64-bit integer congruent to the field element, with a stated bound;
//! - a *multiplier*: only the low 32 bits matter (they are a representative `< 2^32`, or `< p`
//!   where stated); `_mm256_mul_epu32` reads nothing else, so the high 32 bits may be garbage.

use core::arch::x86_64::{
    __m256i, _mm_add_epi64, _mm_cvtsi128_si64, _mm_extract_epi64, _mm_set_epi32, _mm256_add_epi64,
    _mm256_and_si256, _mm256_castsi256_pd, _mm256_castsi256_si128, _mm256_cmpeq_epi64,
    _mm256_cvtepu32_epi64, _mm256_extracti128_si256, _mm256_min_epu32, _mm256_movemask_pd,
    _mm256_mul_epu32, _mm256_or_si256, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_slli_epi64,
    _mm256_srli_epi64, _mm256_sub_epi32, _mm256_sub_epi64, _mm256_unpackhi_epi64,
    _mm256_unpacklo_epi64,
};

use super::P32;

/// `64·p`: a multiple of p above any block sum of 8 lanes below `6·2^32`.
const NEG_BLOCK: u64 = 64 * P32;

/// One fold modulo `2^32 - 5` per lane: `lo + 5·hi`. For a value `< 2^64` the result is
/// `< 6·2^32`; for a value `< 6·2^32` it is `< 2^32 + 25`; for a value `< 2^32 + 25` it is
/// `< 2^32`.
#[inline]
#[target_feature(enable = "avx2")]
fn fold(v: __m256i) -> __m256i {
    let hi = _mm256_srli_epi64::<32>(v);
    let lo = _mm256_and_si256(v, _mm256_set1_epi64x(0xFFFF_FFFF));
    _mm256_add_epi64(lo, times5(hi))
}

/// `5·v` per lane for `v < 2^32`.
#[inline]
#[target_feature(enable = "avx2")]
fn times5(v: __m256i) -> __m256i {
    _mm256_add_epi64(_mm256_slli_epi64::<2>(v), v)
}

/// A multiplier from a value `v < 2^32 + 25`: the low 32 bits of `v + 5·(v >> 32)` represent
/// `v` (when `v ≥ 2^32` its low part is `< 25`, so adding 5 cannot carry out of them).
#[inline]
#[target_feature(enable = "avx2")]
fn low32(v: __m256i) -> __m256i {
    _mm256_add_epi64(v, times5(_mm256_srli_epi64::<32>(v)))
}

/// The canonical multiplier (`< p` in the low 32 bits) of a value `< 2^32 + 25`.
///
/// With `l` the low 32 bits, `min(l, l − p mod 2^32)` is `l − p` when `l ≥ p` and `l` otherwise
/// (then `l − p mod 2^32 = l + 5`, no wrap because `l < p = 2^32 − 5`). The 32-bit operations
/// also touch the high halves; with the constant's high half zero they keep them unchanged.
#[inline]
#[target_feature(enable = "avx2")]
fn canonical_low(v: __m256i) -> __m256i {
    let l = low32(v);
    _mm256_min_epu32(l, _mm256_sub_epi32(l, _mm256_set1_epi64x(P32 as i64)))
}

/// The multiplier `5·m mod p` (a representative `< 2^32` in the low 32 bits) of a multiplier
/// `m`: `5m < 5·2^32`, one fold `< 2^32 + 20`, then [`low32`].
#[inline]
#[target_feature(enable = "avx2")]
fn times5_low(m: __m256i) -> __m256i {
    low32(fold(_mm256_mul_epu32(m, _mm256_set1_epi64x(5))))
}

/// Four zero-extended identifiers.
#[inline]
#[target_feature(enable = "avx2")]
fn load4(x: &[u32]) -> __m256i {
    _mm256_cvtepu32_epi64(_mm_set_epi32(
        x[3] as i32,
        x[2] as i32,
        x[1] as i32,
        x[0] as i32,
    ))
}

/// One step of a power chain: `r·m` for a value `r < 6·2^32`, a multiplier `m < p` and
/// `m5 = 5·m mod p` (any multiplier `< 2^32`). With `r = lo + hi·2^32` (`hi ≤ 5`) and
/// `2^32 ≡ 5`, `r·m ≡ lo·m + hi·m5`, and `lo·m + hi·m5 ≤ (2^32−1)(p−1) + 5(2^32−1) < 2^64`;
/// one fold brings the result back below `6·2^32`. Two multiplications and one fold.
#[inline]
#[target_feature(enable = "avx2")]
fn chain_step(r: __m256i, m: __m256i, m5: __m256i) -> __m256i {
    let p = _mm256_add_epi64(
        _mm256_mul_epu32(r, m),
        _mm256_mul_epu32(_mm256_srli_epi64::<32>(r), m5),
    );
    fold(p)
}

/// `[Σ lanes of a, Σ lanes of b]` as two 64-bit integers.
#[inline]
#[target_feature(enable = "avx2")]
fn hsum2(a: __m256i, b: __m256i) -> (u64, u64) {
    // [a0+a1, b0+b1, a2+a3, b2+b3], then the two 128-bit halves added.
    let u = _mm256_add_epi64(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    let w = _mm_add_epi64(_mm256_castsi256_si128(u), _mm256_extracti128_si256::<1>(u));
    (
        _mm_cvtsi128_si64(w) as u64,
        _mm_extract_epi64::<1>(w) as u64,
    )
}

/// Adds the powers `x^1..x^t` of 8 identifiers to the `t` accumulators.
///
/// Each accumulator grows by less than `8·6·2^32`, i.e. `1.5·2^34` per identifier (the u32
/// lazy bound): every lane added is a value `< 6·2^32`.
///
/// With `NEG`, the powers are subtracted instead: each accumulator receives `64·p − S` for the
/// block's sum `S < 48·2^32 < 64·p` of the 8 lanes, i.e. grows by less than `64·p < 2^38`.
#[target_feature(enable = "avx2")]
pub(super) fn insert8<const NEG: bool>(acc: &mut [u64], xs: &[u32; 8]) {
    let add = |a: &mut u64, s: u64| *a += if NEG { NEG_BLOCK - s } else { s };
    // The identifiers themselves are the first chain values: any value `< 2^32` will do, so
    // they are not reduced.
    let xa = load4(&xs[..4]);
    let xb = load4(&xs[4..]);
    // Four independent chains: odd and even powers of both vectors, each stepping by x².
    // x² as a value (< 2^32 + 25, the even chains' start) and as canonical multipliers.
    let ea0 = fold(fold(_mm256_mul_epu32(xa, xa)));
    let eb0 = fold(fold(_mm256_mul_epu32(xb, xb)));
    let ma = canonical_low(ea0);
    let mb = canonical_low(eb0);
    let ma5 = times5_low(ma);
    let mb5 = times5_low(mb);
    let (mut oa, mut ob, mut ea, mut eb) = (xa, xb, ea0, eb0);
    let mut pairs = acc.chunks_exact_mut(2);
    let mut first = true;
    for pair in &mut pairs {
        if !first {
            oa = chain_step(oa, ma, ma5);
            ob = chain_step(ob, mb, mb5);
            ea = chain_step(ea, ma, ma5);
            eb = chain_step(eb, mb, mb5);
        }
        first = false;
        let (odd, even) = hsum2(_mm256_add_epi64(oa, ob), _mm256_add_epi64(ea, eb));
        add(&mut pair[0], odd);
        add(&mut pair[1], even);
    }
    if let [last] = pairs.into_remainder() {
        if !first {
            oa = chain_step(oa, ma, ma5);
            ob = chain_step(ob, mb, mb5);
        }
        let (odd, _) = hsum2(_mm256_add_epi64(oa, ob), _mm256_setzero_si256());
        add(last, odd);
    }
}

/// Adds `s·x^0, s·x^1, …, s·x^(t−1)` of every lane to the `t` accumulators, where lane `i`
/// of the first `V` vectors of `ids` has multiplier `x = ids[i]` and start `s = x` — or
/// `s = p − x` (mod p: `−x`) in the vectors from `neg_from` on. That is, the powers
/// `x^1..x^t` of the first vectors' identifiers are added and those of the later vectors'
/// subtracted, in one pass: one power chain per vector, `V` chains in flight (no odd/even
/// split is needed for ILP once there are several vectors), one horizontal sum per
/// accumulator. Zero lanes add nothing (their chain is `s, 0, 0, …` with `s ∈ {0, p}`).
///
/// Each lane adds a value `< 6·2^32` to every accumulator: `4·V` lazy insertions' worth.
#[target_feature(enable = "avx2")]
pub(super) fn fold_signed<const V: usize>(acc: &mut [u64], ids: &[u32; 32], neg_from: usize) {
    // Canonical multipliers with zero high halves (see `canonical_low`), so `p − x` is a value
    // `≤ p` in the whole 64-bit lane.
    let x: [__m256i; V] = core::array::from_fn(|v| canonical_low(load4(&ids[4 * v..])));
    let x5: [__m256i; V] = core::array::from_fn(|v| times5_low(x[v]));
    let p = _mm256_set1_epi64x(P32 as i64);
    let mut r: [__m256i; V] = core::array::from_fn(|v| {
        if v >= neg_from {
            _mm256_sub_epi64(p, x[v])
        } else {
            x[v]
        }
    });
    let sum = |r: &[__m256i; V]| {
        let mut s = r[0];
        for v in r.iter().skip(1) {
            s = _mm256_add_epi64(s, *v);
        }
        s
    };
    let step = |r: &mut [__m256i; V]| {
        for v in 0..V {
            r[v] = chain_step(r[v], x[v], x5[v]);
        }
    };
    let mut pairs = acc.chunks_exact_mut(2);
    let mut first = true;
    for pair in &mut pairs {
        if !first {
            step(&mut r);
        }
        first = false;
        let even = sum(&r);
        step(&mut r);
        let (a, b) = hsum2(even, sum(&r));
        pair[0] += a;
        pair[1] += b;
    }
    if let [last] = pairs.into_remainder() {
        if !first {
            step(&mut r);
        }
        let (a, _) = hsum2(sum(&r), _mm256_setzero_si256());
        *last += a;
    }
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
    let n = xs.len().min(4 * V).min(32);
    let mut padded = [0u32; 32];
    padded[..n].copy_from_slice(&xs[..n]);
    // Canonical multipliers (the high halves are zero before and after `canonical_low`'s
    // 32-bit operations) and 5·x mod p for the high part of the running value.
    let x: [__m256i; V] = core::array::from_fn(|v| canonical_low(load4(&padded[4 * v..])));
    let x5: [__m256i; V] = core::array::from_fn(|v| times5_low(x[v]));
    // Horner: acc ← acc·x + c with acc a value below 6·2^32 (one fold per step). With
    // acc = lo + hi·2^32 and canonical c: lo·x + hi·x5 + c ≤ (2^32−1)(p−1) + 5(2^32−1) + (p−1)
    // < 2^64.
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
    let zero = _mm256_setzero_si256();
    let p = _mm256_set1_epi64x(P32 as i64);
    let mut mask = 0u32;
    for (v, a) in acc.iter().enumerate() {
        // Two more folds give a value < 2^32 (< 2^32 + 25, then < 2^32); zero mod p is 0 or p.
        let a = fold(fold(*a));
        let z = _mm256_or_si256(_mm256_cmpeq_epi64(a, zero), _mm256_cmpeq_epi64(a, p));
        mask |= (_mm256_movemask_pd(_mm256_castsi256_pd(z)) as u32) << (4 * v);
    }
    let valid = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    mask & valid
}

//! Hot loops of the 32-bit field (`p = 2^32 - 5`): power-sum insertion and candidate evaluation.
//!
//! Values stay lazily reduced below `2^32` between multiplications (see [`fold32`]). Two
//! implementations:
//! - portable scalar code that interleaves independent chains for instruction-level parallelism;
//! - on x86-64 with AVX2 (detected at run time, once per quACK or decoder: [`Kernels`]),
//!   4 × 64-bit lanes per vector, each lane one identifier (insertion) or one candidate
//!   (evaluation).
//!
//! This module needs `unsafe` for exactly one thing: calling a `#[target_feature(enable =
//! "avx2")]` function, which is sound only on a CPU that supports AVX2. Each such call site is
//! guarded by a [`Kernels`] value whose `avx2` flag only [`Kernels::detect`] sets, from
//! `is_x86_feature_detected!("avx2")`.
#![allow(unsafe_code)]

use crate::field::fold32;

const P32: u64 = 4_294_967_291;

/// The CPU-specific kernels a quACK or decoder may use, detected when it is created and kept in
/// it (the crate has no global state of its own; the detection macro reads the standard
/// library's cache of `cpuid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernels {
    /// AVX2 is available (only ever set from run-time detection).
    avx2: bool,
}

impl Kernels {
    /// Kernels of the running CPU.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = false;
        Kernels { avx2 }
    }

    /// Portable code only (tests compare it with the detected kernels).
    #[cfg(test)]
    pub(crate) const PORTABLE: Kernels = Kernels { avx2: false };
}

impl Default for Kernels {
    fn default() -> Self {
        Self::detect()
    }
}

/// Canonical representative of a 32-bit identifier.
#[inline(always)]
fn canon(x: u32) -> u64 {
    let x = u64::from(x);
    if x >= P32 { x - P32 } else { x }
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
pub(crate) fn insert8_u32(acc: &mut [u64], xs: &[u32; 8], kernels: Kernels) {
    #[cfg(target_arch = "x86_64")]
    if kernels.avx2 {
        // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2 (`Kernels::detect`).
        unsafe { avx2::insert8::<false>(acc, xs) };
        return;
    }
    insert_batch_u32(acc, xs, kernels);
}

/// Inserts several identifiers (each accumulator grows by less than `1.5·2^34` per identifier).
pub(crate) fn insert_batch_u32(acc: &mut [u64], xs: &[u32], kernels: Kernels) {
    let mut rest = xs;
    #[cfg(target_arch = "x86_64")]
    if xs.len() >= 2 && kernels.avx2 {
        let mut it = xs.chunks_exact(8);
        for chunk in &mut it {
            let block: [u32; 8] = core::array::from_fn(|i| chunk[i]);
            // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2.
            unsafe { avx2::insert8::<false>(acc, &block) };
        }
        rest = it.remainder();
        if rest.len() >= 2 {
            // A partial block padded with zeros: every power of 0 is 0, so the padding adds
            // nothing, and one vector pass beats two or more scalar chains.
            let mut block = [0u32; 8];
            block[..rest.len()].copy_from_slice(rest);
            // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2.
            unsafe { avx2::insert8::<false>(acc, &block) };
            return;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernels;
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

/// Subtracts the powers of several identifiers: each accumulator grows by less than `64·p`
/// per block of up to 8 identifiers (AVX2) or by less than `p` per identifier (portable).
pub(crate) fn remove_batch_u32(acc: &mut [u64], xs: &[u32], kernels: Kernels) {
    #[cfg(target_arch = "x86_64")]
    if kernels.avx2 {
        for chunk in xs.chunks(8) {
            // Zero padding adds nothing (every power of 0 is 0).
            let mut block = [0u32; 8];
            block[..chunk.len()].copy_from_slice(chunk);
            // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2.
            unsafe { avx2::insert8::<true>(acc, &block) };
        }
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernels;
    for &x in xs {
        let x = canon(x);
        let mut y = x;
        for a in acc.iter_mut() {
            *a += if y == 0 { 0 } else { P32 - y };
            y = fold32(y * x);
            if y >= P32 {
                y -= P32;
            }
        }
    }
}

/// Adds the powers of the `plus` identifiers and subtracts those of the `minus` identifiers
/// (each given as up to two slices: the unfolded part of an insertion ring), lazily: each
/// accumulator grows by less than `16·1.5·2^34` per identifier.
pub(crate) fn fold_signed_u32(
    acc: &mut [u64],
    plus: [&[u32]; 2],
    minus: [&[u32]; 2],
    kernels: Kernels,
) {
    let np = plus[0].len() + plus[1].len();
    let nm = minus[0].len() + minus[1].len();
    #[cfg(target_arch = "x86_64")]
    if kernels.avx2 && np <= 16 && nm <= 16 && np + nm >= 2 {
        // The identifiers of both signs in one block of up to 8 vectors: `plus` from lane 0,
        // `minus` from the next vector boundary, zeros between and after.
        let mut ids = [0u32; 32];
        let mut at = 0;
        for part in plus {
            ids[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        let vp = np.div_ceil(4);
        at = 4 * vp;
        for part in minus {
            ids[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        let vectors = vp + nm.div_ceil(4);
        // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2 (`Kernels::detect`).
        unsafe {
            match vectors {
                1 => avx2::fold_signed::<1>(acc, &ids, vp),
                2 => avx2::fold_signed::<2>(acc, &ids, vp),
                3 => avx2::fold_signed::<3>(acc, &ids, vp),
                4 => avx2::fold_signed::<4>(acc, &ids, vp),
                5 => avx2::fold_signed::<5>(acc, &ids, vp),
                6 => avx2::fold_signed::<6>(acc, &ids, vp),
                7 => avx2::fold_signed::<7>(acc, &ids, vp),
                _ => avx2::fold_signed::<8>(acc, &ids, vp),
            }
        }
        return;
    }
    let _ = (np, nm);
    for part in plus {
        insert_batch_u32(acc, part, kernels);
    }
    for part in minus {
        remove_batch_u32(acc, part, kernels);
    }
}

/// Horner evaluation of the monic polynomial at each candidate; pushes the indices of the
/// candidates where it vanishes.
pub(crate) fn find_roots_u32(
    coeffs: &[u64],
    candidates: &[u32],
    hit: &mut impl FnMut(usize),
    kernels: Kernels,
) {
    #[cfg(target_arch = "x86_64")]
    if candidates.len() >= 4 && kernels.avx2 {
        const B: usize = avx2::ROOTS_BLOCK;
        let push = |mask: u32, base: usize, hit: &mut dyn FnMut(usize)| {
            let mut m = mask;
            while m != 0 {
                hit(base + m.trailing_zeros() as usize);
                m &= m - 1;
            }
        };
        let mut base = 0usize;
        let mut it = candidates.chunks_exact(B);
        for chunk in &mut it {
            // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2.
            let mask = unsafe { avx2::roots_block::<{ B / 4 }>(coeffs, chunk) };
            push(mask, base, hit);
            base += B;
        }
        let rest = it.remainder();
        // The last (or only) block takes as many vectors as it needs: small logs are
        // latency-bound, with all candidates in flight at once.
        // SAFETY: `kernels.avx2` is only set when the CPU supports AVX2.
        let mask = unsafe {
            match rest.len().div_ceil(4) {
                0 => 0,
                1 => avx2::roots_block::<1>(coeffs, rest),
                2 => avx2::roots_block::<2>(coeffs, rest),
                3 => avx2::roots_block::<3>(coeffs, rest),
                4 => avx2::roots_block::<4>(coeffs, rest),
                5 => avx2::roots_block::<5>(coeffs, rest),
                6 => avx2::roots_block::<6>(coeffs, rest),
                7 => avx2::roots_block::<7>(coeffs, rest),
                _ => avx2::roots_block::<8>(coeffs, rest),
            }
        };
        push(mask, base, hit);
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernels;
    find_roots_scalar(coeffs, candidates, 0, hit);
}

/// Portable evaluation: four interleaved Horner chains.
fn find_roots_scalar(coeffs: &[u64], rest: &[u32], mut base: usize, hit: &mut impl FnMut(usize)) {
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
                hit(base + i);
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
            hit(base + i);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;

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
            for k in [Kernels::detect(), Kernels::PORTABLE] {
                let mut acc = vec![0u64; t];
                insert_batch_u32(&mut acc, &xs, k);
                let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                assert_eq!(got, reference_sums(&xs, t), "t = {t}, {k:?}");
            }
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
            for k in [Kernels::detect(), Kernels::PORTABLE] {
                let mut acc = vec![0u64; t];
                insert_batch_u32(&mut acc, &xs, k);
                let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                assert_eq!(got, reference_sums(&xs, t), "t = {t}, {k:?}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn lazy_batches_equal_naive_sums(
            xs in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..70),
            t in 0usize..40,
        ) {
            for k in [Kernels::detect(), Kernels::PORTABLE] {
                let mut acc = vec![0u64; t];
                insert_batch_u32(&mut acc, &xs, k);
                let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                proptest::prop_assert_eq!(got, reference_sums(&xs, t));
                // Exactly 8 at a time (the insert buffer's path).
                let mut acc8 = vec![0u64; t];
                for c in xs.chunks_exact(8) {
                    let block: [u32; 8] = core::array::from_fn(|i| c[i]);
                    insert8_u32(&mut acc8, &block, k);
                }
                let whole = xs.len() / 8 * 8;
                let got8: Vec<u64> = acc8.iter().map(|a| a % P32).collect();
                proptest::prop_assert_eq!(got8, reference_sums(&xs[..whole], t));
            }
        }

        /// Negated folding (the subtrahend's ring in `sub_assign`): inserting and then
        /// removing the same identifiers leaves zero sums, from lazily reduced accumulators
        /// at their bound, in both kernels; removal alone gives the negated reference sums.
        #[test]
        fn remove_batches_cancel_insertions(
            xs in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..40),
            t in 0usize..70,
            start in 0u64..(1 << 40),
        ) {
            for k in [Kernels::detect(), Kernels::PORTABLE] {
                let mut acc = vec![start; t];
                insert_batch_u32(&mut acc, &xs, k);
                remove_batch_u32(&mut acc, &xs, k);
                let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                proptest::prop_assert_eq!(got, vec![start % P32; t]);
                let mut neg = vec![0u64; t];
                remove_batch_u32(&mut neg, &xs, k);
                let got: Vec<u64> = neg.iter().map(|a| (P32 - a % P32) % P32).collect();
                proptest::prop_assert_eq!(got, reference_sums(&xs, t));
            }
        }
    }

    proptest::proptest! {
        /// The one-pass signed fold of `sub_assign` (both rings, each as two slices) equals
        /// inserting the `plus` identifiers and removing the `minus` ones, in both kernels,
        /// from accumulators anywhere below the lazy bound.
        #[test]
        fn signed_fold_equals_insert_then_remove(
            plus in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..=16),
            minus in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..=16),
            split_plus in 0usize..=16,
            split_minus in 0usize..=16,
            t in 0usize..70,
            start in 0u64..(1 << 40),
        ) {
            let (pa, pb) = plus.split_at(split_plus.min(plus.len()));
            let (ma, mb) = minus.split_at(split_minus.min(minus.len()));
            let want: Vec<u64> = reference_sums(&plus, t)
                .iter()
                .zip(reference_sums(&minus, t))
                .map(|(&a, b)| (start % P32 + a + P32 - b) % P32)
                .collect();
            for k in [Kernels::detect(), Kernels::PORTABLE] {
                let mut acc = vec![start; t];
                fold_signed_u32(&mut acc, [pa, pb], [ma, mb], k);
                let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                proptest::prop_assert_eq!(&got, &want, "{:?}", k);
            }
        }
    }

    #[test]
    fn signed_fold_of_extreme_identifiers() {
        // Values at and around p and 2^32 (identifiers ≥ p are congruent to small ones), in
        // every split of a full 16 + 16 block.
        let ids: Vec<u32> = [
            u32::MAX,
            u32::MAX - 4,
            u32::MAX - 5,
            (P32 - 1) as u32,
            0,
            1,
            5,
            4,
        ]
        .iter()
        .copied()
        .cycle()
        .take(16)
        .collect();
        for t in [1usize, 2, 9, 10, 64] {
            for np in [0usize, 1, 4, 5, 15, 16] {
                for nm in [0usize, 1, 3, 8, 16] {
                    let (plus, minus) = (&ids[..np], &ids[16 - nm..]);
                    let want: Vec<u64> = reference_sums(plus, t)
                        .iter()
                        .zip(reference_sums(minus, t))
                        .map(|(&a, b)| (a + P32 - b) % P32)
                        .collect();
                    let mut acc = vec![0u64; t];
                    fold_signed_u32(&mut acc, [plus, &[]], [&[], minus], Kernels::detect());
                    let got: Vec<u64> = acc.iter().map(|a| a % P32).collect();
                    assert_eq!(got, want, "t = {t}, {np} + {nm}");
                }
            }
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
            find_roots_u32(&coeffs, &cands, &mut |i| hits.push(i), Kernels::detect());
            proptest::prop_assert_eq!(&hits, &want);
            hits.clear();
            find_roots_scalar(&coeffs, &cands, 0, &mut |i| hits.push(i));
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
        find_roots_u32(&coeffs, &cands, &mut |i| hits.push(i), Kernels::detect());
        assert_eq!(hits, vec![3, 8, 13, 18]);
        // The portable path, and every block size of the SIMD path.
        hits.clear();
        find_roots_scalar(&coeffs, &cands, 0, &mut |i| hits.push(i));
        assert_eq!(hits, vec![3, 8, 13, 18]);
        for n in [1usize, 4, 7, 9, 16, 17, 31, 32, 33, 64, 70] {
            let mut c: Vec<u32> = (1000..1000 + n as u32).collect();
            c[n - 1] = 3;
            c[n / 2] = 5;
            let mut want = vec![n / 2, n - 1];
            want.dedup();
            hits.clear();
            find_roots_u32(&coeffs, &c, &mut |i| hits.push(i), Kernels::detect());
            assert_eq!(hits, want, "n = {n}");
        }
    }
}

//! Hot loops of the 32-bit field (`p = 2^32 - 5`): power-sum insertion and candidate evaluation.
//!
//! Portable scalar code, written so that independent chains interleave (instruction-level
//! parallelism) and values stay lazily reduced below `2^32` between multiplications
//! (see [`fold32`]).

use crate::field::fold32;

const P32: u64 = 4_294_967_291;

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

/// Inserts several identifiers; interleaves two identifiers' chains for parallelism.
pub(crate) fn insert_batch_u32(acc: &mut [u64], xs: &[u32]) {
    let mut it = xs.chunks_exact(2);
    for pair in &mut it {
        let a = u64::from(pair[0]) % P32;
        let b = u64::from(pair[1]) % P32;
        let (mut ya, mut yb) = (a, b);
        for s in acc.iter_mut() {
            *s += ya + yb;
            ya = fold32(ya * a);
            yb = fold32(yb * b);
        }
    }
    for &x in it.remainder() {
        insert_u32(acc, u64::from(x) % P32);
    }
}

/// Horner evaluation of the monic polynomial at each candidate, several candidates interleaved.
pub(crate) fn find_roots_u32(coeffs: &[u64], candidates: &[u32], hits: &mut Vec<usize>) {
    const LANES: usize = 4;
    let mut chunks = candidates.chunks_exact(LANES);
    let mut base = 0usize;
    for chunk in &mut chunks {
        let x: [u64; LANES] = core::array::from_fn(|i| u64::from(chunk[i]) % P32);
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
        let x = u64::from(cand) % P32;
        let mut acc = 1u64;
        for &c in coeffs {
            acc = fold32(acc * x + c);
        }
        if acc == 0 || acc == P32 {
            hits.push(base + i);
        }
    }
}

//! Prime-field arithmetic for the three identifier widths.
//!
//! Sidekick (NSDI '24) §3.4: identifiers are mapped into the field of integers modulo the largest prime that
//! fits in `b` bytes. Each of those primes has the special form `p = 2^(8b) - c` with a small `c`
//! (16 bits: `2^16 - 15`; 32 bits: `2^32 - 5`; 64 bits: `2^64 - 59`), so a double-width product
//! `hi·2^(8b) + lo` reduces to `hi·c + lo` with a couple of folds instead of a hardware division
//! (this replaces the Montgomery multiplication of Sidekick (NSDI '24) §3.5 for 64-bit identifiers: same
//! purpose, fewer multiplications because `c` is tiny).
//!
//! Values handed between the generic code and these routines are `u64`. A *canonical* value is
//! `< p`. Power-sum accumulators are kept *lazily reduced*: any `u64` congruent to the power sum,
//! with a per-width bound on how many insertions may happen before [`Identifier::acc_canonical`]
//! must be applied (see [`Identifier::LAZY_LIMIT`]).

use core::fmt::Debug;
use core::hash::Hash;

use crate::decode::SMALL_T;
use crate::simd::Kernels;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// An identifier width usable in a [`PowerSumQuack`](crate::PowerSumQuack): `u16`, `u32` or `u64`.
///
/// The trait is sealed; its methods are the field arithmetic modulo [`Identifier::MODULUS`], the
/// largest prime below `2^BITS`. All arithmetic methods take and return `u64` field values.
pub trait Identifier:
    sealed::Sealed + Copy + Eq + Ord + Hash + Debug + Default + Send + Sync + 'static
{
    /// Width of an identifier in bytes (`b` in Sidekick (NSDI '24)).
    const BYTES: usize;
    /// The prime modulus: the largest prime below `2^(8·BYTES)`.
    const MODULUS: u64;
    /// Number of consecutive lazy insertions an accumulator tolerates before it must be
    /// normalised with [`Identifier::acc_canonical`].
    const LAZY_LIMIT: u32;
    /// Whether [`PowerSumQuack::insert`](crate::PowerSumQuack::insert) buffers identifiers and
    /// folds several at once with [`Identifier::acc_insert_batch`].
    const BUFFERED: bool = false;
    /// `SMALL_INVERSES[k]` is the inverse of `k` for `1 ≤ k ≤ 64` (`[0]` is 0), computed at
    /// compile time: Newton's identities divide by `1..=m`.
    const SMALL_INVERSES: [u64; SMALL_T + 1];

    /// The identifier as an integer (not reduced).
    fn to_u64(self) -> u64;
    /// The low `8·BYTES` bits of `v` as an identifier.
    fn from_u64_truncating(v: u64) -> Self;
    /// Reads `BYTES` little-endian bytes; `None` if `bytes.len() != BYTES`.
    fn from_le_slice(bytes: &[u8]) -> Option<Self>;
    /// Writes the identifier as `BYTES` little-endian bytes into `out[..BYTES]`.
    ///
    /// # Panics
    /// If `out` is shorter than `BYTES` (callers size their buffers from `BYTES`).
    fn write_le(self, out: &mut [u8]);

    /// Reduces any `u64` to its canonical representative `< p`.
    fn reduce(v: u64) -> u64;
    /// Product of two canonical values, canonical.
    fn mul_mod(a: u64, b: u64) -> u64;

    /// Normalises a lazily reduced accumulator to its canonical value.
    fn acc_canonical(acc: u64) -> u64;
    /// Adds `x^1, x^2, …, x^len` to the accumulators (lazily). `x` is canonical.
    fn acc_insert(acc: &mut [u64], x: u64);
    /// Adds the powers of several identifiers at once (lazily); the caller guarantees that
    /// `xs.len()` further lazy insertions stay within [`Identifier::LAZY_LIMIT`]. `kernels`
    /// says which CPU-specific code may run (detected when the quACK was created).
    fn acc_insert_batch(acc: &mut [u64], xs: &[Self], kernels: Kernels) {
        let _ = kernels;
        // Four identifiers' power chains interleaved: independent multiplications overlap.
        let mut it = xs.chunks_exact(4);
        for c in &mut it {
            let x: [u64; 4] = core::array::from_fn(|i| Self::reduce(c[i].to_u64()));
            let mut y = x;
            for a in acc.iter_mut() {
                *a = Self::acc_add(Self::acc_add(*a, y[0]), Self::add_mod(y[1], y[2]));
                *a = Self::acc_add(*a, y[3]);
                for i in 0..4 {
                    y[i] = Self::mul_mod(y[i], x[i]);
                }
            }
        }
        for &x in it.remainder() {
            Self::acc_insert(acc, Self::reduce(x.to_u64()));
        }
    }
    /// Subtracts the powers `x^1..x^len` of several identifiers from the accumulators
    /// (lazily: each adds less than 64·p per identifier for u32, less than p otherwise);
    /// the caller makes room for 16 lazy insertions per identifier.
    fn acc_remove_batch(acc: &mut [u64], xs: &[Self], kernels: Kernels) {
        let _ = kernels;
        for &x in xs {
            let x = Self::reduce(x.to_u64());
            let mut y = x;
            for a in acc.iter_mut() {
                *a = Self::acc_add(*a, Self::neg_mod(y));
                y = Self::mul_mod(y, x);
            }
        }
    }
    /// Adds the powers of the `plus` identifiers and subtracts those of the `minus` ones (each
    /// up to two slices: the unfolded parts of two insertion rings), lazily; the caller makes
    /// room for 16 lazy insertions per identifier.
    fn acc_fold_signed(acc: &mut [u64], plus: [&[Self]; 2], minus: [&[Self]; 2], kernels: Kernels) {
        for part in plus {
            Self::acc_insert_batch(acc, part, kernels);
        }
        for part in minus {
            Self::acc_remove_batch(acc, part, kernels);
        }
    }
    /// [`Identifier::acc_insert_batch`] for a full insert buffer.
    #[inline]
    fn acc_insert_full(
        acc: &mut [u64],
        xs: &[Self; crate::quack::INSERT_BUFFER],
        kernels: Kernels,
    ) {
        Self::acc_insert_batch(acc, xs, kernels);
    }
    /// Adds a canonical value to a lazily reduced accumulator (one lazy insertion's worth).
    #[inline]
    fn acc_add(acc: u64, v: u64) -> u64 {
        Self::add_mod(acc, v)
    }
    /// Evaluates the monic polynomial `x^m + coeffs[0]·x^(m-1) + … + coeffs[m-1]` at every
    /// candidate and pushes the index of each candidate where it vanishes into `hits`.
    /// Coefficients are canonical; `kernels` as for [`Identifier::acc_insert_batch`].
    fn find_roots(
        coeffs: &[u64],
        candidates: &[Self],
        hit: &mut impl FnMut(usize),
        kernels: Kernels,
    ) {
        let _ = kernels;
        // Four Horner chains interleaved (one chain is latency-bound).
        let mut it = candidates.chunks_exact(4);
        let mut base = 0;
        for c in &mut it {
            let x: [u64; 4] = core::array::from_fn(|i| Self::reduce(c[i].to_u64()));
            let mut acc = [1u64; 4];
            for &k in coeffs {
                for i in 0..4 {
                    acc[i] = Self::add_mod(Self::mul_mod(acc[i], x[i]), k);
                }
            }
            for (i, a) in acc.iter().enumerate() {
                if *a == 0 {
                    hit(base + i);
                }
            }
            base += 4;
        }
        for (i, &x) in it.remainder().iter().enumerate() {
            if eval_monic::<Self>(coeffs, Self::reduce(x.to_u64())) == 0 {
                hit(base + i);
            }
        }
    }

    /// `Σ a[i]·b[len−1−i]` (a convolution term) for canonical inputs of equal length
    /// (at most [`MAX_THRESHOLD`](crate::MAX_THRESHOLD) + 1), canonical.
    fn dot_rev(a: &[u64], b: &[u64]) -> u64 {
        a.iter()
            .zip(b.iter().rev())
            .fold(0, |acc, (&x, &y)| Self::add_mod(acc, Self::mul_mod(x, y)))
    }

    /// Newton's identities (Sidekick (NSDI '24) §3.4 and its reference 22): with `c_0 = 1`,
    /// `k·c_k = −Σ_{i=1..k} c_(k−i)·p_i`, giving `P(x) = x^m + c_1 x^(m−1) + … + c_m`.
    /// `sums` are the canonical power sums `p_1..`, `inverses[k]` the inverse of `k`;
    /// `coeffs` (of length `m`) receives the canonical `c_1..c_m`.
    fn newton(sums: &[u64], inverses: &[u64], coeffs: &mut [u64]) {
        for k in 1..=coeffs.len() {
            // c_(k-i) for i = 1..k-1 is coeffs[k-i-1]; the i = k term is c_0·p_k = p_k.
            let acc = Self::add_mod(sums[k - 1], Self::dot_rev(&sums[..k - 1], &coeffs[..k - 1]));
            coeffs[k - 1] = Self::neg_mod(Self::mul_mod(acc, inverses[k]));
        }
    }

    /// Sum of two canonical values, canonical.
    #[inline]
    fn add_mod(a: u64, b: u64) -> u64 {
        let (s, carry) = a.overflowing_add(b);
        if carry || s >= Self::MODULUS {
            s.wrapping_sub(Self::MODULUS)
        } else {
            s
        }
    }
    /// Difference of two canonical values, canonical.
    #[inline]
    fn sub_mod(a: u64, b: u64) -> u64 {
        if a >= b {
            a - b
        } else {
            a.wrapping_sub(b).wrapping_add(Self::MODULUS)
        }
    }
    /// Negation of a canonical value, canonical.
    #[inline]
    fn neg_mod(a: u64) -> u64 {
        if a == 0 { 0 } else { Self::MODULUS - a }
    }
    /// `base^exp` for a canonical base.
    fn pow_mod(base: u64, mut exp: u64) -> u64 {
        let mut result = 1u64;
        let mut b = base;
        while exp > 0 {
            if exp & 1 == 1 {
                result = Self::mul_mod(result, b);
            }
            b = Self::mul_mod(b, b);
            exp >>= 1;
        }
        result
    }
    /// Multiplicative inverse of a non-zero canonical value (Fermat: `a^(p-2)`); `0` maps to `0`.
    fn inv_mod(a: u64) -> u64 {
        Self::pow_mod(a, Self::MODULUS - 2)
    }
}

/// Inverses of `0..=SMALL_T` modulo the prime `p > SMALL_T` (`0` for `0`), by
/// `inv(k) = −⌊p/k⌋ · inv(p mod k)`.
const fn inverse_table(p: u64) -> [u64; SMALL_T + 1] {
    let mut t = [0u64; SMALL_T + 1];
    t[1] = 1;
    let mut k = 2;
    while k <= SMALL_T {
        let q = (p / k as u64) as u128;
        let v = (q * t[(p % k as u64) as usize] as u128 % p as u128) as u64;
        t[k] = if v == 0 { 0 } else { p - v };
        k += 1;
    }
    t
}

/// Horner evaluation of a monic polynomial (generic, canonical arithmetic).
#[inline]
pub(crate) fn eval_monic<T: Identifier>(coeffs: &[u64], x: u64) -> u64 {
    let mut acc = 1u64;
    for &c in coeffs {
        acc = T::add_mod(T::mul_mod(acc, x), c);
    }
    acc
}

/// One fold modulo `2^32 - 5` (`2^32 ≡ 5`): `lo + 5·hi`, below `6·2^32` for any 64-bit value.
#[inline(always)]
fn fold_once(v: u64) -> u64 {
    (v & 0xFFFF_FFFF) + (v >> 32) * 5
}

/// Folds a 64-bit value modulo `2^32 - 5` to a representative `< 2^32` (not necessarily `< p`).
#[inline(always)]
pub(crate) fn fold32(v: u64) -> u64 {
    // First fold: < 2^32 + 5·(2^32 - 1) < 6·2^32. Second: high part ≤ 5, result < 2^32 + 25.
    // Third: high part ≤ 1 and then the low part is < 25, so the result is < 2^32.
    fold_once(fold_once(fold_once(v)))
}

/// Folds a 32-bit-range value (< 2^32) modulo `2^16 - 15` to a representative `< 2^16`.
#[inline(always)]
fn fold16(v: u64) -> u64 {
    // 2^16 ≡ 15 (mod p). v < 2^32 → r < 2^16 + 15·2^16 = 2^20.
    let r = (v & 0xFFFF) + (v >> 16) * 15;
    // high part < 16 → r < 2^16 + 225.
    let r = (r & 0xFFFF) + (r >> 16) * 15;
    // high part ≤ 1 and then the low part is < 225 → r < 2^16.
    (r & 0xFFFF) + (r >> 16) * 15
}

impl Identifier for u16 {
    const BYTES: usize = 2;
    const MODULUS: u64 = 65_521;
    const SMALL_INVERSES: [u64; SMALL_T + 1] = inverse_table(Self::MODULUS);
    // Powers are folded below 2^16; an accumulator reset to < p takes 2^47 insertions to
    // overflow. The limit is far below that.
    const LAZY_LIMIT: u32 = 1 << 30;
    const BUFFERED: bool = true;

    #[inline]
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    #[inline]
    fn from_u64_truncating(v: u64) -> Self {
        v as u16
    }
    #[inline]
    fn acc_add(acc: u64, v: u64) -> u64 {
        acc + v
    }
    #[inline]
    fn from_le_slice(bytes: &[u8]) -> Option<Self> {
        Some(u16::from_le_bytes(bytes.try_into().ok()?))
    }
    #[inline]
    fn write_le(self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn reduce(v: u64) -> u64 {
        v % Self::MODULUS
    }
    #[inline]
    fn mul_mod(a: u64, b: u64) -> u64 {
        let r = fold16(a * b);
        if r >= Self::MODULUS {
            r - Self::MODULUS
        } else {
            r
        }
    }
    #[inline]
    fn acc_canonical(acc: u64) -> u64 {
        acc % Self::MODULUS
    }
    #[inline]
    fn acc_insert(acc: &mut [u64], x: u64) {
        let mut y = x;
        for a in acc.iter_mut() {
            *a += y;
            y = fold16(y * x);
        }
    }
    fn dot_rev(a: &[u64], b: &[u64]) -> u64 {
        // Products < 2^32; a few thousand of them fit a u64.
        a.iter()
            .zip(b.iter().rev())
            .map(|(&x, &y)| x * y)
            .sum::<u64>()
            % Self::MODULUS
    }
}

impl Identifier for u32 {
    const BYTES: usize = 4;
    const MODULUS: u64 = 4_294_967_291;
    const SMALL_INVERSES: [u64; SMALL_T + 1] = inverse_table(Self::MODULUS);
    // Each lazy insertion adds a value < 1.5·2^34 (the AVX2 path keeps its lanes folded once,
    // below 6·2^32) to an accumulator that starts < p: 2^28 insertions stay below
    // 2^32 + 1.5·2^62 < 2^64.
    const LAZY_LIMIT: u32 = 1 << 28;
    const BUFFERED: bool = true;

    #[inline]
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    #[inline]
    fn from_u64_truncating(v: u64) -> Self {
        v as u32
    }
    #[inline]
    fn acc_add(acc: u64, v: u64) -> u64 {
        acc + v
    }
    #[inline]
    fn from_le_slice(bytes: &[u8]) -> Option<Self> {
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }
    #[inline]
    fn write_le(self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn reduce(v: u64) -> u64 {
        v % Self::MODULUS
    }
    #[inline]
    fn mul_mod(a: u64, b: u64) -> u64 {
        let r = fold32(a * b);
        if r >= Self::MODULUS {
            r - Self::MODULUS
        } else {
            r
        }
    }
    #[inline]
    fn acc_canonical(acc: u64) -> u64 {
        acc % Self::MODULUS
    }
    #[inline]
    fn acc_insert(acc: &mut [u64], x: u64) {
        crate::simd::insert_u32(acc, x);
    }
    fn acc_insert_batch(acc: &mut [u64], xs: &[Self], kernels: Kernels) {
        crate::simd::insert_batch_u32(acc, xs, kernels);
    }
    #[inline]
    fn acc_insert_full(
        acc: &mut [u64],
        xs: &[Self; crate::quack::INSERT_BUFFER],
        kernels: Kernels,
    ) {
        crate::simd::insert8_u32(acc, xs, kernels);
    }
    fn acc_remove_batch(acc: &mut [u64], xs: &[Self], kernels: Kernels) {
        crate::simd::remove_batch_u32(acc, xs, kernels);
    }
    fn acc_fold_signed(acc: &mut [u64], plus: [&[Self]; 2], minus: [&[Self]; 2], kernels: Kernels) {
        crate::simd::fold_signed_u32(acc, plus, minus, kernels);
    }
    fn find_roots(
        coeffs: &[u64],
        candidates: &[Self],
        hit: &mut impl FnMut(usize),
        kernels: Kernels,
    ) {
        crate::simd::find_roots_u32(coeffs, candidates, hit, kernels);
    }
    fn newton(sums: &[u64], inverses: &[u64], coeffs: &mut [u64]) {
        // Same recurrence as the generic version, with lazy reduction. Coefficients are kept
        // below 2^32 (not necessarily < p) until the end; each product of two values < 2^32 is
        // folded once (`lo + 5·hi < 6·2^32`) and the folded products are summed in a u64: at
        // most MAX_THRESHOLD of them plus p_k stay below 2^47. Two folds bring that sum below
        // 2^32 (the first leaves a high part ≤ 1, and a high part of 1 means a low part below
        // 5·2^15), a multiplication by −1/k (< 2^32) stays below 2^64, and `fold32` brings
        // the product below 2^32.
        //
        // The coefficients are built in reverse (c_j at index m − j) so that the convolution
        // Σ_{i=1..k−1} c_(k−i)·p_i reads both slices forwards (c_(k−1)..c_1 sit at
        // m−k+1..m), which the compiler vectorises; one reversal at the end, which also
        // makes them canonical.
        //
        // The newest coefficient c_(k−1) stays in a register and its product with p_1 is added
        // last: the older products do not wait for it, so the dependency chain from one
        // coefficient to the next is one multiplication, a few folds and the multiplication
        // by −1/k.
        let m = coeffs.len();
        // Up to 16 coefficients (the common thresholds) with every loop bound a constant.
        let fixed = match m {
            1 => newton_u32_fixed::<1>(sums, inverses, coeffs),
            2 => newton_u32_fixed::<2>(sums, inverses, coeffs),
            3 => newton_u32_fixed::<3>(sums, inverses, coeffs),
            4 => newton_u32_fixed::<4>(sums, inverses, coeffs),
            5 => newton_u32_fixed::<5>(sums, inverses, coeffs),
            6 => newton_u32_fixed::<6>(sums, inverses, coeffs),
            7 => newton_u32_fixed::<7>(sums, inverses, coeffs),
            8 => newton_u32_fixed::<8>(sums, inverses, coeffs),
            9 => newton_u32_fixed::<9>(sums, inverses, coeffs),
            10 => newton_u32_fixed::<10>(sums, inverses, coeffs),
            11 => newton_u32_fixed::<11>(sums, inverses, coeffs),
            12 => newton_u32_fixed::<12>(sums, inverses, coeffs),
            13 => newton_u32_fixed::<13>(sums, inverses, coeffs),
            14 => newton_u32_fixed::<14>(sums, inverses, coeffs),
            15 => newton_u32_fixed::<15>(sums, inverses, coeffs),
            16 => newton_u32_fixed::<16>(sums, inverses, coeffs),
            _ => false,
        };
        if fixed {
            return;
        }
        let mut newest = 0u64;
        for k in 1..=m {
            let (head, tail) = coeffs.split_at_mut(m - k + 1);
            let mut s = sums[k - 1];
            if k >= 2 {
                // tail = [c_(k−1), c_(k−2), …, c_1]; c_(k−1) (= newest) pairs with p_1.
                for (&c, &p) in tail[1..].iter().zip(&sums[1..k - 1]) {
                    // Both factors are below 2^32: the masks are no-ops that let the
                    // multiplication be a 32×32→64-bit one.
                    s += fold_once((c & 0xFFFF_FFFF) * (p & 0xFFFF_FFFF));
                }
                s += fold_once(newest * sums[0]);
            }
            newest = fold32(fold_once(fold_once(s)) * (Self::MODULUS - inverses[k]));
            head[m - k] = newest;
        }
        coeffs.reverse();
        for c in coeffs.iter_mut() {
            if *c >= Self::MODULUS {
                *c -= Self::MODULUS;
            }
        }
    }
    fn dot_rev(a: &[u64], b: &[u64]) -> u64 {
        // Products < 2^64 summed exactly in 128 bits, one reduction at the end:
        // 2^64 ≡ 25 (mod p) and the high word stays below 2^13.
        let s: u128 = a
            .iter()
            .zip(b.iter().rev())
            .map(|(&x, &y)| u128::from(x * y))
            .sum();
        Self::reduce(fold32(s as u64) + ((s >> 64) as u64) * 25)
    }
}

/// Newton's identities in the 32-bit field for exactly `M` coefficients (see the slice version
/// in `<u32 as Identifier>::newton` for the bounds of the lazy reduction, which are the same).
/// With `M` a constant both loops unroll and no trip count or bounds check is left per
/// coefficient (at `m = 10` the slice version spent more instructions on those than on its 45
/// products), and the newest coefficient enters through a precomputed factor, which shortens
/// the dependency chain from one coefficient to the next — what bounds a fresh decode's time
/// more than its instruction count does (quack/README.md, "Newton's identities unrolled").
/// Returns `false` (and writes nothing) when the slices are shorter than `M`.
#[inline(always)]
fn newton_u32_fixed<const M: usize>(sums: &[u64], inverses: &[u64], coeffs: &mut [u64]) -> bool {
    let p32 = <u32 as Identifier>::MODULUS;
    let (Some(p), Some(inv), Some(out)) = (
        sums.first_chunk::<M>(),
        inverses.get(1..).and_then(|i| i.first_chunk::<M>()),
        coeffs.first_chunk_mut::<M>(),
    ) else {
        return false;
    };
    // Both factors of every product are below 2^32 (canonical sums; coefficients folded below
    // 2^32), so they are kept as u32: each product is one 32×32→64-bit multiplication.
    let p: [u32; M] = core::array::from_fn(|i| p[i] as u32);
    // c[j] = c_(j+1), below 2^32 (not necessarily below p) until the end.
    let mut c = [0u32; M];
    for k in 0..M {
        // k·c_k = −(p_k + Σ_{i=1..k−1} c_(k−i)·p_i), here for c_(k+1): c[k−1−i] with p[i].
        // Split as c_k = b_k + c_(k−1)·q_k with q_k = −p_1/k: b_k needs only the older
        // coefficients and q_k none, so the chain from one coefficient to the next is one
        // multiplication, an addition and three folds (instead of two multiplications and
        // five folds).
        let w = p32 - inv[k];
        let mut s = u64::from(p[k]);
        for i in (1..k).rev() {
            s += fold_once(u64::from(c[k - 1 - i]) * u64::from(p[i]));
        }
        // fold32 leaves a value below 2^32.
        let b = fold32(fold_once(fold_once(s)) * w);
        c[k] = if k == 0 {
            b
        } else {
            let q = fold32(u64::from(p[0]) * w);
            // < 6·2^32 + 2^32: two folds bring it below 2^32.
            fold_once(fold_once(fold_once(u64::from(c[k - 1]) * q) + b))
        } as u32;
    }
    for (o, v) in out.iter_mut().zip(c) {
        let v = u64::from(v);
        *o = if v >= p32 { v - p32 } else { v };
    }
    true
}

/// `2^64 mod p` for `p = 2^64 - 59`.
const C64: u64 = 59;

impl Identifier for u64 {
    const BYTES: usize = 8;
    const MODULUS: u64 = 18_446_744_073_709_551_557;
    const SMALL_INVERSES: [u64; SMALL_T + 1] = inverse_table(Self::MODULUS);
    // 64-bit accumulators are kept canonical (modular addition on every insertion).
    const LAZY_LIMIT: u32 = u32::MAX;
    const BUFFERED: bool = true;

    #[inline]
    fn to_u64(self) -> u64 {
        self
    }
    #[inline]
    fn from_u64_truncating(v: u64) -> Self {
        v
    }
    #[inline]
    fn from_le_slice(bytes: &[u8]) -> Option<Self> {
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }
    #[inline]
    fn write_le(self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn reduce(v: u64) -> u64 {
        if v >= Self::MODULUS {
            v - Self::MODULUS
        } else {
            v
        }
    }
    #[inline]
    fn mul_mod(a: u64, b: u64) -> u64 {
        let v = u128::from(a) * u128::from(b);
        // 2^64 ≡ 59: fold the high word: < 2^64 + 59·2^64 = 60·2^64.
        let r = (v as u64 as u128) + ((v >> 64) as u64 as u128) * u128::from(C64);
        // High part ≤ 59: one more fold, with a final carry that cannot repeat.
        let (s, carry) = (r as u64).overflowing_add(((r >> 64) as u64) * C64);
        let s = if carry { s + C64 } else { s };
        Self::reduce(s)
    }
    #[inline]
    fn acc_canonical(acc: u64) -> u64 {
        Self::reduce(acc)
    }
    #[inline]
    fn acc_insert(acc: &mut [u64], x: u64) {
        let mut y = x;
        for a in acc.iter_mut() {
            *a = Self::add_mod(*a, y);
            y = Self::mul_mod(y, x);
        }
    }
}

#[cfg(test)]
mod tests;

//! Decoding without a candidate log: the roots of the quACK polynomial over the prime field.
//!
//! Sidekick (NSDI '24) §3.5 mentions factoring as the alternative to evaluating candidates. This module
//! uses the Cantor–Zassenhaus / Rabin approach for roots:
//!
//! 1. strip the root 0 (while the constant term is 0);
//! 2. `g = gcd(P, x^p − x)` is the product of the distinct linear factors of `P`
//!    (`x^p mod P` by square-and-multiply, `O(m² log p)`);
//! 3. split `g` with `gcd(g, (x + a)^((p−1)/2) − 1)` for `a = 1, 2, …` (deterministic shifts,
//!    each splits a given pair of roots with probability ≈ 1/2), recursively, until every factor
//!    is linear;
//! 4. the multiplicity of each root follows from repeated synthetic division of `P`.
//!
//! Limits: cost grows as `O(m² · log p)` per exponentiation with schoolbook polynomial
//! arithmetic, fine for the thresholds used in practice (`m ≤ t ≤ a few hundred`). Identifiers
//! `≥ p` come back as their canonical representative (`x − p`). Each split gives up after
//! [`MAX_SPLIT_ATTEMPTS`] shifts (probability of that ≈ 2^−128), reported as
//! [`DecodeError::NotSplit`].

use crate::decode::{DecodeError, Decoder, multiplicity};
use crate::field::Identifier;
use crate::quack::PowerSumQuack;

/// Shifts `a` tried per split before giving up.
pub const MAX_SPLIT_ATTEMPTS: u64 = 128;

/// A polynomial, coefficients from the constant term up; no trailing zeros (zero = empty).
type Poly = Vec<u64>;

fn trim(p: &mut Poly) {
    while p.last() == Some(&0) {
        p.pop();
    }
}

/// `a mod m` for monic `m`.
fn rem<T: Identifier>(mut a: Poly, m: &[u64]) -> Poly {
    let dm = m.len() - 1;
    while a.len() > dm {
        let lead = a.pop().unwrap_or(0);
        if lead != 0 {
            let shift = a.len() - dm;
            for (i, &c) in m[..dm].iter().enumerate() {
                a[shift + i] = T::sub_mod(a[shift + i], T::mul_mod(lead, c));
            }
        }
    }
    trim(&mut a);
    a
}

/// `a·b mod m` for monic `m`.
fn mulmod<T: Identifier>(a: &[u64], b: &[u64], m: &[u64]) -> Poly {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut prod = vec![0u64; a.len() + b.len() - 1];
    for (i, &x) in a.iter().enumerate() {
        if x == 0 {
            continue;
        }
        for (j, &y) in b.iter().enumerate() {
            prod[i + j] = T::add_mod(prod[i + j], T::mul_mod(x, y));
        }
    }
    rem::<T>(prod, m)
}

/// `base^exp mod m`.
fn powmod<T: Identifier>(base: &[u64], mut exp: u64, m: &[u64]) -> Poly {
    let mut result: Poly = rem::<T>(vec![1], m);
    let mut b = rem::<T>(base.to_vec(), m);
    while exp > 0 {
        if exp & 1 == 1 {
            result = mulmod::<T>(&result, &b, m);
        }
        exp >>= 1;
        if exp > 0 {
            b = mulmod::<T>(&b, &b, m);
        }
    }
    result
}

/// Makes a non-zero polynomial monic.
fn monic<T: Identifier>(p: &mut Poly) {
    if let Some(&lead) = p.last() {
        let inv = T::inv_mod(lead);
        for c in p.iter_mut() {
            *c = T::mul_mod(*c, inv);
        }
    }
}

/// Monic gcd.
fn gcd<T: Identifier>(mut a: Poly, mut b: Poly) -> Poly {
    trim(&mut a);
    trim(&mut b);
    while !b.is_empty() {
        monic::<T>(&mut b);
        let r = rem::<T>(a, &b);
        a = b;
        b = r;
    }
    monic::<T>(&mut a);
    a
}

/// Exact quotient `a / b` for monic `b` dividing `a`.
fn div_exact<T: Identifier>(a: &[u64], b: &[u64]) -> Poly {
    let db = b.len() - 1;
    let mut r = a.to_vec();
    let mut q = vec![0u64; a.len() - db];
    for k in (0..q.len()).rev() {
        let lead = r[k + db];
        q[k] = lead;
        if lead != 0 {
            for (i, &c) in b.iter().enumerate() {
                r[k + i] = T::sub_mod(r[k + i], T::mul_mod(lead, c));
            }
        }
    }
    q
}

/// Pushes the roots of `g` (monic, square-free, product of linear factors) into `roots`.
fn split<T: Identifier>(g: Poly, roots: &mut Vec<u64>) -> Result<(), ()> {
    match g.len() {
        0 | 1 => return Ok(()),
        2 => {
            roots.push(T::neg_mod(g[0]));
            return Ok(());
        }
        _ => {}
    }
    let half = (T::MODULUS - 1) / 2;
    for a in 1..=MAX_SPLIT_ATTEMPTS {
        let mut h = powmod::<T>(&[T::reduce(a), 1], half, &g);
        // h − 1
        if h.is_empty() {
            h.push(T::neg_mod(1));
        } else {
            h[0] = T::sub_mod(h[0], 1);
        }
        trim(&mut h);
        let d = gcd::<T>(g.clone(), h);
        if d.len() > 1 && d.len() < g.len() {
            let other = div_exact::<T>(&g, &d);
            split::<T>(d, roots)?;
            return split::<T>(other, roots);
        }
    }
    Err(())
}

impl<T: Identifier> PowerSumQuack<T> {
    /// Decodes this quACK difference without a log: the `count()` identifiers whose power sums
    /// these are, found as the roots of the quACK polynomial over the field, sorted ascending
    /// (multiset: repeated identifiers repeat). Identifiers are canonical field elements, so an
    /// identifier `x ≥ p` is returned as `x − p`.
    ///
    /// Much slower than [`decode_with_log`](Self::decode_with_log) (`O(m² log p)` field
    /// operations); meant for receivers that keep no log. See the module documentation of
    /// `factor` for the algorithm.
    ///
    /// ```
    /// use quack::PowerSumQuack;
    /// let mut q = PowerSumQuack::<u64>::new(4);
    /// for id in [0xDEAD_BEEF_u64, 42, 42] {
    ///     q.insert(id);
    /// }
    /// assert_eq!(q.decode_by_factoring()?, vec![42, 42, 0xDEAD_BEEF]);
    /// # Ok::<(), quack::DecodeError>(())
    /// ```
    pub fn decode_by_factoring(&self) -> Result<Vec<T>, DecodeError> {
        let mut d = Decoder::new();
        let m = d.coefficients(self)?;
        let missing = m as u32;
        // Low-to-high polynomial: coeffs are c_1..c_m for x^(m-1)..x^0.
        let high_first = d.coeffs().to_vec();
        let mut p: Poly = high_first.iter().rev().copied().collect();
        p.push(1);
        let mut roots = Vec::new();
        // Root 0 with its multiplicity.
        let zeros = p.iter().take_while(|&&c| c == 0).count();
        roots.extend(core::iter::repeat_n(0u64, zeros));
        let q: Poly = p[zeros..].to_vec();
        if q.len() > 1 {
            // x^p − x mod q, then the gcd keeps the distinct linear factors.
            let mut xp = powmod::<T>(&[0, 1], T::MODULUS, &q);
            if xp.len() < 2 {
                xp.resize(2, 0);
            }
            xp[1] = T::sub_mod(xp[1], 1);
            trim(&mut xp);
            let g = gcd::<T>(q.clone(), xp);
            let mut distinct = Vec::new();
            split::<T>(g, &mut distinct).map_err(|()| DecodeError::NotSplit {
                missing,
                found: roots.len() as u32,
            })?;
            let mut work = Vec::new();
            for r in distinct {
                let k = multiplicity::<T>(&high_first, r, &mut work);
                roots.extend(core::iter::repeat_n(r, k));
            }
        }
        if roots.len() != m {
            return Err(DecodeError::NotSplit {
                missing,
                found: roots.len() as u32,
            });
        }
        roots.sort_unstable();
        Ok(roots.into_iter().map(T::from_u64_truncating).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_small_sets_in_every_width() {
        let mut q16 = PowerSumQuack::<u16>::new(5);
        q16.insert_batch(&[65_535, 3, 3, 0]);
        // 65535 ≡ 14 mod 65521.
        assert_eq!(q16.decode_by_factoring().unwrap(), vec![0, 3, 3, 14]);

        let mut q32 = PowerSumQuack::<u32>::new(8);
        let ids = [1u32, 2, 3, 4_000_000_000, 77, 4_294_967_290];
        q32.insert_batch(&ids);
        let mut want = ids.to_vec();
        want.sort_unstable();
        assert_eq!(q32.decode_by_factoring().unwrap(), want);

        let q64 = PowerSumQuack::<u64>::new(3);
        assert_eq!(q64.decode_by_factoring().unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn irreducible_difference_is_rejected() {
        // Power sums of a quadratic without roots: x² + 1 over p ≡ 3 (mod 4) (2^32 − 5 ≡ 3 mod 4):
        // p1 = 0, p2 = −2, count 2.
        let mut q = PowerSumQuack::<u32>::new(2);
        q.acc = vec![0, u32::MODULUS - 2];
        q.count = 2;
        assert_eq!(
            q.decode_by_factoring(),
            Err(DecodeError::NotSplit {
                missing: 2,
                found: 0
            })
        );
    }
}

//! Tests of the field arithmetic: primes, reductions, lazy insertion, Newton's identities.
use super::*;

fn naive_mul(a: u64, b: u64, p: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(p)) as u64
}

fn check_width<T: Identifier>(samples: &[u64]) {
    let p = T::MODULUS;
    for &a in samples {
        for &b in samples {
            let (a, b) = (a % p, b % p);
            assert_eq!(T::mul_mod(a, b), naive_mul(a, b, p), "{a} * {b} mod {p}");
            assert_eq!(
                T::add_mod(a, b),
                ((u128::from(a) + u128::from(b)) % u128::from(p)) as u64
            );
            assert_eq!(T::add_mod(T::sub_mod(a, b), b), a);
        }
        let a = a % p;
        if a != 0 {
            assert_eq!(T::mul_mod(a, T::inv_mod(a)), 1);
        }
        assert_eq!(T::add_mod(a, T::neg_mod(a)), 0);
    }
}

fn samples(p: u64, bits: u32) -> Vec<u64> {
    let top = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    vec![
        0,
        1,
        2,
        3,
        5,
        7,
        p - 1,
        p - 2,
        p - 3,
        top,
        top - 1,
        p / 2,
        p / 3 + 17,
        0xDEAD_BEEF % p,
    ]
}

#[test]
fn arithmetic_matches_u128_reference() {
    check_width::<u16>(&samples(65_521, 16));
    check_width::<u32>(&samples(4_294_967_291, 32));
    check_width::<u64>(&samples(18_446_744_073_709_551_557, 64));
}

#[test]
fn moduli_are_the_largest_primes_below_the_width() {
    fn is_prime_u128(n: u64) -> bool {
        // Deterministic Miller–Rabin for 64-bit integers.
        if n < 2 {
            return false;
        }
        let mulm = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(n)) as u64;
        let powm = |mut b: u64, mut e: u64| {
            let mut r = 1u64;
            while e > 0 {
                if e & 1 == 1 {
                    r = mulm(r, b);
                }
                b = mulm(b, b);
                e >>= 1;
            }
            r
        };
        for &a in &[2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
            if n.is_multiple_of(a) {
                return n == a;
            }
        }
        let (mut d, mut s) = (n - 1, 0);
        while d % 2 == 0 {
            d /= 2;
            s += 1;
        }
        'outer: for &a in &[2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
            let mut x = powm(a, d);
            if x == 1 || x == n - 1 {
                continue;
            }
            for _ in 1..s {
                x = mulm(x, x);
                if x == n - 1 {
                    continue 'outer;
                }
            }
            return false;
        }
        true
    }
    for (p, top) in [
        (u16::MODULUS, u64::from(u16::MAX)),
        (u32::MODULUS, u64::from(u32::MAX)),
        (u64::MODULUS, u64::MAX),
    ] {
        assert!(is_prime_u128(p));
        assert!(((p + 1)..=top).all(|n| !is_prime_u128(n)));
    }
}

#[test]
fn lazy_insert_matches_canonical_powers() {
    fn check<T: Identifier>(x: u64) {
        let x = T::reduce(x);
        let mut acc = vec![0u64; 23];
        T::acc_insert(&mut acc, x);
        T::acc_insert(&mut acc, x);
        let mut y = x;
        for a in &acc {
            assert_eq!(T::acc_canonical(*a), T::add_mod(y, y));
            y = T::mul_mod(y, x);
        }
    }
    for x in [
        0u64,
        1,
        2,
        65_520,
        65_535,
        4_294_967_290,
        4_294_967_295,
        u64::MAX,
        123_456_789,
    ] {
        check::<u16>(x);
        check::<u32>(x);
        check::<u64>(x);
    }
}

/// The u32 Newton recurrence (lazy coefficients) equals the textbook recurrence in u128
/// arithmetic, for any power sums (consistent or not); every fourth sum from `edge` on is
/// one of the largest canonical values.
fn check_u32_newton(raw: &[u64], edge: u64) -> Result<(), proptest::test_runner::TestCaseError> {
    let p = u32::MODULUS;
    let sums: Vec<u64> = raw
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if i as u64 % 4 == edge {
                p - 1 - v % 3
            } else {
                v % p
            }
        })
        .collect();
    let m = sums.len();
    let inverses: Vec<u64> = (0..=m as u64).map(u32::inv_mod).collect();
    let mut got = vec![0; m];
    u32::newton(&sums, &inverses, &mut got);
    let pm = u128::from(p);
    let mut want: Vec<u128> = Vec::new();
    for k in 1..=m {
        let mut s = u128::from(sums[k - 1]);
        for i in 1..k {
            s = (s + want[k - i - 1] * u128::from(sums[i - 1])) % pm;
        }
        want.push((pm - s) % pm * u128::from(inverses[k]) % pm);
    }
    let got: Vec<u128> = got.into_iter().map(u128::from).collect();
    proptest::prop_assert_eq!(got, want);
    Ok(())
}

proptest::proptest! {
    /// Up to the largest threshold: the slice recurrence beyond 16 coefficients.
    #[test]
    fn u32_newton_matches_textbook(
        raw in proptest::collection::vec(proptest::prelude::any::<u64>(), 1..=64),
        edge in 0u64..4,
    ) {
        check_u32_newton(&raw, edge)?;
    }

    /// Up to 16 coefficients: the fixed-size recurrence (`newton_u32_fixed`).
    #[test]
    fn u32_newton_of_few_coefficients_matches_textbook(
        raw in proptest::collection::vec(proptest::prelude::any::<u64>(), 1..=16),
        edge in 0u64..4,
    ) {
        check_u32_newton(&raw, edge)?;
    }
}

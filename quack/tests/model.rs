//! Model-based property tests: any interleaving of single inserts, batch inserts, removals,
//! reads, subtraction and wire round trips gives exactly the power sums, count and last value
//! of a straightforward model (`u128` arithmetic modulo p, no laziness, no buffering, no SIMD),
//! for all three widths and thresholds 1..=64. This covers the insertion ring, the lazy
//! accumulators and the SIMD kernels together, at every buffer fill level.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use quack::{Identifier, PowerSumQuack};

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    /// Insert a recent identifier again (multiset duplicates).
    InsertAgain(usize),
    Batch(Vec<u64>),
    /// Remove an identifier inserted earlier (by position in the history), or a fresh one.
    Remove(usize),
    RemoveFresh(u64),
    /// Read everything (must not disturb later operations).
    Read,
    /// Replace the quACK by its wire round trip.
    RoundTrip,
    /// Subtract the quACK of a few identifiers (model: remove them, clear the last value).
    Subtract(Vec<u64>),
}

fn op() -> impl Strategy<Value = Op> {
    // Identifiers near the top of the range alias field elements (x ≥ p).
    let id = prop_oneof![
        3 => any::<u64>(),
        1 => (0u64..20).prop_map(|d| u64::MAX - d),
        1 => (0u64..4).prop_map(|d| d),
    ];
    prop_oneof![
        20 => id.clone().prop_map(Op::Insert),
        3 => any::<usize>().prop_map(Op::InsertAgain),
        2 => prop::collection::vec(id.clone(), 0..40).prop_map(Op::Batch),
        3 => any::<usize>().prop_map(Op::Remove),
        1 => id.clone().prop_map(Op::RemoveFresh),
        2 => Just(Op::Read),
        1 => Just(Op::RoundTrip),
        1 => prop::collection::vec(id, 0..5).prop_map(Op::Subtract),
    ]
}

/// The straightforward model: canonical power sums updated one identifier at a time.
struct Model {
    p: u128,
    sums: Vec<u128>,
    count: u32,
    last: Option<u64>,
}

impl Model {
    fn new(p: u64, t: usize) -> Self {
        Model {
            p: u128::from(p),
            sums: vec![0; t],
            count: 0,
            last: None,
        }
    }
    fn add(&mut self, x: u64, sign: bool) {
        let x = u128::from(x) % self.p;
        let mut y = x;
        for s in &mut self.sums {
            *s = if sign {
                (*s + y) % self.p
            } else {
                (*s + self.p - y) % self.p
            };
            y = y * x % self.p;
        }
    }
    fn insert(&mut self, x: u64) {
        self.add(x, true);
        self.count = self.count.wrapping_add(1);
        self.last = Some(x);
    }
    fn remove(&mut self, x: u64) {
        self.add(x, false);
        self.count = self.count.wrapping_sub(1);
        if self.last == Some(x) {
            self.last = None;
        }
    }
}

fn check<T: Identifier>(q: &PowerSumQuack<T>, m: &Model) -> Result<(), TestCaseError> {
    let sums: Vec<u128> = q.power_sums().map(|s| u128::from(s.to_u64())).collect();
    prop_assert_eq!(&sums, &m.sums);
    prop_assert_eq!(q.count(), m.count);
    prop_assert_eq!(q.last_value().map(Identifier::to_u64), m.last);
    Ok(())
}

fn run<T: Identifier>(t: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let id = |v: u64| T::from_u64_truncating(v);
    let mut q = PowerSumQuack::<T>::new(t);
    let mut m = Model::new(T::MODULUS, t);
    let mut history: Vec<u64> = Vec::new();
    for op in ops {
        match op {
            Op::Insert(v) | Op::RemoveFresh(v) => {
                let x = id(*v);
                if matches!(op, Op::Insert(_)) {
                    q.insert(x);
                    m.insert(x.to_u64());
                    history.push(x.to_u64());
                } else {
                    q.remove(x);
                    m.remove(x.to_u64());
                }
            }
            Op::InsertAgain(i) => {
                if let Some(&x) = history.get(i % history.len().max(1)) {
                    q.insert(id(x));
                    m.insert(x);
                    history.push(x);
                }
            }
            Op::Batch(vs) => {
                let xs: Vec<T> = vs.iter().map(|&v| id(v)).collect();
                q.insert_batch(&xs);
                for x in &xs {
                    m.insert(x.to_u64());
                    history.push(x.to_u64());
                }
            }
            Op::Remove(i) => {
                if !history.is_empty() {
                    let x = history.swap_remove(i % history.len());
                    q.remove(id(x));
                    m.remove(x);
                }
            }
            Op::Read => check(&q, &m)?,
            Op::RoundTrip => {
                let bytes = q.to_bytes();
                let back = PowerSumQuack::<T>::from_bytes(&bytes).unwrap();
                prop_assert_eq!(&back, &q);
                prop_assert_eq!(back.to_bytes(), bytes);
                q = back;
            }
            Op::Subtract(vs) => {
                let mut other = PowerSumQuack::<T>::new(t);
                for &v in vs {
                    other.insert(id(v));
                    m.remove(id(v).to_u64());
                }
                q -= &other;
                m.last = None;
            }
        }
    }
    check(&q, &m)?;
    // Equality ignores how much is still buffered: compare with a fresh quACK of the same
    // canonical content.
    let again = PowerSumQuack::<T>::from_bytes(&q.to_bytes()).unwrap();
    prop_assert_eq!(again, q);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn u16_matches_model(t in 1usize..=64, ops in prop::collection::vec(op(), 0..120)) {
        run::<u16>(t, &ops)?;
    }

    #[test]
    fn u32_matches_model(t in 1usize..=64, ops in prop::collection::vec(op(), 0..120)) {
        run::<u32>(t, &ops)?;
    }

    #[test]
    fn u64_matches_model(t in 1usize..=64, ops in prop::collection::vec(op(), 0..120)) {
        run::<u64>(t, &ops)?;
    }

    /// Long runs of single inserts (many ring wraps) with a read at a random point.
    #[test]
    fn u32_long_insert_runs(
        t in 1usize..=64,
        ids in prop::collection::vec(any::<u32>(), 0..300),
        read_at in 0usize..300,
    ) {
        let ops: Vec<Op> = ids
            .iter()
            .enumerate()
            .flat_map(|(i, &x)| {
                let mut v = vec![Op::Insert(u64::from(x))];
                if i == read_at {
                    v.push(Op::Read);
                }
                v
            })
            .collect();
        run::<u32>(t, &ops)?;
    }
}

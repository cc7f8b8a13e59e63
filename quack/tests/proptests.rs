//! Property tests: random multisets, random missing subsets (≤ t), reordering, duplicates,
//! wire round trips, hostile bytes; for u16, u32 and u64.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use proptest::prelude::*;
use quack::{DecodeError, Decoder, Identifier, PowerSumQuack, QuackView, fuzz_parse, id_at_offset};

/// A sender log, the indices the receiver did not get, and a permutation for the receiver.
#[derive(Debug, Clone)]
struct Case {
    raw: Vec<u64>,
    missing: Vec<usize>,
    order_seed: u64,
    t: usize,
}

fn case(max_n: usize, max_t: usize, dup_range: Option<u64>) -> impl Strategy<Value = Case> {
    (1..=max_t, 0..=max_n).prop_flat_map(move |(t, n)| {
        let ids = match dup_range {
            // Small value range: many duplicates.
            Some(r) => prop::collection::vec(0..r, n).boxed(),
            None => prop::collection::vec(any::<u64>(), n).boxed(),
        };
        (
            ids,
            prop::collection::vec(any::<prop::sample::Index>(), 0..=t),
            any::<u64>(),
        )
            .prop_map(move |(raw, picks, order_seed)| {
                let mut missing: Vec<usize> = if raw.is_empty() {
                    Vec::new()
                } else {
                    picks.iter().map(|p| p.index(raw.len())).collect()
                };
                missing.sort_unstable();
                missing.dedup();
                Case {
                    raw,
                    missing,
                    order_seed,
                    t,
                }
            })
    })
}

fn shuffled<T: Copy>(v: &[T], seed: u64) -> Vec<T> {
    // Deterministic Fisher–Yates with a splitmix64 stream.
    let mut out = v.to_vec();
    let mut s = seed;
    for i in (1..out.len()).rev() {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.swap(i, (z % (i as u64 + 1)) as usize);
    }
    out
}

fn check_decode<T: Identifier>(c: &Case) -> Result<(), TestCaseError> {
    let log: Vec<T> = c.raw.iter().map(|&r| T::from_u64_truncating(r)).collect();
    let mut sender = PowerSumQuack::<T>::new(c.t);
    // Mix single and batch insertion on the sender.
    let half = log.len() / 2;
    for &id in &log[..half] {
        sender.insert(id);
    }
    sender.insert_batch(&log[half..]);
    let received: Vec<T> = log
        .iter()
        .enumerate()
        .filter(|(i, _)| c.missing.binary_search(i).is_err())
        .map(|(_, &id)| id)
        .collect();
    let mut receiver = PowerSumQuack::<T>::new(c.t);
    for id in shuffled(&received, c.order_seed) {
        receiver.insert(id);
    }
    // Through the wire, then subtract.
    let wire = PowerSumQuack::<T>::from_bytes(&receiver.to_bytes()).expect("round trip");
    prop_assert_eq!(&wire, &receiver);
    let diff = &sender - &wire;
    prop_assert_eq!(diff.count() as usize, c.missing.len());
    let decoded = Decoder::new()
        .decode(&diff, &log)
        .expect("≤ t missing decodes");
    prop_assert_eq!(decoded.missing_count(), c.missing.len());

    // Expected, by field value: each group of congruent log entries with k missing.
    let p = T::MODULUS;
    let mut groups: HashMap<u64, (Vec<usize>, usize)> = HashMap::new();
    for (i, id) in log.iter().enumerate() {
        groups.entry(id.to_u64() % p).or_default().0.push(i);
    }
    for &i in &c.missing {
        groups.get_mut(&(log[i].to_u64() % p)).expect("group").1 += 1;
    }
    let mut want_determinate: Vec<usize> = Vec::new();
    let mut want_indeterminate = 0usize;
    for (idx, k) in groups.values() {
        if *k == idx.len() {
            want_determinate.extend(idx);
        } else if *k > 0 {
            want_indeterminate += 1;
        }
    }
    want_determinate.sort_unstable();
    prop_assert_eq!(
        decoded.missing_indices().collect::<Vec<_>>(),
        want_determinate
    );
    prop_assert_eq!(decoded.indeterminate().len(), want_indeterminate);
    for g in decoded.indeterminate() {
        let key = g.candidates[0].id.to_u64() % p;
        let (idx, k) = &groups[&key];
        prop_assert_eq!(g.missing as usize, *k);
        prop_assert_eq!(
            g.candidates.iter().map(|c| c.index).collect::<Vec<_>>(),
            idx.clone()
        );
    }
    // The multiset of missing identifiers, where known, is exact.
    let mut want_ids: Vec<T> = c.missing.iter().map(|&i| log[i]).collect();
    want_ids.sort_unstable();
    let mut got_ids = decoded.missing_multiset();
    got_ids.sort_unstable();
    if decoded
        .indeterminate()
        .iter()
        .all(|g| g.common_id().is_some())
    {
        prop_assert_eq!(got_ids, want_ids.clone());
    }
    // Without a log, for small thresholds: the canonical multiset.
    if c.t <= 8 {
        let mut want: Vec<T> = want_ids
            .iter()
            .map(|id| T::from_u64_truncating(id.to_u64() % p))
            .collect();
        want.sort_unstable();
        prop_assert_eq!(diff.decode_by_factoring().expect("splits"), want);
    }
    Ok(())
}

fn check_order_and_removal<T: Identifier>(
    raw: &[u64],
    t: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let ids: Vec<T> = raw.iter().map(|&r| T::from_u64_truncating(r)).collect();
    let mut a = PowerSumQuack::<T>::new(t);
    a.insert_batch(&ids);
    let mut b = PowerSumQuack::<T>::new(t);
    for id in shuffled(&ids, seed) {
        b.insert(id);
    }
    prop_assert_eq!(
        a.power_sums().collect::<Vec<_>>(),
        b.power_sums().collect::<Vec<_>>()
    );
    prop_assert_eq!(a.count(), b.count());
    for id in shuffled(&ids, seed ^ 1) {
        b.remove(id);
    }
    prop_assert!(b.is_empty());
    // Wire view agrees with the owned parse.
    let bytes = a.to_bytes();
    let view = QuackView::<T>::parse(&bytes).expect("valid");
    prop_assert_eq!(view.to_quack(), a.clone());
    prop_assert_eq!(view.count(), a.count());
    prop_assert_eq!(view.last_value(), a.last_value());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn decode_u16(c in case(300, 12, None)) { check_decode::<u16>(&c)?; }
    #[test]
    fn decode_u16_duplicates(c in case(60, 12, Some(40))) { check_decode::<u16>(&c)?; }
    #[test]
    fn decode_u32(c in case(300, 24, None)) { check_decode::<u32>(&c)?; }
    #[test]
    fn decode_u32_duplicates(c in case(60, 12, Some(30))) { check_decode::<u32>(&c)?; }
    #[test]
    fn decode_u32_aliases(c in case(40, 8, None)) {
        // Identifiers near 2^32 alias small ones modulo p.
        let mut c = c;
        for r in &mut c.raw { *r = if *r & 1 == 0 { *r % 6 } else { u64::from(u32::MAX) - (*r % 6) }; }
        check_decode::<u32>(&c)?;
    }
    #[test]
    fn decode_u64(c in case(300, 24, None)) { check_decode::<u64>(&c)?; }
    #[test]
    fn decode_u64_duplicates(c in case(60, 12, Some(20))) { check_decode::<u64>(&c)?; }

    #[test]
    fn order_and_removal(raw in prop::collection::vec(any::<u64>(), 0..200), t in 0usize..40, seed in any::<u64>()) {
        check_order_and_removal::<u16>(&raw, t, seed)?;
        check_order_and_removal::<u32>(&raw, t, seed)?;
        check_order_and_removal::<u64>(&raw, t, seed)?;
    }

    #[test]
    fn too_many_missing_is_an_error(raw in prop::collection::vec(any::<u32>(), 5..50), t in 0usize..5) {
        let mut s = PowerSumQuack::<u32>::new(t);
        s.insert_batch(&raw);
        let r = PowerSumQuack::<u32>::new(t);
        let err = (&s - &r).decode_with_log(&raw).unwrap_err();
        prop_assert_eq!(err, DecodeError::TooManyMissing { missing: raw.len() as u32, threshold: t });
    }

    #[test]
    fn log_missing_an_identifier_is_an_error(raw in prop::collection::vec(any::<u32>(), 2..50)) {
        let mut distinct = raw.clone();
        distinct.sort_unstable();
        distinct.dedup();
        prop_assume!(distinct.len() == raw.len() && raw.iter().all(|&x| u64::from(x) < u32::MODULUS));
        let mut s = PowerSumQuack::<u32>::new(4);
        s.insert_batch(&raw);
        // Two missing, a log that lacks the first.
        let mut rcv = PowerSumQuack::<u32>::new(4);
        rcv.insert_batch(&raw[2..]);
        let diff = s - &rcv;
        let err = diff.decode_with_log(&raw[1..]).unwrap_err();
        prop_assert_eq!(err, DecodeError::InconsistentWithLog { missing: 2, accounted: 1 });
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        fuzz_parse(&data);
    }

    #[test]
    fn mutated_encodings_never_panic(raw in prop::collection::vec(any::<u32>(), 0..30), t in 0usize..12,
                                     flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut q = PowerSumQuack::<u32>::new(t);
        q.insert_batch(&raw);
        let mut bytes = q.to_bytes();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= v;
        }
        fuzz_parse(&bytes);
        // Header bytes with a valid width parse with a small threshold.
        let mut header = bytes.clone();
        header[0] = 0x12;
        header[2] %= 12;
        header[3] = 0;
        fuzz_parse(&header);
    }

    #[test]
    fn id_at_offset_is_total(payload in prop::collection::vec(any::<u8>(), 0..40), off in -50isize..50) {
        let got = id_at_offset::<u32>(&payload, off);
        let start = if off >= 0 { off } else { payload.len() as isize + off };
        if start >= 0 && start as usize + 4 <= payload.len() {
            let s = start as usize;
            prop_assert_eq!(got, Ok(u32::from_le_bytes(payload[s..s + 4].try_into().unwrap())));
        } else {
            prop_assert!(got.is_err());
        }
    }
}

/// The fast paths of subtraction and decoding against straightforward ones: a subtrahend with
/// identifiers still in its insertion ring (folded in negated) against one parsed from bytes;
/// the power sums against `u128` arithmetic; `decode_with_log` (stack scratch up to t = 64)
/// against a reused [`Decoder`], and a difference whose accumulators are canonical (read in
/// place) against one built by insertion (copied and reduced).
fn check_fresh_paths<T: Identifier>(c: &Case) -> Result<(), TestCaseError> {
    let log: Vec<T> = c.raw.iter().map(|&r| T::from_u64_truncating(r)).collect();
    let mut sender = PowerSumQuack::<T>::new(c.t);
    for &id in &log {
        sender.insert(id);
    }
    let missing: Vec<T> = c.missing.iter().map(|&i| log[i]).collect();
    let received: Vec<T> = log
        .iter()
        .enumerate()
        .filter(|(i, _)| c.missing.binary_search(i).is_err())
        .map(|(_, &id)| id)
        .collect();
    let mut receiver = PowerSumQuack::<T>::new(c.t);
    for id in shuffled(&received, c.order_seed) {
        receiver.insert(id);
    }
    let mut fast = sender.clone();
    fast -= &receiver;
    let wire = PowerSumQuack::<T>::from_bytes(&receiver.to_bytes()).expect("round trip");
    let slow = &sender - &wire;
    prop_assert_eq!(&fast, &slow);
    // Power sums of the missing multiset, in u128.
    let p = u128::from(T::MODULUS);
    let want: Vec<u64> = (1..=c.t as u32)
        .map(|k| {
            missing.iter().fold(0u128, |acc, id| {
                let x = u128::from(id.to_u64()) % p;
                let mut y = 1u128;
                for _ in 0..k {
                    y = y * x % p;
                }
                (acc + y) % p
            }) as u64
        })
        .collect();
    let got: Vec<u64> = fast.power_sums().map(Identifier::to_u64).collect();
    prop_assert_eq!(got, want);
    prop_assert_eq!(fast.count() as usize, missing.len());
    // The same difference built by insertion: lazily reduced accumulators, a ring.
    let mut built = PowerSumQuack::<T>::new(c.t);
    for &id in &missing {
        built.insert(id);
    }
    let a = fast.decode_with_log(&log).expect("≤ t missing decodes");
    let mut dec = Decoder::new();
    let b = dec.decode(&fast, &log).expect("decodes");
    let d = dec.decode(&built, &log).expect("decodes");
    let e = built.decode_with_log(&log).expect("decodes");
    prop_assert_eq!(&a, &b);
    prop_assert_eq!(&a, &d);
    prop_assert_eq!(&a, &e);
    prop_assert_eq!(a.missing_count(), missing.len());
    prop_assert_eq!(fast.to_coeffs(), built.to_coeffs());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn fresh_paths_agree_u32(c in case(120, 80, None)) { check_fresh_paths::<u32>(&c)?; }
    #[test]
    fn fresh_paths_agree_u32_duplicates(c in case(60, 16, Some(12))) { check_fresh_paths::<u32>(&c)?; }
    #[test]
    fn fresh_paths_agree_u16(c in case(80, 70, None)) { check_fresh_paths::<u16>(&c)?; }
    #[test]
    fn fresh_paths_agree_u64(c in case(80, 70, None)) { check_fresh_paths::<u64>(&c)?; }
}

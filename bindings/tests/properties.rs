//! Property tests of the C API: arbitrary wire input never panics across the boundary, and the
//! quACK surface decodes any small loss pattern exactly.

// Test code calling the C API as C would.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::BTreeSet;
use std::ptr::null_mut;

use proptest::prelude::*;
use sidekick_capi::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_c_api(&data);
    }

    #[test]
    fn decode_finds_exactly_the_removed_entries(
        ids in proptest::collection::btree_set(any::<u32>(), 1..200),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        t in 8usize..16,
    ) {
        let log: Vec<u32> = ids.into_iter().collect();
        let lost: BTreeSet<usize> = picks.iter().map(|i| i.index(log.len())).collect();
        // SAFETY: every pointer is valid for the call; handles are freed once.
        unsafe {
            let (mut sent, mut seen, mut parsed) = (null_mut(), null_mut(), null_mut());
            prop_assert_eq!(sk_quack_new(t, &raw mut sent), SkStatus::Ok);
            prop_assert_eq!(sk_quack_new(t, &raw mut seen), SkStatus::Ok);
            prop_assert_eq!(sk_quack_insert_batch(sent, log.as_ptr(), log.len()), SkStatus::Ok);
            for (i, &id) in log.iter().enumerate() {
                if !lost.contains(&i) {
                    prop_assert_eq!(sk_quack_insert(seen, id), SkStatus::Ok);
                }
            }
            let mut wire = vec![0u8; 8 + 4 * (t + 1)];
            let mut len = 0usize;
            prop_assert_eq!(sk_quack_serialize(seen, wire.as_mut_ptr(), wire.len(), &raw mut len), SkStatus::Ok);
            prop_assert_eq!(sk_quack_parse(wire.as_ptr(), len, &raw mut parsed), SkStatus::Ok);
            prop_assert_eq!(sk_quack_subtract(sent, parsed), SkStatus::Ok);
            let mut idx = vec![0usize; t];
            let mut ids = vec![0u32; t];
            let mut n = 0usize;
            let s = sk_quack_decode(sent, log.as_ptr(), log.len(), idx.as_mut_ptr(), ids.as_mut_ptr(), t, &raw mut n);
            prop_assert_eq!(s, SkStatus::Ok);
            prop_assert_eq!(idx[..n].to_vec(), lost.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(ids[..n].to_vec(), lost.iter().map(|&i| log[i]).collect::<Vec<_>>());
            sk_quack_free(sent);
            sk_quack_free(seen);
            sk_quack_free(parsed);
        }
    }
}

/// Regression (fuzz target `c_api_calls`, an out-of-memory): a Packrat configuration whose caps
/// exceed `SK_PACKRAT_MAX_CAP` is refused; at the limit it is accepted.
#[test]
fn packrat_caps_beyond_the_limit_are_refused() {
    // SAFETY: every pointer is valid for the call; handles are freed once.
    unsafe {
        let mut cfg = std::mem::zeroed::<SkPackratConfig>();
        assert_eq!(sk_packrat_config_default(&raw mut cfg), SkStatus::Ok);
        for (gaps, held, want) in [
            (SK_PACKRAT_MAX_CAP + 1, 16, SkStatus::InvalidArgument),
            (16, usize::MAX, SkStatus::InvalidArgument),
            (SK_PACKRAT_MAX_CAP, SK_PACKRAT_MAX_CAP, SkStatus::Ok),
        ] {
            cfg.max_gaps = gaps;
            cfg.max_held = held;
            let mut p = null_mut();
            assert_eq!(
                sk_packrat_new(&raw const cfg, &raw mut p),
                want,
                "{gaps} {held}"
            );
            if want == SkStatus::Ok {
                sk_packrat_free(p);
            }
        }
    }
}

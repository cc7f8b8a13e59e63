//! Property tests: random differences decode exactly, the wire form round-trips, and arbitrary
//! bytes never panic the parser.

use std::collections::BTreeSet;

use eack::{Decoder, Difference, HashKey, Sketch, fuzz_parse};
use proptest::prelude::*;

/// Two sets sharing `common` identifiers, with `only_a`/`only_b` private ones.
fn sets() -> impl Strategy<Value = (Vec<u32>, Vec<u32>, Vec<u32>)> {
    (
        prop::collection::btree_set(any::<u32>(), 0..300),
        prop::collection::btree_set(any::<u32>(), 0..8),
        prop::collection::btree_set(any::<u32>(), 0..8),
    )
        .prop_map(|(common, a, b)| {
            let a: BTreeSet<u32> = a.difference(&common).copied().collect();
            let b: BTreeSet<u32> = b
                .difference(&common)
                .filter(|x| !a.contains(x))
                .copied()
                .collect();
            (
                common.into_iter().collect(),
                a.into_iter().collect(),
                b.into_iter().collect(),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_differences_decode_exactly((common, only_a, only_b) in sets(), k0: u64, k1: u64) {
        // At most 16 differing elements in 200 symbols: the failure probability is far below
        // 1e-6 (sizing table: 99.9 % decode with ~4 symbols per element at m = 16).
        let key = HashKey::new(k0, k1);
        let mut a = Sketch::<u32>::with_key(200, key);
        let mut b = Sketch::<u32>::with_key(200, key);
        a.insert_all(common.iter().chain(&only_a).copied());
        b.insert_all(common.iter().chain(&only_b).copied());
        let mut d = a.difference(&b).decode().unwrap();
        d.missing.sort_unstable();
        d.extra.sort_unstable();
        prop_assert_eq!(&d.missing, &only_a);
        prop_assert_eq!(&d.extra, &only_b);

        // The same through the wire (counts modulo 256) and the fused decoder.
        let mut wire = Vec::new();
        b.encode_prefix(120, &mut wire).unwrap();
        let remote = Sketch::<u32>::decode_prefix_with_key(&wire, key).unwrap();
        let mut out = Difference::default();
        Decoder::new().decode_difference(&a, &remote, &mut out).unwrap();
        out.missing.sort_unstable();
        out.extra.sort_unstable();
        prop_assert_eq!(out, d);
    }

    #[test]
    fn wire_round_trip(ids in prop::collection::vec(any::<u32>(), 0..500), t in 0usize..300, n in 0usize..300, epoch: u32) {
        let mut s = Sketch::new(t);
        s.set_epoch(epoch);
        s.insert_all(ids.iter().copied());
        let n = n.min(t);
        let mut wire = Vec::new();
        let len = s.encode_prefix(n, &mut wire).unwrap();
        prop_assert_eq!(len, eack::encoded_len::<u32>(n));
        let p = Sketch::decode_prefix(&wire).unwrap();
        prop_assert_eq!(p.epoch(), epoch);
        prop_assert_eq!(p.num_symbols(), n);
        prop_assert_eq!(p.len(), ids.len() as i64);
        for (x, y) in p.symbols().iter().zip(s.symbols()) {
            prop_assert_eq!(x.id_sum, y.id_sum);
            prop_assert_eq!(x.checksum, y.checksum);
            prop_assert_eq!(x.count as u8, y.count as u8);
        }
        let mut again = Vec::new();
        p.encode_prefix(n, &mut again).unwrap();
        prop_assert_eq!(again, wire);
        // A sketch minus its own wire form is empty.
        let d = s.difference(&p).decode().unwrap();
        prop_assert!(d.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        fuzz_parse(&data);
    }

    #[test]
    fn mutated_eacks_never_panic_or_misdecode(
        ids in prop::collection::vec(any::<u32>(), 1..200),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut s = Sketch::new(60);
        s.insert_all(ids.iter().copied());
        let mut wire = Vec::new();
        s.encode_prefix(60, &mut wire).unwrap();
        for (i, x) in &flips {
            let i = i.index(wire.len());
            wire[i] ^= x;
        }
        fuzz_parse(&wire);
        if let Ok(p) = Sketch::decode_prefix(&wire) {
            // Whatever decodes must be consistent: re-inserting the result into the original
            // reproduces the received symbols.
            if let Ok(d) = s.difference(&p).decode() {
                let mut r = s.clone();
                for id in &d.missing { r.remove(*id); }
                for id in &d.extra { r.insert(*id); }
                r.truncate(p.num_symbols());
                let mut w2 = Vec::new();
                r.set_epoch(p.epoch());
                r.encode_prefix(p.num_symbols(), &mut w2).unwrap();
                prop_assert_eq!(w2, wire);
            }
        }
    }

    #[test]
    fn generic_u64_round_trip(ids in prop::collection::btree_set(any::<u64>(), 0..100), lost in prop::collection::btree_set(any::<u64>(), 0..6)) {
        let lost: Vec<u64> = lost.difference(&ids).copied().collect();
        let mut proxy = Sketch::<u64>::with_key(100, HashKey::DEFAULT);
        let mut client = Sketch::<u64>::with_key(100, HashKey::DEFAULT);
        proxy.insert_all(ids.iter().chain(&lost).copied());
        client.insert_all(ids.iter().copied());
        let mut wire = Vec::new();
        client.encode_prefix(80, &mut wire).unwrap();
        let remote = Sketch::<u64>::decode_prefix_with_key(&wire, HashKey::DEFAULT).unwrap();
        let mut d = proxy.difference(&remote).decode().unwrap();
        d.missing.sort_unstable();
        prop_assert_eq!(d.missing, lost);
        prop_assert!(d.extra.is_empty());
    }
}

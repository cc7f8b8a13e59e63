//! Property tests at every identifier width (2, 4 and 8 bytes, Sidekick (NSDI '24) §3): the
//! receiver → wire → proxy round trip names exactly the lost identifiers, the wire form carries
//! the width and round-trips, and a view of another width refuses the eACK without panicking.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use eack::{
    EackError, HashKey, Id, ProxyEack, ReceiverEack, Sketch, WidthProxyEack, WidthReceiverEack,
    WireError, encoded_len, fuzz_parse, peek_width,
};
use proptest::prelude::*;
use quack::Width;

/// Distinct identifiers of width `I` (drawn as `u64`, truncated, deduplicated) and a disjoint
/// lost subset of at most 12.
fn received_and_lost<I: Id>(ids: &BTreeSet<u64>, lost_every: usize) -> (Vec<I>, Vec<I>) {
    let set: BTreeSet<I> = ids.iter().map(|&v| I::from_u64(v)).collect();
    let mut received = Vec::new();
    let mut lost = Vec::new();
    for (k, id) in set.into_iter().enumerate() {
        if k % lost_every == 1 && lost.len() < 12 {
            lost.push(id);
        } else {
            received.push(id);
        }
    }
    (received, lost)
}

fn round_trip<I: Id>(ids: &BTreeSet<u64>, lost_every: usize, epoch: u32, key: HashKey) {
    let (received, lost) = received_and_lost::<I>(ids, lost_every);
    let mut rx = ReceiverEack::<I>::with_key(160, key);
    let mut px = ProxyEack::<I>::with_key(160, 4096, key);
    rx.reset(epoch);
    px.reset(epoch);
    for &id in &received {
        rx.on_receive(id);
        px.insert(id);
    }
    for &id in &lost {
        px.insert(id);
    }
    // 160 symbols for at most 12 missing: far above the p = 0.999 size (sizing table).
    let mut wire = Vec::new();
    rx.encode(160, &mut wire).unwrap();
    assert_eq!(wire.len(), encoded_len::<I>(160));
    assert_eq!(usize::from(wire[1]), I::BYTES);
    let mut d = px.on_eack(&wire).unwrap();
    d.missing.sort_unstable();
    assert_eq!(d.missing, lost);
    assert!(d.extra.is_empty());
    // Re-encoding what was parsed gives the same bytes.
    let p = Sketch::<I>::decode_prefix_with_key(&wire, key).unwrap();
    let mut again = Vec::new();
    p.encode_prefix(p.num_symbols(), &mut again).unwrap();
    assert_eq!(again, wire);
    fuzz_parse(&wire);
}

/// A view of width `J` refuses an eACK of width `I` (≠ `J`) as a wire error.
fn refused_by<I: Id, J: Id>(wire: &[u8]) {
    let mut p = ProxyEack::<J>::with_key(40, 64, HashKey::DEFAULT);
    assert_eq!(
        p.on_eack(wire),
        Err(EackError::Wire(WireError::IdWidth {
            expected: J::BYTES,
            got: I::BYTES
        }))
    );
    assert!(Sketch::<J>::decode_prefix_with_key(wire, HashKey::DEFAULT).is_err());
}

fn width_of(i: u8) -> Width {
    [Width::U16, Width::U32, Width::U64][usize::from(i % 3)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn u16_round_trip(ids in prop::collection::btree_set(any::<u64>(), 1..400), every in 2usize..40, epoch: u32, k0: u64, k1: u64) {
        round_trip::<u16>(&ids, every, epoch, HashKey::new(k0, k1));
    }

    #[test]
    fn u32_round_trip(ids in prop::collection::btree_set(any::<u64>(), 1..400), every in 2usize..40, epoch: u32, k0: u64, k1: u64) {
        round_trip::<u32>(&ids, every, epoch, HashKey::new(k0, k1));
    }

    #[test]
    fn u64_round_trip(ids in prop::collection::btree_set(any::<u64>(), 1..400), every in 2usize..40, epoch: u32, k0: u64, k1: u64) {
        round_trip::<u64>(&ids, every, epoch, HashKey::new(k0, k1));
    }

    #[test]
    fn mismatched_widths_are_refused(ids in prop::collection::vec(any::<u64>(), 0..100), n in 0usize..40) {
        let enc = |w: Width| {
            let mut rx = WidthReceiverEack::new(w, 40, HashKey::DEFAULT);
            for &id in &ids {
                rx.on_receive(id);
            }
            let mut wire = Vec::new();
            rx.encode(n, &mut wire).unwrap();
            prop_assert_eq!(peek_width(&wire), Ok(w));
            Ok(wire)
        };
        let w16 = enc(Width::U16)?;
        let w32 = enc(Width::U32)?;
        let w64 = enc(Width::U64)?;
        refused_by::<u16, u32>(&w16);
        refused_by::<u16, u64>(&w16);
        refused_by::<u32, u16>(&w32);
        refused_by::<u32, u64>(&w32);
        refused_by::<u64, u16>(&w64);
        refused_by::<u64, u32>(&w64);
        for w in [&w16, &w32, &w64] {
            fuzz_parse(w);
        }
    }

    /// Any bytes, with the header's width byte forced to each width, through every view of
    /// every width: no panic, and only the view of the header's width may accept.
    #[test]
    fn hostile_bytes_at_every_width(mut data in prop::collection::vec(any::<u8>(), 12..600), w: u8, v: u8) {
        data[0] = 1;
        data[1] = width_of(w).bytes() as u8;
        fuzz_parse(&data);
        for view in [Width::U16, Width::U32, Width::U64] {
            let mut p = WidthProxyEack::new(view, 20, 64, HashKey::DEFAULT);
            for i in 0..30u64 {
                p.insert(i * 7919);
            }
            let r = p.on_eack(&data);
            if view.bytes() != usize::from(data[1]) {
                let refused = matches!(r, Err(EackError::Wire(WireError::IdWidth { .. })));
                prop_assert!(refused, "view {:?} accepted width {}", view, data[1]);
            }
        }
        // Well-formed lengths too: truncate/pad the body to a whole number of symbols.
        let w = width_of(v);
        let mut rx = WidthReceiverEack::new(w, 30, HashKey::DEFAULT);
        for (k, b) in data.iter().enumerate() {
            rx.on_receive(u64::from(*b) << (k % 7));
        }
        let mut wire = Vec::new();
        rx.encode(30, &mut wire).unwrap();
        for (k, b) in data.iter().enumerate().skip(2) {
            let i = 12 + (k * 31) % (wire.len() - 12);
            wire[i] ^= b;
        }
        fuzz_parse(&wire);
    }
}

//! The receiver at each identifier width (2, 4, 8 bytes; Sidekick (NSDI '24) §3): it reads the
//! datagram's last `width` bytes, its eACKs name the width, and a proxy view of that width
//! finds exactly the lost datagrams while a view of another width refuses the eACK.

use std::time::Instant;

use eack::{EackError, HashKey, WidthProxyEack, WireError};
use quack::{IdSource, Width};

use super::*;

#[test]
fn eacks_at_every_width_name_the_lost_datagrams() {
    let t0 = Instant::now();
    for width in [Width::U16, Width::U32, Width::U64] {
        let src = IdSource::Offset(-(width.bytes() as isize));
        let mut rx = PackratReceiver::new(PackratReceiverConfig {
            id_source: src,
            width,
            ..PackratReceiverConfig::default()
        });
        let mut proxy = WidthProxyEack::new(width, 160, 4096, HashKey::DEFAULT);
        let dg = |i: u64| {
            let mut d = vec![0x33u8; 30];
            d.extend((i + 1).wrapping_mul(0x0102_0304_0506_0709).to_le_bytes());
            d
        };
        let lost = [4u64, 5, 11];
        for i in 0..20u64 {
            proxy.insert_from(&src, &dg(i)).unwrap();
            if !lost.contains(&i) {
                rx.on_datagram(t0, dg(i), Some(i));
            }
        }
        assert_eq!(rx.stats().unidentifiable, 0);
        let wire = rx.poll_eack(t0).unwrap();
        assert_eq!(usize::from(wire[1]), width.bytes());
        let mut d = proxy.on_eack(&wire).unwrap();
        d.missing.sort_unstable();
        let tail = |i: u64| {
            let v = dg(i);
            let t = &v[v.len() - width.bytes()..];
            t.iter().rev().fold(0u64, |a, b| a << 8 | u64::from(*b))
        };
        let mut want: Vec<u64> = lost.iter().map(|&i| tail(i)).collect();
        want.sort_unstable();
        assert_eq!(d.missing, want, "width {width:?}");
        for other in [Width::U16, Width::U32, Width::U64] {
            if other != width {
                let mut p = WidthProxyEack::new(other, 160, 4096, HashKey::DEFAULT);
                assert!(matches!(
                    p.on_eack(&wire),
                    Err(EackError::Wire(WireError::IdWidth { .. }))
                ));
            }
        }
    }
}

#[test]
fn datagrams_shorter_than_the_width_are_unidentifiable() {
    let mut rx = PackratReceiver::new(PackratReceiverConfig {
        id_source: IdSource::Offset(-8),
        width: Width::U64,
        ..PackratReceiverConfig::default()
    });
    rx.on_datagram(Instant::now(), vec![1, 2, 3, 4, 5], None);
    assert_eq!(rx.stats().unidentifiable, 1);
}

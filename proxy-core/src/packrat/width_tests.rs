//! The engine at each identifier width (2, 4, 8 bytes; Sidekick (NSDI '24) §3): identifiers are
//! read at the session's width, the client's eACKs of that width name exactly the lost cached
//! packets, and an eACK of another width is refused (a Reset), never misread.

use eack::{HashKey, WidthReceiverEack};
use quack::{IdSource, Width};

use super::tests::injected_frames;
use super::*;

const WIDTHS: [Width; 3] = [Width::U16, Width::U32, Width::U64];

/// Identifiers are the datagram's last `width` bytes; no retransmission budget in the way.
fn config(width: Width) -> PackratEngineConfig {
    PackratEngineConfig {
        id: IdSource::Offset(-(width.bytes() as isize)),
        width,
        retx_budget_percent: 100,
        ..PackratEngineConfig::default()
    }
}

fn engine(width: Width) -> PackratEngine {
    PackratEngine::new(config(width))
}

/// A 120-byte "datagram" whose last 8 bytes differ in every byte position: the identifier is
/// its last `width` bytes.
fn datagram(i: u64) -> Vec<u8> {
    let mut d = vec![0x5a; 112];
    d.extend_from_slice(&(i + 1).wrapping_mul(0x0101_0101_0101_0101).to_le_bytes());
    d
}

#[test]
fn every_width_retransmits_exactly_the_lost_packets() {
    for width in WIDTHS {
        let mut e = engine(width);
        assert_eq!(e.width(), width);
        let src = IdSource::Offset(-(width.bytes() as isize));
        let mut client = WidthReceiverEack::new(width, 160, HashKey::DEFAULT);
        let lost = [3u64, 9, 17];
        for i in 0..40u64 {
            let d = datagram(i);
            e.cache_packet(&d, &d);
            if !lost.contains(&i) {
                client.on_datagram(&src, &d).unwrap();
            }
        }
        let mut wire = Vec::new();
        client.encode(60, &mut wire).unwrap();
        assert_eq!(usize::from(wire[1]), width.bytes());
        let mut out = Vec::new();
        e.on_eack(&wire, &mut out);
        let want: Vec<Vec<u8>> = lost.iter().map(|&i| datagram(i)).collect();
        assert_eq!(injected_frames(&out), want, "width {width:?}");
        assert_eq!(e.counters.eacks_decoded, 1);
        assert_eq!(e.counters.evicted_acked, 37);
        assert_eq!(e.cache_len(), 3);
    }
}

#[test]
fn an_eack_of_another_width_is_a_reset() {
    for width in WIDTHS {
        for other in WIDTHS.into_iter().filter(|o| *o != width) {
            let mut e = engine(width);
            for i in 0..10u64 {
                let d = datagram(i);
                e.cache_packet(&d, &d);
            }
            let mut client = WidthReceiverEack::new(other, 40, HashKey::DEFAULT);
            client.on_receive(1);
            let mut wire = Vec::new();
            client.encode(20, &mut wire).unwrap();
            let mut out = Vec::new();
            e.on_eack(&wire, &mut out);
            assert_eq!(
                out,
                vec![Action::Message(Outgoing::Reset)],
                "{width:?} ← {other:?}"
            );
            assert_eq!((e.counters.eacks_failed, e.epoch()), (1, 1));
        }
    }
}

#[test]
fn datagrams_shorter_than_the_width_are_not_cached() {
    let mut e = engine(Width::U64);
    e.cache_packet(&[1, 2, 3, 4, 5], &[0; 60]);
    assert_eq!((e.counters.not_cached, e.cache_len()), (1, 0));
    let mut e = engine(Width::U16);
    e.cache_packet(&[1, 2, 3, 4, 5], &[0; 60]);
    assert_eq!((e.counters.not_cached, e.cache_len()), (0, 1));
}

#[test]
fn memory_accounts_for_the_symbol_width() {
    let at = |width| {
        PackratEngine::memory_cap(&PackratEngineConfig {
            width,
            ..PackratEngineConfig::default()
        })
    };
    assert!(at(Width::U16) <= at(Width::U32));
    assert!(at(Width::U32) < at(Width::U64));
    for width in WIDTHS {
        let e = engine(width);
        assert!(e.memory_bytes() <= PackratEngine::memory_cap(&e.cfg));
    }
}

#[test]
fn colliding_identifiers_are_counted_and_both_treated_as_missing() {
    // Two-byte identifiers: datagrams 2 and 6 end in the same two bytes; 2 is lost, 6 arrives.
    let width = Width::U16;
    let mut e = engine(width);
    let src = IdSource::Offset(-2);
    let mut client = WidthReceiverEack::new(width, 160, HashKey::DEFAULT);
    let dg = |i: u64| {
        let tag = if i == 6 { 2 } else { i } as u16;
        let mut d = vec![i as u8; 100];
        d.extend_from_slice(&(0x7000 + tag).to_le_bytes());
        d
    };
    for i in 0..10u64 {
        let d = dg(i);
        e.cache_packet(&d, &d);
        if i != 2 {
            client.on_datagram(&src, &d).unwrap();
        }
    }
    let mut wire = Vec::new();
    client.encode(40, &mut wire).unwrap();
    let mut out = Vec::new();
    e.on_eack(&wire, &mut out);
    assert_eq!(injected_frames(&out), vec![dg(2), dg(6)]);
    assert_eq!(e.counters.id_collisions, 1);
    // The same at four bytes: no collision, one retransmission.
    let mut e = engine(Width::U32);
    let src = IdSource::Offset(-4);
    let mut client = WidthReceiverEack::new(Width::U32, 160, HashKey::DEFAULT);
    for i in 0..10u64 {
        let mut d = dg(i);
        d.extend_from_slice(&[i as u8, 0]);
        e.cache_packet(&d, &d);
        if i != 2 {
            client.on_datagram(&src, &d).unwrap();
        }
    }
    let mut wire = Vec::new();
    client.encode(40, &mut wire).unwrap();
    let mut out = Vec::new();
    e.on_eack(&wire, &mut out);
    assert_eq!(injected_frames(&out).len(), 1);
    assert_eq!(e.counters.id_collisions, 0);
}

#[test]
fn a_new_packet_with_a_missing_identifier_is_a_collision() {
    let width = Width::U16;
    let mut e = engine(width);
    let src = IdSource::Offset(-2);
    let mut client = WidthReceiverEack::new(width, 160, HashKey::DEFAULT);
    let dg = |i: u64, tag: u16| {
        let mut d = vec![i as u8; 100];
        d.extend_from_slice(&tag.to_le_bytes());
        d
    };
    for i in 0..10u64 {
        let d = dg(i, 0x100 + i as u16);
        e.cache_packet(&d, &d);
        if i != 4 {
            client.on_datagram(&src, &d).unwrap();
        }
    }
    let mut wire = Vec::new();
    client.encode(40, &mut wire).unwrap();
    let mut out = Vec::new();
    e.on_eack(&wire, &mut out);
    assert_eq!(e.counters.id_collisions, 0);
    // A later packet ends in the missing packet's two bytes; another does not.
    e.cache_packet(&dg(11, 0x104), &dg(11, 0x104));
    e.cache_packet(&dg(12, 0x10c), &dg(12, 0x10c));
    assert_eq!(e.counters.id_collisions, 1);
    // A new epoch forgets what was missing.
    e.reset(1);
    e.cache_packet(&dg(13, 0x104), &dg(13, 0x104));
    assert_eq!(e.counters.id_collisions, 1);
}

#[test]
fn a_multicast_group_at_every_width_retransmits_each_clients_own_losses() {
    use super::multicast::MulticastCache;
    for width in WIDTHS {
        let mut g: MulticastCache<u32> = MulticastCache::new(config(width), 4);
        assert_eq!(g.config().width, width);
        let src = IdSource::Offset(-(width.bytes() as isize));
        let lost: [&[u64]; 2] = [&[2, 11], &[7]];
        let mut clients: Vec<WidthReceiverEack> = (0..2)
            .map(|_| WidthReceiverEack::new(width, 160, HashKey::DEFAULT))
            .collect();
        for c in 0..2u32 {
            g.join(c, 0).unwrap();
            g.set_mac(c, [2, 0, 0, 0, 0, c as u8]);
        }
        for i in 0..30u64 {
            let d = datagram(i);
            g.cache_packet(&d, &d);
            for (c, client) in clients.iter_mut().enumerate() {
                if !lost[c].contains(&i) {
                    client.on_datagram(&src, &d).unwrap();
                }
            }
        }
        for c in 0..2u32 {
            let mut wire = Vec::new();
            clients[c as usize].encode(60, &mut wire).unwrap();
            assert_eq!(usize::from(wire[1]), width.bytes());
            let mut out = Vec::new();
            g.on_eack(c, &wire, &mut out);
            // The cached frame with its destination MAC set to the client's.
            let want: Vec<Vec<u8>> = lost[c as usize]
                .iter()
                .map(|&i| {
                    let mut f = datagram(i);
                    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, c as u8]);
                    f
                })
                .collect();
            assert_eq!(injected_frames(&out), want, "width {width:?}, client {c}");
        }
        assert_eq!(g.counters().eacks_decoded, 2);
        assert_eq!(g.counters().retransmissions, 3);
        // An eACK of another width is a Reset for that client, never misread.
        let other = WIDTHS.into_iter().find(|&w| w != width).unwrap();
        let mut wire = Vec::new();
        WidthReceiverEack::new(other, 40, HashKey::DEFAULT)
            .encode(10, &mut wire)
            .unwrap();
        let mut out = Vec::new();
        g.on_eack(0, &wire, &mut out);
        assert!(matches!(out.as_slice(), [Action::Message(Outgoing::Reset)]));
    }
}

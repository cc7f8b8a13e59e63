use super::*;
use eack::ReceiverEack;
use proptest::prelude::*;

const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];

fn mac_of(client: u32) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, client as u8]
}

/// A frame of the group's stream: multicast destination MAC, then filler, then the identifier.
fn frame_for(id: u32) -> Vec<u8> {
    let mut f = GROUP_MAC.to_vec();
    f.extend_from_slice(&[0xab; 94]);
    f.extend_from_slice(&id.to_le_bytes());
    f
}

fn eack_of(client: &ReceiverEack) -> Vec<u8> {
    let mut w = Vec::new();
    client.encode(40, &mut w).unwrap();
    w
}

/// (destination MAC, identifier) of every injected frame, sorted.
fn injected(out: &[Action]) -> Vec<([u8; 6], u32)> {
    let mut v: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            Action::Inject { frame, dir } => {
                assert_eq!(*dir, Direction::ToClient);
                Some((
                    frame[..6].try_into().unwrap(),
                    u32::from_le_bytes(frame[100..104].try_into().unwrap()),
                ))
            }
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
}

/// The loss-rule tests run without a retransmission budget in the way (it has its own tests).
pub(super) fn unbudgeted() -> PackratEngineConfig {
    PackratEngineConfig {
        retx_budget_percent: 100,
        ..PackratEngineConfig::default()
    }
}

fn group(members: u32) -> MulticastCache<u32> {
    let mut g = MulticastCache::new(unbudgeted(), 16);
    for c in 0..members {
        g.join(c, 0).unwrap();
        g.set_mac(c, mac_of(c));
    }
    g
}

#[test]
fn each_client_gets_exactly_its_own_losses() {
    let mut g = group(3);
    let mut rx: Vec<ReceiverEack> = (0..3).map(|_| ReceiverEack::new(160)).collect();
    let lost: [&[u32]; 3] = [&[3], &[5, 9], &[]];
    for id in 0..16u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        for (c, r) in rx.iter_mut().enumerate() {
            if !lost[c].contains(&id) {
                r.on_receive(id);
            }
        }
    }
    for c in 0..3u32 {
        let mut out = Vec::new();
        g.on_eack(c, &eack_of(&rx[c as usize]), &mut out);
        let want: Vec<_> = lost[c as usize].iter().map(|&id| (mac_of(c), id)).collect();
        assert_eq!(injected(&out), want, "client {c}");
        assert_eq!(g.outstanding(c), Some(lost[c as usize].len()));
    }
    // One shared copy of the stream, whatever the number of clients.
    assert_eq!(g.cache_len(), 16);
    let total = g.counters();
    assert_eq!(total.retransmissions, 3);
    assert_eq!(total.eacks_decoded, 3);
}

#[test]
fn retransmitted_packets_are_not_resent_until_a_later_packet_is_acknowledged() {
    let mut g = group(1);
    let mut rx = ReceiverEack::new(160);
    for id in 0..8u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id != 2 {
            rx.on_receive(id);
        }
    }
    let mut out = Vec::new();
    g.on_eack(0, &eack_of(&rx), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(0), 2)]);
    // The same eACK again: nothing acknowledged after the retransmission.
    out.clear();
    g.on_eack(0, &eack_of(&rx), &mut out);
    assert!(injected(&out).is_empty());
    // The retransmission was lost too; a later packet arrives and is acknowledged.
    g.cache_packet(&100u32.to_le_bytes(), &frame_for(100));
    rx.on_receive(100);
    out.clear();
    g.on_eack(0, &eack_of(&rx), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(0), 2)]);
    // Finally received: the virtual cache is back to its fixed part.
    rx.on_receive(2);
    g.cache_packet(&101u32.to_le_bytes(), &frame_for(101));
    rx.on_receive(101);
    out.clear();
    g.on_eack(0, &eack_of(&rx), &mut out);
    assert!(injected(&out).is_empty());
    assert_eq!(g.outstanding(0), Some(0));
    assert_eq!(g.virtual_cache_bytes(), 8);
}

#[test]
fn virtual_cache_grows_with_outstanding_retransmissions_only() {
    let mut g = group(4);
    let mut rx: Vec<ReceiverEack> = (0..4).map(|_| ReceiverEack::new(160)).collect();
    for id in 0..30u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        for (c, r) in rx.iter_mut().enumerate() {
            // Client c loses c packets: ids 1, 3, .. (2c−1).
            if !(id % 2 == 1 && id < 2 * c as u32) {
                r.on_receive(id);
            }
        }
    }
    let mut out = Vec::new();
    for c in 0..4u32 {
        g.on_eack(c, &eack_of(&rx[c as usize]), &mut out);
    }
    // 0 + 1 + 2 + 3 outstanding retransmissions: 16 bytes each, plus 8 per client.
    assert_eq!(g.virtual_cache_bytes(), 4 * 8 + 6 * 16);
    assert_eq!(injected(&out).len(), 6);
}

#[test]
fn a_late_joiner_sees_only_what_was_sent_after_it_joined() {
    let mut g = group(1);
    let mut early = ReceiverEack::new(160);
    for id in 0..10u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        early.on_receive(id);
    }
    g.join(7, 0).unwrap();
    g.set_mac(7, mac_of(7));
    let mut late = ReceiverEack::new(160);
    for id in 10..20u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        early.on_receive(id);
        if id != 12 {
            late.on_receive(id);
        }
    }
    let mut out = Vec::new();
    g.on_eack(7, &eack_of(&late), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(7), 12)]);
    out.clear();
    g.on_eack(0, &eack_of(&early), &mut out);
    assert!(injected(&out).is_empty());
    assert_eq!(g.member_counters(0).unwrap().eacks_decoded, 1);
}

#[test]
fn one_clients_reset_leaves_the_others_intact() {
    let mut g = group(2);
    let mut rx: Vec<ReceiverEack> = (0..2).map(|_| ReceiverEack::new(160)).collect();
    for id in 0..12u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        for r in &mut rx {
            if id != 4 {
                r.on_receive(id);
            }
        }
    }
    let mut out = Vec::new();
    g.on_eack(1, b"not an eack", &mut out);
    assert!(matches!(out[..], [Action::Message(Outgoing::Reset)]));
    assert_eq!(g.member_counters(1).unwrap().resets, 1);
    // Client 0 is unaffected: its eACK of the old epoch still decodes.
    out.clear();
    g.on_eack(0, &eack_of(&rx[0]), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(0), 4)]);
    // Client 1 in its new epoch (numbered by the session layer).
    g.reset(1, 5);
    let mut fresh = ReceiverEack::new(160);
    fresh.reset(5);
    for id in 12..20u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id != 13 {
            fresh.on_receive(id);
        }
    }
    out.clear();
    g.on_eack(1, &eack_of(&fresh), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(1), 13)]);
    // An eACK of the old epoch is stale, not a failure.
    out.clear();
    g.on_eack(1, &eack_of(&rx[1]), &mut out);
    assert!(out.is_empty());
    assert_eq!(g.member_counters(1).unwrap().eacks_stale, 1);
}

#[test]
fn unknown_mac_caps_and_eviction_are_counted() {
    let mut g: MulticastCache<u32> = MulticastCache::new(
        PackratEngineConfig {
            cache_bytes: 1040,
            ..unbudgeted()
        },
        2,
    );
    g.join(0, 0).unwrap();
    g.join(1, 0).unwrap();
    assert_eq!(g.join(2, 0), Err(JoinError::Full(2)));
    let mut rx = ReceiverEack::new(160);
    for id in 0..30u32 {
        g.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id != 2 && id != 25 {
            rx.on_receive(id);
        }
    }
    // 10 frames of 104 bytes fit; 20 were evicted (and encoded into both clients' views).
    assert_eq!(g.cache_len(), 10);
    assert_eq!(g.evicted(), 20);
    let mut out = Vec::new();
    g.on_eack(0, &eack_of(&rx), &mut out);
    // 25 is cached but the client's MAC is unknown: nothing sent, counted. 2 is gone.
    assert!(out.is_empty());
    assert_eq!(g.no_mac(), 1);
    assert_eq!(g.member_counters(0).unwrap().missing_uncached, 1);
    g.set_mac(0, mac_of(0));
    out.clear();
    g.on_eack(0, &eack_of(&rx), &mut out);
    assert_eq!(injected(&out), vec![(mac_of(0), 25)]);
    assert_eq!(g.leave(0).map(|c| c.retransmissions), Some(1));
    assert_eq!(g.members(), 1);
    assert!(g.memory_bytes() >= 1040);
}

proptest! {
    /// Whatever each client loses and whenever it sends its eACK, a retransmission goes only to
    /// a client that lacks that packet, and a client that lacks a still-cached packet followed
    /// by one it received gets it.
    #[test]
    fn retransmissions_match_each_clients_losses(
        losses in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 40), 3),
        cut in 20usize..40,
    ) {
        let mut g = group(3);
        let mut rx: Vec<ReceiverEack> = (0..3).map(|_| ReceiverEack::new(160)).collect();
        for id in 0..cut as u32 {
            g.cache_packet(&id.to_le_bytes(), &frame_for(id));
            for c in 0..3 {
                // At most a few losses per client so that 40 symbols decode.
                let lose = losses[c][id as usize] && id % 5 == 0;
                if !lose {
                    rx[c].on_receive(id);
                }
            }
        }
        for c in 0..3u32 {
            let mut out = Vec::new();
            g.on_eack(c, &eack_of(&rx[c as usize]), &mut out);
            let lost: Vec<u32> = (0..cut as u32)
                .filter(|&id| losses[c as usize][id as usize] && id % 5 == 0)
                .collect();
            let last_received = (0..cut as u32).rev().find(|id| !lost.contains(id));
            let want: Vec<_> = lost
                .iter()
                .filter(|&&id| last_received.is_some_and(|r| r > id))
                .map(|&id| (mac_of(c), id))
                .collect();
            prop_assert_eq!(injected(&out), want);
        }
    }
}

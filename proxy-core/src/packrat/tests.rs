//! The engine's cache, loss rule, eviction and reset tests (4-byte identifiers; the other
//! widths: `width_tests.rs`).

use super::*;
use eack::ReceiverEack;
use proptest::prelude::*;
use std::collections::VecDeque;

/// The loss-rule tests: no retransmission budget in the way (the budget has its own tests).
fn unbudgeted() -> PackratEngineConfig {
    PackratEngineConfig {
        retx_budget_percent: 100,
        ..PackratEngineConfig::default()
    }
}

fn frame_for(id: u32) -> Vec<u8> {
    let mut f = vec![0xabu8; 100];
    f.extend_from_slice(&id.to_le_bytes());
    f
}

fn eack_of(client: &ReceiverEack, n: usize) -> Vec<u8> {
    let mut w = Vec::new();
    client.encode(n, &mut w).unwrap();
    w
}

fn injected(out: &[Action]) -> Vec<u32> {
    let mut v: Vec<u32> = out
        .iter()
        .filter_map(|a| match a {
            Action::Inject { frame, .. } => {
                Some(u32::from_le_bytes(frame[100..104].try_into().unwrap()))
            }
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn retransmits_exactly_the_missing_packets() {
    let mut e = PackratEngine::new(unbudgeted());
    let mut client = ReceiverEack::new(160);
    let lost = [3u32, 7, 11];
    for id in 0..16u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if !lost.contains(&id) {
            client.on_receive(id);
        }
    }
    let mut out = Vec::new();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert_eq!(injected(&out), lost.to_vec());
    assert_eq!(e.counters.retransmissions, 3);
    assert_eq!(e.counters.evicted_acked, 13);
    assert_eq!(e.cache_len(), 3);
    // Same eACK again: no new ack after the retransmission, so no duplicate retransmission.
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert!(injected(&out).is_empty());
    // The client receives two retransmissions; the third is lost again. After a later packet
    // is acknowledged, only the still-missing one is retransmitted.
    client.on_receive(3);
    client.on_receive(7);
    e.cache_packet(&100u32.to_le_bytes(), &frame_for(100));
    client.on_receive(100);
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert_eq!(injected(&out), vec![11]);
    assert_eq!(e.cache_len(), 1);
}

/// A datagram the client never takes (a stateless reset, which its lens leaves out of the
/// eACK): repaired after each later acknowledgement up to `MAX_REPAIRS` times, then given up and
/// taken out of the proxy's view, so that later eACKs no longer show it missing.
#[test]
fn a_packet_the_client_never_takes_is_given_up_after_max_repairs() {
    let mut e = PackratEngine::new(unbudgeted());
    let mut client = ReceiverEack::new(160);
    let never = 5u32;
    for id in 0..8u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id != never {
            client.on_receive(id);
        }
    }
    let mut repairs = 0;
    let mut out = Vec::new();
    for id in 8..8 + 2 * u32::from(MAX_REPAIRS) {
        out.clear();
        e.on_eack(&eack_of(&client, 40), &mut out);
        repairs += injected(&out).iter().filter(|&&i| i == never).count();
        // A later packet arrives and is acknowledged; the repair never "arrives".
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        client.on_receive(id);
    }
    assert_eq!(repairs, usize::from(MAX_REPAIRS));
    assert_eq!(e.counters.repairs_abandoned, 1);
    // The view no longer holds it: nothing missing, nothing repairable, nothing cached.
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert!(injected(&out).is_empty());
    assert_eq!(e.cache_len(), 0);
    assert_eq!(e.last_eack_repairable(), Some(0));
    assert_eq!(e.counters.eacks_failed, 0);
}

/// What an eACK outcome rests on: after an eACK whose every packet before its newest was
/// forwarded and arrived (the client's gap is a number the sender skipped), nothing is
/// repairable; a loss behind the newest acknowledged packet is, also while its resend is on its
/// way; packets after it are still in flight and are not.
#[test]
fn repairable_counts_only_losses_behind_the_newest_acknowledged() {
    let mut e = PackratEngine::new(unbudgeted());
    let mut client = ReceiverEack::new(160);
    assert_eq!(e.last_eack_repairable(), None);
    for id in 0..10u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        client.on_receive(id);
    }
    // Two more forwarded and still on their way.
    for id in 10..12u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
    }
    let mut out = Vec::new();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert!(injected(&out).is_empty());
    assert_eq!(e.last_eack_repairable(), Some(0));
    // 12 is lost after the proxy, 13 arrives: 12 is repairable, and stays so while its resend
    // is on its way (the next eACK acknowledges nothing newer).
    for id in 12..14u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
    }
    for id in [10u32, 11, 13] {
        client.on_receive(id);
    }
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert_eq!(injected(&out), vec![12]);
    assert_eq!(e.last_eack_repairable(), Some(1));
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert!(injected(&out).is_empty());
    assert_eq!(e.last_eack_repairable(), Some(1));
    // An undecodable eACK says nothing.
    e.on_eack(&[1, 2, 3], &mut out);
    assert_eq!(e.last_eack_repairable(), None);
}

#[test]
fn tail_losses_wait_for_a_gap() {
    let mut e = PackratEngine::new(unbudgeted());
    let mut client = ReceiverEack::new(160);
    for id in 0..10u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id < 8 {
            client.on_receive(id);
        }
    }
    let mut out = Vec::new();
    e.on_eack(&eack_of(&client, 40), &mut out);
    // 8 and 9 may still be in flight: nothing acknowledged after them.
    assert!(injected(&out).is_empty());
    assert_eq!(e.counters.missing_in_flight, 2);
}

#[test]
fn optimistic_eviction_keeps_views_in_sync() {
    let cfg = PackratEngineConfig {
        cache_bytes: 104 * 4,
        ..unbudgeted()
    };
    let mut e = PackratEngine::new(cfg);
    let mut client = ReceiverEack::new(160);
    for id in 0..10u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id != 1 && id != 8 {
            client.on_receive(id);
        }
    }
    assert_eq!(e.cache_len(), 4);
    assert!(e.cache_bytes() <= cfg.cache_bytes);
    assert_eq!(e.counters.evicted_optimistic, 6);
    let mut out = Vec::new();
    e.on_eack(&eack_of(&client, 40), &mut out);
    // 1 was evicted before it could be repaired; 8 is cached and retransmitted.
    assert_eq!(injected(&out), vec![8]);
    assert_eq!(e.counters.missing_uncached, 1);
    // Both count as repairable: an evicted packet's earlier resend may be on its way, so the
    // client is not told to give its gap up.
    assert_eq!(e.last_eack_repairable(), Some(2));
}

#[test]
fn undecodable_eack_resets_with_new_epoch() {
    let mut e = PackratEngine::new(unbudgeted());
    let mut client = ReceiverEack::new(160);
    for id in 0..200u32 {
        e.cache_packet(&id.to_le_bytes(), &frame_for(id));
        if id % 2 == 0 {
            client.on_receive(id);
        }
    }
    let mut out = Vec::new();
    // 100 missing in 4 symbols cannot decode.
    e.on_eack(&eack_of(&client, 4), &mut out);
    assert_eq!(out, vec![Action::Message(Outgoing::Reset)]);
    assert_eq!(e.epoch(), 1);
    assert_eq!(e.cache_len(), 0);
    assert_eq!(e.counters.eacks_failed, 1);
    // A stale eACK of epoch 0 is ignored, not another reset.
    out.clear();
    e.on_eack(&eack_of(&client, 40), &mut out);
    assert!(out.is_empty());
    assert_eq!(e.counters.eacks_stale, 1);
    // Garbage resets too.
    e.on_eack(b"\x01\x02garbage", &mut out);
    assert_eq!(e.counters.eacks_failed, 2);
}

/// A frame of `len` ≥ 104 bytes carrying `id` at 100..104 and a pattern derived from `id`.
fn varied_frame(id: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u32 ^ id) as u8).collect();
    f[100..104].copy_from_slice(&id.to_le_bytes());
    f
}

/// The frames of the engine's `Inject` actions (also used by `width_tests`).
pub(super) fn injected_frames(out: &[Action]) -> Vec<Vec<u8>> {
    out.iter()
        .filter_map(|a| match a {
            Action::Inject { frame, .. } => Some(frame.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn tiny_frames_are_capped_by_count() {
    let cfg = PackratEngineConfig {
        cache_bytes: 280,
        ..unbudgeted()
    };
    let mut e = PackratEngine::new(cfg);
    for id in 0..1000u32 {
        e.cache_packet(&id.to_le_bytes(), &id.to_le_bytes());
    }
    assert_eq!(e.cache_len(), 280 / MIN_FRAME + 1);
    assert_eq!(e.cache_bytes(), 4 * e.cache_len());
    assert_eq!(e.counters.evicted_optimistic, 1000 - e.cache_len() as u64);
    // Zero-length frames too.
    for id in 0..100u32 {
        e.cache_packet(&id.to_le_bytes(), &[]);
    }
    assert_eq!(e.cache_len(), 280 / MIN_FRAME + 1);
}

#[test]
fn retransmissions_are_intact_after_wrap_and_compaction() {
    // 1000-byte ring, frames of 150..=330 bytes: the ring wraps every few packets; three
    // new frames always fit, so the lost one is still cached at the eACK.
    let cfg = PackratEngineConfig {
        cache_bytes: 1000,
        ..unbudgeted()
    };
    let mut e = PackratEngine::new(cfg);
    let mut client = ReceiverEack::new(160);
    let len = |id: u32| 150 + (id as usize * 37) % 181;
    let mut out = Vec::new();
    for round in 0..20u32 {
        for k in 0..3u32 {
            let id = round * 3 + k;
            e.cache_packet(&id.to_le_bytes(), &varied_frame(id, len(id)));
            assert!(e.cache_bytes() <= 1000);
            // The second packet of each round is lost once.
            if k != 1 {
                client.on_receive(id);
            }
        }
        out.clear();
        e.on_eack(&eack_of(&client, 40), &mut out);
        let lost = round * 3 + 1;
        assert_eq!(
            injected_frames(&out),
            vec![varied_frame(lost, len(lost))],
            "round {round}"
        );
        assert_eq!(e.cache_len(), 1);
        assert_eq!(e.cache_bytes(), len(lost));
        client.on_receive(lost);
    }
    assert!(e.counters.evicted_optimistic > 0);
    assert_eq!(e.counters.missing_uncached, 0);
    assert_eq!(e.counters.eacks_decoded, 20);
    assert_eq!(e.counters.eacks_failed, 0);
}

proptest! {
    /// The cache against a FIFO model with random frame sizes and losses: the cache holds the
    /// newest frames that fit in the cap, and an eACK retransmits exactly the missing cached
    /// frames followed by an acknowledged one, byte for byte; evicted missing packets are
    /// counted as uncached.
    #[test]
    fn cache_matches_fifo_model(
        cap in 600usize..6000,
        lens in proptest::collection::vec(104usize..1500, 1..80),
        losses in proptest::collection::btree_set(0usize..80, 0..10),
    ) {
        let mut e = PackratEngine::new(PackratEngineConfig { cache_bytes: cap, ..unbudgeted() });
        let mut client = ReceiverEack::new(160);
        let mut model: VecDeque<(u32, Vec<u8>)> = VecDeque::new();
        let mut bytes = 0usize;
        for (i, &len) in lens.iter().enumerate() {
            let id = (i as u32).wrapping_mul(2_654_435_761);
            let f = varied_frame(id, len);
            e.cache_packet(&id.to_le_bytes(), &f);
            if len <= cap {
                bytes += len;
                model.push_back((id, f));
                while bytes > cap {
                    bytes -= model.pop_front().unwrap().1.len();
                }
            }
            if !losses.contains(&i) {
                client.on_receive(id);
            }
            prop_assert!(e.cache_bytes() <= cap);
            prop_assert_eq!(e.cache_bytes(), bytes);
            prop_assert_eq!(e.cache_len(), model.len());
        }
        let mut out = Vec::new();
        e.on_eack(&eack_of(&client, 160), &mut out);
        let idx = |id: u32| lens.iter().enumerate()
            .position(|(i, _)| (i as u32).wrapping_mul(2_654_435_761) == id).unwrap();
        let last_acked = model.iter().rev().map(|(id, _)| idx(*id)).find(|i| !losses.contains(i));
        let expect: Vec<Vec<u8>> = model.iter()
            .filter(|(id, _)| losses.contains(&idx(*id)) && last_acked.is_some_and(|l| idx(*id) < l))
            .map(|(_, f)| f.clone())
            .collect();
        prop_assert_eq!(injected_frames(&out), expect);
        let cached_lost = model.iter().filter(|(id, _)| losses.contains(&idx(*id))).count();
        let lost = losses.iter().filter(|&&i| i < lens.len()).count();
        prop_assert_eq!(e.counters.missing_uncached, (lost - cached_lost) as u64);
        prop_assert_eq!(e.cache_len(), cached_lost);
    }

    #[test]
    fn fuzz_body_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        fuzz_eack(&data);
    }

    #[test]
    fn random_losses_recovered(seed_losses in proptest::collection::btree_set(0u32..64, 0..12)) {
        let mut e = PackratEngine::new(unbudgeted());
        let mut client = ReceiverEack::new(160);
        for id in 0..64u32 {
            e.cache_packet(&(id * 7919).to_le_bytes(), &frame_for(id * 7919));
            if !seed_losses.contains(&id) {
                client.on_receive(id * 7919);
            }
        }
        let mut out = Vec::new();
        e.on_eack(&eack_of(&client, 160), &mut out);
        let last_received = (0..64u32).rev().find(|i| !seed_losses.contains(i));
        let expect: Vec<u32> = {
            let mut v: Vec<u32> = seed_losses.iter().copied()
                .filter(|&i| last_received.is_some_and(|l| i < l)).map(|i| i * 7919).collect();
            v.sort_unstable();
            v
        };
        prop_assert_eq!(injected(&out), expect);
    }
}

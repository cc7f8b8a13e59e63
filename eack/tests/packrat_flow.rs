//! A Packrat-style exchange over several eACK intervals: the proxy records forwarded packets,
//! the client records received ones and sends rateless eACKs sized to its expected losses, the
//! proxy retransmits what the eACK reports missing, and a Reset starts a new epoch.

use eack::experiment::SplitMix;
use eack::{EackError, ProxyEack, ReceiverEack, symbols_for};

#[test]
fn intervals_with_loss_retransmission_and_reset() {
    let mut rng = SplitMix::new(2024);
    let mut client = ReceiverEack::new(160);
    let mut proxy = ProxyEack::new(160, 48_000 / 1200);
    let mut outstanding: Vec<u32> = Vec::new(); // lost, not yet repaired
    let mut repaired = 0usize;
    let mut wire = Vec::new();
    for interval in 0..50 {
        // 16 packets per eACK interval (Packrat (CoNEXT '26) Table 4), 4 % loss on the proxy–client link.
        for _ in 0..16 {
            let id = rng.next_u64() as u32;
            proxy.insert(id);
            if rng.next_u64() % 100 < 4 {
                outstanding.push(id);
            } else {
                client.on_receive(id);
            }
        }
        wire.clear();
        let n = client.encode_for(outstanding.len(), 0.99, &mut wire);
        assert_eq!(n, symbols_for(outstanding.len(), 0.99).min(160));
        match proxy.on_eack(&wire) {
            Ok(mut d) => {
                d.missing.sort_unstable();
                let mut want = outstanding.clone();
                want.sort_unstable();
                assert_eq!(d.missing, want, "interval {interval}");
                assert!(d.extra.is_empty());
                // Retransmit: the client receives the repaired packets.
                for id in d.missing {
                    client.on_receive(id);
                    repaired += 1;
                }
                outstanding.clear();
            }
            Err(EackError::Decode(_)) => {
                // Rare at p = 0.99: reset, both sides start a fresh epoch.
                let e = proxy.epoch() + 1;
                proxy.reset(e);
                client.reset(e);
                outstanding.clear();
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(repaired > 10, "only {repaired} packets repaired");

    // An eACK from the old epoch after a reset is rejected, the new one works.
    wire.clear();
    client.encode(10, &mut wire).unwrap();
    let old = proxy.epoch();
    proxy.reset(old + 1);
    assert_eq!(
        proxy.on_eack(&wire),
        Err(EackError::Epoch {
            expected: old + 1,
            got: old
        })
    );
    client.reset(old + 1);
    proxy.insert(5);
    wire.clear();
    client.encode(3, &mut wire).unwrap();
    assert_eq!(proxy.on_eack(&wire).unwrap().missing, vec![5]);
}

#[test]
fn proxy_cache_bigger_than_local_sketch_is_answered_by_extension() {
    // The client sends more symbols than the proxy keeps locally: the proxy regenerates them
    // from its identifier set.
    let mut rng = SplitMix::new(9);
    let mut client = ReceiverEack::new(400);
    let mut proxy = ProxyEack::new(40, 10_000);
    let mut lost = Vec::new();
    for _ in 0..2000 {
        let id = rng.next_u64() as u32;
        proxy.insert(id);
        if rng.next_u64().is_multiple_of(20) {
            lost.push(id);
        } else {
            client.on_receive(id);
        }
    }
    let mut wire = Vec::new();
    let n = client.encode_for(lost.len(), 0.999, &mut wire);
    assert!(n > 40);
    let mut d = proxy.on_eack(&wire).unwrap();
    d.missing.sort_unstable();
    lost.sort_unstable();
    assert_eq!(d.missing, lost);
}

//! The retransmission budget (`retx_budget_percent`) under adversarial eACK streams, for the
//! unicast engine and for each client of a multicast group.

use super::multicast::MulticastCache;
use super::*;
use eack::ReceiverEack;
use proptest::prelude::*;

const FRAME: usize = 1200;

/// A `len`-byte frame carrying `id` at 100..104 (the multicast engine rewrites bytes 0..6).
fn frame(id: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0x5a; len.max(104)];
    f[100..104].copy_from_slice(&id.to_le_bytes());
    f
}

fn eack_of(client: &ReceiverEack, symbols: usize) -> Vec<u8> {
    let mut w = Vec::new();
    client.encode(symbols, &mut w).unwrap();
    w
}

fn injected_bytes(out: &[Action]) -> u64 {
    out.iter()
        .map(|a| match a {
            Action::Inject { frame, .. } => frame.len() as u64,
            _ => 0,
        })
        .sum()
}

/// The amplification attack the budget exists for: the client keeps the first 39 packets
/// "missing" forever and acknowledges every new one, so each eACK makes all 39 cached packets
/// eligible again (a later packet was acknowledged after their last retransmission), until each
/// has been resent `MAX_REPAIRS` times and is given up. Returns
/// (bytes forwarded, bytes injected) after `rounds` eACKs.
fn stuck_window_attack(cfg: PackratEngineConfig, rounds: u32) -> (u64, u64, PackratEngine) {
    let mut e = PackratEngine::new(cfg);
    let mut client = ReceiverEack::new(160);
    let (mut forwarded, mut injected) = (0u64, 0u64);
    let mut out = Vec::new();
    for id in 0..39u32 {
        e.cache_packet(&id.to_le_bytes(), &frame(id, FRAME));
        forwarded += FRAME as u64;
    }
    for id in 39..39 + rounds {
        e.cache_packet(&id.to_le_bytes(), &frame(id, FRAME));
        forwarded += FRAME as u64;
        client.on_receive(id);
        out.clear();
        e.on_eack(&eack_of(&client, 160), &mut out);
        injected += injected_bytes(&out);
        // The cap holds after every eACK, not only on average.
        let cap = u128::from(forwarded) * u128::from(cfg.retx_budget_percent) / 100;
        assert!(
            u128::from(injected) <= cap,
            "round {id}: {injected} > {cap}"
        );
    }
    assert_eq!(e.counters.eacks_failed, 0, "the attack's eACKs decode");
    (forwarded, injected, e)
}

#[test]
fn budget_caps_a_stuck_window_attack() {
    // Without a budget the repair cap alone bounds the attack: each forwarded packet is resent
    // at most MAX_REPAIRS times (before the cap: 39 times in this attack).
    let open = PackratEngineConfig {
        retx_budget_percent: u32::MAX,
        ..PackratEngineConfig::default()
    };
    let (fwd, inj, e) = stuck_window_attack(open, 500);
    eprintln!(
        "stuck-window attack, 500 eACKs, unbudgeted: {inj} bytes retransmitted for {fwd} forwarded ({:.1}x)",
        inj as f64 / fwd as f64
    );
    assert!(
        inj > 0 && inj <= u64::from(MAX_REPAIRS) * fwd,
        "unbudgeted: {inj} bytes injected for {fwd} forwarded"
    );
    assert!(e.counters.repairs_abandoned > 0);

    // With the default budget: at most 10 % of the forwarded bytes, and the engine keeps
    // retransmitting up to the cap (the budget is spent, not merely refused).
    let (fwd, inj, e) = stuck_window_attack(PackratEngineConfig::default(), 500);
    eprintln!(
        "stuck-window attack, 500 eACKs, default budget: {inj} bytes retransmitted for {fwd} forwarded ({:.2} %), {} refused",
        100.0 * inj as f64 / fwd as f64,
        e.counters.retx_refused_budget
    );
    assert!(inj * 10 <= fwd, "{inj} > 10 % of {fwd}");
    assert!(
        inj * 10 > fwd - 2 * FRAME as u64 * 10,
        "budget not used: {inj} of {fwd}"
    );
    assert_eq!(e.counters.retransmitted_bytes, inj);
    assert_eq!(e.counters.forwarded_bytes, fwd);
    assert_eq!(e.budget().retransmitted(), inj);
    assert!(e.counters.retx_refused_budget > 10_000);
}

#[test]
fn ordinary_losses_stay_within_budget_and_are_all_repaired() {
    // 2 % loss, an eACK every 10 packets: the budget never gets in the way.
    let mut e = PackratEngine::new(PackratEngineConfig::default());
    let mut client = ReceiverEack::new(160);
    let mut out = Vec::new();
    let mut lost = 0;
    for id in 0..5000u32 {
        e.cache_packet(&id.to_le_bytes(), &frame(id, FRAME));
        if id % 50 == 25 {
            lost += 1;
        } else {
            client.on_receive(id);
        }
        if id % 10 == 9 {
            out.clear();
            e.on_eack(&eack_of(&client, 40), &mut out);
            for a in &out {
                if let Action::Inject { frame, .. } = a {
                    client.on_receive(u32::from_le_bytes(frame[100..104].try_into().unwrap()));
                }
            }
        }
    }
    assert_eq!(e.counters.retransmissions, lost);
    assert_eq!(e.counters.retx_refused_budget, 0);
    assert_eq!(e.counters.missing_uncached, 0);
}

#[test]
fn zero_budget_disables_retransmission_and_resets_do_not_refill_it() {
    let cfg = PackratEngineConfig {
        retx_budget_percent: 0,
        ..PackratEngineConfig::default()
    };
    let (_, inj, e) = stuck_window_attack(cfg, 50);
    assert_eq!(inj, 0);
    assert_eq!(e.counters.retransmissions, 0);
    // Garbage resets the epoch; the budget's accounts survive it.
    let (_, _, mut e) = stuck_window_attack(PackratEngineConfig::default(), 100);
    let before = e.budget();
    let mut out = Vec::new();
    e.on_eack(b"\x01\x02garbage", &mut out);
    assert_eq!(e.counters.resets, 1);
    assert_eq!(e.budget(), before);
}

#[test]
fn multicast_budget_is_per_client() {
    let mut g: MulticastCache<u32> = MulticastCache::new(PackratEngineConfig::default(), 4);
    for c in 0..2u32 {
        g.join(c, 0).unwrap();
        g.set_mac(c, [2, 0, 0, 0, 0, c as u8]);
    }
    // Client 0 runs the stuck-window attack; client 1 loses every 50th packet and is honest.
    let mut attacker = ReceiverEack::new(160);
    let mut honest = ReceiverEack::new(160);
    let mut out = Vec::new();
    let (mut to_attacker, mut to_honest, mut honest_lost) = (0u64, 0u64, 0u64);
    for id in 0..2000u32 {
        g.cache_packet(&id.to_le_bytes(), &frame(id, FRAME));
        if id >= 39 {
            attacker.on_receive(id);
            out.clear();
            g.on_eack(0, &eack_of(&attacker, 160), &mut out);
            to_attacker += injected_bytes(&out);
        }
        if id % 50 == 25 {
            honest_lost += 1;
        } else {
            honest.on_receive(id);
        }
        if id % 10 == 9 {
            out.clear();
            g.on_eack(1, &eack_of(&honest, 40), &mut out);
            to_honest += injected_bytes(&out);
            for a in &out {
                if let Action::Inject { frame, .. } = a {
                    honest.on_receive(u32::from_le_bytes(frame[100..104].try_into().unwrap()));
                }
            }
        }
        let fwd = u64::from(id + 1) * FRAME as u64;
        assert!(
            to_attacker * 10 <= fwd,
            "attacker got {to_attacker} of {fwd}"
        );
    }
    let a = g.member_counters(0).unwrap();
    let h = g.member_counters(1).unwrap();
    assert_eq!(a.retransmitted_bytes, to_attacker);
    assert!(a.retx_refused_budget > 0);
    assert_eq!(a.forwarded_bytes, 2000 * FRAME as u64);
    assert_eq!(h.retransmissions, honest_lost);
    assert_eq!(h.retransmitted_bytes, to_honest);
    assert_eq!(h.retx_refused_budget, 0);
    // A client that joins late is budgeted on what it received since it joined.
    g.join(2, 0).unwrap();
    assert_eq!(g.member_budget(2).unwrap().forwarded(), 0);
    assert_eq!(g.counters().forwarded_bytes, 2 * 2000 * FRAME as u64);
}

#[derive(Debug, Clone)]
enum Step {
    /// Forward a frame of this length; the client receives it or not.
    Forward(usize, bool),
    /// The client sends an eACK.
    Eack,
    /// The client acknowledges a packet it never received (lying about the newest).
    AckNewest,
    /// Garbage instead of an eACK (a Reset).
    Garbage(Vec<u8>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (60usize..1500, proptest::bool::weighted(0.7)).prop_map(|(l, r)| Step::Forward(l, r)),
        3 => Just(Step::Eack),
        2 => Just(Step::AckNewest),
        1 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Step::Garbage),
    ]
}

proptest! {
    /// Any stream of packets and eACKs, honest or not: the bytes the engine injects never exceed
    /// the budget's share of the bytes it forwarded, at any point, for unicast and multicast.
    #[test]
    fn injected_bytes_never_exceed_the_budget(
        percent in 0u32..=100,
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let cfg = PackratEngineConfig { retx_budget_percent: percent, cache_bytes: 16 * 1024, ..PackratEngineConfig::default() };
        let mut e = PackratEngine::new(cfg);
        let mut g: MulticastCache<u8> = MulticastCache::new(cfg, 2);
        g.join(1, 0).unwrap();
        g.set_mac(1, [2, 0, 0, 0, 0, 1]);
        // One client model per engine: each follows its engine's Resets into the next epoch.
        let mut uc = ReceiverEack::new(160);
        let mut mc = ReceiverEack::new(160);
        let (mut forwarded, mut injected, mut g_injected) = (0u64, 0u64, 0u64);
        let mut next = 0u32;
        let mut out = Vec::new();
        let follow = |c: &mut ReceiverEack, out: &[Action]| {
            if out.contains(&Action::Message(Outgoing::Reset)) {
                c.reset(c.epoch().wrapping_add(1));
            }
        };
        for s in steps {
            out.clear();
            match s {
                Step::Forward(len, received) => {
                    let f = frame(next, len);
                    e.cache_packet(&next.to_le_bytes(), &f);
                    g.cache_packet(&next.to_le_bytes(), &f);
                    forwarded += f.len() as u64;
                    if received {
                        uc.on_receive(next);
                        mc.on_receive(next);
                    }
                    next += 1;
                }
                Step::AckNewest => {
                    uc.on_receive(next.saturating_sub(1));
                    mc.on_receive(next.saturating_sub(1));
                }
                Step::Eack => {
                    e.on_eack(&eack_of(&uc, 160), &mut out);
                    injected += injected_bytes(&out);
                    follow(&mut uc, &out);
                    out.clear();
                    g.on_eack(1, &eack_of(&mc, 160), &mut out);
                    g_injected += injected_bytes(&out);
                    follow(&mut mc, &out);
                }
                Step::Garbage(b) => {
                    e.on_eack(&b, &mut out);
                    follow(&mut uc, &out);
                    out.clear();
                    g.on_eack(1, &b, &mut out);
                    follow(&mut mc, &out);
                }
            }
            let cap = u128::from(forwarded) * u128::from(percent) / 100;
            prop_assert!(u128::from(injected) <= cap);
            prop_assert!(u128::from(g_injected) <= cap);
        }
        prop_assert_eq!(e.counters.retransmitted_bytes, injected);
        prop_assert_eq!(e.counters.forwarded_bytes, forwarded);
        prop_assert_eq!(g.member_counters(1).unwrap().retransmitted_bytes, g_injected);
    }
}

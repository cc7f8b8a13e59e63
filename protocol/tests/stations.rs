//! Sessions bound to their stations and flows (`docs/protocol.md` §8 "Stations and flows"):
//! per-station caps and fair eviction, discovery limits per station, spoofed sessions on a
//! victim's flow, the control-frame rate limit (RFC 9000 §21.9) and policy ranges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use sidekick_protocol::Time;

use common::{Pair, both_modes, robin_only};
use proptest::prelude::*;
use sidekick_protocol::{
    BaseFlow, ClientConfig, ClientEvent, ClientSession, Error, ProxyEvent, ProxyPolicy,
    ProxySessionTable, SessionId, is_discovery_request,
};

const VICTIM_SK: &str = "10.0.0.2:6000";

/// A client on `base` that runs discovery through `table` and sends its Init from `from`.
/// Returns the client and what the table made of the Init.
fn open_session(
    table: &mut ProxySessionTable,
    now: Time,
    base: BaseFlow,
    from: SocketAddr,
) -> (ClientSession, Result<ProxyEvent, Error>) {
    let mut c = ClientSession::new(ClientConfig::new(robin_only(8)));
    c.start(now).unwrap();
    let req = c.poll_transmit().unwrap();
    let req = is_discovery_request(&req.bytes).unwrap();
    let reply = match table.handle_discovery(now, base, &req) {
        Ok(r) => r,
        Err(e) => return (c, Err(e)),
    };
    c.handle_base_datagram(now, &reply.bytes).unwrap();
    let init = c.poll_transmit().unwrap();
    let r = table.handle_datagram(now, from, &init.bytes);
    (c, r)
}

/// quACKs the victim's client accepts out of `n` the proxy sends.
fn quacks_received(p: &mut Pair, now: Time, id: &SessionId, n: usize) -> usize {
    (0..n)
        .filter(|_| {
            let Ok(t) = p.proxy.send_quack(now, id, &[1; 40]) else {
                return false;
            };
            t.to == p.client_sk
                && matches!(
                    p.client.handle_datagram(now, p.proxy_addr, &t.bytes),
                    Ok(ClientEvent::Quack { .. })
                )
        })
        .count()
}

fn attacker_base(i: u32) -> BaseFlow {
    BaseFlow {
        client: SocketAddr::new([10, 0, 0, 66].into(), 20_000 + (i % 40_000) as u16),
        server: "203.0.113.5:443".parse().unwrap(),
    }
}

fn fast_policy(max_sessions: usize, per_station: usize) -> ProxyPolicy {
    let mut policy = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    policy.max_sessions = max_sessions;
    policy.max_sessions_per_station = per_station;
    policy.discovery_rate = 1_000_000;
    policy.discovery_burst = 1_000_000;
    policy.station_discovery_rate = 1_000_000;
    policy.station_discovery_burst = 1_000_000;
    policy.idle_timeout = Duration::from_secs(86_400);
    policy
}

fn victim(policy: ProxyPolicy) -> (Pair, SessionId) {
    let mut p = Pair::with(ClientConfig::new(both_modes()), policy);
    p.client_sk = VICTIM_SK.parse().unwrap();
    let id = p.handshake(p.t0);
    (p, id)
}

/// Opens 5 000 sessions from one station; returns how many the table established.
fn flood_sessions(p: &mut Pair, now: Time) -> usize {
    let mut established = 0;
    for i in 0..5_000u32 {
        let base = attacker_base(i);
        let (_c, r) = open_session(&mut p.proxy, now, base, base.client);
        if matches!(r, Ok(ProxyEvent::SessionEstablished { .. })) {
            established += 1;
        }
    }
    established
}

#[test]
fn one_station_opening_5000_sessions_cannot_evict_another_stations() {
    // The whole table is the cap here (no per-station cap below it): fair eviction alone.
    let (mut p, id) = victim(fast_policy(100, 1 << 20));
    let now = p.t0 + Duration::from_secs(1);
    let before = quacks_received(&mut p, now, &id, 10);
    let established = flood_sessions(&mut p, now);
    assert_eq!(established, 5_000);
    let s = p.proxy.stats();
    assert!(p.proxy.session(&id).is_some(), "victim evicted");
    assert_eq!(p.proxy.flow_owner(&p.base), Some(id));
    assert_eq!(p.proxy.len(), 100);
    assert_eq!(p.proxy.station_sessions("10.0.0.66".parse().unwrap()), 99);
    assert_eq!(s.sessions_evicted, 4_901);
    let expired: Vec<ProxyEvent> = std::iter::from_fn(|| p.proxy.poll_event()).collect();
    assert!(
        !expired.contains(&ProxyEvent::Expired { id, base: p.base }),
        "victim announced as gone"
    );
    assert_eq!(quacks_received(&mut p, now, &id, 10), before);
    assert_eq!(before, 10);
}

#[test]
fn the_default_per_station_cap_keeps_a_station_to_its_own_share() {
    let (mut p, id) = victim(fast_policy(4096, 64));
    let now = p.t0 + Duration::from_secs(1);
    flood_sessions(&mut p, now);
    assert!(p.proxy.session(&id).is_some());
    assert_eq!(p.proxy.station_sessions("10.0.0.66".parse().unwrap()), 64);
    assert_eq!(p.proxy.len(), 65);
}

#[test]
fn a_spoofed_discovery_and_init_from_another_station_leave_the_victims_session_intact() {
    let (mut p, id) = victim(ProxyPolicy::new("192.0.2.1:7000".parse().unwrap()));
    let now = p.t0 + Duration::from_millis(100);
    let before = quacks_received(&mut p, now, &id, 10);
    assert_eq!(before, 10);
    // Another station sends a discovery request as if from the victim's base flow, sees the
    // reply (worst case), and sends the Init from its own address: refused.
    let attacker: SocketAddr = "10.0.0.66:7000".parse().unwrap();
    let (_c, r) = open_session(&mut p.proxy, now, p.base, attacker);
    assert_eq!(r, Err(Error::StationMismatch));
    assert_eq!(p.proxy.stats().station_mismatch, 1);
    // The same Init spoofed from the victim's own address: the session exists but waits,
    // unannounced; its path challenge goes to the victim, so it never validates.
    let spoofed: SocketAddr = "10.0.0.2:7777".parse().unwrap();
    let (_c, r) = open_session(&mut p.proxy, now, p.base, spoofed);
    assert_eq!(r, Ok(ProxyEvent::Nothing));
    assert_eq!(p.proxy.stats().sessions_waiting, 1);
    while p.proxy.poll_transmit().is_some() {}
    let events: Vec<ProxyEvent> = std::iter::from_fn(|| p.proxy.poll_event()).collect();
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(p.proxy.flow_owner(&p.base), Some(id));
    assert_eq!(quacks_received(&mut p, now, &id, 10), before);
}

#[test]
fn a_validated_owner_is_never_displaced_even_without_station_binding() {
    let mut policy = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    policy.bind_station = false;
    let (mut p, id) = victim(policy);
    let now = p.t0 + Duration::from_millis(100);
    // The attacker completes its own handshake and validates its own address.
    let attacker: SocketAddr = "10.0.0.66:7000".parse().unwrap();
    let (mut c, r) = open_session(&mut p.proxy, now, p.base, attacker);
    assert_eq!(r, Ok(ProxyEvent::Nothing));
    for _ in 0..4 {
        for t in std::iter::from_fn(|| p.proxy.poll_transmit()) {
            if t.to == attacker {
                let _ = c.handle_datagram(now, p.proxy_addr, &t.bytes);
            }
        }
        for t in std::iter::from_fn(|| c.poll_transmit()) {
            let _ = p.proxy.handle_datagram(now, attacker, &t.bytes);
        }
    }
    let attacker_id = c.session_id().unwrap();
    assert!(p.proxy.session(&attacker_id).unwrap().is_validated());
    assert!(!p.proxy.session(&attacker_id).unwrap().is_announced());
    let events: Vec<ProxyEvent> = std::iter::from_fn(|| p.proxy.poll_event()).collect();
    assert!(
        !events.iter().any(|e| matches!(
            e,
            ProxyEvent::SessionEstablished { .. } | ProxyEvent::Expired { .. }
        )),
        "{events:?}"
    );
    assert_eq!(p.proxy.flow_owner(&p.base), Some(id));
    assert_eq!(quacks_received(&mut p, now, &id, 10), 10);
    // When the victim's session ends, the waiting session gets the flow.
    p.proxy
        .close(now, &id, sidekick_protocol::ErrorCode::None)
        .unwrap();
    assert_eq!(p.proxy.flow_owner(&p.base), Some(attacker_id));
    assert!(matches!(
        p.proxy.poll_event(),
        Some(ProxyEvent::SessionEstablished { id, .. }) if id == attacker_id
    ));
}

#[test]
fn a_validated_session_displaces_an_owner_that_never_validated() {
    let policy = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    let mut p = Pair::with(ClientConfig::new(both_modes()), policy);
    let now = p.t0;
    // A spoofed session (from the victim's IP) got the flow first and never validates.
    let spoofed: SocketAddr = "10.0.0.2:7777".parse().unwrap();
    let (_c, r) = open_session(&mut p.proxy, now, p.base, spoofed);
    let Ok(ProxyEvent::SessionEstablished { id: spoofed_id, .. }) = r else {
        panic!("{r:?}");
    };
    while p.proxy.poll_transmit().is_some() {}
    // The genuine client's session waits, validates, and takes the flow over.
    p.client.start(now).unwrap();
    let (_, pe) = p.pump(now);
    let id = p.client.session_id().unwrap();
    assert!(pe.contains(&ProxyEvent::PathValidated { id }), "{pe:?}");
    assert!(pe.contains(&ProxyEvent::Expired {
        id: spoofed_id,
        base: p.base
    }));
    assert!(
        pe.iter()
            .any(|e| matches!(e, ProxyEvent::SessionEstablished { id: i, .. } if *i == id))
    );
    assert_eq!(p.proxy.flow_owner(&p.base), Some(id));
    assert!(p.proxy.session(&spoofed_id).is_none());
    assert_eq!(p.proxy.stats().sessions_displaced, 1);
}

#[test]
fn discovery_is_limited_per_station() {
    let mut t = ProxySessionTable::new(ProxyPolicy::new("192.0.2.1:7000".parse().unwrap()));
    let now = Time::ZERO;
    let mut answered = 0;
    for i in 0..100 {
        let (_c, r) = open_session(&mut t, now, attacker_base(i), attacker_base(i).client);
        answered += usize::from(!matches!(r, Err(Error::RateLimited)));
    }
    assert_eq!(answered, 20, "the station's burst");
    assert_eq!(t.stats().station_rate_limited, 80);
    // Another station is still answered.
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let (_c, r) = open_session(&mut t, now, base, "10.0.0.2:6000".parse().unwrap());
    assert!(
        matches!(r, Ok(ProxyEvent::SessionEstablished { .. })),
        "{r:?}"
    );
}

#[test]
fn half_open_entries_are_capped_per_station() {
    let mut t = ProxySessionTable::new(fast_policy(4096, 64));
    let now = Time::ZERO;
    for i in 0..100 {
        let mut c = ClientSession::new(ClientConfig::new(robin_only(8)));
        c.start(now).unwrap();
        let req = is_discovery_request(&c.poll_transmit().unwrap().bytes).unwrap();
        t.handle_discovery(now, attacker_base(i), &req).unwrap();
    }
    assert_eq!(t.half_open_len(), 16);
    assert_eq!(t.stats().half_open_evicted, 84);
    // Another station's entry is not among those evicted next.
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let (_c, r) = open_session(&mut t, now, base, "10.0.0.2:6000".parse().unwrap());
    assert!(
        matches!(r, Ok(ProxyEvent::SessionEstablished { .. })),
        "{r:?}"
    );
}

#[test]
fn control_frames_are_rate_limited_per_session() {
    let mut p = Pair::new(both_modes());
    let now = p.t0;
    let id = p.handshake(now);
    let sk = p.client_sk;
    let mut limited = 0u64;
    for _ in 0..300 {
        p.client.reset(now, 0).unwrap();
        for t in p.client_out() {
            if p.proxy.handle_datagram(now, sk, &t.bytes) == Err(Error::RateLimited) {
                limited += 1;
            }
        }
    }
    // The burst (100, a few of them used by the handshake) passes; the rest is dropped.
    assert!((200..=205).contains(&limited), "{limited}");
    assert_eq!(
        p.proxy.session(&id).unwrap().stats().control_rate_limited,
        limited
    );
    // eACKs are data, not control: never limited.
    for _ in 0..300 {
        p.client.send_eack(now, &[0; 8]).unwrap();
    }
    for t in p.client_out() {
        let _ = p.proxy.handle_datagram(now, sk, &t.bytes);
    }
    assert_eq!(
        p.proxy.session(&id).unwrap().stats().control_rate_limited,
        limited
    );
    // The bucket refills at `control_rate` per second.
    let later = now + Duration::from_secs(1);
    p.client.reset(later, 0).unwrap();
    for t in p.client_out() {
        assert_ne!(
            p.proxy.handle_datagram(later, sk, &t.bytes),
            Err(Error::RateLimited)
        );
    }
}

fn extreme_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        Just(Duration::MAX),
        Just(Duration::from_secs(u64::MAX)),
        (0u64..u64::MAX).prop_map(Duration::from_millis),
        (0u64..100_000).prop_map(Duration::from_millis),
    ]
}

fn extreme_usize() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(usize::MAX),
        0usize..10_000,
        any::<usize>()
    ]
}

fn extreme_u32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), Just(u32::MAX), any::<u32>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Extreme policy values (a huge `session_idle_timeout_s` among them) are refused with a
    /// typed error or run; never a panic, whatever the table goes through.
    #[test]
    fn extreme_policies_are_refused_or_run(
        idle in extreme_duration(), half_open in extreme_duration(), reset in extreme_duration(),
        sessions in extreme_usize(), per_station in extreme_usize(), outbox in extreme_usize(),
        rate in extreme_u32(), burst in extreme_u32(), attempts in extreme_u32(),
        amp in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
    ) {
        let mut policy = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
        policy.idle_timeout = idle;
        policy.half_open_timeout = half_open;
        policy.reset_retry = reset;
        policy.max_sessions = sessions;
        policy.max_sessions_per_station = per_station;
        policy.outbox_cap = outbox;
        policy.discovery_rate = rate;
        policy.station_discovery_burst = burst;
        policy.reset_attempts = attempts;
        policy.amplification_factor = amp;
        match policy.validate() {
            Ok(()) => prop_assert!(ProxySessionTable::try_new(policy.clone()).is_ok()),
            Err(e) => {
                prop_assert!(e.value < e.min || e.value > e.max, "{e}");
                prop_assert!(ProxySessionTable::try_new(policy.clone()).is_err());
            }
        }
        prop_assert!(policy.clone().clamped().validate().is_ok());
        let mut p = Pair::with(ClientConfig::new(both_modes()), policy);
        let now = p.t0;
        p.client.start(now).unwrap();
        let _ = p.pump(now);
        if let Some(id) = p.client.session_id() {
            let _ = p.proxy.send_reset(now, &id, sidekick_protocol::ErrorCode::DecodeFailure);
            let _ = p.proxy.send_quack(now, &id, &[0; 10]);
        }
        let _ = p.proxy.poll_timeout();
        for secs in [1u64, 10, 1_000, 100_000, 10_000_000] {
            let t = now + Duration::from_secs(secs);
            p.proxy.handle_timeout(t);
            let _ = p.proxy.poll_timeout();
            while p.proxy.poll_transmit().is_some() {}
            while p.proxy.poll_event().is_some() {}
        }
    }
}

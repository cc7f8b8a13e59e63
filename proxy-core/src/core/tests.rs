//! Core v2: flow states, the deadline index and idle expiry.

use std::net::SocketAddr;
use std::time::Duration;

use crate::Time;

use super::*;
use crate::robin::RobinEngineConfig;
use crate::session::{EngineConfig, StaticSessions};

fn eth(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&crate::packet::build_udp_ip(src, dst, payload, 64));
    f
}

fn client(i: u32) -> SocketAddr {
    SocketAddr::from(([10, 2, (i >> 8) as u8, i as u8], 40000))
}

const SERVER: &str = "198.51.100.10:443";

fn core() -> ProxyCore<StaticSessions> {
    ProxyCore::new(CoreConfig::default(), StaticSessions::new(), (5, 6))
}

fn send(core: &mut ProxyCore<StaticSessions>, now: Time, i: u32, payload: &[u8]) {
    let f = eth(client(i), SERVER.parse().unwrap(), payload);
    let v = core.handle_frame(now, Direction::FromClient, &f, FrameMeta::default());
    assert_eq!(v, Verdict::Forward);
}

fn robin_every(ms: u64) -> EngineConfig {
    EngineConfig {
        robin: Some(RobinEngineConfig {
            every: Duration::from_millis(ms),
            ..RobinEngineConfig::default()
        }),
        packrat: None,
        multicast_group: None,
    }
}

fn key(i: u32) -> FlowKey {
    FlowKey {
        client: client(i),
        server: SERVER.parse().unwrap(),
    }
}

#[test]
fn idle_flows_expire_from_the_deadline_index_and_busy_ones_stay() {
    let t0 = Time::ZERO;
    let mut core = core();
    for i in 0..1000 {
        send(&mut core, t0, i, b"0123456789abcdef");
    }
    assert_eq!(core.flows().len(), 1000);
    // Idle expiry is kept in one-second slots: due within a second after 120 s.
    assert_eq!(core.poll_timeout(), Some(t0 + Duration::from_secs(121)));
    // Half the flows are busy again at 100 s.
    for i in (0..1000).step_by(2) {
        send(
            &mut core,
            t0 + Duration::from_secs(100),
            i,
            b"0123456789abcdef",
        );
    }
    core.handle_timeout(t0 + Duration::from_secs(121));
    assert_eq!(core.flows().len(), 500);
    assert!(core.flows().get(&key(0)).is_some() && core.flows().get(&key(1)).is_none());
    assert_eq!(core.snapshot().flow_table.expired, 500);
    // The busy half's deadlines moved to their last packet + 120 s.
    assert_eq!(core.poll_timeout(), Some(t0 + Duration::from_secs(221)));
    core.handle_timeout(t0 + Duration::from_secs(221));
    assert!(core.flows().is_empty());
    assert_eq!(core.snapshot().timer_entries, 0);
}

#[test]
fn a_tick_costs_what_is_due_not_what_exists() {
    let t0 = Time::ZERO;
    let mut core = core();
    // 10 000 unassisted flows and 100 Robin sessions quACKing every millisecond.
    for i in 0..10_000 {
        send(&mut core, t0, i, b"0123456789abcdef");
    }
    for i in 0..100 {
        core.sessions_mut().add(
            key(20_000 + i),
            robin_every(1),
            "10.0.0.2:50001".parse().unwrap(),
        );
    }
    core.handle_timeout(t0);
    assert_eq!(core.flows().assisted_len(), 100);
    let mut fired = core.snapshot().timers_fired;
    for ms in 1..=50u32 {
        let now = t0 + Duration::from_millis(u64::from(ms));
        for i in 0..100 {
            send(&mut core, now, 20_000 + i, &ms.to_le_bytes().repeat(8));
        }
        core.handle_timeout(now);
        while core.poll_transmit().is_some() {}
        let now_fired = core.snapshot().timers_fired;
        // One Robin deadline per session per millisecond; the 10 000 idle flows cost nothing.
        assert!(
            now_fired - fired <= 100,
            "tick {ms}: {} deadlines",
            now_fired - fired
        );
        fired = now_fired;
    }
    let snap = core.snapshot();
    assert!(snap.robin.quacks >= 100 * 45, "{}", snap.robin.quacks);
    assert!(
        snap.timer_entries <= 10_000 + 2 * 100,
        "{}",
        snap.timer_entries
    );
}

#[test]
fn an_idle_session_flow_leaves_its_session_and_keeps_its_counts() {
    let t0 = Time::ZERO;
    let mut core = core();
    core.sessions_mut()
        .add(key(1), robin_every(30), "10.0.0.2:50001".parse().unwrap());
    core.handle_timeout(t0);
    for n in 0..10u32 {
        send(&mut core, t0, 1, &n.to_le_bytes().repeat(8));
    }
    core.handle_timeout(t0 + Duration::from_millis(30));
    let quacks = core.snapshot().robin.quacks;
    assert!(quacks >= 1);
    assert_eq!(core.snapshot().robin.inserted, 10);
    core.handle_timeout(t0 + Duration::from_secs(121));
    assert!(core.flows().is_empty());
    assert!(core.by_session.is_empty());
    let snap = core.snapshot();
    assert_eq!(snap.robin.inserted, 10, "counters retire with the flow");
    assert!(
        snap.robin.quacks >= quacks,
        "quACK counts never go backwards"
    );
    // A later packet of the same 4-tuple is a new, unassisted flow whose deadlines are its own:
    // the old flow's leftover entries (if any) are ignored.
    send(&mut core, t0 + Duration::from_secs(122), 1, b"again");
    assert_eq!(core.flows().assisted_len(), 0);
    core.handle_timeout(t0 + Duration::from_secs(200));
    assert_eq!(core.flows().len(), 1);
    core.handle_timeout(t0 + Duration::from_secs(243));
    assert!(core.flows().is_empty());
}

fn packrat_engines(cache_bytes: usize) -> EngineConfig {
    EngineConfig {
        robin: None,
        packrat: Some(crate::packrat::PackratEngineConfig {
            cache_bytes,
            ..crate::packrat::PackratEngineConfig::default()
        }),
        multicast_group: None,
    }
}

#[test]
fn the_memory_budget_bounds_packrat_caches_and_shrinks_before_refusing() {
    let t0 = Time::ZERO;
    let cfg = CoreConfig {
        memory_budget: 4 << 20,
        ..CoreConfig::default()
    };
    let mut core = ProxyCore::new(cfg, StaticSessions::new(), (5, 6));
    // 1 MiB caches reserve a little over 2 MiB each (ring + index of the smallest frames): one
    // fits whole, the next is shrunk, then refused when even 16 KiB caches do not fit.
    for i in 0..64 {
        core.sessions_mut().add(
            key(i),
            packrat_engines(1 << 20),
            "10.0.0.2:50001".parse().unwrap(),
        );
    }
    core.handle_timeout(t0);
    let snap = core.snapshot();
    assert!(snap.memory_reserved_bytes <= 4 << 20, "{snap:?}");
    assert!(snap.memory_refused >= 1);
    let with_packrat = (0..64)
        .filter(|&i| {
            core.flows()
                .get(&key(i))
                .and_then(|e| e.value.assistance.session_engines())
                .is_some_and(|s| s.packrat.is_some())
        })
        .count();
    assert!((2..64).contains(&with_packrat), "{with_packrat}");
    // Sessions end with their flows: the budget is whole again.
    core.handle_timeout(t0 + Duration::from_secs(121));
    assert_eq!(core.snapshot().memory_reserved_bytes, 0);
}

#[test]
fn pemi_engines_stop_at_the_budget_and_their_flows_stay_forwarded() {
    let t0 = Time::ZERO;
    let pcfg = crate::pemi::PemiConfig::default();
    let per_flow = pemi_reservation(&pcfg);
    let cfg = CoreConfig {
        memory_budget: 10 * per_flow,
        ..CoreConfig::default()
    };
    let mut core = ProxyCore::new(cfg, StaticSessions::new(), (5, 6)).with_pemi(Some(pcfg));
    // A QUIC client Initial (long header, type Initial, version 1) padded to 1200 bytes.
    let mut initial = vec![0xc3, 0, 0, 0, 1, 8];
    initial.extend_from_slice(&[7; 8]);
    // No source connection ID, no token, the rest of the datagram is the packet (2-byte varint).
    let rest = 1200 - (initial.len() + 4);
    initial.extend_from_slice(&[0, 0, 0x40 | (rest >> 8) as u8, rest as u8]);
    initial.resize(1200, 0);
    for i in 0..50 {
        send(&mut core, t0, i, &initial);
    }
    let pemi_flows = core
        .flows()
        .iter()
        .filter(|(_, e)| e.value.assistance.pemi().is_some())
        .count();
    assert_eq!(pemi_flows, 10);
    let snap = core.snapshot();
    assert_eq!(snap.memory_refused, 40);
    assert_eq!(snap.flows, 50);
    core.handle_timeout(t0 + Duration::from_secs(121));
    assert_eq!(core.snapshot().memory_reserved_bytes, 0);
}

/// Frames the capture dropped would read as losses in Robin's next quACK: every session with
/// Robin starts a new epoch instead; a session without Robin is left alone.
#[test]
fn capture_drops_restart_robin_epochs_only() {
    let t0 = Time::ZERO;
    let mut core = core();
    core.sessions_mut()
        .add(key(1), robin_every(30), "10.0.0.2:50001".parse().unwrap());
    core.sessions_mut().add(
        key(2),
        packrat_engines(64_000),
        "10.0.0.3:50001".parse().unwrap(),
    );
    core.handle_timeout(t0);
    for n in 0..10u32 {
        send(&mut core, t0, 1, &n.to_le_bytes().repeat(8));
    }
    assert_eq!(core.snapshot().robin.resets, 0);
    core.on_capture_drops(t0 + Duration::from_millis(5));
    let snap = core.snapshot();
    assert_eq!(snap.capture_resets, 1, "one Robin session");
    assert_eq!(snap.resets_sent, 1);
    assert_eq!(snap.robin.resets, 1, "the engine's quACK starts over");
}

/// One session with both engines: the budget reserves both; what the client sends goes to Robin
/// only and what it receives to Packrat only; a reset of the session's epoch (here for capture
/// drops, which Robin needs) restarts both — Packrat's cache empties with it — and the budget
/// is whole again when the flow goes.
#[test]
fn a_session_with_both_engines_feeds_each_its_direction_and_resets_both() {
    let t0 = Time::ZERO;
    let mut core = core();
    let both = EngineConfig {
        robin: robin_every(30).robin,
        packrat: packrat_engines(64_000).packrat,
        multicast_group: None,
    };
    let packrat_cap = crate::packrat::PackratEngine::memory_cap(&both.packrat.unwrap());
    core.sessions_mut()
        .add(key(1), both, "10.0.0.2:50001".parse().unwrap());
    core.handle_timeout(t0);
    let reserved = core.snapshot().memory_reserved_bytes as usize;
    assert!(reserved > packrat_cap, "{reserved} for both engines");
    for n in 0..10u32 {
        send(&mut core, t0, 1, &n.to_le_bytes().repeat(8));
        let f = eth(
            SERVER.parse().unwrap(),
            client(1),
            &(1000 + n).to_le_bytes().repeat(8),
        );
        let v = core.handle_frame(t0, Direction::ToClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward);
    }
    let snap = core.snapshot();
    assert_eq!(
        snap.robin.inserted, 10,
        "the client's packets, not the server's"
    );
    assert_eq!(
        snap.packrat.cached, 10,
        "the server's packets, not the client's"
    );
    assert!(snap.cache_bytes > 0);
    core.on_capture_drops(t0 + Duration::from_millis(5));
    let snap = core.snapshot();
    assert_eq!((snap.resets_sent, snap.robin.resets), (1, 1));
    assert_eq!(snap.cache_bytes, 0, "Packrat's epoch restarted too");
    assert_eq!(snap.memory_reserved_bytes as usize, reserved);
    core.handle_timeout(t0 + Duration::from_secs(121));
    assert_eq!(core.snapshot().memory_reserved_bytes, 0);
}

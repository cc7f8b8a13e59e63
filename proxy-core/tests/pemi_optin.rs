//! A flow assisted by PEMI that later opts into a sidekick session (Robin) switches engines: the
//! PEMI engine is suspended as the session's fallback (`pemi_fallback.rs` hands it back), its
//! counters stay in the totals, Robin quACKs the flow, and every base packet keeps the Forward
//! verdict.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::time::Duration;

use sidekick_proxy_core::Time;

use common::{CLIENT, CLIENT_SK, PROXY, SERVER, addr, eth, long, robin_config};
use sidekick_protocol::{ClientConfig, ClientEvent, ClientSession, Destination, ProxyPolicy};
use sidekick_proxy_core::core::{Assistance, CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy_core::engine::Direction;
use sidekick_proxy_core::flow::FlowKey;
use sidekick_proxy_core::packet::{LinkType, build_udp_ip};
use sidekick_proxy_core::pemi::PemiConfig;
use sidekick_proxy_core::session::ProtocolSessions;

fn frame(src: &str, dst: &str, payload: &[u8]) -> Vec<u8> {
    eth(&build_udp_ip(addr(src), addr(dst), payload, 64))
}

#[test]
fn pemi_flow_switches_to_robin_without_disruption() {
    let t0 = Time::ZERO;
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut core = ProxyCore::new(
        CoreConfig::default(),
        ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))),
        (1, 2),
    )
    .with_pemi(Some(PemiConfig::default()));
    let mut out = Vec::new();
    let up = |core: &mut ProxyCore<ProtocolSessions>, t, p: &[u8], out: &mut Vec<Transmit>| {
        let v = core.handle_frame(
            t,
            Direction::FromClient,
            &frame(CLIENT, SERVER, p),
            FrameMeta::default(),
        );
        assert_eq!(v, Verdict::Forward);
        out.extend(std::iter::from_fn(|| core.poll_transmit()));
    };
    let down = |core: &mut ProxyCore<ProtocolSessions>, t, p: &[u8], out: &mut Vec<Transmit>| {
        let v = core.handle_frame(
            t,
            Direction::ToClient,
            &frame(SERVER, CLIENT, p),
            FrameMeta::default(),
        );
        assert_eq!(v, Verdict::Forward);
        out.extend(std::iter::from_fn(|| core.poll_transmit()));
    };
    // Handshake and 10 bursts of a download, each packet answered after 10 ms.
    up(&mut core, ms(0), &long(0, 1180), &mut out);
    let mut sh = long(0, 150);
    sh.extend(long(2, 1000));
    down(&mut core, ms(40), &sh, &mut out);
    up(&mut core, ms(50), &long(2, 60), &mut out);
    let mut evs = Vec::new();
    for b in 0..10u64 {
        for i in 0..10u64 {
            let t = 60_000 + 30_000 * b + 500 * i;
            evs.push((t, true));
            evs.push((t + 10_000, false));
        }
    }
    evs.sort_unstable();
    for (us, data) in evs {
        let t = t0 + Duration::from_micros(us);
        if data {
            down(&mut core, t, &[0x41; 1200], &mut out);
        } else {
            up(&mut core, t, &[0x41; 50], &mut out);
        }
    }
    let key = FlowKey {
        client: addr(CLIENT),
        server: addr(SERVER),
    };
    let before = core.snapshot().pemi;
    assert!(before.protected > 50, "{before:?}");
    assert!(matches!(
        core.flows().get(&key).unwrap().value.assistance,
        Assistance::Pemi(_)
    ));

    // The client opts in: discovery on the base path, then the session over the sidekick socket.
    let mut client = ClientSession::new(ClientConfig::new(robin_config()));
    let now = ms(400);
    client.start(now).unwrap();
    let mut events = Vec::new();
    for _ in 0..50 {
        let mut moved = false;
        while let Some(t) = client.poll_transmit() {
            moved = true;
            match t.dest {
                Destination::Base => up(&mut core, now, &t.bytes, &mut out),
                Destination::Sidekick(_) => {
                    core.handle_sidekick(now, addr(CLIENT_SK), &t.bytes);
                }
            }
        }
        core.handle_timeout(now);
        out.extend(std::iter::from_fn(|| core.poll_transmit()));
        for a in std::mem::take(&mut out) {
            moved = true;
            match a {
                Transmit::Sidekick { bytes, .. } => {
                    events.push(client.handle_datagram(now, addr(PROXY), &bytes).unwrap());
                }
                Transmit::Inject { frame, .. } => {
                    // PEMI's ICMP calibration probes (not UDP) are not for the SDK.
                    let Ok(p) =
                        sidekick_proxy_core::packet::parse_frame(&frame, LinkType::Ethernet)
                    else {
                        assert_eq!(frame[14 + 9], 1, "only ICMP probes are not UDP");
                        continue;
                    };
                    if let Ok(ev) = client.handle_base_datagram(now, p.payload(&frame)) {
                        events.push(ev);
                    }
                }
            }
        }
        while let Some(ev) = client.poll_event() {
            events.push(ev);
        }
        if !moved {
            break;
        }
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ClientEvent::Established { .. })),
        "{events:?}"
    );
    let v = &core.flows().get(&key).unwrap().value.assistance;
    // PEMI left the flow: its state is the session's engines, PEMI's engine waits beside them.
    let engines = v.session_engines().expect("a session on the flow");
    assert!(engines.robin.is_some());
    assert!(engines.fallback.is_some());
    // PEMI's counters stay in the totals (the discovery packet still passed through PEMI before
    // the session attached).
    let at_switch = core.snapshot().pemi;
    assert_eq!(at_switch.protected, before.protected);
    assert!(at_switch.flowlets >= before.flowlets);
    // Robin now quACKs the upload; the verdicts stay Forward.
    for i in 0..10u8 {
        up(
            &mut core,
            ms(401),
            &[0x41, i, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            &mut out,
        );
    }
    let quacks = out
        .iter()
        .filter(|a| matches!(a, Transmit::Sidekick { .. }))
        .count();
    assert!(quacks >= 1, "{out:?}");
    assert_eq!(core.snapshot().pemi, at_switch);
}

//! Unit tests of the client session that need its private fields.

use super::*;
use crate::messages::{IdentifierSpec, RobinConfig};
use crate::sidekick_addr::AddrRefusal;
use crate::{BaseFlow, ProxyPolicy, ProxySessionTable, is_discovery_request};

#[test]
fn frames_beyond_the_grant_are_refused() {
    let now = Time::ZERO;
    let proxy_addr: SocketAddr = "192.0.2.1:7000".parse().unwrap();
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let sk: SocketAddr = "10.0.0.2:6000".parse().unwrap();
    let mut table = ProxySessionTable::new(ProxyPolicy::new(proxy_addr));
    let mut c = ClientSession::new(ClientConfig::new(SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
            quack_on_gap_percent: 0,
        }),
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    }));
    c.start(now).unwrap();
    let req = c.poll_transmit().unwrap();
    let r = table
        .handle_discovery(now, base, &is_discovery_request(&req.bytes).unwrap())
        .unwrap();
    c.handle_base_datagram(now, &r.bytes).unwrap();
    let init = c.poll_transmit().unwrap();
    table.handle_datagram(now, sk, &init.bytes).unwrap();
    let ack = table.poll_transmit().unwrap();
    c.handle_datagram(now, proxy_addr, &ack.bytes).unwrap();
    let refresh = c.poll_transmit().unwrap();
    table.handle_datagram(now, sk, &refresh.bytes).unwrap();
    // The proxy confirms the path response (seq 2).
    let reply = table.poll_transmit().unwrap();
    c.handle_datagram(now, proxy_addr, &reply.bytes).unwrap();
    assert!(c.path_retry.is_none());
    let id = c.session_id().unwrap();
    // Pretend this client had authorised only up to seq 3: the proxy (which was told 257)
    // stands in for one that ignores the quota.
    c.granted = 3;
    let q2 = table.send_quack(now, &id, b"2").unwrap();
    let q3 = table.send_quack(now, &id, b"3").unwrap();
    assert_eq!(
        c.handle_datagram(now, proxy_addr, &q3.bytes),
        Err(Error::QuotaExhausted)
    );
    assert!(matches!(
        c.handle_datagram(now, proxy_addr, &q2.bytes),
        Ok(ClientEvent::Quack { .. })
    ));
}

/// A client whose discovery reply and Init went through `table` (policy at `proxy_addr`);
/// returns the client, the table and the session id. The InitAck is left queued in the table.
fn until_init_ack(
    cfg: ClientConfig,
    proxy_addr: SocketAddr,
) -> (ClientSession, ProxySessionTable, SessionId) {
    let now = Time::ZERO;
    let base = BaseFlow {
        client: "10.0.0.2:5000".parse().unwrap(),
        server: "203.0.113.5:443".parse().unwrap(),
    };
    let mut table = ProxySessionTable::new(ProxyPolicy::new(proxy_addr));
    let mut c = ClientSession::new(cfg);
    c.start(now).unwrap();
    let req = c.poll_transmit().unwrap();
    let r = table
        .handle_discovery(now, base, &is_discovery_request(&req.bytes).unwrap())
        .unwrap();
    c.handle_base_datagram(now, &r.bytes).unwrap();
    let init = c.poll_transmit().unwrap();
    table
        .handle_datagram(now, "10.0.0.2:6000".parse().unwrap(), &init.bytes)
        .unwrap();
    let id = c.session_id().unwrap();
    (c, table, id)
}

fn requested() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
            quack_on_gap_percent: 0,
        }),
        packrat: Some(crate::messages::PackratConfig {
            eack_interval_ms: 10,
            eack_interval_packets: 16,
            local_symbols: 160,
            cache_capacity_bytes: 48_000,
            reorder_delay_ms: 30,
            multicast_group: Vec::new(),
        }),
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

/// An InitAck carrying `config`, sealed under the session's key as an impostor holding the key
/// of the discovery reply it answered would.
fn lying_init_ack(table: &ProxySessionTable, id: &SessionId, config: SessionConfig) -> Vec<u8> {
    let s = table.session(id).unwrap();
    let m = Message::InitAck(crate::messages::InitAck {
        accepted: true,
        capabilities: crate::messages::CAP_ALL,
        config: Some(config),
        path_challenge: s.challenge,
        epoch: 0,
        reject_code: 0,
    });
    frame::seal(
        FrameDirection::ProxyToClient,
        crate::frame::TagLen::Short,
        *id,
        1,
        100,
        &m,
        &s.key,
    )
    .unwrap()
}

const PROXY: &str = "192.0.2.1:7000";

#[test]
fn an_echo_beyond_the_request_makes_the_client_fall_back() {
    let (mut c, table, id) = until_init_ack(ClientConfig::new(requested()), PROXY.parse().unwrap());
    let mut lie = requested();
    lie.robin.as_mut().unwrap().threshold = 1024;
    let ack = lying_init_ack(&table, &id, lie);
    let ev = c
        .handle_datagram(Time::ZERO, PROXY.parse().unwrap(), &ack)
        .unwrap();
    assert_eq!(
        ev,
        ClientEvent::Fallback(FallbackReason::BadEcho(crate::echo::EchoField::Threshold))
    );
    assert_eq!(c.state(), ClientState::Failed);
    assert_eq!(c.stats().echoes_refused, 1);
    // It told the proxy why (one Close), and sends nothing more.
    let out: Vec<ClientTransmit> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert_eq!(out.len(), 1);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn a_client_only_field_beyond_the_request_is_clamped() {
    let (mut c, table, id) = until_init_ack(ClientConfig::new(requested()), PROXY.parse().unwrap());
    let mut lie = requested();
    lie.packrat.as_mut().unwrap().reorder_delay_ms = u32::MAX;
    lie.packrat.as_mut().unwrap().eack_interval_packets = 1;
    let ack = lying_init_ack(&table, &id, lie);
    let ev = c
        .handle_datagram(Time::ZERO, PROXY.parse().unwrap(), &ack)
        .unwrap();
    let ClientEvent::Established { config, .. } = ev else {
        panic!("{ev:?}");
    };
    assert_eq!(config, requested());
    assert_eq!(c.config(), Some(&requested()));
    assert_eq!(c.stats().echo_fields_clamped, 2);
}

#[test]
fn sidekick_addresses_into_the_host_or_a_group_are_refused() {
    let mut cfg = ClientConfig::new(requested());
    cfg.local_addrs = vec!["10.0.0.9".parse().unwrap()];
    for (addr, refusal) in [
        ("127.0.0.1:7000", AddrRefusal::Loopback),
        ("[::1]:7000", AddrRefusal::Loopback),
        ("0.0.0.0:7000", AddrRefusal::Unspecified),
        ("224.0.0.1:7000", AddrRefusal::Multicast),
        ("255.255.255.255:7000", AddrRefusal::Broadcast),
        ("10.0.0.9:53", AddrRefusal::Local),
    ] {
        let now = Time::ZERO;
        let base = BaseFlow {
            client: "10.0.0.2:5000".parse().unwrap(),
            server: "203.0.113.5:443".parse().unwrap(),
        };
        let mut table = ProxySessionTable::new(ProxyPolicy::new(addr.parse().unwrap()));
        let mut c = ClientSession::new(cfg.clone());
        c.start(now).unwrap();
        let req = c.poll_transmit().unwrap();
        let r = table
            .handle_discovery(now, base, &is_discovery_request(&req.bytes).unwrap())
            .unwrap();
        assert_eq!(
            c.handle_base_datagram(now, &r.bytes),
            Err(Error::RefusedSidekickAddr(refusal))
        );
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Fallback(FallbackReason::SidekickAddr(refusal)))
        );
        assert_eq!(c.stats().sidekick_addr_refused, 1);
        assert_eq!(c.poll_transmit(), None, "nothing sent to {addr}");
        assert_eq!(c.poll_timeout(), None);
    }
    // A proxy on the client's own host, where the application allows it (tests).
    cfg.allow_local_sidekick = true;
    let (c, _, _) = until_init_ack(cfg, "127.0.0.1:7000".parse().unwrap());
    assert_eq!(c.state(), ClientState::Initiating);
}

proptest::proptest! {
    /// Whatever configuration an impostor echoes, the client runs with a clamp of its request
    /// or falls back; it never adopts a field outside the request's range.
    #[test]
    fn any_lying_init_ack_is_clamped_or_refused(
        t in 0u32..2000, iv in 0u32..100, ivp in 0u32..100, gap in 0u32..500,
        sym in 0u32..100_000, cache in 0u64..100_000_000, reorder in proptest::prelude::any::<u32>(),
        eiv in 0u32..100, eivp in 0u32..100,
    ) {
        let (mut c, table, id) = until_init_ack(ClientConfig::new(requested()), PROXY.parse().unwrap());
        let mut lie = requested();
        let r = lie.robin.as_mut().unwrap();
        (r.threshold, r.interval_ms, r.interval_packets, r.quack_on_gap_percent) = (t, iv, ivp, gap);
        let p = lie.packrat.as_mut().unwrap();
        (p.local_symbols, p.cache_capacity_bytes, p.reorder_delay_ms) = (sym, cache, reorder);
        (p.eack_interval_ms, p.eack_interval_packets) = (eiv, eivp);
        let ack = lying_init_ack(&table, &id, lie);
        match c.handle_datagram(Time::ZERO, PROXY.parse().unwrap(), &ack) {
            Ok(ClientEvent::Established { config, .. }) => {
                let (r, p) = (config.robin.unwrap(), config.packrat.unwrap());
                proptest::prop_assert!((1..=10).contains(&r.threshold));
                proptest::prop_assert!(r.interval_ms >= 30 && r.interval_packets == 0);
                proptest::prop_assert!(r.quack_on_gap_percent == 0);
                proptest::prop_assert!((1..=160).contains(&p.local_symbols));
                proptest::prop_assert!((1..=48_000).contains(&p.cache_capacity_bytes));
                proptest::prop_assert!(p.reorder_delay_ms <= 30);
                proptest::prop_assert!(p.eack_interval_ms == 0 || p.eack_interval_ms >= 10);
                proptest::prop_assert!(p.eack_interval_packets == 0 || p.eack_interval_packets >= 16);
            }
            Ok(ClientEvent::Fallback(FallbackReason::BadEcho(_))) => {
                proptest::prop_assert_eq!(c.state(), ClientState::Failed);
            }
            // Invalid on the wire (e.g. t = 0 or > 1024): refused before the echo check.
            Err(Error::InvalidConfig(_)) => {}
            other => proptest::prop_assert!(false, "{other:?}"),
        }
    }
}

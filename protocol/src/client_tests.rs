//! Unit tests of the client session that need its private fields.

use super::*;
use crate::messages::{IdentifierSpec, RobinConfig};
use crate::{BaseFlow, ProxyPolicy, ProxySessionTable, is_discovery_request};

#[test]
fn frames_beyond_the_grant_are_refused() {
    let now = Instant::now();
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

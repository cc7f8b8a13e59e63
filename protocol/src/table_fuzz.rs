//! Fuzz body of the proxy session table (re-exported as `table::fuzz_table` and
//! `fuzz::fuzz_table`).

use std::net::SocketAddr;
use std::time::Duration;

use crate::Time;

use crate::discovery::DISCOVERY_LEN;
use crate::frame::{self, Header};
use crate::messages::{ErrorCode, IdentifierSpec, RobinConfig, SessionConfig, msg_type};
use crate::proxy::{BaseFlow, ProxyPolicy};
use crate::table::ProxySessionTable;

/// Fuzz body: a table holding one session established by a real [`crate::ClientSession`]
/// handshake, driven by a script decoded from `data`. Each step is `op, len, payload[len]`:
/// `op % 6` = 0/1 raw datagram from the client's / another address, 2/3 a frame with the
/// payload's type byte and body *sealed under the session key* (so bodies reach the state
/// machine) from the client's / another port of the same station, 4 advance time and run timers, 5 proxy-side
/// sends (quACK, Reset, Close). After every step: no panic, caps hold, raw bytes never produce
/// output, and no unverified address ever received more bytes than it sent.
pub fn fuzz_table(data: &[u8]) {
    use crate::client::{ClientConfig, ClientSession};

    let mut now = Time::ZERO;
    let proxy_addr: SocketAddr = ([192, 0, 2, 1], 7000).into();
    let client_addr: SocketAddr = ([10, 0, 0, 2], 9).into();
    // The same station from another port: NAT rebinding or an on-path copy (path probes).
    let other_addr: SocketAddr = ([10, 0, 0, 2], 10).into();
    let mut policy = ProxyPolicy::new(proxy_addr);
    policy.outbox_cap = 8;
    policy.max_events = 8;
    let mut t = ProxySessionTable::new(policy);
    let mut client = ClientSession::new(ClientConfig::new(SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
            quack_on_gap_percent: 0,
        }),
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    }));
    // Handshake; any failure here is a bug, not a fuzz finding about the input.
    assert!(client.start(now).is_ok());
    let req = client.poll_transmit().map(|t| t.bytes).unwrap_or_default();
    let base = BaseFlow {
        client: client_addr,
        server: ([203, 0, 113, 3], 443).into(),
    };
    let parsed = crate::discovery::is_discovery_request(&req);
    let reply = parsed.and_then(|p| t.handle_discovery(now, base, &p).ok());
    let reply = reply.map_or([0; DISCOVERY_LEN], |r| r.bytes);
    assert!(client.handle_base_datagram(now, &reply).is_ok());
    let init = client.poll_transmit().map(|t| t.bytes).unwrap_or_default();
    assert!(t.handle_datagram(now, client_addr, &init).is_ok());
    let Some(id) = t.session_ids().next() else {
        return;
    };
    while t.poll_transmit().is_some() {}
    let mut seq = 1000u64;
    let mut rest = data;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(n);
        rest = next;
        let from = if op % 2 == 0 { client_addr } else { other_addr };
        let queued = t.pending_transmits();
        match op % 6 {
            0 | 1 => {
                let r = t.handle_datagram(now, from, payload);
                assert!(r.is_err(), "raw bytes authenticated");
                assert!(t.pending_transmits() <= queued, "raw bytes produced output");
            }
            2 | 3 => {
                let Some(s) = t.session(&id) else { continue };
                let (ty, quota, body) = match payload {
                    [ty, q, body @ ..] => (*ty, u32::from(*q) * 16, body),
                    _ => (msg_type::REFRESH, 0, payload),
                };
                seq += 1;
                let h = Header {
                    version: crate::PROTOCOL_VERSION,
                    msg_type: ty,
                    flags: 0,
                    session_id: id,
                    seq,
                    quota,
                    body_len: 0,
                };
                if let Ok(b) = frame::seal_raw(&h, body, &s.key) {
                    let _ = t.handle_datagram(now, from, &b);
                }
            }
            4 => {
                now += Duration::from_millis(u64::from(*len) * 100);
                t.handle_timeout(now);
            }
            _ => {
                let _ = match payload.first().map(|b| b % 3) {
                    Some(0) => t.send_quack(now, &id, payload).map(|_| ()),
                    Some(1) => t.send_reset(now, &id, ErrorCode::DecodeFailure).map(|_| ()),
                    _ => t.close(now, &id, ErrorCode::None),
                };
            }
        }
        assert!(t.len() <= 1 && t.half_open_len() <= 1);
        assert!(t.pending_transmits() <= 8 && t.pending_events() <= 8);
        if let Some(s) = t.session(&id)
            && !s.is_validated()
        {
            assert!(s.unverified_bytes_out() <= s.unverified_bytes_in());
        }
        if let Some(p) = t.session(&id).and_then(|s| s.probe) {
            assert!(
                p.bytes_out <= p.bytes_in,
                "a probed address got more than it sent"
            );
        }
        while t.poll_event().is_some() {}
    }
}

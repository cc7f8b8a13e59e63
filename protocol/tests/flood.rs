//! Floods the proxy's session table with forged discovery requests, forged Inits and random
//! datagrams from many addresses, with real sessions (validated and unvalidated) mixed in.
//! Asserts bounded state (every cap holds, evictions are counted) and zero amplification: no
//! address ever receives more bytes from the proxy than the proxy received from it, unless the
//! address proved it is a client (Sidekick (NSDI '24) §4.1 "Security").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use sidekick_protocol::Time;

use sidekick_protocol::discovery::DiscoveryRequest;
use sidekick_protocol::frame::{self, MIN_INIT_DATAGRAM};
use sidekick_protocol::messages::{IdentifierSpec, Init, RobinConfig};
use sidekick_protocol::{
    BaseFlow, ClientConfig, ClientSession, Destination, Error, FrameDirection, Message,
    PROTOCOL_VERSION, ProxyEvent, ProxyPolicy, ProxySessionTable, SessionConfig, SessionId,
    SessionKey, TagLen, is_discovery_request,
};

/// xorshift64*: deterministic input for the flood.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
    fn addr(&mut self, hosts: u64) -> SocketAddr {
        let h = self.next() % hosts;
        let ip = Ipv4Addr::new(198, 18, (h >> 8) as u8, h as u8);
        SocketAddr::new(ip.into(), 1024 + (self.next() % 4) as u16)
    }
}

/// Bytes the proxy received from and sent to each address, the latter split by whether the
/// address was a validated client address at the time.
#[derive(Default)]
struct Ledger {
    rx: HashMap<SocketAddr, u64>,
    tx_unverified: HashMap<SocketAddr, u64>,
    tx_verified: HashMap<SocketAddr, u64>,
}

impl Ledger {
    fn rx(&mut self, a: SocketAddr, n: usize) {
        *self.rx.entry(a).or_default() += n as u64;
    }
    fn tx(&mut self, table: &ProxySessionTable, a: SocketAddr, n: usize) {
        let verified = table.session_ids().any(|id| {
            let s = table.session(&id).unwrap();
            s.client_addr() == a && s.is_validated()
        });
        let m = if verified {
            &mut self.tx_verified
        } else {
            &mut self.tx_unverified
        };
        *m.entry(a).or_default() += n as u64;
    }
    fn check(&self) {
        for (a, &tx) in &self.tx_unverified {
            let rx = self.rx.get(a).copied().unwrap_or(0);
            assert!(tx <= rx, "{a}: sent {tx} unverified bytes, received {rx}");
        }
    }
}

fn policy() -> ProxyPolicy {
    let mut p = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    p.max_sessions = 64;
    p.max_half_open = 128;
    p.outbox_cap = 256;
    p.max_events = 32;
    // Fewer X25519 operations than the default 200/s keep the test fast; the flood is the same.
    p.discovery_rate = 50;
    p
}

fn check_caps(t: &ProxySessionTable) {
    let p = t.policy();
    assert!(t.len() <= p.max_sessions, "sessions {}", t.len());
    assert!(
        t.half_open_len() <= p.max_half_open,
        "half-open {}",
        t.half_open_len()
    );
    assert!(t.pending_transmits() <= p.outbox_cap);
    assert!(t.pending_events() <= p.max_events);
}

fn drain(t: &mut ProxySessionTable, ledger: &mut Ledger) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(x) = t.poll_transmit() {
        ledger.tx(t, x.to, x.bytes.len());
        out.push((x.to, x.bytes));
    }
    out
}

fn session_config() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
            quack_on_gap_percent: 0,
        }),
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

#[test]
fn flood_keeps_state_bounded_and_never_amplifies() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut t = ProxySessionTable::new(policy());
    let mut ledger = Ledger::default();
    let t0 = Time::ZERO;
    let server: SocketAddr = "203.0.113.5:443".parse().unwrap();
    let mut now = t0;

    // Phase 1: 100k forged discovery requests from 65k spoofed hosts, 1 ms apart.
    let mut replies = 0u64;
    let mut half_open_ids = Vec::new();
    for i in 0..100_000u32 {
        now = t0 + Duration::from_millis(u64::from(i));
        let mut nonce = [0u8; 16];
        let mut pk = [0u8; 32];
        rng.fill(&mut nonce);
        rng.fill(&mut pk);
        let req = DiscoveryRequest {
            version: PROTOCOL_VERSION,
            capabilities: 3,
            nonce,
            public_key: pk,
        }
        .encode(rng.next() as u8);
        let client = rng.addr(65_536);
        ledger.rx(client, req.len());
        let parsed = is_discovery_request(&req).unwrap();
        let base = BaseFlow { client, server };
        match t.handle_discovery(now, base, &parsed) {
            Ok(r) => {
                assert!(r.bytes.len() <= req.len(), "discovery reply amplifies");
                assert_eq!(r.to, client);
                ledger.tx(&t, r.to, r.bytes.len());
                replies += 1;
                if half_open_ids.len() < 1000 {
                    half_open_ids.push(SessionId(r.bytes[35..51].try_into().unwrap()));
                }
            }
            Err(Error::RateLimited | Error::Crypto) => {}
            Err(e) => panic!("{e}"),
        }
        if i % 1000 == 0 {
            t.handle_timeout(now);
        }
        check_caps(&t);
    }
    let s = t.stats();
    assert_eq!(s.discovery_replies, replies);
    // Token bucket: 50/s for 100 s plus the burst of 50.
    assert!(replies <= 50 * 100 + 50 + 1, "{replies}");
    assert!(replies > 4_000, "{replies}");
    assert_eq!(
        s.discovery_rate_limited + s.discovery_refused + replies,
        100_000
    );
    assert!(s.half_open_evicted + s.half_open_expired + t.half_open_len() as u64 == replies);
    assert!(t.is_empty(), "forged discovery creates no session");
    assert!(drain(&mut t, &mut ledger).is_empty());

    // Phase 2: 100 real clients; half of them never answer the path challenge.
    now += Duration::from_secs(1);
    let mut clients = Vec::new();
    for c in 0..100u16 {
        now += Duration::from_millis(25);
        let base = BaseFlow {
            client: SocketAddr::new(Ipv4Addr::new(10, 1, (c >> 8) as u8, c as u8).into(), 5000),
            server,
        };
        let sk = SocketAddr::new(base.client.ip(), 6000);
        let mut cl = ClientSession::new(ClientConfig::new(session_config()));
        cl.start(now).unwrap();
        let req = cl.poll_transmit().unwrap();
        assert_eq!(req.dest, Destination::Base);
        ledger.rx(base.client, req.bytes.len());
        let r = t
            .handle_discovery(now, base, &is_discovery_request(&req.bytes).unwrap())
            .unwrap();
        ledger.tx(&t, r.to, r.bytes.len());
        cl.handle_base_datagram(now, &r.bytes).unwrap();
        let init = cl.poll_transmit().unwrap();
        ledger.rx(sk, init.bytes.len());
        let ev = t.handle_datagram(now, sk, &init.bytes).unwrap();
        let ProxyEvent::SessionEstablished { id, .. } = ev else {
            panic!("{ev:?}")
        };
        for (to, b) in drain(&mut t, &mut ledger) {
            assert_eq!(to, sk);
            cl.handle_datagram(now, to_proxy_addr(), &b).unwrap();
        }
        let validate = c % 2 == 0;
        while let Some(x) = cl.poll_transmit() {
            if validate {
                ledger.rx(sk, x.bytes.len());
                t.handle_datagram(now, sk, &x.bytes).unwrap();
            }
        }
        assert_eq!(t.session(&id).unwrap().is_validated(), validate);
        // A validated client's Refresh asked for a reply (confirming its path response).
        for (to, b) in drain(&mut t, &mut ledger) {
            assert!(validate);
            assert_eq!(to, sk);
            cl.handle_datagram(now, to_proxy_addr(), &b).unwrap();
        }
        // The proxy tries to push quACKs to every session, verified or not.
        for _ in 0..20 {
            match t.send_quack(now, &id, &[0xab; 200]) {
                Ok(x) => {
                    ledger.tx(&t, x.to, x.bytes.len());
                    assert!(validate, "quACK to an unverified address");
                }
                Err(Error::AmplificationLimit) => assert!(!validate),
                Err(e) => panic!("{e}"),
            }
        }
        check_caps(&t);
        clients.push((id, sk, cl, validate));
    }
    let s = t.stats();
    assert_eq!(t.len(), 64, "capped");
    assert_eq!(s.sessions_evicted, 36);
    // 50 unverified sessions × 20 refused quACKs, evicted sessions included.
    assert_eq!(s.amplification_refused, 50 * 20);
    assert!(t.pending_events() <= 32);
    assert!(s.events_dropped > 0, "the event queue is capped too");
    let live: Vec<SessionId> = t.session_ids().collect();
    let epochs: HashMap<SessionId, u32> = live
        .iter()
        .map(|id| (*id, t.session(id).unwrap().epoch()))
        .collect();

    // Phase 3: 100k forged Inits (padded, for half-open and live ids and random ones, under
    // keys the attacker made up) and 100k random datagrams, from 65k hosts.
    let forged_key = SessionKey::from_bytes(&[0x66; 32]);
    let init = Message::Init(Init {
        capabilities: 1,
        config: Some(session_config()),
    });
    let before = t.stats();
    let mut last_half_open = 0;
    for i in 0..100_000u32 {
        let sid = match i % 3 {
            0 => half_open_ids[i as usize % half_open_ids.len()],
            1 => live[i as usize % live.len()],
            _ => {
                let mut b = [0u8; 16];
                rng.fill(&mut b);
                SessionId(b)
            }
        };
        let b = frame::seal_padded(
            FrameDirection::ClientToProxy,
            TagLen::Short,
            sid,
            u64::from(i) + 1,
            u32::MAX,
            &init,
            &forged_key,
            MIN_INIT_DATAGRAM,
        )
        .unwrap();
        let from = rng.addr(65_536);
        ledger.rx(from, b.len());
        let r = t.handle_datagram(now, from, &b);
        assert!(
            matches!(r, Err(Error::BadMac | Error::UnknownSession)),
            "{r:?}"
        );
        // Random datagram: random length, sometimes with a valid magic and version prefix.
        let len = (rng.next() % 1500) as usize;
        let mut d = vec![0u8; len];
        rng.fill(&mut d);
        if len >= 3 && i % 2 == 0 {
            d[..3].copy_from_slice(&[0x53, 0x4b, PROTOCOL_VERSION]);
        }
        let from = rng.addr(65_536);
        ledger.rx(from, d.len());
        assert!(t.handle_datagram(now, from, &d).is_err());
        if i % 10_000 == 0 {
            check_caps(&t);
            last_half_open = t.half_open_len();
        }
    }
    let after = t.stats();
    assert!(
        drain(&mut t, &mut ledger).is_empty(),
        "forgeries produced output"
    );
    assert_eq!(t.half_open_len(), last_half_open);
    // Every Init naming a live session fails its MAC; the others name no session.
    assert!(after.auth_failures - before.auth_failures >= 33_333);
    assert!(after.unknown_session > before.unknown_session);
    assert!(after.malformed - before.malformed >= 50_000);
    assert_eq!(after.established, before.established, "no forged session");
    assert_eq!(after.bytes_out, before.bytes_out);
    // Live sessions are untouched: same set, same epochs, still answering their clients.
    let still: HashSet<SessionId> = t.session_ids().collect();
    assert_eq!(still, live.iter().copied().collect());
    for id in &live {
        assert_eq!(t.session(id).unwrap().epoch(), epochs[id]);
    }
    for (id, sk, cl, validate) in &mut clients {
        if !*validate || t.session(id).is_none() {
            continue;
        }
        cl.reset(now, 0).unwrap();
        let x = cl.poll_transmit().unwrap();
        ledger.rx(*sk, x.bytes.len());
        assert!(matches!(
            t.handle_datagram(now, *sk, &x.bytes),
            Ok(ProxyEvent::Reset { .. })
        ));
    }
    drain(&mut t, &mut ledger);
    check_caps(&t);
    ledger.check();
    // Addresses that were never validated received at most what they sent, in total.
    let verified: HashSet<SocketAddr> = ledger.tx_verified.keys().copied().collect();
    for (a, tx) in &ledger.tx_unverified {
        if !verified.contains(a) {
            assert!(*tx <= ledger.rx[a]);
        }
    }
    let s = t.stats();
    eprintln!(
        "flood: {} discovery replies, {} rate-limited, {} refused; half-open evicted {} expired {}; \
         sessions evicted {}; amplification refusals {}; auth failures {}; unknown session {}; \
         malformed {}; events dropped {}; unverified addresses {}",
        s.discovery_replies,
        s.discovery_rate_limited,
        s.discovery_refused,
        s.half_open_evicted,
        s.half_open_expired,
        s.sessions_evicted,
        s.amplification_refused,
        s.auth_failures,
        s.unknown_session,
        s.malformed,
        s.events_dropped,
        ledger.tx_unverified.len()
    );
    // Idle expiry empties the table.
    now += Duration::from_secs(31);
    t.handle_timeout(now);
    assert!(t.is_empty() && t.half_open_len() == 0);
}

fn to_proxy_addr() -> SocketAddr {
    "192.0.2.1:7000".parse().unwrap()
}

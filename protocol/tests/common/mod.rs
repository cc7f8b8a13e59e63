//! Shared test harness: one client and one proxy table wired by hand, with explicit time and
//! explicit control over which datagrams are delivered.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use sidekick_protocol::Time;
use std::net::SocketAddr;

use sidekick_protocol::messages::{IdentifierSpec, PackratConfig, RobinConfig};
use sidekick_protocol::{
    BaseFlow, ClientConfig, ClientEvent, ClientSession, ClientTransmit, Destination, Error,
    ProxyEvent, ProxyPolicy, ProxySessionTable, SessionConfig, SessionId, Transmit,
    is_discovery_reply, is_discovery_request,
};

/// Robin and Packrat with the paper's settings (Sidekick (NSDI '24) Table 5 Robin #2, Packrat (CoNEXT '26) WiFi).
pub fn both_modes() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 30,
            interval_packets: 0,
            threshold: 10,
            quack_on_gap_percent: 0,
        }),
        packrat: Some(PackratConfig {
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

/// Robin only.
pub fn robin_only(threshold: u32) -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 15,
            interval_packets: 0,
            threshold,
            quack_on_gap_percent: 0,
        }),
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

/// A client, a proxy table and the addresses between them.
pub struct Pair {
    pub client: ClientSession,
    pub proxy: ProxySessionTable,
    pub base: BaseFlow,
    /// The client's sidekick socket address as the proxy sees it.
    pub client_sk: SocketAddr,
    pub proxy_addr: SocketAddr,
    pub t0: Time,
}

impl Pair {
    pub fn new(cfg: SessionConfig) -> Self {
        let proxy_addr: SocketAddr = "192.0.2.1:7000".parse().unwrap();
        Self::with(ClientConfig::new(cfg), ProxyPolicy::new(proxy_addr))
    }

    pub fn with(client: ClientConfig, policy: ProxyPolicy) -> Self {
        Pair {
            proxy_addr: policy.sidekick_addr,
            client: ClientSession::new(client),
            proxy: ProxySessionTable::new(policy),
            base: BaseFlow {
                client: "10.0.0.2:5000".parse().unwrap(),
                server: "203.0.113.5:443".parse().unwrap(),
            },
            client_sk: "10.0.0.2:6000".parse().unwrap(),
            t0: Time::ZERO,
        }
    }

    /// Drains the client's outbox.
    pub fn client_out(&mut self) -> Vec<ClientTransmit> {
        std::iter::from_fn(|| self.client.poll_transmit()).collect()
    }

    /// Drains the proxy's outbox.
    pub fn proxy_out(&mut self) -> Vec<Transmit> {
        std::iter::from_fn(|| self.proxy.poll_transmit()).collect()
    }

    /// Delivers one client datagram to wherever it is addressed. Discovery requests go to the
    /// proxy's base-path hook and the reply comes back to the client at once.
    pub fn deliver_to_proxy(&mut self, now: Time, t: &ClientTransmit) -> Result<ProxyEvent, Error> {
        match t.dest {
            Destination::Base => {
                let req = is_discovery_request(&t.bytes).expect("base datagram is a request");
                let reply = self.proxy.handle_discovery(now, self.base, &req)?;
                assert_eq!(reply.to, self.base.client);
                assert_eq!(reply.from, self.base.server);
                assert!(is_discovery_reply(&reply.bytes));
                self.client.handle_base_datagram(now, &reply.bytes)?;
                Ok(ProxyEvent::Nothing)
            }
            Destination::Sidekick(to) => {
                assert_eq!(to, self.proxy_addr);
                self.proxy.handle_datagram(now, self.client_sk, &t.bytes)
            }
        }
    }

    /// Delivers one proxy datagram to the client.
    pub fn deliver_to_client(&mut self, now: Time, t: &Transmit) -> Result<ClientEvent, Error> {
        assert_eq!(t.to, self.client_sk);
        self.client.handle_datagram(now, self.proxy_addr, &t.bytes)
    }

    /// Delivers everything queued on both sides until both are quiet; returns the events.
    pub fn pump(&mut self, now: Time) -> (Vec<ClientEvent>, Vec<ProxyEvent>) {
        let (mut ce, mut pe) = (Vec::new(), Vec::new());
        for _ in 0..32 {
            let c = self.client_out();
            let p = self.proxy_out();
            if c.is_empty() && p.is_empty() {
                break;
            }
            for t in &c {
                pe.push(self.deliver_to_proxy(now, t).expect("proxy accepts"));
            }
            for t in &p {
                ce.push(self.deliver_to_client(now, t).expect("client accepts"));
            }
        }
        ce.extend(std::iter::from_fn(|| self.client.poll_event()));
        pe.extend(std::iter::from_fn(|| self.proxy.poll_event()));
        (ce, pe)
    }

    /// Starts the client and delivers its discovery request and its Init at `now`; the proxy's
    /// InitAck is left queued. Returns the session the Init created.
    pub fn until_init(&mut self, now: Time) -> SessionId {
        self.client.start(now).unwrap();
        let req = self.client_out();
        self.deliver_to_proxy(now, &req[0]).unwrap();
        let init = self.client_out();
        match self.deliver_to_proxy(now, &init[0]).unwrap() {
            ProxyEvent::SessionEstablished { id, .. } => id,
            ev => panic!("no session: {ev:?}"),
        }
    }

    /// Runs discovery, Init/InitAck and path validation at `now`; returns the session id.
    pub fn handshake(&mut self, now: Time) -> SessionId {
        self.client.start(now).unwrap();
        let (ce, pe) = self.pump(now);
        assert!(
            ce.iter()
                .any(|e| matches!(e, ClientEvent::Established { .. })),
            "{ce:?}"
        );
        let id = pe
            .iter()
            .find_map(|e| match e {
                ProxyEvent::SessionEstablished { id, .. } => Some(*id),
                _ => None,
            })
            .expect("proxy established");
        assert!(
            pe.iter()
                .any(|e| matches!(e, ProxyEvent::PathValidated { .. })),
            "{pe:?}"
        );
        assert!(self.proxy.session(&id).unwrap().is_validated());
        id
    }
}

//! The sidekick wire protocol (Sidekick NSDI '24 §4.1–4.2, Packrat CoNEXT '26 §6.1).
//!
//! Discovery markers sent inline on the base connection's 4-tuple, the messages exchanged between
//! a client and a proxy on the sidekick socket, session identifiers, authentication and the quota
//! that bounds what a proxy may send. Used by the proxy and the client SDK alike.
//!
//! - [`discovery`]: the 128-byte request/reply markers and the hot-path check
//!   [`is_discovery_request`] (no allocation).
//! - [`frame`]: header ‖ protobuf body ‖ truncated HMAC-SHA256 tag, [`frame::seal`] /
//!   [`frame::open`].
//! - [`messages`]: Init, InitAck, Config, Reset, Quack, Eack, Close, Error, Refresh, Challenge.
//! - [`ClientSession`] and [`ProxySessionTable`] / [`ProxySession`]: sans-IO state machines with
//!   explicit `now` ([`Time`]: the caller's clock, read by the caller).
//!
//! The specification with byte layouts and the security analysis is `docs/protocol.md`.
//!
//! ```
//! use sidekick_protocol::Time;
//! use sidekick_protocol::*;
//! use sidekick_protocol::messages::{IdentifierSpec, RobinConfig, SessionConfig};
//!
//! let now = Time::ZERO;
//! let proxy_addr = "192.0.2.1:7000".parse().unwrap();
//! let base = BaseFlow { client: "10.0.0.2:5000".parse().unwrap(),
//!                       server: "203.0.113.5:443".parse().unwrap() };
//! let mut proxy = ProxySessionTable::new(ProxyPolicy::new(proxy_addr));
//! let mut client = ClientSession::new(ClientConfig::new(SessionConfig {
//!     robin: Some(RobinConfig {
//!         interval_ms: 30,
//!         interval_packets: 0,
//!         threshold: 10,
//!         quack_on_gap_percent: 0,
//!     }),
//!     packrat: None,
//!     identifier: Some(IdentifierSpec::quic_default()),
//! }));
//! client.start(now).unwrap();
//! // The request travels on the base path; the proxy spots it and answers from the server.
//! let req = client.poll_transmit().unwrap();
//! let parsed = is_discovery_request(&req.bytes).unwrap();
//! let reply = proxy.handle_discovery(now, base, &parsed).unwrap();
//! assert!(reply.bytes.len() <= req.bytes.len()); // no amplification
//! client.handle_base_datagram(now, &reply.bytes).unwrap();
//! // Init goes to the proxy's sidekick socket; InitAck comes back.
//! let init = client.poll_transmit().unwrap();
//! let ev = proxy.handle_datagram(now, base.client, &init.bytes).unwrap();
//! assert!(matches!(ev, ProxyEvent::SessionEstablished { .. }));
//! let ack = proxy.poll_transmit().unwrap();
//! let ev = client.handle_datagram(now, proxy_addr, &ack.bytes).unwrap();
//! assert!(matches!(ev, ClientEvent::Established { .. }));
//! assert_eq!(client.state(), ClientState::Established);
//! ```

use std::time::Duration;

pub mod client;
mod client_types;
pub mod discovery;
pub mod echo;
pub mod error;
pub mod frame;
pub mod keys;
pub mod messages;
pub mod proxy;
pub mod replay;
pub mod sidekick_addr;
pub mod table;
mod table_fuzz;
pub mod time;

pub use client::{
    ClientConfig, ClientEvent, ClientSession, ClientState, ClientStats, ClientTransmit,
    Destination, FallbackReason,
};
pub use discovery::{
    DISCOVERY_LEN, DiscoveryReply, DiscoveryRequest, is_discovery_reply, is_discovery_request,
};
pub use error::Error;
pub use frame::{MAX_DATAGRAM, PROTOCOL_VERSION, TagLen};
pub use keys::{SessionId, SessionKey};
pub use messages::{ErrorCode, FrameDirection, Message, SessionConfig};
pub use proxy::{BaseFlow, PolicyError, ProxyPolicy, ProxySession, SessionStats, Transmit};
pub use table::{DiscoveryTransmit, ProxyEvent, ProxySessionTable, TableStats};
pub use time::Time;

/// Fuzz entry points (bodies of the `fuzz/` targets, also run by the test suite).
pub mod fuzz {
    pub use crate::discovery::fuzz_discovery;
    pub use crate::frame::fuzz_open;
    pub use crate::messages::fuzz_decode_body;
    pub use crate::table::fuzz_table;
}

/// A retransmission timer with exponential backoff.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Retry {
    pub(crate) next: Time,
    pub(crate) attempts: u32,
    backoff: Duration,
}

impl Retry {
    pub(crate) fn new(now: Time, initial: Duration) -> Self {
        Retry {
            next: now + initial,
            attempts: 1,
            backoff: initial,
        }
    }

    pub(crate) fn step(&mut self, now: Time, max: Duration) {
        self.backoff = self.backoff.checked_mul(2).unwrap_or(max).min(max);
        self.next = now + self.backoff;
        self.attempts += 1;
    }
}

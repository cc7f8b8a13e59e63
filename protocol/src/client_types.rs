//! The client session's configuration, states, events and counters (re-exported by
//! [`crate::client`]).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::echo::EchoField;
use crate::frame::TagLen;
use crate::messages::SessionConfig;
use crate::sidekick_addr::AddrRefusal;

/// Client-side settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The configuration requested in Init.
    pub session: SessionConfig,
    /// Tag length of the frames the client sends.
    pub tag_len: TagLen,
    /// First discovery retransmission timeout (doubles per attempt).
    pub discovery_retry: Duration,
    /// Discovery requests sent before giving up (fallback: no proxy).
    pub discovery_attempts: u32,
    /// First Init retransmission timeout (doubles per attempt).
    pub init_retry: Duration,
    /// Init messages sent before giving up.
    pub init_attempts: u32,
    /// First Config/Reset retransmission timeout (doubles per attempt).
    pub control_retry: Duration,
    /// Config/Reset attempts before the session is declared broken.
    pub control_attempts: u32,
    /// Cap on any retransmission backoff.
    pub max_backoff: Duration,
    /// Messages the client authorises beyond the highest proxy sequence number it has seen.
    pub quota_window: u32,
    /// Period of the quota-refresh / keepalive timer.
    pub refresh_interval: Duration,
    /// Session is abandoned when nothing authentic arrived from the proxy for this long.
    pub idle_timeout: Duration,
    /// Cap on queued outgoing datagrams.
    pub outbox_cap: usize,
    /// The client host's own addresses: a discovery reply naming one of them as the sidekick
    /// address is refused ([`AddrRefusal::Local`]). Loopback, unspecified, multicast and
    /// broadcast addresses are refused regardless.
    pub local_addrs: Vec<IpAddr>,
    /// Accept loopback and local sidekick addresses (a proxy on the client's own host: tests
    /// and single-host demonstrations only). Multicast, broadcast, unspecified and port 0
    /// stay refused.
    pub allow_local_sidekick: bool,
}

impl ClientConfig {
    /// Defaults around a requested session configuration.
    pub fn new(session: SessionConfig) -> Self {
        ClientConfig {
            session,
            tag_len: TagLen::Short,
            discovery_retry: Duration::from_millis(250),
            discovery_attempts: 4,
            init_retry: Duration::from_millis(200),
            init_attempts: 5,
            control_retry: Duration::from_millis(200),
            control_attempts: 6,
            max_backoff: Duration::from_secs(2),
            quota_window: 256,
            refresh_interval: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(10),
            outbox_cap: 64,
            local_addrs: Vec::new(),
            allow_local_sidekick: false,
        }
    }
}

/// Where a client datagram goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Inline on the base connection's socket, to the base peer (discovery requests).
    Base,
    /// From the sidekick socket to the proxy's sidekick address.
    Sidekick(SocketAddr),
}

/// A datagram for the client to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTransmit {
    /// Where to send it.
    pub dest: Destination,
    /// The UDP payload.
    pub bytes: Vec<u8>,
}

/// The client session's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Not started.
    Idle,
    /// Discovery request sent, waiting for a reply.
    Discovering,
    /// Reply received, Init sent, waiting for InitAck.
    Initiating,
    /// InitAck received; quACKs / eACKs flow.
    Established,
    /// Closed by either side.
    Closed,
    /// Given up; the application runs end-to-end only.
    Failed,
}

/// Why the client falls back to end-to-end behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallbackReason {
    /// No discovery reply after all attempts: no sidekick proxy on path.
    NoProxy,
    /// No InitAck after all attempts.
    InitTimeout,
    /// The proxy rejected the Init (an `ErrorCode` value).
    Rejected(u32),
    /// Nothing authentic from the proxy for the idle timeout.
    IdleTimeout,
    /// A Config or Reset was never acknowledged.
    ControlTimeout,
    /// The proxy echoed a configuration that is not a clamp of the request
    /// ([`crate::echo::check_echo`]).
    BadEcho(EchoField),
    /// The discovery reply named a sidekick address the client refuses
    /// ([`crate::sidekick_addr::check_sidekick_addr`]).
    SidekickAddr(AddrRefusal),
}

/// What happened, for the application.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    /// Nothing the application must act on.
    Nothing,
    /// A proxy answered discovery; Init is on its way.
    Discovered {
        /// Proxy's sidekick address.
        proxy: SocketAddr,
    },
    /// Handshake complete.
    Established {
        /// Configuration in force (the proxy may have clamped the request).
        config: SessionConfig,
        /// Epoch in force.
        epoch: u32,
    },
    /// A Config was applied by the proxy.
    Reconfigured {
        /// Configuration in force.
        config: SessionConfig,
        /// The epoch it starts.
        epoch: u32,
    },
    /// A Config was refused by the proxy; the old configuration stays.
    ConfigRejected {
        /// The refused request's id.
        config_id: u32,
    },
    /// The proxy started a new epoch (e.g. it failed to decode an eACK, Packrat (CoNEXT '26) §6.1).
    ResetByProxy {
        /// The new epoch.
        epoch: u32,
        /// Its reason code.
        reason: u32,
    },
    /// The proxy acknowledged our Reset.
    ResetAcked {
        /// The epoch now in force on both sides.
        epoch: u32,
    },
    /// A quACK for the current epoch (opaque bytes for the quack crate).
    Quack {
        /// Its epoch (always the current one).
        epoch: u32,
        /// The quACK wire form.
        data: Vec<u8>,
    },
    /// The proxy answered an eACK that reported open gaps: it resent `resent` packets for it
    /// (0: it can repair none of the gaps open before that eACK).
    EackOutcome {
        /// Its epoch (always the current one).
        epoch: u32,
        /// Packets resent.
        resent: u32,
        /// The number the client gave that eACK.
        eack_number: u32,
    },
    /// The proxy reported an error.
    ProxyError {
        /// An `ErrorCode` value.
        code: u32,
        /// Detail text.
        detail: String,
    },
    /// The proxy closed the session.
    Closed {
        /// Its reason code.
        reason: u32,
    },
    /// Give up on the sidekick; continue end-to-end only.
    Fallback(FallbackReason),
}

/// Counters of the client session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Datagrams queued for sending.
    pub sent: u64,
    /// Authentic frames accepted from the proxy.
    pub received: u64,
    /// Frames refused (any error).
    pub rejected: u64,
    /// Outgoing datagrams dropped because the outbox was full.
    pub outbox_dropped: u64,
    /// Retransmissions (discovery, Init, Config, Reset).
    pub retransmissions: u64,
    /// Refresh messages sent.
    pub refreshes: u64,
    /// Echoed configurations refused (not a clamp of the request).
    pub echoes_refused: u64,
    /// Fields of echoed configurations clamped to the request.
    pub echo_fields_clamped: u64,
    /// Discovery replies refused for their sidekick address.
    pub sidekick_addr_refused: u64,
}

//! Message bodies (protobuf, hand-derived with `prost`; no `protoc` needed).
//!
//! The message set follows Sidekick (NSDI '24) §4.1–4.2 (session configuration: quACK interval in ms or
//! packets, threshold t, identifier selection; resets; quota) and Packrat (CoNEXT '26) §6.1 (Init / InitAck
//! negotiation of Robin and Packrat parameters, eACK symbols, cache size, Reset with a new epoch).
//! Unknown protobuf fields are skipped by `prost`, so later versions may add fields freely.

use prost::Message as _;

use crate::error::Error;

/// Capability bit: Robin (quACKs from the proxy to a sender, Sidekick (NSDI '24)).
pub const CAP_ROBIN: u32 = 1;
/// Capability bit: Packrat (eACKs from a receiver, retransmission by the proxy, Packrat (CoNEXT '26)).
pub const CAP_PACKRAT: u32 = 2;
/// All capability bits this version defines.
pub const CAP_ALL: u32 = CAP_ROBIN | CAP_PACKRAT;

/// Largest `Error.detail` string accepted (bytes).
pub const MAX_ERROR_DETAIL: usize = 256;
/// Largest keyed-hash key for identifier hashing (bytes).
pub const MAX_HASH_KEY: usize = 32;

/// How the proxy and the endpoint compute a packet identifier (Sidekick (NSDI '24) §3, docs/architecture.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, prost::Enumeration)]
#[repr(i32)]
pub enum IdentifierMode {
    /// `width` bytes read at `offset` of the UDP payload.
    Offset = 0,
    /// A keyed hash (SipHash with `hash_key`) of the whole UDP payload, truncated to `width`.
    KeyedHash = 1,
}

/// Identifier selection.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IdentifierSpec {
    /// [`IdentifierMode`] as its protobuf integer.
    #[prost(enumeration = "IdentifierMode", tag = "1")]
    pub mode: i32,
    /// Byte offset into the UDP payload; negative counts from the end (−4 = last 4 bytes).
    #[prost(sint32, tag = "2")]
    pub offset: i32,
    /// Identifier width in bytes: 2, 4 or 8.
    #[prost(uint32, tag = "3")]
    pub width: u32,
    /// Key for [`IdentifierMode::KeyedHash`] (16 bytes for SipHash-1-3/2-4); empty otherwise.
    #[prost(bytes = "vec", tag = "4")]
    pub hash_key: Vec<u8>,
}

/// Robin parameters as the session negotiates them on the wire (Sidekick (NSDI '24) §4.2). The
/// proxy runs its quACK engine on its own `RobinEngineConfig` and the client its sender on
/// `RobinSenderConfig`, each derived from these and local settings.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RobinConfig {
    /// Send a quACK every this many milliseconds (0 = not time-driven).
    #[prost(uint32, tag = "1")]
    pub interval_ms: u32,
    /// Send a quACK every this many packets (0 = not count-driven).
    #[prost(uint32, tag = "2")]
    pub interval_packets: u32,
    /// Threshold t: number of power sums, bound on missing packets between quACKs.
    #[prost(uint32, tag = "3")]
    pub threshold: u32,
    /// Also send a quACK at once when a packet arrives after a silence longer than this
    /// percentage of the flow's smoothed packet spacing (0 = off; at least
    /// [`MIN_GAP_PERCENT`] otherwise). A paced media stream's lost packet shows at the proxy
    /// as such a silence, so the quACK that reveals it leaves with the next packet instead of
    /// waiting for the count or the timer: a sparse interval then costs no recovery delay.
    #[prost(uint32, tag = "4")]
    pub quack_on_gap_percent: u32,
}

/// Packrat parameters as the session negotiates them on the wire (Packrat (CoNEXT '26) §5,
/// §6.1). The proxy runs its cache on its own `PackratEngineConfig` and the client its receiver
/// on `PackratReceiverConfig`, each derived from these and local settings.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PackratConfig {
    /// Client sends an eACK every this many milliseconds (0 = not time-driven).
    #[prost(uint32, tag = "1")]
    pub eack_interval_ms: u32,
    /// Client sends an eACK every this many packets (0 = not count-driven).
    #[prost(uint32, tag = "2")]
    pub eack_interval_packets: u32,
    /// Number of coded symbols in each side's local rIBLT encoding.
    #[prost(uint32, tag = "3")]
    pub local_symbols: u32,
    /// Proxy cache capacity in bytes.
    #[prost(uint64, tag = "4")]
    pub cache_capacity_bytes: u64,
    /// Client-side reorder (ACK withholding) delay in milliseconds (Packrat (CoNEXT '26) §4).
    #[prost(uint32, tag = "5")]
    pub reorder_delay_ms: u32,
    /// Multicast assistance (Packrat (CoNEXT '26) §6.1 "Multicast Proxy"): the group address and port the
    /// server sends the base stream to, as 4 (IPv4) or 16 (IPv6) address bytes followed by the
    /// port in network order; empty for a unicast session. The proxy then caches the group's
    /// stream once and keeps this client's eACK and virtual cache (see
    /// [`PackratConfig::multicast_group_addr`]).
    #[prost(bytes = "vec", tag = "6")]
    pub multicast_group: Vec<u8>,
}

impl PackratConfig {
    /// The multicast group this session asks assistance for: `Ok(None)` for a unicast session,
    /// an error for a malformed or non-multicast address.
    pub fn multicast_group_addr(&self) -> Result<Option<std::net::SocketAddr>, ConfigError> {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
        let b = self.multicast_group.as_slice();
        let ip = match b.len() {
            0 => return Ok(None),
            6 => IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
            18 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[..16]);
                IpAddr::V6(Ipv6Addr::from(a))
            }
            n => return Err(ConfigError::BadMulticastGroup(n)),
        };
        if !ip.is_multicast() {
            return Err(ConfigError::BadMulticastGroup(b.len()));
        }
        let port = u16::from_be_bytes([b[b.len() - 2], b[b.len() - 1]]);
        Ok(Some(SocketAddr::new(ip, port)))
    }

    /// Encodes a group address for [`PackratConfig::multicast_group`].
    pub fn encode_multicast_group(group: std::net::SocketAddr) -> Vec<u8> {
        let mut v = match group.ip() {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        };
        v.extend_from_slice(&group.port().to_be_bytes());
        v
    }
}

/// The configuration of one sidekick session: Robin and/or Packrat on the same base connection.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionConfig {
    /// Robin parameters, if Robin is on.
    #[prost(message, optional, tag = "1")]
    pub robin: Option<RobinConfig>,
    /// Packrat parameters, if Packrat is on.
    #[prost(message, optional, tag = "2")]
    pub packrat: Option<PackratConfig>,
    /// Identifier selection shared by both.
    #[prost(message, optional, tag = "3")]
    pub identifier: Option<IdentifierSpec>,
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Neither Robin nor Packrat is enabled.
    #[error("no mode enabled")]
    NoMode,
    /// The identifier spec is missing.
    #[error("identifier spec missing")]
    NoIdentifier,
    /// Identifier width not in {2, 4, 8}.
    #[error("identifier width {0} not in {{2,4,8}}")]
    BadWidth(u32),
    /// Unknown identifier mode number.
    #[error("unknown identifier mode {0}")]
    BadMode(i32),
    /// Keyed-hash mode without a 16-byte key, or a key in offset mode, or a key too long.
    #[error("bad hash key length {0}")]
    BadHashKey(usize),
    /// Offset magnitude beyond the datagram size bound.
    #[error("identifier offset {0} out of range")]
    BadOffset(i32),
    /// Both interval fields are zero.
    #[error("interval must be set in ms or packets")]
    NoInterval,
    /// Threshold zero or too large.
    #[error("threshold {0} out of range")]
    BadThreshold(u32),
    /// A quACK-on-gap percentage below [`MIN_GAP_PERCENT`] (and not 0).
    #[error("quack-on-gap percentage {0} below {MIN_GAP_PERCENT}")]
    BadGapPercent(u32),
    /// Symbol count zero or too large.
    #[error("local symbol count {0} out of range")]
    BadSymbols(u32),
    /// A multicast group that is not 6 or 18 bytes long or not a multicast address.
    #[error("multicast group ({0} bytes) is not a multicast address and port")]
    BadMulticastGroup(usize),
    /// Cache capacity zero.
    #[error("cache capacity must be positive")]
    BadCache,
    /// A mode the peer does not support was requested.
    #[error("mode not supported by the peer")]
    Unsupported,
    /// An identifier width (bytes) the peer does not support.
    #[error("identifier width {0} not supported by the peer")]
    UnsupportedWidth(u32),
}

/// Upper bound on t accepted on the wire (the quack crate decodes far smaller in practice).
pub const MAX_THRESHOLD: u32 = 1024;
/// Smallest non-zero [`RobinConfig::quack_on_gap_percent`]: below it ordinary jitter would
/// trigger a quACK with nearly every packet.
pub const MIN_GAP_PERCENT: u32 = 110;
/// Upper bound on local symbols accepted on the wire.
pub const MAX_SYMBOLS: u32 = 65_536;
/// Upper bound on |offset| (a UDP payload never exceeds 65 535 bytes).
pub const MAX_OFFSET: i32 = 65_535;

impl IdentifierSpec {
    /// The default for QUIC: the last 4 bytes of the datagram (docs/architecture.md).
    pub fn quic_default() -> Self {
        IdentifierSpec {
            mode: IdentifierMode::Offset as i32,
            offset: -4,
            width: 4,
            hash_key: Vec::new(),
        }
    }

    /// Checks the spec's constraints.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(self.width, 2 | 4 | 8) {
            return Err(ConfigError::BadWidth(self.width));
        }
        match IdentifierMode::try_from(self.mode) {
            Ok(IdentifierMode::Offset) => {
                if !self.hash_key.is_empty() {
                    return Err(ConfigError::BadHashKey(self.hash_key.len()));
                }
                if self.offset.unsigned_abs() > MAX_OFFSET as u32 {
                    return Err(ConfigError::BadOffset(self.offset));
                }
            }
            Ok(IdentifierMode::KeyedHash) => {
                if self.hash_key.len() != 16 {
                    return Err(ConfigError::BadHashKey(self.hash_key.len()));
                }
            }
            Err(_) => return Err(ConfigError::BadMode(self.mode)),
        }
        Ok(())
    }
}

impl SessionConfig {
    /// Capability bits this configuration uses.
    pub fn capabilities(&self) -> u32 {
        let mut c = 0;
        if self.robin.is_some() {
            c |= CAP_ROBIN;
        }
        if self.packrat.is_some() {
            c |= CAP_PACKRAT;
        }
        c
    }

    /// Checks every constraint of the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.robin.is_none() && self.packrat.is_none() {
            return Err(ConfigError::NoMode);
        }
        self.identifier
            .as_ref()
            .ok_or(ConfigError::NoIdentifier)?
            .validate()?;
        if let Some(r) = &self.robin {
            if r.interval_ms == 0 && r.interval_packets == 0 {
                return Err(ConfigError::NoInterval);
            }
            if r.threshold == 0 || r.threshold > MAX_THRESHOLD {
                return Err(ConfigError::BadThreshold(r.threshold));
            }
            if r.quack_on_gap_percent != 0 && r.quack_on_gap_percent < MIN_GAP_PERCENT {
                return Err(ConfigError::BadGapPercent(r.quack_on_gap_percent));
            }
        }
        if let Some(p) = &self.packrat {
            if p.eack_interval_ms == 0 && p.eack_interval_packets == 0 {
                return Err(ConfigError::NoInterval);
            }
            if p.local_symbols == 0 || p.local_symbols > MAX_SYMBOLS {
                return Err(ConfigError::BadSymbols(p.local_symbols));
            }
            if p.cache_capacity_bytes == 0 {
                return Err(ConfigError::BadCache);
            }
            p.multicast_group_addr()?;
        }
        Ok(())
    }
}

/// Client → proxy: request assistance with a configuration (Packrat (CoNEXT '26) §6.1 "Init").
#[derive(Clone, PartialEq, prost::Message)]
pub struct Init {
    /// Capability bits the client wants (`CAP_*`).
    #[prost(uint32, tag = "1")]
    pub capabilities: u32,
    /// Requested configuration.
    #[prost(message, optional, tag = "2")]
    pub config: Option<SessionConfig>,
}

/// Proxy → client: accept (with the configuration chosen, possibly clamped) or reject.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InitAck {
    /// Whether the proxy accepts assistance.
    #[prost(bool, tag = "1")]
    pub accepted: bool,
    /// Capability bits the proxy supports.
    #[prost(uint32, tag = "2")]
    pub capabilities: u32,
    /// Configuration in force (the request clamped to the proxy's limits).
    #[prost(message, optional, tag = "3")]
    pub config: Option<SessionConfig>,
    /// Path-validation token the client must echo in a Refresh (see `docs/protocol.md` §6).
    #[prost(fixed64, tag = "4")]
    pub path_challenge: u64,
    /// Epoch in force.
    #[prost(uint32, tag = "5")]
    pub epoch: u32,
    /// Error code when rejected (see [`ErrorCode`]).
    #[prost(uint32, tag = "6")]
    pub reject_code: u32,
}

/// Client → proxy: change the configuration; proxy → client: the same id echoed as applied.
/// An accepted Config starts a new epoch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Config {
    /// Identifies the request; the echo carries the same id.
    #[prost(uint32, tag = "1")]
    pub config_id: u32,
    /// Requested (client) or applied (proxy) configuration.
    #[prost(message, optional, tag = "2")]
    pub config: Option<SessionConfig>,
    /// In the echo: whether it was applied.
    #[prost(bool, tag = "3")]
    pub accepted: bool,
    /// In the echo: epoch that starts with the new configuration.
    #[prost(uint32, tag = "4")]
    pub epoch: u32,
}

/// Either side: start epoch `epoch` (Sidekick (NSDI '24) §4.2 "Resets", Packrat (CoNEXT '26) §6.1 "Resetting").
/// The receiver adopts a newer epoch and echoes the same Reset; an equal epoch is an echo.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Reset {
    /// The new epoch.
    #[prost(uint32, tag = "1")]
    pub epoch: u32,
    /// Why (an [`ErrorCode`] value, 0 = requested).
    #[prost(uint32, tag = "2")]
    pub reason: u32,
}

/// Proxy → client: a quACK for the current epoch; the bytes are the quack crate's wire form.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Quack {
    /// Epoch the quACK belongs to.
    #[prost(uint32, tag = "1")]
    pub epoch: u32,
    /// Opaque quACK wire form.
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
}

/// Client → proxy: an eACK for the current epoch; the bytes are the eack crate's wire form.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Eack {
    /// Epoch the eACK belongs to.
    #[prost(uint32, tag = "1")]
    pub epoch: u32,
    /// Opaque eACK wire form.
    #[prost(bytes = "vec", tag = "2")]
    pub data: Vec<u8>,
    /// Packet-number gaps the client held open when it sent this eACK (0 when none, and from
    /// clients that do not say). A proxy that can repair none of them answers with an
    /// [`EackOutcome`], so the client stops holding for them.
    #[prost(uint32, tag = "3")]
    pub open_gaps: u32,
    /// The client's number for this eACK, echoed by the [`EackOutcome`] that answers it.
    #[prost(uint32, tag = "4")]
    pub number: u32,
}

/// Proxy → client: the answer to an eACK that reported open gaps, when the proxy resent nothing
/// for it: every packet it forwarded before the newest one the eACK acknowledges had arrived, so
/// the client's gaps before that eACK are not the proxy's to repair (packet numbers the sender
/// skipped on purpose, RFC 9000 §21.4, or losses before the proxy). Holding on costs the sender's
/// feedback delay and gains nothing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EackOutcome {
    /// Epoch of the eACK.
    #[prost(uint32, tag = "1")]
    pub epoch: u32,
    /// Packets the proxy resent for that eACK (0 in every outcome sent today).
    #[prost(uint32, tag = "2")]
    pub resent: u32,
    /// The answered eACK's [`Eack::number`]: the client's gaps opened before it sent that eACK
    /// are the ones the outcome is about.
    #[prost(uint32, tag = "3")]
    pub eack_number: u32,
}

/// Either side: tear the session down. Not acknowledged.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Close {
    /// An [`ErrorCode`] value (0 = normal close).
    #[prost(uint32, tag = "1")]
    pub reason: u32,
}

/// Either side: report a problem.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorMsg {
    /// An [`ErrorCode`] value.
    #[prost(uint32, tag = "1")]
    pub code: u32,
    /// Human-readable detail, at most [`MAX_ERROR_DETAIL`] bytes.
    #[prost(string, tag = "2")]
    pub detail: String,
}

/// Client → proxy: raise the quota, keep the session alive, answer a path challenge.
/// Proxy → client: the answer to a Refresh with `want_reply` (a keepalive).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Refresh {
    /// Echo of the latest path challenge (0 = none).
    #[prost(fixed64, tag = "1")]
    pub path_response: u64,
    /// Ask the proxy to answer with a Refresh (costs one message of quota).
    #[prost(bool, tag = "2")]
    pub want_reply: bool,
}

/// Proxy → client: validate a new client address (after NAT rebinding).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Challenge {
    /// Token to echo in `Refresh.path_response`.
    #[prost(fixed64, tag = "1")]
    pub token: u64,
}

/// Error and close codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    /// No error / requested by the application.
    None = 0,
    /// The proxy has no room for another session.
    Busy = 1,
    /// The requested configuration is invalid or unsupported.
    BadConfig = 2,
    /// The proxy could not decode an eACK / the client could not decode a quACK.
    DecodeFailure = 3,
    /// The session timed out.
    IdleTimeout = 4,
    /// A protocol rule was broken.
    ProtocolViolation = 5,
}

impl ErrorCode {
    /// From the wire value; unknown values map to `None` of this function.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => ErrorCode::None,
            1 => ErrorCode::Busy,
            2 => ErrorCode::BadConfig,
            3 => ErrorCode::DecodeFailure,
            4 => ErrorCode::IdleTimeout,
            5 => ErrorCode::ProtocolViolation,
            _ => return None,
        })
    }
}

/// Message type byte values (frame header offset 3).
pub mod msg_type {
    /// [`super::Init`]
    pub const INIT: u8 = 1;
    /// [`super::InitAck`]
    pub const INIT_ACK: u8 = 2;
    /// [`super::Config`]
    pub const CONFIG: u8 = 3;
    /// [`super::Reset`]
    pub const RESET: u8 = 4;
    /// [`super::Quack`]
    pub const QUACK: u8 = 5;
    /// [`super::Eack`]
    pub const EACK: u8 = 6;
    /// [`super::Close`]
    pub const CLOSE: u8 = 7;
    /// [`super::ErrorMsg`]
    pub const ERROR: u8 = 8;
    /// [`super::Refresh`]
    pub const REFRESH: u8 = 9;
    /// [`super::Challenge`]
    pub const CHALLENGE: u8 = 10;
    /// [`super::EackOutcome`]
    pub const EACK_OUTCOME: u8 = 11;
}

/// Any sidekick message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// See [`Init`].
    Init(Init),
    /// See [`InitAck`].
    InitAck(InitAck),
    /// See [`Config`].
    Config(Config),
    /// See [`Reset`].
    Reset(Reset),
    /// See [`Quack`].
    Quack(Quack),
    /// See [`Eack`].
    Eack(Eack),
    /// See [`Close`].
    Close(Close),
    /// See [`ErrorMsg`].
    Error(ErrorMsg),
    /// See [`Refresh`].
    Refresh(Refresh),
    /// See [`Challenge`].
    Challenge(Challenge),
    /// See [`EackOutcome`].
    EackOutcome(EackOutcome),
}

/// Which way a sidekick frame goes between client and proxy (who may send a message type).
/// Not the direction of a base-connection packet: that is the proxy's `engine::Direction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameDirection {
    /// From the client to the proxy.
    ClientToProxy,
    /// From the proxy to the client.
    ProxyToClient,
}

impl Message {
    /// The type byte.
    pub fn msg_type(&self) -> u8 {
        use msg_type as t;
        match self {
            Message::Init(_) => t::INIT,
            Message::InitAck(_) => t::INIT_ACK,
            Message::Config(_) => t::CONFIG,
            Message::Reset(_) => t::RESET,
            Message::Quack(_) => t::QUACK,
            Message::Eack(_) => t::EACK,
            Message::Close(_) => t::CLOSE,
            Message::Error(_) => t::ERROR,
            Message::Refresh(_) => t::REFRESH,
            Message::Challenge(_) => t::CHALLENGE,
            Message::EackOutcome(_) => t::EACK_OUTCOME,
        }
    }

    /// Whether `ty` may travel in direction `dir`.
    pub fn allowed(ty: u8, dir: FrameDirection) -> bool {
        use msg_type as t;
        match ty {
            t::INIT | t::EACK => dir == FrameDirection::ClientToProxy,
            t::INIT_ACK | t::QUACK | t::CHALLENGE | t::EACK_OUTCOME => {
                dir == FrameDirection::ProxyToClient
            }
            t::CONFIG | t::RESET | t::CLOSE | t::ERROR | t::REFRESH => true,
            _ => false,
        }
    }

    /// Protobuf encoding of the body.
    pub fn encode_body(&self) -> Vec<u8> {
        match self {
            Message::Init(m) => m.encode_to_vec(),
            Message::InitAck(m) => m.encode_to_vec(),
            Message::Config(m) => m.encode_to_vec(),
            Message::Reset(m) => m.encode_to_vec(),
            Message::Quack(m) => m.encode_to_vec(),
            Message::Eack(m) => m.encode_to_vec(),
            Message::Close(m) => m.encode_to_vec(),
            Message::Error(m) => m.encode_to_vec(),
            Message::Refresh(m) => m.encode_to_vec(),
            Message::Challenge(m) => m.encode_to_vec(),
            Message::EackOutcome(m) => m.encode_to_vec(),
        }
    }

    /// Decodes a body of type `ty` and checks its semantic constraints.
    pub fn decode_body(ty: u8, body: &[u8]) -> Result<Message, Error> {
        use msg_type as t;
        let m = match ty {
            t::INIT => Message::Init(Init::decode(body)?),
            t::INIT_ACK => Message::InitAck(InitAck::decode(body)?),
            t::CONFIG => Message::Config(Config::decode(body)?),
            t::RESET => Message::Reset(Reset::decode(body)?),
            t::QUACK => Message::Quack(Quack::decode(body)?),
            t::EACK => Message::Eack(Eack::decode(body)?),
            t::CLOSE => Message::Close(Close::decode(body)?),
            t::ERROR => Message::Error(ErrorMsg::decode(body)?),
            t::REFRESH => Message::Refresh(Refresh::decode(body)?),
            t::CHALLENGE => Message::Challenge(Challenge::decode(body)?),
            t::EACK_OUTCOME => Message::EackOutcome(EackOutcome::decode(body)?),
            other => return Err(Error::UnknownMessageType(other)),
        };
        m.validate()?;
        Ok(m)
    }

    /// Semantic checks beyond protobuf well-formedness.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            Message::Init(m) => {
                m.config.as_ref().ok_or(ConfigError::NoMode)?.validate()?;
            }
            Message::InitAck(m) if m.accepted => {
                m.config.as_ref().ok_or(ConfigError::NoMode)?.validate()?;
            }
            Message::Config(m) => {
                m.config.as_ref().ok_or(ConfigError::NoMode)?.validate()?;
            }
            Message::Error(m) if m.detail.len() > MAX_ERROR_DETAIL => {
                return Err(Error::Oversized {
                    len: m.detail.len(),
                    max: MAX_ERROR_DETAIL,
                });
            }
            _ => {}
        }
        Ok(())
    }
}

/// Fuzz body: decode an arbitrary body under every type byte; must never panic.
pub fn fuzz_decode_body(data: &[u8]) {
    if let Some((&ty, body)) = data.split_first()
        && let Ok(m) = Message::decode_body(ty, body)
    {
        // Re-encoding a decoded message must decode to the same message.
        let again = Message::decode_body(m.msg_type(), &m.encode_body());
        assert_eq!(again.as_ref(), Ok(&m));
    }
}

#[cfg(test)]
#[path = "messages_tests.rs"]
mod tests;

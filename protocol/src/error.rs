//! Typed errors of the sidekick protocol.

use crate::messages::ConfigError;

/// Everything that can go wrong while decoding, authenticating or emitting a sidekick message.
///
/// Every decoder of wire input returns one of these instead of panicking; the variants are
/// specific enough for tests and counters to tell the failure modes apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The datagram is shorter than the fixed part it must contain.
    #[error("truncated datagram: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the layout requires.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// The datagram or the message body exceeds the protocol's size bound.
    #[error("oversized: {len} bytes exceeds the limit of {max}")]
    Oversized {
        /// Actual length.
        len: usize,
        /// Maximum allowed.
        max: usize,
    },
    /// The datagram does not start with the sidekick frame magic.
    #[error("not a sidekick frame (bad magic)")]
    BadMagic,
    /// The header's length field disagrees with the datagram length.
    #[error("length mismatch: header says {declared} body bytes, datagram carries {actual}")]
    LengthMismatch {
        /// Body length declared in the header.
        declared: usize,
        /// Body length actually present.
        actual: usize,
    },
    /// The version byte names a protocol version this implementation does not speak.
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// The message type byte is not known to this version.
    #[error("unknown message type {0}")]
    UnknownMessageType(u8),
    /// The message type is known but not allowed in this direction (e.g. a Quack sent to a proxy).
    #[error("message type {0} not allowed in this direction")]
    WrongDirection(u8),
    /// The authentication tag does not verify under the session key.
    #[error("authentication failed (bad MAC)")]
    BadMac,
    /// The sequence number was already seen or lies left of the replay window.
    #[error("replayed or too old sequence number {0}")]
    Replayed(u64),
    /// The message refers to an epoch older than the current one.
    #[error("stale epoch {got} (current {current})")]
    StaleEpoch {
        /// Epoch in the message.
        got: u32,
        /// Epoch currently in force.
        current: u32,
    },
    /// The message refers to an epoch the receiver has not entered yet (its Reset or Config
    /// echo was lost or reordered); dropped, the sender's Reset retries resynchronise.
    #[error("epoch {got} ahead of current {current}")]
    EpochAhead {
        /// Epoch in the message.
        got: u32,
        /// Epoch currently in force.
        current: u32,
    },
    /// A sidekick frame came from an address other than the proxy's sidekick address.
    #[error("frame from unexpected source address")]
    UnexpectedSource,
    /// The session id is not known (never issued, expired, evicted or closed).
    #[error("unknown session")]
    UnknownSession,
    /// The protobuf body could not be decoded.
    #[error("malformed message body: {0}")]
    Decode(String),
    /// A decoded configuration violates the protocol's constraints.
    #[error("invalid configuration: {0}")]
    InvalidConfig(#[from] ConfigError),
    /// A discovery reply did not match the outstanding request (nonce, key confirmation).
    #[error("discovery reply does not match the outstanding request")]
    DiscoveryMismatch,
    /// The proxy has used up the quota of messages the client authorised.
    #[error("quota exhausted: the client has not authorised further messages")]
    QuotaExhausted,
    /// Sending would exceed the anti-amplification limit towards an unverified address.
    #[error("anti-amplification limit reached for an unverified address")]
    AmplificationLimit,
    /// The operation is not valid in the session's current state.
    #[error("invalid in state {0}")]
    InvalidState(&'static str),
    /// Discovery processing was refused by the rate limiter.
    #[error("discovery rate limit exceeded")]
    RateLimited,
    /// A frame for a session came from another station (IP address) than its base flow's
    /// client.
    #[error("frame from another station than the session's base flow")]
    StationMismatch,
    /// A discovery reply named a sidekick address the client refuses to send to.
    #[error("refused sidekick address: {0}")]
    RefusedSidekickAddr(crate::sidekick_addr::AddrRefusal),
    /// A proxy policy value outside its documented range.
    #[error("{0}")]
    Policy(#[from] crate::proxy::PolicyError),
    /// A cryptographic primitive failed (key agreement with an invalid public key, RNG failure).
    #[error("cryptographic failure")]
    Crypto,
}

impl From<prost::DecodeError> for Error {
    fn from(e: prost::DecodeError) -> Self {
        Error::Decode(e.to_string())
    }
}

impl From<ring::error::Unspecified> for Error {
    fn from(_: ring::error::Unspecified) -> Self {
        Error::Crypto
    }
}

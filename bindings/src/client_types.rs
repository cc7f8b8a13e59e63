//! Plain C types of the client session API: the session configuration, events, counters.

use sidekick_protocol::FallbackReason;
use sidekick_protocol::messages::{
    IdentifierMode, IdentifierSpec, PackratConfig, RobinConfig, SessionConfig,
};
use sidekick_sdk::session::FallbackCause;

use crate::ffi::SkStatus;
use crate::robin::{SkIdentifier, SkLossRule};

/// `SkSessionConfig::eack_inflight_allowance` of `sk_session_config_packrat`: the allowance the
/// examples use for downloads (`sidekick-transfer --sidekick-eack-inflight`'s default).
pub(crate) const DEFAULT_EACK_INFLIGHT_ALLOWANCE: u32 = 16;

/// The session configuration requested from the proxy in Init (Sidekick (NSDI '24) §4.1, Packrat (CoNEXT '26) §6.1).
/// Fill with `sk_session_config_robin`, `sk_session_config_packrat` or
/// `sk_session_config_robin_and_packrat` (both on one session) and adjust.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkSessionConfig {
    /// Non-zero: request Robin (quACKs for uploads).
    pub robin: u8,
    /// Robin: a quACK every this many milliseconds (0: not time-driven).
    pub quack_interval_ms: u32,
    /// Robin: a quACK every this many packets (0: not count-driven).
    pub quack_interval_packets: u32,
    /// Robin: threshold `t` (1..=1024).
    pub quack_threshold: u32,
    /// Robin: also a quACK at once when a packet follows a silence longer than this percentage
    /// of the flow's packet spacing — the packet after a loss in a paced media stream (0: off;
    /// otherwise at least 110).
    pub quack_on_gap_percent: u32,
    /// Non-zero: request Packrat (eACKs and proxy retransmissions for downloads).
    pub packrat: u8,
    /// Packrat: an eACK every this many milliseconds (0: not time-driven).
    pub eack_interval_ms: u32,
    /// Packrat: an eACK every this many packets (0: not count-driven).
    pub eack_interval_packets: u32,
    /// Packrat: local eACK coded symbols.
    pub local_symbols: u32,
    /// Packrat: the proxy's cache capacity in bytes.
    pub cache_capacity_bytes: u64,
    /// Packrat: the reorder (ACK-withholding) window in milliseconds.
    pub reorder_delay_ms: u32,
    /// How the proxy and the client read identifiers (4 bytes wide).
    pub identifier: SkIdentifier,
    /// Packrat, client side only (not sent to the proxy): packets added to the open gaps when
    /// sizing an eACK. The proxy's view includes packets it forwarded that had not reached the
    /// client when the eACK was built; an eACK sized for the gaps alone fails to decode there
    /// and the proxy resets the epoch (too many resets end the session).
    /// `sk_session_config_packrat` sets 16.
    pub eack_inflight_allowance: u32,
    /// Packrat for a multicast stream (Packrat (CoNEXT '26) §6.1): 0 for a unicast session, 4
    /// for an IPv4 group, 6 for an IPv6 group. Set with `sk_session_config_set_multicast_group`.
    pub multicast_family: u8,
    /// The group's address: the first 4 bytes (IPv4) or all 16 (IPv6), network order.
    pub multicast_addr: [u8; 16],
    /// The group's UDP port.
    pub multicast_port: u16,
}

impl SkSessionConfig {
    /// The multicast group of the configuration (`None`: unicast).
    pub(crate) fn multicast_group(&self) -> Result<Option<std::net::SocketAddr>, SkStatus> {
        let ip: std::net::IpAddr = match self.multicast_family {
            0 => return Ok(None),
            4 => {
                let mut a = [0u8; 4];
                a.copy_from_slice(&self.multicast_addr[..4]);
                std::net::Ipv4Addr::from(a).into()
            }
            6 => std::net::Ipv6Addr::from(self.multicast_addr).into(),
            _ => return Err(SkStatus::InvalidArgument),
        };
        if !ip.is_multicast() {
            return Err(SkStatus::InvalidArgument);
        }
        Ok(Some(std::net::SocketAddr::new(ip, self.multicast_port)))
    }

    /// Sets (`Some`) or clears the multicast group.
    pub(crate) fn set_multicast_group(&mut self, group: Option<std::net::SocketAddr>) {
        self.multicast_addr = [0; 16];
        self.multicast_port = group.map_or(0, |g| g.port());
        self.multicast_family = match group.map(|g| g.ip()) {
            None => 0,
            Some(std::net::IpAddr::V4(a)) => {
                self.multicast_addr[..4].copy_from_slice(&a.octets());
                4
            }
            Some(std::net::IpAddr::V6(a)) => {
                self.multicast_addr = a.octets();
                6
            }
        };
    }
}

impl SkSessionConfig {
    /// The configuration with the defaults of the C API for fields the protocol does not carry.
    pub(crate) fn from_rust(s: &SessionConfig) -> Self {
        let r = s.robin.clone().unwrap_or_default();
        let p = s.packrat.clone().unwrap_or_default();
        let identifier = match &s.identifier {
            Some(i) if i.mode == IdentifierMode::KeyedHash as i32 => {
                let mut key = [0u8; 16];
                let n = i.hash_key.len().min(16);
                key[..n].copy_from_slice(&i.hash_key[..n]);
                SkIdentifier {
                    mode: 1,
                    width: i.width as u8,
                    offset: 0,
                    hash_key: key,
                }
            }
            Some(i) => SkIdentifier {
                offset: i.offset,
                width: i.width as u8,
                ..SkIdentifier::quic_default()
            },
            None => SkIdentifier::quic_default(),
        };
        let mut c = Self {
            robin: u8::from(s.robin.is_some()),
            quack_interval_ms: r.interval_ms,
            quack_interval_packets: r.interval_packets,
            quack_threshold: r.threshold,
            quack_on_gap_percent: r.quack_on_gap_percent,
            packrat: u8::from(s.packrat.is_some()),
            eack_interval_ms: p.eack_interval_ms,
            eack_interval_packets: p.eack_interval_packets,
            local_symbols: p.local_symbols,
            cache_capacity_bytes: p.cache_capacity_bytes,
            reorder_delay_ms: p.reorder_delay_ms,
            identifier,
            eack_inflight_allowance: if s.packrat.is_some() {
                DEFAULT_EACK_INFLIGHT_ALLOWANCE
            } else {
                0
            },
            multicast_family: 0,
            multicast_addr: [0; 16],
            multicast_port: 0,
        };
        c.set_multicast_group(p.multicast_group_addr().ok().flatten());
        c
    }

    pub(crate) fn to_rust(self) -> Result<SessionConfig, SkStatus> {
        let width = self.identifier.width()?.bytes() as u32;
        let identifier = match self.identifier.mode {
            0 => IdentifierSpec {
                offset: self.identifier.offset,
                width,
                ..IdentifierSpec::quic_default()
            },
            1 => IdentifierSpec {
                mode: IdentifierMode::KeyedHash as i32,
                offset: 0,
                width,
                hash_key: self.identifier.hash_key.to_vec(),
            },
            _ => return Err(SkStatus::InvalidArgument),
        };
        let s = SessionConfig {
            robin: (self.robin != 0).then_some(RobinConfig {
                interval_ms: self.quack_interval_ms,
                interval_packets: self.quack_interval_packets,
                threshold: self.quack_threshold,
                quack_on_gap_percent: self.quack_on_gap_percent,
            }),
            packrat: (self.packrat != 0).then_some(PackratConfig {
                eack_interval_ms: self.eack_interval_ms,
                eack_interval_packets: self.eack_interval_packets,
                local_symbols: self.local_symbols,
                cache_capacity_bytes: self.cache_capacity_bytes,
                reorder_delay_ms: self.reorder_delay_ms,
                multicast_group: self
                    .multicast_group()?
                    .map(PackratConfig::encode_multicast_group)
                    .unwrap_or_default(),
            }),
            identifier: Some(identifier),
        };
        s.validate().map_err(|_| SkStatus::InvalidArgument)?;
        Ok(s)
    }
}

/// Where a datagram from `sk_client_poll_transmit` goes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkDestination {
    /// On the base (QUIC) socket to the base peer: discovery requests, early retransmissions.
    Base = 0,
    /// On the sidekick socket to the proxy address written alongside.
    Sidekick = 1,
}

/// Why the client stopped using the sidekick.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkFallbackCause {
    /// Not fallen back.
    None = 0,
    /// No discovery reply: no sidekick proxy on the path.
    NoProxy = 1,
    /// No InitAck after all attempts.
    InitTimeout = 2,
    /// The proxy rejected the Init (`fallback_detail` has its error code).
    Rejected = 3,
    /// Nothing authentic from the proxy for the idle timeout.
    IdleTimeout = 4,
    /// A Config or Reset was never acknowledged.
    ControlTimeout = 5,
    /// The proxy closed the session.
    ClosedByProxy = 6,
    /// Too many inconsistent quACKs.
    InconsistentQuacks = 7,
    /// A quACK claimed receipts of packets never sent.
    NeverSent = 8,
    /// The proxy sent beyond the quota the client granted.
    OverQuota = 9,
    /// The proxy reset the epoch too often.
    TooManyResets = 10,
    /// The application asked for it (`sk_client_fall_back`).
    Application = 11,
    /// The proxy echoed a configuration that is not a clamp of the request.
    BadEcho = 12,
    /// The discovery reply named a sidekick address the client refuses (loopback, multicast,
    /// unspecified, broadcast, or one of this host's addresses).
    SidekickAddrRefused = 13,
    /// Holds (ACK withholding) were rarely repaired by the proxy.
    HoldsUnrepaired = 14,
    /// Early resends on the proxy's loss reports were mostly unneeded.
    ResendsUnneeded = 15,
}

pub(crate) fn fallback_to_c(c: FallbackCause) -> (SkFallbackCause, u32) {
    match c {
        FallbackCause::Protocol(r) => match r {
            FallbackReason::NoProxy => (SkFallbackCause::NoProxy, 0),
            FallbackReason::InitTimeout => (SkFallbackCause::InitTimeout, 0),
            FallbackReason::Rejected(code) => (SkFallbackCause::Rejected, code),
            FallbackReason::IdleTimeout => (SkFallbackCause::IdleTimeout, 0),
            FallbackReason::ControlTimeout => (SkFallbackCause::ControlTimeout, 0),
            FallbackReason::BadEcho(_) => (SkFallbackCause::BadEcho, 0),
            FallbackReason::SidekickAddr(_) => (SkFallbackCause::SidekickAddrRefused, 0),
        },
        FallbackCause::ClosedByProxy => (SkFallbackCause::ClosedByProxy, 0),
        FallbackCause::InconsistentQuacks => (SkFallbackCause::InconsistentQuacks, 0),
        FallbackCause::NeverSent => (SkFallbackCause::NeverSent, 0),
        FallbackCause::OverQuota => (SkFallbackCause::OverQuota, 0),
        FallbackCause::TooManyResets => (SkFallbackCause::TooManyResets, 0),
        FallbackCause::Application => (SkFallbackCause::Application, 0),
        FallbackCause::HoldsUnrepaired => (SkFallbackCause::HoldsUnrepaired, 0),
        FallbackCause::ResendsUnneeded => (SkFallbackCause::ResendsUnneeded, 0),
    }
}

/// Kind of a session event.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkClientEventKind {
    /// The sidekick session is up.
    Established = 1,
    /// A datagram was lost on the near segment: a quACK congestion event for PACUBIC.
    NearLoss = 2,
    /// The proxy received `delivered_bytes` more.
    Delivered = 3,
    /// The client fell back to plain end-to-end behaviour (`fallback_cause`).
    Fallback = 4,
    /// Robin stopped on its own in a session running both engines (`fallback_cause`: why);
    /// Packrat goes on. No more `NEAR_LOSS` or `DELIVERED` events: PACUBIC acts as CUBIC again.
    RobinDropped = 5,
    /// Packrat stopped on its own in a session running both engines (`fallback_cause`: why);
    /// Robin goes on.
    PackratDropped = 6,
}

/// One session event; fields not meaningful for the kind are zero (`packet_number` -1).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkClientEvent {
    /// What happened.
    pub kind: SkClientEventKind,
    /// `NEAR_LOSS`: the datagram's identifier (zero-extended from its width).
    pub id: u64,
    /// `NEAR_LOSS`: its QUIC packet number, -1 if unknown.
    pub packet_number: i64,
    /// `NEAR_LOSS`: when it was sent (caller's microseconds).
    pub sent_us: u64,
    /// `NEAR_LOSS`: its size in bytes.
    pub len: usize,
    /// `NEAR_LOSS`: which rule.
    pub rule: SkLossRule,
    /// `DELIVERED`: bytes newly confirmed received by the proxy.
    pub delivered_bytes: u64,
    /// `DELIVERED`: send time of the newest of them (caller's microseconds).
    pub newest_sent_us: u64,
    /// `FALLBACK`, `ROBIN_DROPPED`, `PACKRAT_DROPPED`: why.
    pub fallback_cause: SkFallbackCause,
    /// `FALLBACK` with `REJECTED`: the proxy's error code.
    pub fallback_detail: u32,
}

impl SkClientEvent {
    pub(crate) fn empty(kind: SkClientEventKind) -> Self {
        Self {
            kind,
            id: 0,
            packet_number: -1,
            sent_us: 0,
            len: 0,
            rule: SkLossRule::None,
            delivered_bytes: 0,
            newest_sent_us: 0,
            fallback_cause: SkFallbackCause::None,
            fallback_detail: 0,
        }
    }
}

/// Session counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkClientStats {
    /// quACKs handed to Robin.
    pub quacks: u64,
    /// Of which inconsistent.
    pub inconsistent_quacks: u64,
    /// Of which stale.
    pub stale_quacks: u64,
    /// eACKs sent.
    pub eacks_sent: u64,
    /// Resets the client requested.
    pub resets_requested: u64,
    /// Resets started by the proxy.
    pub resets_by_proxy: u64,
    /// Frames from the proxy over quota.
    pub over_quota: u64,
    /// Sidekick datagrams refused (forged MACs, replays, wrong source…).
    pub rejected_frames: u64,
    /// Early retransmissions queued on the base socket.
    pub retransmissions: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
    /// Reconfigurations the proxy accepted (`sk_client_reconfigure`).
    pub reconfigurations: u64,
    /// Reconfigurations the proxy refused (the session kept its configuration).
    pub reconfigurations_refused: u64,
}

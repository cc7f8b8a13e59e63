//! The client's public types: its settings, why it fell back, what it asks the adapter to send,
//! its events and counters (re-exported by [`crate::session`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sidekick_protocol::messages::{IdentifierSpec, SessionConfig};
use sidekick_protocol::{ClientConfig, FallbackReason};

use crate::packrat::PackratReceiverConfig;
use crate::robin::{LostDatagram, RobinSenderConfig};

/// Why the client stopped using the sidekick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackCause {
    /// The protocol gave up (no proxy, Init timeout, rejected, idle, control timeout).
    Protocol(FallbackReason),
    /// The proxy closed the session.
    ClosedByProxy,
    /// Too many inconsistent quACKs (forged, undecodable, unknown elements).
    InconsistentQuacks,
    /// A quACK claimed receipts of packets never sent.
    NeverSent,
    /// The proxy sent beyond the quota the client granted.
    OverQuota,
    /// The proxy reset the epoch too often (its eACK decodes keep failing).
    TooManyResets,
    /// The application asked for it.
    Application,
    /// Holds (ACK withholding) were rarely repaired: the proxy does not retransmit what the
    /// client waits for, so each hold only delayed the sender's feedback.
    HoldsUnrepaired,
    /// Early resends on the proxy's loss reports were mostly unneeded: the receiver had the
    /// originals (end-to-end ACKs came back sooner than a resend could travel).
    ResendsUnneeded,
}

/// Settings of the client.
#[derive(Debug, Clone)]
pub struct SidekickConfig {
    /// Protocol settings (the session configuration requested in Init lives inside).
    pub protocol: ClientConfig,
    /// Robin engine settings (threshold and interval are overwritten by the negotiated ones).
    pub robin: RobinSenderConfig,
    /// Packrat engine settings (symbols, interval, reorder window overwritten likewise).
    pub packrat: PackratReceiverConfig,
    /// Inconsistent quACKs tolerated before falling back.
    pub max_inconsistent_quacks: u32,
    /// Proxy resets tolerated per `reset_window` before falling back.
    pub max_resets: u32,
    /// Window for `max_resets`.
    pub reset_window: Duration,
    /// Gaps (holds) resolved per assessment of their worth; 0 disables it.
    pub hold_assessment_gaps: u64,
    /// Fall back when fewer than this fraction of an assessment's gaps were repaired (filled
    /// before the hold expired).
    pub min_repaired_fraction: f64,
    /// Early resends settled by end-to-end ACKs per assessment of their worth; 0 disables it.
    pub resend_assessment: u64,
    /// Fall back when at least this fraction of an assessment's resends were unneeded.
    pub max_unneeded_fraction: f64,
}

impl SidekickConfig {
    /// Robin only: quACKs every `interval_ms` with threshold `t` (Sidekick (NSDI '24) Table 5).
    pub fn robin(interval_ms: u32, threshold: u32) -> Self {
        let session = SessionConfig {
            robin: Some(sidekick_protocol::messages::RobinConfig {
                interval_ms,
                interval_packets: 0,
                threshold,
                quack_on_gap_percent: 0,
            }),
            packrat: None,
            identifier: Some(IdentifierSpec::quic_default()),
        };
        Self::with_session(session)
    }

    /// Packrat only, with the WiFi defaults of Packrat (CoNEXT '26) (eACK every 10 ms / 16 packets, 160
    /// symbols, 48 kB cache, 30 ms reorder window).
    pub fn packrat() -> Self {
        let session = SessionConfig {
            robin: None,
            packrat: Some(sidekick_protocol::messages::PackratConfig {
                eack_interval_ms: 10,
                eack_interval_packets: 16,
                local_symbols: 160,
                cache_capacity_bytes: 48_000,
                reorder_delay_ms: 30,
                multicast_group: Vec::new(),
            }),
            identifier: Some(IdentifierSpec::quic_default()),
        };
        Self::with_session(session)
    }

    /// Robin and Packrat on one session, for a connection that both sends and receives near a
    /// lossy link (an upload beside a download, a call with media both ways): the proxy quACKs
    /// what the client sends every `interval_ms` with threshold `t` (Sidekick (NSDI '24) §4.3)
    /// and caches what it forwards to the client, repairing it from the client's eACKs (Packrat
    /// (CoNEXT '26) §5) with [`Self::packrat`]'s defaults. The two engines share the session's
    /// identifiers (4 bytes: Packrat's width), its quota and its epoch: a Reset either way
    /// restarts both (Sidekick (NSDI '24) §4.2). When one engine proves useless while the other
    /// runs (a proxy whose memory budget had no room for Packrat's cache repairs nothing), only
    /// it stops ([`SdkEvent::EngineDropped`]) and the session goes on with the other.
    ///
    /// ```
    /// use sidekick::session::SidekickConfig;
    /// let c = SidekickConfig::robin_and_packrat(30, 10);
    /// let s = &c.protocol.session;
    /// let (r, p) = (s.robin.as_ref().unwrap(), s.packrat.as_ref().unwrap());
    /// assert_eq!((r.interval_ms, r.threshold), (30, 10));
    /// assert_eq!((p.eack_interval_ms, p.reorder_delay_ms), (10, 30));
    /// assert_eq!(s.identifier.as_ref().unwrap().width, 4);
    /// ```
    pub fn robin_and_packrat(interval_ms: u32, threshold: u32) -> Self {
        let mut session = Self::robin(interval_ms, threshold).protocol.session;
        session.packrat = Self::packrat().protocol.session.packrat;
        Self::with_session(session)
    }

    /// Ask for `bytes`-byte identifiers (2, 4 or 8; Sidekick (NSDI '24) §3): shorter quACKs
    /// against a higher chance that two packets of one quACK window share an identifier. In
    /// offset mode the identifier becomes the datagram's last `bytes` bytes (for QUIC, part of
    /// the AEAD tag). Robin's quACKs and Packrat's eACKs both use it (the eACK header names
    /// the width); a proxy that does not take the width for an engine refuses the session (its
    /// `packrat_identifier_widths`; a multicast group takes 4 only), and the client falls back.
    ///
    /// ```
    /// use sidekick::session::SidekickConfig;
    /// let c = SidekickConfig::robin(30, 8).with_identifier_width(2);
    /// let id = c.protocol.session.identifier.unwrap();
    /// assert_eq!((id.width, id.offset), (2, -2));
    /// ```
    #[must_use]
    pub fn with_identifier_width(mut self, bytes: u32) -> Self {
        let spec = self
            .protocol
            .session
            .identifier
            .get_or_insert_with(IdentifierSpec::quic_default);
        spec.width = bytes;
        if spec.mode == sidekick_protocol::messages::IdentifierMode::Offset as i32 {
            spec.offset = -(bytes as i32);
        }
        self
    }

    /// Packrat for a multicast stream (Packrat (CoNEXT '26) §6.1 "Multicast Proxy"): the server
    /// sends the base stream to `group` (a multicast address and port) from the address this
    /// client's session runs to; the proxy then keeps one shared cache of the group's stream and
    /// this client's eACK and virtual cache. The session itself (discovery, Init, eACKs) runs on
    /// the client's unicast path to the server, e.g. the socket it sends NACKs from. Enables
    /// Packrat with its defaults if it was off. The proxy refuses an address that is not
    /// multicast (the session then falls back).
    ///
    /// ```
    /// use sidekick::session::SidekickConfig;
    /// let g = "239.1.2.3:5004".parse().unwrap();
    /// let c = SidekickConfig::packrat().with_multicast_group(g);
    /// let p = c.protocol.session.packrat.unwrap();
    /// assert_eq!(p.multicast_group_addr(), Ok(Some(g)));
    /// ```
    #[must_use]
    pub fn with_multicast_group(mut self, group: SocketAddr) -> Self {
        let default = Self::packrat().protocol.session.packrat;
        let p = self
            .protocol
            .session
            .packrat
            .get_or_insert_with(|| default.unwrap_or_default());
        p.multicast_group =
            sidekick_protocol::messages::PackratConfig::encode_multicast_group(group);
        self
    }

    /// Any session configuration with default engine settings.
    pub fn with_session(session: SessionConfig) -> Self {
        Self {
            protocol: ClientConfig::new(session),
            robin: RobinSenderConfig::default(),
            packrat: PackratReceiverConfig::default(),
            max_inconsistent_quacks: 3,
            max_resets: 5,
            reset_window: Duration::from_secs(1),
            // A repair arriving after the RTT-bounded hold counts as a repair (a genuine proxy
            // on a short path), so only a proxy that never repairs reads as worthless.
            hold_assessment_gaps: 32,
            // Almost none: a genuine proxy cannot repair losses before it (a congested far
            // segment), so on such a path its share of all gaps may be small but is never nil.
            min_repaired_fraction: 0.02,
            resend_assessment: 32,
            max_unneeded_fraction: 0.9,
        }
    }
}

/// One of a session's engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Robin: quACKs of what the client sends (Sidekick (NSDI '24) §4.3).
    Robin,
    /// Packrat: the proxy's repairs of what the client receives (Packrat (CoNEXT '26) §5).
    Packrat,
}

/// A datagram the adapter must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transmit {
    /// On the base socket to the base peer (discovery request, early retransmission).
    Base(Vec<u8>),
    /// On the sidekick socket to the proxy.
    Sidekick(SocketAddr, Vec<u8>),
}

/// Events for the transport integration.
#[derive(Debug, Clone, PartialEq)]
pub enum SdkEvent {
    /// The sidekick session is up.
    Established,
    /// A datagram was lost on the near segment (PACUBIC quACK congestion event).
    NearLoss(LostDatagram),
    /// The proxy received these bytes (ACK-reduction input).
    Delivered {
        /// Bytes.
        bytes: u64,
        /// Send time of the newest.
        newest_sent: Instant,
    },
    /// Fell back to plain end-to-end behaviour.
    Fallback(FallbackCause),
    /// One engine of a session running both stopped (its assessment failed: `cause` is
    /// [`FallbackCause::HoldsUnrepaired`] for Packrat, [`FallbackCause::ResendsUnneeded`] for
    /// Robin); the session goes on with the other. After Robin stops, no more `NearLoss` or
    /// `Delivered` events come: PACUBIC should act as CUBIC again, as after a fallback.
    EngineDropped(Engine, FallbackCause),
}

/// Counters of the glue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SdkStats {
    /// quACKs handed to Robin.
    pub quacks: u64,
    /// Of which rejected as inconsistent.
    pub inconsistent_quacks: u64,
    /// Of which stale (ignored).
    pub stale_quacks: u64,
    /// eACKs sent.
    pub eacks_sent: u64,
    /// eACK outcomes received: the proxy could repair none of the gaps an eACK came after,
    /// and the client stopped holding for them.
    pub eack_outcomes: u64,
    /// Resets the client requested.
    pub resets_requested: u64,
    /// Resets started by the proxy.
    pub resets_by_proxy: u64,
    /// Frames from the proxy over quota.
    pub over_quota: u64,
    /// Sidekick datagrams the protocol refused (forged MACs, replays, wrong source…).
    pub rejected_frames: u64,
    /// Early retransmissions queued on the base socket.
    pub retransmissions: u64,
    /// Reconfigurations the proxy accepted ([`SidekickClient::reconfigure`](super::SidekickClient::reconfigure)).
    pub reconfigurations: u64,
    /// Reconfigurations the proxy refused (the session kept its configuration).
    pub reconfigurations_refused: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// Held gaps repaired (filled in time) in assessments so far.
    pub holds_repaired: u64,
    /// Held gaps that expired unrepaired in assessments so far.
    pub holds_unrepaired: u64,
    /// Early resends found unneeded by end-to-end ACKs (of `resends_assessed`).
    pub resends_unneeded: u64,
    /// Early resends whose fate end-to-end ACKs told.
    pub resends_assessed: u64,
    /// Received base datagrams that did not open under the connection's keys (forged or
    /// corrupted): handed to the stack, left out of the eACKs.
    pub unauthenticated_datagrams: u64,
    /// Engines stopped on their own while the other went on ([`SdkEvent::EngineDropped`]).
    pub engines_dropped: u64,
}

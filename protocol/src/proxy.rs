//! The proxy side of one sidekick session, its policy, and configuration negotiation.
//!
//! A [`ProxySession`] is owned by a [`crate::ProxySessionTable`], which routes datagrams to it.
//! The session enforces the two send limits of Sidekick (NSDI '24) §4.1 "Security":
//! - **quota**: it sends a frame with sequence number `s` only if `s ≤ limit`, where `limit` is
//!   the highest value the client put in an authentic frame's quota field; every frame it sends
//!   carries `limit − s`, the number of further frames it may still send;
//! - **anti-amplification**: towards a client address that has not echoed a path challenge it
//!   sends at most [`ProxyPolicy::amplification_factor`] (default 1: zero amplification; QUIC
//!   allows 3, RFC 9000 §8.1) times the bytes of authentic frames received from that address.
//!   Inits are padded to [`crate::frame::MIN_INIT_DATAGRAM`] so the InitAck always fits.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::Time;

use crate::Retry;
use crate::error::Error;
use crate::frame::{self, TagLen};
use crate::keys::{SessionId, SessionKey};
use crate::messages::{
    CAP_ALL, CAP_PACKRAT, CAP_ROBIN, ConfigError, FrameDirection, Message, SessionConfig,
};
use crate::replay::ReplayWindow;

/// What the proxy accepts and how it limits itself.
#[derive(Clone, Debug)]
pub struct ProxyPolicy {
    /// Where clients send sidekick frames (advertised in discovery replies).
    pub sidekick_addr: SocketAddr,
    /// Capabilities offered (`CAP_*`).
    pub capabilities: u32,
    /// Largest quACK threshold t granted.
    pub max_threshold: u32,
    /// Smallest time-driven quACK interval granted (ms).
    pub min_quack_interval_ms: u32,
    /// Largest local eACK symbol count granted.
    pub max_symbols: u32,
    /// Largest per-session cache capacity granted (bytes).
    pub max_cache_bytes: u64,
    /// Identifier widths accepted, as a bit set over byte widths (bit `w` set: width `w` is
    /// accepted); requests with another width are refused with
    /// [`ConfigError::UnsupportedWidth`]. Default: 2, 4 and 8.
    pub identifier_widths: u32,
    /// Identifier widths accepted for sessions that ask for Packrat, as the same bit set (a
    /// proxy whose eACK engine takes fewer widths than its quACK engine refuses the others with
    /// [`ConfigError::UnsupportedWidth`] rather than grant a session it cannot serve).
    /// Default: 2, 4 and 8.
    pub packrat_identifier_widths: u32,
    /// Tag length of frames the proxy sends.
    pub tag_len: TagLen,
    /// Cap on established sessions (least recently active evicted beyond it).
    pub max_sessions: usize,
    /// Cap on half-open sessions (discovery answered, no Init yet; oldest evicted).
    pub max_half_open: usize,
    /// Half-open entries expire after this long.
    pub half_open_timeout: Duration,
    /// Sessions expire after this long without an authentic client frame.
    pub idle_timeout: Duration,
    /// Bytes sent to an unverified address ≤ this factor × authentic bytes received from it.
    pub amplification_factor: u64,
    /// Discovery requests answered per second (token bucket rate).
    pub discovery_rate: u32,
    /// Token bucket depth for discovery requests.
    pub discovery_burst: u32,
    /// First retransmission timeout of a proxy-initiated Reset (doubles).
    pub reset_retry: Duration,
    /// Attempts of a proxy-initiated Reset before giving up on it.
    pub reset_attempts: u32,
    /// Cap on queued outgoing control datagrams.
    pub outbox_cap: usize,
    /// Cap on queued events for the application (oldest dropped and counted beyond it).
    pub max_events: usize,
    /// Cap on established sessions of one station (client IP address of the base flow); a
    /// station at its cap evicts its own least recently active session, never another's.
    pub max_sessions_per_station: usize,
    /// Cap on half-open entries of one station (its own oldest evicted beyond it).
    pub max_half_open_per_station: usize,
    /// Discovery requests answered per second for one station (token bucket rate).
    pub station_discovery_rate: u32,
    /// Token bucket depth of one station's discovery requests.
    pub station_discovery_burst: u32,
    /// Cap on stations whose discovery buckets are remembered without holding any session.
    pub max_stations: usize,
    /// Only the base flow's client may use a session: frames (Init included) from another IP
    /// address than the base flow's client are refused (`Error::StationMismatch`).
    pub bind_station: bool,
    /// Control frames (Init, Config, Reset, Refresh, Error) accepted per second and session,
    /// beyond which they are dropped (RFC 9000 §21.9); eACKs and Close are not counted.
    pub control_rate: u32,
    /// Token bucket depth of one session's control frames.
    pub control_burst: u32,
}

/// A [`ProxyPolicy`] value outside its documented range (see [`ProxyPolicy::validate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} = {value} is outside {min}..={max}")]
pub struct PolicyError {
    /// The policy field.
    pub field: &'static str,
    /// Its value (durations in milliseconds, saturated to `u64::MAX`).
    pub value: u64,
    /// Smallest accepted value.
    pub min: u64,
    /// Largest accepted value.
    pub max: u64,
}

/// The documented range of every numeric [`ProxyPolicy`] field, durations in milliseconds:
/// `(field, min, max)`. `docs/protocol.md` §8 lists the same table.
pub const POLICY_RANGES: &[(&str, u64, u64)] = &[
    ("max_threshold", 1, crate::messages::MAX_THRESHOLD as u64),
    ("min_quack_interval_ms", 0, 60_000),
    ("max_symbols", 1, crate::messages::MAX_SYMBOLS as u64),
    ("max_cache_bytes", 1, 1 << 34),
    ("max_sessions", 1, 1 << 20),
    ("max_half_open", 1, 1 << 20),
    ("half_open_timeout", 100, 600_000),
    ("idle_timeout", 1_000, 86_400_000),
    ("amplification_factor", 1, 3),
    ("discovery_rate", 1, 1_000_000),
    ("discovery_burst", 1, 1_000_000),
    ("reset_retry", 1, 60_000),
    ("reset_attempts", 1, 100),
    ("outbox_cap", 1, 1 << 20),
    ("max_events", 1, 1 << 20),
    ("max_sessions_per_station", 1, 1 << 20),
    ("max_half_open_per_station", 1, 1 << 20),
    ("station_discovery_rate", 1, 1_000_000),
    ("station_discovery_burst", 1, 1_000_000),
    ("max_stations", 1, 1 << 20),
    ("control_rate", 1, 1_000_000),
    ("control_burst", 1, 1_000_000),
];

impl ProxyPolicy {
    /// Defaults for a proxy listening for sidekick frames on `sidekick_addr`.
    pub fn new(sidekick_addr: SocketAddr) -> Self {
        ProxyPolicy {
            sidekick_addr,
            capabilities: CAP_ALL,
            max_threshold: 64,
            min_quack_interval_ms: 1,
            max_symbols: 4096,
            max_cache_bytes: 4 * 1024 * 1024,
            identifier_widths: (1 << 2) | (1 << 4) | (1 << 8),
            packrat_identifier_widths: (1 << 2) | (1 << 4) | (1 << 8),
            tag_len: TagLen::Short,
            max_sessions: 4096,
            max_half_open: 1024,
            half_open_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            amplification_factor: 1,
            discovery_rate: 200,
            discovery_burst: 50,
            reset_retry: Duration::from_millis(200),
            reset_attempts: 6,
            outbox_cap: 1024,
            max_events: 4096,
            max_sessions_per_station: 64,
            max_half_open_per_station: 16,
            station_discovery_rate: 20,
            station_discovery_burst: 20,
            max_stations: 4096,
            bind_station: true,
            control_rate: 50,
            control_burst: 100,
        }
    }

    fn values(&self) -> [u64; 22] {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        [
            self.max_threshold.into(),
            self.min_quack_interval_ms.into(),
            self.max_symbols.into(),
            self.max_cache_bytes,
            n(self.max_sessions),
            n(self.max_half_open),
            ms(self.half_open_timeout),
            ms(self.idle_timeout),
            self.amplification_factor,
            self.discovery_rate.into(),
            self.discovery_burst.into(),
            ms(self.reset_retry),
            self.reset_attempts.into(),
            n(self.outbox_cap),
            n(self.max_events),
            n(self.max_sessions_per_station),
            n(self.max_half_open_per_station),
            self.station_discovery_rate.into(),
            self.station_discovery_burst.into(),
            n(self.max_stations),
            self.control_rate.into(),
            self.control_burst.into(),
        ]
    }

    /// Checks every numeric field against its documented range ([`POLICY_RANGES`]): the first
    /// field outside it, as a typed error. A configuration front end (e.g. the proxy's
    /// `--check-config`) refuses such a policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sidekick_protocol::ProxyPolicy;
    /// let mut p = ProxyPolicy::new("192.0.2.1:7000".parse().unwrap());
    /// assert!(p.validate().is_ok());
    /// p.idle_timeout = Duration::from_secs(u64::MAX);
    /// assert_eq!(p.validate().unwrap_err().field, "idle_timeout");
    /// ```
    pub fn validate(&self) -> Result<(), PolicyError> {
        for (&(field, min, max), value) in POLICY_RANGES.iter().zip(self.values()) {
            if !(min..=max).contains(&value) {
                return Err(PolicyError {
                    field,
                    value,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }

    /// This policy with every numeric field clamped into its documented range: what a
    /// [`crate::ProxySessionTable`] runs with, so that no value can make it panic.
    #[must_use]
    pub fn clamped(mut self) -> Self {
        fn c<T: TryFrom<u64> + Into<u64> + Copy>(v: T, i: usize) -> T {
            let (_, min, max) = POLICY_RANGES[i];
            T::try_from(v.into().clamp(min, max)).unwrap_or(v)
        }
        fn cu(v: usize, i: usize) -> usize {
            let (_, min, max) = POLICY_RANGES[i];
            let v = u64::try_from(v).unwrap_or(u64::MAX).clamp(min, max);
            usize::try_from(v).unwrap_or(usize::MAX)
        }
        fn cd(v: Duration, i: usize) -> Duration {
            let (_, min, max) = POLICY_RANGES[i];
            v.clamp(Duration::from_millis(min), Duration::from_millis(max))
        }
        self.max_threshold = c(self.max_threshold, 0);
        self.min_quack_interval_ms = c(self.min_quack_interval_ms, 1);
        self.max_symbols = c(self.max_symbols, 2);
        self.max_cache_bytes = c(self.max_cache_bytes, 3);
        self.max_sessions = cu(self.max_sessions, 4);
        self.max_half_open = cu(self.max_half_open, 5);
        self.half_open_timeout = cd(self.half_open_timeout, 6);
        self.idle_timeout = cd(self.idle_timeout, 7);
        self.amplification_factor = c(self.amplification_factor, 8);
        self.discovery_rate = c(self.discovery_rate, 9);
        self.discovery_burst = c(self.discovery_burst, 10);
        self.reset_retry = cd(self.reset_retry, 11);
        self.reset_attempts = c(self.reset_attempts, 12);
        self.outbox_cap = cu(self.outbox_cap, 13);
        self.max_events = cu(self.max_events, 14);
        self.max_sessions_per_station = cu(self.max_sessions_per_station, 15);
        self.max_half_open_per_station = cu(self.max_half_open_per_station, 16);
        self.station_discovery_rate = c(self.station_discovery_rate, 17);
        self.station_discovery_burst = c(self.station_discovery_burst, 18);
        self.max_stations = cu(self.max_stations, 19);
        self.control_rate = c(self.control_rate, 20);
        self.control_burst = c(self.control_burst, 21);
        self
    }

    /// Negotiation: the request with unsupported modes removed and every parameter clamped to
    /// this policy's limits. Fails if the request is invalid or nothing supported remains.
    pub fn negotiate(&self, req: &SessionConfig) -> Result<SessionConfig, ConfigError> {
        req.validate()?;
        if let Some(id) = &req.identifier
            && self.identifier_widths.checked_shr(id.width).unwrap_or(0) & 1 == 0
        {
            return Err(ConfigError::UnsupportedWidth(id.width));
        }
        let mut c = req.clone();
        if self.capabilities & CAP_ROBIN == 0 {
            c.robin = None;
        }
        if self.capabilities & CAP_PACKRAT == 0 {
            c.packrat = None;
        }
        if c.robin.is_none() && c.packrat.is_none() {
            return Err(ConfigError::Unsupported);
        }
        if c.packrat.is_some()
            && let Some(id) = &c.identifier
            && self
                .packrat_identifier_widths
                .checked_shr(id.width)
                .unwrap_or(0)
                & 1
                == 0
        {
            return Err(ConfigError::UnsupportedWidth(id.width));
        }
        if let Some(r) = c.robin.as_mut() {
            r.threshold = r.threshold.min(self.max_threshold.max(1));
            if r.interval_ms != 0 {
                r.interval_ms = r.interval_ms.max(self.min_quack_interval_ms);
            }
        }
        if let Some(p) = c.packrat.as_mut() {
            p.local_symbols = p.local_symbols.min(self.max_symbols.max(1));
            p.cache_capacity_bytes = p.cache_capacity_bytes.min(self.max_cache_bytes.max(1));
        }
        c.validate()?;
        Ok(c)
    }
}

/// The base connection a session assists, as the proxy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BaseFlow {
    /// The client's address on the base connection.
    pub client: SocketAddr,
    /// The peer's (server's) address on the base connection.
    pub server: SocketAddr,
}

/// A datagram for the proxy to send from its sidekick socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub to: SocketAddr,
    /// UDP payload.
    pub bytes: Vec<u8>,
}

/// Counters of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Frames sent.
    pub sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Authentic frames received.
    pub received: u64,
    /// Sends refused because the quota was used up.
    pub quota_refused: u64,
    /// Sends refused by the anti-amplification limit.
    pub amplification_refused: u64,
    /// Client address changes completed (the new address validated).
    pub address_changes: u64,
    /// Control frames dropped by the per-session rate limit.
    pub control_rate_limited: u64,
}

/// A new client address being validated while the last validated one stays in use
/// (RFC 9000 §9.3.3).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub(crate) addr: SocketAddr,
    pub(crate) challenge: u64,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    /// The challenge has not been sent yet (amplification budget); retried on its next frame.
    pub(crate) pending: bool,
}

/// Proxy-side state of one established session.
#[derive(Debug)]
pub struct ProxySession {
    pub(crate) id: SessionId,
    pub(crate) key: SessionKey,
    pub(crate) base: BaseFlow,
    pub(crate) client_addr: SocketAddr,
    pub(crate) validated: bool,
    pub(crate) challenge: u64,
    /// A fresh challenge for the current address has not been sent yet (the amplification
    /// budget refused it); retried on the next authentic frame from that address.
    pub(crate) challenge_pending: bool,
    pub(crate) bytes_in_unverified: u64,
    pub(crate) bytes_out_unverified: u64,
    pub(crate) next_seq: u64,
    pub(crate) quota_limit: u64,
    pub(crate) replay: ReplayWindow,
    pub(crate) epoch: u32,
    pub(crate) config: SessionConfig,
    pub(crate) last_config_id: u32,
    pub(crate) last_rx: Time,
    pub(crate) pending_reset: Option<(u32, u32, Retry)>,
    pub(crate) stats: SessionStats,
    pub(crate) tag_len: TagLen,
    pub(crate) amplification_factor: u64,
    /// The station (client IP of the base flow) the session counts against.
    pub(crate) station: IpAddr,
    /// Announced to the engines (`SessionEstablished`): the session that owns its base flow.
    /// Another session on an owned flow waits (see `docs/protocol.md` §8 "Flow binding").
    pub(crate) announced: bool,
    pub(crate) probe: Option<Probe>,
    pub(crate) control_tokens: f64,
    pub(crate) control_at: Time,
}

impl ProxySession {
    /// Session id.
    pub fn id(&self) -> SessionId {
        self.id
    }
    /// The base flow it assists.
    pub fn base(&self) -> BaseFlow {
        self.base
    }
    /// Where the client's sidekick frames come from.
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }
    /// Whether the client address echoed a path challenge.
    pub fn is_validated(&self) -> bool {
        self.validated
    }
    /// Configuration in force.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }
    /// Current epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// Further frames the client currently allows.
    pub fn quota_remaining(&self) -> u64 {
        (self.quota_limit + 1).saturating_sub(self.next_seq)
    }
    /// Authentic bytes received from the current client address while it was unverified.
    pub fn unverified_bytes_in(&self) -> u64 {
        self.bytes_in_unverified
    }
    /// Bytes sent to the current client address while it was unverified.
    pub fn unverified_bytes_out(&self) -> u64 {
        self.bytes_out_unverified
    }
    /// Bytes the proxy may still send to the current (unverified) address; `None` once validated.
    pub fn amplification_budget(&self) -> Option<u64> {
        (!self.validated).then(|| {
            (self
                .amplification_factor
                .saturating_mul(self.bytes_in_unverified))
            .saturating_sub(self.bytes_out_unverified)
        })
    }
    /// Counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }
    /// Whether the engines were told about this session (it owns its base flow).
    pub fn is_announced(&self) -> bool {
        self.announced
    }
    /// A new client address being validated, while frames still go to [`Self::client_addr`].
    pub fn probing_addr(&self) -> Option<SocketAddr> {
        self.probe.map(|p| p.addr)
    }

    /// Takes one control-frame token (RFC 9000 §21.9); false when the session sends control
    /// frames faster than `rate` per second beyond a burst of `burst`.
    pub(crate) fn take_control_token(&mut self, now: Time, rate: u32, burst: u32) -> bool {
        let dt = now.saturating_duration_since(self.control_at).as_secs_f64();
        self.control_at = self.control_at.max(now);
        self.control_tokens = (self.control_tokens + dt * f64::from(rate)).min(f64::from(burst));
        if self.control_tokens >= 1.0 {
            self.control_tokens -= 1.0;
            true
        } else {
            self.stats.control_rate_limited += 1;
            false
        }
    }

    /// Seals a Challenge for the address being probed, within that address's own
    /// anti-amplification budget.
    pub(crate) fn emit_probe_challenge(&mut self) -> Option<Result<Transmit, Error>> {
        let probe = self.probe?;
        if !probe.pending {
            return None;
        }
        if self.next_seq > self.quota_limit {
            self.stats.quota_refused += 1;
            return Some(Err(Error::QuotaExhausted));
        }
        let remaining = (self.quota_limit - self.next_seq).min(u64::from(u32::MAX)) as u32;
        let msg = Message::Challenge(crate::messages::Challenge {
            token: probe.challenge,
        });
        let bytes = match frame::seal(
            FrameDirection::ProxyToClient,
            self.tag_len,
            self.id,
            self.next_seq,
            remaining,
            &msg,
            &self.key,
        ) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let len = bytes.len() as u64;
        if probe.bytes_out + len > self.amplification_factor.saturating_mul(probe.bytes_in) {
            self.stats.amplification_refused += 1;
            return Some(Err(Error::AmplificationLimit));
        }
        self.probe = Some(Probe {
            bytes_out: probe.bytes_out + len,
            pending: false,
            ..probe
        });
        self.next_seq += 1;
        self.stats.sent += 1;
        self.stats.bytes_sent += len;
        Some(Ok(Transmit {
            to: probe.addr,
            bytes,
        }))
    }

    /// Seals `msg` if quota and the amplification limit allow it; counts refusals.
    pub(crate) fn emit(&mut self, msg: &Message) -> Result<Transmit, Error> {
        if self.next_seq > self.quota_limit {
            self.stats.quota_refused += 1;
            return Err(Error::QuotaExhausted);
        }
        let remaining = (self.quota_limit - self.next_seq).min(u64::from(u32::MAX)) as u32;
        let bytes = frame::seal(
            FrameDirection::ProxyToClient,
            self.tag_len,
            self.id,
            self.next_seq,
            remaining,
            msg,
            &self.key,
        )?;
        let len = bytes.len() as u64;
        if !self.validated
            && self.bytes_out_unverified + len
                > self
                    .amplification_factor
                    .saturating_mul(self.bytes_in_unverified)
        {
            self.stats.amplification_refused += 1;
            return Err(Error::AmplificationLimit);
        }
        if !self.validated {
            self.bytes_out_unverified += len;
        }
        self.next_seq += 1;
        self.stats.sent += 1;
        self.stats.bytes_sent += len;
        Ok(Transmit {
            to: self.client_addr,
            bytes,
        })
    }

    pub(crate) fn next_deadline(&self, idle: Duration) -> Time {
        let idle_at = self.last_rx + idle;
        match &self.pending_reset {
            Some((_, _, r)) => idle_at.min(r.next),
            None => idle_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{IdentifierSpec, PackratConfig, RobinConfig};

    #[test]
    fn negotiation_clamps_and_filters() {
        let mut p = ProxyPolicy::new("10.0.0.1:7000".parse().unwrap());
        p.max_threshold = 8;
        p.max_symbols = 100;
        p.max_cache_bytes = 1000;
        p.min_quack_interval_ms = 5;
        let req = SessionConfig {
            robin: Some(RobinConfig {
                interval_ms: 2,
                interval_packets: 0,
                threshold: 50,
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
        };
        let c = p.negotiate(&req).unwrap();
        assert_eq!(c.robin.as_ref().unwrap().threshold, 8);
        assert_eq!(c.robin.as_ref().unwrap().interval_ms, 5);
        assert_eq!(c.packrat.as_ref().unwrap().local_symbols, 100);
        assert_eq!(c.packrat.as_ref().unwrap().cache_capacity_bytes, 1000);
        assert_eq!(c.packrat.as_ref().unwrap().reorder_delay_ms, 30);
        p.capabilities = CAP_PACKRAT;
        let c = p.negotiate(&req).unwrap();
        assert!(c.robin.is_none() && c.packrat.is_some());
        let robin_only = SessionConfig {
            packrat: None,
            ..req.clone()
        };
        assert_eq!(p.negotiate(&robin_only), Err(ConfigError::Unsupported));
        // Identifier widths: all three by default; a proxy accepting 4 only refuses 8.
        let mut wide = req.clone();
        wide.identifier.as_mut().unwrap().width = 8;
        assert!(p.negotiate(&wide).is_ok());
        p.identifier_widths = 1 << 4;
        assert_eq!(p.negotiate(&wide), Err(ConfigError::UnsupportedWidth(8)));
        assert!(p.negotiate(&req).is_ok());
        // Packrat's widths apply only to sessions that ask for Packrat.
        let mut p = ProxyPolicy::new("127.0.0.1:7788".parse().unwrap());
        p.packrat_identifier_widths = 1 << 4;
        let mut narrow = req.clone();
        narrow.identifier.as_mut().unwrap().width = 2;
        assert_eq!(p.negotiate(&narrow), Err(ConfigError::UnsupportedWidth(2)));
        narrow.packrat = None;
        let granted = p.negotiate(&narrow).unwrap();
        assert_eq!(granted.identifier.unwrap().width, 2);
    }
}

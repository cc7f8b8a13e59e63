//! The session layer seen by the core: discovery, authenticated sidekick messages, quota.
//!
//! [`SessionLayer`] is the narrow interface the core needs; [`ProtocolSessions`] implements it
//! over `sidekick_protocol::ProxySessionTable` (Sidekick (NSDI '24) §4.1–4.2, Packrat (CoNEXT '26) §6.1: discovery reply
//! from the peer's address, Init/InitAck, Config, Reset with epochs, quota, HMAC'd frames). The
//! indirection keeps the engines and the flow pipeline testable on their own.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::Time;

use eack::HashKey;
use quack::IdSource;
use sidekick_protocol::messages::{IdentifierMode, SessionConfig};
use sidekick_protocol::{
    BaseFlow, ErrorCode, ProxyEvent, ProxyPolicy, ProxySessionTable, SessionId,
};

use crate::engine::Outgoing;
use crate::flow::FlowKey;
use crate::packrat::PackratEngineConfig;
use crate::robin::RobinEngineConfig;

/// Engines requested by a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineConfig {
    /// Robin, if on.
    pub robin: Option<RobinEngineConfig>,
    /// Packrat, if on.
    pub packrat: Option<PackratEngineConfig>,
    /// With Packrat: the multicast group whose shared cache assists this client (Packrat (CoNEXT '26)
    /// §6.1), instead of a cache of the session's own flow.
    pub multicast_group: Option<std::net::SocketAddr>,
}

/// What the session layer reports to the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent<Id> {
    /// Nothing for the engines.
    Nothing,
    /// A session is established: attach engines to `flow`.
    Established {
        /// Session.
        id: Id,
        /// The base flow.
        flow: FlowKey,
        /// Engines and parameters.
        engines: EngineConfig,
        /// Epoch in force.
        epoch: u32,
    },
    /// New parameters and epoch.
    Reconfigured {
        /// Session.
        id: Id,
        /// Engines and parameters.
        engines: EngineConfig,
        /// New epoch.
        epoch: u32,
    },
    /// The client reset the session: reinitialise state for `epoch`.
    Reset {
        /// Session.
        id: Id,
        /// New epoch.
        epoch: u32,
    },
    /// A client eACK.
    Eack {
        /// Session.
        id: Id,
        /// Its epoch.
        epoch: u32,
        /// eack wire bytes.
        data: Vec<u8>,
        /// Packet-number gaps the client held open when it sent it.
        open_gaps: u32,
        /// The client's number for it.
        number: u32,
    },
    /// The session is gone: the client closed it, or it failed (expiry, eviction).
    Closed {
        /// Session.
        id: Id,
        /// Why it went.
        reason: CloseReason,
    },
}

/// Why a session left its flow (the flow is handed to PEMI either way when it has PEMI's
/// engine; the reason is counted, `sidekick_pemi_fallbacks_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed the session (a Close message).
    Ended,
    /// The session failed: no authentic client message for the session idle timeout, or the
    /// proxy evicted or displaced it.
    Failed,
}

/// Why the session layer refused something (counted by the core; never fatal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SessionError(pub String);

/// Counters of the session layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Discovery requests answered.
    pub discovery_replies: u64,
    /// Discovery requests refused by the rate limit.
    pub discovery_rate_limited: u64,
    /// Sidekick datagrams that were malformed, unauthentic or replayed.
    pub malformed: u64,
    /// Messages refused by the quota or the anti-amplification limit.
    pub quota_refused: u64,
    /// Outgoing datagrams dropped because a queue was full.
    pub outbox_dropped: u64,
    /// Established sessions.
    pub sessions: u64,
    /// Half-open sessions.
    pub half_open: u64,
}

impl SessionStats {
    /// Add another session layer's counters (multi-worker totals).
    pub fn add(&mut self, o: &SessionStats) {
        self.discovery_replies += o.discovery_replies;
        self.discovery_rate_limited += o.discovery_rate_limited;
        self.malformed += o.malformed;
        self.quota_refused += o.quota_refused;
        self.outbox_dropped += o.outbox_dropped;
        self.sessions += o.sessions;
        self.half_open += o.half_open;
    }
}

/// The session layer interface.
pub trait SessionLayer {
    /// Session handle.
    type Id: Copy + Eq + std::hash::Hash + std::fmt::Debug;
    /// If `payload` (client→server on `flow`) is a discovery request, the reply payload to send
    /// from the server's address (`Some(Err)` when refused, e.g. rate limited).
    fn on_base_payload(
        &mut self,
        now: Time,
        flow: FlowKey,
        payload: &[u8],
    ) -> Option<Result<Vec<u8>, SessionError>>;
    /// A datagram arrived on the sidekick socket.
    fn on_datagram(
        &mut self,
        now: Time,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Result<SessionEvent<Self::Id>, SessionError>;
    /// Send an engine's message. For [`Outgoing::Reset`] returns the new epoch.
    fn send(&mut self, now: Time, id: Self::Id, msg: Outgoing)
    -> Result<Option<u32>, SessionError>;
    /// Next datagram for the sidekick socket.
    fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)>;
    /// Next event produced by timers.
    fn poll_event(&mut self) -> Option<SessionEvent<Self::Id>>;
    /// Next timer.
    fn poll_timeout(&self) -> Option<Time>;
    /// Run timers.
    fn handle_timeout(&mut self, now: Time);
    /// Counters.
    fn stats(&self) -> SessionStats;
}

/// [`SessionLayer`] over the `sidekick-protocol` crate.
pub struct ProtocolSessions {
    table: ProxySessionTable,
    pending: VecDeque<(SocketAddr, Vec<u8>)>,
    pending_dropped: u64,
    packrat_retx_budget_percent: u32,
}

/// Cap on quACK datagrams queued between the engines and the sidekick socket.
const PENDING_CAP: usize = 1024;

impl ProtocolSessions {
    /// Sessions under `policy`.
    pub fn new(mut policy: ProxyPolicy) -> Self {
        // Robin's quACKs and Packrat's eACKs take 2-, 4- and 8-byte identifiers
        // ([`engines_from`]); a width outside the policy is refused at negotiation, so the
        // client hears why and falls back, instead of a session without engines.
        policy.identifier_widths &= (1 << 2) | (1 << 4) | (1 << 8);
        policy.packrat_identifier_widths &= (1 << 2) | (1 << 4) | (1 << 8);
        Self {
            table: ProxySessionTable::new(policy),
            pending: VecDeque::new(),
            pending_dropped: 0,
            packrat_retx_budget_percent: crate::packrat::DEFAULT_RETX_BUDGET_PERCENT,
        }
    }

    /// Packrat engines of these sessions retransmit at most `percent` % of the bytes forwarded
    /// to their client ([`PackratEngineConfig::retx_budget_percent`]; the proxy's policy, not the
    /// client's to negotiate).
    pub fn with_packrat_retx_budget(mut self, percent: u32) -> Self {
        self.packrat_retx_budget_percent = percent;
        self
    }

    /// The proxy's limits applied to the engines a session asked for.
    fn budgeted(&self, ev: SessionEvent<SessionId>) -> SessionEvent<SessionId> {
        let set = |mut e: EngineConfig| {
            if let Some(p) = e.packrat.as_mut() {
                p.retx_budget_percent = self.packrat_retx_budget_percent;
            }
            e
        };
        match ev {
            SessionEvent::Established {
                id,
                flow,
                engines,
                epoch,
            } => SessionEvent::Established {
                id,
                flow,
                engines: set(engines),
                epoch,
            },
            SessionEvent::Reconfigured { id, engines, epoch } => SessionEvent::Reconfigured {
                id,
                engines: set(engines),
                epoch,
            },
            other => other,
        }
    }

    /// Test builds only: every InitAck echoes `lie(negotiated)` ([`crate::lie`]).
    #[cfg(feature = "testing")]
    pub fn lie_in_echoes(&mut self, lie: fn(&SessionConfig) -> SessionConfig) {
        self.table.lie_in_echoes(lie);
    }

    /// Apply reloaded limits (the daemon's live configuration keys): the limits on what
    /// sessions may ask for, the discovery rate, the session idle timeout and the Packrat
    /// retransmission budget. Sessions already established keep what they were granted; the
    /// new limits apply to every later negotiation.
    pub fn apply_limits(&mut self, limits: &SessionLimits) {
        limits.apply_to(self.table.policy_mut());
        self.packrat_retx_budget_percent = limits.packrat_retx_budget_percent;
    }

    /// The underlying table.
    pub fn table(&self) -> &ProxySessionTable {
        &self.table
    }
}

/// The session layer's limits that a running proxy may change (the daemon's live configuration
/// keys): set at start with [`SessionLimits::apply_to`] and [`ProtocolSessions::with_packrat_retx_budget`],
/// changed later with [`ProtocolSessions::apply_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Largest quACK threshold a session may ask for.
    pub max_threshold: u32,
    /// Shortest quACK interval a session may ask for, ms.
    pub min_quack_interval_ms: u32,
    /// Most eACK symbols a session may ask for.
    pub max_symbols: u32,
    /// Largest Packrat cache a session may ask for, bytes.
    pub max_cache_bytes: u64,
    /// Discovery replies per second and station.
    pub discovery_rate: u32,
    /// Discovery replies a station may ask for at once.
    pub discovery_burst: u32,
    /// A session without traffic this long ends.
    pub idle_timeout: Duration,
    /// Packrat retransmissions per client, in percent of the bytes forwarded to it.
    pub packrat_retx_budget_percent: u32,
}

impl SessionLimits {
    /// Write the negotiation and discovery limits into a proxy policy (the retransmission
    /// budget is the session layer's, not the policy's).
    pub fn apply_to(&self, p: &mut ProxyPolicy) {
        p.max_threshold = self.max_threshold;
        p.min_quack_interval_ms = self.min_quack_interval_ms;
        p.max_symbols = self.max_symbols;
        p.max_cache_bytes = self.max_cache_bytes;
        p.discovery_rate = self.discovery_rate;
        p.discovery_burst = self.discovery_burst;
        p.idle_timeout = self.idle_timeout;
    }
}

fn to_flow(b: BaseFlow) -> FlowKey {
    FlowKey {
        client: b.client,
        server: b.server,
    }
}

/// Map a negotiated protocol configuration to engine parameters. Robin's quACKs and Packrat's
/// eACKs take 2-, 4- and 8-byte identifiers (Sidekick (NSDI '24) §3; 4 is Packrat (CoNEXT '26)
/// §5.2.1's default), multicast groups included (the core refuses a member whose width differs
/// from its group's).
pub fn engines_from(config: &SessionConfig) -> Result<EngineConfig, SessionError> {
    let width = match config.identifier.as_ref().map_or(4, |s| s.width) {
        2 => quack::Width::U16,
        4 => quack::Width::U32,
        8 => quack::Width::U64,
        w => {
            return Err(SessionError(format!(
                "identifier width {w} not in {{2, 4, 8}}"
            )));
        }
    };
    let id = match &config.identifier {
        None => IdSource::QUIC_DEFAULT,
        Some(spec) => match IdentifierMode::try_from(spec.mode) {
            Ok(IdentifierMode::Offset) => IdSource::Offset(spec.offset as isize),
            Ok(IdentifierMode::KeyedHash) => {
                let key: [u8; 16] = spec
                    .hash_key
                    .as_slice()
                    .try_into()
                    .map_err(|_| SessionError("hash key length".into()))?;
                IdSource::KeyedHash(key)
            }
            Err(_) => return Err(SessionError("identifier mode".into())),
        },
    };
    let robin = config.robin.as_ref().map(|r| RobinEngineConfig {
        threshold: r.threshold.max(1) as usize,
        every_packets: r.interval_packets,
        every: Duration::from_millis(u64::from(r.interval_ms)),
        quack_on_gap_percent: r.quack_on_gap_percent,
        id,
        width,
    });
    let packrat = config.packrat.as_ref().map(|p| PackratEngineConfig {
        local_symbols: (p.local_symbols as usize).clamp(1, eack::MAX_SYMBOLS),
        cache_bytes: usize::try_from(p.cache_capacity_bytes).unwrap_or(usize::MAX),
        id,
        width,
        key: HashKey::DEFAULT,
        retx_budget_percent: crate::packrat::DEFAULT_RETX_BUDGET_PERCENT,
    });
    let multicast_group = match &config.packrat {
        Some(p) => p
            .multicast_group_addr()
            .map_err(|e| SessionError(e.to_string()))?,
        None => None,
    };
    Ok(EngineConfig {
        robin,
        packrat,
        multicast_group,
    })
}

fn map_event(ev: ProxyEvent) -> Result<SessionEvent<SessionId>, SessionError> {
    Ok(match ev {
        ProxyEvent::SessionEstablished {
            id,
            base,
            config,
            epoch,
        } => SessionEvent::Established {
            id,
            flow: to_flow(base),
            engines: engines_from(&config)?,
            epoch,
        },
        ProxyEvent::Reconfigured { id, config, epoch } => SessionEvent::Reconfigured {
            id,
            engines: engines_from(&config)?,
            epoch,
        },
        ProxyEvent::Reset { id, epoch } => SessionEvent::Reset { id, epoch },
        ProxyEvent::Eack {
            id,
            epoch,
            data,
            open_gaps,
            number,
        } => SessionEvent::Eack {
            id,
            epoch,
            data,
            open_gaps,
            number,
        },
        ProxyEvent::Closed { id } => SessionEvent::Closed {
            id,
            reason: CloseReason::Ended,
        },
        ProxyEvent::Expired { id, .. } => SessionEvent::Closed {
            id,
            reason: CloseReason::Failed,
        },
        _ => SessionEvent::Nothing,
    })
}

impl SessionLayer for ProtocolSessions {
    type Id = SessionId;

    fn on_base_payload(
        &mut self,
        now: Time,
        flow: FlowKey,
        payload: &[u8],
    ) -> Option<Result<Vec<u8>, SessionError>> {
        let req = sidekick_protocol::is_discovery_request(payload)?;
        let base = BaseFlow {
            client: flow.client,
            server: flow.server,
        };
        Some(
            self.table
                .handle_discovery(now, base, &req)
                .map(|t| t.bytes.to_vec())
                .map_err(|e| SessionError(e.to_string())),
        )
    }

    fn on_datagram(
        &mut self,
        now: Time,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Result<SessionEvent<SessionId>, SessionError> {
        let ev = self
            .table
            .handle_datagram(now, from, bytes)
            .map_err(|e| SessionError(e.to_string()))?;
        map_event(ev).map(|e| self.budgeted(e))
    }

    fn send(
        &mut self,
        now: Time,
        id: SessionId,
        msg: Outgoing,
    ) -> Result<Option<u32>, SessionError> {
        match msg {
            Outgoing::Quack(data) => {
                let t = self
                    .table
                    .send_quack(now, &id, &data)
                    .map_err(|e| SessionError(e.to_string()))?;
                // send_quack returns the datagram directly; route it through our outbox order.
                if self.pending.len() >= PENDING_CAP {
                    self.pending_dropped += 1;
                } else {
                    self.pending.push_back((t.to, t.bytes));
                }
                Ok(None)
            }
            Outgoing::Reset => self
                .table
                .send_reset(now, &id, ErrorCode::DecodeFailure)
                .map(Some)
                .map_err(|e| SessionError(e.to_string())),
            Outgoing::EackOutcome {
                resent,
                eack_number,
            } => {
                let t = self
                    .table
                    .send_eack_outcome(now, &id, resent, eack_number)
                    .map_err(|e| SessionError(e.to_string()))?;
                if self.pending.len() >= PENDING_CAP {
                    self.pending_dropped += 1;
                } else {
                    self.pending.push_back((t.to, t.bytes));
                }
                Ok(None)
            }
        }
    }

    fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        if let Some(t) = self.pending.pop_front() {
            return Some(t);
        }
        self.table.poll_transmit().map(|t| (t.to, t.bytes))
    }

    fn poll_event(&mut self) -> Option<SessionEvent<SessionId>> {
        loop {
            let ev = self.table.poll_event()?;
            match map_event(ev) {
                Ok(SessionEvent::Nothing) => {}
                Ok(e) => return Some(self.budgeted(e)),
                Err(e) => tracing::debug!(error = %e, "session event refused"),
            }
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.table.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Time) {
        self.table.handle_timeout(now);
    }

    fn stats(&self) -> SessionStats {
        let s = self.table.stats();
        SessionStats {
            discovery_replies: s.discovery_replies,
            discovery_rate_limited: s.discovery_rate_limited,
            malformed: s.malformed + s.auth_failures + s.replays + s.unknown_session,
            quota_refused: s.quota_refused + s.amplification_refused,
            outbox_dropped: s.outbox_dropped + self.pending_dropped,
            sessions: self.table.len() as u64,
            half_open: self.table.half_open_len() as u64,
        }
    }
}

/// Sessions configured out of band (explicitly configured proxies, Sidekick (NSDI '24) §4.1; simulations and
/// benchmarks): [`StaticSessions::add`] announces a session; engine messages are delivered
/// unframed to the configured sidekick address. Datagrams from clients are refused (counted).
#[derive(Debug, Default)]
pub struct StaticSessions {
    next_id: u64,
    events: VecDeque<SessionEvent<u64>>,
    outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    targets: std::collections::HashMap<u64, SocketAddr>,
    refused: u64,
    epochs: std::collections::HashMap<u64, u32>,
}

impl StaticSessions {
    /// No sessions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Announce a session for `flow`, messages to `sidekick`; delivered at the next core timeout.
    pub fn add(&mut self, flow: FlowKey, engines: EngineConfig, sidekick: SocketAddr) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.targets.insert(id, sidekick);
        self.epochs.insert(id, 0);
        self.events.push_back(SessionEvent::Established {
            id,
            flow,
            engines,
            epoch: 0,
        });
        id
    }

    /// End session `id` for `reason` (delivered at the next core timeout): its flow leaves the
    /// session, and goes to PEMI when it has PEMI's engine.
    pub fn close(&mut self, id: u64, reason: CloseReason) {
        if self.targets.remove(&id).is_some() {
            self.epochs.remove(&id);
            self.events.push_back(SessionEvent::Closed { id, reason });
        }
    }

    /// Queue an eACK from the client of session `id` (delivered at the next core timeout).
    pub fn eack(&mut self, id: u64, data: Vec<u8>) {
        let epoch = self.epochs.get(&id).copied().unwrap_or(0);
        self.events.push_back(SessionEvent::Eack {
            id,
            epoch,
            data,
            open_gaps: 0,
            number: 0,
        });
    }
}

impl SessionLayer for StaticSessions {
    type Id = u64;

    fn on_base_payload(
        &mut self,
        _: Time,
        _: FlowKey,
        _: &[u8],
    ) -> Option<Result<Vec<u8>, SessionError>> {
        None
    }

    fn on_datagram(
        &mut self,
        _: Time,
        _: SocketAddr,
        _: &[u8],
    ) -> Result<SessionEvent<u64>, SessionError> {
        self.refused += 1;
        Err(SessionError("static sessions take no datagrams".into()))
    }

    fn send(&mut self, _: Time, id: u64, msg: Outgoing) -> Result<Option<u32>, SessionError> {
        let to = *self
            .targets
            .get(&id)
            .ok_or_else(|| SessionError("unknown session".into()))?;
        match msg {
            Outgoing::Quack(b) => {
                if self.outbox.len() < PENDING_CAP {
                    self.outbox.push_back((to, b));
                }
                Ok(None)
            }
            Outgoing::Reset => {
                let e = self.epochs.entry(id).or_insert(0);
                *e = e.wrapping_add(1);
                Ok(Some(*e))
            }
            // Static sessions' clients get quACKs only (tests and benches of the engines).
            Outgoing::EackOutcome { .. } => Ok(None),
        }
    }

    fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.outbox.pop_front()
    }

    fn poll_event(&mut self) -> Option<SessionEvent<u64>> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn handle_timeout(&mut self, _: Time) {}

    fn stats(&self) -> SessionStats {
        SessionStats {
            malformed: self.refused,
            sessions: self.targets.len() as u64,
            ..SessionStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sidekick_protocol::messages::{IdentifierSpec, PackratConfig as WirePackrat};

    fn spec(width: u32) -> IdentifierSpec {
        IdentifierSpec {
            width,
            offset: -(width as i32),
            ..IdentifierSpec::quic_default()
        }
    }

    #[test]
    fn engines_take_the_negotiated_identifier_width() {
        let mut c = SessionConfig {
            robin: Some(sidekick_protocol::messages::RobinConfig {
                interval_ms: 30,
                interval_packets: 0,
                threshold: 8,
                quack_on_gap_percent: 0,
            }),
            packrat: None,
            identifier: None,
        };
        // No spec: the QUIC default, 4 bytes.
        let e = engines_from(&c).unwrap();
        assert_eq!(e.robin.unwrap().width, quack::Width::U32);
        for (w, want) in [
            (2, quack::Width::U16),
            (4, quack::Width::U32),
            (8, quack::Width::U64),
        ] {
            c.identifier = Some(spec(w));
            let r = engines_from(&c).unwrap().robin.unwrap();
            assert_eq!((r.width, r.id), (want, IdSource::Offset(-(w as isize))));
        }
        // Packrat's eACKs take every width too.
        c.packrat = Some(WirePackrat {
            eack_interval_ms: 10,
            eack_interval_packets: 16,
            local_symbols: 160,
            cache_capacity_bytes: 48_000,
            reorder_delay_ms: 30,
            multicast_group: Vec::new(),
        });
        for (w, want) in [
            (2, quack::Width::U16),
            (4, quack::Width::U32),
            (8, quack::Width::U64),
        ] {
            c.identifier = Some(spec(w));
            let p = engines_from(&c).unwrap().packrat.unwrap();
            assert_eq!((p.width, p.id), (want, IdSource::Offset(-(w as isize))));
        }
        c.identifier = Some(spec(3));
        assert!(engines_from(&c).is_err());
        // A multicast group's shared cache at every width (the core keeps one width per group).
        if let Some(p) = c.packrat.as_mut() {
            p.multicast_group =
                WirePackrat::encode_multicast_group("239.1.2.3:5004".parse().unwrap());
        }
        for (w, want) in [
            (2, quack::Width::U16),
            (4, quack::Width::U32),
            (8, quack::Width::U64),
        ] {
            c.identifier = Some(spec(w));
            let e = engines_from(&c).unwrap();
            assert!(e.multicast_group.is_some());
            assert_eq!(e.packrat.unwrap().width, want);
        }
    }
}

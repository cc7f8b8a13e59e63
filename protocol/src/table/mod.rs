//! The proxy's bounded table of sidekick sessions (sans-IO, explicit `now`).
//!
//! Two maps, both capped with an eviction rule and a counter:
//! - half-open entries (discovery answered, no authentic Init yet): at most
//!   [`ProxyPolicy::max_half_open`], oldest evicted first, expired after
//!   [`ProxyPolicy::half_open_timeout`];
//! - established sessions: at most [`ProxyPolicy::max_sessions`], the least recently active
//!   evicted when a new one must fit, expired after [`ProxyPolicy::idle_timeout`].
//!
//! Discovery processing is rate-limited by a token bucket (one X25519 operation per request).
//! Datagrams that do not authenticate under a known session's key produce no output and no state.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::Time;

use ring::rand::{SecureRandom, SystemRandom};

use crate::discovery::{DISCOVERY_LEN, DiscoveryReply, DiscoveryRequest};
use crate::error::Error;
use crate::frame::{self, Header, MIN_INIT_DATAGRAM};
use crate::keys::{Ephemeral, SessionId, SessionKey};
use crate::messages::{
    Challenge, Close, Config, EackOutcome, ErrorCode, FrameDirection, InitAck, Message, Quack,
    Refresh, Reset, SessionConfig, msg_type,
};
use crate::proxy::{BaseFlow, ProxyPolicy, ProxySession, SessionStats, Transmit};
use crate::replay::ReplayWindow;
use crate::{PROTOCOL_VERSION, Retry};

mod deadlines;
mod established;
mod sends;
mod stations;

use deadlines::SessionDeadlines;
use established::init_ack;
use stations::{FlowOwners, Removal, Station};

/// The discovery reply to inject on the base path, spoofed from the base peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryTransmit {
    /// Destination: the client's base address.
    pub to: SocketAddr,
    /// Source to spoof: the base peer's address.
    pub from: SocketAddr,
    /// The 128-byte reply.
    pub bytes: [u8; DISCOVERY_LEN],
}

/// What happened, for the proxy's engines.
#[derive(Clone, Debug, PartialEq)]
pub enum ProxyEvent {
    /// Nothing for the engines to act on (keepalive, duplicate, quota refresh).
    Nothing,
    /// A session completed its handshake: start Robin/Packrat for `base` with `config`.
    SessionEstablished {
        /// Session id.
        id: SessionId,
        /// Base flow it assists.
        base: BaseFlow,
        /// Configuration in force.
        config: SessionConfig,
        /// Epoch in force.
        epoch: u32,
    },
    /// The client's address answered the path challenge.
    PathValidated {
        /// Session id.
        id: SessionId,
    },
    /// The configuration changed; a new epoch starts.
    Reconfigured {
        /// Session id.
        id: SessionId,
        /// Configuration in force.
        config: SessionConfig,
        /// The new epoch.
        epoch: u32,
    },
    /// The client reset the session: reinitialise the quACK / eACK state for `epoch`.
    Reset {
        /// Session id.
        id: SessionId,
        /// The new epoch.
        epoch: u32,
    },
    /// The client acknowledged a proxy-initiated Reset.
    ResetAcked {
        /// Session id.
        id: SessionId,
        /// The epoch now in force.
        epoch: u32,
    },
    /// An eACK for the current epoch (opaque bytes for the eack crate).
    Eack {
        /// Session id.
        id: SessionId,
        /// Its epoch.
        epoch: u32,
        /// The eACK wire form.
        data: Vec<u8>,
        /// Gaps the client held open when it sent it (answer with
        /// [`ProxySessionTable::send_eack_outcome`] when none can be repaired).
        open_gaps: u32,
        /// The client's number for it (the outcome echoes it).
        number: u32,
    },
    /// The client reported an error.
    ClientError {
        /// Session id.
        id: SessionId,
        /// An `ErrorCode` value.
        code: u32,
    },
    /// The session is gone (client Close).
    Closed {
        /// Session id.
        id: SessionId,
    },
    /// The session was dropped by the proxy (idle expiry or eviction).
    Expired {
        /// Session id.
        id: SessionId,
        /// Its base flow.
        base: BaseFlow,
    },
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Discovery requests processed (replied).
    pub discovery_replies: u64,
    /// Discovery requests refused by the rate limiter.
    pub discovery_rate_limited: u64,
    /// Discovery requests refused otherwise (version, bad key).
    pub discovery_refused: u64,
    /// Half-open entries evicted by the cap.
    pub half_open_evicted: u64,
    /// Half-open entries expired.
    pub half_open_expired: u64,
    /// Sessions established.
    pub established: u64,
    /// Sessions evicted by the cap.
    pub sessions_evicted: u64,
    /// Sessions expired (idle).
    pub sessions_expired: u64,
    /// Sessions closed by the client.
    pub sessions_closed: u64,
    /// Frames with an unknown session id.
    pub unknown_session: u64,
    /// Frames failing authentication.
    pub auth_failures: u64,
    /// Replayed frames.
    pub replays: u64,
    /// Frames malformed before authentication (size, magic, version, length).
    pub malformed: u64,
    /// Authentic frames refused afterwards (direction, body, epoch, state).
    pub refused: u64,
    /// Sends refused for quota (all sessions).
    pub quota_refused: u64,
    /// Sends refused by the anti-amplification limit (all sessions).
    pub amplification_refused: u64,
    /// Control datagrams dropped because the outbox was full.
    pub outbox_dropped: u64,
    /// Events dropped because the event queue was full ([`ProxyPolicy::max_events`]).
    pub events_dropped: u64,
    /// Total bytes of sidekick frames received (authentic or not).
    pub bytes_in: u64,
    /// Total bytes sent on the sidekick socket.
    pub bytes_out: u64,
    /// Discovery requests refused by their station's own rate limit.
    pub station_rate_limited: u64,
    /// Frames refused because they came from another station than the base flow's client.
    pub station_mismatch: u64,
    /// Sessions established on a flow that another session owns (not announced).
    pub sessions_waiting: u64,
    /// Unvalidated flow owners displaced by a validated session of the same flow.
    pub sessions_displaced: u64,
    /// Control frames dropped by the per-session rate limit (all sessions).
    pub control_rate_limited: u64,
    /// Stations forgotten by the station cap while holding nothing.
    pub stations_forgotten: u64,
}

#[derive(Debug)]
struct HalfOpen {
    base: BaseFlow,
    station: IpAddr,
    key: SessionKey,
    created: Time,
}

/// What an impostor echoes instead of the negotiated configuration (feature `testing`).
type EchoLie = Option<fn(&SessionConfig) -> SessionConfig>;

/// The configuration an InitAck of session `s` echoes: the negotiated one (or, in tests, a lie).
fn echo_of(s: &ProxySession, lie: EchoLie) -> SessionConfig {
    match lie {
        Some(lie) => lie(&s.config),
        None => s.config.clone(),
    }
}

/// The proxy's sessions. Feed it discovery requests seen on base flows
/// ([`ProxySessionTable::handle_discovery`]) and datagrams from the sidekick socket
/// ([`ProxySessionTable::handle_datagram`]); send what [`ProxySessionTable::poll_transmit`]
/// returns from the sidekick socket; call [`ProxySessionTable::handle_timeout`] at
/// [`ProxySessionTable::poll_timeout`].
///
/// ```
/// use sidekick_protocol::Time;
/// use sidekick_protocol::{ProxyPolicy, ProxySessionTable, BaseFlow, is_discovery_request};
///
/// let now = Time::ZERO;
/// let mut table = ProxySessionTable::new(ProxyPolicy::new("192.0.2.1:7000".parse().unwrap()));
/// // A payload that is not a discovery request costs one length compare.
/// assert!(is_discovery_request(&[0u8; 1200]).is_none());
/// // Forged frames on the sidekick socket yield an error and no output.
/// assert!(table.handle_datagram(now, "198.51.100.9:5".parse().unwrap(), &[0u8; 64]).is_err());
/// assert!(table.poll_transmit().is_none());
/// # let _ = BaseFlow { client: "10.0.0.2:1".parse().unwrap(), server: "10.0.1.2:443".parse().unwrap() };
/// ```
#[derive(Debug)]
pub struct ProxySessionTable {
    policy: ProxyPolicy,
    rng: SystemRandom,
    sessions: HashMap<SessionId, ProxySession>,
    half_open: HashMap<SessionId, HalfOpen>,
    half_open_order: VecDeque<SessionId>,
    outbox: VecDeque<Transmit>,
    events: VecDeque<ProxyEvent>,
    tokens: f64,
    tokens_at: Option<Time>,
    stations: HashMap<IpAddr, Station>,
    flows: FlowOwners,
    stats: TableStats,
    /// Every session's next deadline ([`SessionDeadlines`]), filed under `filed_idle`.
    deadlines: SessionDeadlines,
    filed_idle: Duration,
    /// Test support (feature `testing`): what an impostor echoes in its InitAcks instead of
    /// the negotiated configuration ([`ProxySessionTable::lie_in_echoes`]).
    #[cfg(feature = "testing")]
    echo_lie: EchoLie,
}

impl ProxySessionTable {
    /// An empty table under `policy`, every value clamped into its documented range
    /// ([`ProxyPolicy::clamped`]; use [`ProxySessionTable::try_new`] to refuse instead).
    pub fn new(policy: ProxyPolicy) -> Self {
        let policy = policy.clamped();
        let tokens = f64::from(policy.discovery_burst);
        let filed_idle = policy.idle_timeout;
        ProxySessionTable {
            policy,
            rng: SystemRandom::new(),
            sessions: HashMap::new(),
            half_open: HashMap::new(),
            half_open_order: VecDeque::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            tokens,
            tokens_at: None,
            stations: HashMap::new(),
            flows: HashMap::new(),
            stats: TableStats::default(),
            deadlines: SessionDeadlines::default(),
            filed_idle,
            #[cfg(feature = "testing")]
            echo_lie: None,
        }
    }

    /// Test support (feature `testing`): every InitAck echoes `lie(negotiated)` instead of the
    /// negotiated configuration, as an impostor that answered discovery may (the lab's lying
    /// proxy; the client must clamp or refuse it, docs/protocol.md §11.3). The session itself
    /// runs with the negotiated configuration.
    #[cfg(feature = "testing")]
    pub fn lie_in_echoes(&mut self, lie: fn(&SessionConfig) -> SessionConfig) {
        self.echo_lie = Some(lie);
    }

    /// The lie of [`Self::lie_in_echoes`], if any (copied out so that a session may be borrowed).
    #[cfg_attr(not(feature = "testing"), allow(clippy::unused_self))]
    fn echo_lie(&self) -> EchoLie {
        #[cfg(feature = "testing")]
        return self.echo_lie;
        #[cfg(not(feature = "testing"))]
        None
    }

    /// An empty table under `policy`, refused when a value is outside its documented range.
    pub fn try_new(policy: ProxyPolicy) -> Result<Self, crate::proxy::PolicyError> {
        policy.validate()?;
        Ok(Self::new(policy))
    }

    /// The session that owns `base` (announced to the engines), if any.
    pub fn flow_owner(&self, base: &BaseFlow) -> Option<SessionId> {
        self.flows.get(base).map(|(o, _)| *o)
    }

    /// Established sessions of one station (client IP address of their base flows).
    pub fn station_sessions(&self, station: IpAddr) -> usize {
        self.stations.get(&station).map_or(0, |s| s.sessions)
    }

    /// The policy.
    pub fn policy(&self) -> &ProxyPolicy {
        &self.policy
    }

    /// The policy, mutably: a running proxy changes its limits (a configuration reload).
    /// Changes apply to later requests (negotiation limits, discovery rates, idle timeout);
    /// nothing already granted is revisited.
    pub fn policy_mut(&mut self) -> &mut ProxyPolicy {
        &mut self.policy
    }
    /// Counters (refusal counters include sessions already removed).
    pub fn stats(&self) -> TableStats {
        let mut s = self.stats;
        for sess in self.sessions.values() {
            s.quota_refused += sess.stats.quota_refused;
            s.amplification_refused += sess.stats.amplification_refused;
            s.control_rate_limited += sess.stats.control_rate_limited;
        }
        s
    }
    /// Established sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    /// Whether no session is established.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
    /// Half-open entries.
    pub fn half_open_len(&self) -> usize {
        self.half_open.len()
    }
    /// One session.
    pub fn session(&self, id: &SessionId) -> Option<&ProxySession> {
        self.sessions.get(id)
    }
    /// Ids of all established sessions.
    pub fn session_ids(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.sessions.keys().copied()
    }

    fn take_token(&mut self, now: Time) -> bool {
        if let Some(at) = self.tokens_at {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            self.tokens = (self.tokens + dt * f64::from(self.policy.discovery_rate))
                .min(f64::from(self.policy.discovery_burst));
        }
        self.tokens_at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn random_u8(&self) -> u8 {
        let mut b = [0u8; 1];
        // Byte 0's low bits are cosmetic: on RNG failure they stay 0.
        let _ = self.rng.fill(&mut b);
        b[0]
    }

    /// Answers a discovery request seen on `base` (call after [`crate::is_discovery_request`]
    /// matched a payload travelling from `base.client` to `base.server`). Returns the reply to
    /// inject towards the client, spoofed from the server; it is never longer than the request.
    pub fn handle_discovery(
        &mut self,
        now: Time,
        base: BaseFlow,
        req: &DiscoveryRequest,
    ) -> Result<DiscoveryTransmit, Error> {
        // The station's own bucket first, so that one station cannot drain the shared one.
        let station = base.client.ip().to_canonical();
        if !self.take_station_token(station, now) {
            self.stats.station_rate_limited += 1;
            return Err(Error::RateLimited);
        }
        if !self.take_token(now) {
            self.stats.discovery_rate_limited += 1;
            return Err(Error::RateLimited);
        }
        if req.version < PROTOCOL_VERSION {
            self.stats.discovery_refused += 1;
            return Err(Error::UnsupportedVersion(req.version));
        }
        let mut id = SessionId::random(&self.rng)?;
        while self.sessions.contains_key(&id) || self.half_open.contains_key(&id) {
            id = SessionId::random(&self.rng)?;
        }
        let eph = Ephemeral::generate(&self.rng)?;
        let public_key = *eph.public();
        let key = match eph.agree(&req.public_key, &req.nonce, &id) {
            Ok(k) => k,
            Err(e) => {
                self.stats.discovery_refused += 1;
                return Err(e);
            }
        };
        let reply = DiscoveryReply {
            version: PROTOCOL_VERSION,
            capabilities: self.policy.capabilities as u8,
            nonce: req.nonce,
            session_id: id,
            public_key,
            sidekick_addr: self.policy.sidekick_addr,
            tag: [0; 16],
        };
        let bytes = reply.encode(self.random_u8(), &key);
        self.expire_half_open(now);
        self.make_half_open_room(station, now);
        while self.half_open.len() >= self.policy.max_half_open {
            let Some(old) = self.half_open_order.pop_front() else {
                break;
            };
            if let Some(h) = self.half_open.remove(&old) {
                self.count_half_open(h.station, now, -1);
                self.stats.half_open_evicted += 1;
            }
        }
        self.half_open.insert(
            id,
            HalfOpen {
                base,
                station,
                key,
                created: now,
            },
        );
        self.count_half_open(station, now, 1);
        self.half_open_order.push_back(id);
        self.stats.discovery_replies += 1;
        tracing::debug!(?id, client = %base.client, "discovery answered");
        Ok(DiscoveryTransmit {
            to: base.client,
            from: base.server,
            bytes,
        })
    }

    fn expire_half_open(&mut self, now: Time) {
        while let Some(id) = self.half_open_order.front().copied() {
            match self.half_open.get(&id) {
                None => {
                    self.half_open_order.pop_front();
                }
                Some(h)
                    if now.saturating_duration_since(h.created)
                        >= self.policy.half_open_timeout =>
                {
                    let station = h.station;
                    self.half_open.remove(&id);
                    self.half_open_order.pop_front();
                    self.count_half_open(station, now, -1);
                    self.stats.half_open_expired += 1;
                }
                Some(_) => break,
            }
        }
    }

    /// Handles a datagram received on the sidekick socket from `from`.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<ProxyEvent, Error> {
        self.stats.bytes_in += datagram.len() as u64;
        let header = match Header::peek(datagram) {
            Ok(h) => h,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        if header.msg_type == msg_type::INIT && datagram.len() < MIN_INIT_DATAGRAM {
            // Unpadded Init: the InitAck might not fit the zero-amplification budget.
            self.stats.malformed += 1;
            return Err(Error::Truncated {
                need: MIN_INIT_DATAGRAM,
                have: datagram.len(),
            });
        }
        let id = header.session_id;
        if self.sessions.contains_key(&id) {
            return self.handle_established(now, from, datagram);
        }
        let Some(h) = self.half_open.get(&id) else {
            self.stats.unknown_session += 1;
            return Err(Error::UnknownSession);
        };
        let f = match frame::open(datagram, &h.key, FrameDirection::ClientToProxy) {
            Ok(f) => f,
            Err(e) => {
                self.count_open_error(&e);
                return Err(e);
            }
        };
        let Message::Init(init) = f.message else {
            self.stats.refused += 1;
            return Err(Error::InvalidState("half-open session expects Init"));
        };
        if self.policy.bind_station && from.ip().to_canonical() != h.station {
            // Another station holds this session's key (it saw or guessed the reply): the
            // session stays the base client's to take.
            self.stats.station_mismatch += 1;
            return Err(Error::StationMismatch);
        }
        let Some(h) = self.half_open.remove(&id) else {
            return Err(Error::UnknownSession);
        };
        self.count_half_open(h.station, now, -1);
        let mut replay = ReplayWindow::new();
        replay.accept(f.header.seq)?;
        let negotiated = init
            .config
            .as_ref()
            .ok_or(crate::messages::ConfigError::NoMode)
            .and_then(|c| self.policy.negotiate(c));
        if negotiated.is_ok() {
            self.make_session_room(h.station, now);
        }
        let mut challenge = [0u8; 8];
        self.rng.fill(&mut challenge)?;
        let mut s = ProxySession {
            id,
            key: h.key,
            base: h.base,
            client_addr: from,
            validated: false,
            challenge: u64::from_be_bytes(challenge).max(1),
            challenge_pending: false,
            bytes_in_unverified: datagram.len() as u64,
            bytes_out_unverified: 0,
            next_seq: 1,
            quota_limit: u64::from(f.header.quota),
            replay,
            epoch: 0,
            config: negotiated.clone().unwrap_or_default(),
            last_config_id: 0,
            last_rx: now,
            pending_reset: None,
            stats: SessionStats {
                received: 1,
                ..SessionStats::default()
            },
            tag_len: self.policy.tag_len,
            amplification_factor: self.policy.amplification_factor,
            station: h.station,
            announced: false,
            probe: None,
            control_tokens: f64::from(self.policy.control_burst),
            control_at: now,
        };
        let echo = echo_of(&s, self.echo_lie());
        let ack = init_ack(
            &s,
            echo,
            negotiated.as_ref().err(),
            self.policy.capabilities,
        );
        let t = s.emit(&ack);
        self.queue(t);
        match negotiated {
            Ok(config) => {
                self.stats.established += 1;
                let base = s.base;
                if self.insert_session(now, s) {
                    Ok(ProxyEvent::SessionEstablished {
                        id,
                        base,
                        config,
                        epoch: 0,
                    })
                } else {
                    tracing::debug!(?id, "session waits: its base flow has an owner");
                    Ok(ProxyEvent::Nothing)
                }
            }
            Err(e) => {
                self.stats.refused += 1;
                Err(Error::InvalidConfig(e))
            }
        }
    }

    fn count_open_error(&mut self, e: &Error) {
        match e {
            Error::BadMac => self.stats.auth_failures += 1,
            _ => self.stats.refused += 1,
        }
    }

    fn queue(&mut self, t: Result<Transmit, Error>) {
        match t {
            Ok(t) => {
                if self.outbox.len() >= self.policy.outbox_cap {
                    self.stats.outbox_dropped += 1;
                    self.outbox.pop_front();
                }
                self.outbox.push_back(t);
            }
            Err(e) => tracing::debug!(%e, "control message not sent"),
        }
    }

    /// Folds a removed session's refusal counters into the table's totals.
    fn retire(&mut self, s: &ProxySession) {
        self.stats.quota_refused += s.stats.quota_refused;
        self.stats.amplification_refused += s.stats.amplification_refused;
        self.stats.control_rate_limited += s.stats.control_rate_limited;
    }

    fn push_event(&mut self, ev: ProxyEvent) {
        if self.events.len() >= self.policy.max_events.max(1) {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(ev);
    }

    /// Events currently queued (at most [`ProxyPolicy::max_events`]).
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// Control datagrams currently queued (at most [`ProxyPolicy::outbox_cap`]).
    pub fn pending_transmits(&self) -> usize {
        self.outbox.len()
    }

    /// Next control datagram to send from the sidekick socket.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.outbox.pop_front()?;
        self.stats.bytes_out += t.bytes.len() as u64;
        Some(t)
    }

    /// Next event produced by timers or evictions.
    pub fn poll_event(&mut self) -> Option<ProxyEvent> {
        self.events.pop_front()
    }

    /// When [`ProxySessionTable::handle_timeout`] must next be called (possibly a little early:
    /// see `table/deadlines.rs`). O(1).
    pub fn poll_timeout(&self) -> Option<Time> {
        let ho = self
            .half_open_order
            .front()
            .and_then(|id| self.half_open.get(id))
            .map(|h| h.created + self.policy.half_open_timeout);
        let sessions = if self.filed_idle == self.policy.idle_timeout {
            self.deadlines.next()
        } else {
            // The idle timeout changed (a configuration reload): refile at the next call.
            self.sessions.values().map(|s| s.last_rx).min()
        };
        sessions.into_iter().chain(ho).min()
    }

    /// Expires idle sessions and half-open entries, retransmits pending Resets. Visits only the
    /// sessions whose deadline is due.
    pub fn handle_timeout(&mut self, now: Time) {
        self.expire_half_open(now);
        let idle = self.policy.idle_timeout;
        if self.filed_idle != idle {
            self.deadlines.clear();
            for s in self.sessions.values() {
                self.deadlines.file(s.id, s.next_deadline(idle));
            }
            self.filed_idle = idle;
        }
        let max_backoff = Duration::from_secs(2).max(self.policy.reset_retry);
        let attempts = self.policy.reset_attempts;
        let mut out = Vec::new();
        for id in self.deadlines.pop_due(now) {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            if now.saturating_duration_since(s.last_rx) >= idle {
                self.remove_session(now, &id, Removal::Expired);
                continue;
            }
            if let Some((e, reason, r)) = s.pending_reset.as_mut()
                && r.next <= now
            {
                if r.attempts >= attempts {
                    s.pending_reset = None;
                } else {
                    r.step(now, max_backoff);
                    let m = Message::Reset(Reset {
                        epoch: *e,
                        reason: *reason,
                    });
                    out.push(s.emit(&m));
                }
            }
            let next = s.next_deadline(idle);
            self.deadlines.file(id, next);
        }
        for t in out {
            self.queue(t);
        }
    }

    /// Entries in the timer index, stale ones included (bounded by the sessions and the Resets
    /// of the last idle timeout).
    pub fn deadline_entries(&self) -> usize {
        self.deadlines.len()
    }
}

pub use crate::table_fuzz::fuzz_table;

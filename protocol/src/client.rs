//! The client side of a sidekick session: a sans-IO state machine with explicit `now`.
//!
//! ```text
//!  Idle ──start──▶ Discovering ──reply──▶ Initiating ──InitAck(accepted)──▶ Established
//!                      │ retries out          │ retries out / rejected          │ idle timeout,
//!                      ▼                      ▼                                 ▼ Close, control
//!                   Failed (Fallback event) ◀─┘                         Closed / Failed (Fallback)
//! ```
//!
//! The application (the client SDK) feeds datagrams from its base socket to
//! [`ClientSession::handle_base_datagram`] (only those passing [`crate::is_discovery_reply`]),
//! datagrams from its sidekick socket to [`ClientSession::handle_datagram`], sends what
//! [`ClientSession::poll_transmit`] returns, and calls [`ClientSession::handle_timeout`] at
//! [`ClientSession::poll_timeout`]. Any [`ClientEvent::Fallback`] means: continue with plain
//! end-to-end behaviour (fail open, docs/architecture.md).

use crate::Time;
use std::collections::VecDeque;
use std::net::SocketAddr;

use ring::rand::{SecureRandom, SystemRandom};

use crate::discovery::{DiscoveryReply, DiscoveryRequest, is_discovery_reply};
use crate::error::Error;
use crate::frame::{self, Header};
use crate::keys::{Ephemeral, NONCE_LEN, SessionId, SessionKey, ct_eq};
use crate::messages::{
    Close, Config, Eack, ErrorMsg, FrameDirection, Init, Message, Refresh, Reset, SessionConfig,
};
use crate::replay::ReplayWindow;
use crate::{PROTOCOL_VERSION, Retry};

pub use crate::client_types::{
    ClientConfig, ClientEvent, ClientState, ClientStats, ClientTransmit, Destination,
    FallbackReason,
};

/// The client side of one sidekick session. See the module docs for the driving loop.
///
/// ```
/// use sidekick_protocol::Time;
/// use sidekick_protocol::{ClientConfig, ClientSession, ClientState, Destination};
/// use sidekick_protocol::messages::{IdentifierSpec, RobinConfig, SessionConfig};
///
/// let cfg = SessionConfig {
///     robin: Some(RobinConfig {
///         interval_ms: 30,
///         interval_packets: 0,
///         threshold: 10,
///         quack_on_gap_percent: 0,
///     }),
///     packrat: None,
///     identifier: Some(IdentifierSpec::quic_default()),
/// };
/// let now = Time::ZERO;
/// let mut client = ClientSession::new(ClientConfig::new(cfg));
/// client.start(now).unwrap();
/// assert_eq!(client.state(), ClientState::Discovering);
/// let t = client.poll_transmit().unwrap();
/// assert_eq!(t.dest, Destination::Base); // the 128-byte request goes inline on the base path
/// assert!(sidekick_protocol::is_discovery_request(&t.bytes).is_some());
/// ```
#[derive(Debug)]
pub struct ClientSession {
    cfg: ClientConfig,
    rng: SystemRandom,
    state: ClientState,
    // Discovery.
    ephemeral: Option<Ephemeral>,
    nonce: [u8; NONCE_LEN],
    request: Option<[u8; crate::DISCOVERY_LEN]>,
    disc_retry: Option<Retry>,
    // Session.
    session_id: Option<SessionId>,
    key: Option<SessionKey>,
    proxy: Option<SocketAddr>,
    next_seq: u64,
    replay: ReplayWindow,
    init_retry: Option<Retry>,
    negotiated: Option<SessionConfig>,
    epoch: u32,
    pending_config: Option<(u32, SessionConfig, Retry)>,
    next_config_id: u32,
    pending_reset: Option<(u32, Retry)>,
    path_response: u64,
    /// The latest path response was sent but not yet confirmed by the proxy's reply: resent on
    /// this timer. Until the proxy has it, its anti-amplification limit (Sidekick (NSDI '24) §4.1) holds
    /// back nearly every quACK, so a lost response must not wait for the next keepalive.
    path_retry: Option<Retry>,
    // Quota.
    max_proxy_seq: u64,
    granted: u32,
    proxy_remaining: u32,
    // Timers.
    last_rx: Option<Time>,
    last_tx: Option<Time>,
    next_refresh: Option<Time>,
    outbox: VecDeque<ClientTransmit>,
    events: VecDeque<ClientEvent>,
    stats: ClientStats,
}

impl ClientSession {
    /// A new, idle session.
    pub fn new(cfg: ClientConfig) -> Self {
        ClientSession {
            cfg,
            rng: SystemRandom::new(),
            state: ClientState::Idle,
            ephemeral: None,
            nonce: [0; NONCE_LEN],
            request: None,
            disc_retry: None,
            session_id: None,
            key: None,
            proxy: None,
            next_seq: 1,
            replay: ReplayWindow::new(),
            init_retry: None,
            negotiated: None,
            epoch: 0,
            pending_config: None,
            next_config_id: 1,
            pending_reset: None,
            path_response: 0,
            path_retry: None,
            max_proxy_seq: 0,
            granted: 0,
            proxy_remaining: 0,
            last_rx: None,
            last_tx: None,
            next_refresh: None,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    /// Current state.
    pub fn state(&self) -> ClientState {
        self.state
    }
    /// Current epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// Configuration in force once established.
    pub fn config(&self) -> Option<&SessionConfig> {
        self.negotiated.as_ref()
    }
    /// Session id once discovered.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session_id
    }
    /// Proxy's sidekick address once discovered.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.proxy
    }
    /// Further messages the proxy said it may send (from its latest frame).
    pub fn proxy_quota_remaining(&self) -> u32 {
        self.proxy_remaining
    }
    /// The highest proxy sequence number this client has authorised so far.
    pub fn quota_granted(&self) -> u32 {
        self.granted
    }
    /// Counters.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    fn random_u8(&self) -> u8 {
        let mut b = [0u8; 1];
        // On RNG failure the byte stays 0: byte 0 is cosmetic, only its top two bits matter.
        let _ = self.rng.fill(&mut b);
        b[0]
    }

    fn push_out(&mut self, t: ClientTransmit) {
        if self.outbox.len() >= self.cfg.outbox_cap {
            self.stats.outbox_dropped += 1;
            self.outbox.pop_front();
        }
        self.stats.sent += 1;
        self.outbox.push_back(t);
    }

    fn fail(&mut self, reason: FallbackReason) -> ClientEvent {
        tracing::debug!(?reason, "sidekick client falls back to end-to-end");
        self.state = ClientState::Failed;
        self.disc_retry = None;
        self.init_retry = None;
        self.pending_config = None;
        self.pending_reset = None;
        self.path_retry = None;
        self.next_refresh = None;
        self.ephemeral = None;
        ClientEvent::Fallback(reason)
    }

    fn new_discovery(&mut self) -> Result<(), Error> {
        let eph = Ephemeral::generate(&self.rng)?;
        self.rng.fill(&mut self.nonce)?;
        let req = DiscoveryRequest {
            version: PROTOCOL_VERSION,
            capabilities: self.cfg.session.capabilities() as u8,
            nonce: self.nonce,
            public_key: *eph.public(),
        };
        self.request = Some(req.encode(self.random_u8()));
        self.ephemeral = Some(eph);
        Ok(())
    }

    /// Starts discovery: queues a request for the base path and arms the retry timer.
    pub fn start(&mut self, now: Time) -> Result<(), Error> {
        if self.state != ClientState::Idle {
            return Err(Error::InvalidState("start: not idle"));
        }
        self.cfg.session.validate()?;
        self.new_discovery()?;
        self.state = ClientState::Discovering;
        self.send_request();
        self.disc_retry = Some(Retry::new(now, self.cfg.discovery_retry));
        Ok(())
    }

    fn send_request(&mut self) {
        if let Some(r) = self.request {
            self.push_out(ClientTransmit {
                dest: Destination::Base,
                bytes: r.to_vec(),
            });
        }
    }

    /// The quota limit to put in the next frame: highest proxy seq seen + window.
    fn grant(&self) -> u32 {
        (self.max_proxy_seq + u64::from(self.cfg.quota_window)).min(u64::from(u32::MAX)) as u32
    }

    fn send(&mut self, now: Time, msg: &Message) -> Result<(), Error> {
        self.send_padded(now, msg, 0)
    }

    fn send_padded(&mut self, now: Time, msg: &Message, min_len: usize) -> Result<(), Error> {
        let (Some(sid), Some(key), Some(proxy)) = (self.session_id, self.key.as_ref(), self.proxy)
        else {
            return Err(Error::InvalidState("no session"));
        };
        let grant = self.grant();
        let bytes = frame::seal_padded(
            FrameDirection::ClientToProxy,
            self.cfg.tag_len,
            sid,
            self.next_seq,
            grant,
            msg,
            key,
            min_len,
        )?;
        self.next_seq += 1;
        self.granted = self.granted.max(grant);
        self.last_tx = Some(now);
        self.push_out(ClientTransmit {
            dest: Destination::Sidekick(proxy),
            bytes,
        });
        Ok(())
    }

    fn send_init(&mut self, now: Time) -> Result<(), Error> {
        let m = Message::Init(Init {
            capabilities: self.cfg.session.capabilities(),
            config: Some(self.cfg.session.clone()),
        });
        // Padded so the proxy's InitAck never exceeds what it received (zero amplification).
        self.send_padded(now, &m, frame::MIN_INIT_DATAGRAM)
    }

    /// Sends the path response, asking for a reply that confirms it (resent until then).
    fn answer_challenge(&mut self, now: Time) -> Result<(), Error> {
        if self.path_response == 0 {
            return self.send_refresh(now, false);
        }
        self.path_retry = Some(Retry::new(now, self.cfg.control_retry));
        self.send_refresh(now, true)
    }

    fn send_refresh(&mut self, now: Time, want_reply: bool) -> Result<(), Error> {
        self.stats.refreshes += 1;
        let m = Message::Refresh(Refresh {
            path_response: self.path_response,
            want_reply,
        });
        self.send(now, &m)
    }

    /// Handles a datagram from the base socket that passed [`is_discovery_reply`].
    pub fn handle_base_datagram(
        &mut self,
        now: Time,
        payload: &[u8],
    ) -> Result<ClientEvent, Error> {
        if !is_discovery_reply(payload) {
            return Err(Error::BadMagic);
        }
        if self.state != ClientState::Discovering {
            return Err(Error::InvalidState("discovery reply outside discovery"));
        }
        let reply = DiscoveryReply::decode(payload)?;
        if reply.version != PROTOCOL_VERSION {
            return Err(Error::UnsupportedVersion(reply.version));
        }
        // Off-path replies cannot know the nonce: reject before touching the key.
        if !ct_eq(&reply.nonce, &self.nonce) {
            return Err(Error::DiscoveryMismatch);
        }
        let Some(eph) = self.ephemeral.take() else {
            return Err(Error::InvalidState("no ephemeral key"));
        };
        let key = eph.agree(&reply.public_key, &self.nonce, &reply.session_id);
        let key = match key {
            Ok(k) if DiscoveryReply::verify_tag(payload, &k) => k,
            _ => {
                // An on-path forger consumed our key: start over with a fresh request at the
                // next retry.
                self.new_discovery()?;
                return Err(Error::DiscoveryMismatch);
            }
        };
        if let Err(refusal) = self.check_proxy_addr(reply.sidekick_addr) {
            // An on-path box that holds the key of this reply points us at our own host or at
            // a group: send nothing there and continue end to end.
            self.stats.sidekick_addr_refused += 1;
            let ev = self.fail(FallbackReason::SidekickAddr(refusal));
            self.events.push_back(ev);
            return Err(Error::RefusedSidekickAddr(refusal));
        }
        self.session_id = Some(reply.session_id);
        self.key = Some(key);
        self.proxy = Some(reply.sidekick_addr);
        self.disc_retry = None;
        self.request = None;
        self.state = ClientState::Initiating;
        self.last_rx = Some(now);
        self.send_init(now)?;
        self.init_retry = Some(Retry::new(now, self.cfg.init_retry));
        Ok(ClientEvent::Discovered {
            proxy: reply.sidekick_addr,
        })
    }

    /// Handles a datagram received on the sidekick socket from `from`.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<ClientEvent, Error> {
        let r = self.handle_datagram_inner(now, from, datagram);
        if r.is_err() {
            self.stats.rejected += 1;
        }
        r
    }

    fn handle_datagram_inner(
        &mut self,
        now: Time,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<ClientEvent, Error> {
        if !matches!(
            self.state,
            ClientState::Initiating | ClientState::Established
        ) {
            return Err(Error::InvalidState("no live session"));
        }
        if Some(from) != self.proxy {
            return Err(Error::UnexpectedSource);
        }
        let header = Header::peek(datagram)?;
        if Some(header.session_id) != self.session_id {
            return Err(Error::UnknownSession);
        }
        let Some(key) = self.key.as_ref() else {
            return Err(Error::InvalidState("no key"));
        };
        let f = frame::open(datagram, key, FrameDirection::ProxyToClient)?;
        if f.header.seq > u64::from(self.granted) {
            // The proxy sent beyond what this client authorised (Sidekick (NSDI '24) §4.1 quota): a
            // protocol violation, dropped without acting on it.
            return Err(Error::QuotaExhausted);
        }
        self.replay.accept(f.header.seq)?;
        self.stats.received += 1;
        self.last_rx = Some(now);
        self.max_proxy_seq = self.max_proxy_seq.max(f.header.seq);
        self.proxy_remaining = f.header.quota;
        let ev = self.dispatch(now, f.message)?;
        // Data-driven quota refresh: the proxy has used half of the last grant.
        if self.state == ClientState::Established
            && self.grant().saturating_sub(self.granted) >= self.cfg.quota_window / 2
        {
            self.send_refresh(now, false)?;
        }
        Ok(ev)
    }

    fn dispatch(&mut self, now: Time, msg: Message) -> Result<ClientEvent, Error> {
        match msg {
            Message::InitAck(a) => {
                if self.state == ClientState::Established {
                    // Duplicate (our Init was retransmitted): answer its challenge again.
                    self.path_response = a.path_challenge;
                    self.answer_challenge(now)?;
                    return Ok(ClientEvent::Nothing);
                }
                self.init_retry = None;
                if !a.accepted {
                    return Ok(self.fail(FallbackReason::Rejected(a.reject_code)));
                }
                let Some(config) = a.config else {
                    return Err(Error::InvalidConfig(crate::messages::ConfigError::NoMode));
                };
                let requested = self.cfg.session.clone();
                let config = match self.accept_echo(now, &requested, &config) {
                    Ok(c) => c,
                    Err(fallback) => return Ok(fallback),
                };
                self.negotiated = Some(config.clone());
                self.epoch = a.epoch;
                self.path_response = a.path_challenge;
                self.state = ClientState::Established;
                self.answer_challenge(now)?;
                self.next_refresh = Some(now + self.cfg.refresh_interval);
                Ok(ClientEvent::Established {
                    config,
                    epoch: a.epoch,
                })
            }
            _ if self.state != ClientState::Established => {
                Err(Error::InvalidState("message before InitAck"))
            }
            Message::Quack(q) => {
                self.check_epoch(q.epoch)?;
                Ok(ClientEvent::Quack {
                    epoch: q.epoch,
                    data: q.data,
                })
            }
            Message::Config(c) => {
                let Some((id, requested, _)) = &self.pending_config else {
                    return Ok(ClientEvent::Nothing);
                };
                if *id != c.config_id {
                    return Ok(ClientEvent::Nothing);
                }
                let requested = requested.clone();
                self.pending_config = None;
                if !c.accepted {
                    return Ok(ClientEvent::ConfigRejected {
                        config_id: c.config_id,
                    });
                }
                let Some(config) = c.config else {
                    return Err(Error::InvalidConfig(crate::messages::ConfigError::NoMode));
                };
                let config = match self.accept_echo(now, &requested, &config) {
                    Ok(c) => c,
                    Err(fallback) => return Ok(fallback),
                };
                self.negotiated = Some(config.clone());
                self.epoch = self.epoch.max(c.epoch);
                Ok(ClientEvent::Reconfigured {
                    config,
                    epoch: self.epoch,
                })
            }
            Message::Reset(r) => {
                if r.epoch < self.epoch {
                    return Err(Error::StaleEpoch {
                        got: r.epoch,
                        current: self.epoch,
                    });
                }
                if r.epoch == self.epoch {
                    if matches!(self.pending_reset, Some((e, _)) if e == r.epoch) {
                        self.pending_reset = None;
                        return Ok(ClientEvent::ResetAcked { epoch: r.epoch });
                    }
                    // The proxy retransmitted a Reset we already adopted: echo again.
                    self.send(now, &Message::Reset(r))?;
                    return Ok(ClientEvent::Nothing);
                }
                self.epoch = r.epoch;
                if matches!(self.pending_reset, Some((e, _)) if e <= r.epoch) {
                    self.pending_reset = None;
                }
                self.send(
                    now,
                    &Message::Reset(Reset {
                        epoch: r.epoch,
                        reason: r.reason,
                    }),
                )?;
                Ok(ClientEvent::ResetByProxy {
                    epoch: r.epoch,
                    reason: r.reason,
                })
            }
            Message::Close(c) => {
                self.state = ClientState::Closed;
                self.next_refresh = None;
                self.pending_config = None;
                self.pending_reset = None;
                Ok(ClientEvent::Closed { reason: c.reason })
            }
            Message::Error(e) => Ok(ClientEvent::ProxyError {
                code: e.code,
                detail: e.detail,
            }),
            Message::Refresh(_) => {
                // The answer to a want-reply Refresh: the proxy has our path response.
                self.path_retry = None;
                Ok(ClientEvent::Nothing)
            }
            Message::Challenge(c) => {
                self.path_response = c.token;
                self.answer_challenge(now)?;
                Ok(ClientEvent::Nothing)
            }
            Message::EackOutcome(o) => {
                self.check_epoch(o.epoch)?;
                Ok(ClientEvent::EackOutcome {
                    epoch: o.epoch,
                    resent: o.resent,
                    eack_number: o.eack_number,
                })
            }
            // `frame::open` already refused client-only types in this direction.
            Message::Init(_) | Message::Eack(_) => Err(Error::WrongDirection(msg.msg_type())),
        }
    }

    fn check_epoch(&self, got: u32) -> Result<(), Error> {
        match got.cmp(&self.epoch) {
            std::cmp::Ordering::Less => Err(Error::StaleEpoch {
                got,
                current: self.epoch,
            }),
            std::cmp::Ordering::Greater => Err(Error::EpochAhead {
                got,
                current: self.epoch,
            }),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// Requests a new configuration; returns its id. The proxy's echo yields
    /// [`ClientEvent::Reconfigured`] (new epoch) or [`ClientEvent::ConfigRejected`].
    pub fn reconfigure(&mut self, now: Time, config: SessionConfig) -> Result<u32, Error> {
        if self.state != ClientState::Established {
            return Err(Error::InvalidState("reconfigure: not established"));
        }
        config.validate()?;
        let id = self.next_config_id;
        self.next_config_id = self.next_config_id.wrapping_add(1).max(1);
        self.send_config(now, id, &config)?;
        self.pending_config = Some((id, config, Retry::new(now, self.cfg.control_retry)));
        Ok(id)
    }

    fn send_config(&mut self, now: Time, id: u32, config: &SessionConfig) -> Result<(), Error> {
        let m = Message::Config(Config {
            config_id: id,
            config: Some(config.clone()),
            accepted: false,
            epoch: 0,
        });
        self.send(now, &m)
    }

    /// Starts a new epoch (Sidekick (NSDI '24) §4.2 "Resets"); returns it. Quacks of older epochs are
    /// refused from now on; the proxy's echo yields [`ClientEvent::ResetAcked`].
    pub fn reset(&mut self, now: Time, reason: u32) -> Result<u32, Error> {
        if self.state != ClientState::Established {
            return Err(Error::InvalidState("reset: not established"));
        }
        let e = self.epoch.wrapping_add(1);
        self.epoch = e;
        self.send(now, &Message::Reset(Reset { epoch: e, reason }))?;
        self.pending_reset = Some((e, Retry::new(now, self.cfg.control_retry)));
        Ok(e)
    }

    /// Queues an eACK for the current epoch (opaque bytes from the eack crate).
    pub fn send_eack(&mut self, now: Time, data: &[u8]) -> Result<(), Error> {
        self.send_eack_with_gaps(now, data, 0, 0)
    }

    /// Sends eACK `number` saying how many packet-number gaps the client holds open; with
    /// `open_gaps > 0` the proxy answers with [`ClientEvent::EackOutcome`] (naming `number`)
    /// when it can repair none of them.
    pub fn send_eack_with_gaps(
        &mut self,
        now: Time,
        data: &[u8],
        open_gaps: u32,
        number: u32,
    ) -> Result<(), Error> {
        if self.state != ClientState::Established {
            return Err(Error::InvalidState("eack: not established"));
        }
        let m = Message::Eack(Eack {
            epoch: self.epoch,
            data: data.to_vec(),
            open_gaps,
            number,
        });
        self.send(now, &m)
    }

    /// Reports an error to the proxy.
    pub fn send_error(&mut self, now: Time, code: u32, detail: &str) -> Result<(), Error> {
        let mut d = detail.to_owned();
        d.truncate(crate::messages::MAX_ERROR_DETAIL);
        while !d.is_empty() && std::str::from_utf8(d.as_bytes()).is_err() {
            d.pop();
        }
        self.send(now, &Message::Error(ErrorMsg { code, detail: d }))
    }

    /// Closes the session (one unacknowledged Close; the proxy expires the state otherwise).
    pub fn close(&mut self, now: Time, reason: u32) {
        if matches!(
            self.state,
            ClientState::Initiating | ClientState::Established
        ) {
            // Best effort: a failure to seal only means the proxy times the session out.
            let _ = self.send(now, &Message::Close(Close { reason }));
        }
        self.state = ClientState::Closed;
        self.disc_retry = None;
        self.init_retry = None;
        self.pending_config = None;
        self.pending_reset = None;
        self.path_retry = None;
        self.next_refresh = None;
    }

    /// Next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<ClientTransmit> {
        self.outbox.pop_front()
    }

    /// Next event generated by a timer (fallbacks).
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    fn idle_deadline(&self) -> Option<Time> {
        match self.state {
            ClientState::Established | ClientState::Initiating => {
                self.last_rx.map(|t| t + self.cfg.idle_timeout)
            }
            _ => None,
        }
    }

    /// When [`ClientSession::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        [
            self.disc_retry.as_ref().map(|r| r.next),
            self.init_retry.as_ref().map(|r| r.next),
            self.pending_config.as_ref().map(|(_, _, r)| r.next),
            self.pending_reset.as_ref().map(|(_, r)| r.next),
            self.path_retry.as_ref().map(|r| r.next),
            self.next_refresh,
            self.idle_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers due at `now`; resulting fallbacks are available from
    /// [`ClientSession::poll_event`].
    pub fn handle_timeout(&mut self, now: Time) {
        let max_backoff = self.cfg.max_backoff;
        if let Some(r) = self.disc_retry.as_mut().filter(|r| r.next <= now) {
            if r.attempts >= self.cfg.discovery_attempts {
                let e = self.fail(FallbackReason::NoProxy);
                self.events.push_back(e);
                return;
            }
            r.step(now, max_backoff);
            self.stats.retransmissions += 1;
            if self.ephemeral.is_none() && self.new_discovery().is_err() {
                let e = self.fail(FallbackReason::NoProxy);
                self.events.push_back(e);
                return;
            }
            self.send_request();
        }
        if let Some(r) = self.init_retry.as_mut().filter(|r| r.next <= now) {
            if r.attempts >= self.cfg.init_attempts {
                let e = self.fail(FallbackReason::InitTimeout);
                self.events.push_back(e);
                return;
            }
            r.step(now, max_backoff);
            self.stats.retransmissions += 1;
            if self.send_init(now).is_err() {
                let e = self.fail(FallbackReason::InitTimeout);
                self.events.push_back(e);
                return;
            }
        }
        if let Some(deadline) = self.idle_deadline()
            && deadline <= now
        {
            let e = self.fail(FallbackReason::IdleTimeout);
            self.events.push_back(e);
            return;
        }
        let mut control_failed = false;
        if let Some((id, cfg, r)) = self.pending_config.as_mut().filter(|p| p.2.next <= now) {
            if r.attempts >= self.cfg.control_attempts {
                control_failed = true;
            } else {
                r.step(now, max_backoff);
                let (id, cfg) = (*id, cfg.clone());
                self.stats.retransmissions += 1;
                control_failed |= self.send_config(now, id, &cfg).is_err();
            }
        }
        if let Some((e, r)) = self.pending_reset.as_mut().filter(|p| p.1.next <= now) {
            if r.attempts >= self.cfg.control_attempts {
                control_failed = true;
            } else {
                r.step(now, max_backoff);
                let e = *e;
                self.stats.retransmissions += 1;
                control_failed |= self
                    .send(
                        now,
                        &Message::Reset(Reset {
                            epoch: e,
                            reason: 0,
                        }),
                    )
                    .is_err();
            }
        }
        if control_failed {
            let e = self.fail(FallbackReason::ControlTimeout);
            self.events.push_back(e);
            return;
        }
        if let Some(r) = self.path_retry.as_mut().filter(|r| r.next <= now) {
            // Not fatal when it never gets through: the idle timer decides.
            if r.attempts >= self.cfg.init_attempts {
                self.path_retry = None;
            } else {
                r.step(now, max_backoff);
                self.stats.retransmissions += 1;
                let _ = self.send_refresh(now, true);
            }
        }
        if let Some(t) = self.next_refresh
            && t <= now
        {
            self.next_refresh = Some(now + self.cfg.refresh_interval);
            let quiet = self
                .last_rx
                .is_none_or(|rx| now.duration_since(rx) >= self.cfg.idle_timeout / 3);
            let keepalive_due = self
                .last_tx
                .is_none_or(|tx| now.duration_since(tx) >= self.cfg.idle_timeout / 3);
            if quiet || keepalive_due || self.grant() > self.granted {
                // A failed seal here is not fatal; the idle timer decides.
                let _ = self.send_refresh(now, quiet);
            }
        }
    }
}

#[path = "client_trust.rs"]
mod trust;

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;

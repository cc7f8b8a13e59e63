//! Session glue: discovery, the sidekick connection, the engines, and fallback.
//!
//! [`SidekickClient`] is the sans-IO object an adapter drives. It wraps the protocol's
//! [`ClientSession`] (discovery marker on the base 4-tuple, Init/InitAck, Config, Reset, Close,
//! quota refresh, idle timeout) and runs the Robin sender and the Packrat receiver on the base
//! connection's datagrams, with packet numbers from the [`PacketNumberLens`].
//!
//! Fail open (docs/architecture.md): on no proxy, a proxy gone silent, or anything inconsistent about the
//! sidekick — forged, stale or undecodable quACKs, a proxy exceeding its quota, receipts of
//! packets never sent, repeated eACK resets — the client counts the cause, closes the session
//! and continues with plain end-to-end behaviour: every held datagram is released, nothing more
//! is held or logged, and no quACK-driven event is produced.
//!
//! ```
//! use std::time::Instant;
//! use sidekick::session::{SidekickClient, SidekickConfig, Transmit};
//!
//! let now = Instant::now();
//! let mut client = SidekickClient::new(SidekickConfig::robin(30, 10));
//! client.start(now).unwrap();
//! // The discovery request goes out inline on the base socket.
//! assert!(matches!(client.poll_transmit(), Some(Transmit::Base(b)) if b.len() == 128));
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use quack::IdSource;
use sidekick_protocol::messages::{IdentifierMode, IdentifierSpec, SessionConfig};
use sidekick_protocol::{
    ClientEvent, ClientSession, ClientState, Destination, Time, is_discovery_reply,
};

use crate::lens::{DatagramDirection, PacketNumberLens, Role};
use crate::packrat::PackratReceiver;
use crate::robin::{QuackError, RobinEvent, RobinSender};

#[path = "session_assess.rs"]
mod assess;
#[path = "session_types.rs"]
mod types;
pub use types::{Engine, FallbackCause, SdkEvent, SdkStats, SidekickConfig, Transmit};

/// Cap on queued events and transmits.
const MAX_QUEUE: usize = 4096;

/// Send times of the newest base packets whose number the lens read, for RTT samples from the
/// peer's ACK frames.
const SENT_TIMES_CAP: usize = 512;

/// eACKs whose number and send time are kept for the proxy's outcomes (an outcome answers an
/// eACK within a near round trip; older ones no longer matter).
const EACKS_REMEMBERED: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Idle,
    Probing,
    Active,
    Fallback(FallbackCause),
}

/// The sidekick client (sans-IO).
#[derive(Debug)]
pub struct SidekickClient {
    config: SidekickConfig,
    session: ClientSession,
    lens: PacketNumberLens,
    robin: Option<RobinSender>,
    packrat: Option<PackratReceiver>,
    mode: Mode,
    transmits: VecDeque<Transmit>,
    events: VecDeque<SdkEvent>,
    /// Datagrams received on the base socket that the stack may see (when not held).
    deliver: VecDeque<Vec<u8>>,
    /// (packet number, send time) of the newest base packets sent, increasing.
    sent_times: VecDeque<(u64, Instant)>,
    /// Base datagrams sent since discovery started or the last reconfiguration was requested:
    /// at most this many of them can the proxy have counted before a fresh Robin engine logged
    /// anything ([`RobinSender::set_unlogged_sends`]).
    sent_since_request: u64,
    /// The numbers and send times of the latest eACKs (an eACK outcome names one).
    eacks_sent: VecDeque<(u32, Instant)>,
    passthrough: VecDeque<(SocketAddr, Vec<u8>)>,
    resets: VecDeque<Instant>,
    /// The instant the protocol session's clock counts from (the first `now` this client saw).
    protocol_origin: Option<Instant>,
    /// Packrat (filled, expired) gap counts at the start of the current assessment.
    hold_base: (u64, u64),
    /// Robin (assessed, unneeded) resend counts at the start of the current assessment.
    resend_base: (u64, u64),
    e2e_min_rtt: Option<Duration>,
    stats: SdkStats,
}

fn id_source(spec: Option<&IdentifierSpec>) -> IdSource {
    match spec {
        Some(s) if s.mode == IdentifierMode::KeyedHash as i32 => {
            let mut key = [0u8; 16];
            let n = s.hash_key.len().min(16);
            key[..n].copy_from_slice(&s.hash_key[..n]);
            IdSource::KeyedHash(key)
        }
        Some(s) => IdSource::Offset(s.offset as isize),
        None => IdSource::QUIC_DEFAULT,
    }
}

impl SidekickClient {
    /// A client that has not started discovery.
    pub fn new(config: SidekickConfig) -> Self {
        Self {
            session: ClientSession::new(config.protocol.clone()),
            lens: PacketNumberLens::new(Role::Client),
            robin: None,
            packrat: None,
            mode: Mode::Idle,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            deliver: VecDeque::new(),
            sent_times: VecDeque::new(),
            sent_since_request: 0,
            eacks_sent: VecDeque::new(),
            passthrough: VecDeque::new(),
            resets: VecDeque::new(),
            protocol_origin: None,
            hold_base: (0, 0),
            resend_base: (0, 0),
            e2e_min_rtt: None,
            stats: SdkStats::default(),
            config,
        }
    }

    /// The base connection's peer: when it is a loopback address the whole path is inside this
    /// host, and a proxy answering from a loopback or local address is accepted; otherwise
    /// such a sidekick address is refused (an impostor pointing the client at its own host).
    pub fn set_base_peer(&mut self, peer: SocketAddr) {
        self.session
            .set_allow_local_sidekick(peer.ip().to_canonical().is_loopback());
    }

    /// Addresses of this host, refused as sidekick addresses (see
    /// [`crate::local_addrs::host_addresses`]).
    pub fn add_local_addrs(&mut self, addrs: impl IntoIterator<Item = std::net::IpAddr>) {
        self.session.add_local_addrs(addrs);
    }

    /// The packet-number lens (feed it the stack's key log).
    pub fn lens_mut(&mut self) -> &mut PacketNumberLens {
        &mut self.lens
    }

    /// The packet-number lens.
    pub fn lens(&self) -> &PacketNumberLens {
        &self.lens
    }

    /// The session configuration in force (the proxy's echo), once established.
    pub fn session_config(&self) -> Option<&SessionConfig> {
        self.session.config()
    }

    /// The Robin engine while the session is active.
    pub fn robin(&self) -> Option<&RobinSender> {
        self.robin.as_ref()
    }

    /// The Packrat engine while the session is active.
    pub fn packrat(&self) -> Option<&PackratReceiver> {
        self.packrat.as_ref()
    }

    /// The protocol session. Its times are [`Time`]s counted from the first instant this client
    /// was given (the SDK converts at each call; the protocol reads no clock).
    pub fn protocol(&self) -> &ClientSession {
        &self.session
    }

    /// Counters.
    pub fn stats(&self) -> SdkStats {
        self.stats
    }

    /// Whether the sidekick is in use.
    pub fn is_active(&self) -> bool {
        self.mode == Mode::Active
    }

    /// Why the client fell back, if it did.
    pub fn fallback_cause(&self) -> Option<FallbackCause> {
        match self.mode {
            Mode::Fallback(c) => Some(c),
            _ => None,
        }
    }

    /// Asks the proxy for another configuration mid-session (Sidekick (NSDI '24) §5.2 lets a
    /// client change its quACK interval and threshold as the path changes; the same holds for
    /// Packrat's eACK settings); returns the request's id. The proxy's answer must be a clamp
    /// of `config`, checked like the first one: accepted, it starts a new epoch with fresh
    /// engines (datagrams held by the old Packrat engine are released in order); refused, the
    /// session keeps its configuration. Only while the session is established.
    ///
    /// ```
    /// use std::time::Instant;
    /// use sidekick::session::{SidekickClient, SidekickConfig};
    /// let mut c = SidekickClient::new(SidekickConfig::robin(30, 10));
    /// let denser = SidekickConfig::robin(10, 10).protocol.session;
    /// assert!(c.reconfigure(Instant::now(), denser).is_err()); // no session yet
    /// ```
    pub fn reconfigure(
        &mut self,
        now: Instant,
        config: SessionConfig,
    ) -> Result<u32, sidekick_protocol::Error> {
        let pnow = self.protocol_time(now);
        let id = self.session.reconfigure(pnow, config)?;
        self.sent_since_request = 0;
        self.pump_session();
        Ok(id)
    }

    /// Starts discovery at `now`.
    pub fn start(&mut self, now: Instant) -> Result<(), sidekick_protocol::Error> {
        let pnow = self.protocol_time(now);
        self.session.start(pnow)?;
        self.sent_since_request = 0;
        self.mode = Mode::Probing;
        self.pump_session();
        Ok(())
    }

    fn push_event(&mut self, e: SdkEvent) {
        if self.events.len() >= MAX_QUEUE {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn pump_session(&mut self) {
        while let Some(t) = self.session.poll_transmit() {
            let t = match t.dest {
                Destination::Base => Transmit::Base(t.bytes),
                Destination::Sidekick(addr) => Transmit::Sidekick(addr, t.bytes),
            };
            if self.transmits.len() >= MAX_QUEUE {
                self.transmits.pop_front();
            }
            self.transmits.push_back(t);
        }
    }

    /// Stops using the sidekick: closes the session and releases everything held.
    pub fn fall_back(&mut self, now: Instant, cause: FallbackCause) {
        if matches!(self.mode, Mode::Fallback(_)) {
            return;
        }
        tracing::info!(?cause, "sidekick: falling back to end-to-end behaviour");
        if matches!(
            self.session.state(),
            ClientState::Established | ClientState::Initiating
        ) {
            let pnow = self.protocol_time(now);
            self.session.close(pnow, 0);
        }
        self.pump_session();
        if let Some(mut p) = self.packrat.take() {
            // Release in order: nothing stays held once the sidekick is gone.
            p.release_all();
            self.deliver.extend(p.poll_ready());
        }
        self.robin = None;
        self.mode = Mode::Fallback(cause);
        self.push_event(SdkEvent::Fallback(cause));
    }

    /// The transport sends `datagram` on the base socket at `now` (call it just before the
    /// send: a quACK naming the datagram may arrive before the send call returns). Returns
    /// whether Robin logged it.
    pub fn on_base_sent(&mut self, now: Instant, datagram: &[u8]) -> bool {
        self.sent_since_request = self.sent_since_request.saturating_add(1);
        let pn = self
            .lens
            .observe(DatagramDirection::Outgoing, datagram)
            .ok();
        if let Some(pn) = pn
            && self.sent_times.back().is_none_or(|&(last, _)| pn > last)
        {
            if self.sent_times.len() >= SENT_TIMES_CAP {
                self.sent_times.pop_front();
            }
            self.sent_times.push_back((pn, now));
        }
        let Some(r) = self.robin.as_mut() else {
            return false;
        };
        let logged = r.on_sent(now, datagram, pn).is_some();
        self.drain_robin(now);
        logged
    }

    /// The last `n` datagrams reported by [`Self::on_base_sent`] were not sent after all.
    pub fn withdraw_sent(&mut self, n: usize) {
        if let Some(r) = self.robin.as_mut() {
            r.withdraw_last(n);
        }
    }

    /// A datagram arrived on the base socket. Discovery replies are consumed; everything else
    /// becomes available from [`Self::poll_deliver`] (possibly after the reorder window).
    pub fn on_base_received(&mut self, now: Instant, datagram: Vec<u8>) {
        if self.consume_discovery_reply(now, &datagram) {
            return;
        }
        // Only packets that open under the connection's keys give a number (the lens
        // authenticates them): an injected datagram cannot open gaps or make us hold.
        let observed = self.lens.observe(DatagramDirection::Incoming, &datagram);
        if matches!(observed, Err(crate::lens::LensError::Unauthenticated)) {
            // Not a packet of the connection (the stack drops it too): it stays out of the
            // eACK, where a forged copy the proxy never forwarded would make its decode fail.
            self.stats.unauthenticated_datagrams += 1;
            self.deliver.push_back(datagram);
            return;
        }
        let pn = observed.ok();
        if let Some(ack) = self.lens.take_ack() {
            self.sample_rtt(now, &ack);
            if let Some(r) = self.robin.as_mut() {
                r.on_e2e_ack(now, &ack);
                self.assess_resends(now);
            }
        }
        self.receive_with_pn(now, datagram, pn);
    }

    /// As [`Self::on_base_received`] for a base connection whose packet numbers the application
    /// reads itself instead of the QUIC lens — e.g. the RTP sequence number of a media stream,
    /// which SRTP leaves in the clear. `pn` is `None` for datagrams outside that numbering (they
    /// are delivered at once); Packrat holds datagrams after a gap in it for the reorder window.
    ///
    /// ```
    /// use std::time::Instant;
    /// use sidekick::session::{SidekickClient, SidekickConfig};
    /// let mut c = SidekickClient::new(SidekickConfig::packrat());
    /// c.on_base_received_with_pn(Instant::now(), vec![0x80; 40], Some(7));
    /// assert!(c.poll_deliver().is_some()); // no session yet: delivered at once
    /// ```
    pub fn on_base_received_with_pn(&mut self, now: Instant, datagram: Vec<u8>, pn: Option<u64>) {
        if self.consume_discovery_reply(now, &datagram) {
            return;
        }
        self.receive_with_pn(now, datagram, pn);
    }

    fn consume_discovery_reply(&mut self, now: Instant, datagram: &[u8]) -> bool {
        if self.mode != Mode::Probing || !is_discovery_reply(datagram) {
            return false;
        }
        let pnow = self.protocol_time(now);
        if let Err(e) = self.session.handle_base_datagram(pnow, datagram) {
            tracing::debug!(%e, "discovery reply refused");
        }
        self.pump_session();
        self.drain_session_events(now);
        true
    }

    fn receive_with_pn(&mut self, now: Instant, datagram: Vec<u8>, pn: Option<u64>) {
        match self.packrat.as_mut() {
            Some(p) => {
                p.on_datagram(now, datagram, pn);
                self.deliver.extend(p.poll_ready());
                self.send_eack(now);
                // Building the eACK expires gaps that are due, releasing what they held.
                if let Some(p) = self.packrat.as_mut() {
                    self.deliver.extend(p.poll_ready());
                }
                self.assess_holds(now);
            }
            None => self.deliver.push_back(datagram),
        }
    }
    /// Datagrams the QUIC stack may receive now.
    pub fn poll_deliver(&mut self) -> Option<Vec<u8>> {
        self.deliver.pop_front()
    }

    /// As [`Self::poll_deliver`], with the source: `peer` for base datagrams, the original
    /// source for datagrams passed through from other addresses.
    pub fn poll_deliver_from(&mut self, peer: SocketAddr) -> Option<(SocketAddr, Vec<u8>)> {
        if let Some(p) = self.passthrough.pop_front() {
            return Some(p);
        }
        self.deliver.pop_front().map(|d| (peer, d))
    }

    /// A datagram from another address than the base peer: handed to the stack untouched.
    pub fn push_passthrough(&mut self, from: SocketAddr, datagram: Vec<u8>) {
        if self.passthrough.len() >= MAX_QUEUE {
            self.passthrough.pop_front();
        }
        self.passthrough.push_back((from, datagram));
    }

    /// Whether datagrams wait in [`Self::poll_deliver`].
    pub fn has_deliverable(&self) -> bool {
        !self.deliver.is_empty() || !self.passthrough.is_empty()
    }

    /// Whether discovery has not been started.
    pub fn is_idle(&self) -> bool {
        self.mode == Mode::Idle
    }

    /// A datagram arrived on the sidekick socket from `from`.
    pub fn on_sidekick_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let pnow = self.protocol_time(now);
        let ev = match self.session.handle_datagram(pnow, from, datagram) {
            Ok(ev) => ev,
            Err(sidekick_protocol::Error::QuotaExhausted) if self.mode == Mode::Active => {
                // The protocol checks the grant only after the MAC: an authentic frame beyond
                // what we authorised means the proxy ignores the quota (Sidekick (NSDI '24) §4.1).
                self.stats.over_quota += 1;
                self.fall_back(now, FallbackCause::OverQuota);
                return;
            }
            Err(e) => {
                // Off-path forgeries cannot pass the MAC: counted, not a reason to give up
                // (otherwise anyone could switch the sidekick off).
                tracing::debug!(%e, "sidekick frame refused");
                self.stats.rejected_frames += 1;
                self.pump_session();
                return;
            }
        };
        self.on_client_event(now, ev);
        self.pump_session();
        self.drain_session_events(now);
    }

    fn drain_session_events(&mut self, now: Instant) {
        while let Some(ev) = self.session.poll_event() {
            self.on_client_event(now, ev);
        }
        self.pump_session();
    }

    fn on_client_event(&mut self, now: Instant, ev: ClientEvent) {
        match ev {
            ClientEvent::Established { config, epoch } => self.establish(&config, epoch),
            ClientEvent::Reconfigured { config, epoch } => {
                self.stats.reconfigurations += 1;
                self.establish(&config, epoch);
            }
            ClientEvent::ConfigRejected { .. } => self.stats.reconfigurations_refused += 1,
            ClientEvent::Quack { data, .. } => self.on_quack(now, &data),
            ClientEvent::EackOutcome {
                resent: 0,
                eack_number,
                ..
            } => {
                // The proxy can repair none of the gaps that eACK came after (numbers the
                // sender skipped, losses before the proxy): holding for them only delays.
                if let Some(&(_, sent)) = self.eacks_sent.iter().find(|(n, _)| *n == eack_number)
                    && let Some(p) = self.packrat.as_mut()
                {
                    self.stats.eack_outcomes += 1;
                    p.on_proxy_nothing_missing_before(sent);
                    self.deliver.extend(p.poll_ready());
                }
            }
            ClientEvent::ResetByProxy { epoch, .. } => {
                self.stats.resets_by_proxy += 1;
                self.resets.push_back(now);
                while self
                    .resets
                    .front()
                    .is_some_and(|t| now.saturating_duration_since(*t) > self.config.reset_window)
                {
                    self.resets.pop_front();
                }
                if self.resets.len() as u32 > self.config.max_resets {
                    self.fall_back(now, FallbackCause::TooManyResets);
                    return;
                }
                self.new_epoch(epoch);
            }
            ClientEvent::Closed { .. } => self.fall_back(now, FallbackCause::ClosedByProxy),
            ClientEvent::Fallback(reason) => self.fall_back(now, FallbackCause::Protocol(reason)),
            // An outcome with resends: the repairs are on their way, keep holding.
            ClientEvent::EackOutcome { .. }
            | ClientEvent::Nothing
            | ClientEvent::ResetAcked { .. }
            | ClientEvent::Discovered { .. }
            | ClientEvent::ProxyError { .. } => {}
        }
    }

    fn establish(&mut self, config: &SessionConfig, epoch: u32) {
        if matches!(self.mode, Mode::Fallback(_)) {
            return;
        }
        let ids = id_source(config.identifier.as_ref());
        let width = match config.identifier.as_ref().map_or(4, |i| i.width) {
            2 => quack::Width::U16,
            8 => quack::Width::U64,
            _ => quack::Width::U32,
        };
        if let Some(mut old) = self.packrat.take() {
            // A reconfiguration: what the old engine holds is released in order, not dropped.
            old.release_all();
            self.deliver.extend(old.poll_ready());
        }
        // Fresh engines: their counters restart, and so do the assessments.
        self.hold_base = (0, 0);
        self.resend_base = (0, 0);
        let e2e_min_rtt = self.e2e_min_rtt;
        self.robin = config.robin.as_ref().map(|r| {
            let mut c = self.config.robin.clone();
            c.threshold = r.threshold as usize;
            c.id_source = ids;
            c.width = width;
            if r.interval_ms > 0 {
                c.quack_interval = Duration::from_millis(u64::from(r.interval_ms));
            }
            let mut robin = RobinSender::new(c);
            robin.set_unlogged_sends(self.sent_since_request);
            if let Some(rtt) = e2e_min_rtt {
                robin.on_e2e_rtt(rtt);
            }
            robin
        });
        self.packrat = config.packrat.as_ref().map(|p| {
            let mut c = self.config.packrat.clone();
            c.id_source = ids;
            c.width = width;
            c.local_symbols = p.local_symbols as usize;
            if p.eack_interval_ms > 0 {
                c.eack_interval = Duration::from_millis(u64::from(p.eack_interval_ms));
            }
            if p.eack_interval_packets > 0 {
                c.eack_every_packets = p.eack_interval_packets;
            }
            c.reorder_window = Duration::from_millis(u64::from(p.reorder_delay_ms));
            let mut rx = PackratReceiver::new(c);
            rx.reset(epoch);
            if let Some(rtt) = e2e_min_rtt {
                rx.on_e2e_rtt(rtt);
            }
            rx
        });
        if self.mode != Mode::Active {
            self.mode = Mode::Active;
            self.push_event(SdkEvent::Established);
        }
    }

    fn new_epoch(&mut self, epoch: u32) {
        if let Some(r) = self.robin.as_mut() {
            r.reset();
        }
        if let Some(p) = self.packrat.as_mut() {
            p.reset(epoch);
        }
    }

    fn on_quack(&mut self, now: Instant, data: &[u8]) {
        let Some(r) = self.robin.as_mut() else { return };
        self.stats.quacks += 1;
        match r.on_quack(now, data) {
            Ok(()) => {}
            Err(QuackError::Stale { .. }) => self.stats.stale_quacks += 1,
            Err(QuackError::NeverSent { .. }) => {
                self.stats.inconsistent_quacks += 1;
                self.fall_back(now, FallbackCause::NeverSent);
                return;
            }
            Err(e) => {
                tracing::debug!(%e, "inconsistent quACK");
                self.stats.inconsistent_quacks += 1;
                if self.stats.inconsistent_quacks >= u64::from(self.config.max_inconsistent_quacks)
                {
                    self.fall_back(now, FallbackCause::InconsistentQuacks);
                    return;
                }
            }
        }
        self.drain_robin(now);
    }

    fn drain_robin(&mut self, now: Instant) {
        let Some(r) = self.robin.as_mut() else { return };
        let events: Vec<RobinEvent> = r.poll_events().collect();
        let mut need_reset = false;
        for e in events {
            match e {
                RobinEvent::Lost(l) => self.push_event(SdkEvent::NearLoss(l)),
                RobinEvent::Retransmit(d) => {
                    self.stats.retransmissions += 1;
                    if self.transmits.len() < MAX_QUEUE {
                        self.transmits.push_back(Transmit::Base(d));
                    }
                }
                RobinEvent::Delivered { bytes, newest_sent } => {
                    self.push_event(SdkEvent::Delivered { bytes, newest_sent });
                }
                RobinEvent::NeedReset => need_reset = true,
            }
        }
        if need_reset && self.session.state() == ClientState::Established {
            let pnow = self.protocol_time(now);
            if let Ok(epoch) = self.session.reset(pnow, 0) {
                self.stats.resets_requested += 1;
                self.new_epoch(epoch);
            }
            self.pump_session();
        }
    }

    fn send_eack(&mut self, now: Instant) {
        let pnow = self.protocol_time(now);
        let Some(p) = self.packrat.as_mut() else {
            return;
        };
        if let Some(e) = p.poll_eack(now) {
            let open_gaps = u32::try_from(p.open_gaps()).unwrap_or(u32::MAX);
            // Numbered so that the proxy's outcome names the eACK it answers.
            let number = u32::try_from(self.stats.eacks_sent).unwrap_or(u32::MAX);
            if self
                .session
                .send_eack_with_gaps(pnow, &e, open_gaps, number)
                .is_ok()
            {
                self.stats.eacks_sent += 1;
                if self.eacks_sent.len() >= EACKS_REMEMBERED {
                    self.eacks_sent.pop_front();
                }
                self.eacks_sent.push_back((number, now));
            }
            self.pump_session();
        }
    }

    /// An RTT sample from the peer's ACK frame (read by the lens): the time since the newest
    /// acknowledged packet was sent. It includes the peer's ACK delay, so it only ever raises the
    /// minimum that bounds holds — which is why every adapter gets the bound, not only those
    /// whose stack reports its RTT ([`Self::on_e2e_rtt`]).
    fn sample_rtt(&mut self, now: Instant, ack: &crate::lens::AckRanges) {
        let Some(largest) = ack.ranges.iter().map(|&(_, hi)| hi).max() else {
            return;
        };
        let Ok(i) = self
            .sent_times
            .binary_search_by_key(&largest, |&(pn, _)| pn)
        else {
            return;
        };
        let sent = self.sent_times[i].1;
        // Older packets can only give longer samples now.
        self.sent_times.drain(..=i);
        self.on_e2e_rtt(now.saturating_duration_since(sent));
    }

    /// Feeds the transport's end-to-end RTT: PACUBIC's `r`, the bound on holds (Packrat), and
    /// the test of whether early resends were needed (Robin).
    pub fn on_e2e_rtt(&mut self, rtt: Duration) {
        if rtt > Duration::ZERO {
            self.e2e_min_rtt = Some(self.e2e_min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        if let Some(r) = self.robin.as_mut() {
            r.on_e2e_rtt(rtt);
        }
        if let Some(p) = self.packrat.as_mut() {
            p.on_e2e_rtt(rtt);
        }
    }

    /// The protocol session's time at `now` ([`ClientSession`] runs on the sans-IO [`Time`]).
    fn protocol_time(&mut self, now: Instant) -> Time {
        let origin = *self.protocol_origin.get_or_insert(now);
        Time::since(origin, now)
    }

    /// PACUBIC's `r`, once both RTTs are known.
    pub fn rtt_ratio(&self) -> Option<f64> {
        self.robin.as_ref().and_then(RobinSender::rtt_ratio)
    }

    /// The next instant [`Self::handle_timeout`] must run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.session
                .poll_timeout()
                .zip(self.protocol_origin)
                .and_then(|(t, origin)| t.to_instant(origin)),
            self.robin.as_ref().and_then(RobinSender::poll_timeout),
            self.packrat
                .as_ref()
                .and_then(PackratReceiver::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let pnow = self.protocol_time(now);
        self.session.handle_timeout(pnow);
        self.pump_session();
        self.drain_session_events(now);
        if let Some(r) = self.robin.as_mut() {
            r.handle_timeout(now);
            self.drain_robin(now);
        }
        if let Some(p) = self.packrat.as_mut() {
            p.handle_timeout(now);
            self.deliver.extend(p.poll_ready());
            self.send_eack(now);
            self.assess_holds(now);
        }
    }

    /// Next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<SdkEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

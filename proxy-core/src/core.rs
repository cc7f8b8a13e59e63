//! The sans-IO proxy core: it parses captured frames, finds their flow, routes them to the flow's
//! assistance and collects what must be sent. It owns no socket, thread or clock: every call
//! takes `now`.
//!
//! Fail-open by construction: [`ProxyCore::handle_frame`] answers with a [`Verdict`], which can
//! forward a base packet or (PEMI, bridge mode) delay it, but cannot drop or alter it; engines
//! only add datagrams and frames of their own.
//!
//! # Call order
//!
//! Modelled on quinn-proto's `Connection`: feed input with the `handle_*` methods, then drain
//! output with the `poll_*` methods.
//!
//! 1. [`ProxyCore::handle_frame`] for each captured frame (forward or delay it as the verdict
//!    says), [`ProxyCore::handle_sidekick`] for each datagram on the sidekick socket, and
//!    [`ProxyCore::on_capture_drops`] when the capture dropped frames since the last call;
//! 2. [`ProxyCore::handle_timeout`] once [`ProxyCore::poll_timeout`] is due (calling it early is
//!    harmless and cheap: its cost follows what is due, not what exists);
//! 3. [`ProxyCore::poll_transmit`] until it returns `None`, after any of the above;
//! 4. [`ProxyCore::poll_timeout`] for the next wake-up;
//! 5. with several cores over shares of the same clients (one per worker), at any point between
//!    calls: [`ProxyCore::poll_pace_lesson`] until `None`, each lesson handed to the other cores'
//!    [`ProxyCore::handle_pace_lesson`].
//!
//! ```
//! use std::time::Duration;
//! use sidekick_proxy_core::Time;
//! use sidekick_proxy_core::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
//! use sidekick_proxy_core::engine::Direction;
//! use sidekick_proxy_core::session::ProtocolSessions;
//! use sidekick_protocol::ProxyPolicy;
//!
//! let policy = ProxyPolicy::new("192.0.2.1:7788".parse().unwrap());
//! let mut core = ProxyCore::new(CoreConfig::default(), ProtocolSessions::new(policy), (1, 2));
//! let now = Time::ZERO;
//! // A captured Ethernet frame from a client (here: an IPv4/UDP datagram to port 443).
//! let ip = sidekick_proxy_core::packet::build_udp_ipv4(
//!     "10.0.0.2:5000".parse().unwrap(),
//!     "203.0.113.9:443".parse().unwrap(),
//!     b"opaque QUIC short-header packet",
//!     64,
//! );
//! let mut frame = vec![0u8; 12];
//! frame.extend_from_slice(&[0x08, 0x00]);
//! frame.extend_from_slice(&ip);
//! let verdict = core.handle_frame(now, Direction::FromClient, &frame, FrameMeta::default());
//! assert_eq!(verdict, Verdict::Forward);
//! while let Some(t) = core.poll_transmit() {
//!     match t {
//!         Transmit::Sidekick { to, bytes } => { /* send on the sidekick socket */ }
//!         Transmit::Inject { dir, frame } => { /* send on the capture interface */ }
//!     }
//! }
//! // The flow's idle deadline is the next timer.
//! let next = core.poll_timeout().unwrap();
//! assert!(next > now);
//! core.handle_timeout(now + Duration::from_secs(121));
//! assert!(core.flows().is_empty());
//! ```

use crate::Time;
use std::collections::HashMap;
use std::net::SocketAddr;

mod assistance;
mod budget;
mod client_pace;
mod deadlines;
mod handshake_rescue;
mod multicast_groups;
mod output;
mod pemi;
mod session_engines;
mod snapshot;

pub use assistance::{Assistance, FlowValue, SessionAssist};
pub use client_pace::PaceLesson;
pub use handshake_rescue::{HandshakeRescue, RescueConfig, RescueStats, fuzz_rescue};
pub use output::{Transmit, Verdict};

use crate::counters::Counters;
use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};
use crate::flow::{FlowKey, FlowTable, FlowTableConfig};
use crate::packet::{
    LinkType, ParseError, UdpPacket, build_reply_frame, fill_udp_checksum, gso_segments,
    parse_frame,
};
use crate::packrat::PackratCounters;
use crate::packrat::multicast::{self, MulticastCache};
use crate::pemi::{PemiConfig, PemiEngine, PemiStats};
use crate::robin::RobinCounters;
use crate::session::SessionLayer;
use budget::MemoryBudget;
use deadlines::{DeadlineIndex, TimerKind};
use output::InjectQueue;

/// Per-frame metadata from the capture backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameMeta {
    /// The kernel left the transport checksum partial (`TP_STATUS_CSUMNOTREADY`).
    pub csum_not_ready: bool,
    /// UDP GSO segment size of a super-frame, when the backend knows it (virtio-net header).
    pub gso_size: Option<u16>,
}

/// Core settings.
#[derive(Debug, Clone, Copy)]
pub struct CoreConfig {
    /// Link type of captured frames.
    pub link: LinkType,
    /// Flow-table caps.
    pub flows: FlowTableConfig,
    /// Track flows without a session (for metrics and PEMI); otherwise only sessions' flows.
    pub track_unassisted: bool,
    /// Per-flow memory cap in bytes; a session asking for more cache is clamped to it.
    pub max_flow_memory: usize,
    /// Cap on multicast groups with a shared Packrat cache (Packrat (CoNEXT '26) §6.1).
    pub max_multicast_groups: usize,
    /// Cap on clients per multicast group.
    pub max_group_members: usize,
    /// Bytes all engines together may hold: Packrat caches and indexes, PEMI buffers, multicast
    /// caches, quACK state. Each engine's cap is reserved when it is made; beyond the budget a
    /// flow gets no new engine (a Packrat cache is shrunk first), counted in
    /// `sidekick_memory_refused_total`.
    pub memory_budget: usize,
    /// PEMI's ICMP probe ids, first and step (worker k of n: k + 1, step n): an echo reply, which
    /// any worker may see, names one worker's probe ([`ProxyCore::handle_echo_reply`]).
    pub probe_ids: (u16, u16),
}

/// The default memory budget: fits an access point with 256 MB of memory beside the flow table
/// (65 536 flows × at most 256 bytes) and the process itself.
pub const DEFAULT_MEMORY_BUDGET: usize = 160 << 20;

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            link: LinkType::Ethernet,
            flows: FlowTableConfig::default(),
            track_unassisted: true,
            max_flow_memory: 4 * 1024 * 1024,
            max_multicast_groups: 64,
            max_group_members: multicast::DEFAULT_MAX_MEMBERS,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            probe_ids: (1, 1),
        }
    }
}

/// Counters of engines that are gone (their flow ended or changed assistance), so that totals
/// never go backwards.
#[derive(Debug, Default)]
struct Retired {
    robin: RobinCounters,
    packrat: PackratCounters,
    pemi: PemiStats,
    multicast: PackratCounters,
}

impl Retired {
    fn add<Id>(&mut self, a: &Assistance<Id>) {
        match a {
            Assistance::Unassisted => {}
            Assistance::Pemi(p) => self.pemi.add(&p.stats),
            Assistance::Session(s) => {
                if let Some(r) = &s.robin {
                    self.robin.add(&r.counters);
                }
                if let Some(p) = &s.packrat {
                    self.packrat.add(&p.counters);
                }
                if let Some(f) = &s.fallback {
                    self.pemi.add(&f.stats);
                }
            }
        }
    }
}

/// The sans-IO proxy core (see the module documentation for the call order).
pub struct ProxyCore<S: SessionLayer> {
    cfg: CoreConfig,
    table: FlowTable<FlowValue<S::Id>>,
    sessions: S,
    by_session: HashMap<S::Id, FlowKey>,
    /// Every per-flow timer, idle expiry included.
    deadlines: DeadlineIndex,
    /// Generation of the newest flow entry.
    generation: u32,
    scratch: Vec<u8>,
    /// Engines' side actions for the packet or timer at hand (reused).
    engine_out: Vec<Action>,
    injects: InjectQueue,
    retired: Retired,
    budget: MemoryBudget,
    pemi: Option<PemiConfig>,
    /// PEMI's ICMP probe identifiers and their flows.
    probes: pemi::ProbeIds,
    /// Shared Packrat caches of multicast flows (key: group as `client`, sender as `server`).
    groups: HashMap<FlowKey, MulticastCache<S::Id>>,
    /// The group each multicast-assisted session belongs to.
    membership: HashMap<S::Id, FlowKey>,
    /// Handshake rescue of new flows (`core::handshake_rescue`), when enabled.
    rescue: Option<HandshakeRescue>,
    /// Counters.
    pub counters: Counters,
    /// Test builds only: how this proxy lies to clients (`crate::lie`).
    #[cfg(feature = "testing")]
    lying: crate::lie::Lying,
}

/// `frame` itself, or (when `needed`: a frame captured with a partial checksum that may be cached
/// or injected) a copy in `scratch` with the UDP checksum filled in, counted in `filled`.
fn checksummed<'a>(
    scratch: &'a mut Vec<u8>,
    filled: &mut u64,
    frame: &'a [u8],
    udp: &UdpPacket,
    needed: bool,
) -> &'a [u8] {
    if !needed {
        return frame;
    }
    scratch.clear();
    scratch.extend_from_slice(frame);
    fill_udp_checksum(scratch, udp);
    *filled += 1;
    scratch
}

/// The budget a PEMI engine with `cfg` reserves: the engine and its datagram buffer's cap.
fn pemi_reservation(cfg: &PemiConfig) -> usize {
    std::mem::size_of::<PemiEngine>() + cfg.buffer_bytes
}

/// Register `value`'s engine deadline in the index unless an earlier or equal one is registered.
fn schedule<Id: Copy>(deadlines: &mut DeadlineIndex, key: FlowKey, value: &mut FlowValue<Id>) {
    if let Some(t) = value.assistance.poll_timeout()
        && value.timer.is_none_or(|r| t < r)
    {
        value.timer = Some(t);
        deadlines.push(t, key, value.generation, TimerKind::Engine);
    }
}

impl<S: SessionLayer> ProxyCore<S> {
    /// A core over a session layer; `hash_key` keys the flow table's SipHash.
    pub fn new(cfg: CoreConfig, sessions: S, hash_key: (u64, u64)) -> Self {
        Self {
            cfg,
            table: FlowTable::new(cfg.flows, hash_key.0, hash_key.1),
            sessions,
            by_session: HashMap::new(),
            deadlines: DeadlineIndex::default(),
            generation: 0,
            scratch: Vec::new(),
            engine_out: Vec::new(),
            injects: InjectQueue::default(),
            retired: Retired::default(),
            budget: MemoryBudget::new(cfg.memory_budget),
            pemi: None,
            probes: pemi::ProbeIds::new(cfg.probe_ids),
            groups: HashMap::new(),
            membership: HashMap::new(),
            rescue: None,
            counters: Counters::default(),
            #[cfg(feature = "testing")]
            lying: crate::lie::Lying::default(),
        }
    }

    /// Test builds only: lie to clients this way (`crate::lie`; the InitAck echo lie is the
    /// session layer's).
    #[cfg(feature = "testing")]
    pub fn with_lie(mut self, lie: Option<crate::lie::Lie>) -> Self {
        self.lying = crate::lie::Lying::new(lie);
        self
    }

    /// Keep the server's handshake datagrams of new flows and replay them once when the client
    /// shows it missed them (`core::handshake_rescue`); `None` disables it.
    pub fn with_handshake_rescue(mut self, cfg: Option<RescueConfig>) -> Self {
        self.rescue = cfg.map(HandshakeRescue::new);
        self
    }

    /// Run PEMI on flows without a sidekick session whose first packet is a QUIC client Initial
    /// (`None` disables it). Reply delays ([`Verdict::Delay`]) need bridge mode: set
    /// [`PemiConfig::enforce_delay`] to false when sniffing.
    pub fn with_pemi(mut self, cfg: Option<PemiConfig>) -> Self {
        self.pemi = cfg;
        self
    }

    /// Change the PEMI settings of a running core (a configuration reload): flows that begin
    /// from now on get engines with `cfg` (none when `None`); PEMI engines already running keep
    /// theirs, and with PEMI off a session's suspended engine retires instead of taking its
    /// flow back.
    pub fn set_pemi(&mut self, cfg: Option<PemiConfig>) {
        self.pemi = cfg;
    }

    /// The flow table.
    pub fn flows(&self) -> &FlowTable<FlowValue<S::Id>> {
        &self.table
    }

    /// The session layer.
    pub fn sessions(&self) -> &S {
        &self.sessions
    }

    /// The session layer, mutably (out-of-band session configuration).
    pub fn sessions_mut(&mut self) -> &mut S {
        &mut self.sessions
    }

    /// Process one captured frame travelling in `dir` and say what to do with it. Side output
    /// (quACKs, retransmissions, discovery replies) waits in [`ProxyCore::poll_transmit`].
    pub fn handle_frame(
        &mut self,
        now: Time,
        dir: Direction,
        frame: &[u8],
        meta: FrameMeta,
    ) -> Verdict {
        self.counters.frames += 1;
        let udp = match parse_frame(frame, self.cfg.link) {
            Ok(u) => u,
            Err(e) => {
                match e {
                    ParseError::NotIp(_) => self.counters.not_ip += 1,
                    ParseError::NotUdp(1) if !self.probes.is_empty() => {
                        self.counters.not_udp += 1;
                        self.on_icmp(now, frame);
                    }
                    ParseError::NotUdp(_) => self.counters.not_udp += 1,
                    ParseError::Fragment => self.counters.fragments += 1,
                    _ => self.counters.malformed_frames += 1,
                }
                return Verdict::Forward;
            }
        };
        self.counters.udp_packets += 1;
        let key = match dir {
            Direction::FromClient => FlowKey {
                client: udp.src,
                server: udp.dst,
            },
            Direction::ToClient => FlowKey {
                client: udp.dst,
                server: udp.src,
            },
        };
        let payload = udp.payload(frame);
        if let Some(r) = self.rescue.as_mut()
            && meta.gso_size.is_none()
        {
            let csum = meta.csum_not_ready && dir == Direction::ToClient;
            let d = handshake_rescue::Datagram {
                dir,
                key,
                frame,
                payload,
                udp: &udp,
                csum,
            };
            r.on_datagram(now, d, &mut self.budget, &mut self.injects);
        }
        if dir == Direction::ToClient && !self.groups.is_empty() {
            self.on_multicast_frame(key, frame, &udp, meta);
        }
        // A multicast client's source MAC address, kept below if the flow is a member's.
        let member_mac = if dir == Direction::FromClient
            && !self.membership.is_empty()
            && self.cfg.link == LinkType::Ethernet
        {
            frame.get(6..12).and_then(|m| <[u8; 6]>::try_from(m).ok())
        } else {
            None
        };

        // Discovery (Sidekick (NSDI '24) §4.1): answered from the server's address, on the base
        // path. The request itself is forwarded like any packet (fail-open).
        let discovery =
            dir == Direction::FromClient && self.on_discovery(now, key, frame, &udp, payload);

        let generation = self.generation.wrapping_add(1);
        let entry = if self.cfg.track_unassisted {
            match self
                .table
                .get_or_insert_with(key, now, || FlowValue::new(generation))
            {
                Ok(e) => {
                    e.packets += 1;
                    e
                }
                Err(_) => return Verdict::Forward,
            }
        } else {
            match self.table.touch(&key, now) {
                Some(e) => e,
                None => return Verdict::Forward,
            }
        };
        // The first packet of a new entry (`touch` never creates one): its generation and idle
        // deadline (fields disjoint from the table, so no second lookup).
        if entry.packets == 1 && entry.value.generation == generation {
            self.generation = generation;
            self.deadlines.push(
                now + self.cfg.flows.idle_timeout,
                key,
                generation,
                TimerKind::Idle,
            );
        }
        if discovery && self.cfg.link == LinkType::Ethernet {
            entry.value.client_mac = frame.get(6..12).and_then(|m| m.try_into().ok());
        }
        let value = &mut entry.value;
        if matches!(value.assistance, Assistance::Unassisted) {
            // PEMI: engines only for flows that begin with a client Initial (PEMI App. A).
            let Some(pcfg) = self.pemi else {
                return Verdict::Forward;
            };
            if dir != Direction::FromClient || !crate::pemi::engine::starts_connection(payload) {
                return Verdict::Forward;
            }
            let need = pemi_reservation(&pcfg);
            if !self.budget.try_reserve(need) {
                return Verdict::Forward;
            }
            value.reserved = need as u32;
            let mut engine = PemiEngine::new(pcfg, now);
            if pcfg.icmp_calibration {
                engine.set_probe_id(self.probes.assign(key));
            }
            value.assistance = Assistance::Pemi(Box::new(engine));
        }
        self.engine_out.clear();
        match &mut value.assistance {
            Assistance::Unassisted => Verdict::Forward,
            Assistance::Pemi(engine) => {
                // Buffered frames are re-injected as they are: fill in a partial checksum first.
                let frame = checksummed(
                    &mut self.scratch,
                    &mut self.counters.checksums_filled,
                    frame,
                    &udp,
                    meta.csum_not_ready,
                );
                let gso = meta.gso_size.filter(|&g| usize::from(g) < udp.payload_len);
                for (a, b) in gso_segments(&udp, gso) {
                    let pkt = Packet {
                        frame,
                        udp: &udp,
                        payload: frame.get(a..b).unwrap_or(&[]),
                        whole_frame: gso.is_none(),
                    };
                    engine.on_packet(now, dir, &pkt, &mut self.engine_out);
                }
                // PEMI §4.4.3: an ICMP echo to the receiver, shaped like this packet of the
                // protected direction, once per end-to-end RTT.
                if engine.dominant() == Some(dir)
                    && let Some((id, seq)) = engine.take_probe(now)
                    && let Some(probe) = crate::pemi::probe::echo_request(frame, &udp, id, seq)
                {
                    self.engine_out.push(Action::Inject { dir, frame: probe });
                }
                schedule(&mut self.deadlines, key, value);
                self.pemi_actions()
            }
            Assistance::Session(assist) => {
                let sid = assist.id;
                if let Some(p) = assist.fallback.as_mut() {
                    p.observe(now, dir, payload);
                }
                // A private copy with the checksum filled in, only when a copy may be cached or
                // injected.
                let needs_copy =
                    meta.csum_not_ready && dir == Direction::ToClient && assist.packrat.is_some();
                let frame = checksummed(
                    &mut self.scratch,
                    &mut self.counters.checksums_filled,
                    frame,
                    &udp,
                    needs_copy,
                );
                let gso = meta.gso_size.filter(|&g| usize::from(g) < udp.payload_len);
                if gso.is_some() {
                    self.counters.gso_superframes += 1;
                }
                let acts = &mut self.engine_out;
                #[cfg(feature = "testing")]
                let lying = &mut self.lying;
                let mut run = |pkt: &Packet<'_>| {
                    #[cfg(feature = "testing")]
                    let hide = lying.hides_from_robin();
                    #[cfg(not(feature = "testing"))]
                    let hide = false;
                    if let Some(r) = assist.robin.as_mut().filter(|_| !hide) {
                        r.on_packet(now, dir, pkt, acts);
                    }
                    if let Some(p) = assist.packrat.as_mut() {
                        p.on_packet(now, dir, pkt, acts);
                    }
                };
                if gso.is_none() {
                    // The common case: one datagram.
                    run(&Packet {
                        frame,
                        udp: &udp,
                        payload: udp.payload(frame),
                        whole_frame: true,
                    });
                } else {
                    for (a, b) in gso_segments(&udp, gso) {
                        run(&Packet {
                            frame,
                            udp: &udp,
                            payload: frame.get(a..b).unwrap_or(&[]),
                            whole_frame: false,
                        });
                    }
                }
                schedule(&mut self.deadlines, key, value);
                #[cfg(feature = "testing")]
                if dir == Direction::ToClient
                    && gso.is_none()
                    && let Some(forged) = self.lying.forge(udp.payload(frame))
                {
                    let copy = crate::packet::segment_frame(frame, &udp, &forged);
                    self.engine_out.push(Action::Inject { dir, frame: copy });
                }
                if let Some(mac) = member_mac {
                    self.learn_member_mac(sid, mac);
                }
                if !self.engine_out.is_empty() {
                    self.dispatch(now, sid);
                }
                Verdict::Forward
            }
        }
    }

    /// A discovery request from a client on flow `key`: answer it on the base path. Returns
    /// whether the payload was one.
    fn on_discovery(
        &mut self,
        now: Time,
        key: FlowKey,
        frame: &[u8],
        udp: &UdpPacket,
        payload: &[u8],
    ) -> bool {
        let Some(res) = self.sessions.on_base_payload(now, key, payload) else {
            return false;
        };
        self.counters.discovery_seen += 1;
        match res {
            Ok(reply) => {
                let reply = build_reply_frame(frame, self.cfg.link, udp, &reply);
                if self.injects.push(Direction::ToClient, reply) {
                    self.counters.discovery_replied += 1;
                    self.counters.injected += 1;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "discovery refused");
                self.counters.discovery_refused += 1;
            }
        }
        true
    }

    /// Carry out the side actions in `engine_out` of session `sid`'s engines: messages
    /// are framed by the session (id, epoch, tag, quota), frames are queued for injection.
    fn dispatch(&mut self, now: Time, sid: S::Id) {
        let mut acts = std::mem::take(&mut self.engine_out);
        for a in acts.drain(..) {
            match a {
                Action::Message(msg) => {
                    let is_quack = matches!(msg, Outgoing::Quack(_));
                    match self.sessions.send(now, sid, msg) {
                        Ok(Some(epoch)) => {
                            self.counters.resets_sent += 1;
                            // The client restarts every engine of the session on the Reset.
                            self.restart_epoch(now, sid, epoch);
                        }
                        Ok(None) => {
                            if is_quack {
                                self.counters.quacks_sent += 1;
                            }
                        }
                        Err(e) => {
                            tracing::trace!(error = %e, "sidekick message refused");
                            self.counters.messages_refused += 1;
                        }
                    }
                }
                Action::Inject { dir, frame } => {
                    #[cfg(feature = "testing")]
                    if self.lying.drops_repairs() {
                        continue;
                    }
                    if self.injects.push(dir, frame) {
                        self.counters.injected += 1;
                    }
                }
                // Engines of a session neither delay nor address the sidekick socket.
                Action::Forward | Action::Delay { .. } | Action::SendSidekick { .. } => {}
            }
        }
        self.engine_out = acts;
    }

    /// A datagram arrived on the sidekick socket. Malformed or forged datagrams are counted and
    /// dropped; they touch no flow.
    pub fn handle_sidekick(&mut self, now: Time, from: SocketAddr, bytes: &[u8]) {
        self.counters.sidekick_in += 1;
        match self.sessions.on_datagram(now, from, bytes) {
            Ok(ev) => self.on_event(now, ev),
            Err(e) => {
                tracing::debug!(%from, error = %e, "sidekick datagram dropped");
                self.counters.sidekick_dropped += 1;
            }
        }
    }

    /// The next datagram or frame to send: injections first (in the order they were made), then
    /// the session layer's datagrams.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.injects.pop().or_else(|| {
            self.sessions
                .poll_transmit()
                .map(|(to, bytes)| Transmit::Sidekick { to, bytes })
        })
    }

    /// When [`ProxyCore::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        [
            self.deadlines.next(),
            self.sessions.poll_timeout(),
            self.rescue.as_ref().and_then(HandshakeRescue::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Run what is due at `now`: session timers, engine timers (Robin's time-driven quACKs,
    /// PEMI's flowlets and enforcement) and idle expiry — in time order, each found through the
    /// deadline index.
    pub fn handle_timeout(&mut self, now: Time) {
        if let Some(r) = self.rescue.as_mut() {
            r.handle_timeout(now, &mut self.budget, &mut self.injects);
        }
        if self.sessions.poll_timeout().is_some_and(|t| t <= now) {
            self.sessions.handle_timeout(now);
        }
        while let Some(ev) = self.sessions.poll_event() {
            self.on_event(now, ev);
        }
        let mark = self.deadlines.mark();
        while let Some(d) = self.deadlines.pop_due(now, mark) {
            let Some(e) = self.table.get_mut(&d.key) else {
                continue;
            };
            if e.value.generation != d.generation {
                continue;
            }
            match d.kind {
                TimerKind::Idle => {
                    let expiry = e.last_seen + self.cfg.flows.idle_timeout;
                    if expiry > now {
                        self.deadlines
                            .push(expiry, d.key, d.generation, TimerKind::Idle);
                    } else {
                        self.remove_flow(d.key);
                    }
                }
                TimerKind::Engine => {
                    if e.value.timer != Some(d.at) {
                        continue;
                    }
                    e.value.timer = None;
                    self.engine_out.clear();
                    let sid = match &mut e.value.assistance {
                        Assistance::Unassisted => None,
                        Assistance::Pemi(p) => {
                            if p.poll_timeout().is_some_and(|t| t <= now) {
                                p.handle_timeout(now, &mut self.engine_out);
                            }
                            None
                        }
                        Assistance::Session(s) => {
                            if let Some(r) = s.robin.as_mut()
                                && r.poll_timeout().is_some_and(|t| t <= now)
                            {
                                r.handle_timeout(now, &mut self.engine_out);
                            }
                            Some(s.id)
                        }
                    };
                    schedule(&mut self.deadlines, d.key, &mut e.value);
                    match sid {
                        Some(sid) if !self.engine_out.is_empty() => {
                            self.dispatch(now, sid);
                        }
                        Some(_) => {}
                        None => {
                            let _ = self.pemi_actions();
                        }
                    }
                }
            }
        }
    }

    /// Remove an idle flow; its engines' counters retire and its session (if any) loses it.
    fn remove_flow(&mut self, key: FlowKey) {
        let Some(e) = self.table.remove(&key) else {
            return;
        };
        self.table.counters.expired += 1;
        self.budget.release(e.value.reserved as usize);
        if let Some(id) = e.value.assistance.session() {
            self.by_session.remove(&id);
            self.leave_group(id);
        }
        self.retired.add(&e.value.assistance);
    }
}

/// Fuzz body: split `data` into frames and sidekick datagrams and push them through a core with a
/// real session layer; every frame must get the [`Action::Forward`] verdict (fail-open).
pub fn fuzz_core(data: &[u8]) {
    use sidekick_protocol::ProxyPolicy;
    let policy = ProxyPolicy::new(SocketAddr::from(([10, 0, 0, 1], 7788)));
    let mut core = ProxyCore::new(
        CoreConfig::default(),
        crate::session::ProtocolSessions::new(policy),
        (1, 2),
    )
    .with_handshake_rescue(Some(RescueConfig::default()));
    let now = Time::ZERO;
    for (i, chunk) in data.split(|&b| b == 0xff).enumerate() {
        let dir = if i % 2 == 0 {
            Direction::FromClient
        } else {
            Direction::ToClient
        };
        let meta = FrameMeta {
            csum_not_ready: i % 3 == 0,
            gso_size: chunk.first().map(|&b| u16::from(b) * 8),
        };
        assert_eq!(core.handle_frame(now, dir, chunk, meta), Verdict::Forward);
        core.handle_sidekick(now, SocketAddr::from(([10, 0, 0, 2], 5000)), chunk);
        while core.poll_transmit().is_some() {}
    }
    core.handle_timeout(now);
    while core.poll_transmit().is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fuzz_core_body(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_core(&data);
        }
    }

    #[test]
    fn fuzz_core_on_a_real_frame() {
        let ip = crate::packet::build_udp_ipv4(
            "10.0.0.2:1".parse().unwrap(),
            "10.0.0.3:2".parse().unwrap(),
            &[0u8; 40],
            64,
        );
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&ip);
        fuzz_core(&f);
    }
}

#[cfg(test)]
#[path = "core/tests.rs"]
mod v2_tests;

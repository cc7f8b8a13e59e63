//! The sans-IO proxy core: capture → classify → flow table → per-flow engines → actions
//! (DESIGN §4 proxy).
//!
//! Fail-open: [`ProxyCore::on_frame`] never asks to drop or alter a base packet — in bridge mode
//! its verdict is always [`Action::Forward`]; engines only add side actions (quACKs, injected
//! copies of cached packets, discovery replies).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

mod multicast_groups;
mod pemi;
mod session_engines;

use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};
use crate::flow::{FlowKey, FlowState, FlowTable, FlowTableConfig};
use crate::metrics::Counters;
use crate::packet::{
    LinkType, ParseError, UdpPacket, build_reply_frame, fill_udp_checksum, gso_segments,
    parse_frame,
};
use crate::packrat::multicast::{self, MulticastCache};
use crate::packrat::{PackratCounters, PackratEngine};
use crate::pemi::{PemiConfig, PemiEngine, PemiStats};
use crate::robin::{RobinCounters, RobinEngine};
use crate::session::SessionLayer;

/// Per-frame metadata from the capture backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameMeta {
    /// The kernel left the transport checksum partial (`TP_STATUS_CSUMNOTREADY`).
    pub csum_not_ready: bool,
    /// UDP GSO segment size of a super-frame, when the backend knows it (virtio-net header).
    pub gso_size: Option<u16>,
}

/// The state of one flow.
#[derive(Debug)]
pub struct FlowValue<Id> {
    /// The session assisting the flow, if any.
    pub session: Option<Id>,
    /// Robin engine.
    pub robin: Option<RobinEngine>,
    /// Packrat engine.
    pub packrat: Option<PackratEngine>,
    /// PEMI engine (flows without a session, when enabled; seed 000).
    pub pemi: Option<PemiEngine>,
    /// The client's Ethernet address, from its discovery request (multicast retransmissions
    /// are addressed to it).
    pub client_mac: Option<[u8; 6]>,
}

impl<Id> FlowState for FlowValue<Id> {
    fn assisted(&self) -> bool {
        self.session.is_some()
    }
}

impl<Id> FlowValue<Id> {
    fn unassisted() -> Self {
        Self {
            session: None,
            robin: None,
            packrat: None,
            pemi: None,
            client_mac: None,
        }
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.robin.as_ref().and_then(FlowEngine::next_timeout)
    }

    fn memory(&self) -> usize {
        self.robin.as_ref().map_or(0, FlowEngine::memory_bytes)
            + self.packrat.as_ref().map_or(0, FlowEngine::memory_bytes)
            + self.pemi.as_ref().map_or(0, FlowEngine::memory_bytes)
    }
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
    /// Cap on multicast groups with a shared Packrat cache (seed 002 §6.1).
    pub max_multicast_groups: usize,
    /// Cap on clients per multicast group.
    pub max_group_members: usize,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            link: LinkType::Ethernet,
            flows: FlowTableConfig::default(),
            track_unassisted: true,
            max_flow_memory: 4 * 1024 * 1024,
            max_multicast_groups: 64,
            max_group_members: multicast::DEFAULT_MAX_MEMBERS,
        }
    }
}

/// The sans-IO proxy core.
pub struct ProxyCore<S: SessionLayer> {
    cfg: CoreConfig,
    table: FlowTable<FlowValue<S::Id>>,
    sessions: S,
    by_session: HashMap<S::Id, FlowKey>,
    next_engine_timeout: Option<Instant>,
    scratch: Vec<u8>,
    engine_out: Vec<Action>,
    retired_robin: RobinCounters,
    retired_packrat: PackratCounters,
    pemi: Option<PemiConfig>,
    next_pemi_timeout: Option<Instant>,
    retired_pemi: PemiStats,
    /// The flow of each ICMP probe identifier (PEMI calibration, `pemi::probe`); u16 keys bound
    /// it, and an identifier is reused only after 65 536 PEMI flows.
    pemi_probe_flows: HashMap<u16, FlowKey>,
    next_probe_id: u16,
    /// Shared Packrat caches of multicast flows (key: group as `client`, sender as `server`).
    groups: HashMap<FlowKey, MulticastCache<S::Id>>,
    /// The group each multicast-assisted session belongs to.
    membership: HashMap<S::Id, FlowKey>,
    retired_multicast: PackratCounters,
    /// Counters.
    pub counters: Counters,
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

fn add_robin(a: &mut RobinCounters, b: &RobinCounters) {
    a.inserted += b.inserted;
    a.id_errors += b.id_errors;
    a.quacks += b.quacks;
    a.resets += b.resets;
    a.gap_quacks += b.gap_quacks;
}

impl<S: SessionLayer> ProxyCore<S> {
    /// A core over a session layer; `hash_key` keys the flow table's SipHash.
    pub fn new(cfg: CoreConfig, sessions: S, hash_key: (u64, u64)) -> Self {
        Self {
            cfg,
            table: FlowTable::new(cfg.flows, hash_key.0, hash_key.1),
            sessions,
            by_session: HashMap::new(),
            next_engine_timeout: None,
            scratch: Vec::new(),
            engine_out: Vec::new(),
            retired_robin: RobinCounters::default(),
            retired_packrat: PackratCounters::default(),
            pemi: None,
            next_pemi_timeout: None,
            pemi_probe_flows: HashMap::new(),
            next_probe_id: 0,
            retired_pemi: PemiStats::default(),
            groups: HashMap::new(),
            membership: HashMap::new(),
            retired_multicast: PackratCounters::default(),
            counters: Counters::default(),
        }
    }

    /// Run PEMI (seed 000) on flows without a sidekick session whose first packet is a QUIC
    /// client Initial (`None` disables it). Reply delays ([`Action::Delay`] verdicts) need bridge
    /// mode: set [`PemiConfig::enforce_delay`] to false when sniffing.
    pub fn with_pemi(mut self, cfg: Option<PemiConfig>) -> Self {
        self.pemi = cfg;
        self
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

    /// Process one captured frame travelling in `dir`. Returns the verdict for the frame (always
    /// [`Action::Forward`]: fail-open) and pushes side actions to `out`.
    pub fn on_frame(
        &mut self,
        now: Instant,
        dir: Direction,
        frame: &[u8],
        meta: FrameMeta,
        out: &mut Vec<Action>,
    ) -> Action {
        self.counters.frames += 1;
        let udp = match parse_frame(frame, self.cfg.link) {
            Ok(u) => u,
            Err(e) => {
                match e {
                    ParseError::NotIp(_) => self.counters.not_ip += 1,
                    ParseError::NotUdp(1) if !self.pemi_probe_flows.is_empty() => {
                        self.counters.not_udp += 1;
                        self.on_icmp(now, frame);
                    }
                    ParseError::NotUdp(_) => self.counters.not_udp += 1,
                    ParseError::Fragment => self.counters.fragments += 1,
                    _ => self.counters.malformed_frames += 1,
                }
                return Action::Forward;
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

        // Discovery (seed 001 §4.1): answered from the server's address, on the base path.
        let mut discovery = false;
        if dir == Direction::FromClient
            && let Some(res) = self.sessions.on_base_payload(now, key, payload)
        {
            discovery = true;
            self.counters.discovery_seen += 1;
            match res {
                Ok(reply) => {
                    out.push(Action::Inject {
                        dir: Direction::ToClient,
                        frame: build_reply_frame(frame, self.cfg.link, &udp, &reply),
                    });
                    self.counters.discovery_replied += 1;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "discovery refused");
                    self.counters.discovery_refused += 1;
                }
            }
            // The request itself is forwarded like any packet (fail-open).
        }

        let entry = if self.cfg.track_unassisted {
            match self
                .table
                .get_or_insert_with(key, now, FlowValue::unassisted)
            {
                Ok(e) => {
                    e.packets += 1;
                    e
                }
                Err(_) => return Action::Forward,
            }
        } else {
            match self.table.touch(&key, now) {
                Some(e) => e,
                None => return Action::Forward,
            }
        };
        if discovery && self.cfg.link == LinkType::Ethernet {
            entry.value.client_mac = frame.get(6..12).and_then(|m| m.try_into().ok());
        }
        let Some(sid) = entry.value.session else {
            let Some(pcfg) = self.pemi else {
                return Action::Forward;
            };
            // PEMI: engines only for flows that begin with a client Initial (App. A).
            if entry.value.pemi.is_none()
                && dir == Direction::FromClient
                && crate::pemi::engine::starts_connection(payload)
            {
                let mut engine = PemiEngine::new(pcfg, now);
                if pcfg.icmp_calibration {
                    self.next_probe_id = self.next_probe_id.wrapping_add(1);
                    engine.set_probe_id(self.next_probe_id);
                    self.pemi_probe_flows.insert(self.next_probe_id, key);
                }
                entry.value.pemi = Some(engine);
            }
            let Some(engine) = entry.value.pemi.as_mut() else {
                return Action::Forward;
            };
            self.engine_out.clear();
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
            // §4.4.3: an ICMP echo to the receiver, shaped like this packet of the protected
            // direction, once per end-to-end RTT.
            if engine.dominant() == Some(dir)
                && let Some((id, seq)) = engine.take_probe(now)
                && let Some(probe) = crate::pemi::probe::echo_request(frame, &udp, id, seq)
            {
                self.engine_out.push(Action::Inject { dir, frame: probe });
            }
            if let Some(t) = engine.next_timeout() {
                self.next_pemi_timeout = Some(self.next_pemi_timeout.map_or(t, |n| n.min(t)));
            }
            return self.pemi_actions(out);
        };

        // A private copy with the checksum filled in, only when a copy may be cached/injected.
        let needs_copy =
            meta.csum_not_ready && dir == Direction::ToClient && entry.value.packrat.is_some();
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
        self.engine_out.clear();
        let value = &mut entry.value;
        let mut run = |pkt: &Packet<'_>, acts: &mut Vec<Action>| {
            if let Some(r) = value.robin.as_mut() {
                r.on_packet(now, dir, pkt, acts);
            }
            if let Some(p) = value.packrat.as_mut() {
                p.on_packet(now, dir, pkt, acts);
            }
        };
        if gso.is_none() {
            // The common case: one datagram.
            let pkt = Packet {
                frame,
                udp: &udp,
                payload: udp.payload(frame),
                whole_frame: true,
            };
            run(&pkt, &mut self.engine_out);
        } else {
            for (a, b) in gso_segments(&udp, gso) {
                let pkt = Packet {
                    frame,
                    udp: &udp,
                    payload: frame.get(a..b).unwrap_or(&[]),
                    whole_frame: false,
                };
                run(&pkt, &mut self.engine_out);
            }
        }
        if let Some(mac) = member_mac {
            self.learn_member_mac(sid, mac);
        }
        // Engine deadlines only move later on packets (Robin's next quACK after a count-driven
        // one); the earliest deadline was registered at attach/timeout time.
        if !self.engine_out.is_empty() {
            let mut acts = std::mem::take(&mut self.engine_out);
            self.dispatch(now, sid, key, &mut acts, out);
            self.engine_out = acts;
        }
        Action::Forward
    }

    /// Turn engine actions into backend actions (framing messages through the session).
    fn dispatch(
        &mut self,
        now: Instant,
        sid: S::Id,
        key: FlowKey,
        acts: &mut Vec<Action>,
        out: &mut Vec<Action>,
    ) {
        for a in acts.drain(..) {
            match a {
                Action::Message(msg) => {
                    let is_quack = matches!(msg, Outgoing::Quack(_));
                    match self.sessions.send(now, sid, msg) {
                        Ok(Some(epoch)) => {
                            self.counters.resets_sent += 1;
                            if let Some(e) = self.table.get_mut(&key)
                                && let Some(p) = e.value.packrat.as_mut()
                            {
                                p.reset(epoch);
                            }
                            if let Some(gk) = self.membership.get(&sid)
                                && let Some(g) = self.groups.get_mut(gk)
                            {
                                g.reset(sid, epoch);
                            }
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
                    self.counters.injected += 1;
                    out.push(Action::Inject { dir, frame });
                }
                other => out.push(other),
            }
        }
        self.drain_transmits(out);
    }

    fn drain_transmits(&mut self, out: &mut Vec<Action>) {
        while let Some((to, bytes)) = self.sessions.poll_transmit() {
            out.push(Action::SendSidekick { to, bytes });
        }
    }

    /// A datagram arrived on the sidekick socket. Malformed or forged datagrams are counted and
    /// dropped; they touch no flow.
    pub fn on_sidekick(
        &mut self,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
        out: &mut Vec<Action>,
    ) {
        self.counters.sidekick_in += 1;
        match self.sessions.on_datagram(now, from, bytes) {
            Ok(ev) => self.on_event(now, ev, out),
            Err(e) => {
                tracing::debug!(%from, error = %e, "sidekick datagram dropped");
                self.counters.sidekick_dropped += 1;
            }
        }
        self.drain_transmits(out);
    }

    /// When [`ProxyCore::on_timeout`] should next run.
    pub fn next_timeout(&self) -> Option<Instant> {
        let t = match (self.next_engine_timeout, self.sessions.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (t, self.next_pemi_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Run due timers: engine cadences (Robin time-driven quACKs), session timers, and the idle
    /// sweep of the flow table (cheap when nothing is due; call at least once a second).
    pub fn on_timeout(&mut self, now: Instant, out: &mut Vec<Action>) {
        if self.sessions.poll_timeout().is_some_and(|t| t <= now) {
            self.sessions.handle_timeout(now);
        }
        while let Some(ev) = self.sessions.poll_event() {
            self.on_event(now, ev, out);
        }
        if self.next_engine_timeout.is_some_and(|t| t <= now) {
            let mut next: Option<Instant> = None;
            let ids: Vec<(S::Id, FlowKey)> =
                self.by_session.iter().map(|(a, b)| (*a, *b)).collect();
            for (id, flow) in ids {
                let mut acts = std::mem::take(&mut self.engine_out);
                acts.clear();
                if let Some(e) = self.table.get_mut(&flow) {
                    if let Some(r) = e.value.robin.as_mut()
                        && r.next_timeout().is_some_and(|t| t <= now)
                    {
                        r.on_timeout(now, &mut acts);
                    }
                    if let Some(t) = e.value.next_timeout() {
                        next = Some(next.map_or(t, |n| n.min(t)));
                    }
                }
                if !acts.is_empty() {
                    self.dispatch(now, id, flow, &mut acts, out);
                }
                self.engine_out = acts;
            }
            self.next_engine_timeout = next;
        }
        self.pemi_timeouts(now, out);
        self.drain_transmits(out);
    }

    /// Expire idle flows (120 s default). Sessions on expired flows are detached.
    pub fn expire(&mut self, now: Instant) {
        let mut gone = Vec::new();
        let retired = &mut self.retired_pemi;
        self.table.expire(now, |_, e| {
            if let Some(s) = e.value.session {
                gone.push(s);
            }
            if let Some(p) = &e.value.pemi {
                retired.add(&p.stats);
            }
        });
        for id in gone {
            self.by_session.remove(&id);
        }
    }

    /// A snapshot of all counters and gauges (sums live engines and retired ones).
    pub fn snapshot(&self) -> Counters {
        let mut c = self.counters;
        let mut robin = self.retired_robin;
        let mut packrat = self.retired_packrat;
        let mut cache_bytes = 0u64;
        let mut memory = 0u64;
        for flow in self.by_session.values() {
            if let Some(e) = self.table.get(flow) {
                if let Some(r) = &e.value.robin {
                    add_robin(&mut robin, &r.counters);
                }
                if let Some(p) = &e.value.packrat {
                    packrat.add(&p.counters);
                    cache_bytes += p.cache_bytes() as u64;
                }
                memory += e.value.memory() as u64;
            }
        }
        // PEMI runs on unassisted flows: sum every live engine (a walk of the table; snapshots
        // are periodic, not per packet).
        let mut pemi = self.retired_pemi;
        if self.pemi.is_some() {
            for (_, e) in self.table.iter() {
                if e.value.session.is_none()
                    && let Some(p) = &e.value.pemi
                {
                    pemi.add(&p.stats);
                    memory += p.memory_bytes() as u64;
                }
            }
        }
        packrat.add(&self.retired_multicast);
        for g in self.groups.values() {
            packrat.add(&g.counters());
            cache_bytes += g.cache_bytes() as u64;
            memory += g.memory_bytes() as u64;
            c.multicast_members += g.members() as u64;
            c.multicast_virtual_cache_bytes += g.virtual_cache_bytes() as u64;
            c.multicast_no_mac += g.no_mac;
        }
        c.multicast_groups = self.groups.len() as u64;
        c.pemi = pemi;
        c.robin = robin;
        c.packrat = packrat;
        c.cache_bytes = cache_bytes;
        c.engine_memory_bytes = memory;
        c.flows = self.table.len() as u64;
        c.assisted_flows = self.table.assisted_len() as u64;
        c.flow_table = self.table.counters;
        c.session = self.sessions.stats();
        c
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
    );
    let now = Instant::now();
    let mut out = Vec::new();
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
        assert_eq!(
            core.on_frame(now, dir, chunk, meta, &mut out),
            Action::Forward
        );
        core.on_sidekick(
            now,
            SocketAddr::from(([10, 0, 0, 2], 5000)),
            chunk,
            &mut out,
        );
    }
    core.on_timeout(now, &mut out);
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

//! Handshake rescue (beyond the papers): a last-hop loss of the server's first flight costs the
//! client a probe timeout (ReACKed QUICer (IMC '24) §2 and Table 4: 200–999 ms default PTOs, and
//! §4.2: the server's own PTO when it holds an RTT sample). The proxy has just forwarded those
//! datagrams, so it keeps the server's handshake datagrams of a new flow for a short time and
//! replays the identical datagrams once when the client's behaviour shows they did not arrive.
//!
//! Nothing is decrypted: the walk of coalesced packets is `pemi::handshake::coalesced` and the
//! connection ids come from `sidekick_wire::quic::LongHeader` (cleartext long-header fields only).
//!
//! # Per flow (a client address and a server address)
//!
//! 1. A client Initial (a long-header Initial in a datagram of at least 1200 bytes, RFC 9000
//!    §14.1) opens a rescue entry, remembering its Destination Connection ID. Nothing else does:
//!    a server datagram never creates an entry, so replays only ever go to an address that sent
//!    an Initial, on the flow it opened.
//! 2. Server datagrams whose first packet is an Initial or Handshake packet (versions 1 and 2)
//!    are kept as they were forwarded, within the per-flow caps and the core's memory budget. A
//!    Retry or a Version Negotiation ends the entry (the client starts over; nothing is kept).
//! 3. The client's first datagram after the server's first kept ack-eliciting datagram
//!    measures the proxy–client round trip `r` (the client acknowledges what it got at once
//!    during the handshake, RFC 9000 §13.2.1; an instant ACK, ACK frames only, elicits nothing,
//!    so a server that sends one is timed from the ServerHello after it).
//! 4. **Completion**: a client datagram holding a 1-RTT (short-header) packet means the client
//!    has the server's whole flight (it holds 1-RTT keys): the entry ends, its memory returns.
//! 5. **Triggers** — replay every kept datagram not replayed yet, at once:
//!    - *Probe*: the client sends an Initial still addressed to its original DCID after the
//!      server's Initial passed: it never processed the server's Initial (the server's SCID
//!      would have become its DCID, RFC 9000 §7.2), so its probe is a repeated first Initial.
//!    - *Silence*: no completion by `last kept + 2 r + slack`: a client holding the whole flight
//!      answers within one `r` (its Finished and the request), so the missing completion shows
//!      the client lacks part of the flight. Before any answer (`r` unknown: the client may have
//!      got nothing at all), the wait is `no_answer_wait` after the last kept datagram. While
//!      the client's answers hold Initial packets only, the wait is at most `r + slack` (or
//!      `no_answer_wait`, if longer): Handshake packets are acknowledged as promptly as Initial
//!      ones (RFC 9000 §13.2.1), and a client's `r` may include its own delay of its first ACK,
//!      which `2 r` would count twice (the quic-go client's comes ~20 ms after the ServerHello on
//!      a 1 ms last hop). When the
//!      server's datagrams so far reach 3× the client's bytes (within 200 bytes), the server
//!      may be blocked by its anti-amplification limit (RFC 9000 §8.1; a large certificate): then
//!      the wait runs from the client's last datagram plus the proxy–server round trip, the time
//!      the rest of the flight needs to come.
//! 6. Each kept datagram is replayed at most once. Entries end on completion, after `hold`
//!    without completion (a handshake that never completes), or when the client's side goes past
//!    the handshake; flows past the handshake are never tracked again. Entries wait in an index
//!    ordered by their next deadline (silence or end), so a tick costs what is due.
//! 7. **A client's own pace**: a client holding the whole flight still spends its own time on
//!    it (the certificate check: Debian's ngtcp2 client on GnuTLS completes about 10 ms after the
//!    last datagram on a 1 ms last hop, its ACK after 3 ms), which `2 r + slack` does not
//!    cover. Per client address the rescue learns how much longer than `2 r` its completions
//!    took, from rounds without a replay only, and its later handshakes wait that much longer.
//!    A completion after a replay teaches nothing, even one back sooner than the replay could
//!    have been answered (`replay + r`; counted as a spurious round when the client had sent
//!    Handshake packets before the replay): `r` holds the client's own ACK delay, so a
//!    completion the replay caused can look that fast, and learning from it would lengthen the
//!    wait on every lossy handshake. So real losses never lengthen the wait. The learned time
//!    is capped (`max_client_wait`), and the table of clients has a cap and is charged to
//!    the memory budget (`client_pace`, which also hands lessons to the other cores).
//!
//! What a wrong guess costs: one duplicate of each kept datagram, which QUIC discards as a
//! duplicate packet (RFC 9000 §12.3); never more than the caps and the budget. Replays on a flow
//! stay within 3× the bytes its client sent (the anti-amplification factor of RFC 9000 §8.1, for
//! the proxy's own sends), so a spoofed Initial gains an attacker at most the server's own
//! allowance once more.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use crate::Time;

use super::budget::MemoryBudget;
use super::client_pace::{CLIENT_PACE_BYTES, ClientPaces, PaceLesson};
use super::output::InjectQueue;
use crate::engine::Direction;
use crate::flow::FlowKey;
use crate::packet::{UdpPacket, fill_udp_checksum};
use crate::pemi::handshake::{ACK_ONLY_INITIAL_MAX, PacketKind, coalesced};
use sidekick_wire::quic::{LongHeader, LongType};

/// Settings of the handshake rescue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RescueConfig {
    /// Entries (new flows in their handshake) tracked at once.
    pub max_flows: usize,
    /// Server datagrams kept per flow.
    pub max_datagrams: usize,
    /// Bytes kept per flow.
    pub max_bytes: usize,
    /// Added to twice the proxy–client round trip before a missing completion triggers.
    pub slack: Duration,
    /// An entry without completion ends after this long.
    pub hold: Duration,
    /// Before the client's first answer has measured the round trip: the wait after the last
    /// kept datagram (a client that got nothing of the flight says nothing until its PTO).
    pub no_answer_wait: Duration,
    /// Client addresses whose completion pace is remembered (module docs, step 7).
    pub max_clients: usize,
    /// The most a learned pace adds to the wait: a default probe timeout is 200 ms at least
    /// (ReACKed QUICer (IMC '24) Table 4), beyond which a replay could not beat it.
    pub max_client_wait: Duration,
}

impl Default for RescueConfig {
    fn default() -> Self {
        Self {
            max_flows: 1024,
            // A first flight with a 5 kB certificate is 4–6 datagrams; leave room for the
            // server's own retransmissions.
            max_datagrams: 16,
            max_bytes: 24 * 1024,
            slack: Duration::from_millis(5),
            hold: Duration::from_secs(3),
            no_answer_wait: Duration::from_millis(20),
            max_clients: 1024,
            max_client_wait: Duration::from_millis(200),
        }
    }
}

/// Counters of the handshake rescue (Prometheus `sidekick_handshake_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RescueStats {
    /// Entries opened by a client Initial.
    pub flows: u64,
    /// Entries whose client showed the whole flight arrived (1-RTT seen).
    pub completed: u64,
    /// Server datagrams kept.
    pub kept: u64,
    /// Datagrams replayed.
    pub replays: u64,
    /// Bytes replayed (frames).
    pub replay_bytes: u64,
    /// Replay rounds started by a client probe (repeated first Initial).
    pub probe_triggers: u64,
    /// Replay rounds started by the missing completion.
    pub silence_triggers: u64,
    /// Server datagrams not kept: per-flow caps, the memory budget, or the entry table full.
    pub refused: u64,
    /// Replays not made because they would exceed 3× the client's bytes on the flow.
    pub amplification_refused: u64,
    /// Entries ended by a Retry or Version Negotiation.
    pub retry_or_vn: u64,
    /// Entries ended after `hold` without completion.
    pub expired: u64,
    /// First server answers that were an instant ACK (ReACKed QUICer (IMC '24) §2).
    pub instant_acks: u64,
    /// First server answers coalescing the ACK with the ServerHello (wait for certificate).
    pub wait_for_cert: u64,
    /// Silence-triggered rounds that look spurious: the client, having sent Handshake packets,
    /// completed sooner than the replay could have been answered as `r` times it (it held the
    /// flight and was still working on it — or its `r` holds an ACK delay; module docs, step 7).
    pub spurious_rounds: u64,
    /// Completions that taught the client's pace (module docs, step 7).
    pub paces_learned: u64,
}

impl RescueStats {
    /// Adds another worker's counters.
    pub fn add(&mut self, o: &RescueStats) {
        self.flows += o.flows;
        self.completed += o.completed;
        self.kept += o.kept;
        self.replays += o.replays;
        self.replay_bytes += o.replay_bytes;
        self.probe_triggers += o.probe_triggers;
        self.silence_triggers += o.silence_triggers;
        self.refused += o.refused;
        self.amplification_refused += o.amplification_refused;
        self.retry_or_vn += o.retry_or_vn;
        self.expired += o.expired;
        self.instant_acks += o.instant_acks;
        self.wait_for_cert += o.wait_for_cert;
        self.spurious_rounds += o.spurious_rounds;
        self.paces_learned += o.paces_learned;
    }
}

/// Longest connection id (RFC 9000 §17.2).
const MAX_CID: usize = 20;
/// Smallest datagram carrying a client Initial (RFC 9000 §14.1).
const MIN_CLIENT_INITIAL: usize = 1200;

#[derive(Debug)]
struct Entry {
    dcid: [u8; MAX_CID],
    dcid_len: u8,
    opened: Time,
    first_kept: Option<Time>,
    /// The first kept datagram the client must answer: an instant ACK (ACK-only Initials) is
    /// not ack-eliciting, so the client's next datagram answers the ServerHello after it.
    first_eliciting: Option<Time>,
    /// The first kept datagram held Initial packets only, too long to be known as an ACK alone
    /// (counted as "wait for certificate" until the next datagram tells).
    first_long_initial_only: bool,
    last_kept: Option<Time>,
    /// Proxy–client round trip (first eliciting kept → the client's first datagram after it).
    rtt: Option<Duration>,
    /// Kept frames and whether each was replayed.
    kept: Vec<(Vec<u8>, bool)>,
    bytes: usize,
    /// Frame bytes the client sent on this flow, and frame bytes the rescue replayed: replays
    /// stay within 3× the former (RFC 9000 §8.1's anti-amplification factor, applied to the
    /// proxy's own sends).
    client_bytes: usize,
    replayed_bytes: usize,
    /// Frame bytes of the server's handshake datagrams, kept or not.
    server_bytes: usize,
    /// The server's last datagram left it (nearly) at 3× the client's bytes: it may be blocked.
    blocked: bool,
    /// Proxy–server round trip: client Initial to the server's first handshake datagram.
    server_rtt: Option<Duration>,
    /// The client's last datagram.
    last_client: Option<Time>,
    /// The client's first datagram holding a Handshake packet: from then on it is known to hold
    /// Handshake packets of the flight (it acknowledges them, RFC 9000 §13.2.1).
    client_handshake: Option<Time>,
    deadline: Option<Time>,
    /// The time it is filed under in the timer index: its silence deadline or its end
    /// (`opened + hold`), whichever comes first.
    indexed: Time,
    /// The client's learned pace when the entry opened: added to the silence wait.
    client_pace: Duration,
    /// When the first replay round went out, and whether a silence started it.
    replayed: Option<(Time, bool)>,
}

impl Entry {
    /// When it next needs a look: its silence deadline or its end, whichever comes first.
    fn due(&self, hold: Duration) -> Time {
        let end = self.opened + hold;
        self.deadline.map_or(end, |d| d.min(end))
    }

    /// Files `key`'s entry in `timers` under its current due time.
    fn reindex(&mut self, key: FlowKey, timers: &mut BTreeSet<(Time, FlowKey)>, hold: Duration) {
        let due = self.due(hold);
        if due != self.indexed {
            timers.remove(&(self.indexed, key));
            timers.insert((due, key));
            self.indexed = due;
        }
    }

    fn arm(&mut self, cfg: &RescueConfig) {
        let Some(last) = self.last_kept else { return };
        if self.kept.iter().any(|(_, done)| !done) {
            let answer_wait = self.rtt.map(|r| {
                let full = 2 * r + cfg.slack;
                if self.client_handshake.is_some() {
                    full
                } else {
                    // Answers at the Initial level only so far: a client acknowledges Handshake
                    // packets as promptly as Initial ones (RFC 9000 §13.2.1), so one of its round
                    // trips after the last kept datagram (or the no-answer wait, if longer) shows
                    // whether it got them. `r` may hold the client's own delay of its first ACK
                    // (the quic-go client's comes about 20 ms after the ServerHello on a 1 ms last
                    // hop), and doubling it would double that delay too.
                    full.min(cfg.no_answer_wait.max(r + cfg.slack))
                }
            });
            let mut due = match answer_wait {
                Some(w) => last + w + self.client_pace,
                None => last + cfg.no_answer_wait,
            };
            // A server at its anti-amplification limit (RFC 9000 §8.1) waits for the client's
            // next datagram before sending the rest of its flight: after that datagram, allow
            // the proxy–server round trip for the rest to come (a large certificate, ReACKed
            // QUICer (IMC '24) §4.1), then the usual wait.
            if self.blocked
                && let (Some(c), Some(rs)) = (self.last_client, self.server_rtt)
                && c >= last
            {
                due = due.max(c + rs + answer_wait.unwrap_or(cfg.slack) + self.client_pace);
            }
            self.deadline = Some(due);
        }
    }
}

/// One captured datagram as the rescue sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Datagram<'a> {
    /// Direction of travel.
    pub dir: Direction,
    /// Its flow.
    pub key: FlowKey,
    /// The whole frame as captured.
    pub frame: &'a [u8],
    /// Its UDP payload.
    pub payload: &'a [u8],
    /// Its parsed headers.
    pub udp: &'a UdpPacket,
    /// The capture left its UDP checksum partial: fill it in on the kept copy.
    pub csum: bool,
}

/// The rescue state of one core (see the module documentation).
#[derive(Debug)]
pub struct HandshakeRescue {
    cfg: RescueConfig,
    entries: HashMap<FlowKey, Entry>,
    /// Every entry under its due time (`Entry::due`), so that a tick costs what is due, not
    /// what is tracked.
    timers: BTreeSet<(Time, FlowKey)>,
    /// Learned client paces by address (module docs, step 7), at most `cfg.max_clients`.
    paces: ClientPaces,
    /// Counters.
    pub stats: RescueStats,
}

impl HandshakeRescue {
    /// An empty rescue table.
    pub fn new(cfg: RescueConfig) -> Self {
        Self {
            cfg,
            entries: HashMap::new(),
            timers: BTreeSet::new(),
            paces: ClientPaces::new(cfg.max_clients),
            stats: RescueStats::default(),
        }
    }

    /// Entries being tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a datagram of `key` in `dir` concerns the rescue (any client datagram may open an
    /// entry; server datagrams only of tracked flows).
    pub fn wants(&self, dir: Direction, key: &FlowKey) -> bool {
        dir == Direction::FromClient || self.entries.contains_key(key)
    }

    /// Bytes charged to the memory budget: kept frames and remembered client paces.
    pub fn charged_bytes(&self) -> usize {
        self.entries.values().map(|e| e.bytes).sum::<usize>() + self.paces.len() * CLIENT_PACE_BYTES
    }

    /// The pace learned for `client` (module docs, step 7), if any.
    pub fn client_pace(&self, client: IpAddr) -> Option<Duration> {
        self.paces.get(client)
    }

    /// A completion at `now` of `e` (a flow of `client`): learns the client's pace from it when
    /// it says so unambiguously (module docs, step 7).
    fn learn_pace(&mut self, now: Time, client: IpAddr, e: &Entry, budget: &mut MemoryBudget) {
        let (Some(last), Some(r)) = (e.last_kept, e.rtt) else {
            return;
        };
        if let Some((at, silence)) = e.replayed {
            // A replayed round teaches nothing. Back sooner than the replay could have been
            // answered (`replay + r`), from a client that had shown it held Handshake packets,
            // the round looks spurious and is counted; but `r` holds the client's own delay of
            // its first ACK, and a completion that the replay caused can come back within it
            // (aioquic's: 3 ms after the replay, `r` 4–5 ms on a 1 ms last hop). Learning from
            // such rounds lengthened the wait of a client with real losses by `slack` and more
            // on every lossy handshake. After a probe the round trip spans the client's probe
            // timeout: nothing to learn either.
            if silence && now < at + r && e.client_handshake.is_some_and(|h| h <= at) {
                self.stats.spurious_rounds += 1;
            }
            return;
        }
        let sample = now
            .saturating_duration_since(last)
            .saturating_sub(2 * r)
            .min(self.cfg.max_client_wait);
        if self.paces.learn(now, client, sample, budget) {
            self.stats.paces_learned += 1;
        }
    }

    /// The next pace lesson learned here for the other cores (module docs of `client_pace`).
    pub fn poll_lesson(&mut self) -> Option<PaceLesson> {
        self.paces.poll_lesson()
    }

    /// Another core's pace lesson.
    pub(super) fn handle_lesson(
        &mut self,
        now: Time,
        lesson: PaceLesson,
        budget: &mut MemoryBudget,
    ) {
        let lesson = PaceLesson {
            extra: lesson.extra.min(self.cfg.max_client_wait),
            ..lesson
        };
        self.paces.teach(now, lesson, budget);
    }

    /// Ends `key`'s entry; the entry, if there was one.
    fn close(&mut self, key: &FlowKey, budget: &mut MemoryBudget) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.timers.remove(&(e.indexed, *key));
        budget.release(e.bytes);
        Some(e)
    }

    /// Observe one datagram (see [`Datagram`]). Replays go to `out`.
    pub(super) fn on_datagram(
        &mut self,
        now: Time,
        d: Datagram<'_>,
        budget: &mut MemoryBudget,
        out: &mut InjectQueue,
    ) {
        let Datagram {
            dir,
            key,
            frame,
            payload,
            udp,
            csum,
        } = d;
        let is_long = payload.first().is_some_and(|b| b & 0x80 != 0);
        let long = LongHeader::parse(payload).ok();
        match dir {
            Direction::FromClient => {
                let Some(e) = self.entries.get_mut(&key) else {
                    let Some(h) = long else { return };
                    if h.ty == Some(LongType::Initial)
                        && h.is_known_version()
                        && payload.len() >= MIN_CLIENT_INITIAL
                        && h.dcid.len() <= MAX_CID
                        && self.entries.len() < self.cfg.max_flows
                    {
                        let end = now + self.cfg.hold;
                        self.timers.insert((end, key));
                        let mut dcid = [0u8; MAX_CID];
                        dcid[..h.dcid.len()].copy_from_slice(h.dcid);
                        self.entries.insert(
                            key,
                            Entry {
                                dcid,
                                dcid_len: h.dcid.len() as u8,
                                opened: now,
                                first_kept: None,
                                first_eliciting: None,
                                first_long_initial_only: false,
                                last_kept: None,
                                rtt: None,
                                kept: Vec::new(),
                                bytes: 0,
                                client_bytes: frame.len(),
                                replayed_bytes: 0,
                                server_bytes: 0,
                                blocked: false,
                                server_rtt: None,
                                last_client: None,
                                client_handshake: None,
                                deadline: None,
                                indexed: end,
                                client_pace: self
                                    .paces
                                    .get(key.client.ip())
                                    .unwrap_or(Duration::ZERO),
                                replayed: None,
                            },
                        );
                        self.stats.flows += 1;
                    }
                    return;
                };
                e.client_bytes = e.client_bytes.saturating_add(frame.len());
                e.last_client = Some(now);
                let pkts = coalesced(payload, 8);
                if pkts.iter().any(|k| matches!(k, PacketKind::Handshake)) {
                    e.client_handshake.get_or_insert(now);
                }
                if !is_long || pkts.iter().any(|k| matches!(k, PacketKind::Short { .. })) {
                    self.stats.completed += 1;
                    if let Some(e) = self.close(&key, budget) {
                        self.learn_pace(now, key.client.ip(), &e, budget);
                    }
                    return;
                }
                if e.first_kept.is_none() {
                    // The server has not answered yet (a slow server, Δt): the client's own
                    // retransmissions are its business.
                    return;
                }
                if e.rtt.is_none()
                    && let Some(eliciting) = e.first_eliciting
                {
                    e.rtt = Some(now.saturating_duration_since(eliciting));
                }
                e.arm(&self.cfg);
                let repeated_first_initial = long.is_some_and(|h| {
                    h.ty == Some(LongType::Initial) && h.dcid == &e.dcid[..usize::from(e.dcid_len)]
                });
                if repeated_first_initial && replay(now, false, e, out, &mut self.stats) {
                    self.stats.probe_triggers += 1;
                }
                e.reindex(key, &mut self.timers, self.cfg.hold);
            }
            Direction::ToClient => {
                let Some(e) = self.entries.get_mut(&key) else {
                    return;
                };
                let pkts = coalesced(payload, 8);
                match pkts.first() {
                    Some(PacketKind::Retry | PacketKind::VersionNegotiation) => {
                        self.stats.retry_or_vn += 1;
                        self.close(&key, budget);
                    }
                    Some(PacketKind::Initial { .. } | PacketKind::Handshake) => {
                        let ack_only = pkts.iter().all(
                            |k| matches!(k, PacketKind::Initial { len } if *len <= ACK_ONLY_INITIAL_MAX),
                        );
                        if e.first_kept.is_none() {
                            if ack_only {
                                self.stats.instant_acks += 1;
                            } else {
                                self.stats.wait_for_cert += 1;
                                e.first_long_initial_only =
                                    pkts.iter().all(|k| matches!(k, PacketKind::Initial { .. }));
                            }
                        } else if e.first_long_initial_only
                            && e.kept.len() == 1
                            && matches!(pkts.first(), Some(PacketKind::Initial { .. }))
                        {
                            // A second Initial right behind an Initial-only first datagram: the
                            // ServerHello is here, so the first held an ACK alone, padded (an
                            // instant ACK the cleartext length could not tell). A ServerHello
                            // fits one Initial packet, and a server's own retransmission of it
                            // comes a probe timeout later, after the client's answer.
                            self.stats.wait_for_cert = self.stats.wait_for_cert.saturating_sub(1);
                            self.stats.instant_acks += 1;
                            e.first_eliciting = None;
                            e.rtt = None;
                        }
                        e.first_long_initial_only = e.first_long_initial_only && e.kept.is_empty();
                        e.server_bytes = e.server_bytes.saturating_add(frame.len());
                        // At 3× the client's bytes, give or take headers and padding.
                        e.blocked = e.server_bytes + 200 >= e.client_bytes.saturating_mul(3);
                        if e.server_rtt.is_none() {
                            e.server_rtt = Some(now.saturating_duration_since(e.opened));
                        }
                        let fits = e.kept.len() < self.cfg.max_datagrams
                            && e.bytes + frame.len() <= self.cfg.max_bytes;
                        if !fits || !budget.try_reserve(frame.len()) {
                            self.stats.refused += 1;
                            return;
                        }
                        let mut copy = frame.to_vec();
                        if csum {
                            fill_udp_checksum(&mut copy, udp);
                        }
                        e.kept.push((copy, false));
                        self.stats.kept += 1;
                        e.bytes += frame.len();
                        e.first_kept.get_or_insert(now);
                        if !ack_only {
                            e.first_eliciting.get_or_insert(now);
                        }
                        e.last_kept = Some(now);
                        e.arm(&self.cfg);
                        e.reindex(key, &mut self.timers, self.cfg.hold);
                    }
                    // 0.5-RTT data or padding: not part of the flight we keep.
                    _ => {}
                }
            }
        }
    }

    /// The earliest deadline (a silence trigger or an entry's end).
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// Fire what is due at `now`: silence triggers replay, expired entries end.
    pub(super) fn handle_timeout(
        &mut self,
        now: Time,
        budget: &mut MemoryBudget,
        out: &mut InjectQueue,
    ) {
        let hold = self.cfg.hold;
        while let Some(&(at, key)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(e) = self.entries.get_mut(&key) else {
                continue;
            };
            if e.deadline.is_some_and(|d| d <= now) {
                e.deadline = None;
                if replay(now, true, e, out, &mut self.stats) {
                    self.stats.silence_triggers += 1;
                }
            }
            if e.opened + hold <= now {
                self.stats.expired += 1;
                self.close(&key, budget);
                continue;
            }
            let due = e.due(hold);
            e.indexed = due;
            self.timers.insert((due, key));
        }
    }
}

/// Replays at `now` every kept datagram of `e` not replayed yet, within 3× the client's bytes
/// (`silence`: the round's trigger); whether any was.
fn replay(
    now: Time,
    silence: bool,
    e: &mut Entry,
    out: &mut InjectQueue,
    stats: &mut RescueStats,
) -> bool {
    let mut any = false;
    let allowance = e.client_bytes.saturating_mul(3);
    for (frame, done) in &mut e.kept {
        if *done {
            continue;
        }
        if e.replayed_bytes + frame.len() > allowance {
            stats.amplification_refused += 1;
            continue;
        }
        *done = true;
        if out.push(Direction::ToClient, frame.clone()) {
            e.replayed_bytes += frame.len();
            stats.replays += 1;
            stats.replay_bytes += frame.len() as u64;
            any = true;
        }
    }
    e.deadline = None;
    if any {
        e.replayed.get_or_insert((now, silence));
    }
    any
}

/// Headers of a bare UDP payload of `len` bytes (offsets 0), for callers that feed payloads
/// without a frame and never ask for a checksum (the fuzz body, unit tests).
fn bare_udp(len: usize) -> UdpPacket {
    let any = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
    UdpPacket {
        l3_offset: 0,
        l4_offset: 0,
        payload_offset: 0,
        payload_len: len,
        src: any,
        dst: any,
        checksum: 0,
    }
}

/// Fuzz body: arbitrary datagrams in both directions, with time advancing, through a rescue
/// table with a small budget. Invariants: every replay goes to a flow some client Initial opened,
/// no datagram is replayed twice, the budget's reservation equals the bytes kept, and the timer
/// index agrees with a scan of the entries.
pub fn fuzz_rescue(data: &[u8]) {
    let t0 = Time::ZERO;
    let cfg = RescueConfig {
        max_flows: 4,
        max_datagrams: 3,
        max_bytes: 4000,
        ..RescueConfig::default()
    };
    let mut r = HandshakeRescue::new(cfg);
    let mut budget = MemoryBudget::new(6000);
    let mut out = InjectQueue::default();
    let mut now = t0;
    for chunk in data.split(|&b| b == 0x5a) {
        let Some((&ctl, rest)) = chunk.split_first() else {
            continue;
        };
        now += Duration::from_millis(u64::from(ctl & 0x0f) * 3);
        let dir = if ctl & 0x10 == 0 {
            Direction::FromClient
        } else {
            Direction::ToClient
        };
        let key = FlowKey {
            client: std::net::SocketAddr::from(([10, 0, 0, 2], u16::from(ctl >> 6))),
            server: std::net::SocketAddr::from(([10, 0, 0, 3], 443)),
        };
        // Client Initials must be padded to 1200 bytes: let the fuzzer reach that size.
        let mut payload = rest.to_vec();
        if ctl & 0x20 != 0 {
            payload.resize(MIN_CLIENT_INITIAL, 0);
        }
        let d = Datagram {
            dir,
            key,
            frame: &payload,
            payload: &payload,
            udp: &bare_udp(payload.len()),
            csum: false,
        };
        r.on_datagram(now, d, &mut budget, &mut out);
        r.handle_timeout(now, &mut budget, &mut out);
        assert_eq!(budget.reserved(), r.charged_bytes());
        assert!(r.len() <= cfg.max_flows);
        // The timer index holds every entry once, under its due time.
        assert_eq!(r.timers.len(), r.entries.len());
        let scanned = r.entries.values().map(|e| e.due(cfg.hold)).min();
        assert_eq!(r.poll_timeout(), scanned);
    }
    let mut replays = 0u64;
    while out.pop().is_some() {
        replays += 1;
    }
    assert_eq!(replays, r.stats.replays);
    assert!(r.stats.replays <= r.stats.kept, "a datagram replayed twice");
    for e in r.entries.values() {
        assert!(e.replayed_bytes <= 3 * e.client_bytes, "amplification");
    }
}

#[cfg(test)]
#[path = "handshake_rescue_tests.rs"]
mod tests;

//! Packrat engine (Packrat (CoNEXT '26) §3, §5, §6.1): cache server→client packets, decode the client's
//! eACKs, retransmit the missing cached packets unchanged.
//!
//! - **Cache** (§6.1 "Cache Management"): packets in forwarding order up to a byte capacity.
//!   A packet leaves the cache when an eACK shows the client has it, or — optimistically — when
//!   the cache is full and a new packet arrives (the oldest goes). Every evicted packet is encoded
//!   into the proxy's local eACK (`evicted`) — at the latest when it leaves the cache.
//! - **eACK processing** (§7.3.4: "encoding a delta of packets forwarded since the last eACK,
//!   decoding the received eACK, updating the packet cache, and performing retransmissions"): the
//!   proxy's view of the epoch is `evicted` plus the identifiers of the packets still cached; the
//!   difference with the client's eACK gives the missing packets.
//! - **Loss rule** (§6.1: "the proxy triggers a retransmission upon receiving an unacknowledged
//!   gap in the ordered sequence of cached packets"): a missing cached packet is retransmitted
//!   only if a packet forwarded after it is acknowledged; it is retransmitted again only once a
//!   packet forwarded after the previous retransmission is acknowledged.
//! - **Reset** (§6.1 "Resetting"): an eACK that does not decode starts a new epoch: the local eACK
//!   and the cache are cleared and a Reset is sent.
//!
//! The cache stores frames back to back in one byte ring whose capacity is the byte cap
//! (`ring`); its index is a queue of fixed-size entries. Neither allocates per packet in steady
//! state, which keeps the per-data-packet cost (§7.3.4: 1002 cycles in the paper) low.

pub mod multicast;
mod ring;
mod view;

use crate::Time;
use std::collections::VecDeque;

use eack::HashKey;
use quack::{IdSource, Width};

use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};
use crate::packet::segment_frame;

/// The proxy's Packrat engine for one session: its cache and eACK decoding, from the session's
/// negotiated `sidekick_protocol::messages::PackratConfig` and the proxy's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackratEngineConfig {
    /// Local coded symbols of the rIBLT (Packrat (CoNEXT '26) §5.2.1: 160 for a download, 40 for media).
    pub local_symbols: usize,
    /// Cache capacity in bytes (Packrat (CoNEXT '26) Table 4 WiFi: 48 kB).
    pub cache_bytes: usize,
    /// How to compute identifiers.
    pub id: IdSource,
    /// Identifier width the session negotiated (2, 4 or 8 bytes; Sidekick (NSDI '24) §3): the
    /// eACKs the client sends must carry it, and identifiers are read at it with `id`.
    pub width: Width,
    /// rIBLT hash key shared with the client.
    pub key: HashKey,
    /// Retransmission budget: the bytes retransmitted to the client stay within this percentage
    /// of the bytes forwarded to it ([`RetxBudget`]). The eACKs that trigger retransmissions come
    /// from the client, so without a budget a client (or anyone holding its session) could make
    /// the proxy resend its whole cache on every eACK.
    pub retx_budget_percent: u32,
}

impl Default for PackratEngineConfig {
    /// The Packrat WiFi setting (docs/results.md): 160 symbols, 48 kB cache.
    fn default() -> Self {
        Self {
            local_symbols: 160,
            cache_bytes: 48 * 1024,
            id: IdSource::QUIC_DEFAULT,
            width: Width::U32,
            key: HashKey::DEFAULT,
            retx_budget_percent: DEFAULT_RETX_BUDGET_PERCENT,
        }
    }
}

/// Default retransmission budget: 10 % of the bytes forwarded to the client (PEMI's own budget
/// is 1.1× the forwarded packets, `pemi::PemiConfig`).
pub const DEFAULT_RETX_BUDGET_PERCENT: u32 = 10;

/// Byte accounting of one client's retransmission budget: a retransmission of `n` bytes is
/// allowed only while `retransmitted + n ≤ percent × forwarded / 100`, so the invariant holds at
/// every instant, whatever eACKs arrive.
///
/// ```
/// use sidekick_proxy_core::packrat::RetxBudget;
/// let mut b = RetxBudget::default();
/// b.on_forwarded(10_000);
/// assert!(b.try_spend(1_000, 10));
/// assert!(!b.try_spend(1, 10)); // 1 001 > 10 % of 10 000
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetxBudget {
    forwarded: u64,
    retransmitted: u64,
}

impl RetxBudget {
    /// `bytes` more were forwarded to the client.
    pub fn on_forwarded(&mut self, bytes: usize) {
        self.forwarded = self.forwarded.saturating_add(bytes as u64);
    }

    /// Spends `bytes` on a retransmission if the budget (`percent` % of the forwarded bytes)
    /// allows it; returns whether it did.
    pub fn try_spend(&mut self, bytes: usize, percent: u32) -> bool {
        let allowed = u128::from(self.forwarded) * u128::from(percent) / 100;
        let after = self.retransmitted.saturating_add(bytes as u64);
        if u128::from(after) > allowed {
            return false;
        }
        self.retransmitted = after;
        true
    }

    /// These accounts with `bytes` already retransmitted.
    pub fn spent(mut self, bytes: u64) -> Self {
        self.retransmitted = bytes;
        self
    }

    /// Bytes forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded
    }

    /// Bytes retransmitted so far.
    pub fn retransmitted(&self) -> u64 {
        self.retransmitted
    }
}

/// Counters of one Packrat engine (one per outcome).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PackratCounters {
    /// Packets cached.
    pub cached: u64,
    /// Packets not cached (identifier unreadable, or larger than the whole cache).
    pub not_cached: u64,
    /// Packets evicted because an eACK acknowledged them.
    pub evicted_acked: u64,
    /// Packets evicted optimistically because the cache was full.
    pub evicted_optimistic: u64,
    /// eACKs decoded.
    pub eacks_decoded: u64,
    /// eACKs that failed to parse or decode (each causes a Reset).
    pub eacks_failed: u64,
    /// eACKs of an old epoch (ignored).
    pub eacks_stale: u64,
    /// Retransmissions injected.
    pub retransmissions: u64,
    /// Missing packets no longer cached (optimistically evicted): left to end-to-end recovery.
    pub missing_uncached: u64,
    /// Missing packets not yet retransmitted because no later packet was acknowledged.
    pub missing_in_flight: u64,
    /// Identifiers the client reported that the proxy never saw.
    pub extra: u64,
    /// Resets started by the proxy.
    pub resets: u64,
    /// Bytes forwarded to the client (frames, every packet of the flow; the budget's base).
    pub forwarded_bytes: u64,
    /// Bytes retransmitted to the client.
    pub retransmitted_bytes: u64,
    /// Retransmissions refused because they would exceed the retransmission budget (the packet
    /// stays cached and may be retransmitted once the budget allows).
    pub retx_refused_budget: u64,
    /// Identifier collisions the engine can see (Sidekick (NSDI '24) §3: they grow as the
    /// identifier narrows): a packet forwarded with the identifier of one the last decoded eACK
    /// showed missing (QUIC never sends the same datagram twice, so the two are different
    /// packets: the new one will look missing too), and cached packets beyond the first that
    /// share a missing identifier. Either kind makes a packet the client has look missing, so it
    /// may be retransmitted needlessly.
    pub id_collisions: u64,
    /// Packets given up after [`MAX_REPAIRS`] failed repairs (taken out of the cache and of the
    /// proxy's view): datagrams the client does not take, such as a stateless reset.
    pub repairs_abandoned: u64,
}

impl PackratCounters {
    /// Adds `b`'s counts to these.
    pub fn add(&mut self, b: &PackratCounters) {
        self.cached += b.cached;
        self.not_cached += b.not_cached;
        self.evicted_acked += b.evicted_acked;
        self.evicted_optimistic += b.evicted_optimistic;
        self.eacks_decoded += b.eacks_decoded;
        self.eacks_failed += b.eacks_failed;
        self.eacks_stale += b.eacks_stale;
        self.retransmissions += b.retransmissions;
        self.missing_uncached += b.missing_uncached;
        self.missing_in_flight += b.missing_in_flight;
        self.extra += b.extra;
        self.resets += b.resets;
        self.forwarded_bytes += b.forwarded_bytes;
        self.retransmitted_bytes += b.retransmitted_bytes;
        self.retx_refused_budget += b.retx_refused_budget;
        self.id_collisions += b.id_collisions;
        self.repairs_abandoned += b.repairs_abandoned;
    }
}

/// Index entry of one cached frame; its bytes are at `at..at + len` of the ring (wrapping).
#[derive(Debug, Clone, Copy)]
struct Cached {
    seq: u64,
    /// Retransmitted when the newest forwarded seq was this; again only after a later ack.
    retx_mark: Option<u64>,
    at: usize,
    /// Frame length (a frame of 4 GiB or more is not cached).
    len: u32,
    /// Times retransmitted (beside `len`: the entry stays 48 bytes).
    repairs: u8,
    /// Identifier at the session's width, zero-extended.
    id: u64,
}

// Every cache reserves its index up front (`cache_bytes / MIN_FRAME + 1` entries): keep it small.
const _: () = assert!(std::mem::size_of::<Cached>() == 48);

impl Cached {
    fn len(&self) -> usize {
        self.len as usize
    }
}

/// Repairs of one packet, each seen to fail (a packet forwarded after it was acknowledged while
/// it was still missing), after which the proxy gives the packet up. A datagram the client does
/// not take — a stateless reset the server sent in answer to the discovery marker (RFC 9000
/// §10.3), a datagram injected upstream of the proxy — never enters the client's eACKs (its lens
/// leaves out what it cannot authenticate), so without a bound the proxy would resend it after
/// every acknowledgement and carry it as a difference in every decode. A real loss whose repairs
/// are all lost too (at 10 % loss, one in 10⁴) is left to end-to-end recovery.
pub const MAX_REPAIRS: u8 = 4;

/// Smallest frame that carries a UDP datagram (IPv4 + UDP headers): bounds the number of index
/// entries to `cache_bytes / MIN_FRAME + 1` even for tiny frames.
const MIN_FRAME: usize = 28;

/// The per-flow Packrat state.
///
/// ```
/// use sidekick_proxy_core::packrat::{PackratEngineConfig, PackratEngine};
/// let e = PackratEngine::new(PackratEngineConfig::default());
/// assert_eq!(e.cache_bytes(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct PackratEngine {
    cfg: PackratEngineConfig,
    cache: VecDeque<Cached>,
    ring: ring::FrameRing,
    max_entries: usize,
    next_seq: u64,
    /// Cached packets with `seq < encoded_upto` are already in the local view.
    encoded_upto: u64,
    /// The local eACK view, the received eACK and the decoder at the session's width.
    views: view::Views,
    missing: Vec<u64>,
    /// Of the last decoded eACK: cached packets missing behind the newest one it acknowledged
    /// (resent now, or already on their way); `None` before one, or after a failed one.
    last_repairable: Option<u32>,
    /// Identifiers of the cached packets an eACK found missing (collision count; at most the
    /// cache's entries).
    matched: Vec<u64>,
    budget: RetxBudget,
    /// Counters.
    pub counters: PackratCounters,
}

impl PackratEngine {
    /// A fresh engine in epoch 0.
    pub fn new(cfg: PackratEngineConfig) -> Self {
        Self {
            cfg,
            cache: VecDeque::new(),
            ring: ring::FrameRing::new(cfg.cache_bytes),
            max_entries: cfg.cache_bytes / MIN_FRAME + 1,
            next_seq: 0,
            encoded_upto: 0,
            views: view::Views::new(cfg.width, cfg.local_symbols, cfg.key),
            missing: Vec::new(),
            last_repairable: None,
            matched: Vec::new(),
            budget: RetxBudget::default(),
            counters: PackratCounters::default(),
        }
    }

    /// The most heap memory an engine with `cfg` can hold: its byte ring, the index of a ring
    /// full of the smallest frames, and its sketches (what the core's memory budget reserves).
    pub fn memory_cap(cfg: &PackratEngineConfig) -> usize {
        cfg.cache_bytes
            + (cfg.cache_bytes / MIN_FRAME + 1) * std::mem::size_of::<Cached>()
            + 3 * cfg.local_symbols * view::Views::symbol_bytes(cfg.width)
            + std::mem::size_of::<Self>()
    }

    /// The retransmission budget's accounts (kept across epochs: a Reset does not refill it).
    pub fn budget(&self) -> RetxBudget {
        self.budget
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.views.epoch()
    }

    /// The identifier width of this engine's eACKs.
    pub fn width(&self) -> Width {
        self.cfg.width
    }

    /// Bytes cached.
    pub fn cache_bytes(&self) -> usize {
        self.ring.used()
    }

    /// Packets cached.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Start `epoch`: clear the local eACK and the cache (client Reset, or after a proxy Reset
    /// the session layer numbered).
    pub fn reset(&mut self, epoch: u32) {
        self.views.reset(epoch);
        self.missing.clear();
        self.cache.clear();
        self.ring.clear();
        self.encoded_upto = self.next_seq;
    }

    /// Cache one server→client packet (the hot path). `frame` is what a retransmission injects.
    /// The frame is copied into the byte ring; nothing is allocated (after the first packet).
    pub fn cache_packet(&mut self, payload: &[u8], frame_bytes: &[u8]) {
        self.budget.on_forwarded(frame_bytes.len());
        self.counters.forwarded_bytes += frame_bytes.len() as u64;
        let Ok(id) = self.views.extract(&self.cfg.id, payload) else {
            self.counters.not_cached += 1;
            return;
        };
        if !self.missing.is_empty() && self.missing.binary_search(&id).is_ok() {
            self.counters.id_collisions += 1;
        }
        let Some(len32) = u32::try_from(frame_bytes.len())
            .ok()
            .filter(|_| frame_bytes.len() <= self.cfg.cache_bytes)
        else {
            // Cannot be cached; encode it as forwarded so the views stay in sync.
            self.views.insert(id);
            self.counters.not_cached += 1;
            return;
        };
        let len = frame_bytes.len();
        while self.ring.used() + len > self.cfg.cache_bytes || self.cache.len() >= self.max_entries
        {
            let Some(old) = self.cache.pop_front() else {
                break;
            };
            self.ring.pop_front(old.len());
            if old.seq >= self.encoded_upto {
                self.views.insert(old.id);
            }
            self.counters.evicted_optimistic += 1;
        }
        let at = self.ring.push(frame_bytes);
        self.cache.push_back(Cached {
            seq: self.next_seq,
            retx_mark: None,
            at,
            len: len32,
            repairs: 0,
            id,
        });
        self.next_seq += 1;
        self.counters.cached += 1;
    }

    /// Process a client eACK (wire bytes of the eack crate). Retransmissions are pushed as
    /// [`Action::Inject`]; an undecodable eACK resets the engine and pushes
    /// [`Outgoing::Reset`] — the session layer then assigns the new epoch with
    /// [`PackratEngine::reset`].
    pub fn on_eack(&mut self, bytes: &[u8], out: &mut Vec<Action>) {
        self.last_repairable = None;
        let remote_epoch = match self.views.parse(bytes) {
            Ok(epoch) => epoch,
            Err(e) => {
                // Malformed, or another identifier width than the session's.
                tracing::debug!(error = %e, "malformed eACK");
                self.fail(out);
                return;
            }
        };
        if remote_epoch != self.views.epoch() {
            self.counters.eacks_stale += 1;
            return;
        }
        // The proxy's view is every packet forwarded in this epoch: evicted ones plus the cached
        // ones. Cached packets are encoded once, at the first eACK after they were forwarded (the
        // delta of §7.3.4), so the local view then holds every packet and eviction on
        // acknowledgement costs nothing.
        let upto = self.encoded_upto;
        self.views.insert_all(
            self.cache
                .iter()
                .rev()
                .take_while(|c| c.seq >= upto)
                .map(|c| c.id),
        );
        self.encoded_upto = self.next_seq;
        self.missing.clear();
        let extra = match self.views.decode(&mut self.missing) {
            Ok(extra) => extra,
            Err(e) => {
                tracing::debug!(error = %e, "eACK did not decode");
                self.fail(out);
                return;
            }
        };
        self.counters.eacks_decoded += 1;
        self.counters.extra += extra as u64;
        self.missing.sort_unstable();
        // Highest acknowledged sequence number among cached packets.
        let max_acked = self
            .cache
            .iter()
            .rev()
            .find(|c| self.missing.binary_search(&c.id).is_err())
            .map(|c| c.seq);
        let mut found = 0usize;
        let newest = self.next_seq.saturating_sub(1);
        // Acknowledged packets leave the cache; the missing ones stay, slid to the front of the
        // ring in their order (in place: the index and the ring are compacted together).
        let percent = self.cfg.retx_budget_percent;
        let Self {
            cache,
            ring,
            missing,
            matched,
            counters,
            budget,
            views,
            ..
        } = self;
        matched.clear();
        let mut kept_bytes = 0usize;
        let mut repairable = 0u32;
        cache.retain_mut(|c| {
            if missing.binary_search(&c.id).is_err() {
                counters.evicted_acked += 1;
                return false;
            }
            found += 1;
            // Behind the newest acknowledged packet and, if resent, acknowledged past that
            // resend: (another) repair is due — the previous one, if any, failed.
            let eligible =
                max_acked.is_some_and(|m| m > c.seq && c.retx_mark.is_none_or(|r| m > r));
            if eligible && c.repairs >= MAX_REPAIRS {
                counters.repairs_abandoned += 1;
                views.remove(c.id);
                return false;
            }
            // Behind the newest acknowledged packet, or resent earlier and not yet
            // acknowledged: a repair is (or may still be) on its way.
            if max_acked.is_some_and(|m| m > c.seq) || c.retx_mark.is_some() {
                repairable = repairable.saturating_add(1);
            }
            matched.push(c.id);
            c.at = ring.relocate(c.at, c.len(), kept_bytes);
            kept_bytes += c.len();
            if eligible && !budget.try_spend(c.len(), percent) {
                counters.retx_refused_budget += 1;
            } else if eligible {
                let mut frame = Vec::with_capacity(c.len());
                ring.copy_out(c.at, c.len(), &mut frame);
                out.push(Action::Inject {
                    dir: Direction::ToClient,
                    frame,
                });
                c.retx_mark = Some(newest);
                c.repairs = c.repairs.saturating_add(1);
                counters.retransmissions += 1;
                counters.retransmitted_bytes += u64::from(c.len);
            } else {
                counters.missing_in_flight += 1;
            }
            true
        });
        ring.truncate(kept_bytes);
        // Missing packets no longer cached (evicted optimistically) may have been resent
        // before they were evicted, with the resend still on its way: they count as repairable,
        // so that the client never gives up a gap a repair may still fill.
        let uncached = u32::try_from(self.missing.len().saturating_sub(found)).unwrap_or(u32::MAX);
        self.last_repairable = Some(repairable.saturating_add(uncached));
        self.matched.sort_unstable();
        self.counters.id_collisions +=
            self.matched.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        self.counters.missing_uncached += (self.missing.len().saturating_sub(found)) as u64;
    }

    /// Of the last eACK, if it decoded: the packets missing behind the newest packet it
    /// acknowledged — resent by it, resent earlier and still on their way, or evicted from the
    /// cache (whose resend may be on its way). 0 means every packet the proxy forwarded before
    /// that one had arrived: the gaps the client held when it
    /// sent the eACK are not the proxy's to fill (numbers the sender skipped, RFC 9000 §21.4, or
    /// losses before the proxy), which the client is told with an eACK outcome.
    pub fn last_eack_repairable(&self) -> Option<u32> {
        self.last_repairable
    }

    fn fail(&mut self, out: &mut Vec<Action>) {
        self.counters.eacks_failed += 1;
        self.counters.resets += 1;
        let next = self.views.epoch().wrapping_add(1);
        self.reset(next);
        out.push(Action::Message(Outgoing::Reset));
    }
}

impl FlowEngine for PackratEngine {
    fn on_packet(&mut self, _now: Time, dir: Direction, pkt: &Packet<'_>, _out: &mut Vec<Action>) {
        if dir != Direction::ToClient {
            return;
        }
        if pkt.whole_frame {
            self.cache_packet(pkt.payload, pkt.frame);
        } else {
            let seg = segment_frame(pkt.frame, pkt.udp, pkt.payload);
            self.cache_packet(pkt.payload, &seg);
        }
    }

    fn handle_timeout(&mut self, _now: Time, _out: &mut Vec<Action>) {}

    fn poll_timeout(&self) -> Option<Time> {
        None
    }

    fn memory_bytes(&self) -> usize {
        self.ring.allocated()
            + self.cache.capacity() * std::mem::size_of::<Cached>()
            + 3 * self.cfg.local_symbols * view::Views::symbol_bytes(self.cfg.width)
            + std::mem::size_of::<Self>()
    }
}

/// Fuzz body: feed arbitrary bytes as an eACK to an engine holding some cached packets; must never
/// panic and must leave the cache within its cap.
/// Engines of every identifier width (2, 4, 8 bytes) get the same bytes, each holding packets
/// with identifiers 0..20 at its width: an eACK of another width than the engine's must be a
/// reset, never a panic.
pub fn fuzz_eack(data: &[u8]) {
    for width in [Width::U16, Width::U32, Width::U64] {
        let mut e = PackratEngine::new(PackratEngineConfig {
            local_symbols: 40,
            cache_bytes: 4096,
            id: IdSource::Offset(0),
            width,
            ..PackratEngineConfig::default()
        });
        for i in 0..20u64 {
            e.cache_packet(&i.to_le_bytes(), &[0u8; 300]);
        }
        let mut out = Vec::new();
        e.on_eack(data, &mut out);
        assert!(e.cache_bytes() <= 4096);
        if data
            .get(1)
            .is_some_and(|w| usize::from(*w) != width.bytes())
        {
            assert_eq!(
                e.counters.eacks_failed, 1,
                "an eACK of another width was used"
            );
        }
    }
}

#[cfg(test)]
#[path = "packrat/budget_tests.rs"]
mod budget_tests;

#[cfg(test)]
#[path = "packrat/width_tests.rs"]
mod width_tests;

#[cfg(test)]
#[path = "packrat/tests.rs"]
mod tests;

//! Packrat for a multicast stream (Packrat (CoNEXT '26) §6.1 "Multicast Proxy"): one fixed-size cache for the
//! group's four-tuple, and for each subscribed client an eACK and a *virtual cache*.
//!
//! The paper's virtual cache holds "(1) a global index in the base cache of the client's first
//! unacknowledged packet and (2) pairs of global indexes that indicate which packet to insert and
//! where to insert it because it was retransmitted to the client", so a client costs state
//! proportional to its outstanding retransmissions. Here the global index is the cache's sequence
//! number of a packet; a pair is (sequence number retransmitted, newest sequence number at the
//! time), which is where the retransmission sits in that client's own packet order and what the
//! loss rule needs: as for unicast ([`super::PackratEngine`]), a missing packet is retransmitted
//! once a packet forwarded after it is acknowledged, and again only once a packet forwarded after
//! the previous retransmission is acknowledged.
//!
//! The shared cache evicts only from the front, when full: no single client's acknowledgement
//! may remove a packet another client may still miss. Each client's eACK view is every packet
//! forwarded since its epoch began; a packet is encoded into a client's local sketch at the first
//! eACK after it was forwarded, or when it leaves the shared cache, whichever comes first.
//!
//! Retransmissions go to one client only: the cached frame unchanged except for its Ethernet
//! destination, which becomes the client's own MAC address (learned from the client's frames).
//! IP and UDP headers and the payload stay as the server sent them — destination the group —
//! and the client's kernel accepts a frame addressed to its MAC carrying a packet for a group it
//! has joined, so the application receives the same datagram on the same socket.

use std::collections::VecDeque;

use eack::{Decoder, Difference, Id, Sketch};
use quack::{Identifier, Width};

use super::{PackratCounters, PackratEngineConfig, RetxBudget, ring};
use crate::engine::{Action, Direction, Outgoing};

/// Default cap on clients per group.
pub const DEFAULT_MAX_MEMBERS: usize = 256;

/// Why a client could not join a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The group already has its maximum number of clients.
    #[error("multicast group full ({0} clients)")]
    Full(usize),
}

#[derive(Debug, Clone, Copy)]
struct Cached<I> {
    seq: u64,
    at: usize,
    len: usize,
    id: I,
}

/// One client's state: its eACK views and its virtual cache.
#[derive(Debug, Clone)]
struct Member<M, I: Id> {
    key: M,
    mac: Option<[u8; 6]>,
    /// First sequence number of the client's epoch.
    epoch_start: u64,
    /// Packets with `seq < encoded_upto` are in `view`.
    encoded_upto: u64,
    view: Sketch<I>,
    remote: Sketch<I>,
    /// Virtual cache (1): the first sequence number not known to be acknowledged.
    first_unacked: u64,
    /// Virtual cache (2): (retransmitted seq, newest seq when retransmitted), sorted by seq.
    retransmitted: Vec<(u64, u64)>,
    /// The group's forwarded bytes when the client joined: the client's share of the stream is
    /// the group's total since then.
    forwarded_at_join: u64,
    /// Bytes retransmitted to this client (its budget is `retx_budget_percent` of its share).
    retx_bytes: u64,
    counters: PackratCounters,
}

impl<M, I: Id> Member<M, I> {
    /// The client's budget accounts given the group's forwarded total.
    fn budget(&self, group_forwarded: u64) -> RetxBudget {
        let mut b = RetxBudget::default();
        b.on_forwarded(
            usize::try_from(group_forwarded - self.forwarded_at_join).unwrap_or(usize::MAX),
        );
        b.spent(self.retx_bytes)
    }

    /// The counters, with the bytes forwarded to this client filled in.
    fn counters(&self, group_forwarded: u64) -> PackratCounters {
        PackratCounters {
            forwarded_bytes: group_forwarded - self.forwarded_at_join,
            ..self.counters
        }
    }
}

/// The shared cache of one multicast flow and its clients, at the group's identifier width
/// (`cfg.width`: 2, 4 or 8 bytes, Sidekick (NSDI '24) §3), which every member's eACKs use. The
/// core creates a group with the width of the client that opened it and refuses members of
/// another width.
///
/// ```
/// use sidekick_proxy_core::packrat::PackratEngineConfig;
/// use sidekick_proxy_core::packrat::multicast::MulticastCache;
/// let mut g: MulticastCache<u32> = MulticastCache::new(PackratEngineConfig::default(), 16);
/// g.join(7, 0).unwrap();
/// g.cache_packet(&1u32.to_le_bytes(), &[0u8; 100]);
/// assert_eq!(g.members(), 1);
/// assert_eq!(g.cache_len(), 1);
/// ```
#[derive(Debug, Clone)]
pub enum MulticastCache<M> {
    /// 2-byte identifiers.
    U16(WidthCache<M, u16>),
    /// 4-byte identifiers.
    U32(WidthCache<M, u32>),
    /// 8-byte identifiers.
    U64(WidthCache<M, u64>),
}

macro_rules! each {
    ($self:expr, $g:ident => $e:expr) => {
        match $self {
            MulticastCache::U16($g) => $e,
            MulticastCache::U32($g) => $e,
            MulticastCache::U64($g) => $e,
        }
    };
}

impl<M: Copy + Eq> MulticastCache<M> {
    /// An empty group cache at `cfg.width` (see [`WidthCache::new`]).
    pub fn new(cfg: PackratEngineConfig, max_members: usize) -> Self {
        match cfg.width {
            Width::U16 => Self::U16(WidthCache::new(cfg, max_members)),
            Width::U32 => Self::U32(WidthCache::new(cfg, max_members)),
            Width::U64 => Self::U64(WidthCache::new(cfg, max_members)),
        }
    }

    /// [`WidthCache::memory_cap`] at `cfg.width`.
    pub fn memory_cap(cfg: &PackratEngineConfig, max_members: usize) -> usize {
        match cfg.width {
            Width::U16 => WidthCache::<M, u16>::memory_cap(cfg, max_members),
            Width::U32 => WidthCache::<M, u32>::memory_cap(cfg, max_members),
            Width::U64 => WidthCache::<M, u64>::memory_cap(cfg, max_members),
        }
    }

    /// The group's cache settings (its width included).
    pub fn config(&self) -> &PackratEngineConfig {
        each!(self, g => g.config())
    }

    /// Clients subscribed.
    pub fn members(&self) -> usize {
        each!(self, g => g.members())
    }

    /// Packets in the shared cache.
    pub fn cache_len(&self) -> usize {
        each!(self, g => g.cache_len())
    }

    /// Bytes in the shared cache.
    pub fn cache_bytes(&self) -> usize {
        each!(self, g => g.cache_bytes())
    }

    /// [`WidthCache::virtual_cache_bytes`].
    pub fn virtual_cache_bytes(&self) -> usize {
        each!(self, g => g.virtual_cache_bytes())
    }

    /// Outstanding retransmission pairs of one client.
    pub fn outstanding(&self, key: M) -> Option<usize> {
        each!(self, g => g.outstanding(key))
    }

    /// Counters of one client.
    pub fn member_counters(&self, key: M) -> Option<PackratCounters> {
        each!(self, g => g.member_counters(key))
    }

    /// One client's retransmission budget accounts.
    pub fn member_budget(&self, key: M) -> Option<RetxBudget> {
        each!(self, g => g.member_budget(key))
    }

    /// Sum of every client's counters plus the shared cache's.
    pub fn counters(&self) -> PackratCounters {
        each!(self, g => g.counters())
    }

    /// [`WidthCache::memory_bytes`].
    pub fn memory_bytes(&self) -> usize {
        each!(self, g => g.memory_bytes())
    }

    /// Retransmissions skipped because the client's MAC address was not known yet.
    pub fn no_mac(&self) -> u64 {
        each!(self, g => g.no_mac)
    }

    /// Packets evicted from the front of the full cache.
    pub fn evicted(&self) -> u64 {
        each!(self, g => g.evicted)
    }

    /// [`WidthCache::join`].
    pub fn join(&mut self, key: M, epoch: u32) -> Result<(), JoinError> {
        each!(self, g => g.join(key, epoch))
    }

    /// [`WidthCache::leave`].
    pub fn leave(&mut self, key: M) -> Option<PackratCounters> {
        each!(self, g => g.leave(key))
    }

    /// [`WidthCache::set_mac`].
    pub fn set_mac(&mut self, key: M, mac: [u8; 6]) {
        each!(self, g => g.set_mac(key, mac));
    }

    /// [`WidthCache::reset`].
    pub fn reset(&mut self, key: M, epoch: u32) {
        each!(self, g => g.reset(key, epoch));
    }

    /// [`WidthCache::cache_packet`] (the hot path: one dispatch per packet).
    #[inline]
    pub fn cache_packet(&mut self, payload: &[u8], frame: &[u8]) {
        each!(self, g => g.cache_packet(payload, frame));
    }

    /// [`WidthCache::on_eack`].
    pub fn on_eack(&mut self, key: M, bytes: &[u8], out: &mut Vec<Action>) {
        each!(self, g => g.on_eack(key, bytes, out));
    }
}

/// The shared cache of one multicast flow and its clients at one identifier width: the body of
/// [`MulticastCache`].
#[derive(Debug, Clone)]
pub struct WidthCache<M, I: Id> {
    cfg: PackratEngineConfig,
    cache: VecDeque<Cached<I>>,
    ring: ring::FrameRing,
    max_entries: usize,
    next_seq: u64,
    members: Vec<Member<M, I>>,
    max_members: usize,
    decoder: Decoder<I>,
    diff: Difference<I>,
    missing: Vec<I>,
    /// Bytes of the group's stream forwarded (every packet, cached or not).
    forwarded_bytes: u64,
    /// Packets cached.
    pub cached: u64,
    /// Packets not cached (identifier unreadable, or larger than the cache).
    pub not_cached: u64,
    /// Packets evicted from the front of the full cache.
    pub evicted: u64,
    /// Retransmissions skipped because the client's MAC address is not known yet.
    pub no_mac: u64,
}

impl<M: Copy + Eq, I: Id + Identifier> WidthCache<M, I> {
    /// An empty group cache (`cfg.cache_bytes` bytes, `cfg.local_symbols` per client eACK) for
    /// at most `max_members` clients.
    pub fn new(cfg: PackratEngineConfig, max_members: usize) -> Self {
        Self {
            cfg,
            cache: VecDeque::new(),
            ring: ring::FrameRing::new(cfg.cache_bytes),
            max_entries: cfg.cache_bytes / super::MIN_FRAME + 1,
            next_seq: 0,
            members: Vec::new(),
            max_members,
            decoder: Decoder::new(),
            diff: Difference::default(),
            missing: Vec::new(),
            forwarded_bytes: 0,
            cached: 0,
            not_cached: 0,
            evicted: 0,
            no_mac: 0,
        }
    }

    /// The most memory a group with `cfg` and `max_members` clients can hold apart from its
    /// members' virtual caches (what the core's memory budget reserves for a group).
    pub fn memory_cap(cfg: &PackratEngineConfig, max_members: usize) -> usize {
        cfg.cache_bytes
            + (cfg.cache_bytes / super::MIN_FRAME + 1) * std::mem::size_of::<Cached<I>>()
            + max_members * (2 * cfg.local_symbols * Self::SYMBOL_BYTES + 128)
    }

    /// The group's cache settings.
    pub fn config(&self) -> &PackratEngineConfig {
        &self.cfg
    }

    /// Clients subscribed.
    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// Packets in the shared cache.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Bytes in the shared cache.
    pub fn cache_bytes(&self) -> usize {
        self.ring.used()
    }

    /// Bytes of all clients' virtual caches (first-unacknowledged index and retransmission
    /// pairs): proportional to outstanding retransmissions (Packrat (CoNEXT '26) §7.3.3 reports 12 bytes
    /// per client).
    pub fn virtual_cache_bytes(&self) -> usize {
        self.members
            .iter()
            .map(|m| 8 + 16 * m.retransmitted.len())
            .sum()
    }

    /// Outstanding retransmission pairs of one client.
    pub fn outstanding(&self, key: M) -> Option<usize> {
        self.member(key).map(|m| m.retransmitted.len())
    }

    /// Counters of one client (retransmissions, eACKs, resets, ...).
    pub fn member_counters(&self, key: M) -> Option<PackratCounters> {
        self.member(key).map(|m| m.counters(self.forwarded_bytes))
    }

    /// One client's retransmission budget accounts.
    pub fn member_budget(&self, key: M) -> Option<RetxBudget> {
        self.member(key).map(|m| m.budget(self.forwarded_bytes))
    }

    /// Sum of every client's counters plus the shared cache's.
    pub fn counters(&self) -> PackratCounters {
        let mut c = PackratCounters {
            cached: self.cached,
            not_cached: self.not_cached,
            evicted_optimistic: self.evicted,
            ..PackratCounters::default()
        };
        for m in &self.members {
            c.add(&m.counters(self.forwarded_bytes));
        }
        c
    }

    /// Approximate memory: the ring, the index and every client's sketches and virtual cache.
    pub fn memory_bytes(&self) -> usize {
        self.ring.allocated()
            + self.cache.capacity() * std::mem::size_of::<Cached<I>>()
            + self.members.len() * (2 * self.cfg.local_symbols * Self::SYMBOL_BYTES + 128)
            + self.virtual_cache_bytes()
    }

    /// Heap bytes of one coded symbol of a client's sketch at this width.
    const SYMBOL_BYTES: usize = std::mem::size_of::<eack::CodedSymbol<I>>();

    fn member(&self, key: M) -> Option<&Member<M, I>> {
        self.members.iter().find(|m| m.key == key)
    }

    fn member_mut(&mut self, key: M) -> Option<&mut Member<M, I>> {
        self.members.iter_mut().find(|m| m.key == key)
    }

    /// Subscribes a client in `epoch`: its view starts with the next packet. Joining again
    /// restarts the client's state.
    pub fn join(&mut self, key: M, epoch: u32) -> Result<(), JoinError> {
        if let Some(m) = self.member_mut(key) {
            let keep = m.mac;
            self.leave(key);
            self.join(key, epoch)?;
            if let Some(m) = self.member_mut(key) {
                m.mac = keep;
            }
            return Ok(());
        }
        if self.members.len() >= self.max_members {
            return Err(JoinError::Full(self.max_members));
        }
        let mut view = Sketch::with_key(self.cfg.local_symbols, self.cfg.key);
        view.set_epoch(epoch);
        self.members.push(Member {
            key,
            mac: None,
            epoch_start: self.next_seq,
            encoded_upto: self.next_seq,
            view,
            remote: Sketch::with_key(0, self.cfg.key),
            first_unacked: self.next_seq,
            retransmitted: Vec::new(),
            forwarded_at_join: self.forwarded_bytes,
            retx_bytes: 0,
            counters: PackratCounters::default(),
        });
        Ok(())
    }

    /// Unsubscribes a client; returns its counters.
    pub fn leave(&mut self, key: M) -> Option<PackratCounters> {
        let i = self.members.iter().position(|m| m.key == key)?;
        Some(self.members.swap_remove(i).counters(self.forwarded_bytes))
    }

    /// Records the client's Ethernet address (the source of its own frames).
    pub fn set_mac(&mut self, key: M, mac: [u8; 6]) {
        if let Some(m) = self.member_mut(key) {
            m.mac = Some(mac);
        }
    }

    /// Starts a new epoch for one client (its Reset); the other clients are untouched.
    pub fn reset(&mut self, key: M, epoch: u32) {
        let next = self.next_seq;
        if let Some(m) = self.member_mut(key) {
            m.view.clear();
            m.view.set_epoch(epoch);
            m.epoch_start = next;
            m.encoded_upto = next;
            m.first_unacked = next;
            m.retransmitted.clear();
        }
    }

    /// Caches one packet of the group's stream (the hot path).
    pub fn cache_packet(&mut self, payload: &[u8], frame: &[u8]) {
        self.forwarded_bytes = self.forwarded_bytes.saturating_add(frame.len() as u64);
        let Ok(id) = self.cfg.id.extract::<I>(payload) else {
            self.not_cached += 1;
            return;
        };
        if frame.len() > self.cfg.cache_bytes {
            // Not cacheable: every client's view still counts it as forwarded (it never enters
            // the cache, so it cannot be encoded twice).
            for m in &mut self.members {
                m.view.insert(id);
            }
            self.next_seq += 1;
            self.not_cached += 1;
            return;
        }
        while self.ring.used() + frame.len() > self.cfg.cache_bytes
            || self.cache.len() >= self.max_entries
        {
            let Some(old) = self.cache.pop_front() else {
                break;
            };
            self.ring.pop_front(old.len);
            // Encoding is in cache order, so a client that has not encoded `old` has encoded
            // everything before it (sequence numbers of uncacheable packets leave gaps).
            for m in &mut self.members {
                if m.encoded_upto <= old.seq {
                    m.view.insert(old.id);
                    m.encoded_upto = old.seq + 1;
                }
            }
            self.evicted += 1;
        }
        let at = self.ring.push(frame);
        self.cache.push_back(Cached {
            seq: self.next_seq,
            at,
            len: frame.len(),
            id,
        });
        self.next_seq += 1;
        self.cached += 1;
    }

    /// Processes one client's eACK: retransmissions to that client only are pushed as
    /// [`Action::Inject`]; an eACK that does not parse or decode resets that client and pushes
    /// [`Outgoing::Reset`] (the session layer then numbers the epoch, see [`Self::reset`]).
    pub fn on_eack(&mut self, key: M, bytes: &[u8], out: &mut Vec<Action>) {
        let newest = self.next_seq.saturating_sub(1);
        let front = self.cache.front().map_or(self.next_seq, |c| c.seq);
        let Some(mi) = self.members.iter().position(|m| m.key == key) else {
            return;
        };
        let Self {
            cache,
            ring,
            members,
            decoder,
            diff,
            missing,
            no_mac,
            next_seq,
            forwarded_bytes,
            cfg,
            ..
        } = self;
        let m = &mut members[mi];
        let mut budget = m.budget(*forwarded_bytes);
        if let Err(e) = m.remote.decode_prefix_into(bytes) {
            tracing::debug!(error = %e, "malformed multicast eACK");
            Self::fail(m, *next_seq, out);
            return;
        }
        if m.remote.epoch() != m.view.epoch() {
            m.counters.eacks_stale += 1;
            return;
        }
        // Encode the packets forwarded since the last eACK (still cached, in order).
        let skip = cache.partition_point(|c| c.seq < m.encoded_upto);
        for c in cache.iter().skip(skip) {
            m.view.insert(c.id);
        }
        m.encoded_upto = *next_seq;
        if let Err(e) = decoder.decode_difference(&m.view, &m.remote, diff) {
            tracing::debug!(error = %e, "multicast eACK did not decode");
            Self::fail(m, *next_seq, out);
            return;
        }
        m.counters.eacks_decoded += 1;
        m.counters.extra += diff.extra.len() as u64;
        missing.clear();
        missing.extend_from_slice(&diff.missing);
        missing.sort_unstable();
        // The client's part of the cache: from its first unacknowledged packet on.
        let start = m.first_unacked.max(m.epoch_start).max(front);
        let skip = cache.partition_point(|c| c.seq < start);
        let is_missing = |id: I| missing.binary_search(&id).is_ok();
        let max_acked = cache
            .iter()
            .skip(skip)
            .rev()
            .find(|c| !is_missing(c.id))
            .map(|c| c.seq);
        let mut first_missing = None;
        let mut found = 0usize;
        let mut kept: Vec<(u64, u64)> = Vec::with_capacity(m.retransmitted.len());
        for c in cache.iter().skip(skip) {
            if !is_missing(c.id) {
                continue;
            }
            found += 1;
            first_missing.get_or_insert(c.seq);
            let mark = m
                .retransmitted
                .binary_search_by_key(&c.seq, |p| p.0)
                .ok()
                .map(|i| m.retransmitted[i].1);
            let eligible = max_acked.is_some_and(|a| a > c.seq && mark.is_none_or(|r| a > r));
            if !eligible {
                m.counters.missing_in_flight += 1;
                if let Some(r) = mark {
                    kept.push((c.seq, r));
                }
                continue;
            }
            let Some(mac) = m.mac else {
                *no_mac += 1;
                continue;
            };
            if !budget.try_spend(c.len, cfg.retx_budget_percent) {
                m.counters.retx_refused_budget += 1;
                if let Some(r) = mark {
                    kept.push((c.seq, r));
                }
                continue;
            }
            let mut frame = Vec::with_capacity(c.len);
            ring.copy_out(c.at, c.len, &mut frame);
            if let Some(dst) = frame.get_mut(..6) {
                dst.copy_from_slice(&mac);
            }
            out.push(Action::Inject {
                dir: Direction::ToClient,
                frame,
            });
            kept.push((c.seq, newest));
            m.counters.retransmissions += 1;
            m.counters.retransmitted_bytes += c.len as u64;
        }
        // Pairs of packets no longer missing or no longer cached are dropped: the virtual cache
        // holds only outstanding retransmissions.
        m.retransmitted = kept;
        m.retx_bytes = budget.retransmitted();
        m.first_unacked = first_missing.unwrap_or_else(|| max_acked.map_or(start, |a| a + 1));
        m.counters.missing_uncached += missing.len().saturating_sub(found) as u64;
    }

    fn fail(m: &mut Member<M, I>, next_seq: u64, out: &mut Vec<Action>) {
        m.counters.eacks_failed += 1;
        m.counters.resets += 1;
        let epoch = m.view.epoch().wrapping_add(1);
        m.view.clear();
        m.view.set_epoch(epoch);
        m.epoch_start = next_seq;
        m.encoded_upto = next_seq;
        m.first_unacked = next_seq;
        m.retransmitted.clear();
        out.push(Action::Message(Outgoing::Reset));
    }
}

#[cfg(test)]
#[path = "multicast_tests.rs"]
mod tests;

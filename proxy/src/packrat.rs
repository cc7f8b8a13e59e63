//! Packrat engine (seed 002 §3, §5, §6.1): cache server→client packets, decode the client's
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

use std::collections::VecDeque;
use std::time::Instant;

use eack::{Decoder, Difference, HashKey, Sketch};
use quack::IdSource;

use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};
use crate::packet::segment_frame;

/// Packrat parameters of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackratConfig {
    /// Local coded symbols of the rIBLT (seed 002 §5.2.1: 160 for a download, 40 for media).
    pub local_symbols: usize,
    /// Cache capacity in bytes (seed 002 Table 4 WiFi: 48 kB).
    pub cache_bytes: usize,
    /// How to compute identifiers.
    pub id: IdSource,
    /// rIBLT hash key shared with the client.
    pub key: HashKey,
}

impl Default for PackratConfig {
    /// The Packrat WiFi setting (DESIGN scenario table): 160 symbols, 48 kB cache.
    fn default() -> Self {
        Self {
            local_symbols: 160,
            cache_bytes: 48 * 1024,
            id: IdSource::QUIC_DEFAULT,
            key: HashKey::DEFAULT,
        }
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
}

#[derive(Debug, Clone)]
struct Cached {
    seq: u64,
    id: u32,
    /// Retransmitted when the newest forwarded seq was this; again only after a later ack.
    retx_mark: Option<u64>,
    frame: Vec<u8>,
}

/// The per-flow Packrat state.
///
/// ```
/// use sidekick_proxy::packrat::{PackratConfig, PackratEngine};
/// let e = PackratEngine::new(PackratConfig::default());
/// assert_eq!(e.cache_bytes(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct PackratEngine {
    cfg: PackratConfig,
    cache: VecDeque<Cached>,
    bytes: usize,
    next_seq: u64,
    /// Cached packets with `seq < encoded_upto` are already in `evicted`.
    encoded_upto: u64,
    evicted: Sketch,
    remote: Sketch,
    decoder: Decoder,
    diff: Difference,
    missing: Vec<u32>,
    spare: Vec<Vec<u8>>,
    /// Counters.
    pub counters: PackratCounters,
}

/// Recycled frame buffers kept per engine.
const SPARE_BUFFERS: usize = 64;

impl PackratEngine {
    /// A fresh engine in epoch 0.
    pub fn new(cfg: PackratConfig) -> Self {
        Self {
            cfg,
            cache: VecDeque::new(),
            bytes: 0,
            next_seq: 0,
            encoded_upto: 0,
            evicted: Sketch::with_key(cfg.local_symbols, cfg.key),
            remote: Sketch::with_key(0, cfg.key),
            decoder: Decoder::new(),
            diff: Difference::default(),
            missing: Vec::new(),
            spare: Vec::new(),
            counters: PackratCounters::default(),
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.evicted.epoch()
    }

    /// Bytes cached.
    pub fn cache_bytes(&self) -> usize {
        self.bytes
    }

    /// Packets cached.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// Start `epoch`: clear the local eACK and the cache (client Reset, or after a proxy Reset
    /// the session layer numbered).
    pub fn reset(&mut self, epoch: u32) {
        self.evicted.clear();
        self.evicted.set_epoch(epoch);
        self.cache.clear();
        self.bytes = 0;
        self.encoded_upto = self.next_seq;
    }

    /// Cache one server→client packet (the hot path). `frame` is what a retransmission injects.
    /// Frame buffers are recycled (bounded pool), so steady state does not allocate.
    pub fn cache_packet(&mut self, payload: &[u8], frame_bytes: &[u8]) {
        let Ok(id) = self.cfg.id.extract::<u32>(payload) else {
            self.counters.not_cached += 1;
            return;
        };
        if frame_bytes.len() > self.cfg.cache_bytes {
            // Cannot be cached; encode it as forwarded so the views stay in sync.
            self.evicted.insert(id);
            self.counters.not_cached += 1;
            return;
        }
        self.bytes += frame_bytes.len();
        while self.bytes > self.cfg.cache_bytes {
            let Some(old) = self.cache.pop_front() else {
                break;
            };
            self.bytes -= old.frame.len();
            if old.seq >= self.encoded_upto {
                self.evicted.insert(old.id);
            }
            self.counters.evicted_optimistic += 1;
            self.recycle(old.frame);
        }
        let mut frame = self.spare.pop().unwrap_or_default();
        frame.clear();
        frame.extend_from_slice(frame_bytes);
        self.cache.push_back(Cached {
            seq: self.next_seq,
            id,
            retx_mark: None,
            frame,
        });
        self.next_seq += 1;
        self.counters.cached += 1;
    }

    /// Process a client eACK (wire bytes of the eack crate). Retransmissions are pushed as
    /// [`Action::Inject`]; an undecodable eACK resets the engine and pushes
    /// [`Outgoing::Reset`] — the session layer then assigns the new epoch with
    /// [`PackratEngine::reset`].
    pub fn on_eack(&mut self, bytes: &[u8], out: &mut Vec<Action>) {
        if let Err(e) = self.remote.decode_prefix_into(bytes) {
            tracing::debug!(error = %e, "malformed eACK");
            self.fail(out);
            return;
        }
        if self.remote.epoch() != self.evicted.epoch() {
            self.counters.eacks_stale += 1;
            return;
        }
        // The proxy's view is every packet forwarded in this epoch: evicted ones plus the cached
        // ones. Cached packets are encoded once, at the first eACK after they were forwarded (the
        // delta of §7.3.4), so `evicted` then holds the whole view and eviction on
        // acknowledgement costs nothing.
        for c in self.cache.iter().rev() {
            if c.seq < self.encoded_upto {
                break;
            }
            self.evicted.insert(c.id);
        }
        self.encoded_upto = self.next_seq;
        if let Err(e) = self
            .decoder
            .decode_difference(&self.evicted, &self.remote, &mut self.diff)
        {
            tracing::debug!(error = %e, "eACK did not decode");
            self.fail(out);
            return;
        }
        self.counters.eacks_decoded += 1;
        self.counters.extra += self.diff.extra.len() as u64;
        self.missing.clear();
        self.missing.extend_from_slice(&self.diff.missing);
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
        let before = self.cache.len();
        let mut kept = VecDeque::with_capacity(before);
        for mut c in self.cache.drain(..) {
            if self.missing.binary_search(&c.id).is_ok() {
                found += 1;
                let eligible =
                    max_acked.is_some_and(|m| m > c.seq && c.retx_mark.is_none_or(|r| m > r));
                if eligible {
                    out.push(Action::Inject {
                        dir: Direction::ToClient,
                        frame: c.frame.clone(),
                    });
                    c.retx_mark = Some(newest);
                    self.counters.retransmissions += 1;
                } else {
                    self.counters.missing_in_flight += 1;
                }
                kept.push_back(c);
            } else {
                self.bytes -= c.frame.len();
                self.counters.evicted_acked += 1;
            }
        }
        self.cache = kept;
        self.counters.missing_uncached += (self.missing.len().saturating_sub(found)) as u64;
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(buf);
        }
    }

    fn fail(&mut self, out: &mut Vec<Action>) {
        self.counters.eacks_failed += 1;
        self.counters.resets += 1;
        let next = self.evicted.epoch().wrapping_add(1);
        self.reset(next);
        out.push(Action::Message(Outgoing::Reset));
    }
}

impl FlowEngine for PackratEngine {
    fn on_packet(
        &mut self,
        _now: Instant,
        dir: Direction,
        pkt: &Packet<'_>,
        _out: &mut Vec<Action>,
    ) {
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

    fn on_timeout(&mut self, _now: Instant, _out: &mut Vec<Action>) {}

    fn next_timeout(&self) -> Option<Instant> {
        None
    }

    fn memory_bytes(&self) -> usize {
        self.bytes
            + self.cache.len() * std::mem::size_of::<Cached>()
            + 3 * self.cfg.local_symbols * 16
            + std::mem::size_of::<Self>()
    }
}

/// Fuzz body: feed arbitrary bytes as an eACK to an engine holding some cached packets; must never
/// panic and must leave the cache within its cap.
pub fn fuzz_eack(data: &[u8]) {
    let mut e = PackratEngine::new(PackratConfig {
        local_symbols: 40,
        cache_bytes: 4096,
        ..PackratConfig::default()
    });
    for i in 0..20u32 {
        let p = i.to_le_bytes();
        e.cache_packet(&p, &[0u8; 300]);
    }
    let mut out = Vec::new();
    e.on_eack(data, &mut out);
    assert!(e.cache_bytes() <= 4096);
}

#[cfg(test)]
mod tests {
    use super::*;
    use eack::ReceiverEack;
    use proptest::prelude::*;

    fn frame_for(id: u32) -> Vec<u8> {
        let mut f = vec![0xabu8; 100];
        f.extend_from_slice(&id.to_le_bytes());
        f
    }

    fn eack_of(client: &ReceiverEack, n: usize) -> Vec<u8> {
        let mut w = Vec::new();
        client.encode(n, &mut w).unwrap();
        w
    }

    fn injected(out: &[Action]) -> Vec<u32> {
        let mut v: Vec<u32> = out
            .iter()
            .filter_map(|a| match a {
                Action::Inject { frame, .. } => {
                    Some(u32::from_le_bytes(frame[100..104].try_into().unwrap()))
                }
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn retransmits_exactly_the_missing_packets() {
        let mut e = PackratEngine::new(PackratConfig::default());
        let mut client = ReceiverEack::new(160);
        let lost = [3u32, 7, 11];
        for id in 0..16u32 {
            e.cache_packet(&id.to_le_bytes(), &frame_for(id));
            if !lost.contains(&id) {
                client.on_receive(id);
            }
        }
        let mut out = Vec::new();
        e.on_eack(&eack_of(&client, 40), &mut out);
        assert_eq!(injected(&out), lost.to_vec());
        assert_eq!(e.counters.retransmissions, 3);
        assert_eq!(e.counters.evicted_acked, 13);
        assert_eq!(e.cache_len(), 3);
        // Same eACK again: no new ack after the retransmission, so no duplicate retransmission.
        out.clear();
        e.on_eack(&eack_of(&client, 40), &mut out);
        assert!(injected(&out).is_empty());
        // The client receives two retransmissions; the third is lost again. After a later packet
        // is acknowledged, only the still-missing one is retransmitted.
        client.on_receive(3);
        client.on_receive(7);
        e.cache_packet(&100u32.to_le_bytes(), &frame_for(100));
        client.on_receive(100);
        out.clear();
        e.on_eack(&eack_of(&client, 40), &mut out);
        assert_eq!(injected(&out), vec![11]);
        assert_eq!(e.cache_len(), 1);
    }

    #[test]
    fn tail_losses_wait_for_a_gap() {
        let mut e = PackratEngine::new(PackratConfig::default());
        let mut client = ReceiverEack::new(160);
        for id in 0..10u32 {
            e.cache_packet(&id.to_le_bytes(), &frame_for(id));
            if id < 8 {
                client.on_receive(id);
            }
        }
        let mut out = Vec::new();
        e.on_eack(&eack_of(&client, 40), &mut out);
        // 8 and 9 may still be in flight: nothing acknowledged after them.
        assert!(injected(&out).is_empty());
        assert_eq!(e.counters.missing_in_flight, 2);
    }

    #[test]
    fn optimistic_eviction_keeps_views_in_sync() {
        let cfg = PackratConfig {
            cache_bytes: 104 * 4,
            ..PackratConfig::default()
        };
        let mut e = PackratEngine::new(cfg);
        let mut client = ReceiverEack::new(160);
        for id in 0..10u32 {
            e.cache_packet(&id.to_le_bytes(), &frame_for(id));
            if id != 1 && id != 8 {
                client.on_receive(id);
            }
        }
        assert_eq!(e.cache_len(), 4);
        assert!(e.cache_bytes() <= cfg.cache_bytes);
        assert_eq!(e.counters.evicted_optimistic, 6);
        let mut out = Vec::new();
        e.on_eack(&eack_of(&client, 40), &mut out);
        // 1 was evicted before it could be repaired; 8 is cached and retransmitted.
        assert_eq!(injected(&out), vec![8]);
        assert_eq!(e.counters.missing_uncached, 1);
    }

    #[test]
    fn undecodable_eack_resets_with_new_epoch() {
        let mut e = PackratEngine::new(PackratConfig::default());
        let mut client = ReceiverEack::new(160);
        for id in 0..200u32 {
            e.cache_packet(&id.to_le_bytes(), &frame_for(id));
            if id % 2 == 0 {
                client.on_receive(id);
            }
        }
        let mut out = Vec::new();
        // 100 missing in 4 symbols cannot decode.
        e.on_eack(&eack_of(&client, 4), &mut out);
        assert_eq!(out, vec![Action::Message(Outgoing::Reset)]);
        assert_eq!(e.epoch(), 1);
        assert_eq!(e.cache_len(), 0);
        assert_eq!(e.counters.eacks_failed, 1);
        // A stale eACK of epoch 0 is ignored, not another reset.
        out.clear();
        e.on_eack(&eack_of(&client, 40), &mut out);
        assert!(out.is_empty());
        assert_eq!(e.counters.eacks_stale, 1);
        // Garbage resets too.
        e.on_eack(b"\x01\x02garbage", &mut out);
        assert_eq!(e.counters.eacks_failed, 2);
    }

    proptest! {
        #[test]
        fn fuzz_body_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz_eack(&data);
        }

        #[test]
        fn random_losses_recovered(seed_losses in proptest::collection::btree_set(0u32..64, 0..12)) {
            let mut e = PackratEngine::new(PackratConfig::default());
            let mut client = ReceiverEack::new(160);
            for id in 0..64u32 {
                e.cache_packet(&(id * 7919).to_le_bytes(), &frame_for(id * 7919));
                if !seed_losses.contains(&id) {
                    client.on_receive(id * 7919);
                }
            }
            let mut out = Vec::new();
            e.on_eack(&eack_of(&client, 160), &mut out);
            let last_received = (0..64u32).rev().find(|i| !seed_losses.contains(i));
            let expect: Vec<u32> = {
                let mut v: Vec<u32> = seed_losses.iter().copied()
                    .filter(|&i| last_received.is_some_and(|l| i < l)).map(|i| i * 7919).collect();
                v.sort_unstable();
                v
            };
            prop_assert_eq!(injected(&out), expect);
        }
    }
}

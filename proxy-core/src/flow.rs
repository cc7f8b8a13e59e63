//! The sharded, capped flow table keyed by the UDP 4-tuple (docs/architecture.md).
//!
//! Keys are normalised to (client, server) so both directions of a connection land in the same
//! entry and the same shard (a symmetric hash, as PACKET_FANOUT workers need). Hashing is SipHash-1-3
//! keyed per table, so an attacker cannot aim a flood at one bucket. Caps: a total flow cap split
//! evenly over shards, and a separate cap on assisted flows (sessions). When a shard is full, idle
//! flows are expired first; an assisted flow may then displace an unassisted one (a bounded scan);
//! otherwise the new flow is refused and counted — the packet is still forwarded (fail-open).

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::Duration;

use crate::Time;

use hashbrown::HashTable;
use siphasher::sip::SipHasher13;

/// A base connection as seen by the proxy: the client (near side) and the server (far side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// The assisted client's base address.
    pub client: SocketAddr,
    /// The remote server's address.
    pub server: SocketAddr,
}

/// A keyed SipHash-1-3 hasher builder (per table; no process-wide state).
#[derive(Debug, Clone, Copy)]
pub struct KeyedHasher {
    k0: u64,
    k1: u64,
}

impl KeyedHasher {
    /// A hasher builder with the given 128-bit key.
    pub fn new(k0: u64, k1: u64) -> Self {
        Self { k0, k1 }
    }
}

impl BuildHasher for KeyedHasher {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// One stored flow: its key, the key's keyed hash (computed once per packet: the shard index
/// and the bucket both come from it, and a grown table rehashes from it) and the entry.
#[derive(Debug)]
struct Slot<V> {
    h: u64,
    key: FlowKey,
    entry: FlowEntry<V>,
}

impl<V> Slot<V> {
    /// A new flow, seen first at `now`.
    fn new(h: u64, key: FlowKey, now: Time, value: V) -> Self {
        Self {
            h,
            key,
            entry: FlowEntry {
                last_seen: now,
                packets: 0,
                value,
            },
        }
    }
}

/// The probe of a key with hash `h`: the stored hash first (one compare rejects almost every
/// other slot), the key only when it matches.
fn slot_is<V>(h: u64, key: &FlowKey) -> impl Fn(&Slot<V>) -> bool + '_ {
    move |s| s.h == h && s.key == *key
}

fn slot_hash<V>(s: &Slot<V>) -> u64 {
    s.h
}

/// Feed a flow key to `h` as whole 64-bit words (SipHash then compresses one word per round
/// without buffering bytes). The encoding is injective: two IPv4 addresses take two words; any
/// other pair takes five (IPv4 addresses mapped into IPv6), and the last word records which side
/// was IPv4, so no two keys give the same input.
#[inline]
fn hash_key<H: Hasher>(key: &FlowKey, h: &mut H) {
    let ports = u64::from(key.client.port()) << 48 | u64::from(key.server.port()) << 32;
    match (key.client, key.server) {
        (SocketAddr::V4(c), SocketAddr::V4(s)) => {
            h.write_u64(u64::from(c.ip().to_bits()) << 32 | u64::from(s.ip().to_bits()));
            h.write_u64(ports | 4);
        }
        (c, s) => {
            let wide = |a: &SocketAddr| match a {
                SocketAddr::V4(v) => v.ip().to_ipv6_mapped().to_bits(),
                SocketAddr::V6(v) => v.ip().to_bits(),
            };
            for a in [wide(&c), wide(&s)] {
                h.write_u64((a >> 64) as u64);
                h.write_u64(a as u64);
            }
            let tag = 6 | u64::from(c.is_ipv4()) << 8 | u64::from(s.is_ipv4()) << 9;
            h.write_u64(ports | tag);
        }
    }
}

/// State a flow-table value must expose.
pub trait FlowState {
    /// Whether the flow has an engine (counts against the session cap, protected from displacement).
    fn assisted(&self) -> bool;
}

/// One flow-table entry.
#[derive(Debug)]
pub struct FlowEntry<V> {
    /// Last time a packet of the flow was seen.
    pub last_seen: Time,
    /// Packets seen.
    pub packets: u64,
    /// The per-flow state (engine).
    pub value: V,
}

/// Caps and timeouts of a [`FlowTable`].
#[derive(Debug, Clone, Copy)]
pub struct FlowTableConfig {
    /// Number of shards (≥1).
    pub shards: usize,
    /// Maximum number of flows in total.
    pub max_flows: usize,
    /// Maximum number of assisted flows (sessions) in total.
    pub max_assisted: usize,
    /// Idle timeout after which a flow is removed.
    pub idle_timeout: Duration,
}

impl Default for FlowTableConfig {
    fn default() -> Self {
        Self {
            shards: 16,
            max_flows: 65536,
            max_assisted: 4096,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Counters of a [`FlowTable`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Flows created.
    pub created: u64,
    /// Flows removed after the idle timeout.
    pub expired: u64,
    /// New flows refused because the table (or shard) was full.
    pub refused_full: u64,
    /// Assisted flows refused because the assisted cap was reached.
    pub refused_assisted_cap: u64,
    /// Unassisted flows evicted to make room for an assisted one.
    pub displaced: u64,
}

impl FlowCounters {
    /// Add another table's counters (multi-worker totals).
    pub fn add(&mut self, o: &FlowCounters) {
        self.created += o.created;
        self.expired += o.expired;
        self.refused_full += o.refused_full;
        self.refused_assisted_cap += o.refused_assisted_cap;
        self.displaced += o.displaced;
    }
}

/// Why an insertion failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// The (shard of the) flow table is full.
    #[error("flow table full")]
    Full,
    /// The cap on assisted flows is reached.
    #[error("session cap reached")]
    AssistedCap,
}

struct Shard<V> {
    // hashbrown's raw table: probed with the precomputed hash, no key copied into an entry.
    map: HashTable<Slot<V>>,
    last_sweep: Option<Time>,
}

/// The sharded flow table.
///
/// ```
/// use std::time::Duration;
/// use sidekick_proxy_core::Time;
/// use sidekick_proxy_core::flow::{FlowKey, FlowState, FlowTable, FlowTableConfig};
/// struct S;
/// impl FlowState for S { fn assisted(&self) -> bool { false } }
/// let mut t = FlowTable::new(FlowTableConfig::default(), 1, 2);
/// let k = FlowKey { client: "10.0.0.2:5000".parse().unwrap(), server: "1.1.1.1:443".parse().unwrap() };
/// let now = Time::ZERO;
/// t.get_or_insert_with(k, now, || S).unwrap();
/// assert_eq!(t.len(), 1);
/// t.expire(now + Duration::from_secs(121), |_, _| {});
/// assert_eq!(t.len(), 0);
/// ```
pub struct FlowTable<V> {
    shards: Vec<Shard<V>>,
    cfg: FlowTableConfig,
    per_shard: usize,
    hasher: KeyedHasher,
    len: usize,
    assisted: usize,
    /// Counters.
    pub counters: FlowCounters,
}

impl<V: FlowState> FlowTable<V> {
    /// A table with the given caps and SipHash key.
    pub fn new(cfg: FlowTableConfig, k0: u64, k1: u64) -> Self {
        let n = cfg.shards.max(1);
        let per_shard = cfg.max_flows.div_ceil(n).max(1);
        let hasher = KeyedHasher::new(k0, k1);
        let shards = (0..n)
            .map(|_| Shard {
                map: HashTable::new(),
                last_sweep: None,
            })
            .collect();
        Self {
            shards,
            cfg,
            per_shard,
            hasher,
            len: 0,
            assisted: 0,
            counters: FlowCounters::default(),
        }
    }

    fn hashed(&self, key: &FlowKey) -> (usize, u64) {
        let mut h = self.hasher.build_hasher();
        hash_key(key, &mut h);
        let h = h.finish();
        // Shard from bits the map's bucket index and tag do not depend on alone.
        let shard = ((h >> 32) % self.shards.len() as u64) as usize;
        (shard, h)
    }

    /// The shard index of a key (symmetric by construction: keys are normalised).
    pub fn shard_of(&self, key: &FlowKey) -> usize {
        self.hashed(key).0
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of assisted flows.
    pub fn assisted_len(&self) -> usize {
        self.assisted
    }

    /// Look a flow up and refresh its idle timer.
    pub fn touch(&mut self, key: &FlowKey, now: Time) -> Option<&mut FlowEntry<V>> {
        let (s, h) = self.hashed(key);
        let e = &mut self.shards[s].map.find_mut(h, slot_is(h, key))?.entry;
        e.last_seen = now;
        e.packets += 1;
        Some(e)
    }

    /// Look a flow up without touching it.
    pub fn get_mut(&mut self, key: &FlowKey) -> Option<&mut FlowEntry<V>> {
        let (s, h) = self.hashed(key);
        Some(&mut self.shards[s].map.find_mut(h, slot_is(h, key))?.entry)
    }

    /// Look a flow up.
    pub fn get(&self, key: &FlowKey) -> Option<&FlowEntry<V>> {
        let (s, h) = self.hashed(key);
        Some(&self.shards[s].map.find(h, slot_is(h, key))?.entry)
    }

    /// Get the flow or create it with `make`, enforcing the caps.
    pub fn get_or_insert_with(
        &mut self,
        key: FlowKey,
        now: Time,
        make: impl FnOnce() -> V,
    ) -> Result<&mut FlowEntry<V>, InsertError> {
        let (s, h) = self.hashed(&key);
        let room = self.shards[s].map.len() < self.per_shard && self.len < self.cfg.max_flows;
        if room {
            // One probe: the entry API (no sweep or displacement needed when there is room).
            let value_assisted;
            let e = match self.shards[s].map.entry(h, slot_is(h, &key), slot_hash) {
                hashbrown::hash_table::Entry::Occupied(o) => &mut o.into_mut().entry,
                hashbrown::hash_table::Entry::Vacant(v) => {
                    let value = make();
                    value_assisted = value.assisted();
                    if value_assisted && self.assisted >= self.cfg.max_assisted {
                        self.counters.refused_assisted_cap += 1;
                        return Err(InsertError::AssistedCap);
                    }
                    self.len += 1;
                    self.assisted += usize::from(value_assisted);
                    self.counters.created += 1;
                    let slot = Slot::new(h, key, now, value);
                    &mut v.insert(slot).into_mut().entry
                }
            };
            e.last_seen = now;
            return Ok(e);
        }
        if self.shards[s].map.find(h, slot_is(h, &key)).is_none() {
            let value = make();
            self.insert_new(s, h, key, now, value)?;
        }
        let e = &mut self.shards[s]
            .map
            .find_mut(h, slot_is(h, &key))
            .ok_or(InsertError::Full)?
            .entry;
        e.last_seen = now;
        Ok(e)
    }

    /// Replace the value of an existing flow (e.g. attach an engine), or insert it. Maintains the
    /// assisted count and caps.
    pub fn set(&mut self, key: FlowKey, now: Time, value: V) -> Result<(), InsertError> {
        let (s, h) = self.hashed(&key);
        if let Some(Slot { entry: e, .. }) = self.shards[s].map.find_mut(h, slot_is(h, &key)) {
            let was = e.value.assisted();
            let will = value.assisted();
            if will && !was && self.assisted >= self.cfg.max_assisted {
                self.counters.refused_assisted_cap += 1;
                return Err(InsertError::AssistedCap);
            }
            e.value = value;
            e.last_seen = now;
            self.assisted = self.assisted + usize::from(will) - usize::from(was);
            return Ok(());
        }
        self.insert_new(s, h, key, now, value)
    }

    /// Change an existing flow in place with `f`, keeping the assisted count right whatever `f`
    /// does (the caller checks the assisted cap before making a flow assisted). `None` when the
    /// flow is not in the table.
    pub fn modify<R>(
        &mut self,
        key: &FlowKey,
        f: impl FnOnce(&mut FlowEntry<V>) -> R,
    ) -> Option<R> {
        let (s, h) = self.hashed(key);
        let e = &mut self.shards[s].map.find_mut(h, slot_is(h, key))?.entry;
        let was = e.value.assisted();
        let r = f(e);
        let is = e.value.assisted();
        self.assisted = self.assisted + usize::from(is) - usize::from(was);
        Some(r)
    }

    fn insert_new(
        &mut self,
        s: usize,
        h: u64,
        key: FlowKey,
        now: Time,
        value: V,
    ) -> Result<(), InsertError> {
        let assisted = value.assisted();
        if assisted && self.assisted >= self.cfg.max_assisted {
            self.counters.refused_assisted_cap += 1;
            return Err(InsertError::AssistedCap);
        }
        if self.shards[s].map.len() >= self.per_shard || self.len >= self.cfg.max_flows {
            self.sweep_shard(s, now);
        }
        if self.shards[s].map.len() >= self.per_shard || self.len >= self.cfg.max_flows {
            let victim = if assisted {
                // Bounded scan for an unassisted flow to displace.
                self.shards[s]
                    .map
                    .iter()
                    .take(64)
                    .filter(|v| !v.entry.value.assisted())
                    .min_by_key(|v| v.entry.last_seen)
                    .map(|v| (v.h, v.key))
            } else {
                None
            };
            let Some(v) = victim else {
                self.counters.refused_full += 1;
                return Err(InsertError::Full);
            };
            if let Ok(o) = self.shards[s].map.find_entry(v.0, slot_is(v.0, &v.1)) {
                o.remove();
            }
            self.len -= 1;
            self.counters.displaced += 1;
        }
        let slot = Slot::new(h, key, now, value);
        self.shards[s].map.insert_unique(h, slot, slot_hash);
        self.len += 1;
        self.assisted += usize::from(assisted);
        self.counters.created += 1;
        Ok(())
    }

    /// Expire idle flows of one shard, at most once per second of `now` (amortised cost).
    fn sweep_shard(&mut self, s: usize, now: Time) {
        let shard = &mut self.shards[s];
        if shard
            .last_sweep
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        shard.last_sweep = Some(now);
        let idle = self.cfg.idle_timeout;
        let before = shard.map.len();
        // Assisted flows are left to their owner's idle expiry, which also ends their session's
        // hold on them.
        shard.map.retain(|v| {
            v.entry.value.assisted() || now.saturating_duration_since(v.entry.last_seen) < idle
        });
        let removed = before - shard.map.len();
        self.len -= removed;
        self.counters.expired += removed as u64;
    }

    /// Remove every flow idle for longer than the idle timeout; `on_remove` sees each one.
    pub fn expire(&mut self, now: Time, mut on_remove: impl FnMut(&FlowKey, &FlowEntry<V>)) {
        let idle = self.cfg.idle_timeout;
        for shard in &mut self.shards {
            let mut removed = 0usize;
            let mut assisted_removed = 0usize;
            shard.map.retain(|v| {
                let keep = now.saturating_duration_since(v.entry.last_seen) < idle;
                if !keep {
                    removed += 1;
                    assisted_removed += usize::from(v.entry.value.assisted());
                    on_remove(&v.key, &v.entry);
                }
                keep
            });
            shard.last_sweep = Some(now);
            self.len -= removed;
            self.assisted -= assisted_removed;
            self.counters.expired += removed as u64;
        }
    }

    /// Remove a flow.
    pub fn remove(&mut self, key: &FlowKey) -> Option<FlowEntry<V>> {
        let (s, h) = self.hashed(key);
        let (Slot { entry: e, .. }, _) = self.shards[s]
            .map
            .find_entry(h, slot_is(h, key))
            .ok()?
            .remove();
        self.len -= 1;
        self.assisted -= usize::from(e.value.assisted());
        Some(e)
    }

    /// Iterate over all flows.
    pub fn iter(&self) -> impl Iterator<Item = (&FlowKey, &FlowEntry<V>)> {
        self.shards
            .iter()
            .flat_map(|s| s.map.iter().map(|v| (&v.key, &v.entry)))
    }

    /// Iterate mutably over all flows.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&FlowKey, &mut FlowEntry<V>)> {
        self.shards
            .iter_mut()
            .flat_map(|s| s.map.iter_mut().map(|v| (&v.key, &mut v.entry)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct V(bool);
    impl FlowState for V {
        fn assisted(&self) -> bool {
            self.0
        }
    }

    fn key(i: u32) -> FlowKey {
        FlowKey {
            client: SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 4000)),
            server: "192.0.2.1:443".parse().unwrap(),
        }
    }

    fn cfg(max: usize, assisted: usize) -> FlowTableConfig {
        FlowTableConfig {
            shards: 4,
            max_flows: max,
            max_assisted: assisted,
            idle_timeout: Duration::from_secs(120),
        }
    }

    #[test]
    fn new_flow_flood_is_capped_and_counted() {
        let mut t = FlowTable::new(cfg(1000, 10), 7, 9);
        let now = Time::ZERO;
        let mut ok = 0;
        for i in 0..100_000 {
            if t.get_or_insert_with(key(i), now, || V(false)).is_ok() {
                ok += 1;
            }
        }
        assert!(t.len() <= 1000);
        assert_eq!(ok, t.len());
        assert_eq!(t.counters.refused_full, 100_000 - ok as u64);
        assert!(ok >= 900, "shards should fill nearly evenly: {ok}");
        // An assisted flow still gets in by displacing an unassisted one.
        t.set(key(999_999), now, V(true)).unwrap();
        assert_eq!(t.counters.displaced, 1);
        assert_eq!(t.assisted_len(), 1);
    }

    #[test]
    fn assisted_cap() {
        let mut t = FlowTable::new(cfg(1000, 3), 1, 1);
        let now = Time::ZERO;
        for i in 0..3 {
            t.set(key(i), now, V(true)).unwrap();
        }
        assert_eq!(t.set(key(3), now, V(true)), Err(InsertError::AssistedCap));
        assert_eq!(t.counters.refused_assisted_cap, 1);
        // Downgrading frees a slot.
        t.set(key(0), now, V(false)).unwrap();
        t.set(key(3), now, V(true)).unwrap();
        assert_eq!(t.assisted_len(), 3);
    }

    #[test]
    fn idle_timeout_expires_and_frees_room() {
        let mut t = FlowTable::new(cfg(8, 8), 3, 4);
        let t0 = Time::ZERO;
        for i in 0..100 {
            let _ = t.get_or_insert_with(key(i), t0, || V(i % 2 == 0));
        }
        let full = t.len();
        assert!(full <= 8);
        // Still within the idle timeout: refreshing keeps flows.
        t.expire(t0 + Duration::from_secs(119), |_, _| {});
        assert_eq!(t.len(), full);
        let mut seen = 0;
        t.expire(t0 + Duration::from_secs(121), |_, _| seen += 1);
        assert_eq!(seen, full);
        assert!(t.is_empty());
        assert_eq!(t.assisted_len(), 0);
        // Lazy sweep on insert when full.
        for i in 0..8 {
            let _ = t.get_or_insert_with(key(i), t0, || V(false));
        }
        let later = t0 + Duration::from_secs(200);
        assert!(t.get_or_insert_with(key(5000), later, || V(false)).is_ok());
    }

    #[test]
    fn key_hash_distinguishes_families_and_sides() {
        let t: FlowTable<V> = FlowTable::new(cfg(100, 10), 5, 6);
        let h = |c: &str, s: &str| {
            t.hashed(&FlowKey {
                client: c.parse().unwrap(),
                server: s.parse().unwrap(),
            })
            .1
        };
        let mut all = vec![
            h("10.0.0.1:1000", "10.0.0.2:2000"),
            h("10.0.0.2:2000", "10.0.0.1:1000"),
            h("10.0.0.1:2000", "10.0.0.2:1000"),
            h("[::ffff:10.0.0.1]:1000", "[::ffff:10.0.0.2]:2000"),
            h("10.0.0.1:1000", "[::ffff:10.0.0.2]:2000"),
            h("[::ffff:10.0.0.1]:1000", "10.0.0.2:2000"),
            h("[2001:db8::1]:1000", "[2001:db8::2]:2000"),
            h("[2001:db8::2]:1000", "[2001:db8::1]:2000"),
        ];
        // Every key, including the IPv4-mapped twins of the IPv4 key, hashes differently.
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 8);
        // A different table key gives a different hash.
        let t2: FlowTable<V> = FlowTable::new(cfg(100, 10), 5, 7);
        let k = key(1);
        assert_ne!(t.hashed(&k).1, t2.hashed(&k).1);
    }

    #[test]
    fn ipv6_flows_and_mapped_twins_are_separate_entries() {
        let mut t = FlowTable::new(cfg(100, 10), 5, 6);
        let now = Time::ZERO;
        let v4 = FlowKey {
            client: "10.0.0.1:1000".parse().unwrap(),
            server: "10.0.0.2:2000".parse().unwrap(),
        };
        let mapped = FlowKey {
            client: "[::ffff:10.0.0.1]:1000".parse().unwrap(),
            server: "[::ffff:10.0.0.2]:2000".parse().unwrap(),
        };
        t.set(v4, now, V(false)).unwrap();
        t.set(mapped, now, V(true)).unwrap();
        assert_eq!(t.len(), 2);
        assert!(!t.get(&v4).unwrap().value.0);
        assert!(t.get(&mapped).unwrap().value.0);
        assert!(t.remove(&v4).is_some());
        assert!(t.get(&mapped).is_some());
    }

    #[test]
    fn shard_is_stable_per_key() {
        let t: FlowTable<V> = FlowTable::new(cfg(100, 10), 5, 6);
        for i in 0..50 {
            assert_eq!(t.shard_of(&key(i)), t.shard_of(&key(i)));
        }
    }
}

//! Robin engine (seed 001 §4, §5.3): insert the identifier of every client→server packet of a
//! session into the flow's power-sum quACK and emit the quACK every N ms or every N packets.
//!
//! The quota (seed 001 §4.1 "Security") is enforced by the session layer in the core: an engine
//! asks for an emission, the session refuses it beyond the client's quota and the refusal is
//! counted. The engine emits only when something new was inserted since its last quACK.

use std::time::{Duration, Instant};

use quack::{IdSource, PowerSumQuack};

use crate::engine::{Action, Direction, FlowEngine, Outgoing, Packet};

/// When Robin emits quACKs (seed 001 §4.2 "Protocol parameters").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RobinConfig {
    /// Threshold t: number of power sums.
    pub threshold: usize,
    /// Emit every this many packets (0: not count-driven).
    pub every_packets: u32,
    /// Emit every this long (zero: not time-driven).
    pub every: Duration,
    /// How to compute identifiers.
    pub id: IdSource,
}

impl Default for RobinConfig {
    /// Robin #2 (seed 001 Table 5): every 30 ms, t = 10, last 4 bytes of the datagram.
    fn default() -> Self {
        Self {
            threshold: 10,
            every_packets: 0,
            every: Duration::from_millis(30),
            id: IdSource::QUIC_DEFAULT,
        }
    }
}

/// Counters of one Robin engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RobinCounters {
    /// Identifiers inserted.
    pub inserted: u64,
    /// Packets whose identifier could not be read (payload shorter than the identifier).
    pub id_errors: u64,
    /// quACKs requested.
    pub quacks: u64,
    /// Resets applied.
    pub resets: u64,
}

/// The per-flow Robin state.
///
/// ```
/// use std::time::{Duration, Instant};
/// use sidekick_proxy::robin::{RobinConfig, RobinEngine};
/// let cfg = RobinConfig { every_packets: 2, every: Duration::ZERO, ..RobinConfig::default() };
/// let e = RobinEngine::new(cfg, Instant::now());
/// assert_eq!(e.quack().count(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct RobinEngine {
    cfg: RobinConfig,
    quack: PowerSumQuack<u32>,
    since_emit: u32,
    next_emit: Option<Instant>,
    /// Counters.
    pub counters: RobinCounters,
}

impl RobinEngine {
    /// A fresh engine; the first time-driven quACK is due one interval after `now`.
    pub fn new(cfg: RobinConfig, now: Instant) -> Self {
        let threshold = cfg.threshold.clamp(1, 1024);
        Self {
            cfg,
            quack: PowerSumQuack::new(threshold),
            since_emit: 0,
            next_emit: (!cfg.every.is_zero()).then(|| now + cfg.every),
            counters: RobinCounters::default(),
        }
    }

    /// The current quACK.
    pub fn quack(&self) -> &PowerSumQuack<u32> {
        &self.quack
    }

    /// The configuration in force.
    pub fn config(&self) -> &RobinConfig {
        &self.cfg
    }

    /// Apply a new configuration (Config message): the quACK restarts (new epoch).
    pub fn reconfigure(&mut self, cfg: RobinConfig, now: Instant) {
        *self = Self {
            counters: self.counters,
            ..Self::new(cfg, now)
        };
    }

    /// Reinitialise the quACK (Reset, seed 001 §4.2 "Resets").
    pub fn reset(&mut self, now: Instant) {
        self.quack.clear();
        self.since_emit = 0;
        self.next_emit = (!self.cfg.every.is_zero()).then(|| now + self.cfg.every);
        self.counters.resets += 1;
    }

    /// Insert one identifier (the hot path).
    #[inline]
    pub fn insert_payload(&mut self, payload: &[u8]) -> bool {
        if let Ok(id) = self.cfg.id.extract::<u32>(payload) {
            self.quack.insert(id);
            self.since_emit += 1;
            self.counters.inserted += 1;
            true
        } else {
            self.counters.id_errors += 1;
            false
        }
    }

    fn emit(&mut self, out: &mut Vec<Action>) {
        self.since_emit = 0;
        self.counters.quacks += 1;
        out.push(Action::Message(Outgoing::Quack(self.quack.to_bytes())));
    }
}

impl FlowEngine for RobinEngine {
    fn on_packet(&mut self, now: Instant, dir: Direction, pkt: &Packet<'_>, out: &mut Vec<Action>) {
        if dir != Direction::FromClient {
            return;
        }
        if self.insert_payload(pkt.payload)
            && self.cfg.every_packets > 0
            && self.since_emit >= self.cfg.every_packets
        {
            self.emit(out);
            if !self.cfg.every.is_zero() {
                self.next_emit = Some(now + self.cfg.every);
            }
        }
    }

    fn on_timeout(&mut self, now: Instant, out: &mut Vec<Action>) {
        let Some(due) = self.next_emit else { return };
        if now < due {
            return;
        }
        if self.since_emit > 0 {
            self.emit(out);
        }
        // Keep the cadence; skip missed slots rather than bursting.
        let mut next = due + self.cfg.every;
        if next <= now {
            next = now + self.cfg.every;
        }
        self.next_emit = Some(next);
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.next_emit
    }

    fn memory_bytes(&self) -> usize {
        self.quack.threshold() * 4 + std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{LinkType, build_udp_ipv4, parse_frame};

    fn pkt_with_id(id: u32) -> Vec<u8> {
        let mut payload = vec![0x40u8; 20];
        payload.extend_from_slice(&id.to_le_bytes());
        build_udp_ipv4(
            "10.0.0.2:5000".parse().unwrap(),
            "10.9.9.9:443".parse().unwrap(),
            &payload,
            64,
        )
    }

    fn feed(e: &mut RobinEngine, now: Instant, id: u32, out: &mut Vec<Action>) {
        let f = pkt_with_id(id);
        let u = parse_frame(&f, LinkType::RawIp).unwrap();
        let p = Packet {
            frame: &f,
            udp: &u,
            payload: u.payload(&f),
            whole_frame: true,
        };
        e.on_packet(now, Direction::FromClient, &p, out);
    }

    #[test]
    fn every_two_packets_cadence() {
        let now = Instant::now();
        let cfg = RobinConfig {
            threshold: 8,
            every_packets: 2,
            every: Duration::ZERO,
            id: IdSource::QUIC_DEFAULT,
        };
        let mut e = RobinEngine::new(cfg, now);
        let mut out = Vec::new();
        for i in 0..10 {
            feed(&mut e, now, 1000 + i, &mut out);
        }
        assert_eq!(out.len(), 5);
        let Action::Message(Outgoing::Quack(bytes)) = &out[4] else {
            panic!("not a quack")
        };
        let q = PowerSumQuack::<u32>::from_bytes(bytes).unwrap();
        assert_eq!(q.count(), 10);
        assert_eq!(q.last_value(), Some(1009));
        // Sender-side reconstruction matches exactly.
        let mut mine = PowerSumQuack::<u32>::new(8);
        for i in 0..10 {
            mine.insert(1000 + i);
        }
        assert_eq!(q, mine);
        assert_eq!(e.next_timeout(), None);
    }

    #[test]
    fn time_driven_cadence_and_silence_when_idle() {
        let t0 = Instant::now();
        let mut e = RobinEngine::new(RobinConfig::default(), t0);
        let mut out = Vec::new();
        assert_eq!(e.next_timeout(), Some(t0 + Duration::from_millis(30)));
        feed(&mut e, t0, 1, &mut out);
        assert!(out.is_empty());
        e.on_timeout(t0 + Duration::from_millis(29), &mut out);
        assert!(out.is_empty());
        e.on_timeout(t0 + Duration::from_millis(30), &mut out);
        assert_eq!(out.len(), 1);
        // Nothing new: no quACK at the next tick.
        e.on_timeout(t0 + Duration::from_millis(60), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(e.next_timeout(), Some(t0 + Duration::from_millis(90)));
        feed(&mut e, t0 + Duration::from_millis(70), 2, &mut out);
        e.on_timeout(t0 + Duration::from_millis(95), &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn reset_and_server_packets_ignored() {
        let t0 = Instant::now();
        let mut e = RobinEngine::new(RobinConfig::default(), t0);
        let mut out = Vec::new();
        feed(&mut e, t0, 5, &mut out);
        let f = pkt_with_id(6);
        let u = parse_frame(&f, LinkType::RawIp).unwrap();
        let p = Packet {
            frame: &f,
            udp: &u,
            payload: u.payload(&f),
            whole_frame: true,
        };
        e.on_packet(t0, Direction::ToClient, &p, &mut out);
        assert_eq!(e.quack().count(), 1);
        e.reset(t0);
        assert_eq!(e.quack().count(), 0);
        assert_eq!(e.counters.resets, 1);
        // A short payload is counted, not inserted.
        let f = build_udp_ipv4(
            "10.0.0.2:5000".parse().unwrap(),
            "10.9.9.9:443".parse().unwrap(),
            &[1, 2],
            64,
        );
        let u = parse_frame(&f, LinkType::RawIp).unwrap();
        let p = Packet {
            frame: &f,
            udp: &u,
            payload: u.payload(&f),
            whole_frame: true,
        };
        e.on_packet(t0, Direction::FromClient, &p, &mut out);
        assert_eq!(e.counters.id_errors, 1);
        assert_eq!(e.quack().count(), 0);
    }
}

//! One shared multicast cache (Packrat CoNEXT '26 §6.1 "Multicast Proxy") with up to five
//! would-be clients, each modelled by the set of packets it received and its own eACK.

use std::collections::{HashMap, HashSet};

use eack::WidthReceiverEack;
use quack::{IdSource, Width};

use crate::engine::{Action, Outgoing};
use crate::packrat::PackratEngineConfig;
use crate::packrat::multicast::MulticastCache;

const SYMBOLS: usize = 40;
const MAX_MEMBERS: usize = 4;
const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];

/// What one client of the group has seen, as the proxy should believe it.
struct Client {
    joined: bool,
    mac: Option<[u8; 6]>,
    epoch: u32,
    rx: WidthReceiverEack,
    /// Identifiers received this epoch (zero-extended).
    received: HashSet<u64>,
    /// Identifiers forwarded to the group this epoch (count per identifier).
    forwarded: HashMap<u64, u32>,
}

impl Client {
    fn new(cfg: &PackratEngineConfig) -> Self {
        Self {
            joined: false,
            mac: None,
            epoch: 0,
            rx: WidthReceiverEack::new(cfg.width, SYMBOLS, cfg.key),
            received: HashSet::new(),
            forwarded: HashMap::new(),
        }
    }

    fn restart(&mut self, epoch: u32) {
        self.epoch = epoch;
        self.rx.reset(epoch);
        self.received.clear();
        self.forwarded.clear();
    }

    fn receive(&mut self, id: u64) {
        if self.received.insert(id) {
            self.rx.on_receive(id);
        }
    }
}

/// Fuzz body: `data[0]` sizes the shared cache (256 B to 8 kB) and picks the group's
/// identifier width (`data[0] % 3`: 4, 2 or 8 bytes); the rest is a script of steps
/// `op, len, payload[len]` for the client `k = (op >> 4) % 5` (the fifth never fits: four
/// members at most): `op % 8` = 0 the group's stream carries `payload` (bits 4..8 of the *first*
/// payload byte say which clients lose it), 1 join in epoch `payload[0]`, 2 leave, 3 the client's
/// MAC address becomes known, 4 reset to epoch `payload[0]`, 5 a real eACK of what the client
/// received (`payload[0] % 41` symbols), 6 the payload as the client's eACK, 7 the payload as an
/// eACK of a client that never joined. Checked after every step: the cache and the virtual
/// caches stay within their caps, retransmissions go only to a member with a known MAC, as an
/// unchanged copy of a cached frame; after a real eACK of a client whose packets this epoch were
/// all distinct, only packets that client did not receive are retransmitted to it.
pub fn fuzz_multicast_eack(data: &[u8]) {
    let Some((&size, mut rest)) = data.split_first() else {
        return;
    };
    let cap = 256 + usize::from(size) * 32;
    // The group's identifier width: `size % 3` (4, 2 or 8 bytes, the datagram's last ones).
    let width = [Width::U32, Width::U16, Width::U64][usize::from(size % 3)];
    let ids = IdSource::Offset(-(width.bytes() as isize));
    let cfg = PackratEngineConfig {
        local_symbols: SYMBOLS,
        cache_bytes: cap,
        width,
        id: ids,
        ..PackratEngineConfig::default()
    };
    let id_of = |payload: &[u8]| -> Option<u64> {
        match width {
            Width::U16 => ids.extract::<u16>(payload).ok().map(u64::from),
            Width::U32 => ids.extract::<u32>(payload).ok().map(u64::from),
            Width::U64 => ids.extract::<u64>(payload).ok(),
        }
    };
    let mut g: MulticastCache<u8> = MulticastCache::new(cfg, MAX_MEMBERS);
    let mut clients: Vec<Client> = (0..5).map(|_| Client::new(&cfg)).collect();
    // Frames ever cached, without their destination MAC (retransmissions rewrite it).
    let mut cached: HashSet<Vec<u8>> = HashSet::new();
    let mut out = Vec::new();
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(n);
        rest = next;
        let k = (op >> 4) % 5;
        let ki = usize::from(k);
        let first = payload.first().copied().unwrap_or(0);
        out.clear();
        let mut oracle = false;
        match op % 8 {
            0 => {
                let mut frame = GROUP_MAC.to_vec();
                frame.extend_from_slice(&[2, 0, 0, 0, 0, 0xaa, 0x08, 0x00]);
                frame.extend_from_slice(payload);
                g.cache_packet(payload, &frame);
                cached.insert(frame[6..].to_vec());
                if let Some(id) = id_of(payload) {
                    for (i, c) in clients.iter_mut().enumerate().filter(|(_, c)| c.joined) {
                        *c.forwarded.entry(id).or_insert(0) += 1;
                        if first & (0x10 << i) == 0 {
                            c.receive(id);
                        }
                    }
                }
            }
            1 => {
                if g.join(k, u32::from(first)).is_ok() {
                    let c = &mut clients[ki];
                    c.joined = true;
                    c.restart(u32::from(first));
                } else {
                    assert!(g.members() >= MAX_MEMBERS && !clients[ki].joined);
                }
            }
            2 => {
                assert_eq!(g.leave(k).is_some(), clients[ki].joined);
                clients[ki].joined = false;
                clients[ki].mac = None;
            }
            3 => {
                let mac = [2, 0, 0, 0, 1, k];
                g.set_mac(k, mac);
                if clients[ki].joined {
                    clients[ki].mac = Some(mac);
                }
            }
            4 => {
                g.reset(k, u32::from(first));
                if clients[ki].joined {
                    clients[ki].restart(u32::from(first));
                }
            }
            5 => {
                let mut w = Vec::new();
                let c = &clients[ki];
                assert!(
                    c.rx.encode(usize::from(first) % (SYMBOLS + 1), &mut w)
                        .is_ok()
                );
                g.on_eack(k, &w, &mut out);
                oracle = c.joined && c.forwarded.values().all(|&n| n == 1);
            }
            6 => g.on_eack(k, payload, &mut out),
            _ => {
                g.on_eack(200, payload, &mut out);
                assert!(out.is_empty(), "an eACK of a stranger acted");
            }
        }
        for a in &out {
            match a {
                Action::Inject { frame, .. } => {
                    let c = &clients[ki];
                    assert!(c.joined, "retransmission for a client that left");
                    assert_eq!(frame.get(..6), c.mac.as_ref().map(|m| &m[..]), "wrong MAC");
                    assert!(cached.contains(&frame[6..]), "not a cached frame");
                    if oracle {
                        let id = id_of(&frame[14..]);
                        assert!(
                            id.is_some_and(|id| !c.received.contains(&id)),
                            "retransmitted a packet the client has"
                        );
                    }
                }
                Action::Message(Outgoing::Reset) => {}
                other => panic!("unexpected action {other:?}"),
            }
        }
        // The client receives its retransmissions; a Reset starts its next epoch (the session
        // layer numbers it, the core passes it back).
        for a in &out {
            let Action::Inject { frame, .. } = a else {
                let e = clients[ki].epoch.wrapping_add(1);
                g.reset(k, e);
                clients[ki].restart(e);
                continue;
            };
            if let Some(id) = id_of(&frame[14..]) {
                clients[ki].receive(id);
            }
        }
        assert!(g.cache_bytes() <= cap, "shared cache over its cap");
        assert!(g.members() <= MAX_MEMBERS);
        assert_eq!(
            g.members(),
            clients.iter().filter(|c| c.joined).count(),
            "membership"
        );
        // A member's virtual cache holds at most one pair per packet the cache held at its last
        // eACK (pairs of packets evicted since are dropped at its next eACK): the cache's entry
        // cap bounds it (one entry per 28-byte minimum frame).
        assert!(g.virtual_cache_bytes() <= g.members() * (8 + 16 * (cap / 28 + 1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn step(op: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![op, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn losses_come_back_to_their_client() {
        let mut s = vec![255u8];
        for k in 0..2u8 {
            s.extend(step(1 | (k << 4), &[7]));
            s.extend(step(3 | (k << 4), &[]));
        }
        for id in 0..16u32 {
            // Client 0 loses 3, client 1 loses 5 and 9.
            let lost: u8 = match id {
                3 => 0x10,
                5 | 9 => 0x20,
                _ => 0,
            };
            let mut p = vec![lost; 40];
            p.extend_from_slice(&id.to_le_bytes());
            s.extend(step(0, &p));
        }
        s.extend(step(5, &[40]));
        s.extend(step(5 | 0x10, &[40]));
        fuzz_multicast_eack(&s);
    }

    proptest! {
        #[test]
        fn fuzz_multicast_eack_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_multicast_eack(&data);
        }
    }
}

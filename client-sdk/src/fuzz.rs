//! Fuzz body of the client facing a hostile proxy (target `hostile_proxy` in `client-sdk/fuzz/`,
//! also run by the test suite).
//!
//! The proxy here is whoever answers discovery on the path: it completes the key agreement, so
//! it holds the session key and every frame it sends authenticates. What it sends is decided by
//! the fuzz input: InitAck echoes, quACKs, Resets, Configs, Closes, Challenges and arbitrary
//! bodies under any message type, sequence numbers in and beyond the client's quota, raw bytes on
//! both sockets, and forged discovery replies. The client must never panic, and must talk to no
//! one but the address that the (authenticated) discovery reply named.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use ring::rand::SystemRandom;
use sidekick_protocol::discovery::{DiscoveryReply, is_discovery_request};
use sidekick_protocol::frame::{self, FLAG_FROM_PROXY, FLAG_TAG32, Header};
use sidekick_protocol::keys::{Ephemeral, SessionId, SessionKey};
use sidekick_protocol::messages::{
    Challenge, Close, Config, IdentifierMode, IdentifierSpec, InitAck, Message, PackratConfig,
    Quack, Refresh, Reset, RobinConfig, SessionConfig,
};
use sidekick_protocol::{MAX_DATAGRAM, PROTOCOL_VERSION, TagLen};

use crate::session::{SidekickClient, SidekickConfig, Transmit};

/// The sidekick address a hostile reply names (`sel % 8`): a plausible proxy, loopback,
/// multicast, unspecified, broadcast, IPv6 loopback and link-local, or a third party.
fn sidekick_addr(sel: u8, port: u16) -> SocketAddr {
    let ip = match sel % 8 {
        0 => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        1 => IpAddr::V4(Ipv4Addr::LOCALHOST),
        2 => IpAddr::V4(Ipv4Addr::new(224, 0, 0, 251)),
        3 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        4 => IpAddr::V4(Ipv4Addr::BROADCAST),
        5 => IpAddr::V6(Ipv6Addr::LOCALHOST),
        6 => IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
        _ => IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)),
    };
    SocketAddr::new(ip, port)
}

/// A session configuration made of raw bytes: the echo a lying proxy sends back (extreme
/// thresholds, intervals, symbol counts, cache sizes, reorder delays, identifier specs).
fn config_from(b: &[u8]) -> SessionConfig {
    let byte = |i: usize| b.get(i).copied().unwrap_or(0);
    let word = |i: usize| u32::from_le_bytes([byte(i), byte(i + 1), byte(i + 2), byte(i + 3)]);
    let robin = (byte(0) & 1 != 0).then(|| RobinConfig {
        interval_ms: word(1),
        interval_packets: word(5),
        threshold: word(9),
        quack_on_gap_percent: word(13),
    });
    let packrat = (byte(0) & 2 != 0).then(|| PackratConfig {
        eack_interval_ms: word(17),
        eack_interval_packets: word(21),
        local_symbols: word(25) >> (byte(29) % 32),
        cache_capacity_bytes: u64::from(word(30)),
        reorder_delay_ms: word(34) >> (byte(38) % 32),
        multicast_group: b
            .get(39..39 + usize::from(byte(0) >> 4))
            .unwrap_or(&[])
            .to_vec(),
    });
    let identifier = (byte(0) & 4 == 0).then(|| IdentifierSpec {
        mode: i32::from((byte(0) >> 3) & 1),
        offset: word(43) as i32,
        width: u32::from(byte(47)),
        hash_key: b
            .get(48..48 + usize::from(byte(2) % 33))
            .unwrap_or(&[])
            .to_vec(),
    });
    SessionConfig {
        robin,
        packrat,
        identifier,
    }
}

/// The client's requested configuration (`sel % 3`): Robin, Packrat, both.
fn client_config(sel: u8) -> SidekickConfig {
    match sel % 3 {
        0 => SidekickConfig::robin(30, 10),
        1 => SidekickConfig::packrat(),
        _ => {
            let mut c = SidekickConfig::robin(30, 10);
            c.protocol.session.packrat = SidekickConfig::packrat().protocol.session.packrat;
            c.protocol.session.identifier = Some(IdentifierSpec {
                mode: IdentifierMode::Offset as i32,
                ..IdentifierSpec::quic_default()
            });
            c
        }
    }
}

/// The impostor: it answered discovery, so it holds the session key.
struct Impostor {
    key: SessionKey,
    session_id: SessionId,
    addr: SocketAddr,
    next_seq: u64,
}

impl Impostor {
    /// Answers the client's discovery request `req`; `None` if `req` is not one.
    fn answer(req: &[u8], sel: u8) -> Option<(Self, [u8; sidekick_protocol::DISCOVERY_LEN])> {
        let req = is_discovery_request(req)?;
        let rng = SystemRandom::new();
        let eph = Ephemeral::generate(&rng).ok()?;
        let public_key = *eph.public();
        let session_id = SessionId([sel; 16]);
        let key = eph.agree(&req.public_key, &req.nonce, &session_id).ok()?;
        let addr = sidekick_addr(sel >> 3, 7788);
        let reply = DiscoveryReply {
            version: PROTOCOL_VERSION,
            capabilities: sel,
            nonce: req.nonce,
            session_id,
            public_key,
            sidekick_addr: addr,
            tag: [0; 16],
        }
        .encode(sel, &key);
        let me = Self {
            key,
            session_id,
            addr,
            next_seq: 1,
        };
        Some((me, reply))
    }

    fn seq(&mut self, op: u8, fuzzed: u8) -> u64 {
        if op & 0x40 != 0 {
            // A replayed or out-of-window sequence number.
            return u64::from(fuzzed) << (fuzzed % 40);
        }
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    fn seal(&mut self, op: u8, quota: u8, msg: &Message) -> Vec<u8> {
        let seq = self.seq(op, quota);
        let tag = if op & 0x80 != 0 {
            TagLen::Long
        } else {
            TagLen::Short
        };
        frame::seal(
            sidekick_protocol::FrameDirection::ProxyToClient,
            tag,
            self.session_id,
            seq,
            u32::from(quota) * 8,
            msg,
            &self.key,
        )
        .unwrap_or_default()
    }

    /// An authentic frame with any type byte and any body bytes.
    fn seal_raw(&mut self, op: u8, ty: u8, quota: u8, body: &[u8]) -> Vec<u8> {
        let seq = self.seq(op, quota);
        let flags = FLAG_FROM_PROXY | if op & 0x80 != 0 { FLAG_TAG32 } else { 0 };
        let h = Header {
            version: PROTOCOL_VERSION,
            msg_type: ty,
            flags,
            session_id: self.session_id,
            seq,
            quota: u32::from(quota),
            body_len: 0,
        };
        frame::seal_raw(&h, body, &self.key).unwrap_or_default()
    }
}

fn word(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = b.get(at + i).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

/// A message of the kind `sel` selects, filled from `p`.
fn message(sel: u8, p: &[u8], epoch: u32) -> Message {
    let w = |at| word(p, at);
    let near_epoch = epoch.wrapping_add(w(0) % 3).wrapping_sub(1);
    match sel % 8 {
        0 => Message::InitAck(InitAck {
            accepted: p.first().is_none_or(|b| b & 1 == 0),
            capabilities: w(1),
            config: Some(config_from(p.get(5..).unwrap_or(&[]))),
            path_challenge: u64::from(w(0)),
            epoch: w(2),
            reject_code: w(3),
        }),
        1 => Message::Quack(Quack {
            epoch: near_epoch,
            data: p.get(4..).unwrap_or(&[]).to_vec(),
        }),
        2 => Message::Reset(Reset {
            epoch: near_epoch.wrapping_add(w(4) % 2),
            reason: w(8),
        }),
        3 => Message::Config(Config {
            config_id: w(4) % 4,
            config: Some(config_from(p.get(8..).unwrap_or(&[]))),
            accepted: p.first().is_none_or(|b| b & 2 == 0),
            epoch: near_epoch,
        }),
        4 => Message::Close(Close { reason: w(0) }),
        5 => Message::Challenge(Challenge {
            token: (u64::from(w(0)) << 32) | u64::from(w(4)),
        }),
        6 => Message::Refresh(Refresh {
            path_response: u64::from(w(0)),
            want_reply: p.first().is_some_and(|b| b & 1 != 0),
        }),
        _ => Message::Error(sidekick_protocol::messages::ErrorMsg {
            code: w(0),
            detail: String::from_utf8_lossy(p.get(4..).unwrap_or(&[])).into_owned(),
        }),
    }
}

/// A QUIC-looking datagram of the base connection carrying identifier `id` in its last bytes.
fn datagram(short: bool, id: u32, p: &[u8]) -> Vec<u8> {
    let mut d = if short {
        vec![0x40 | (p.first().copied().unwrap_or(0) & 0x3f)]
    } else {
        vec![0xc0, 0, 0, 0, 1, 8]
    };
    d.extend_from_slice(p);
    d.extend_from_slice(&id.to_le_bytes());
    d
}

/// Fuzz body: `data[0]` selects the client's request (Robin, Packrat, both) and `data[1]` the
/// impostor's discovery reply (its session id, capabilities and the sidekick address it names:
/// plausible, loopback, multicast, unspecified, broadcast, link-local or a third party). After
/// the Init, a script of steps `op, len, payload[len]` (`op % 10`): 0 an authentic frame with
/// type `payload[0]` and any body, 1–3 an authentic message built from the payload (InitAck,
/// quACK, Reset, Config, Close, Challenge, Refresh, Error), 4 the payload as a datagram on the
/// sidekick socket, from the proxy or elsewhere, 5 the payload on the base socket, 6 the client
/// sends a datagram, 7 a datagram arrives on the base socket, 8 time passes, 9 the client's
/// engines see an end-to-end RTT. Bits 6/7 of `op` replay sequence numbers and use long tags.
/// Checked after every step: no panic, sidekick datagrams go only to the address that answered
/// and stay within the protocol's datagram size.
pub fn fuzz_hostile_proxy(data: &[u8]) {
    let _ = run(data);
}

/// The body of [`fuzz_hostile_proxy`]; returns the client at the end of the script.
fn run(data: &[u8]) -> Option<SidekickClient> {
    let [sel_client, sel_reply, script @ ..] = data else {
        return None;
    };
    let mut rest = script;
    let mut now = Instant::now();
    let mut c = SidekickClient::new(client_config(*sel_client));
    c.start(now).ok()?;
    let Some(Transmit::Base(req)) = c.poll_transmit() else {
        panic!("no discovery request");
    };
    let Some((mut proxy, reply)) = Impostor::answer(&req, *sel_reply) else {
        panic!("the discovery request does not parse");
    };
    c.on_base_received(now, reply.to_vec());
    let allowed = proxy.addr;
    let mut id = 0u32;
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (p, next) = tail.split_at(n);
        rest = next;
        let first = p.first().copied().unwrap_or(0);
        let epoch = c.protocol().epoch();
        let from = if op & 0x20 == 0 {
            proxy.addr
        } else {
            sidekick_addr(first, 7788)
        };
        match op % 10 {
            0 => {
                let ty = first;
                let quota = p.get(1).copied().unwrap_or(0);
                let f = proxy.seal_raw(*op, ty, quota, p.get(2..).unwrap_or(&[]));
                c.on_sidekick_datagram(now, from, &f);
            }
            1..=3 => {
                let m = message(
                    first.wrapping_add(*op / 10),
                    p.get(1..).unwrap_or(&[]),
                    epoch,
                );
                let f = proxy.seal(*op, p.get(1).copied().unwrap_or(255), &m);
                c.on_sidekick_datagram(now, from, &f);
            }
            4 => c.on_sidekick_datagram(now, from, p),
            5 => c.on_base_received(now, p.to_vec()),
            6 => {
                id = id.wrapping_add(1);
                let d = datagram(first & 1 == 0, id, p);
                c.on_base_sent(now, &d);
            }
            7 => {
                let d = datagram(first & 1 == 0, word(p, 1), p.get(5..).unwrap_or(&[]));
                c.on_base_received(now, d);
            }
            8 => {
                now += Duration::from_millis(u64::from(first) * u64::from(*len) * 4);
                c.handle_timeout(now);
            }
            _ => c.on_e2e_rtt(Duration::from_micros(u64::from(word(p, 0)))),
        }
        while let Some(t) = c.poll_transmit() {
            if let Transmit::Sidekick(to, bytes) = t {
                assert_eq!(
                    to, allowed,
                    "sidekick datagram to an address nobody vouched for"
                );
                assert!(bytes.len() <= MAX_DATAGRAM);
            }
        }
        while c.poll_event().is_some() {}
        while c.poll_deliver().is_some() {}
    }
    Some(c)
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

    /// Payload of a step 1 that makes an InitAck accepting `config` (the layout
    /// [`message`] and [`config_from`] read).
    fn init_ack(robin: Option<(u32, u32, u32)>, packrat: bool) -> Vec<u8> {
        let mut p = vec![0u8; 64];
        // p[0]: message kind 0 (InitAck); p[1]: accepted; p[2..6]: capabilities.
        let cfg = &mut p[6..];
        cfg[0] = u8::from(robin.is_some()) | if packrat { 2 } else { 0 };
        if let Some((ms, packets, t)) = robin {
            cfg[1..5].copy_from_slice(&ms.to_le_bytes());
            cfg[5..9].copy_from_slice(&packets.to_le_bytes());
            cfg[9..13].copy_from_slice(&t.to_le_bytes());
        }
        if packrat {
            cfg[17..21].copy_from_slice(&10u32.to_le_bytes());
            cfg[25..29].copy_from_slice(&160u32.to_le_bytes());
            cfg[30..34].copy_from_slice(&48_000u32.to_le_bytes());
            cfg[34..38].copy_from_slice(&30u32.to_le_bytes());
        }
        cfg[43..47].copy_from_slice(&(-4i32).to_le_bytes());
        cfg[47] = 4;
        p
    }

    #[test]
    fn an_honest_init_ack_establishes_the_session() {
        for (sel, robin, packrat) in [(0, Some((30, 0, 10)), false), (1, None, true)] {
            let mut s = vec![sel, 0];
            s.extend(step(1, &init_ack(robin, packrat)));
            let c = run(&s).unwrap();
            assert!(c.is_active(), "{:?}", c.fallback_cause());
            assert_eq!(c.robin().is_some(), robin.is_some());
            assert_eq!(c.packrat().is_some(), packrat);
        }
    }

    #[test]
    fn a_forged_quack_after_an_honest_start_is_survived() {
        let mut s = vec![0, 0];
        s.extend(step(1, &init_ack(Some((30, 0, 10)), false)));
        for i in 0..8u8 {
            s.extend(step(6, &[0, i, i, i]));
        }
        // Kind 1: a quACK of the current epoch with garbage power sums.
        let mut q = vec![1u8, 9, 1, 0, 0, 0];
        q.extend_from_slice(&[0x11, 0x02, 8, 0, 8, 0, 0, 0]);
        q.extend(std::iter::repeat_n(0xee, 32));
        s.extend(step(2, &q));
        s.extend(step(8, &[200]));
        let _ = run(&s).unwrap();
    }

    proptest! {
        #[test]
        fn fuzz_hostile_proxy_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz_hostile_proxy(&data);
        }
    }
}

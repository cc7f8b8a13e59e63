//! QUIC connection tracking from long headers and initial RTTs to both sides (PEMI §4.4.1,
//! App. A "QUIC connection tracking and initial RTT measurement", Fig. 14), with the instant-ACK
//! and coalesced ACK+ServerHello behaviours of ReACKed QUICer (IMC '24) (§2, Fig. 3).
//!
//! Nothing is decrypted. Each datagram is walked as a sequence of coalesced QUIC packets (RFC 9000
//! §12.2) using only the invariant long-header fields and the cleartext Length / Token Length
//! fields (RFC 9000 §17.2.2–17.2.5).

use std::time::Duration;

use crate::Time;

use crate::engine::Direction;
use sidekick_wire::quic::{LongType, Packet, packets};

/// The kind of one QUIC packet inside a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// Initial, with the value of its Length field (packet number + protected payload).
    Initial {
        /// Length field.
        len: u64,
    },
    /// 0-RTT.
    ZeroRtt,
    /// Handshake.
    Handshake,
    /// Retry.
    Retry,
    /// Version negotiation.
    VersionNegotiation,
    /// A short-header (1-RTT) packet; `spin` is the spin bit (RFC 9000 §17.4).
    Short {
        /// The spin bit.
        spin: bool,
    },
}

/// Largest Initial Length field treated as an ACK-only Initial: an ACK frame, a packet number
/// and the 16-byte AEAD tag. A ServerHello alone is well over 90 bytes (ReACKed QUICer (IMC '24) §2).
pub const ACK_ONLY_INITIAL_MAX: u64 = 64;

/// Walk the coalesced QUIC packets of a datagram (RFC 9000 §12.2). At most `max` packets are
/// returned; a malformed tail ends the walk (the packets before it are kept). Versions other than
/// 1 and 2 yield nothing (their layout is unknown) except version negotiation.
pub fn coalesced(payload: &[u8], max: usize) -> Vec<PacketKind> {
    let mut out = Vec::new();
    for p in packets(payload).take(max) {
        let kind = match p {
            Ok(Packet::Short { first, .. }) => PacketKind::Short {
                spin: first & 0x20 != 0,
            },
            Ok(Packet::Long(h)) if h.version == 0 => PacketKind::VersionNegotiation,
            Ok(Packet::Long(h)) if h.is_known_version() => match (h.ty, h.length) {
                (Some(LongType::Initial), Some(len)) => PacketKind::Initial { len },
                (Some(LongType::ZeroRtt), _) => PacketKind::ZeroRtt,
                (Some(LongType::Handshake), _) => PacketKind::Handshake,
                (Some(LongType::Retry), _) => PacketKind::Retry,
                _ => break,
            },
            // An unknown version's layout (or a malformed tail) ends the walk.
            _ => break,
        };
        out.push(kind);
    }
    out
}

/// Initial RTT estimates measured during the handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeRtts {
    /// Proxy → server → proxy: first client Initial to first server Initial/Handshake or Retry.
    /// With an instant ACK this is the network RTT; with a coalesced ACK+ServerHello (wait for
    /// certificate) it also holds the server's processing time (ReACKed QUICer (IMC '24) §2).
    pub to_server: Option<Duration>,
    /// Proxy → client → proxy: first server Handshake datagram (or Retry) to the first client
    /// Handshake (or the client's Initial after the Retry).
    pub to_client: Option<Duration>,
    /// The server answered with an ACK-only Initial before its ServerHello (instant ACK).
    pub instant_ack: bool,
    /// The server sent a Retry.
    pub retry: bool,
}

/// Handshake tracker of one flow (four-tuple identity, App. A).
#[derive(Debug, Clone, Default)]
pub struct HandshakeTracker {
    client_initial: Option<Time>,
    server_first: Option<Time>,
    server_hs: Option<Time>,
    retry: Option<Time>,
    client_answer: Option<Time>,
    rtts: HandshakeRtts,
    done: bool,
}

impl HandshakeTracker {
    /// A tracker waiting for the client's first Initial.
    pub fn new() -> Self {
        Self::default()
    }

    /// The estimates so far.
    pub fn rtts(&self) -> HandshakeRtts {
        self.rtts
    }

    /// Both RTTs are known, or the handshake can no longer be measured (1-RTT traffic seen).
    pub fn done(&self) -> bool {
        self.done
    }

    /// Observe one datagram's payload. Returns true when this datagram completed the tracking.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use sidekick_proxy_core::Time;
    /// # use sidekick_proxy_core::engine::Direction;
    /// # use sidekick_proxy_core::pemi::handshake::HandshakeTracker;
    /// // A client Initial (version 1, empty token, 20-byte packet) and a server Handshake.
    /// let initial = [0xc0, 0, 0, 0, 1, 0, 0, 0, 20].iter().copied().chain([0; 20]).collect::<Vec<_>>();
    /// let hs = [0xe0, 0, 0, 0, 1, 0, 0, 20].iter().copied().chain([0; 20]).collect::<Vec<_>>();
    /// let t0 = Time::ZERO;
    /// let mut t = HandshakeTracker::new();
    /// t.on_datagram(t0, Direction::FromClient, &initial);
    /// t.on_datagram(t0 + Duration::from_millis(30), Direction::ToClient, &hs);
    /// t.on_datagram(t0 + Duration::from_millis(40), Direction::FromClient, &hs);
    /// assert_eq!(t.rtts().to_server, Some(Duration::from_millis(30)));
    /// assert_eq!(t.rtts().to_client, Some(Duration::from_millis(10)));
    /// ```
    pub fn on_datagram(&mut self, now: Time, dir: Direction, payload: &[u8]) -> bool {
        if self.done {
            return false;
        }
        let pkts = coalesced(payload, 8);
        let has = |f: fn(&PacketKind) -> bool| pkts.iter().any(f);
        let initial = has(|k| matches!(k, PacketKind::Initial { .. }));
        let handshake = has(|k| matches!(k, PacketKind::Handshake));
        let retry = has(|k| matches!(k, PacketKind::Retry));
        let short = has(|k| matches!(k, PacketKind::Short { .. }));
        match dir {
            Direction::FromClient => {
                if self.client_initial.is_none() {
                    if initial {
                        self.client_initial = Some(now);
                    }
                } else if self.client_answer.is_none() {
                    // The client's answer: its first Handshake packet, or after a Retry its new
                    // Initial (App. A, Fig. 14). A client sends its first 1-RTT packet together
                    // with its Handshake Finished (it has the 1-RTT keys from the same server
                    // flight, RFC 9001 §4.1.2), so when the datagram with the Finished was lost
                    // before the proxy saw it, the first 1-RTT one answers as well; without it
                    // the flow would have no client-side RTT at all.
                    let answer = handshake
                        || (self.retry.is_some() && initial)
                        || (short && self.server_hs.is_some());
                    if answer && let Some(from) = self.retry.or(self.server_hs) {
                        self.client_answer = Some(now);
                        self.rtts.to_client = Some(now.saturating_duration_since(from));
                    }
                }
            }
            Direction::ToClient => {
                if let Some(ci) = self.client_initial {
                    if self.server_first.is_none() && (initial || handshake || retry) {
                        self.server_first = Some(now);
                        self.rtts.to_server = Some(now.saturating_duration_since(ci));
                        // Time ACK (ReACKed QUICer (IMC '24) §2, Fig. 3): an ACK-only Initial alone in its
                        // datagram, not coalesced with the ServerHello's Handshake packets.
                        self.rtts.instant_ack = !handshake
                            && !retry
                            && pkts.iter().all(|k| {
                                matches!(k, PacketKind::Initial { len } if *len <= ACK_ONLY_INITIAL_MAX)
                            });
                    }
                    if retry && self.retry.is_none() {
                        self.retry = Some(now);
                        self.rtts.retry = true;
                    }
                    if handshake && self.server_hs.is_none() {
                        self.server_hs = Some(now);
                    }
                }
            }
        }
        // A 1-RTT packet from the client means its Handshake flight has passed (or was missed):
        // nothing more to measure. The server's 1-RTT (0.5-RTT data) comes earlier and is no sign.
        if short && dir == Direction::FromClient && self.client_initial.is_some() {
            self.done = true;
        }
        if self.rtts.to_client.is_some() && self.rtts.to_server.is_some() {
            self.done = true;
        }
        self.done
    }
}

/// Fuzz body: walk arbitrary datagrams and feed a tracker; must never panic.
pub fn fuzz_handshake(data: &[u8]) {
    let t0 = Time::ZERO;
    let mut t = HandshakeTracker::new();
    for (i, chunk) in data.split(|&b| b == 0x5a).enumerate() {
        let _ = coalesced(chunk, 16);
        let dir = if i % 2 == 0 {
            Direction::FromClient
        } else {
            Direction::ToClient
        };
        t.on_datagram(t0 + Duration::from_millis(i as u64), dir, chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A version-1 long-header packet: `ty` 0 Initial, 1 0-RTT, 2 Handshake; `len` protected bytes.
    pub(crate) fn long(ty: u8, len: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        if ty == 0 {
            p.push(0); // token length
        }
        p.push(0x40 | (len >> 8) as u8);
        p.push(len as u8);
        p.extend(std::iter::repeat_n(0xaa, len));
        p
    }

    fn retry() -> Vec<u8> {
        let mut p = vec![0xf0, 0, 0, 0, 1, 0, 4, 9, 9, 9, 9];
        p.extend([0x11; 32]);
        p
    }

    fn ms(t0: Time, n: u64) -> Time {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn walks_coalesced_packets() {
        let mut d = long(0, 150);
        d.extend(long(2, 900));
        d.extend([0x40, 1, 2, 3]);
        assert_eq!(
            coalesced(&d, 8),
            vec![
                PacketKind::Initial { len: 150 },
                PacketKind::Handshake,
                PacketKind::Short { spin: false }
            ]
        );
        // Truncated second packet: the first is kept.
        let mut t = long(0, 30);
        t.extend(&long(2, 100)[..50]);
        assert_eq!(coalesced(&t, 8), vec![PacketKind::Initial { len: 30 }]);
        assert_eq!(coalesced(&retry(), 8), vec![PacketKind::Retry]);
        // Zero padding after a long header is no packet; a lone greased short header is one.
        let mut p = long(0, 30);
        p.extend([0u8; 100]);
        assert_eq!(coalesced(&p, 8), vec![PacketKind::Initial { len: 30 }]);
        assert_eq!(
            coalesced(&[0x20, 1, 2], 8),
            vec![PacketKind::Short { spin: true }]
        );
    }

    #[test]
    fn coalesced_ack_and_server_hello() {
        // Wait for certificate: the first server datagram coalesces Initial(ACK+SH) + Handshake.
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::FromClient, &long(0, 1180));
        let mut sh = long(0, 150);
        sh.extend(long(2, 1000));
        t.on_datagram(ms(t0, 42), Direction::ToClient, &sh);
        t.on_datagram(ms(t0, 43), Direction::ToClient, &long(2, 1100));
        let mut ans = long(0, 30);
        ans.extend(long(2, 40));
        assert!(t.on_datagram(ms(t0, 50), Direction::FromClient, &ans));
        let r = t.rtts();
        assert_eq!(r.to_server, Some(Duration::from_millis(42)));
        assert_eq!(r.to_client, Some(Duration::from_millis(8)));
        assert!(!r.instant_ack && !r.retry);
    }

    #[test]
    fn instant_ack_then_server_hello() {
        // Time ACK: an ACK-only Initial first; the ServerHello flight comes 15 ms later. The
        // server RTT comes from the ACK, the client RTT from the Handshake flight.
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::FromClient, &long(0, 1180));
        t.on_datagram(ms(t0, 20), Direction::ToClient, &long(0, 24));
        let mut sh = long(0, 150);
        sh.extend(long(2, 1000));
        t.on_datagram(ms(t0, 35), Direction::ToClient, &sh);
        t.on_datagram(ms(t0, 41), Direction::FromClient, &long(2, 40));
        let r = t.rtts();
        assert_eq!(r.to_server, Some(Duration::from_millis(20)));
        assert_eq!(r.to_client, Some(Duration::from_millis(6)));
        assert!(r.instant_ack);
        assert!(t.done());
    }

    #[test]
    fn a_lost_client_handshake_is_answered_by_its_first_1rtt_packet() {
        // The client's Handshake datagram (its Finished) was lost on the last hop before the
        // proxy; the 1-RTT datagrams it sent beside it got through (seen in a lab trace of
        // quic-go at 3 % loss, where the flow was then left without a client-side RTT).
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::FromClient, &long(0, 1180));
        let mut sh = long(0, 150);
        sh.extend(long(2, 1000));
        t.on_datagram(ms(t0, 52), Direction::ToClient, &sh);
        t.on_datagram(ms(t0, 53), Direction::ToClient, &long(2, 600));
        // The client's Initial ACK, padded: no answer yet.
        assert!(!t.on_datagram(ms(t0, 54), Direction::FromClient, &long(0, 1180)));
        assert!(t.on_datagram(ms(t0, 55), Direction::FromClient, &[0x40, 1, 2, 3]));
        let r = t.rtts();
        assert_eq!(r.to_server, Some(Duration::from_millis(52)));
        assert_eq!(r.to_client, Some(Duration::from_millis(3)));
        // The retransmitted Handshake that follows changes nothing.
        assert!(!t.on_datagram(ms(t0, 200), Direction::FromClient, &long(2, 40)));
        assert_eq!(t.rtts().to_client, Some(Duration::from_millis(3)));
    }

    #[test]
    fn a_short_packet_before_any_server_handshake_answers_nothing() {
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::FromClient, &long(0, 1180));
        t.on_datagram(ms(t0, 20), Direction::ToClient, &long(0, 24));
        t.on_datagram(ms(t0, 21), Direction::FromClient, &[0x40, 1, 2, 3]);
        assert_eq!(t.rtts().to_client, None);
        assert!(t.done());
    }

    #[test]
    fn retry_then_new_initial() {
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::FromClient, &long(0, 1180));
        t.on_datagram(ms(t0, 30), Direction::ToClient, &retry());
        t.on_datagram(ms(t0, 39), Direction::FromClient, &long(0, 1180));
        let r = t.rtts();
        assert!(r.retry);
        assert_eq!(r.to_server, Some(Duration::from_millis(30)));
        assert_eq!(r.to_client, Some(Duration::from_millis(9)));
    }

    #[test]
    fn server_first_or_garbage_is_ignored() {
        let t0 = Time::ZERO;
        let mut t = HandshakeTracker::new();
        t.on_datagram(t0, Direction::ToClient, &long(2, 100));
        t.on_datagram(ms(t0, 1), Direction::FromClient, &[1, 2, 3]);
        assert_eq!(t.rtts(), HandshakeRtts::default());
        assert!(!t.done());
    }

    proptest! {
        #[test]
        fn walker_total(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
            let k = coalesced(&data, 16);
            prop_assert!(k.len() <= 16);
            fuzz_handshake(&data);
        }

        #[test]
        fn walker_finds_every_coalesced_packet(lens in proptest::collection::vec((0u8..3, 1usize..1200), 1..6)) {
            let mut d = Vec::new();
            for &(ty, len) in &lens {
                d.extend(long(ty, len));
            }
            let k = coalesced(&d, 16);
            prop_assert_eq!(k.len(), lens.len());
        }
    }
}

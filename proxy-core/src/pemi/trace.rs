//! Recorded flows for PEMI: a text trace of what the proxy saw (time, direction, ports, size, a
//! hash of the UDP payload and its first bytes) and a replay that feeds a trace through a fresh
//! [`PemiEngine`] and scores its loss inference against the packets a link really dropped.
//!
//! PEMI's inference is a heuristic over timing (PEMI §4.2–4.3); the only way to know how
//! often it is right is to compare it with ground truth. The lab's link elements can log a hash
//! of every datagram they drop (`SIDEKICK_LAB_DROP_LOG`, interop README); the proxy writes the
//! trace with `--pemi-trace FILE`. Both hash the UDP payload with 64-bit FNV-1a, so a protected
//! packet of the trace is "really lost" when its hash is in the drop log.
//!
//! A line of the trace:
//!
//! ```text
//! <t_ns> <c|s> <src_port> <dst_port> <len> <fnv1a64 hex> <head hex>
//! ```
//!
//! `c` = from the client, `s` = to the client. `head` is the whole payload of long-header
//! packets (the handshake tracker parses them) and the first byte of short-header packets (the
//! spin bit); everything else the engine sees is the size and the time.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use crate::Time;

use crate::engine::{Action, Direction, FlowEngine, Packet};
use crate::packet::{LinkType, build_udp_ip, parse_frame};

use super::{PemiConfig, PemiEngine, PemiStats};

/// Longest `head` kept for a long-header payload (a full-size Initial).
const MAX_HEAD: usize = 1500;

/// 64-bit FNV-1a over `data` (the hash the lab's drop log uses too).
///
/// ```
/// use sidekick_proxy_core::pemi::trace::fnv1a64;
/// assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
/// assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
/// ```
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Why a trace line was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Not the seven fields of a trace line.
    #[error("line {line}: expected 7 fields")]
    Fields {
        /// 1-based line number.
        line: usize,
    },
    /// A field that does not parse.
    #[error("line {line}: bad {field}")]
    Field {
        /// 1-based line number.
        line: usize,
        /// Which field.
        field: &'static str,
    },
}

/// One datagram seen by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Nanoseconds since the trace began.
    pub t_ns: u64,
    /// Direction through the proxy.
    pub dir: Direction,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP payload length.
    pub len: usize,
    /// FNV-1a of the UDP payload.
    pub hash: u64,
    /// The payload's first bytes (see the module documentation).
    pub head: Vec<u8>,
}

impl TraceRecord {
    /// The record of `payload` seen at `t_ns`.
    pub fn new(t_ns: u64, dir: Direction, src_port: u16, dst_port: u16, payload: &[u8]) -> Self {
        let keep = match payload.first() {
            Some(b) if b & 0x80 != 0 => payload.len().min(MAX_HEAD),
            Some(_) => 1,
            None => 0,
        };
        Self {
            t_ns,
            dir,
            src_port,
            dst_port,
            len: payload.len(),
            hash: fnv1a64(payload),
            head: payload[..keep].to_vec(),
        }
    }

    /// The record as one trace line (without the newline).
    pub fn to_line(&self) -> String {
        let dir = match self.dir {
            Direction::FromClient => 'c',
            Direction::ToClient => 's',
        };
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut head = String::with_capacity(2 * self.head.len());
        for b in &self.head {
            head.push(char::from(HEX[usize::from(b >> 4)]));
            head.push(char::from(HEX[usize::from(b & 15)]));
        }
        if head.is_empty() {
            head.push('-');
        }
        format!(
            "{} {dir} {} {} {} {:016x} {head}",
            self.t_ns, self.src_port, self.dst_port, self.len, self.hash
        )
    }

    /// Parse one trace line (`line_no` is used in errors).
    pub fn parse(text: &str, line_no: usize) -> Result<Self, TraceError> {
        let f: Vec<&str> = text.split_ascii_whitespace().collect();
        let [t, dir, sp, dp, len, hash, head] = f.as_slice() else {
            return Err(TraceError::Fields { line: line_no });
        };
        let bad = |field| TraceError::Field {
            line: line_no,
            field,
        };
        let dir = match *dir {
            "c" => Direction::FromClient,
            "s" => Direction::ToClient,
            _ => return Err(bad("direction")),
        };
        let head = if *head == "-" {
            Vec::new()
        } else {
            hex(head).ok_or_else(|| bad("head"))?
        };
        let len: usize = len.parse().map_err(|_| bad("len"))?;
        if head.len() > len || head.len() > MAX_HEAD {
            return Err(bad("head"));
        }
        Ok(Self {
            t_ns: t.parse().map_err(|_| bad("time"))?,
            dir,
            src_port: sp.parse().map_err(|_| bad("src_port"))?,
            dst_port: dp.parse().map_err(|_| bad("dst_port"))?,
            len,
            hash: u64::from_str_radix(hash, 16).map_err(|_| bad("hash"))?,
            head,
        })
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok()))
        .collect()
}

/// Parse a whole trace; blank lines and `#` comments are skipped.
pub fn parse_trace(text: &str) -> Result<Vec<TraceRecord>, TraceError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| TraceRecord::parse(l, i + 1))
        .collect()
}

/// Parse a drop log: one FNV-1a hash (hex) per line, as the last field of the line.
pub fn parse_drops(text: &str) -> HashSet<u64> {
    text.lines()
        .filter_map(|l| l.split_ascii_whitespace().last())
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .collect()
}

/// What a replay inferred.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Indices (into the trace) of protected packets the engine retransmitted.
    pub retransmitted: Vec<usize>,
    /// The engine's counters at the end.
    pub stats: PemiStats,
    /// Indices of the protected (dominant-direction) packets of the replayed flow.
    pub protected: Vec<usize>,
}

/// Replay the first QUIC flow of `records` (the four-tuple of its first client Initial) through
/// a fresh engine with `cfg`. Every packet is handed to the engine as a whole frame whose payload
/// is the record's head, then the record's index (8 bytes), then zeros up to the recorded length,
/// so an injected retransmission names the packet it repeats.
pub fn replay(records: &[TraceRecord], cfg: PemiConfig) -> Replay {
    replay_calibrated(records, cfg, None)
}

/// [`replay`] with a receiver-side calibration sample of `calibration` handed to the engine
/// when the first protected packet is seen and every 50 ms after — what the live proxy's ICMP
/// echo probes (§4.4.3) would have measured; a trace records only the flow's own datagrams.
pub fn replay_calibrated(
    records: &[TraceRecord],
    cfg: PemiConfig,
    calibration: Option<Duration>,
) -> Replay {
    let mut out = Replay::default();
    let mut last_calibration: Option<Time> = None;
    let Some(first) = records
        .iter()
        .position(|r| r.dir == Direction::FromClient && super::engine::starts_connection(&r.head))
    else {
        return out;
    };
    let (cport, sport) = (records[first].src_port, records[first].dst_port);
    let caddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), cport));
    let saddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 1, 2), sport));
    let origin = Time::ZERO;
    let at = |t: u64| origin + Duration::from_nanos(t);
    let mut engine = PemiEngine::new(cfg, at(records[first].t_ns));
    let mut actions = Vec::new();
    let handle = |actions: &mut Vec<Action>, out: &mut Replay| {
        for a in actions.drain(..) {
            if let Action::Inject { frame, .. } = a
                && let Ok(udp) = parse_frame(&frame, LinkType::RawIp)
                && let Some(ix) = index_of(udp.payload(&frame))
            {
                out.retransmitted.push(ix);
            }
        }
    };
    for (ix, r) in records.iter().enumerate().skip(first) {
        let (src, dst) = match r.dir {
            Direction::FromClient => (caddr, saddr),
            Direction::ToClient => (saddr, caddr),
        };
        if (src.port(), dst.port()) != (r.src_port, r.dst_port) {
            continue;
        }
        let now = at(r.t_ns);
        while let Some(t) = engine.poll_timeout().filter(|&t| t <= now) {
            engine.handle_timeout(t, &mut actions);
            handle(&mut actions, &mut out);
            if engine.poll_timeout() == Some(t) {
                break;
            }
        }
        let payload = synth_payload(r, ix);
        let frame = build_udp_ip(src, dst, &payload, 64);
        let Ok(udp) = parse_frame(&frame, LinkType::RawIp) else {
            continue;
        };
        let pkt = Packet {
            frame: &frame,
            udp: &udp,
            payload: udp.payload(&frame),
            whole_frame: true,
        };
        let before = engine.stats.protected;
        engine.on_packet(now, r.dir, &pkt, &mut actions);
        if engine.stats.protected > before {
            out.protected.push(ix);
            if let (Some(rtt), Some(side)) = (calibration, engine.dominant())
                && last_calibration.is_none_or(|t| now >= t + Duration::from_millis(50))
            {
                engine.on_echo_sample(now, side, rtt);
                last_calibration = Some(now);
            }
        }
        handle(&mut actions, &mut out);
    }
    if let Some(last) = records.last() {
        engine.handle_timeout(at(last.t_ns) + Duration::from_secs(1), &mut actions);
        handle(&mut actions, &mut out);
    }
    out.stats = engine.stats;
    out
}

/// Marker before the record index in a synthesised payload (after the head).
const INDEX_MARK: [u8; 4] = *b"PEMI";

fn synth_payload(r: &TraceRecord, ix: usize) -> Vec<u8> {
    let mut p = r.head.clone();
    if p.len() + 12 <= r.len {
        p.extend_from_slice(&INDEX_MARK);
        p.extend_from_slice(&(ix as u64).to_le_bytes());
    }
    p.resize(r.len.max(p.len()), 0);
    p
}

fn index_of(payload: &[u8]) -> Option<usize> {
    // Short-header payloads keep one head byte; long-header ones are never retransmitted by
    // PEMI (they belong to the handshake, before a dominant direction exists).
    let rest = payload.get(1..13)?;
    (rest[..4] == INDEX_MARK)
        .then(|| u64::from_le_bytes(rest[4..12].try_into().unwrap_or([0; 8])) as usize)
}

/// Inference scored against ground truth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Score {
    /// Protected packets of the flow.
    pub protected: usize,
    /// Protected packets the link really dropped (their hash is in the drop log).
    pub really_lost: usize,
    /// Packets the engine retransmitted.
    pub retransmitted: usize,
    /// Retransmitted packets that were really lost.
    pub correct: usize,
}

impl Score {
    /// Fraction of retransmissions that repaired a real loss (1 when none were sent).
    pub fn precision(&self) -> f64 {
        if self.retransmitted == 0 {
            1.0
        } else {
            self.correct as f64 / self.retransmitted as f64
        }
    }

    /// Fraction of real losses that were retransmitted (1 when nothing was lost).
    pub fn recall(&self) -> f64 {
        if self.really_lost == 0 {
            1.0
        } else {
            self.correct as f64 / self.really_lost as f64
        }
    }
}

/// Score a replay of `records` against the hashes of really dropped datagrams.
pub fn score<S: std::hash::BuildHasher>(
    records: &[TraceRecord],
    replay: &Replay,
    drops: &HashSet<u64, S>,
) -> Score {
    let lost = |ix: &usize| records.get(*ix).is_some_and(|r| drops.contains(&r.hash));
    let retx: HashSet<usize> = replay.retransmitted.iter().copied().collect();
    Score {
        protected: replay.protected.len(),
        really_lost: replay.protected.iter().filter(|i| lost(i)).count(),
        retransmitted: retx.len(),
        correct: retx.iter().filter(|i| lost(i)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn line_round_trip_and_heads() {
        let short = TraceRecord::new(12, Direction::ToClient, 443, 5000, &[0x41, 1, 2, 3]);
        assert_eq!(short.head, vec![0x41]);
        let line = short.to_line();
        assert_eq!(
            line,
            format!("12 s 443 5000 4 {:016x} 41", fnv1a64(&[0x41, 1, 2, 3]))
        );
        assert_eq!(TraceRecord::parse(&line, 1), Ok(short));
        let long = TraceRecord::new(0, Direction::FromClient, 5000, 443, &[0xc0, 0, 0, 0, 1]);
        assert_eq!(long.head.len(), 5);
        assert_eq!(TraceRecord::parse(&long.to_line(), 1), Ok(long));
        let empty = TraceRecord::new(0, Direction::FromClient, 1, 2, &[]);
        assert_eq!(TraceRecord::parse(&empty.to_line(), 1), Ok(empty));
    }

    #[test]
    fn malformed_lines_are_errors() {
        for (l, want) in [
            ("1 c 1 2 3 ff", TraceError::Fields { line: 7 }),
            (
                "x c 1 2 3 ff 41",
                TraceError::Field {
                    line: 7,
                    field: "time",
                },
            ),
            (
                "1 q 1 2 3 ff 41",
                TraceError::Field {
                    line: 7,
                    field: "direction",
                },
            ),
            (
                "1 c 1 2 3 ff 4",
                TraceError::Field {
                    line: 7,
                    field: "head",
                },
            ),
            (
                "1 c 1 2 0 ff 41",
                TraceError::Field {
                    line: 7,
                    field: "head",
                },
            ),
            (
                "1 c 1 99999 3 ff 41",
                TraceError::Field {
                    line: 7,
                    field: "dst_port",
                },
            ),
            (
                "1 c 1 2 3 zz 41",
                TraceError::Field {
                    line: 7,
                    field: "hash",
                },
            ),
        ] {
            assert_eq!(TraceRecord::parse(l, 7), Err(want), "{l}");
        }
        assert!(parse_trace("# comment\n\n1 s 1 2 1 00 41\n").is_ok_and(|t| t.len() == 1));
        assert_eq!(parse_drops("5 s 00ff\nabc\n"), HashSet::from([0xff, 0xabc]));
    }

    #[test]
    fn synthesised_payload_names_its_record() {
        let r = TraceRecord::new(0, Direction::ToClient, 1, 2, &[0x40; 1200]);
        let p = synth_payload(&r, 4711);
        assert_eq!(p.len(), 1200);
        assert_eq!(p[0], 0x40);
        assert_eq!(index_of(&p), Some(4711));
        let tiny = TraceRecord::new(0, Direction::ToClient, 1, 2, &[0x40; 5]);
        assert_eq!(index_of(&synth_payload(&tiny, 1)), None);
    }

    proptest! {
        #[test]
        fn any_line_parses_without_panic(s in "\\PC{0,80}") {
            let _ = TraceRecord::parse(&s, 1);
            let _ = parse_trace(&s);
            let _ = parse_drops(&s);
        }

        #[test]
        fn records_round_trip(t in any::<u64>(), c in any::<bool>(), sp in any::<u16>(),
                              dp in any::<u16>(), p in proptest::collection::vec(any::<u8>(), 0..200)) {
            let dir = if c { Direction::FromClient } else { Direction::ToClient };
            let r = TraceRecord::new(t, dir, sp, dp, &p);
            prop_assert_eq!(TraceRecord::parse(&r.to_line(), 1), Ok(r));
        }
    }
}

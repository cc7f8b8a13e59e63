//! The core with a live session: a real protocol client discovers the proxy on the base path and
//! opens a session with Init, then a script decoded from the fuzz input drives frames, sidekick
//! datagrams, client actions and time.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::Time;

use eack::{HashKey, WidthReceiverEack};
use quack::{IdSource, Width};
use sidekick_protocol::messages::{
    IdentifierMode, IdentifierSpec, PackratConfig, RobinConfig, SessionConfig,
};
use sidekick_protocol::{ClientConfig, ClientSession, ClientState, Destination, ProxyPolicy};

use crate::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use crate::engine::Direction;
use crate::flow::FlowTableConfig;
use crate::packet::{LinkType, build_udp_ip, parse_frame};
use crate::pemi::PemiConfig;
use crate::session::ProtocolSessions;

const AP_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
/// Local eACK symbols of every Packrat configuration below.
const SYMBOLS: usize = 40;
/// The core's per-flow memory cap (a session asking for a larger cache is clamped to it).
const MAX_FLOW_MEMORY: usize = 64 * 1024;
const MAX_FLOWS: usize = 64;

fn v4(a: u8, b: u8, c: u8, d: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), port)
}

fn v6(last: u16, port: u16) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last)),
        port,
    )
}

fn proxy_addr() -> SocketAddr {
    v4(10, 0, 0, 1, 7788)
}

fn group_addr() -> SocketAddr {
    v4(239, 1, 2, 3, 5004)
}

fn robin(interval_ms: u32, interval_packets: u32, threshold: u32, gap: u32) -> RobinConfig {
    RobinConfig {
        interval_ms,
        interval_packets,
        threshold,
        quack_on_gap_percent: gap,
    }
}

fn packrat(cache: u64, multicast_group: Vec<u8>) -> PackratConfig {
    PackratConfig {
        eack_interval_ms: 10,
        eack_interval_packets: 16,
        local_symbols: SYMBOLS as u32,
        cache_capacity_bytes: cache,
        reorder_delay_ms: 30,
        multicast_group,
    }
}

/// The identifier width of preset `sel`: the unicast Packrat presets (2 and 3) take 4, 2 or 8
/// bytes by `sel / 6 % 3` (Sidekick (NSDI '24) §3); the others 4.
fn preset_width(sel: u8) -> Width {
    match sel % 6 {
        2 | 3 => [Width::U32, Width::U16, Width::U64][usize::from(sel / 6 % 3)],
        _ => Width::U32,
    }
}

/// The session configurations the script starts from (`sel % 6`; the width of
/// [`preset_width`]).
fn preset(sel: u8) -> SessionConfig {
    let w = preset_width(sel).bytes() as u32;
    let sized = IdentifierSpec {
        width: w,
        offset: -(w as i32),
        ..IdentifierSpec::quic_default()
    };
    let keyed = IdentifierSpec {
        mode: IdentifierMode::KeyedHash as i32,
        offset: 0,
        width: 4,
        hash_key: vec![0x11; 16],
    };
    let (robin, packrat, identifier) = match sel % 6 {
        0 => (
            Some(robin(0, 2, 8, 0)),
            None,
            IdentifierSpec::quic_default(),
        ),
        1 => (
            Some(robin(30, 0, 10, 150)),
            None,
            IdentifierSpec::quic_default(),
        ),
        2 => (None, Some(packrat(8 * 1024, Vec::new())), sized),
        3 => (
            Some(robin(0, 4, 4, 0)),
            Some(packrat(4 * 1024, Vec::new())),
            sized,
        ),
        4 => (
            None,
            Some(packrat(
                8 * 1024,
                PackratConfig::encode_multicast_group(group_addr()),
            )),
            IdentifierSpec::quic_default(),
        ),
        _ => (Some(robin(10, 3, 16, 0)), None, keyed),
    };
    SessionConfig {
        robin,
        packrat,
        identifier: Some(identifier),
    }
}

/// A configuration from raw bytes (for Config messages): whatever the client sends, the proxy
/// must validate or clamp (cache sizes above the per-flow cap, thresholds, intervals).
fn config_from(b: &[u8]) -> SessionConfig {
    let byte = |i: usize| b.get(i).copied().unwrap_or(0);
    let word = |i: usize| u32::from_le_bytes([byte(i), byte(i + 1), byte(i + 2), byte(i + 3)]);
    let robin = (byte(0) & 1 != 0).then(|| robin(word(1) % 100, word(5) % 20, word(9), word(13)));
    let packrat = (byte(0) & 2 != 0).then(|| PackratConfig {
        eack_interval_ms: word(17) % 100,
        eack_interval_packets: word(21) % 64,
        local_symbols: word(25),
        cache_capacity_bytes: u64::from(word(29)) << (byte(33) % 40),
        reorder_delay_ms: word(34),
        multicast_group: b
            .get(38..38 + usize::from(byte(0) >> 4))
            .unwrap_or(&[])
            .to_vec(),
    });
    SessionConfig {
        robin,
        packrat,
        identifier: Some(IdentifierSpec {
            mode: i32::from((byte(0) >> 2) & 1),
            offset: -i32::from(byte(2) % 8),
            width: 4,
            hash_key: if byte(0) & 4 != 0 {
                vec![byte(3); 16]
            } else {
                Vec::new()
            },
        }),
    }
}

/// Where the session's flow lives.
struct Flow {
    client: SocketAddr,
    client_sk: SocketAddr,
    server: SocketAddr,
    link: LinkType,
}

impl Flow {
    fn frame(&self, src: SocketAddr, dst: SocketAddr, src_mac: [u8; 6], payload: &[u8]) -> Vec<u8> {
        let ip = build_udp_ip(src, dst, payload, 64);
        match self.link {
            LinkType::RawIp => ip,
            LinkType::Ethernet => {
                let dst_mac = if dst.ip().is_multicast() {
                    GROUP_MAC
                } else if src_mac == AP_MAC {
                    CLIENT_MAC
                } else {
                    AP_MAC
                };
                let mut f = dst_mac.to_vec();
                f.extend_from_slice(&src_mac);
                f.extend_from_slice(if dst.is_ipv6() {
                    &[0x86, 0xdd]
                } else {
                    &[0x08, 0x00]
                });
                f.extend_from_slice(&ip);
                f
            }
        }
    }
}

struct Harness {
    core: ProxyCore<ProtocolSessions>,
    client: ClientSession,
    flow: Flow,
    pemi: bool,
    /// The client's view of what it received this epoch (for real eACKs), at the session's
    /// identifier width.
    rx: WidthReceiverEack,
    ids: IdSource,
    /// Addresses that sent authentic sidekick frames: the only ones the proxy may answer.
    authentic: HashSet<SocketAddr>,
    now: Time,
}

impl Harness {
    fn new(mode: u8) -> Self {
        let config = preset(mode);
        let multicast = mode % 6 == 4;
        let ipv6 = mode & 0x08 != 0 && !multicast;
        let raw_ip = mode & 0x10 != 0 && !multicast;
        let pemi = mode & 0x20 != 0;
        let flow = Flow {
            client: if ipv6 {
                v6(2, 50000)
            } else {
                v4(10, 0, 0, 2, 50000)
            },
            // The sidekick socket shares the base socket's address: the proxy binds a session
            // to its station (the client's IP).
            client_sk: if ipv6 {
                v6(2, 50001)
            } else {
                v4(10, 0, 0, 2, 50001)
            },
            server: if ipv6 {
                v6(10, 443)
            } else {
                v4(198, 51, 100, 10, 443)
            },
            link: if raw_ip {
                LinkType::RawIp
            } else {
                LinkType::Ethernet
            },
        };
        let cfg = CoreConfig {
            link: flow.link,
            flows: FlowTableConfig {
                max_flows: MAX_FLOWS,
                ..FlowTableConfig::default()
            },
            track_unassisted: mode & 0x40 == 0,
            max_flow_memory: MAX_FLOW_MEMORY,
            max_multicast_groups: 2,
            max_group_members: 4,
            ..CoreConfig::default()
        };
        let pemi_cfg = pemi.then(|| PemiConfig {
            enforce_delay: mode & 0x80 != 0,
            ..PemiConfig::default()
        });
        let core = ProxyCore::new(
            cfg,
            ProtocolSessions::new(ProxyPolicy::new(proxy_addr())),
            (1, 2),
        )
        .with_pemi(pemi_cfg);
        Self {
            core,
            client: ClientSession::new(ClientConfig::new(config)),
            flow,
            pemi,
            rx: WidthReceiverEack::new(preset_width(mode), SYMBOLS, HashKey::DEFAULT),
            ids: IdSource::Offset(-(preset_width(mode).bytes() as isize)),
            authentic: HashSet::new(),
            now: Time::ZERO,
        }
    }

    fn verdict_ok(&self, v: &Verdict) {
        match v {
            Verdict::Forward => {}
            // PEMI's bounded reply delay (bridge mode) is the only other verdict.
            Verdict::Delay { until } => {
                assert!(self.pemi, "a delay without PEMI");
                assert!(*until >= self.now, "delay into the past");
            }
        }
    }

    fn on_frame(&mut self, dir: Direction, frame: &[u8], meta: FrameMeta) {
        let v = self.core.handle_frame(self.now, dir, frame, meta);
        self.verdict_ok(&v);
    }

    /// A datagram of the session's flow from the client.
    fn client_sends(&mut self, payload: &[u8], meta: FrameMeta) {
        let f = self
            .flow
            .frame(self.flow.client, self.flow.server, CLIENT_MAC, payload);
        self.on_frame(Direction::FromClient, &f, meta);
    }

    /// A datagram of the session's flow (or of the multicast group) to the client; `received`:
    /// the client gets it (otherwise it was lost on the last hop).
    fn server_sends(&mut self, dst: SocketAddr, payload: &[u8], meta: FrameMeta, received: bool) {
        let f = self.flow.frame(self.flow.server, dst, AP_MAC, payload);
        self.on_frame(Direction::ToClient, &f, meta);
        if received {
            let _ = self.rx.on_datagram(&self.ids, payload);
        }
    }

    fn sidekick(&mut self, from: SocketAddr, bytes: &[u8]) {
        self.core.handle_sidekick(self.now, from, bytes);
    }

    /// Exchanges datagrams between the client and the core until both are quiet, checking every
    /// action of the core.
    fn pump(&mut self) {
        for _ in 0..16 {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                moved = true;
                match t.dest {
                    Destination::Base => self.client_sends(&t.bytes, FrameMeta::default()),
                    Destination::Sidekick(_) => {
                        self.authentic.insert(self.flow.client_sk);
                        self.sidekick(self.flow.client_sk, &t.bytes);
                    }
                }
            }
            while let Some(a) = self.core.poll_transmit() {
                moved = true;
                self.on_action(a);
            }
            while let Some(ev) = self.client.poll_event() {
                if let sidekick_protocol::ClientEvent::Established { epoch, .. }
                | sidekick_protocol::ClientEvent::Reconfigured { epoch, .. }
                | sidekick_protocol::ClientEvent::ResetByProxy { epoch, .. }
                | sidekick_protocol::ClientEvent::ResetAcked { epoch } = ev
                {
                    self.rx.reset(epoch);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn on_action(&mut self, a: Transmit) {
        match a {
            Transmit::Sidekick { to, bytes } => {
                assert!(
                    self.authentic.contains(&to),
                    "sidekick datagram to {to}, which never sent an authentic frame"
                );
                assert!(bytes.len() <= sidekick_protocol::MAX_DATAGRAM);
                let _ = self.client.handle_datagram(self.now, proxy_addr(), &bytes);
            }
            Transmit::Inject { dir, frame } => {
                let parsed = parse_frame(&frame, self.flow.link).ok();
                let to_our_client = dir == Direction::ToClient
                    && parsed.as_ref().is_some_and(|p| p.dst == self.flow.client);
                if self.pemi && !to_our_client {
                    // PEMI re-injects buffered datagrams of any flow, either way, and sends
                    // ICMP probes.
                    assert!(!frame.is_empty());
                    return;
                }
                assert_eq!(
                    dir,
                    Direction::ToClient,
                    "only the client is ever injected to"
                );
                let Some(p) = parsed else {
                    panic!("injected frame does not parse");
                };
                assert_eq!(
                    p.src, self.flow.server,
                    "injected frames come from the server"
                );
                let payload = p.payload(&frame).to_vec();
                if p.dst == self.flow.client {
                    let _ = self.client.handle_base_datagram(self.now, &payload);
                } else {
                    assert_eq!(p.dst, group_addr(), "retransmission to a stranger");
                    assert_eq!(frame.get(..6), Some(&CLIENT_MAC[..]), "to the member's MAC");
                }
                let _ = self.rx.on_datagram(&self.ids, &payload);
            }
        }
    }

    fn check(&self) {
        let s = self.core.snapshot();
        assert!(s.flows <= MAX_FLOWS as u64 + 1, "flow table over its cap");
        // One unicast cache and at most two multicast group caches, each clamped to the cap.
        assert!(
            s.cache_bytes <= 3 * MAX_FLOW_MEMORY as u64,
            "caches over the per-flow cap: {}",
            s.cache_bytes
        );
        assert!(s.multicast_groups <= 2 && s.multicast_members <= 4);
    }
}

fn meta_of(op: u8, payload: &[u8]) -> FrameMeta {
    FrameMeta {
        csum_not_ready: op & 0x10 != 0,
        gso_size: (op & 0x20 != 0).then(|| u16::from(payload.first().copied().unwrap_or(0)) + 1),
    }
}

/// Fuzz body: `data[0]` selects the session (Robin count/time-driven, Packrat, both, Packrat
/// multicast, keyed-hash identifiers; IPv6 or raw-IP links; PEMI on other flows); the session is
/// established through the protocol and must come up. The rest is a script of steps
/// `op, len, payload[len]` (`op % 10`): 0 a datagram of the flow from the client, 1 one to the
/// client (bit 3: lost on the last hop), 2 one of the multicast group, 3/4 an arbitrary frame
/// from/to the client, 5 an eACK from the client (a real one of what it received, or the payload),
/// 6 an arbitrary sidekick datagram (from the client's sidekick address or another), 7 time
/// passes, 8 a client action (reset, reconfigure with a configuration made of the payload, error,
/// close, restart), 9 a datagram of another flow. Bits 4/5 of `op` set the partial-checksum and
/// GSO metadata. Checked throughout: the verdict is always Forward (or PEMI's bounded Delay),
/// the proxy answers only addresses that authenticated, injected frames come from the server
/// and go to the client (or its MAC for the multicast group), and the tables stay within their caps.
pub fn fuzz_core_sessions(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let mut h = Harness::new(mode);
    assert!(h.client.start(h.now).is_ok());
    h.pump();
    assert_eq!(
        h.client.state(),
        ClientState::Established,
        "the session must come up through the core"
    );
    let other_client = v4(10, 0, 0, 9, 40000);
    while let [op, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (payload, next) = tail.split_at(n);
        rest = next;
        let meta = meta_of(*op, payload);
        match op % 10 {
            0 => h.client_sends(payload, meta),
            1 => h.server_sends(h.flow.client, payload, meta, op & 0x08 == 0),
            2 => h.server_sends(group_addr(), payload, meta, op & 0x08 == 0),
            3 => h.on_frame(Direction::FromClient, payload, meta),
            4 => h.on_frame(Direction::ToClient, payload, meta),
            5 => {
                let eack = match payload {
                    [0, k, ..] => {
                        let mut w = Vec::new();
                        let _ = h.rx.encode(usize::from(*k) % (SYMBOLS + 1), &mut w);
                        w
                    }
                    _ => payload.to_vec(),
                };
                let _ = h.client.send_eack(h.now, &eack);
            }
            6 => {
                let from = if op & 0x08 == 0 {
                    h.flow.client_sk
                } else {
                    v4(10, 0, 0, 3, 50001)
                };
                h.sidekick(from, payload);
            }
            7 => {
                h.now += Duration::from_millis(u64::from(*len) * u64::from(*len) * 4);
                if h.client.poll_timeout().is_some_and(|t| t <= h.now) {
                    h.client.handle_timeout(h.now);
                }
                let now = h.now;
                h.core.handle_timeout(now);
            }
            8 => match payload.first().map(|b| b % 5) {
                Some(0) => {
                    let _ = h.client.reset(h.now, 0);
                }
                Some(1) => {
                    let _ = h.client.reconfigure(h.now, config_from(&payload[1..]));
                }
                Some(2) => {
                    let _ = h.client.send_error(h.now, 1, "fuzz");
                }
                Some(3) => h.client.close(h.now, 0),
                _ => {
                    // A new session on the same flow (the old one is detached).
                    let sel = payload.get(1).copied().unwrap_or(0);
                    h.client = ClientSession::new(ClientConfig::new(preset(sel)));
                    let w = preset_width(sel);
                    h.rx = WidthReceiverEack::new(w, SYMBOLS, HashKey::DEFAULT);
                    h.ids = IdSource::Offset(-(w.bytes() as isize));
                    let _ = h.client.start(h.now);
                }
            },
            _ => {
                let f = h
                    .flow
                    .frame(other_client, h.flow.server, [2, 0, 0, 0, 0, 9], payload);
                let dir = if op & 0x08 == 0 {
                    Direction::FromClient
                } else {
                    Direction::ToClient
                };
                h.on_frame(dir, &f, meta);
            }
        }
        h.pump();
        h.check();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A script step.
    fn step(op: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![op, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    /// A datagram whose last 2, 4 and 8 bytes differ between ids below 256.
    fn datagram(id: u32) -> Vec<u8> {
        let mut p = vec![0x40; 60];
        p.extend_from_slice(&id.wrapping_mul(0x0101_0101).to_le_bytes());
        p
    }

    #[test]
    fn every_preset_establishes_and_takes_traffic() {
        for mode in 0..=255u8 {
            let mut script = vec![mode];
            for id in 0..20u32 {
                script.extend(step(0, &datagram(id)));
                // Every third datagram to the client is lost on the last hop.
                let lost = if id % 3 == 0 { 0x08 } else { 0 };
                script.extend(step(1 | lost, &datagram(1000 + id)));
                script.extend(step(2 | lost, &datagram(2000 + id)));
            }
            script.extend(step(5, &[0, 40]));
            script.extend(step(7, &[0; 10]));
            script.extend(step(8, &[0]));
            fuzz_core_sessions(&script);
        }
    }

    #[test]
    fn real_eacks_reach_the_packrat_engine() {
        // Packrat preset at 4, 2 and 8 bytes (modes 2, 8, 14): lost datagrams come back from
        // the cache after a real eACK of the session's width.
        for (mode, width) in [(2u8, Width::U32), (8, Width::U16), (14, Width::U64)] {
            assert_eq!(preset_width(mode), width);
            let mut h = Harness::new(mode);
            h.client.start(h.now).unwrap();
            h.pump();
            assert_eq!(h.client.state(), ClientState::Established);
            for id in 0..20u32 {
                h.server_sends(h.flow.client, &datagram(id), FrameMeta::default(), id != 5);
                h.pump();
            }
            let mut w = Vec::new();
            h.rx.encode(SYMBOLS, &mut w).unwrap();
            assert_eq!(usize::from(w[1]), width.bytes());
            h.client.send_eack(h.now, &w).unwrap();
            h.pump();
            let s = h.core.snapshot();
            assert_eq!(s.packrat.eacks_decoded, 1, "mode {mode}: {s:?}");
            assert_eq!(s.packrat.retransmissions, 1, "mode {mode}");
        }
    }

    proptest! {
        #[test]
        fn fuzz_core_sessions_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz_core_sessions(&data);
        }
    }
}

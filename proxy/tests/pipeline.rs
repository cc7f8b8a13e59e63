//! End-to-end tests of the sans-IO core with the real session layer and a protocol client:
//! discovery, quACKs for an upload, retransmission from the cache for a download, bad input and
//! floods, fail-open.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use std::net::SocketAddr;
use std::time::Duration;

use sidekick_proxy::Time;

use common::{CLIENT, CLIENT_SK, PROXY, SERVER, addr, eth, robin_config};
use eack::ReceiverEack;
use quack::PowerSumQuack;
use sidekick_protocol::messages::{IdentifierSpec, PackratConfig};
use sidekick_protocol::{
    ClientConfig, ClientEvent, ClientSession, Destination, ProxyPolicy, SessionConfig,
};
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::session::ProtocolSessions;

fn data(id: u32, len: usize) -> Vec<u8> {
    let mut p = vec![0x41u8; len];
    p.extend_from_slice(&id.to_le_bytes());
    p
}

struct Lab {
    core: ProxyCore<ProtocolSessions>,
    client: ClientSession,
    out: Vec<Transmit>,
    events: Vec<ClientEvent>,
    injected: Vec<Vec<u8>>,
}

impl Lab {
    fn new(session: SessionConfig) -> Self {
        let cfg = CoreConfig {
            link: LinkType::Ethernet,
            ..CoreConfig::default()
        };
        // Short streams (tens of packets): the retransmission budget, 10 % of a few kB, is
        // tested on its own (packrat::budget_tests); here it would hold back repairs.
        let core = ProxyCore::new(
            cfg,
            ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))).with_packrat_retx_budget(100),
            (1, 2),
        );
        let client = ClientSession::new(ClientConfig::new(session));
        Self {
            core,
            client,
            out: Vec::new(),
            events: Vec::new(),
            injected: Vec::new(),
        }
    }

    fn base_from_client(&mut self, now: Time, payload: &[u8]) -> Verdict {
        let f = eth(&build_udp_ip(addr(CLIENT), addr(SERVER), payload, 64));
        let v = self
            .core
            .handle_frame(now, Direction::FromClient, &f, FrameMeta::default());
        self.collect();
        v
    }

    /// Move what the core has to send into `out`.
    fn collect(&mut self) {
        self.out
            .extend(std::iter::from_fn(|| self.core.poll_transmit()));
    }

    fn base_to_client(&mut self, now: Time, payload: &[u8]) -> Vec<u8> {
        let f = eth(&build_udp_ip(addr(SERVER), addr(CLIENT), payload, 64));
        let v = self
            .core
            .handle_frame(now, Direction::ToClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward);
        self.collect();
        f
    }

    /// Exchange datagrams between client and proxy until both are quiet.
    fn pump(&mut self, now: Time) {
        for _ in 0..50 {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit() {
                moved = true;
                match t.dest {
                    Destination::Base => {
                        let _ = self.base_from_client(now, &t.bytes);
                    }
                    Destination::Sidekick(to) => {
                        assert_eq!(to, addr(PROXY));
                        self.core.handle_sidekick(now, addr(CLIENT_SK), &t.bytes);
                    }
                }
            }
            self.core.handle_timeout(now);
            self.collect();
            for a in std::mem::take(&mut self.out) {
                moved = true;
                match a {
                    Transmit::Sidekick { to, bytes } => {
                        assert_eq!(to, addr(CLIENT_SK));
                        let ev = self
                            .client
                            .handle_datagram(now, addr(PROXY), &bytes)
                            .unwrap();
                        self.events.push(ev);
                    }
                    Transmit::Inject { dir, frame } => {
                        assert_eq!(dir, Direction::ToClient);
                        let p = parse_frame(&frame, LinkType::Ethernet).unwrap();
                        if p.src == addr(SERVER)
                            && p.dst == addr(CLIENT)
                            && let Ok(ev) = self.client.handle_base_datagram(now, p.payload(&frame))
                        {
                            self.events.push(ev);
                        }
                        self.injected.push(frame);
                    }
                }
            }
            while let Some(ev) = self.client.poll_event() {
                self.events.push(ev);
            }
            if !moved {
                return;
            }
        }
    }

    /// The quACKs the client received, in order.
    fn quacks(&self) -> Vec<PowerSumQuack<u32>> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Quack { data, .. } => Some(PowerSumQuack::from_bytes(data).unwrap()),
                _ => None,
            })
            .collect()
    }

    fn establish(&mut self, now: Time) {
        self.client.start(now).unwrap();
        self.pump(now);
        assert!(
            self.events
                .iter()
                .any(|e| matches!(e, ClientEvent::Established { .. })),
            "no session: {:?}",
            self.events
        );
        assert_eq!(self.core.flows().assisted_len(), 1);
        self.injected.clear();
    }
}

fn packrat_config() -> SessionConfig {
    SessionConfig {
        robin: None,
        packrat: Some(PackratConfig {
            eack_interval_ms: 10,
            eack_interval_packets: 16,
            local_symbols: 160,
            cache_capacity_bytes: 48 * 1024,
            reorder_delay_ms: 30,
            multicast_group: Vec::new(),
        }),
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

#[test]
fn discovery_then_quacks_for_an_upload() {
    let now = Time::ZERO;
    let mut lab = Lab::new(robin_config());
    lab.establish(now);
    let snap = lab.core.snapshot();
    assert_eq!(snap.discovery_replied, 1);
    for id in 0..10u32 {
        assert_eq!(lab.base_from_client(now, &data(id, 100)), Verdict::Forward);
        lab.pump(now);
    }
    let quacks = lab.quacks();
    assert!(!quacks.is_empty(), "no quACK: {:?}", lab.core.snapshot());
    let last = quacks.last().unwrap();
    let mut expect = PowerSumQuack::<u32>::new(8);
    for id in 0..(last.count()) {
        expect.insert(id);
    }
    assert_eq!(*last, expect);
    let snap = lab.core.snapshot();
    assert_eq!(snap.robin.inserted, 10);
    assert!(snap.quacks_sent as usize >= quacks.len());
    // Quota: the proxy never sends more quACKs than the cadence asks for (every 2 packets).
    assert!(snap.quacks_sent <= 5);
    let text = snap.render_prometheus().unwrap();
    assert!(text.contains("sidekick_sessions 1"));
}

#[test]
fn a_negotiated_quack_on_gap_reveals_a_loss_with_the_next_packet() {
    let t0 = Time::ZERO;
    let mut cfg = robin_config();
    if let Some(r) = cfg.robin.as_mut() {
        r.interval_packets = 32;
        r.quack_on_gap_percent = 150;
    }
    let mut lab = Lab::new(cfg);
    lab.establish(t0);
    // A 20 ms paced stream; packet 12 is lost before the proxy.
    for id in (0..20u32).filter(|&id| id != 12) {
        let now = t0 + Duration::from_millis(u64::from(id) * 20);
        assert_eq!(lab.base_from_client(now, &data(id, 200)), Verdict::Forward);
        lab.pump(now);
    }
    let quacks = lab.quacks();
    // Three quACKs: with packet 0 (the sender syncs on it), with packet 13 — it covers 0..=11
    // and 13, so 12 is missing before 13 — and again with packet 14 (it would cover a resend).
    assert_eq!(quacks.len(), 3, "{quacks:?}");
    assert_eq!((quacks[0].count(), quacks[0].last_value()), (1, Some(0)));
    assert_eq!((quacks[1].count(), quacks[1].last_value()), (13, Some(13)));
    assert_eq!((quacks[2].count(), quacks[2].last_value()), (14, Some(14)));
    let snap = lab.core.snapshot();
    assert_eq!(snap.robin.gap_quacks, 1);
    assert!(
        snap.render_prometheus()
            .unwrap()
            .contains("sidekick_quacks_on_gap_total 1\n")
    );
}

#[test]
fn packrat_retransmits_exactly_the_missing_packets() {
    let now = Time::ZERO;
    let mut lab = Lab::new(packrat_config());
    lab.establish(now);
    let epoch = lab.client.epoch();
    let mut rx = ReceiverEack::new(160);
    rx.reset(epoch);
    let mut frames = Vec::new();
    for id in 0..16u32 {
        let f = lab.base_to_client(now, &data(1000 + id, 1200));
        frames.push(f);
        if id != 3 && id != 7 {
            rx.on_receive(1000 + id);
        }
    }
    let mut wire = Vec::new();
    rx.encode(40, &mut wire).unwrap();
    lab.client.send_eack(now, &wire).unwrap();
    lab.pump(now);
    let mut got = lab.injected.clone();
    got.sort();
    let mut want = vec![frames[3].clone(), frames[7].clone()];
    want.sort();
    assert_eq!(got, want, "retransmissions must be the original frames");
    let snap = lab.core.snapshot();
    assert_eq!(snap.packrat.retransmissions, 2);
    assert_eq!(snap.packrat.eacks_decoded, 1);
    assert_eq!(snap.packrat.evicted_acked, 14);
    assert!(snap.cache_bytes > 0);
}

#[test]
fn undecodable_eack_sends_a_reset() {
    let now = Time::ZERO;
    let mut lab = Lab::new(packrat_config());
    lab.establish(now);
    let mut rx = ReceiverEack::new(160);
    rx.reset(lab.client.epoch());
    for id in 0..100u32 {
        lab.base_to_client(now, &data(id, 300));
    }
    // The client saw none of them: 100 missing cannot decode from 4 symbols.
    let mut wire = Vec::new();
    rx.encode(4, &mut wire).unwrap();
    let before = lab.client.epoch();
    lab.client.send_eack(now, &wire).unwrap();
    lab.pump(now);
    let snap = lab.core.snapshot();
    assert_eq!(snap.packrat.eacks_failed, 1);
    assert_eq!(snap.resets_sent, 1);
    assert!(
        lab.events
            .iter()
            .any(|e| matches!(e, ClientEvent::ResetByProxy { .. })),
        "{:?}",
        lab.events
    );
    assert!(lab.client.epoch() > before);
    assert_eq!(snap.cache_bytes, 0);
}

#[test]
fn malformed_sidekick_messages_are_counted_and_harmless() {
    let now = Time::ZERO;
    let mut lab = Lab::new(robin_config());
    lab.establish(now);
    let mut seed = 1u64;
    for i in 0..2000u32 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = (seed >> 50) as usize % 200;
        let bytes: Vec<u8> = (0..len).map(|j| (seed >> (j % 56)) as u8).collect();
        let from = SocketAddr::from(([192, 0, 2, (i % 250) as u8], 1000 + (i % 5000) as u16));
        lab.core.handle_sidekick(now, from, &bytes);
    }
    assert!(
        lab.core.poll_transmit().is_none(),
        "garbage must not trigger sends"
    );
    let snap = lab.core.snapshot();
    assert_eq!(snap.sidekick_dropped, 2000);
    // The established session still works.
    for id in 0..4u32 {
        lab.base_from_client(now, &data(id, 50));
        lab.pump(now);
    }
    assert!(
        lab.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Quack { .. }))
    );
}

#[test]
fn discovery_and_new_flow_floods_are_bounded() {
    let now = Time::ZERO;
    let cfg = CoreConfig {
        link: LinkType::Ethernet,
        flows: sidekick_proxy::flow::FlowTableConfig {
            shards: 4,
            max_flows: 1000,
            max_assisted: 100,
            idle_timeout: Duration::from_secs(120),
        },
        ..CoreConfig::default()
    };
    let mut core = ProxyCore::new(
        cfg,
        ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))),
        (3, 4),
    );
    // Real discovery requests from 5000 distinct flows.
    let mut client = ClientSession::new(ClientConfig::new(robin_config()));
    client.start(now).unwrap();
    let req = client.poll_transmit().unwrap();
    assert_eq!(req.dest, Destination::Base);
    let mut out = Vec::new();
    for i in 0..5000u32 {
        let src = SocketAddr::from(([10, 1, (i >> 8) as u8, i as u8], 40000));
        let f = eth(&build_udp_ip(src, addr(SERVER), &req.bytes, 64));
        let v = core.handle_frame(now, Direction::FromClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward);
        out.extend(std::iter::from_fn(|| core.poll_transmit()));
    }
    let snap = core.snapshot();
    assert_eq!(snap.discovery_seen, 5000);
    assert!(snap.discovery_replied <= 60, "{}", snap.discovery_replied);
    assert_eq!(snap.discovery_replied + snap.discovery_refused, 5000);
    assert_eq!(out.len() as u64, snap.discovery_replied);
    assert!(snap.flows <= 1000);
    assert!(snap.flow_table.refused_full >= 4000);
    assert!(core.sessions().table().half_open_len() <= 1024);
}

#[test]
fn fail_open_on_garbage_frames() {
    let now = Time::ZERO;
    let mut lab = Lab::new(packrat_config());
    lab.establish(now);
    for len in 0..200usize {
        let f: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
        for dir in [Direction::FromClient, Direction::ToClient] {
            let meta = FrameMeta {
                csum_not_ready: len % 2 == 0,
                gso_size: Some(7),
            };
            assert_eq!(lab.core.handle_frame(now, dir, &f, meta), Verdict::Forward);
        }
    }
    assert!(lab.core.poll_transmit().is_none());
    let snap = lab.core.snapshot();
    assert_eq!(snap.frames, 400 + 1);
}

#[test]
fn partial_checksums_are_completed_before_caching() {
    let now = Time::ZERO;
    let mut lab = Lab::new(packrat_config());
    lab.establish(now);
    let mut rx = ReceiverEack::new(160);
    rx.reset(lab.client.epoch());
    let mut good = Vec::new();
    for id in 0..4u32 {
        let f = eth(&build_udp_ip(
            addr(SERVER),
            addr(CLIENT),
            &data(id, 500),
            64,
        ));
        good.push(f.clone());
        let mut partial = f.clone();
        // CHECKSUM_PARTIAL leaves only the pseudo-header sum in the field.
        partial[14 + 20 + 6] = 0x12;
        partial[14 + 20 + 7] = 0x34;
        let meta = FrameMeta {
            csum_not_ready: true,
            gso_size: None,
        };
        lab.core
            .handle_frame(now, Direction::ToClient, &partial, meta);
        lab.collect();
        if id != 1 {
            rx.on_receive(id);
        }
    }
    let mut wire = Vec::new();
    rx.encode(20, &mut wire).unwrap();
    lab.client.send_eack(now, &wire).unwrap();
    lab.pump(now);
    assert_eq!(lab.injected, vec![good[1].clone()]);
    assert_eq!(lab.core.snapshot().checksums_filled, 4);
}

#[test]
fn quacks_stop_at_the_client_quota() {
    let now = Time::ZERO;
    let mut lab = Lab::new(robin_config());
    let mut cfg = ClientConfig::new(robin_config());
    cfg.quota_window = 4;
    lab.client = ClientSession::new(cfg);
    lab.establish(now);
    // The client hears nothing more from the proxy, so it never raises the quota: the proxy must
    // stop sending after the authorised number of messages and count the refusals.
    let mut sent = 0;
    for id in 0..200u32 {
        lab.base_from_client(now, &data(id, 60));
        lab.core.handle_timeout(now);
        lab.collect();
        sent += lab
            .out
            .drain(..)
            .filter(|a| matches!(a, Transmit::Sidekick { .. }))
            .count();
    }
    let snap = lab.core.snapshot();
    assert!(sent <= 4, "sent {sent} beyond a quota window of 4");
    assert_eq!(snap.robin.quacks, 100, "the engine asked every 2 packets");
    assert_eq!(snap.quacks_sent as usize, sent);
    assert_eq!(snap.messages_refused as usize, 100 - sent);
}

/// Robin at each identifier width the protocol negotiates (2, 4, 8 bytes; Sidekick (NSDI '24)
/// §3): the quACK's header names the width, its power sums are that wide, and subtracting it
/// from the sender's own quACK of the same width names exactly the datagram the proxy missed.
fn robin_at_width<T: quack::Identifier>(width: u32) {
    let now = Time::ZERO;
    let mut cfg = robin_config();
    let spec = cfg.identifier.as_mut().unwrap();
    spec.width = width;
    spec.offset = -(width as i32);
    let mut lab = Lab::new(cfg);
    lab.establish(now);
    let payloads: Vec<Vec<u8>> = (0..11u64)
        .map(|i| {
            let mut p = vec![0x41u8; 40];
            p.extend_from_slice(
                &(0x0123_4567_89ab_0000 + i * 0x1_0001).to_le_bytes()[..width as usize],
            );
            p
        })
        .collect();
    let mut sender = quack::PowerSumQuack::<T>::new(8);
    let mut ids = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let id: T = quack::IdSource::Offset(-(width as isize))
            .extract(p)
            .unwrap();
        sender.insert(id);
        ids.push(id);
        // Datagram 4 is lost before the proxy.
        if i != 4 {
            lab.base_from_client(now, p);
        }
    }
    lab.pump(now);
    let last = lab
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            ClientEvent::Quack { data, .. } => Some(data.clone()),
            _ => None,
        })
        .expect("a quACK");
    assert_eq!(quack::peek_width(&last).unwrap().bytes(), width as usize);
    assert_eq!(last.len(), quack::wire::encoded_len::<T>(8));
    let proxy = quack::PowerSumQuack::<T>::from_bytes(&last).unwrap();
    assert_eq!(proxy.count(), 10);
    sender -= &proxy;
    let missing: Vec<usize> = sender
        .decode_with_log(&ids)
        .unwrap()
        .missing_indices()
        .collect();
    assert_eq!(missing, vec![4]);
}

#[test]
fn robin_quacks_at_every_identifier_width() {
    robin_at_width::<u16>(2);
    robin_at_width::<u32>(4);
    robin_at_width::<u64>(8);
}

/// Packrat at each identifier width (2, 4, 8 bytes; Sidekick (NSDI '24) §3): the session is
/// granted at that width, the proxy caches the datagrams by their last `width` bytes, and the
/// client's eACK of that width brings back exactly the frames it missed; an eACK of another width
/// is refused with a Reset.
fn packrat_at_width(width: quack::Width) {
    let now = Time::ZERO;
    let w = width.bytes();
    let mut cfg = packrat_config();
    let spec = cfg.identifier.as_mut().unwrap();
    spec.width = w as u32;
    spec.offset = -(w as i32);
    let mut lab = Lab::new(cfg);
    lab.establish(now);
    let src = quack::IdSource::Offset(-(w as isize));
    let mut rx = eack::WidthReceiverEack::new(width, 160, eack::HashKey::DEFAULT);
    rx.reset(lab.client.epoch());
    let mut frames = Vec::new();
    for i in 0..16u64 {
        let mut p = vec![0x41u8; 600];
        p.extend_from_slice(&(0x0123_4567_89ab_0000 + i * 0x1_0001).to_le_bytes()[..w]);
        frames.push(lab.base_to_client(now, &p));
        if i != 3 && i != 7 {
            rx.on_datagram(&src, &p).unwrap();
        }
    }
    let mut wire = Vec::new();
    rx.encode(40, &mut wire).unwrap();
    assert_eq!(usize::from(wire[1]), w);
    lab.client.send_eack(now, &wire).unwrap();
    lab.pump(now);
    let mut got = lab.injected.clone();
    got.sort();
    let mut want = vec![frames[3].clone(), frames[7].clone()];
    want.sort();
    assert_eq!(got, want, "width {w}: the original frames");
    let snap = lab.core.snapshot();
    assert_eq!(
        (snap.packrat.retransmissions, snap.packrat.eacks_decoded),
        (2, 1)
    );
    // The same set at another width: refused (a Reset), nothing retransmitted.
    let other = if width == quack::Width::U32 {
        quack::Width::U64
    } else {
        quack::Width::U32
    };
    let mut wrong = eack::WidthReceiverEack::new(other, 160, eack::HashKey::DEFAULT);
    wrong.reset(lab.client.epoch());
    let mut wire = Vec::new();
    wrong.encode(40, &mut wire).unwrap();
    lab.injected.clear();
    lab.client.send_eack(now, &wire).unwrap();
    lab.pump(now);
    let snap = lab.core.snapshot();
    assert_eq!((snap.packrat.eacks_failed, snap.resets_sent), (1, 1));
    assert!(lab.injected.is_empty());
}

#[test]
fn packrat_at_every_identifier_width() {
    packrat_at_width(quack::Width::U16);
    packrat_at_width(quack::Width::U32);
    packrat_at_width(quack::Width::U64);
}

#[test]
fn identifier_widths_outside_the_policy_are_refused_at_negotiation() {
    // A proxy whose policy grants Packrat 4-byte identifiers only (`packrat_identifier_widths`)
    // refuses a Packrat session at 8 bytes.
    let now = Time::ZERO;
    let mut cfg = packrat_config();
    cfg.identifier.as_mut().unwrap().width = 8;
    let mut lab = Lab::new(cfg);
    let mut policy = ProxyPolicy::new(addr(PROXY));
    policy.packrat_identifier_widths = 1 << 4;
    lab.core = ProxyCore::new(
        CoreConfig {
            link: LinkType::Ethernet,
            ..CoreConfig::default()
        },
        ProtocolSessions::new(policy),
        (1, 2),
    );
    lab.client.start(now).unwrap();
    lab.pump(now);
    // The client hears the refusal (and can fall back); no session, no flow without engines.
    assert!(
        lab.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Fallback(_))),
        "{:?}",
        lab.events
    );
    assert!(
        !lab.events
            .iter()
            .any(|e| matches!(e, ClientEvent::Established { .. }))
    );
    assert_eq!(lab.core.flows().assisted_len(), 0);
}

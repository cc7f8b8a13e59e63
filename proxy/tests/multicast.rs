//! Packrat multicast through the sans-IO core (Packrat (CoNEXT '26) §6.1): two clients with real protocol
//! sessions subscribe to one multicast stream; the proxy caches the stream once and retransmits
//! to each client only what that client's eACK says it lacks, addressed to the client's MAC.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
use sidekick_proxy::Time;
use std::net::SocketAddr;

use common::{PROXY, SERVER, addr};
use eack::{HashKey, WidthReceiverEack};
use quack::{IdSource, Width};
use sidekick_protocol::messages::{IdentifierSpec, PackratConfig};
use sidekick_protocol::{
    ClientConfig, ClientEvent, ClientSession, Destination, ProxyPolicy, SessionConfig,
};
use sidekick_proxy::core::{CoreConfig, FrameMeta, ProxyCore, Transmit, Verdict};
use sidekick_proxy::engine::Direction;
use sidekick_proxy::metrics::RenderPrometheus as _;
use sidekick_proxy::packet::{LinkType, build_udp_ip, parse_frame};
use sidekick_proxy::session::ProtocolSessions;

const GROUP: &str = "239.1.2.3:5004";
const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03];
const AP_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];

struct Client {
    session: ClientSession,
    base: SocketAddr,
    sidekick: SocketAddr,
    mac: [u8; 6],
    /// Where the client reads its identifiers, and its eACK at its width.
    src: IdSource,
    rx: WidthReceiverEack,
}

fn frame(dst_mac: [u8; 6], src_mac: [u8; 6], ip: &[u8]) -> Vec<u8> {
    let mut f = dst_mac.to_vec();
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// The session at identifier width `width` (the datagram's last `width` bytes).
fn config_at(width: u32) -> SessionConfig {
    SessionConfig {
        robin: None,
        packrat: Some(PackratConfig {
            eack_interval_ms: 10,
            eack_interval_packets: 16,
            local_symbols: 40,
            cache_capacity_bytes: 64 * 1024,
            reorder_delay_ms: 0,
            multicast_group: PackratConfig::encode_multicast_group(addr(GROUP)),
        }),
        identifier: Some(IdentifierSpec {
            offset: -(width as i32),
            width,
            ..IdentifierSpec::quic_default()
        }),
    }
}

struct Lab {
    core: ProxyCore<ProtocolSessions>,
    clients: Vec<Client>,
    /// (destination MAC, destination address, payload) of injected multicast frames.
    retransmitted: Vec<([u8; 6], SocketAddr, Vec<u8>)>,
}

impl Lab {
    fn new(n: u8) -> Self {
        Self::with_widths(&vec![4; usize::from(n)])
    }

    /// One client per entry, each at that identifier width.
    fn with_widths(widths: &[u32]) -> Self {
        let core = ProxyCore::new(
            CoreConfig::default(),
            // 16-packet streams: the retransmission budget (10 % of a few kB) is tested on its
            // own (packrat::budget_tests); here it would hold back the second loss.
            ProtocolSessions::new(ProxyPolicy::new(addr(PROXY))).with_packrat_retx_budget(100),
            (1, 2),
        );
        let clients = widths
            .iter()
            .zip(0u8..)
            .map(|(&w, i)| Client {
                session: ClientSession::new(ClientConfig::new(config_at(w))),
                base: addr(&format!("10.0.0.{}:6000", 10 + i)),
                sidekick: addr(&format!("10.0.0.{}:6001", 10 + i)),
                mac: [0x02, 0, 0, 0, 1, i],
                src: IdSource::Offset(-(w as isize)),
                rx: WidthReceiverEack::new(
                    match w {
                        2 => Width::U16,
                        8 => Width::U64,
                        _ => Width::U32,
                    },
                    40,
                    HashKey::DEFAULT,
                ),
            })
            .collect();
        Self {
            core,
            clients,
            retransmitted: Vec::new(),
        }
    }

    fn pump(&mut self, now: Time) {
        for _ in 0..50 {
            let mut moved = false;
            for c in &mut self.clients {
                while let Some(t) = c.session.poll_transmit() {
                    moved = true;
                    match t.dest {
                        Destination::Base => {
                            let ip = build_udp_ip(c.base, addr(SERVER), &t.bytes, 64);
                            let f = frame(AP_MAC, c.mac, &ip);
                            let v = self.core.handle_frame(
                                now,
                                Direction::FromClient,
                                &f,
                                FrameMeta::default(),
                            );
                            assert_eq!(v, Verdict::Forward);
                        }
                        Destination::Sidekick(_) => {
                            self.core.handle_sidekick(now, c.sidekick, &t.bytes);
                        }
                    }
                }
            }
            let out: Vec<Transmit> = std::iter::from_fn(|| self.core.poll_transmit()).collect();
            for a in out {
                moved = true;
                match a {
                    Transmit::Sidekick { to, bytes } => {
                        let c = self.clients.iter_mut().find(|c| c.sidekick == to).unwrap();
                        let _ = c.session.handle_datagram(now, addr(PROXY), &bytes).unwrap();
                    }
                    Transmit::Inject { frame, .. } => {
                        let p = parse_frame(&frame, LinkType::Ethernet).unwrap();
                        let payload = p.payload(&frame).to_vec();
                        if let Some(c) = self.clients.iter_mut().find(|c| c.base == p.dst) {
                            // A discovery reply on the client's base path.
                            let _ = c.session.handle_base_datagram(now, &payload);
                        } else {
                            assert_eq!(p.src, addr(SERVER));
                            let mac: [u8; 6] = frame[..6].try_into().unwrap();
                            self.retransmitted.push((mac, p.dst, payload));
                        }
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn stream(&mut self, now: Time, id: u32, lost_by: &[usize]) -> Vec<u8> {
        // The last 8 bytes differ in every byte position from packet to packet, so that a
        // client reads a distinct identifier at any width.
        let mut payload = vec![0x40u8; 232];
        payload.extend_from_slice(
            &(u64::from(id) + 1)
                .wrapping_mul(0x0101_0101_0101_0101)
                .to_le_bytes(),
        );
        let ip = build_udp_ip(addr(SERVER), addr(GROUP), &payload, 64);
        let f = frame(GROUP_MAC, AP_MAC, &ip);
        let v = self
            .core
            .handle_frame(now, Direction::ToClient, &f, FrameMeta::default());
        assert_eq!(v, Verdict::Forward, "fail-open");
        for (i, c) in self.clients.iter_mut().enumerate() {
            if !lost_by.contains(&i) {
                c.rx.on_datagram(&c.src, &payload).unwrap();
            }
        }
        payload
    }

    fn send_eacks(&mut self, now: Time) {
        for c in &mut self.clients {
            let mut wire = Vec::new();
            c.rx.encode(40, &mut wire).unwrap();
            c.session.send_eack(now, &wire).unwrap();
        }
        self.pump(now);
    }
}

#[test]
fn one_shared_cache_retransmits_each_clients_own_losses_to_that_client() {
    let now = Time::ZERO;
    let mut lab = Lab::new(2);
    for c in &mut lab.clients {
        c.session.start(now).unwrap();
    }
    lab.pump(now);
    for c in &mut lab.clients {
        while let Some(ev) = c.session.poll_event() {
            if let ClientEvent::Established { .. } = ev {
                c.rx.reset(c.session.epoch());
            }
        }
        assert!(c.session.session_id().is_some(), "session established");
    }
    let snap = lab.core.snapshot();
    assert_eq!((snap.multicast_groups, snap.multicast_members), (1, 2));

    let mut sent = Vec::new();
    for id in 0..16u32 {
        let lost_by: &[usize] = match id {
            3 => &[0],
            5 | 9 => &[1],
            _ => &[],
        };
        sent.push(lab.stream(now, id, lost_by));
    }
    lab.send_eacks(now);

    let mut got = lab.retransmitted.clone();
    got.sort();
    let mac = |i: usize| lab.clients[i].mac;
    let mut want = vec![
        (mac(0), addr(GROUP), sent[3].clone()),
        (mac(1), addr(GROUP), sent[5].clone()),
        (mac(1), addr(GROUP), sent[9].clone()),
    ];
    want.sort();
    assert_eq!(
        got, want,
        "each loss goes to its client, the datagram unchanged"
    );

    let snap = lab.core.snapshot();
    assert_eq!(snap.packrat.retransmissions, 3);
    assert_eq!(snap.packrat.eacks_decoded, 2);
    // The stream is cached once, not once per client.
    assert_eq!(snap.packrat.cached, 16);
    assert!(snap.cache_bytes >= 16 * 240);
    // Three retransmissions outstanding: 16 bytes each plus 8 per client.
    assert_eq!(snap.multicast_virtual_cache_bytes, 2 * 8 + 3 * 16);
    let prom = snap.render_prometheus().unwrap();
    assert!(prom.contains("sidekick_multicast_members 2"), "{prom}");

    // Client 0 leaves; the group stays for client 1, then goes with it.
    lab.clients[0].session.close(now, 0);
    lab.pump(now);
    assert_eq!(lab.core.snapshot().multicast_members, 1);
    lab.clients[1].session.close(now, 0);
    lab.pump(now);
    let snap = lab.core.snapshot();
    assert_eq!((snap.multicast_groups, snap.multicast_members), (0, 0));
    assert_eq!(snap.packrat.retransmissions, 3, "retired counters are kept");
}

#[test]
fn a_unicast_flow_to_the_same_server_is_not_the_group() {
    let now = Time::ZERO;
    let mut lab = Lab::new(1);
    lab.clients[0].session.start(now).unwrap();
    lab.pump(now);
    // Packets to the client's own address are not the group's stream: nothing is cached.
    let ip = build_udp_ip(addr(SERVER), lab.clients[0].base, &[0x40; 100], 64);
    let f = frame(lab.clients[0].mac, AP_MAC, &ip);
    lab.core
        .handle_frame(now, Direction::ToClient, &f, FrameMeta::default());
    assert_eq!(lab.core.snapshot().packrat.cached, 0);
}

#[test]
fn a_group_takes_the_width_of_its_first_client_and_refuses_another() {
    let now = Time::ZERO;
    // Client 0 opens the group at 2-byte identifiers, client 1 asks for 8.
    let mut lab = Lab::with_widths(&[2, 8]);
    for i in 0..lab.clients.len() {
        lab.clients[i].session.start(now).unwrap();
        lab.pump(now);
    }
    for c in &mut lab.clients {
        while let Some(ev) = c.session.poll_event() {
            if let ClientEvent::Established { .. } = ev {
                c.rx.reset(c.session.epoch());
            }
        }
    }
    let snap = lab.core.snapshot();
    assert_eq!((snap.multicast_groups, snap.multicast_members), (1, 1));
    assert_eq!(snap.multicast_refused, 1);
    let mut sent = Vec::new();
    for id in 0..16u32 {
        let lost_by: &[usize] = if id == 6 { &[0] } else { &[] };
        sent.push(lab.stream(now, id, lost_by));
    }
    lab.send_eacks(now);
    // The 2-byte member's loss is repaired from the shared cache.
    let mac0 = lab.clients[0].mac;
    assert_eq!(
        lab.retransmitted,
        vec![(mac0, addr(GROUP), sent[6].clone())]
    );
    assert_eq!(lab.core.snapshot().packrat.eacks_decoded, 1);
}

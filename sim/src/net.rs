//! The simulated network: the lab's topology (server — wan — ap — lan0 — client) with the lab's
//! own link model ([`sidekick_lab::link::LinkDirection`], the sans-IO core of its userspace link
//! element: loss at enqueue, tail-drop queue, serialisation at the rate, propagation delay), and
//! Ethernet frames built with the proxy's packet builders, so the proxy core parses exactly what
//! it would capture on the ap.

use sidekick_wire::checksum::internet_checksum;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use sidekick_lab::link::LinkDirection;
use sidekick_lab::spec::LinkSpec;
use sidekick_proxy::packet::{LinkType, build_udp_ipv4, parse_frame};

/// The server's address (the lab's `srv` namespace, `Topology::server_addr`).
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
/// The ap's address on its client-facing interface `lan0`.
pub const AP_LAN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
/// The client's address (`cli0`).
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// The server's port (the lab's).
pub const SERVER_PORT: u16 = 4433;
/// The client's base-connection port (ephemeral in the lab; fixed here for reproducibility).
pub const CLIENT_PORT: u16 = 40_000;
/// The client's sidekick socket port.
pub const CLIENT_SIDEKICK_PORT: u16 = 40_001;

/// The largest frame an interface sends (MTU 1500 plus the Ethernet header, as on the lab's
/// veths); larger datagrams fail to send like `EMSGSIZE`.
pub const MAX_FRAME: usize = 1514;

/// Ethernet addresses of the interfaces (locally administered, fixed).
pub mod mac {
    /// The client's `eth0`.
    pub const CLIENT: [u8; 6] = [0x02, 0, 0, 0, 5, 1];
    /// The ap's `lan0`.
    pub const AP_LAN: [u8; 6] = [0x02, 0, 0, 0, 2, 2];
    /// The ap's `wan0`.
    pub const AP_WAN: [u8; 6] = [0x02, 0, 0, 0, 2, 1];
    /// The server's `eth0`.
    pub const SERVER: [u8; 6] = [0x02, 0, 0, 0, 1, 1];
}

/// The server's socket address.
pub fn server_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(SERVER_IP, SERVER_PORT))
}

/// The client's base socket address.
pub fn client_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(CLIENT_IP, CLIENT_PORT))
}

/// The client's sidekick socket address.
pub fn client_sidekick_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(CLIENT_IP, CLIENT_SIDEKICK_PORT))
}

/// An Ethernet/IPv4/UDP frame from `src` to `dst` carrying `payload`.
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: SocketAddr,
    dst: SocketAddr,
    payload: &[u8],
) -> Vec<u8> {
    let ip = build_udp_ipv4(src, dst, payload, 64);
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f
}

/// Rewrites a forwarded frame's Ethernet addresses (the ap routes between its interfaces).
pub fn rewrite_macs(frame: &mut [u8], src_mac: [u8; 6], dst_mac: [u8; 6]) {
    if frame.len() >= 12 {
        frame[..6].copy_from_slice(&dst_mac);
        frame[6..12].copy_from_slice(&src_mac);
    }
}

/// The UDP addresses and payload of a frame, if it is one.
pub fn udp_of(frame: &[u8]) -> Option<(SocketAddr, SocketAddr, &[u8])> {
    let u = parse_frame(frame, LinkType::Ethernet).ok()?;
    Some((u.src, u.dst, u.payload(frame)))
}

/// The kernel's answer to an ICMP echo request frame addressed to `own` (PEMI's calibration
/// probes): the echo reply, Ethernet and IP addresses swapped; `None` for any other frame.
pub fn icmp_echo_reply(frame: &[u8], own: Ipv4Addr) -> Option<Vec<u8>> {
    let ip = frame.get(14..)?;
    let hdr = ip.get(..20)?;
    let ihl = usize::from(hdr[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
    if frame.get(12..14)? != [0x08, 0x00]
        || hdr[0] >> 4 != 4
        || ihl < 20
        || hdr[9] != 1
        || hdr[16..20] != own.octets()
        || total > ip.len()
        || total < ihl + 8
        || ip[ihl] != 8
    {
        return None;
    }
    let mut r = frame[..14 + total].to_vec();
    r.copy_within(0..6, 6);
    r[..6].copy_from_slice(&frame[6..12]);
    let (src, dst) = (14 + 12, 14 + 16);
    r[src..src + 4].copy_from_slice(&hdr[16..20]);
    r[dst..dst + 4].copy_from_slice(&hdr[12..16]);
    r[14 + 10..14 + 12].fill(0);
    let c = internet_checksum(&r[14..14 + ihl]);
    r[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
    let icmp = 14 + ihl;
    r[icmp] = 0;
    r[icmp + 2..icmp + 4].fill(0);
    let c = internet_checksum(&r[icmp..14 + total]);
    r[icmp + 2..icmp + 4].copy_from_slice(&c.to_be_bytes());
    Some(r)
}

/// Packet and byte counters of one interface, as `ip -s link` reports them (frame bytes without
/// the FCS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl IfCounters {
    /// Counts a sent frame.
    pub fn tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Counts a received frame.
    pub fn rx(&mut self, len: usize) {
        self.rx_packets += 1;
        self.rx_bytes += len as u64;
    }
}

/// The four link directions of the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// client → ap over lan0.
    LanUp = 0,
    /// ap → client over lan0.
    LanDown = 1,
    /// ap → server over the wan.
    WanUp = 2,
    /// server → ap over the wan.
    WanDown = 3,
}

impl Hop {
    /// All hops, in index order.
    pub const ALL: [Hop; 4] = [Hop::LanUp, Hop::LanDown, Hop::WanUp, Hop::WanDown];
}

/// The links of one trial: a lab [`LinkDirection`] per hop.
#[derive(Debug)]
pub struct Links {
    dirs: [LinkDirection; 4],
}

impl Links {
    /// Links with the scenario's specs; `seed` seeds each direction's loss RNG (the same seed for
    /// every variant of a trial, as the lab does, so variants meet the same loss draws).
    pub fn new(wan: LinkSpec, lan: LinkSpec, seed: u64) -> Self {
        let s = |i: u64| seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i);
        Self {
            dirs: [
                LinkDirection::new(lan, s(1)),
                LinkDirection::new(lan, s(2)),
                LinkDirection::new(wan, s(3)),
                LinkDirection::new(wan, s(4)),
            ],
        }
    }

    /// The direction of `hop`.
    pub fn hop(&mut self, hop: Hop) -> &mut LinkDirection {
        &mut self.dirs[hop as usize]
    }

    /// When `hop` next delivers a frame.
    pub fn next_due(&self, hop: Hop) -> Option<Duration> {
        self.dirs[hop as usize].next_due()
    }

    /// The lab's element metrics (`runner::add_element_metrics`): per link (`wan`, `lan0`) and
    /// direction (`down` towards the client, `up` towards the server).
    pub fn metrics(&self, m: &mut BTreeMap<String, f64>) {
        for (link, down, up) in [
            ("wan", Hop::WanDown, Hop::WanUp),
            ("lan0", Hop::LanDown, Hop::LanUp),
        ] {
            for (name, hop) in [("down", down), ("up", up)] {
                self.dirs[hop as usize]
                    .counters()
                    .add_metrics(m, link, name);
            }
            // Virtual time delivers every frame exactly when due.
            m.insert(format!("{link}_late_p99_us"), 0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_back() {
        let f = udp_frame(
            mac::CLIENT,
            mac::AP_LAN,
            client_addr(),
            server_addr(),
            b"hello",
        );
        assert_eq!(f.len(), 14 + 28 + 5);
        let (s, d, p) = udp_of(&f).unwrap();
        assert_eq!((s, d, p), (client_addr(), server_addr(), &b"hello"[..]));
        let mut g = f.clone();
        rewrite_macs(&mut g, mac::AP_WAN, mac::SERVER);
        assert_eq!(&g[..6], &mac::SERVER);
        assert_eq!(udp_of(&g).unwrap().2, b"hello");
    }

    #[test]
    fn echo_requests_are_answered() {
        // An echo request from the server to the client, as PEMI's probes are built.
        let mut f = vec![0u8; 14];
        f[..6].copy_from_slice(&mac::CLIENT);
        f[6..12].copy_from_slice(&mac::SERVER);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&36u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 1;
        ip[12..16].copy_from_slice(&SERVER_IP.octets());
        ip[16..20].copy_from_slice(&CLIENT_IP.octets());
        let c = internet_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut icmp = [
            8u8, 0, 0, 0, 0, 7, 0, 1, b'S', b'K', b'P', b'E', b'M', b'I', b'0', b'1',
        ];
        let c = internet_checksum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&icmp);
        assert!(icmp_echo_reply(&f, SERVER_IP).is_none(), "not ours");
        let r = icmp_echo_reply(&f, CLIENT_IP).unwrap();
        assert_eq!(&r[..6], &mac::SERVER);
        assert_eq!(&r[26..30], &CLIENT_IP.octets());
        assert_eq!(r[34], 0, "echo reply");
        assert_eq!(internet_checksum(&r[14..34]), 0);
        assert_eq!(internet_checksum(&r[34..]), 0);
        assert_eq!(&r[42..], b"SKPEMI01");
        assert!(
            icmp_echo_reply(&r, SERVER_IP).is_none(),
            "a reply is not answered"
        );
    }

    #[test]
    fn links_follow_the_lab_model() {
        let lan = LinkSpec {
            delay: Duration::from_millis(1),
            rate_bps: 100_000_000,
            ..LinkSpec::default()
        };
        let mut l = Links::new(LinkSpec::default(), lan, 7);
        l.hop(Hop::LanUp).offer(Duration::ZERO, vec![0; 1250]);
        // 1250 B at 100 Mbit/s: 100 us, then 1 ms.
        assert_eq!(l.next_due(Hop::LanUp), Some(Duration::from_micros(1100)));
        let mut m = BTreeMap::new();
        l.metrics(&mut m);
        assert_eq!(m["lan0_up_offered"], 1.0);
        assert_eq!(m["wan_down_offered"], 0.0);
    }
}

//! Bounds-checked parsing of captured frames: Ethernet (with up to two VLAN tags), IPv4, IPv6 (with
//! the common extension headers) and UDP. QUIC headers and checksums are `sidekick-wire`'s, shared
//! with the SDK and the lab.
//!
//! Everything here reads wire input: every access is bounds-checked and every failure is a typed
//! [`ParseError`]; nothing panics. The parser never modifies the frame (fail-open: the proxy does
//! not alter base packets); [`fill_udp_checksum`] works on a *copy* that the proxy caches or
//! injects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use sidekick_wire::checksum::{Checksum, internet_checksum};
use sidekick_wire::quic::LongHeader;

/// Link-layer framing of captured buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// Ethernet II (optionally 802.1Q / 802.1ad tagged).
    Ethernet,
    /// A bare IPv4 or IPv6 packet (raw IP sockets, tun devices, tests).
    RawIp,
}

/// Why a frame could not be parsed as UDP over IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The buffer ended before a header did.
    #[error("truncated {0} header")]
    Truncated(&'static str),
    /// An EtherType other than IPv4/IPv6 (ARP, LLDP, ...).
    #[error("not IP (ethertype {0:#06x})")]
    NotIp(u16),
    /// A malformed IP header (bad version, header length or total length).
    #[error("malformed IP header")]
    BadIp,
    /// IP payload is not UDP (TCP, ICMP, ...).
    #[error("not UDP (protocol {0})")]
    NotUdp(u8),
    /// A non-initial IP fragment or a fragmented datagram: no usable UDP payload.
    #[error("fragmented IP datagram")]
    Fragment,
    /// The UDP length field disagrees with the IP payload.
    #[error("malformed UDP header")]
    BadUdp,
}

/// A UDP datagram located inside a captured frame. Offsets index the frame it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket {
    /// Offset of the IP header in the frame.
    pub l3_offset: usize,
    /// Offset of the UDP header in the frame.
    pub l4_offset: usize,
    /// Offset of the UDP payload in the frame.
    pub payload_offset: usize,
    /// Length of the UDP payload in bytes (from the UDP length field, clipped to the frame).
    pub payload_len: usize,
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port.
    pub dst: SocketAddr,
    /// The UDP checksum field as found (0 means "none" for IPv4).
    pub checksum: u16,
}

impl UdpPacket {
    /// The UDP payload within `frame` (the frame this packet was parsed from).
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        frame
            .get(self.payload_offset..self.payload_offset + self.payload_len)
            .unwrap_or(&[])
    }

    /// Total length of the IP packet (IP header + UDP header + payload).
    pub fn ip_len(&self) -> usize {
        self.payload_offset + self.payload_len - self.l3_offset
    }
}

fn be16(b: &[u8], at: usize, what: &'static str) -> Result<u16, ParseError> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or(ParseError::Truncated(what))
}

/// Parse a captured frame down to its UDP payload.
///
/// ```
/// use sidekick_proxy_core::packet::{build_udp_ipv4, parse_frame, LinkType};
/// let frame = build_udp_ipv4(
///     "10.0.0.1:4433".parse().unwrap(), "10.0.0.2:5555".parse().unwrap(), b"hello", 64);
/// let p = parse_frame(&frame, LinkType::RawIp).unwrap();
/// assert_eq!(p.payload(&frame), b"hello");
/// assert_eq!(p.src.port(), 4433);
/// ```
pub fn parse_frame(frame: &[u8], link: LinkType) -> Result<UdpPacket, ParseError> {
    let l3 = l3_offset(frame, link)?;
    let first = *frame.get(l3).ok_or(ParseError::Truncated("ip"))?;
    match first >> 4 {
        4 => parse_ipv4(frame, l3),
        6 => parse_ipv6(frame, l3),
        _ => Err(ParseError::BadIp),
    }
}

/// Where the IP header starts: after the Ethernet header and up to two VLAN tags, or at 0.
pub(crate) fn l3_offset(frame: &[u8], link: LinkType) -> Result<usize, ParseError> {
    Ok(match link {
        LinkType::RawIp => 0,
        LinkType::Ethernet => {
            let mut off = 12;
            let mut ethertype = be16(frame, off, "ethernet")?;
            // Up to two VLAN tags (802.1Q 0x8100, 802.1ad 0x88a8).
            for _ in 0..2 {
                if ethertype == 0x8100 || ethertype == 0x88a8 {
                    off += 4;
                    ethertype = be16(frame, off, "vlan")?;
                }
            }
            match ethertype {
                0x0800 | 0x86dd => off + 2,
                other => return Err(ParseError::NotIp(other)),
            }
        }
    })
}

fn parse_ipv4(frame: &[u8], l3: usize) -> Result<UdpPacket, ParseError> {
    let hdr = frame
        .get(l3..l3 + 20)
        .ok_or(ParseError::Truncated("ipv4"))?;
    let ihl = usize::from(hdr[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(ParseError::BadIp);
    }
    let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
    let frag = u16::from_be_bytes([hdr[6], hdr[7]]);
    // MF set or a non-zero offset: not a whole datagram.
    if frag & 0x3fff != 0 {
        return Err(ParseError::Fragment);
    }
    if hdr[9] != 17 {
        return Err(ParseError::NotUdp(hdr[9]));
    }
    let src = Ipv4Addr::new(hdr[12], hdr[13], hdr[14], hdr[15]);
    let dst = Ipv4Addr::new(hdr[16], hdr[17], hdr[18], hdr[19]);
    if frame.len() < l3 + ihl {
        return Err(ParseError::Truncated("ipv4 options"));
    }
    // GRO/TSO super-frames may carry total length 0 (>64 KiB) — then the frame length rules.
    let end = if total == 0 {
        frame.len()
    } else {
        if total < ihl {
            return Err(ParseError::BadIp);
        }
        (l3 + total).min(frame.len())
    };
    parse_udp(frame, l3, l3 + ihl, end, |sp, dp| {
        (
            SocketAddr::V4(SocketAddrV4::new(src, sp)),
            SocketAddr::V4(SocketAddrV4::new(dst, dp)),
        )
    })
}

fn parse_ipv6(frame: &[u8], l3: usize) -> Result<UdpPacket, ParseError> {
    let hdr = frame
        .get(l3..l3 + 40)
        .ok_or(ParseError::Truncated("ipv6"))?;
    let payload_len = usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
    let mut next = hdr[6];
    let mut s = [0u8; 16];
    s.copy_from_slice(&hdr[8..24]);
    let src = Ipv6Addr::from(s);
    s.copy_from_slice(&hdr[24..40]);
    let dst = Ipv6Addr::from(s);
    let end = if payload_len == 0 {
        // Jumbogram or GRO super-frame: the frame length rules.
        frame.len()
    } else {
        (l3 + 40 + payload_len).min(frame.len())
    };
    let mut off = l3 + 40;
    // Walk at most 8 extension headers (bounded work per packet).
    for _ in 0..8 {
        match next {
            17 => {
                return parse_udp(frame, l3, off, end, |sp, dp| {
                    (
                        SocketAddr::V6(SocketAddrV6::new(src, sp, 0, 0)),
                        SocketAddr::V6(SocketAddrV6::new(dst, dp, 0, 0)),
                    )
                });
            }
            // Hop-by-hop, routing, destination options: (next, len in 8-octet units - 1).
            0 | 43 | 60 => {
                let h = frame
                    .get(off..off + 2)
                    .ok_or(ParseError::Truncated("ipv6 ext"))?;
                next = h[0];
                off += (usize::from(h[1]) + 1) * 8;
            }
            44 => {
                let h = frame
                    .get(off..off + 8)
                    .ok_or(ParseError::Truncated("ipv6 frag"))?;
                let frag = u16::from_be_bytes([h[2], h[3]]);
                if frag & 0xfff9 != 0 {
                    return Err(ParseError::Fragment);
                }
                next = h[0];
                off += 8;
            }
            other => return Err(ParseError::NotUdp(other)),
        }
    }
    Err(ParseError::BadIp)
}

fn parse_udp(
    frame: &[u8],
    l3: usize,
    l4: usize,
    ip_end: usize,
    // The addresses from the ports: each IP version builds its own variant directly (no `IpAddr`
    // to match on per packet).
    addrs: impl FnOnce(u16, u16) -> (SocketAddr, SocketAddr),
) -> Result<UdpPacket, ParseError> {
    let h = frame.get(l4..l4 + 8).ok_or(ParseError::Truncated("udp"))?;
    if ip_end < l4 + 8 {
        return Err(ParseError::BadUdp);
    }
    let sport = u16::from_be_bytes([h[0], h[1]]);
    let dport = u16::from_be_bytes([h[2], h[3]]);
    let ulen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let checksum = u16::from_be_bytes([h[6], h[7]]);
    let avail = ip_end - l4;
    // A GSO super-frame may carry a UDP length that no longer matches; trust the IP extent then.
    let ulen = if ulen < 8 || ulen > avail {
        if ulen == 0 || avail > 65535 {
            avail
        } else {
            return Err(ParseError::BadUdp);
        }
    } else {
        ulen
    };
    let (src, dst) = addrs(sport, dport);
    Ok(UdpPacket {
        l3_offset: l3,
        l4_offset: l4,
        payload_offset: l4 + 8,
        payload_len: ulen - 8,
        src,
        dst,
        checksum,
    })
}

/// Compute the UDP checksum (RFC 768 / RFC 8200 §8.1) of `pkt` inside `frame`, with the checksum
/// field treated as zero. Returns the value to store (0 is sent as 0xffff).
pub fn udp_checksum(frame: &[u8], pkt: &UdpPacket) -> u16 {
    let udp_len = pkt.payload_len + 8;
    let mut acc = Checksum::new();
    match (pkt.src.ip(), pkt.dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            acc.add_bytes(&s.octets());
            acc.add_bytes(&d.octets());
        }
        (s, d) => {
            let s6 = match s {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            let d6 = match d {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            };
            acc.add_bytes(&s6.octets());
            acc.add_bytes(&d6.octets());
        }
    }
    acc.add(17);
    acc.add(udp_len as u32);
    let l4 = pkt.l4_offset;
    if let Some(h) = frame.get(l4..l4 + 6) {
        acc.add_bytes(h);
    }
    acc.add_bytes(pkt.payload(frame));
    let c = acc.finish();
    if c == 0 { 0xffff } else { c }
}

/// Write the correct UDP checksum into `frame` (a private copy). Used for frames the kernel handed
/// over with `TP_STATUS_CSUMNOTREADY` (partial checksum, CHECKSUM_PARTIAL) before the copy is cached
/// or injected: re-sent as is, such a frame would be dropped as corrupt by the receiver.
pub fn fill_udp_checksum(frame: &mut [u8], pkt: &UdpPacket) {
    let c = udp_checksum(frame, pkt);
    if let Some(f) = frame.get_mut(pkt.l4_offset + 6..pkt.l4_offset + 8) {
        f.copy_from_slice(&c.to_be_bytes());
    }
}

/// Verify the UDP checksum of a parsed packet (a zero IPv4 checksum means "not computed").
pub fn udp_checksum_ok(frame: &[u8], pkt: &UdpPacket) -> bool {
    if pkt.checksum == 0 && pkt.src.is_ipv4() {
        return true;
    }
    udp_checksum(frame, pkt) == pkt.checksum
}

/// The ones'-complement checksum of an IPv4 header (or of an ICMP message).
pub(crate) fn ipv4_header_checksum(h: &[u8]) -> u16 {
    internet_checksum(h)
}

/// Build a bare IP/UDP packet (IPv4 or IPv6 by the addresses' family; mixed families map the IPv4
/// one into IPv6) with a correct checksum. Used for discovery replies sent "from the peer".
pub fn build_udp_ip(src: SocketAddr, dst: SocketAddr, payload: &[u8], ttl: u8) -> Vec<u8> {
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => build_udp_ipv4(src, dst, payload, ttl),
        _ => build_udp_ipv6(src, dst, payload, ttl),
    }
}

/// Build an IPv4/UDP packet. Payloads longer than 65507 bytes are truncated.
pub fn build_udp_ipv4(src: SocketAddr, dst: SocketAddr, payload: &[u8], ttl: u8) -> Vec<u8> {
    let payload = &payload[..payload.len().min(65507)];
    let total = 28 + payload.len();
    let mut p = Vec::with_capacity(total);
    let (IpAddr::V4(s), IpAddr::V4(d)) = (src.ip(), dst.ip()) else {
        return build_udp_ipv6(src, dst, payload, ttl);
    };
    p.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, ttl, 17, 0, 0]);
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&s.octets());
    p.extend_from_slice(&d.octets());
    let hc = ipv4_header_checksum(&p[..20]);
    p[10..12].copy_from_slice(&hc.to_be_bytes());
    push_udp(&mut p, src.port(), dst.port(), payload);
    finish_checksum(&mut p);
    p
}

fn build_udp_ipv6(src: SocketAddr, dst: SocketAddr, payload: &[u8], ttl: u8) -> Vec<u8> {
    let payload = &payload[..payload.len().min(65527)];
    let to6 = |a: IpAddr| match a {
        IpAddr::V6(x) => x,
        IpAddr::V4(x) => x.to_ipv6_mapped(),
    };
    let mut p = Vec::with_capacity(48 + payload.len());
    p.extend_from_slice(&[0x60, 0, 0, 0]);
    p.extend_from_slice(&((payload.len() + 8) as u16).to_be_bytes());
    p.push(17);
    p.push(ttl);
    p.extend_from_slice(&to6(src.ip()).octets());
    p.extend_from_slice(&to6(dst.ip()).octets());
    push_udp(&mut p, src.port(), dst.port(), payload);
    finish_checksum(&mut p);
    p
}

fn push_udp(p: &mut Vec<u8>, sport: u16, dport: u16, payload: &[u8]) {
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&((payload.len() + 8) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
}

fn finish_checksum(p: &mut [u8]) {
    if let Ok(pkt) = parse_frame(p, LinkType::RawIp) {
        fill_udp_checksum(p, &pkt);
    }
}

/// Build the reply to a frame captured on an Ethernet or raw-IP link: swap the MAC addresses (if
/// Ethernet, keeping VLAN tags) and send `payload` from `pkt.dst` to `pkt.src`. This is how the
/// proxy answers a discovery request "from the peer's address" (Sidekick (NSDI '24) §4.1).
pub fn build_reply_frame(frame: &[u8], link: LinkType, pkt: &UdpPacket, payload: &[u8]) -> Vec<u8> {
    let ip = build_udp_ip(pkt.dst, pkt.src, payload, 64);
    match link {
        LinkType::RawIp => ip,
        LinkType::Ethernet => {
            let mut out = Vec::with_capacity(pkt.l3_offset + ip.len());
            let l2 = frame.get(..pkt.l3_offset).unwrap_or(&[]);
            if l2.len() >= 14 {
                out.extend_from_slice(&l2[6..12]);
                out.extend_from_slice(&l2[0..6]);
                out.extend_from_slice(&l2[12..l2.len() - 2]);
            }
            let ethertype: u16 = if ip.first().is_some_and(|b| b >> 4 == 6) {
                0x86dd
            } else {
                0x0800
            };
            out.extend_from_slice(&ethertype.to_be_bytes());
            out.extend_from_slice(&ip);
            out
        }
    }
}

/// Split a UDP GSO/GRO super-frame into its wire segments' payload ranges (offsets into the frame).
/// `gso_size` is the per-segment UDP payload size (from the virtio-net header when the backend
/// has it); every segment except possibly the last has exactly that size. With no `gso_size`, or
/// when the payload fits in one segment, returns the whole payload.
pub fn gso_segments(
    pkt: &UdpPacket,
    gso_size: Option<u16>,
) -> impl Iterator<Item = (usize, usize)> {
    let seg = match gso_size {
        Some(s) if s > 0 && usize::from(s) < pkt.payload_len => usize::from(s),
        _ => pkt.payload_len.max(1),
    };
    let start = pkt.payload_offset;
    let end = pkt.payload_offset + pkt.payload_len;
    (start..end.max(start + 1))
        .step_by(seg)
        .map(move |o| (o, (o + seg).min(end)))
        .filter(move |(a, b)| b > a || pkt.payload_len == 0)
}

/// Build the frame of one segment of a GSO/GRO super-frame: the super-frame's link and IP headers
/// (lengths and IPv4 header checksum patched), its UDP ports, `payload`, and a correct UDP
/// checksum — what the kernel would have put on the wire for that segment.
pub fn segment_frame(frame: &[u8], pkt: &UdpPacket, payload: &[u8]) -> Vec<u8> {
    let hdrs = frame.get(..pkt.l4_offset + 4).unwrap_or(&[]);
    let mut out = Vec::with_capacity(pkt.l4_offset + 8 + payload.len());
    out.extend_from_slice(hdrs);
    let udp_len = (payload.len() + 8) as u16;
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    let l3 = pkt.l3_offset;
    let ip_len = out.len() - l3;
    match out.get(l3).map(|b| b >> 4) {
        Some(4) if out.len() >= l3 + 20 => {
            out[l3 + 2..l3 + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            out[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
            let ihl = usize::from(out[l3] & 0x0f) * 4;
            if let Some(h) = out.get(l3..l3 + ihl) {
                let c = ipv4_header_checksum(h);
                out[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
        }
        Some(6) if out.len() >= l3 + 40 => {
            let pl = (ip_len - 40) as u16;
            out[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
        }
        _ => {}
    }
    let seg = UdpPacket {
        payload_offset: pkt.l4_offset + 8,
        payload_len: payload.len(),
        ..*pkt
    };
    fill_udp_checksum(&mut out, &seg);
    out
}

/// Fuzz body: parse arbitrary bytes as both link types and as a QUIC header; must never panic.
/// Called by `fuzz/fuzz_targets/parse_frame.rs` and by the property tests.
pub fn fuzz_parse(data: &[u8]) {
    for link in [LinkType::Ethernet, LinkType::RawIp] {
        if let Ok(p) = parse_frame(data, link) {
            let payload = p.payload(data);
            assert!(p.payload_offset + p.payload_len <= data.len());
            let _ = LongHeader::parse(payload);
            let _ = udp_checksum_ok(data, &p);
            for (a, b) in gso_segments(&p, Some(1200)) {
                assert!(a <= b && b <= data.len());
            }
            let _ = build_reply_frame(data, link, &p, payload);
        }
    }
    let _ = LongHeader::parse(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn eth(ip: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(if ip[0] >> 4 == 6 {
            &[0x86, 0xdd]
        } else {
            &[0x08, 0x00]
        });
        f.extend_from_slice(ip);
        f
    }

    #[test]
    fn ipv4_roundtrip_and_checksum() {
        let ip = build_udp_ipv4(
            "192.0.2.1:1000".parse().unwrap(),
            "198.51.100.7:443".parse().unwrap(),
            b"abcdefg",
            64,
        );
        let f = eth(&ip);
        let p = parse_frame(&f, LinkType::Ethernet).unwrap();
        assert_eq!(p.l3_offset, 14);
        assert_eq!(p.payload(&f), b"abcdefg");
        assert_eq!(p.dst, "198.51.100.7:443".parse().unwrap());
        assert!(udp_checksum_ok(&f, &p));
        // Corrupt the checksum (as CHECKSUM_PARTIAL leaves it) and repair it.
        let mut g = f.clone();
        g[p.l4_offset + 6] ^= 0x55;
        let q = parse_frame(&g, LinkType::Ethernet).unwrap();
        assert!(!udp_checksum_ok(&g, &q));
        fill_udp_checksum(&mut g, &q);
        assert_eq!(g, f);
    }

    #[test]
    fn ipv6_roundtrip_and_checksum() {
        let ip = build_udp_ip(
            "[2001:db8::1]:1000".parse().unwrap(),
            "[2001:db8::2]:443".parse().unwrap(),
            b"xyz",
            64,
        );
        let f = eth(&ip);
        let p = parse_frame(&f, LinkType::Ethernet).unwrap();
        assert_eq!(p.payload(&f), b"xyz");
        assert!(udp_checksum_ok(&f, &p));
        assert_eq!(p.src.port(), 1000);
    }

    #[test]
    fn vlan_and_non_ip() {
        let ip = build_udp_ipv4(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            b"p",
            64,
        );
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x08, 0x00]);
        f.extend_from_slice(&ip);
        let p = parse_frame(&f, LinkType::Ethernet).unwrap();
        assert_eq!(p.l3_offset, 18);
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 0]);
        assert_eq!(
            parse_frame(&arp, LinkType::Ethernet),
            Err(ParseError::NotIp(0x0806))
        );
    }

    #[test]
    fn fragments_and_tcp_rejected() {
        let mut ip = build_udp_ipv4(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            b"p",
            64,
        );
        ip[6] = 0x20; // MF
        assert_eq!(parse_frame(&ip, LinkType::RawIp), Err(ParseError::Fragment));
        ip[6] = 0x40;
        ip[9] = 6;
        assert_eq!(
            parse_frame(&ip, LinkType::RawIp),
            Err(ParseError::NotUdp(6))
        );
    }

    #[test]
    fn reply_swaps_addresses() {
        let ip = build_udp_ipv4(
            "10.0.0.1:1111".parse().unwrap(),
            "10.0.0.2:2222".parse().unwrap(),
            b"req",
            64,
        );
        let f = eth(&ip);
        let p = parse_frame(&f, LinkType::Ethernet).unwrap();
        let r = build_reply_frame(&f, LinkType::Ethernet, &p, b"reply");
        assert_eq!(&r[0..6], &f[6..12]);
        assert_eq!(&r[6..12], &f[0..6]);
        let q = parse_frame(&r, LinkType::Ethernet).unwrap();
        assert_eq!(q.src, p.dst);
        assert_eq!(q.dst, p.src);
        assert_eq!(q.payload(&r), b"reply");
        assert!(udp_checksum_ok(&r, &q));
    }

    #[test]
    fn gso_split() {
        let payload = vec![7u8; 3000];
        let ip = build_udp_ipv4(
            "10.0.0.1:1".parse().unwrap(),
            "10.0.0.2:2".parse().unwrap(),
            &payload,
            64,
        );
        let p = parse_frame(&ip, LinkType::RawIp).unwrap();
        let segs: Vec<_> = gso_segments(&p, Some(1200)).collect();
        assert_eq!(segs, vec![(28, 1228), (1228, 2428), (2428, 3028)]);
        assert_eq!(gso_segments(&p, None).count(), 1);
        let (a, b) = segs[1];
        let seg = segment_frame(&ip, &p, &ip[a..b]);
        let q = parse_frame(&seg, LinkType::RawIp).unwrap();
        assert_eq!(q.payload_len, 1200);
        assert_eq!(q.ip_len(), seg.len());
        assert!(udp_checksum_ok(&seg, &q));
        assert_eq!(ipv4_header_checksum(&seg[..20]), 0);
    }

    proptest! {
        #[test]
        fn fuzz_body_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_parse(&data);
        }

        #[test]
        fn truncations_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..64), cut in 0usize..120) {
            let ip = build_udp_ipv4("10.1.1.1:5".parse().unwrap(), "10.2.2.2:6".parse().unwrap(), &payload, 9);
            let f = eth(&ip);
            let cut = cut.min(f.len());
            fuzz_parse(&f[..cut]);
            let p = parse_frame(&f, LinkType::Ethernet).unwrap();
            prop_assert_eq!(p.payload(&f), &payload[..]);
            prop_assert!(udp_checksum_ok(&f, &p));
        }
    }
}

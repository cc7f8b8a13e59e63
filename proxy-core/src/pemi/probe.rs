//! ICMP echo calibration of PEMI's RTT to the protected endpoint (PEMI §4.4.3, §5, App. A:
//! "one ICMP-based PEMI–receiver RTT sample every end-to-end RTT").
//!
//! The proxy has no address of its own on the path (bridge mode), so the probe travels like the
//! flow's own packets: an ICMPv4 echo request with the link header and the IPv4 source and
//! destination of a captured packet of the protected direction, i.e. "from" the data sender to
//! the receiver. The receiver's echo reply goes back towards the sender's address, through the
//! box, which recognises it by its identifier and payload mark and takes the time. The reply is
//! forwarded like any frame (fail-open); the sender's stack ignores an unsolicited echo reply.
//! IPv4 only.

use std::net::Ipv4Addr;

use crate::packet::{LinkType, UdpPacket, ipv4_header_checksum, l3_offset};

/// Payload of every probe: marks the echo replies that answer PEMI's probes.
pub const PROBE_MARK: [u8; 8] = *b"SKPEMI01";

/// An ICMPv4 echo request that travels like `template` (a captured IPv4 frame of the protected
/// direction, `udp` its parse): the same link header, the same IPv4 source and destination,
/// identifier `id`, sequence `seq`. `None` for IPv6 or a truncated template.
///
/// ```
/// use std::net::SocketAddr;
/// use sidekick_proxy_core::packet::{LinkType, build_udp_ip, parse_frame};
/// use sidekick_proxy_core::pemi::probe::{echo_reply, echo_request};
/// let (s, c): (SocketAddr, SocketAddr) = ("10.0.1.2:443".parse().unwrap(), "10.0.0.2:5000".parse().unwrap());
/// let data = build_udp_ip(s, c, b"quic", 64);
/// let udp = parse_frame(&data, LinkType::RawIp).unwrap();
/// let probe = echo_request(&data, &udp, 7, 1).unwrap();
/// // What the receiver answers: addresses swapped, type 0, same identifier, sequence and data.
/// let mut reply = probe.clone();
/// reply[12..16].copy_from_slice(&probe[16..20]);
/// reply[16..20].copy_from_slice(&probe[12..16]);
/// reply[20] = 0;
/// let r = echo_reply(&reply, LinkType::RawIp).unwrap();
/// assert_eq!((r.id, r.seq, r.src.to_string()), (7, 1, "10.0.0.2".to_string()));
/// ```
pub fn echo_request(template: &[u8], udp: &UdpPacket, id: u16, seq: u16) -> Option<Vec<u8>> {
    let l3 = udp.l3_offset;
    let ip = template.get(l3..l3 + 20)?;
    if ip[0] >> 4 != 4 {
        return None;
    }
    let icmp_len = 8 + PROBE_MARK.len();
    let total = u16::try_from(20 + icmp_len).ok()?;
    let mut f = Vec::with_capacity(l3 + 20 + icmp_len);
    f.extend_from_slice(template.get(..l3)?);
    let mut h = [0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&seq.to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = 64;
    h[9] = 1; // ICMP
    h[12..20].copy_from_slice(&ip[12..20]);
    let c = ipv4_header_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    let mut icmp = [0u8; 8 + PROBE_MARK.len()];
    icmp[0] = 8; // echo request
    icmp[4..6].copy_from_slice(&id.to_be_bytes());
    icmp[6..8].copy_from_slice(&seq.to_be_bytes());
    icmp[8..].copy_from_slice(&PROBE_MARK);
    let c = ipv4_header_checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&icmp);
    Some(f)
}

/// An echo reply to one of PEMI's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// The replying endpoint (the probed receiver).
    pub src: Ipv4Addr,
    /// Where the reply goes (the flow's data sender).
    pub dst: Ipv4Addr,
    /// The probe's identifier.
    pub id: u16,
    /// The probe's sequence number.
    pub seq: u16,
}

/// Parse an ICMPv4 echo reply carrying [`PROBE_MARK`]; `None` for anything else. Wire input:
/// never panics (property-tested; the `core_frames` fuzz target reaches it through the core).
pub fn echo_reply(frame: &[u8], link: LinkType) -> Option<EchoReply> {
    let l3 = l3_offset(frame, link).ok()?;
    let ip = frame.get(l3..)?;
    let hdr = ip.get(..20)?;
    let ihl = usize::from(hdr[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
    if hdr[0] >> 4 != 4
        || ihl < 20
        || hdr[9] != 1
        || u16::from_be_bytes([hdr[6], hdr[7]]) & 0x3fff != 0
    {
        return None;
    }
    let icmp = ip.get(ihl..total.max(ihl))?;
    if icmp.len() < 8 + PROBE_MARK.len() || icmp[0] != 0 || icmp[1] != 0 {
        return None;
    }
    if icmp[8..8 + PROBE_MARK.len()] != PROBE_MARK {
        return None;
    }
    Some(EchoReply {
        src: Ipv4Addr::new(hdr[12], hdr[13], hdr[14], hdr[15]),
        dst: Ipv4Addr::new(hdr[16], hdr[17], hdr[18], hdr[19]),
        id: u16::from_be_bytes([icmp[4], icmp[5]]),
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{build_udp_ip, parse_frame};
    use proptest::prelude::*;

    fn eth(ip: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend_from_slice(ip);
        f
    }

    #[test]
    fn request_is_a_valid_echo_with_the_flows_addresses() {
        let data = eth(&build_udp_ip(
            "10.0.1.2:443".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
            &[0x41; 100],
            64,
        ));
        let udp = parse_frame(&data, LinkType::Ethernet).unwrap();
        let p = echo_request(&data, &udp, 0xbeef, 3).unwrap();
        assert_eq!(p[..14], data[..14], "same link header");
        let ip = &p[14..];
        assert_eq!(
            ipv4_header_checksum(&ip[..20]),
            0,
            "header checksum verifies"
        );
        assert_eq!(ip[9], 1);
        assert_eq!(ip[12..20], data[14 + 12..14 + 20], "same addresses");
        let icmp = &ip[20..];
        assert_eq!(ipv4_header_checksum(icmp), 0, "ICMP checksum verifies");
        assert_eq!((icmp[0], &icmp[4..8]), (8, &[0xbe, 0xef, 0, 3][..]));
        // Not a reply; a reply without the mark is not ours.
        assert_eq!(echo_reply(&p, LinkType::Ethernet), None);
        let mut r = p.clone();
        r[14 + 20] = 0;
        assert_eq!(echo_reply(&r, LinkType::Ethernet).map(|e| e.seq), Some(3));
        r[14 + 28] ^= 1;
        assert_eq!(echo_reply(&r, LinkType::Ethernet), None);
        // IPv6 templates are not probed.
        let v6 = build_udp_ip(
            "[2001:db8::1]:443".parse().unwrap(),
            "[2001:db8::2]:5000".parse().unwrap(),
            b"x",
            64,
        );
        let u6 = parse_frame(&v6, LinkType::RawIp).unwrap();
        assert_eq!(echo_request(&v6, &u6, 1, 1), None);
    }

    proptest! {
        #[test]
        fn echo_reply_never_panics(data in proptest::collection::vec(any::<u8>(), 0..120),
                                   eth_link in any::<bool>()) {
            let link = if eth_link { LinkType::Ethernet } else { LinkType::RawIp };
            let _ = echo_reply(&data, link);
        }
    }
}

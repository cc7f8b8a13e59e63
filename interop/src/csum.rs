//! Filling in the transport checksum of a frame captured with a partial checksum.
//!
//! On veth, a datagram sent with checksum offload leaves with CHECKSUM_PARTIAL; AF_PACKET hands
//! it over unfinished (TP_STATUS_CSUMNOTREADY) and a copy re-sent on another veth is dropped by
//! the receiver as corrupt (docs/architecture.md). The link element recomputes the UDP or TCP
//! checksum of such frames (RFC 768, RFC 793, RFC 8200 §8.1 pseudo-headers) before forwarding.
//! This parses wire input: it never panics and leaves malformed frames untouched.

/// Why a frame's checksum was not filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CsumError {
    /// Shorter than the headers it announces.
    #[error("frame truncated")]
    Truncated,
    /// Not IPv4/IPv6 carrying UDP or TCP (or an IPv6 extension header chain).
    #[error("not UDP or TCP over IP")]
    Unsupported,
    /// An IPv4 fragment other than the first, or a fragmented datagram (checksum spans fragments).
    #[error("fragmented datagram")]
    Fragment,
}

use sidekick_wire::checksum::Checksum;

/// Recomputes the UDP or TCP checksum of an Ethernet frame in place.
///
/// ```
/// use sidekick_lab::csum::fill_l4_checksum;
/// // Too short to be an IPv4 frame: rejected, untouched.
/// let mut f = vec![0u8; 20];
/// assert!(fill_l4_checksum(&mut f).is_err());
/// ```
pub fn fill_l4_checksum(frame: &mut [u8]) -> Result<(), CsumError> {
    let ethertype = u16::from_be_bytes([
        *frame.get(12).ok_or(CsumError::Truncated)?,
        *frame.get(13).ok_or(CsumError::Truncated)?,
    ]);
    let (proto, l4_start, l4_end, mut sum) = match ethertype {
        0x0800 => {
            let ip = frame.get(14..34).ok_or(CsumError::Truncated)?;
            if ip[0] >> 4 != 4 {
                return Err(CsumError::Unsupported);
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let frag = u16::from_be_bytes([ip[6], ip[7]]);
            if frag & 0x3fff != 0 {
                return Err(CsumError::Fragment);
            }
            if ihl < 20 || total < ihl || 14 + total > frame.len() {
                return Err(CsumError::Truncated);
            }
            let proto = ip[9];
            let l4_len = total - ihl;
            let mut pseudo = Checksum::new();
            pseudo.add_bytes(&ip[12..20]);
            pseudo.add(u32::from(proto) + l4_len as u32);
            (proto, 14 + ihl, 14 + total, pseudo)
        }
        0x86dd => {
            let ip = frame.get(14..54).ok_or(CsumError::Truncated)?;
            let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            let proto = ip[6];
            if 54 + payload > frame.len() {
                return Err(CsumError::Truncated);
            }
            let mut pseudo = Checksum::new();
            pseudo.add_bytes(&ip[8..40]);
            pseudo.add(u32::from(proto) + payload as u32);
            (proto, 54, 54 + payload, pseudo)
        }
        _ => return Err(CsumError::Unsupported),
    };
    let off = match proto {
        17 => 6,
        6 => 16,
        _ => return Err(CsumError::Unsupported),
    };
    if l4_start + off + 2 > l4_end {
        return Err(CsumError::Truncated);
    }
    frame[l4_start + off] = 0;
    frame[l4_start + off + 1] = 0;
    sum.add_bytes(&frame[l4_start..l4_end]);
    let mut c = sum.finish();
    if proto == 17 && c == 0 {
        c = 0xffff; // RFC 768: a computed zero is sent as all ones.
    }
    frame[l4_start + off..l4_start + off + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// Fuzz entry point (also run by the unit tests): any input must be handled without panicking.
pub fn fuzz_fill_checksum(data: &[u8]) {
    let mut v = data.to_vec();
    let _ = fill_l4_checksum(&mut v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An Ethernet + IPv4 + UDP frame with a correct checksum, built by hand.
    fn udp4_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + 8 + payload.len();
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
        ];
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        let ipc = sidekick_wire::checksum::internet_checksum(&ip);
        ip[10..12].copy_from_slice(&ipc.to_be_bytes());
        f.extend_from_slice(&ip);
        let ulen = (8 + payload.len()) as u16;
        f.extend_from_slice(&[0x30, 0x39, 0x11, 0x5c]);
        f.extend_from_slice(&ulen.to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    fn verify_udp4(f: &[u8]) -> bool {
        // Sum over pseudo-header + UDP segment including the checksum must fold to 0.
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let l4 = &f[34..14 + total];
        let mut sum = Checksum::new();
        sum.add_bytes(&f[26..34]);
        sum.add(17 + l4.len() as u32);
        sum.add_bytes(l4);
        sum.finish() == 0
    }

    #[test]
    fn fills_a_known_udp_checksum() {
        let mut f = udp4_frame(b"hello sidekick");
        // Garbage in the checksum field, as with CHECKSUM_PARTIAL.
        f[40] = 0xde;
        f[41] = 0xad;
        fill_l4_checksum(&mut f).unwrap();
        assert!(verify_udp4(&f));
        assert_ne!(&f[40..42], &[0xde, 0xad]);
    }

    #[test]
    fn odd_length_payload_and_rejections() {
        let mut f = udp4_frame(b"odd");
        fill_l4_checksum(&mut f).unwrap();
        assert!(verify_udp4(&f));
        let mut arp = vec![0u8; 60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(fill_l4_checksum(&mut arp), Err(CsumError::Unsupported));
        let mut short = udp4_frame(b"x");
        short.truncate(36);
        assert_eq!(fill_l4_checksum(&mut short), Err(CsumError::Truncated));
    }

    proptest! {
        #[test]
        fn any_udp_payload_verifies(p in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let mut f = udp4_frame(&p);
            fill_l4_checksum(&mut f).unwrap();
            prop_assert!(verify_udp4(&f));
        }

        #[test]
        fn arbitrary_input_never_panics(d in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_fill_checksum(&d);
        }

        #[test]
        fn mutated_frames_never_panic(p in proptest::collection::vec(any::<u8>(), 0..64), i in 0usize..100, b: u8) {
            let mut f = udp4_frame(&p);
            let n = f.len();
            f[i % n] = b;
            fuzz_fill_checksum(&f);
        }
    }
}

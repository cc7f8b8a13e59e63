//! QUIC long headers and the coalesced packets of a datagram, read from cleartext fields only.
//!
//! A long header's invariant fields (RFC 8999 §5.1: version, connection IDs) are read for every
//! version; the type bits, the Initial token and the Length field (RFC 9000 §17.2) only for the
//! versions whose layout is known, 1 and 2 (RFC 9369 §3.2 renumbers the types of version 2).
//! [`packets`] walks a datagram as RFC 9000 §12.2 coalesces them: long-header packets, each
//! delimited by its Length, then at most one short-header packet that runs to the end.

use crate::{WireError, varint};

/// QUIC version 1 (RFC 9000).
pub const QUIC_V1: u32 = 1;
/// QUIC version 2 (RFC 9369).
pub const QUIC_V2: u32 = 0x6b33_43cf;
/// Largest connection ID length versions 1 and 2 allow (RFC 9000 §17.2); the invariants allow 255.
pub const MAX_CID_LEN: usize = 20;

/// Long-header packet type (RFC 9000 §17.2; version 2 numbering mapped per RFC 9369 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LongType {
    /// Initial.
    Initial,
    /// 0-RTT.
    ZeroRtt,
    /// Handshake.
    Handshake,
    /// Retry.
    Retry,
}

impl LongType {
    /// The type the two type bits (`0..=3`) name in `version`: version 2's numbering for version
    /// 2, version 1's for every other (drafts used it; for unknown versions it is a guess, see
    /// [`LongHeader::is_known_version`]).
    #[must_use]
    pub fn from_bits(version: u32, bits: u8) -> Self {
        const V1: [LongType; 4] = [
            LongType::Initial,
            LongType::ZeroRtt,
            LongType::Handshake,
            LongType::Retry,
        ];
        const V2: [LongType; 4] = [
            LongType::Retry,
            LongType::Initial,
            LongType::ZeroRtt,
            LongType::Handshake,
        ];
        let i = usize::from(bits & 0x03);
        if version == QUIC_V2 { V2[i] } else { V1[i] }
    }
}

/// A parsed long header: the fields in cleartext, borrowed from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHeader<'a> {
    /// The first byte (header form, fixed bit, type bits, protected bits).
    pub first: u8,
    /// The version; 0 is Version Negotiation.
    pub version: u32,
    /// The packet type; `None` for Version Negotiation.
    pub ty: Option<LongType>,
    /// Destination connection ID.
    pub dcid: &'a [u8],
    /// Source connection ID.
    pub scid: &'a [u8],
    /// The token of an Initial of a known version (empty otherwise).
    pub token: &'a [u8],
    /// The Length field (packet number and protected payload) of an Initial, 0-RTT or Handshake
    /// packet of a known version; `None` for the others.
    pub length: Option<u64>,
    /// Bytes of this packet in the datagram: up to the end of its Length where it has one,
    /// otherwise the rest of the datagram (Retry, Version Negotiation, unknown versions).
    pub packet_len: usize,
}

impl<'a> LongHeader<'a> {
    /// Parses the long header at the start of `buf`.
    ///
    /// # Errors
    /// [`WireError::NotLong`] for a short header, [`WireError::Truncated`] when a field runs past
    /// `buf`, [`WireError::Invalid`] for a version 1/2 connection ID over 20 bytes or a zero
    /// Length (a packet number takes at least one byte).
    ///
    /// ```
    /// use sidekick_wire::quic::{LongHeader, LongType};
    /// // A version 1 Handshake packet: DCID 01 02, SCID 03, Length 2.
    /// let h = LongHeader::parse(&[0xe0, 0, 0, 0, 1, 2, 1, 2, 1, 3, 2, 0xaa, 0xbb]).unwrap();
    /// assert_eq!((h.ty, h.dcid, h.scid, h.length, h.packet_len),
    ///            (Some(LongType::Handshake), &[1, 2][..], &[3][..], Some(2), 13));
    /// ```
    pub fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let first = *buf.first().ok_or(WireError::Truncated("quic header"))?;
        if first & 0x80 == 0 {
            return Err(WireError::NotLong);
        }
        let v = buf.get(1..5).ok_or(WireError::Truncated("quic version"))?;
        let version = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
        let mut pos = 5;
        let dcid = cid(buf, &mut pos, "quic dcid")?;
        let scid = cid(buf, &mut pos, "quic scid")?;
        let mut h = LongHeader {
            first,
            version,
            ty: None,
            dcid,
            scid,
            token: &[],
            length: None,
            packet_len: buf.len(),
        };
        if version == 0 {
            return Ok(h);
        }
        let ty = LongType::from_bits(version, first >> 4);
        h.ty = Some(ty);
        if !h.is_known_version() {
            return Ok(h);
        }
        if dcid.len() > MAX_CID_LEN || scid.len() > MAX_CID_LEN {
            return Err(WireError::Invalid("connection id length"));
        }
        if ty == LongType::Retry {
            return Ok(h);
        }
        if ty == LongType::Initial {
            let token_len =
                varint::read(buf, &mut pos).ok_or(WireError::Truncated("token length"))?;
            let end = usize::try_from(token_len)
                .ok()
                .and_then(|l| pos.checked_add(l))
                .ok_or(WireError::Truncated("token"))?;
            h.token = buf.get(pos..end).ok_or(WireError::Truncated("token"))?;
            pos = end;
        }
        let length = varint::read(buf, &mut pos).ok_or(WireError::Truncated("length"))?;
        if length == 0 {
            return Err(WireError::Invalid("length"));
        }
        h.length = Some(length);
        h.packet_len = usize::try_from(length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&end| end <= buf.len())
            .ok_or(WireError::Truncated("packet"))?;
        Ok(h)
    }

    /// The version is 1 or 2, whose type bits, token and Length this parser reads.
    #[must_use]
    pub fn is_known_version(&self) -> bool {
        matches!(self.version, QUIC_V1 | QUIC_V2)
    }
}

fn cid<'a>(buf: &'a [u8], pos: &mut usize, what: &'static str) -> Result<&'a [u8], WireError> {
    let len = usize::from(*buf.get(*pos).ok_or(WireError::Truncated(what))?);
    let start = *pos + 1;
    let id = buf
        .get(start..start + len)
        .ok_or(WireError::Truncated(what))?;
    *pos = start + len;
    Ok(id)
}

/// One packet of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet<'a> {
    /// A long-header packet.
    Long(LongHeader<'a>),
    /// A short-header (1-RTT) packet at `offset`, running to the end of the datagram; `first` is
    /// its first byte (spin bit `0x20`, RFC 9000 §17.4).
    Short {
        /// Offset in the datagram.
        offset: usize,
        /// The first byte.
        first: u8,
    },
}

/// The coalesced packets of `datagram`, in order (RFC 9000 §12.2).
///
/// The walk ends after a packet that runs to the end of the datagram (a short header, Retry,
/// Version Negotiation or a long header of an unknown version), after an error (yielded once), or
/// at datagram padding. A short header that starts the datagram is taken whatever its fixed bit
/// (peers may grease it, RFC 9287). After long-header packets, bytes with the fixed bit set are a
/// short header; bytes with it clear are one only when they carry the Destination Connection ID
/// of the packets before (coalesced packets share it, RFC 9000 §12.2: ngtcp2 and quinn grease the
/// bit of the 1-RTT packet they coalesce with their Handshake Finished), or, with a zero-length
/// one, when they are not all zeros; otherwise they are padding (quiche pads with zeros).
///
/// ```
/// use sidekick_wire::quic::{packets, Packet};
/// // A Handshake packet (DCID 0xaa) and a 1-RTT packet with a greased fixed bit (0x1f).
/// let d = [0xe0, 0, 0, 0, 1, 1, 0xaa, 0, 1, 0x55, 0x1f, 0xaa, 7, 7];
/// let kinds: Vec<_> = packets(&d).map(Result::unwrap).collect();
/// assert!(matches!(kinds[1], Packet::Short { offset: 10, first: 0x1f }));
/// // The same bytes with a different connection ID are padding.
/// let d = [0xe0, 0, 0, 0, 1, 1, 0xaa, 0, 1, 0x55, 0x1f, 0xbb, 7, 7];
/// assert_eq!(packets(&d).count(), 1);
/// ```
#[must_use]
pub fn packets(datagram: &[u8]) -> Packets<'_> {
    Packets {
        datagram,
        pos: 0,
        dcid: None,
    }
}

/// Iterator of [`packets`].
#[derive(Debug, Clone)]
pub struct Packets<'a> {
    datagram: &'a [u8],
    pos: usize,
    /// The Destination Connection ID of the long-header packets walked so far.
    dcid: Option<&'a [u8]>,
}

impl Packets<'_> {
    /// Whether the bytes at `offset`, after long-header packets, with the fixed bit clear, are a
    /// short header with a greased fixed bit rather than padding.
    fn greased_short_at(&self, offset: usize) -> bool {
        let rest = &self.datagram[offset..];
        match self.dcid {
            Some(dcid) if !dcid.is_empty() => rest.get(1..=dcid.len()) == Some(dcid),
            _ => rest.iter().any(|&b| b != 0),
        }
    }
}

impl<'a> Iterator for Packets<'a> {
    type Item = Result<Packet<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = self.pos;
        let first = *self.datagram.get(offset)?;
        if first & 0x80 == 0 {
            self.pos = self.datagram.len();
            if offset > 0 && first & 0x40 == 0 && !self.greased_short_at(offset) {
                return None;
            }
            return Some(Ok(Packet::Short { offset, first }));
        }
        match LongHeader::parse(&self.datagram[offset..]) {
            Ok(h) => {
                self.pos = offset + h.packet_len;
                self.dcid = Some(h.dcid);
                Some(Ok(Packet::Long(h)))
            }
            Err(e) => {
                self.pos = self.datagram.len();
                Some(Err(e))
            }
        }
    }
}

/// Offset of the short-header packet of `datagram`, after any coalesced long-header packets;
/// `None` when there is none (a handshake datagram, Retry, Version Negotiation, padding, or
/// bytes that do not parse).
///
/// ```
/// let d = [0xe0, 0, 0, 0, 1, 0, 0, 1, 0xaa, 0x41, 7, 7];
/// assert_eq!(sidekick_wire::quic::short_header_offset(&d), Some(9));
/// ```
#[must_use]
pub fn short_header_offset(datagram: &[u8]) -> Option<usize> {
    packets(datagram).find_map(|p| match p {
        Ok(Packet::Short { offset, .. }) => Some(offset),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn long(
        ty_bits: u8,
        version: u32,
        dcid: &[u8],
        scid: &[u8],
        token: Option<&[u8]>,
        payload: usize,
    ) -> Vec<u8> {
        let mut p = vec![0xc0 | (ty_bits << 4)];
        p.extend_from_slice(&version.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend_from_slice(dcid);
        p.push(scid.len() as u8);
        p.extend_from_slice(scid);
        if let Some(t) = token {
            varint::write(&mut p, t.len() as u64);
            p.extend_from_slice(t);
        }
        varint::write(&mut p, payload as u64);
        p.extend(std::iter::repeat_n(0x5a, payload));
        p
    }

    #[test]
    fn version_1_and_2_types() {
        let p = long(2, QUIC_V1, &[1; 8], &[2; 4], None, 20);
        let h = LongHeader::parse(&p).unwrap();
        assert_eq!(h.ty, Some(LongType::Handshake));
        assert_eq!((h.dcid.len(), h.scid.len(), h.length), (8, 4, Some(20)));
        let p = long(1, QUIC_V2, &[1; 8], &[], Some(b"tok"), 30);
        let h = LongHeader::parse(&p).unwrap();
        assert_eq!(h.ty, Some(LongType::Initial));
        assert_eq!(h.token, b"tok");
        let p = long(2, QUIC_V2, &[], &[], None, 5);
        assert_eq!(LongHeader::parse(&p).unwrap().ty, Some(LongType::ZeroRtt));
    }

    #[test]
    fn negotiation_retry_and_unknown_versions_run_to_the_end() {
        let vn = [0x80, 0, 0, 0, 0, 1, 9, 1, 8, 0, 0, 0, 1];
        let h = LongHeader::parse(&vn).unwrap();
        assert_eq!((h.ty, h.packet_len, h.length), (None, vn.len(), None));
        let retry = [0xf0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4];
        let h = LongHeader::parse(&retry).unwrap();
        assert_eq!((h.ty, h.packet_len), (Some(LongType::Retry), retry.len()));
        // Connection IDs over 20 bytes are allowed by the invariants, not by version 1.
        let unknown = long(0, 0x0a0a_0a0a, &[1; 40], &[], None, 4);
        let h = LongHeader::parse(&unknown).unwrap();
        assert!(!h.is_known_version());
        assert_eq!((h.packet_len, h.length), (unknown.len(), None));
        assert_eq!(
            LongHeader::parse(&long(0, QUIC_V1, &[1; 21], &[], Some(b""), 4)),
            Err(WireError::Invalid("connection id length"))
        );
    }

    #[test]
    fn malformed_headers() {
        assert_eq!(LongHeader::parse(&[0x40, 1]), Err(WireError::NotLong));
        assert_eq!(
            LongHeader::parse(&[]),
            Err(WireError::Truncated("quic header"))
        );
        assert_eq!(
            LongHeader::parse(&[0xc0, 0, 0, 0, 1, 20, 1]),
            Err(WireError::Truncated("quic dcid"))
        );
        let mut p = long(2, QUIC_V1, &[], &[], None, 10);
        p.truncate(p.len() - 1);
        assert_eq!(LongHeader::parse(&p), Err(WireError::Truncated("packet")));
        assert_eq!(
            LongHeader::parse(&long(2, QUIC_V1, &[], &[], None, 0)),
            Err(WireError::Invalid("length"))
        );
    }

    #[test]
    fn coalesced_walk_and_padding() {
        let mut d = long(0, QUIC_V1, &[1; 8], &[2; 8], Some(b""), 40);
        let hs = long(2, QUIC_V1, &[1; 8], &[2; 8], None, 30);
        d.extend_from_slice(&hs);
        let short_at = d.len();
        d.extend_from_slice(&[0x61, 1, 2, 3]);
        let kinds: Vec<_> = packets(&d).map(Result::unwrap).collect();
        assert_eq!(kinds.len(), 3);
        assert!(matches!(kinds[2], Packet::Short { offset, first: 0x61 } if offset == short_at));
        assert_eq!(short_header_offset(&d), Some(short_at));
        // Zero padding after the long headers is not a packet.
        d.truncate(short_at);
        d.extend_from_slice(&[0; 100]);
        assert_eq!(packets(&d).count(), 2);
        assert_eq!(short_header_offset(&d), None);
        // A greased fixed bit alone in a datagram is still a short header.
        assert_eq!(short_header_offset(&[0x00, 1, 2]), Some(0));
    }

    /// Debian's ngtcp2 client against the quinn server (lab capture, 26 Nov 2026): its Handshake
    /// Finished (first byte 0xa5: fixed bit greased, RFC 9287) coalesced with a 1-RTT packet whose
    /// fixed bit is greased too. The 1-RTT packet carries the Handshake packet's DCID.
    #[test]
    fn a_coalesced_short_header_with_a_greased_fixed_bit() {
        let dcid = [0x83, 0x6d, 0x42, 0x1b, 9, 9, 9, 9];
        let mut d = long(2, QUIC_V1, &dcid, &[5; 8], None, 40);
        d[0] &= !0x40;
        let short_at = d.len();
        d.push(0x0f);
        d.extend_from_slice(&dcid);
        d.extend_from_slice(&[0x33; 40]);
        let kinds: Vec<_> = packets(&d).map(Result::unwrap).collect();
        assert_eq!(kinds.len(), 2);
        assert!(matches!(kinds[1], Packet::Short { offset, first: 0x0f } if offset == short_at));
        // Zeros after it are padding, as is a greased-looking byte before another connection's
        // ID.
        d.truncate(short_at);
        d.extend_from_slice(&[0; 64]);
        assert_eq!(short_header_offset(&d), None);
        d.truncate(short_at);
        d.push(0x0f);
        d.extend_from_slice(&[7; 8]);
        assert_eq!(short_header_offset(&d), None);
        // With a zero-length DCID, anything but zeros is a packet.
        let mut d = long(2, QUIC_V1, &[], &[5; 8], None, 40);
        let at = d.len();
        d.extend_from_slice(&[0x0f, 1, 2]);
        assert_eq!(short_header_offset(&d), Some(at));
        d.truncate(at);
        d.extend_from_slice(&[0; 3]);
        assert_eq!(short_header_offset(&d), None);
    }

    proptest! {
        #[test]
        fn any_datagram_walks_within_bounds(d in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut end = 0;
            let mut n = 0;
            for p in packets(&d) {
                n += 1;
                match p {
                    Ok(Packet::Long(h)) => {
                        prop_assert!(h.packet_len >= 7 && end + h.packet_len <= d.len());
                        end += h.packet_len;
                    }
                    Ok(Packet::Short { offset, .. }) => {
                        prop_assert_eq!(offset, end);
                        end = d.len();
                    }
                    Err(_) => end = d.len(),
                }
            }
            prop_assert!(n <= d.len());
        }

        #[test]
        fn built_packets_parse_back(
            bits in 0u8..3, v2 in any::<bool>(), dcid in proptest::collection::vec(any::<u8>(), 0..=20),
            scid in proptest::collection::vec(any::<u8>(), 0..=20), token in proptest::collection::vec(any::<u8>(), 0..50),
            payload in 1usize..2000,
        ) {
            let version = if v2 { QUIC_V2 } else { QUIC_V1 };
            let wire_bits = if v2 { bits + 1 } else { bits };
            let ty = LongType::from_bits(version, wire_bits);
            let tok = (ty == LongType::Initial).then_some(&token[..]);
            let p = long(wire_bits, version, &dcid, &scid, tok, payload);
            let h = LongHeader::parse(&p).unwrap();
            prop_assert_eq!(h.ty, Some(ty));
            prop_assert_eq!(h.dcid, &dcid[..]);
            prop_assert_eq!(h.scid, &scid[..]);
            prop_assert_eq!(h.token, tok.unwrap_or(&[]));
            prop_assert_eq!(h.length, Some(payload as u64));
            prop_assert_eq!(h.packet_len, p.len());
        }
    }
}

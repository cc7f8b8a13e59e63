//! Long-header parsing and the position of the short-header packet in a datagram (RFC 9000
//! §12.2, §17.2): what the lens needs to find the packet number it unprotects.

use super::LensError;

/// A parsed long header (RFC 9000 §17.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongHeader<'a> {
    /// Long packet type bits (0 Initial, 1 0-RTT, 2 Handshake, 3 Retry), or `None` for Version
    /// Negotiation.
    pub packet_type: Option<u8>,
    /// Version.
    pub version: u32,
    /// Destination connection ID.
    pub dcid: &'a [u8],
    /// Source connection ID.
    pub scid: &'a [u8],
    /// Length of the whole packet in the datagram (what follows it may be a coalesced packet).
    pub packet_len: usize,
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, LensError> {
    let first = *buf.get(*pos).ok_or(LensError::Truncated)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len).ok_or(LensError::Truncated)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    *pos += len;
    Ok(v)
}

/// Parses the long header at the start of `buf`.
pub fn parse_long_header(buf: &[u8]) -> Result<LongHeader<'_>, LensError> {
    let first = *buf.first().ok_or(LensError::Truncated)?;
    if first & 0x80 == 0 {
        return Err(LensError::NotQuic);
    }
    let version = u32::from_be_bytes(
        buf.get(1..5)
            .ok_or(LensError::Truncated)?
            .try_into()
            .map_err(|_| LensError::Truncated)?,
    );
    let mut pos = 5;
    let dcid_len = *buf.get(pos).ok_or(LensError::Truncated)? as usize;
    pos += 1;
    let dcid = buf.get(pos..pos + dcid_len).ok_or(LensError::Truncated)?;
    pos += dcid_len;
    let scid_len = *buf.get(pos).ok_or(LensError::Truncated)? as usize;
    pos += 1;
    let scid = buf.get(pos..pos + scid_len).ok_or(LensError::Truncated)?;
    pos += scid_len;
    if version == 0 {
        return Ok(LongHeader {
            packet_type: None,
            version,
            dcid,
            scid,
            packet_len: buf.len(),
        });
    }
    if dcid_len > 20 || scid_len > 20 {
        return Err(LensError::NotQuic);
    }
    let packet_type = (first >> 4) & 0x03;
    match packet_type {
        0 => {
            let token_len = read_varint(buf, &mut pos)?;
            pos = pos
                .checked_add(usize::try_from(token_len).map_err(|_| LensError::Truncated)?)
                .ok_or(LensError::Truncated)?;
        }
        3 => {
            return Ok(LongHeader {
                packet_type: Some(3),
                version,
                dcid,
                scid,
                packet_len: buf.len(),
            });
        }
        _ => {}
    }
    let length = read_varint(buf, &mut pos)?;
    let packet_len = usize::try_from(length)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&end| end <= buf.len())
        .ok_or(LensError::Truncated)?;
    Ok(LongHeader {
        packet_type: Some(packet_type),
        version,
        dcid,
        scid,
        packet_len,
    })
}

/// Offset of the short-header (1-RTT) packet in a datagram, skipping coalesced long-header
/// packets (RFC 9000 §12.2: a short-header packet is always last).
pub fn short_header_offset(datagram: &[u8]) -> Result<usize, LensError> {
    let mut pos = 0;
    while pos < datagram.len() {
        let first = datagram[pos];
        if first & 0x80 == 0 {
            return Ok(pos);
        }
        let long = parse_long_header(&datagram[pos..])?;
        if long.packet_type.is_none() || long.packet_type == Some(3) {
            return Err(LensError::NoShortHeader);
        }
        pos += long.packet_len;
    }
    Err(LensError::NoShortHeader)
}

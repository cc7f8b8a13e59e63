//! Identifier extraction from UDP payloads (Sidekick (NSDI '24) §3.1; docs/architecture.md).
//!
//! An identifier is `b` bytes read at a fixed offset of the UDP payload (for QUIC the last 4
//! bytes of the datagram, the AEAD tag of its last packet: pseudorandom and independent of the
//! connection-ID length), or a keyed hash of the payload for protocols whose payload is not
//! pseudorandom. Bytes are read little-endian. Proxy and sender must use the same rule.

use siphasher::sip::SipHasher13;

use crate::field::Identifier;

/// Why an identifier could not be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("payload of {len} bytes has no {width}-byte identifier at offset {offset}")]
pub struct IdError {
    /// Payload length.
    pub len: usize,
    /// Requested offset.
    pub offset: isize,
    /// Identifier width in bytes.
    pub width: usize,
}

/// Reads a `T` (little-endian) at `offset` of `payload`. A negative offset counts from the end:
/// `-(T::BYTES as isize)` reads the last `T::BYTES` bytes (the QUIC default, see
/// [`IdSource::QUIC_DEFAULT`]).
///
/// ```
/// let dgram = [9u8, 8, 7, 6, 5, 4, 3, 2, 1];
/// assert_eq!(quack::id_at_offset::<u32>(&dgram, -4), Ok(0x0102_0304));
/// assert_eq!(quack::id_at_offset::<u16>(&dgram, 1), Ok(0x0708));
/// assert!(quack::id_at_offset::<u64>(&dgram, 2).is_err());
/// ```
pub fn id_at_offset<T: Identifier>(payload: &[u8], offset: isize) -> Result<T, IdError> {
    let err = IdError {
        len: payload.len(),
        offset,
        width: T::BYTES,
    };
    let start = if offset >= 0 {
        offset.unsigned_abs()
    } else {
        payload
            .len()
            .checked_sub(offset.unsigned_abs())
            .ok_or(err)?
    };
    let end = start.checked_add(T::BYTES).ok_or(err)?;
    payload
        .get(start..end)
        .and_then(T::from_le_slice)
        .ok_or(err)
}

/// A keyed SipHash-1-3 of the whole payload, truncated to `T`. The key (chosen by the caller,
/// shared by proxy and sender for a session) keeps the identifiers unpredictable to outsiders.
///
/// ```
/// let key = [7u8; 16];
/// let a: u32 = quack::keyed_hash_id(&key, b"GET / HTTP/1.1");
/// assert_eq!(a, quack::keyed_hash_id(&key, b"GET / HTTP/1.1"));
/// assert_ne!(a, quack::keyed_hash_id::<u32>(&[8u8; 16], b"GET / HTTP/1.1"));
/// ```
pub fn keyed_hash_id<T: Identifier>(key: &[u8; 16], payload: &[u8]) -> T {
    T::from_u64_truncating(SipHasher13::new_with_key(key).hash(payload))
}

/// How to derive an identifier from a UDP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdSource {
    /// `b` bytes at an offset (negative: from the end).
    Offset(isize),
    /// Keyed SipHash-1-3 of the payload.
    KeyedHash([u8; 16]),
}

impl IdSource {
    /// QUIC default for 32-bit identifiers: the last 4 bytes of the datagram.
    pub const QUIC_DEFAULT: IdSource = IdSource::Offset(-4);

    /// Extracts the identifier of `payload`.
    pub fn extract<T: Identifier>(&self, payload: &[u8]) -> Result<T, IdError> {
        match self {
            IdSource::Offset(off) => id_at_offset(payload, *off),
            IdSource::KeyedHash(key) => Ok(keyed_hash_id(key, payload)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_at_the_edges() {
        let p = [1u8, 2, 3, 4];
        assert_eq!(id_at_offset::<u32>(&p, 0), Ok(0x0403_0201));
        assert_eq!(id_at_offset::<u32>(&p, -4), Ok(0x0403_0201));
        assert!(id_at_offset::<u32>(&p, 1).is_err());
        assert!(id_at_offset::<u32>(&p, -5).is_err());
        assert!(id_at_offset::<u16>(&p, -1).is_err());
        assert!(id_at_offset::<u16>(&p, isize::MAX).is_err());
        assert!(id_at_offset::<u16>(&p, isize::MIN).is_err());
        assert!(id_at_offset::<u16>(&[], 0).is_err());
        assert_eq!(
            IdSource::QUIC_DEFAULT.extract::<u32>(&[0, 1, 2, 3, 4]),
            Ok(0x0403_0201)
        );
    }

    #[test]
    fn keyed_hash_depends_on_payload() {
        let k = [1u8; 16];
        let a: u64 = keyed_hash_id(&k, b"a");
        let b: u64 = keyed_hash_id(&k, b"b");
        assert_ne!(a, b);
        assert_eq!(IdSource::KeyedHash(k).extract::<u64>(b"a"), Ok(a));
        assert_eq!(keyed_hash_id::<u16>(&k, b"a"), a as u16);
    }
}

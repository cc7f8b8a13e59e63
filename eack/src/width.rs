//! eACK views whose identifier width is chosen at run time: the width a sidekick session
//! negotiated (2, 4 or 8 bytes, Sidekick (NSDI '24) §3; `IdentifierSpec::width` of the
//! protocol). Each variant is the generic view monomorphised at one width, so the 32-bit path
//! is the same code as [`ReceiverEack<u32>`]; the only cost of the choice is one predictable
//! branch per call.

use quack::{IdError, IdSource, Width};

use crate::decode::Difference;
use crate::eack::{EackError, ProxyEack, ReceiverEack};
use crate::hash::HashKey;
use crate::id::Id;
use crate::wire::{EncodeError, HEADER_LEN, WIRE_VERSION, WireError};

macro_rules! each_width {
    ($enum:ident, $self:expr, $v:ident => $e:expr) => {
        match $self {
            $enum::U16($v) => $e,
            $enum::U32($v) => $e,
            $enum::U64($v) => $e,
        }
    };
}

/// The identifier width named in an eACK's header, without parsing the rest (the wire form's
/// byte 1). Fails on a short buffer, another version, or a width other than 2, 4 or 8.
///
/// ```
/// use eack::{ReceiverEack, peek_width};
/// let mut wire = Vec::new();
/// ReceiverEack::new(8).encode(8, &mut wire).unwrap();
/// assert_eq!(peek_width(&wire), Ok(quack::Width::U32));
/// ```
pub fn peek_width(bytes: &[u8]) -> Result<Width, WireError> {
    let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(WireError::Truncated { got: bytes.len() });
    };
    if header[0] != WIRE_VERSION {
        return Err(WireError::UnsupportedVersion(header[0]));
    }
    match header[1] {
        2 => Ok(Width::U16),
        4 => Ok(Width::U32),
        8 => Ok(Width::U64),
        w => Err(WireError::IdWidth {
            expected: 4,
            got: usize::from(w),
        }),
    }
}

/// A client-side eACK ([`ReceiverEack`]) at the session's identifier width.
///
/// ```
/// use eack::{HashKey, WidthProxyEack, WidthReceiverEack};
/// use quack::{IdSource, Width};
///
/// let src = IdSource::Offset(-2); // the datagram's last two bytes
/// let mut client = WidthReceiverEack::new(Width::U16, 40, HashKey::DEFAULT);
/// let mut proxy = WidthProxyEack::new(Width::U16, 40, 1024, HashKey::DEFAULT);
/// for i in 0..50u16 {
///     let datagram = [7, 7, 7, (i & 0xff) as u8, (i >> 8) as u8];
///     proxy.insert_from(&src, &datagram).unwrap();
///     if i != 9 {
///         client.on_datagram(&src, &datagram).unwrap();
///     }
/// }
/// let mut wire = Vec::new();
/// client.encode_for(1, 0.99, &mut wire);
/// assert_eq!(wire[1], 2); // the width travels in the header
/// assert_eq!(proxy.on_eack(&wire).unwrap().missing, vec![9]);
/// // A view of another width refuses it.
/// let mut wide = WidthProxyEack::new(Width::U64, 40, 1024, HashKey::DEFAULT);
/// assert!(wide.on_eack(&wire).is_err());
/// ```
#[derive(Clone, Debug)]
pub enum WidthReceiverEack {
    /// 2-byte identifiers.
    U16(ReceiverEack<u16>),
    /// 4-byte identifiers.
    U32(ReceiverEack<u32>),
    /// 8-byte identifiers.
    U64(ReceiverEack<u64>),
}

impl WidthReceiverEack {
    /// An empty receiver view of `width` with `local_symbols` coded symbols, epoch 0.
    pub fn new(width: Width, local_symbols: usize, key: HashKey) -> Self {
        match width {
            Width::U16 => Self::U16(ReceiverEack::with_key(local_symbols, key)),
            Width::U32 => Self::U32(ReceiverEack::with_key(local_symbols, key)),
            Width::U64 => Self::U64(ReceiverEack::with_key(local_symbols, key)),
        }
    }

    /// The identifier width.
    pub fn width(&self) -> Width {
        match self {
            Self::U16(_) => Width::U16,
            Self::U32(_) => Width::U32,
            Self::U64(_) => Width::U64,
        }
    }

    /// Reads the datagram's identifier at this width with `src` and records it.
    #[inline]
    pub fn on_datagram(&mut self, src: &IdSource, datagram: &[u8]) -> Result<(), IdError> {
        match self {
            Self::U16(e) => e.on_receive(src.extract(datagram)?),
            Self::U32(e) => e.on_receive(src.extract(datagram)?),
            Self::U64(e) => e.on_receive(src.extract(datagram)?),
        }
        Ok(())
    }

    /// Records an identifier, truncated to this width.
    #[inline]
    pub fn on_receive(&mut self, id: u64) {
        each_width!(Self, self, e => e.on_receive(Id::from_u64(id)));
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        each_width!(Self, self, e => e.epoch())
    }

    /// Starts a fresh, empty set in `epoch`.
    pub fn reset(&mut self, epoch: u32) {
        each_width!(Self, self, e => e.reset(epoch));
    }

    /// Identifiers recorded in this epoch.
    pub fn len(&self) -> u64 {
        each_width!(Self, self, e => e.len())
    }

    /// True when nothing was recorded in this epoch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of local coded symbols.
    pub fn local_symbols(&self) -> usize {
        each_width!(Self, self, e => e.local_symbols())
    }

    /// Appends an eACK of exactly `n_symbols` coded symbols ([`ReceiverEack::encode`]).
    pub fn encode(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError> {
        each_width!(Self, self, e => e.encode(n_symbols, buf))
    }

    /// Appends an eACK sized for `expected_missing` ([`ReceiverEack::encode_for`]); returns the
    /// number of symbols sent.
    pub fn encode_for(
        &self,
        expected_missing: usize,
        success_probability: f64,
        buf: &mut Vec<u8>,
    ) -> usize {
        each_width!(Self, self, e => e.encode_for(expected_missing, success_probability, buf))
    }
}

/// A proxy-side eACK ([`ProxyEack`]) at the session's identifier width; decoded identifiers are
/// zero-extended to `u64`.
#[derive(Clone, Debug)]
pub enum WidthProxyEack {
    /// 2-byte identifiers.
    U16(ProxyEack<u16>, Difference<u16>),
    /// 4-byte identifiers.
    U32(ProxyEack<u32>, Difference<u32>),
    /// 8-byte identifiers.
    U64(ProxyEack<u64>, Difference<u64>),
}

impl WidthProxyEack {
    /// An empty proxy view of `width` ([`ProxyEack::with_key`]), epoch 0.
    pub fn new(width: Width, local_symbols: usize, max_ids: usize, key: HashKey) -> Self {
        match width {
            Width::U16 => Self::U16(
                ProxyEack::with_key(local_symbols, max_ids, key),
                Difference::default(),
            ),
            Width::U32 => Self::U32(
                ProxyEack::with_key(local_symbols, max_ids, key),
                Difference::default(),
            ),
            Width::U64 => Self::U64(
                ProxyEack::with_key(local_symbols, max_ids, key),
                Difference::default(),
            ),
        }
    }

    /// The identifier width.
    pub fn width(&self) -> Width {
        match self {
            Self::U16(..) => Width::U16,
            Self::U32(..) => Width::U32,
            Self::U64(..) => Width::U64,
        }
    }

    /// Reads the datagram's identifier at this width with `src` and records it.
    pub fn insert_from(&mut self, src: &IdSource, datagram: &[u8]) -> Result<(), IdError> {
        match self {
            Self::U16(e, _) => e.insert(src.extract(datagram)?),
            Self::U32(e, _) => e.insert(src.extract(datagram)?),
            Self::U64(e, _) => e.insert(src.extract(datagram)?),
        }
        Ok(())
    }

    /// Records an identifier, truncated to this width.
    pub fn insert(&mut self, id: u64) {
        match self {
            Self::U16(e, _) => e.insert(Id::from_u64(id)),
            Self::U32(e, _) => e.insert(Id::from_u64(id)),
            Self::U64(e, _) => e.insert(Id::from_u64(id)),
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        match self {
            Self::U16(e, _) => e.epoch(),
            Self::U32(e, _) => e.epoch(),
            Self::U64(e, _) => e.epoch(),
        }
    }

    /// Starts a fresh, empty set in `epoch`.
    pub fn reset(&mut self, epoch: u32) {
        match self {
            Self::U16(e, _) => e.reset(epoch),
            Self::U32(e, _) => e.reset(epoch),
            Self::U64(e, _) => e.reset(epoch),
        }
    }

    /// Decodes a received wire eACK ([`ProxyEack::on_eack`]); an eACK of another width is
    /// [`EackError::Wire`] ([`WireError::IdWidth`]).
    pub fn on_eack(&mut self, bytes: &[u8]) -> Result<Difference<u64>, EackError> {
        fn widen<I: Id>(d: &Difference<I>) -> Difference<u64> {
            Difference {
                missing: d.missing.iter().map(|i| i.to_u64()).collect(),
                extra: d.extra.iter().map(|i| i.to_u64()).collect(),
            }
        }
        match self {
            Self::U16(e, d) => e.on_eack_into(bytes, d).map(|()| widen(d)),
            Self::U32(e, d) => e.on_eack_into(bytes, d).map(|()| widen(d)),
            Self::U64(e, d) => e.on_eack_into(bytes, d).map(|()| widen(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_width_reads_the_header_and_refuses_other_widths() {
        for w in [Width::U16, Width::U32, Width::U64] {
            let mut wire = Vec::new();
            WidthReceiverEack::new(w, 10, HashKey::DEFAULT)
                .encode(3, &mut wire)
                .unwrap();
            assert_eq!(peek_width(&wire), Ok(w));
        }
        let mut v = vec![1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            peek_width(&v),
            Err(WireError::IdWidth { got: 3, .. })
        ));
        v[0] = 2;
        assert_eq!(peek_width(&v), Err(WireError::UnsupportedVersion(2)));
        assert_eq!(peek_width(&v[..4]), Err(WireError::Truncated { got: 4 }));
    }

    #[test]
    fn every_width_repairs_and_refuses_the_others() {
        let widths = [Width::U16, Width::U32, Width::U64];
        for w in widths {
            let src = IdSource::Offset(-(w.bytes() as isize));
            let mut rx = WidthReceiverEack::new(w, 160, HashKey::DEFAULT);
            let mut px = WidthProxyEack::new(w, 160, 4096, HashKey::DEFAULT);
            assert_eq!((rx.width(), px.width()), (w, w));
            let dg = |i: u64| {
                let mut d = vec![0xc0, 1, 2, 3];
                d.extend_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
                d
            };
            let mut lost = Vec::new();
            for i in 0..500u64 {
                px.insert_from(&src, &dg(i)).unwrap();
                if i % 50 == 7 {
                    let d = dg(i);
                    let tail = &d[d.len() - w.bytes()..];
                    lost.push(tail.iter().rev().fold(0u64, |v, b| v << 8 | u64::from(*b)));
                } else {
                    rx.on_datagram(&src, &dg(i)).unwrap();
                }
            }
            assert_eq!(rx.len(), 490);
            let mut wire = Vec::new();
            rx.encode_for(lost.len(), 0.999, &mut wire);
            let mut d = px.on_eack(&wire).unwrap();
            d.missing.sort_unstable();
            lost.sort_unstable();
            assert_eq!(d.missing, lost, "width {w:?}");
            for other in widths.into_iter().filter(|o| *o != w) {
                let mut p = WidthProxyEack::new(other, 160, 4096, HashKey::DEFAULT);
                assert!(matches!(
                    p.on_eack(&wire),
                    Err(EackError::Wire(WireError::IdWidth { .. }))
                ));
            }
            rx.reset(5);
            px.reset(5);
            assert!(rx.is_empty());
            assert_eq!((rx.epoch(), px.epoch()), (5, 5));
        }
    }
}

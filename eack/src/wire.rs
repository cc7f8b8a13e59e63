//! Wire form of a coded-symbol prefix.
//!
//! ```text
//! offset size  field
//! 0      1     version (= 1)
//! 1      1     identifier width W in bytes (2, 4 or 8)
//! 2      4     epoch, u32 little-endian
//! 6      2     n = number of coded symbols, u16 little-endian, ≤ MAX_SYMBOLS
//! 8      4     set size (inserted − removed) modulo 2^32, u32 little-endian
//! 12     n×(W+5) coded symbols 0..n, each:
//!              W  identifier XOR, little-endian
//!              4  checksum XOR, u32 little-endian
//!              1  count modulo 256 (Packrat (CoNEXT '26) §5.2.1: an eight-bit count)
//! ```
//!
//! The length must be exactly `12 + n·(W+5)`. Symbol 0 contains every element, so its count
//! byte must equal the low byte of the set size; the decoder takes symbol 0's count from the
//! (wider) set size, which turns a wrapped count into a detected error instead of a wrong
//! difference. A `u32` eACK of 160 symbols is 1452 bytes.

use thiserror::Error;

use crate::hash::HashKey;
use crate::id::Id;
use crate::sketch::{CodedSymbol, MAX_SYMBOLS, Sketch};

/// Wire format version.
pub const WIRE_VERSION: u8 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 12;

/// Bytes per coded symbol on the wire for identifier type `I`.
pub const fn symbol_wire_len<I: Id>() -> usize {
    I::BYTES + 5
}

/// Wire size of an `n`-symbol prefix for identifier type `I`.
pub const fn encoded_len<I: Id>(n: usize) -> usize {
    HEADER_LEN + n * symbol_wire_len::<I>()
}

/// A malformed wire eACK.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the header.
    #[error("truncated: {got} bytes, header needs {HEADER_LEN}")]
    Truncated {
        /// Bytes received.
        got: usize,
    },
    /// Unknown version byte.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u8),
    /// Identifier width differs from the decoder's.
    #[error("identifier width {got} bytes, expected {expected}")]
    IdWidth {
        /// Width this decoder handles.
        expected: usize,
        /// Width in the header.
        got: usize,
    },
    /// More symbols than [`MAX_SYMBOLS`].
    #[error("{count} coded symbols exceeds the maximum {MAX_SYMBOLS}")]
    TooManySymbols {
        /// Count in the header.
        count: usize,
    },
    /// Length does not match the symbol count.
    #[error("length {got} bytes, header implies {expected}")]
    Length {
        /// Length implied by the header.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// Symbol 0's count byte disagrees with the set size.
    #[error("symbol 0 count disagrees with the set size")]
    Inconsistent,
}

/// Why a prefix could not be encoded.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum EncodeError {
    /// More symbols requested than the sketch holds (a receiver can only send a prefix of its
    /// local sketch; a proxy extends with [`Sketch::extend_to`]).
    #[error("{requested} coded symbols requested, the sketch holds {available}")]
    NotEnoughSymbols {
        /// Requested prefix length.
        requested: usize,
        /// Symbols held.
        available: usize,
    },
}

impl<I: Id> Sketch<I> {
    /// Appends the wire form of the first `n_symbols` coded symbols to `buf` and returns the
    /// number of bytes appended ([`encoded_len`]).
    pub fn encode_prefix(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError> {
        if n_symbols > self.symbols.len() {
            return Err(EncodeError::NotEnoughSymbols {
                requested: n_symbols,
                available: self.symbols.len(),
            });
        }
        let start = buf.len();
        buf.reserve(encoded_len::<I>(n_symbols));
        buf.push(WIRE_VERSION);
        buf.push(I::BYTES as u8);
        buf.extend_from_slice(&self.epoch.to_le_bytes());
        // n ≤ len ≤ MAX_SYMBOLS < 2^16.
        buf.extend_from_slice(&(n_symbols as u16).to_le_bytes());
        buf.extend_from_slice(&(self.len as u32).to_le_bytes());
        for s in &self.symbols[..n_symbols] {
            s.id_sum.write_le(buf);
            buf.extend_from_slice(&s.checksum.to_le_bytes());
            buf.push(s.count as u8);
        }
        Ok(buf.len() - start)
    }

    /// Parses a wire prefix with a given hash key (which must be the sender's).
    pub fn decode_prefix_with_key(bytes: &[u8], key: HashKey) -> Result<Self, WireError> {
        let mut s = Sketch::with_key(0, key);
        s.decode_prefix_into(bytes)?;
        Ok(s)
    }

    /// Parses a wire prefix into `self`, reusing its allocation (keeps `self`'s key). On error
    /// `self` is left empty.
    pub fn decode_prefix_into(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        self.symbols.clear();
        self.len = 0;
        self.exact = true;
        let Some((header, body)) = bytes.split_first_chunk::<HEADER_LEN>() else {
            return Err(WireError::Truncated { got: bytes.len() });
        };
        if header[0] != WIRE_VERSION {
            return Err(WireError::UnsupportedVersion(header[0]));
        }
        if usize::from(header[1]) != I::BYTES {
            return Err(WireError::IdWidth {
                expected: I::BYTES,
                got: usize::from(header[1]),
            });
        }
        let epoch = u32::from_le_bytes([header[2], header[3], header[4], header[5]]);
        let n = usize::from(u16::from_le_bytes([header[6], header[7]]));
        let set_len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if n > MAX_SYMBOLS {
            return Err(WireError::TooManySymbols { count: n });
        }
        let w = symbol_wire_len::<I>();
        if body.len() != n * w {
            return Err(WireError::Length {
                expected: HEADER_LEN + n * w,
                got: bytes.len(),
            });
        }
        if let Some(first) = body.get(w - 1)
            && *first != set_len as u8
        {
            return Err(WireError::Inconsistent);
        }
        self.symbols.reserve(n);
        for chunk in body.chunks_exact(w) {
            let (id, rest) = chunk.split_at(I::BYTES);
            let (checksum, count) = rest.split_at(4);
            self.symbols.push(CodedSymbol {
                id_sum: I::read_le(id),
                checksum: u32::from_le_bytes([checksum[0], checksum[1], checksum[2], checksum[3]]),
                count: i64::from(count[0] as i8),
            });
        }
        if let Some(s0) = self.symbols.first_mut() {
            s0.count = i64::from(set_len);
        }
        self.epoch = epoch;
        self.len = i64::from(set_len);
        self.exact = false;
        Ok(())
    }
}

impl Sketch<u32> {
    /// Parses a wire prefix of a `u32` sketch with the default hash key. The result has
    /// [`Sketch::counts_exact`] false; subtract it from (or decode it against) a local sketch.
    pub fn decode_prefix(bytes: &[u8]) -> Result<Self, WireError> {
        Sketch::decode_prefix_with_key(bytes, HashKey::DEFAULT)
    }
}

/// The fuzz target's body (also run by the unit and property tests): arbitrary bytes must never
/// panic. At each identifier width (16, 32, 64 bits): anything that parses must re-encode to
/// the same bytes, and decoding it alone, against a local sketch and through a proxy view must
/// return (not panic); a view of any other width must refuse it with [`WireError::IdWidth`].
pub fn fuzz_parse(data: &[u8]) {
    let parsed = [
        fuzz_width::<u16>(data),
        fuzz_width::<u32>(data),
        fuzz_width::<u64>(data),
    ];
    assert!(
        parsed.iter().filter(|p| **p).count() <= 1,
        "one eACK parsed at two widths"
    );
}

fn fuzz_width<I: Id>(data: &[u8]) -> bool {
    let s = match Sketch::<I>::decode_prefix_with_key(data, HashKey::DEFAULT) {
        Ok(s) => s,
        Err(WireError::IdWidth { expected, got }) => {
            assert_eq!(expected, I::BYTES);
            assert_eq!(Some(&(got as u8)), data.get(1));
            return false;
        }
        Err(_) => return false,
    };
    let mut again = Vec::new();
    let written = s.encode_prefix(s.num_symbols(), &mut again);
    assert_eq!(written, Ok(data.len()));
    assert_eq!(again.as_slice(), data, "re-encoding changed the bytes");
    let _ = s.decode();
    let mut local = Sketch::<I>::with_key(64, HashKey::DEFAULT);
    local.insert_all((0..32u64).map(I::from_u64));
    let _ = local.difference(&s).decode();
    let _ = crate::Decoder::new().decode_difference(&local, &s, &mut crate::Difference::default());
    let mut proxy = crate::ProxyEack::<I>::with_key(16, 64, HashKey::DEFAULT);
    for i in 0..40u64 {
        proxy.insert(I::from_u64(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    }
    let _ = proxy.on_eack(data);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sketch {
        let mut s = Sketch::new(20);
        s.set_epoch(7);
        s.insert_all([1, 2, 3, 0xdead_beef]);
        s
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let mut buf = vec![0xaa];
        let n = s.encode_prefix(20, &mut buf).unwrap();
        assert_eq!(n, encoded_len::<u32>(20));
        assert_eq!(n, 12 + 20 * 9);
        let p = Sketch::decode_prefix(&buf[1..]).unwrap();
        assert_eq!(p.epoch(), 7);
        assert_eq!(p.len(), 4);
        assert!(!p.counts_exact());
        assert_eq!(p.symbols()[0].count, 4);
        let mut d = p.decode().unwrap();
        d.missing.sort_unstable();
        assert_eq!(d.missing, vec![1, 2, 3, 0xdead_beef]);
        fuzz_parse(&buf[1..]);
    }

    #[test]
    fn header_layout() {
        let s = sample();
        let mut buf = Vec::new();
        s.encode_prefix(0, &mut buf).unwrap();
        assert_eq!(buf, [1, 4, 7, 0, 0, 0, 0, 0, 4, 0, 0, 0]);
    }

    #[test]
    fn errors() {
        let s = sample();
        let mut buf = Vec::new();
        s.encode_prefix(3, &mut buf).unwrap();
        assert_eq!(
            Sketch::decode_prefix(&buf[..5]),
            Err(WireError::Truncated { got: 5 })
        );
        assert_eq!(
            Sketch::decode_prefix(&buf[..buf.len() - 1]),
            Err(WireError::Length {
                expected: 39,
                got: 38
            })
        );
        let mut v = buf.clone();
        v[0] = 9;
        assert_eq!(
            Sketch::decode_prefix(&v),
            Err(WireError::UnsupportedVersion(9))
        );
        let mut v = buf.clone();
        v[1] = 8;
        assert_eq!(
            Sketch::decode_prefix(&v),
            Err(WireError::IdWidth {
                expected: 4,
                got: 8
            })
        );
        let mut v = buf.clone();
        v[6] = 0xff;
        v[7] = 0xff;
        assert_eq!(
            Sketch::decode_prefix(&v),
            Err(WireError::TooManySymbols { count: 65535 })
        );
        let mut v = buf.clone();
        v[12 + 8] ^= 1;
        assert_eq!(Sketch::decode_prefix(&v), Err(WireError::Inconsistent));
        assert_eq!(
            s.encode_prefix(21, &mut Vec::new()),
            Err(EncodeError::NotEnoughSymbols {
                requested: 21,
                available: 20
            })
        );
    }

    #[test]
    fn count_wrap_is_detected_not_misdecoded() {
        // 300 elements in a 5-symbol sketch: counts wrap modulo 256 on the wire.
        let mut s = Sketch::new(5);
        s.insert_all(0..300u32);
        let mut buf = Vec::new();
        s.encode_prefix(5, &mut buf).unwrap();
        let p = Sketch::decode_prefix(&buf).unwrap();
        assert!(p.decode().is_err());
        let empty = Sketch::new(5);
        assert!(empty.difference(&p).decode().is_err());
    }

    #[test]
    fn fuzz_body_on_edge_inputs() {
        fuzz_parse(&[]);
        fuzz_parse(&[
            1, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        fuzz_parse(&[1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        fuzz_parse(&[1, 2, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 9, 0, 1, 2, 3, 4, 1]);
    }
}

//! The quACK wire form (Sidekick (NSDI '24) §3.4 "Interface": `t` power sums, a count and the last
//! element), with a header naming the version and identifier width.
//!
//! Layout, all integers little-endian, `b` = identifier width in bytes:
//!
//! | offset      | size  | field                                                         |
//! |-------------|-------|---------------------------------------------------------------|
//! | 0           | 1     | version (high nibble, = 1) and width code (low nibble: 1 = 16-bit, 2 = 32-bit, 3 = 64-bit) |
//! | 1           | 1     | flags: bit 0 = last element present; bits 1–7 must be 0      |
//! | 2           | 2     | threshold `t` (u16, ≤ [`MAX_THRESHOLD`])                      |
//! | 4           | 4     | count (u32)                                                   |
//! | 8           | `b`   | last element (all zero when absent)                           |
//! | 8 + b       | `t·b` | power sums `Σx¹ … Σxᵗ`, each canonical (`< p`)                 |
//!
//! Total `8 + b + t·b` bytes: the paper's `4 + b + b·t` plus the 4-byte header. Every field is
//! validated; the encoding of a value is unique, so `to_bytes(from_bytes(x)) == x` for every
//! accepted `x`.

use crate::field::Identifier;
use crate::quack::{MAX_THRESHOLD, PowerSumQuack};

/// Current wire version.
pub const WIRE_VERSION: u8 = 1;
/// Size of the fixed header before the last element.
pub const HEADER_LEN: usize = 8;
const FLAG_LAST: u8 = 1;

/// Why bytes are not a valid quACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than the fixed header (plus the last element).
    #[error("truncated: need {needed} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The version nibble is not [`WIRE_VERSION`].
    #[error("unsupported wire version {0}")]
    UnsupportedVersion(u8),
    /// The width code is not 1, 2 or 3.
    #[error("unknown identifier width code {0}")]
    UnknownWidth(u8),
    /// The width is valid but not the one being parsed.
    #[error("identifier width {found} bytes, expected {expected}")]
    WidthMismatch {
        /// Width of the parsing type in bytes.
        expected: usize,
        /// Width on the wire in bytes.
        found: usize,
    },
    /// Reserved flag bits are set.
    #[error("reserved flag bits set: {0:#04x}")]
    ReservedFlags(u8),
    /// The threshold exceeds [`MAX_THRESHOLD`].
    #[error("threshold {0} exceeds the maximum")]
    ThresholdTooLarge(usize),
    /// The length does not match the threshold.
    #[error("length {got} bytes, the header implies {expected}")]
    LengthMismatch {
        /// Length implied by the header.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// The last element is non-zero although the flag says it is absent.
    #[error("last element present but flagged absent")]
    StrayLastElement,
    /// A power sum is not reduced modulo p.
    #[error("power sum {index} is not reduced modulo p")]
    NonCanonical {
        /// Index of the power sum (0 = first power).
        index: usize,
    },
}

/// The identifier width named by a wire header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// 16-bit identifiers.
    U16,
    /// 32-bit identifiers.
    U32,
    /// 64-bit identifiers.
    U64,
}

impl Width {
    /// Width in bytes.
    pub fn bytes(self) -> usize {
        match self {
            Width::U16 => 2,
            Width::U32 => 4,
            Width::U64 => 8,
        }
    }
    fn code(self) -> u8 {
        match self {
            Width::U16 => 1,
            Width::U32 => 2,
            Width::U64 => 3,
        }
    }
    fn of<T: Identifier>() -> Width {
        match T::BYTES {
            2 => Width::U16,
            4 => Width::U32,
            _ => Width::U64,
        }
    }
}

/// Reads the version/width byte: which type to parse the quACK with.
pub fn peek_width(bytes: &[u8]) -> Result<Width, WireError> {
    let &b0 = bytes.first().ok_or(WireError::Truncated {
        needed: HEADER_LEN,
        got: 0,
    })?;
    if b0 >> 4 != WIRE_VERSION {
        return Err(WireError::UnsupportedVersion(b0 >> 4));
    }
    match b0 & 0x0F {
        1 => Ok(Width::U16),
        2 => Ok(Width::U32),
        3 => Ok(Width::U64),
        other => Err(WireError::UnknownWidth(other)),
    }
}

/// Encoded length of a quACK with threshold `t` and identifier type `T`.
pub fn encoded_len<T: Identifier>(threshold: usize) -> usize {
    HEADER_LEN + T::BYTES * (threshold + 1)
}

/// A validated, borrowed view of an encoded quACK (zero-copy parse).
///
/// ```
/// use quack::{PowerSumQuack, QuackView};
/// let mut q = PowerSumQuack::<u32>::new(4);
/// q.insert(9);
/// let bytes = q.to_bytes();
/// let view = QuackView::<u32>::parse(&bytes)?;
/// assert_eq!((view.threshold(), view.count(), view.last_value()), (4, 1, Some(9)));
/// assert_eq!(view.power_sum(1), 81);
/// # Ok::<(), quack::WireError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuackView<'a, T: Identifier> {
    sums: &'a [u8],
    threshold: usize,
    count: u32,
    last_value: Option<T>,
}

impl<'a, T: Identifier> QuackView<'a, T> {
    /// Validates `bytes` (the whole datagram payload of the quACK; trailing bytes are an error).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                needed: HEADER_LEN,
                got: bytes.len(),
            });
        }
        let width = peek_width(bytes)?;
        if width != Width::of::<T>() {
            return Err(WireError::WidthMismatch {
                expected: T::BYTES,
                found: width.bytes(),
            });
        }
        let flags = bytes[1];
        if flags & !FLAG_LAST != 0 {
            return Err(WireError::ReservedFlags(flags));
        }
        let threshold = usize::from(u16::from_le_bytes([bytes[2], bytes[3]]));
        if threshold > MAX_THRESHOLD {
            return Err(WireError::ThresholdTooLarge(threshold));
        }
        let count = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let expected = encoded_len::<T>(threshold);
        if bytes.len() < HEADER_LEN + T::BYTES {
            return Err(WireError::Truncated {
                needed: expected,
                got: bytes.len(),
            });
        }
        if bytes.len() != expected {
            return Err(WireError::LengthMismatch {
                expected,
                got: bytes.len(),
            });
        }
        let last_bytes = &bytes[HEADER_LEN..HEADER_LEN + T::BYTES];
        let last = T::from_le_slice(last_bytes).ok_or(WireError::Truncated {
            needed: expected,
            got: bytes.len(),
        })?;
        let last_value = if flags & FLAG_LAST != 0 {
            Some(last)
        } else if last_bytes.iter().any(|&b| b != 0) {
            return Err(WireError::StrayLastElement);
        } else {
            None
        };
        let sums = &bytes[HEADER_LEN + T::BYTES..];
        for (index, chunk) in sums.chunks_exact(T::BYTES).enumerate() {
            let v = T::from_le_slice(chunk).map_or(u64::MAX, T::to_u64);
            if v >= T::MODULUS {
                return Err(WireError::NonCanonical { index });
            }
        }
        Ok(Self {
            sums,
            threshold,
            count,
            last_value,
        })
    }

    /// The threshold `t`.
    pub fn threshold(&self) -> usize {
        self.threshold
    }
    /// The count of identifiers.
    pub fn count(&self) -> u32 {
        self.count
    }
    /// The last identifier inserted, if present.
    pub fn last_value(&self) -> Option<T> {
        self.last_value
    }
    /// The `i`-th power sum (`i` from 0).
    ///
    /// # Panics
    /// If `i >= threshold()`.
    pub fn power_sum(&self, i: usize) -> T {
        let at = i * T::BYTES;
        T::from_le_slice(&self.sums[at..at + T::BYTES]).unwrap_or_default()
    }
    /// The power sums in order.
    pub fn power_sums(&self) -> impl ExactSizeIterator<Item = T> + 'a {
        self.sums
            .chunks_exact(T::BYTES)
            .map(|c| T::from_le_slice(c).unwrap_or_default())
    }
    /// An owned quACK with the same contents.
    pub fn to_quack(&self) -> PowerSumQuack<T> {
        PowerSumQuack::from_parts(
            self.power_sums().map(T::to_u64).collect(),
            self.count,
            self.last_value,
        )
    }
}

impl<T: Identifier> PowerSumQuack<T> {
    /// Length of [`to_bytes`](Self::to_bytes) output.
    pub fn encoded_len(&self) -> usize {
        encoded_len::<T>(self.threshold())
    }

    /// Encodes into `out`, returning the number of bytes written, or `None` if `out` is shorter
    /// than [`encoded_len`](Self::encoded_len). Thresholds above `u16::MAX` cannot occur
    /// ([`MAX_THRESHOLD`] is smaller).
    pub fn write_to(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.encoded_len();
        let out = out.get_mut(..len)?;
        out[0] = (WIRE_VERSION << 4) | Width::of::<T>().code();
        let last_value = self.last_value();
        out[1] = if last_value.is_some() { FLAG_LAST } else { 0 };
        out[2..4].copy_from_slice(&(self.threshold() as u16).to_le_bytes());
        out[4..8].copy_from_slice(&self.count().to_le_bytes());
        last_value
            .unwrap_or_default()
            .write_le(&mut out[HEADER_LEN..]);
        for (chunk, s) in out[HEADER_LEN + T::BYTES..]
            .chunks_exact_mut(T::BYTES)
            .zip(self.power_sums())
        {
            s.write_le(chunk);
        }
        Some(len)
    }

    /// Encodes into a new vector (layout in the [`wire`](crate::wire) module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.encoded_len()];
        let written = self.write_to(&mut out);
        debug_assert_eq!(written, Some(out.len()));
        out
    }

    /// Parses an encoded quACK into an owned value.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WireError> {
        QuackView::<T>::parse(bytes).map(|v| v.to_quack())
    }

    /// Subtracts a borrowed wire view without copying it into an owned quACK first (same
    /// semantics as [`sub_assign`](Self::sub_assign)).
    pub fn sub_assign_view(&mut self, view: &QuackView<'_, T>) {
        self.sub_parts(view.threshold(), view.count(), |i| {
            view.power_sum(i).to_u64()
        });
    }
}

/// Fuzz body: parses arbitrary bytes as a quACK of every width; whatever parses must re-encode
/// to the same bytes and decode without panicking. Never panics on any input (a panic is a bug).
pub fn fuzz_parse(data: &[u8]) {
    fn one<T: Identifier>(data: &[u8]) {
        if let Ok(view) = QuackView::<T>::parse(data) {
            let q = view.to_quack();
            assert_eq!(q.to_bytes(), data, "canonical re-encoding");
            assert_eq!(PowerSumQuack::<T>::from_bytes(data).as_ref(), Ok(&q));
            // Decoding hostile sums must fail cleanly or succeed, never panic.
            let log: Vec<T> = view.power_sums().take(8).collect();
            let _ = q.decode_with_log(&log);
            if q.threshold() <= 8 {
                let _ = q.decode_by_factoring();
            }
        }
    }
    let _ = peek_width(data);
    one::<u16>(data);
    one::<u32>(data);
    one::<u64>(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_as_documented() {
        let mut q = PowerSumQuack::<u16>::new(2);
        q.insert(0x0102);
        let b = q.to_bytes();
        assert_eq!(
            b,
            vec![
                0x11, 0x01, 2, 0, 1, 0, 0, 0, 0x02, 0x01, 0x02, 0x01, 0x13, 0x04
            ]
        );
        // 0x0102² = 66_564 ≡ 1043 = 0x0413 (mod 65521)
        assert_eq!(q.power_sum(1), 0x0413);
    }

    #[test]
    fn every_malformation_is_typed() {
        let mut q = PowerSumQuack::<u32>::new(2);
        q.insert(5);
        let good = q.to_bytes();
        assert!(QuackView::<u32>::parse(&good).is_ok());
        assert_eq!(
            QuackView::<u32>::parse(&good[..3]),
            Err(WireError::Truncated { needed: 8, got: 3 })
        );
        assert_eq!(
            QuackView::<u32>::parse(&good[..10]),
            Err(WireError::Truncated {
                needed: encoded_len::<u32>(2),
                got: 10
            })
        );
        let mut b = good.clone();
        b[0] = 0x22;
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::UnsupportedVersion(2))
        );
        b[0] = 0x14;
        assert_eq!(QuackView::<u32>::parse(&b), Err(WireError::UnknownWidth(4)));
        b[0] = 0x13;
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::WidthMismatch {
                expected: 4,
                found: 8
            })
        );
        let mut b = good.clone();
        b[1] = 0x03;
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::ReservedFlags(3))
        );
        let mut b = good.clone();
        b[1] = 0;
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::StrayLastElement)
        );
        let mut b = good.clone();
        b[2..4].copy_from_slice(&5000u16.to_le_bytes());
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::ThresholdTooLarge(5000))
        );
        let mut b = good.clone();
        b.push(0);
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::LengthMismatch {
                expected: good.len(),
                got: good.len() + 1
            })
        );
        let mut b = good.clone();
        let n = b.len();
        b[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            QuackView::<u32>::parse(&b),
            Err(WireError::NonCanonical { index: 1 })
        );
    }

    #[test]
    fn view_subtraction_matches_owned() {
        let mut s = PowerSumQuack::<u64>::new(3);
        let mut r = PowerSumQuack::<u64>::new(3);
        s.insert_batch(&[1, 2, 3]);
        r.insert_batch(&[1, 3]);
        let bytes = r.to_bytes();
        let mut a = s.clone();
        a.sub_assign_view(&QuackView::parse(&bytes).unwrap());
        assert_eq!(a, s - &r);
    }

    #[test]
    fn fuzz_body_on_samples() {
        fuzz_parse(&[]);
        fuzz_parse(&[0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut q = PowerSumQuack::<u32>::new(3);
        q.insert_batch(&[1, 2, 3]);
        fuzz_parse(&q.to_bytes());
    }
}

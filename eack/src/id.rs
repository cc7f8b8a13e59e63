//! Fixed-width packet identifiers.

use core::fmt::Debug;
use core::hash::Hash;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A fixed-width packet identifier (`u16`, `u32` or `u64`; `u32` is the default everywhere).
///
/// Packrat (CoNEXT '26) §5.2.1 picks four bytes read at a fixed offset of the encrypted payload; narrower or
/// wider identifiers trade eACK size against the chance that two packets of one eACK interval
/// collide.
pub trait Id:
    sealed::Sealed + Copy + Eq + Ord + Hash + Debug + Default + Send + Sync + 'static
{
    /// Width on the wire, in bytes.
    const BYTES: usize;
    /// The all-zero identifier.
    const ZERO: Self;
    /// Zero-extends to 64 bits (input of the keyed hash).
    fn to_u64(self) -> u64;
    /// Truncates a 64-bit value to this width.
    fn from_u64(v: u64) -> Self;
    /// `self ^ other`.
    #[must_use]
    fn xor(self, other: Self) -> Self;
    /// Appends the little-endian encoding.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads a little-endian value from the first [`Id::BYTES`] bytes of `bytes` (missing bytes
    /// read as zero; callers pass exactly `BYTES` bytes).
    fn read_le(bytes: &[u8]) -> Self {
        let mut v = 0u64;
        for (i, b) in bytes.iter().take(Self::BYTES).enumerate() {
            v |= u64::from(*b) << (8 * i);
        }
        Self::from_u64(v)
    }
}

macro_rules! impl_id {
    ($t:ty) => {
        impl Id for $t {
            const BYTES: usize = core::mem::size_of::<$t>();
            const ZERO: Self = 0;
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn xor(self, other: Self) -> Self {
                self ^ other
            }
            #[inline]
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}

impl_id!(u16);
impl_id!(u32);
impl_id!(u64);

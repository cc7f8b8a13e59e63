//! The rateless-IBLT sketch: coded symbols, incremental encoding, subtraction.

use crate::decode::{DecodeError, Decoder, Difference};
use crate::hash::HashKey;
use crate::id::Id;
use crate::mapping::IndexWalk;

/// Largest number of coded symbols a sketch (local or on the wire) may have.
///
/// At 9 bytes per `u32` symbol this bounds an eACK to about 36 kB; the papers use 40 and 160
/// local symbols (Packrat (CoNEXT '26), Table 4).
pub const MAX_SYMBOLS: usize = 4096;

/// One coded symbol (rIBLT "cell"): XOR of the identifiers mapped to it, XOR of their checksums
/// and their count (Packrat (CoNEXT '26) §5.1).
///
/// The count is exact (`i64`) in memory; the wire carries it modulo 256 (Packrat (CoNEXT '26) §5.2.1), see
/// [`Sketch::counts_exact`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodedSymbol<I: Id = u32> {
    /// XOR of the identifiers.
    pub id_sum: I,
    /// XOR of the identifiers' 32-bit keyed checksums ([`HashKey::checksum`]).
    pub checksum: u32,
    /// Number of identifiers inserted minus removed (or minuend minus subtrahend).
    pub count: i64,
}

impl<I: Id> CodedSymbol<I> {
    /// True when nothing is left in the symbol.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0 && self.checksum == 0 && self.id_sum == I::ZERO
    }

    #[inline(always)]
    pub(crate) fn apply(&mut self, id: I, checksum: u32, delta: i64) {
        self.id_sum = self.id_sum.xor(id);
        self.checksum ^= checksum;
        self.count = self.count.wrapping_add(delta);
    }
}

/// A rateless invertible Bloom lookup table over fixed-width identifiers: the first `t` coded
/// symbols of the infinite rIBLT stream of a set (Yang, Gilad, Alizadeh, SIGCOMM '24; Packrat (CoNEXT '26) §5).
///
/// Any prefix of the stream represents the whole set, so a receiver can transmit fewer symbols
/// than it keeps ([`Sketch::encode_prefix`]) and the other side subtracts its own sketch
/// ([`Sketch::subtract`]) and peels the difference ([`Sketch::decode`]).
///
/// Direction: after `a.subtract(&b)`, [`Difference::missing`] holds identifiers of `a`'s set
/// absent from `b`'s and [`Difference::extra`] those of `b`'s set absent from `a`'s. The proxy
/// is the minuend: `proxy.subtract(&client)` yields `missing` = packets the proxy forwarded that
/// the client has not received (to retransmit).
///
/// ```
/// use eack::Sketch;
///
/// let mut proxy = Sketch::new(160);
/// let mut client = Sketch::new(160);
/// for id in 1..=1000u32 {
///     proxy.insert(id);
///     if id % 100 != 0 {
///         client.insert(id); // the client lost 100, 200, ..., 1000
///     }
/// }
/// // The client sends a prefix sized for ~10 missing packets.
/// let mut wire = Vec::new();
/// client.encode_prefix(eack::symbols_for(10, 0.99), &mut wire).unwrap();
/// let received = Sketch::decode_prefix(&wire).unwrap();
///
/// let mut diff = proxy.clone();
/// diff.subtract(&received);
/// let mut d = diff.decode().unwrap();
/// d.missing.sort();
/// assert_eq!(d.missing, (1..=10).map(|i| i * 100).collect::<Vec<u32>>());
/// assert!(d.extra.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sketch<I: Id = u32> {
    pub(crate) symbols: Vec<CodedSymbol<I>>,
    pub(crate) key: HashKey,
    pub(crate) epoch: u32,
    /// Elements inserted minus removed (minuend minus subtrahend after a subtraction). Equals the
    /// count of symbol 0, which every element maps to.
    pub(crate) len: i64,
    /// False when counts are only known modulo 256 (parsed from the wire, or the result of a
    /// subtraction involving such a sketch) and `len` modulo 2^32.
    pub(crate) exact: bool,
}

impl Sketch<u32> {
    /// An empty sketch of `local_symbols` coded symbols over `u32` identifiers with the default
    /// hash key. `local_symbols` is clamped to [`MAX_SYMBOLS`].
    pub fn new(local_symbols: usize) -> Self {
        Sketch::with_key(local_symbols, HashKey::DEFAULT)
    }
}

impl<I: Id> Sketch<I> {
    /// An empty sketch of `local_symbols` coded symbols (clamped to [`MAX_SYMBOLS`]) with a
    /// given hash key.
    pub fn with_key(local_symbols: usize, key: HashKey) -> Self {
        Sketch {
            symbols: vec![CodedSymbol::default(); local_symbols.min(MAX_SYMBOLS)],
            key,
            epoch: 0,
            len: 0,
            exact: true,
        }
    }

    /// Number of coded symbols held.
    pub fn num_symbols(&self) -> usize {
        self.symbols.len()
    }

    /// The coded symbols.
    pub fn symbols(&self) -> &[CodedSymbol<I>] {
        &self.symbols
    }

    /// The hash key.
    pub fn key(&self) -> HashKey {
        self.key
    }

    /// The epoch number carried on the wire (see [`crate::ReceiverEack`]).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Sets the epoch number carried on the wire.
    pub fn set_epoch(&mut self, epoch: u32) {
        self.epoch = epoch;
    }

    /// Elements inserted minus removed (for a difference: minuend size minus subtrahend size).
    pub fn len(&self) -> i64 {
        self.len
    }

    /// True when no element is represented (every symbol empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.symbols.iter().all(CodedSymbol::is_empty)
    }

    /// False when the counts are only known modulo 256 (a sketch parsed from the wire, or a
    /// difference with one). Decoding then interprets each count as a signed 8-bit value, except
    /// symbol 0 whose count comes from the exact set size in the wire header; a count that
    /// wrapped is reported as [`DecodeError::CountOverflow`] or
    /// [`DecodeError::Undecodable`], never as a wrong difference.
    pub fn counts_exact(&self) -> bool {
        self.exact
    }

    /// Empties the sketch (keeps its size, key and epoch).
    pub fn clear(&mut self) {
        self.symbols.fill(CodedSymbol::default());
        self.len = 0;
        self.exact = true;
    }

    /// Adds an identifier: XORs it into each of its coded symbols below the sketch size
    /// (≈ 2·ln(t/2) of `t` symbols).
    #[inline]
    pub fn insert(&mut self, id: I) {
        self.apply(id, 1);
    }

    /// Removes an identifier (the inverse of [`Sketch::insert`]; removing an identifier that was
    /// never inserted makes it appear as [`Difference::extra`]).
    #[inline]
    pub fn remove(&mut self, id: I) {
        self.apply(id, -1);
    }

    /// Inserts every identifier of `ids`.
    pub fn insert_all<T: IntoIterator<Item = I>>(&mut self, ids: T) {
        for id in ids {
            self.insert(id);
        }
    }

    #[inline(always)]
    fn apply(&mut self, id: I, delta: i64) {
        let h = self.key.hash(id.to_u64());
        let checksum = (h >> 32) as u32;
        let mut walk = IndexWalk::new(h);
        // Index 0 is always hit: applying it before the loop lets the first step start from the
        // constant `y = 3` (a shift-and-add instead of a multiplication on the index chain).
        if let Some(s) = self.symbols.first_mut() {
            s.apply(id, checksum, delta);
        }
        walk.advance();
        let bound = IndexWalk::bound(self.symbols.len());
        while walk.below(bound) {
            if let Some(s) = self.symbols.get_mut(walk.index()) {
                s.apply(id, checksum, delta);
            }
            walk.advance();
        }
        self.len = self.len.wrapping_add(delta);
    }

    /// Keeps only the first `n` coded symbols (a prefix still represents the whole set).
    pub fn truncate(&mut self, n: usize) {
        self.symbols.truncate(n);
    }

    /// Grows the sketch to `n` coded symbols (at most [`MAX_SYMBOLS`]) by regenerating the new
    /// symbols from `ids`, which must be exactly the identifiers the sketch represents (inserted
    /// minus removed, as a multiset). This is how a proxy that kept its identifier set answers a
    /// prefix longer than its local sketch.
    pub fn extend_to<T: IntoIterator<Item = I>>(&mut self, n: usize, ids: T) {
        let old = self.symbols.len();
        let n = n.min(MAX_SYMBOLS);
        if n <= old {
            return;
        }
        self.symbols.resize(n, CodedSymbol::default());
        for id in ids {
            let h = self.key.hash(id.to_u64());
            let checksum = (h >> 32) as u32;
            let mut walk = IndexWalk::new(h);
            while walk.index() < old {
                walk.advance();
            }
            while let Some(s) = self.symbols.get_mut(walk.index()) {
                s.apply(id, checksum, 1);
                walk.advance();
            }
        }
    }

    /// Subtracts `other` symbol by symbol, in place. The result has `min` of both sizes (a
    /// prefix of a rateless stream is valid) and keeps `self`'s key and epoch.
    ///
    /// Afterwards `self` represents the difference: decoding yields
    /// [`Difference::missing`] = elements of `self`'s set not in `other`'s and
    /// [`Difference::extra`] = elements of `other`'s set not in `self`'s.
    pub fn subtract(&mut self, other: &Sketch<I>) {
        let n = self.symbols.len().min(other.symbols.len());
        self.symbols.truncate(n);
        let exact = self.exact && other.exact;
        let len = sub_len(self.len, other.len, exact);
        for (a, b) in self.symbols.iter_mut().zip(&other.symbols) {
            a.id_sum = a.id_sum.xor(b.id_sum);
            a.checksum ^= b.checksum;
            a.count = sub_count(a.count, b.count, exact);
        }
        if let Some(s0) = self.symbols.first_mut() {
            s0.count = len;
        }
        self.len = len;
        self.exact = exact;
    }

    /// `self − other` as a new sketch (see [`Sketch::subtract`]).
    pub fn difference(&self, other: &Sketch<I>) -> Sketch<I> {
        let mut d = self.clone();
        d.subtract(other);
        d
    }

    /// Peels the sketch, read as a set difference (see [`Sketch::subtract`] for the direction).
    ///
    /// Allocates scratch space; a proxy decoding often keeps a [`Decoder`] instead.
    pub fn decode(&self) -> Result<Difference<I>, DecodeError> {
        let mut out = Difference::default();
        Decoder::new().decode(self, &mut out)?;
        Ok(out)
    }
}

/// Difference of two set sizes; modulo 2^32 (the wire width) when either is inexact.
#[inline]
pub(crate) fn sub_len(a: i64, b: i64, exact: bool) -> i64 {
    if exact {
        a.wrapping_sub(b)
    } else {
        i64::from((a as u32).wrapping_sub(b as u32) as i32)
    }
}

/// Difference of two counts; modulo 256, read as signed, when either is inexact.
#[inline(always)]
pub(crate) fn sub_count(a: i64, b: i64, exact: bool) -> i64 {
    if exact {
        a.wrapping_sub(b)
    } else {
        i64::from(a.wrapping_sub(b) as i8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_then_remove_is_empty() {
        let mut s = Sketch::new(50);
        for id in 0..100u32 {
            s.insert(id);
        }
        assert_eq!(s.len(), 100);
        assert_eq!(s.symbols()[0].count, 100);
        for id in 0..100u32 {
            s.remove(id);
        }
        assert!(s.is_empty());
    }

    #[test]
    fn insertion_order_does_not_matter() {
        let mut a = Sketch::new(64);
        let mut b = Sketch::new(64);
        for id in 0..500u32 {
            a.insert(id.wrapping_mul(2_654_435_761));
        }
        for id in (0..500u32).rev() {
            b.insert(id.wrapping_mul(2_654_435_761));
        }
        assert_eq!(a, b);
    }

    #[test]
    fn prefix_of_a_larger_sketch_equals_a_smaller_sketch() {
        let mut big = Sketch::new(200);
        let mut small = Sketch::new(37);
        for id in 0..300u32 {
            big.insert(id * 7 + 1);
            small.insert(id * 7 + 1);
        }
        assert_eq!(&big.symbols()[..37], small.symbols());
        big.truncate(37);
        assert_eq!(big, small);
    }

    #[test]
    fn extend_regenerates_the_same_symbols() {
        let ids: Vec<u32> = (0..400u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        let mut full = Sketch::new(300);
        let mut grown = Sketch::new(40);
        full.insert_all(ids.iter().copied());
        grown.insert_all(ids.iter().copied());
        grown.extend_to(300, ids.iter().copied());
        assert_eq!(full, grown);
    }

    #[test]
    fn new_clamps_to_max_symbols() {
        assert_eq!(Sketch::new(MAX_SYMBOLS + 5).num_symbols(), MAX_SYMBOLS);
    }

    #[test]
    fn subtract_truncates_to_shorter() {
        let mut a = Sketch::new(100);
        let b = Sketch::new(30);
        a.insert(5);
        a.subtract(&b);
        assert_eq!(a.num_symbols(), 30);
        assert_eq!(a.decode().unwrap().missing, vec![5]);
    }

    #[test]
    fn inexact_counts_wrap_as_signed_bytes() {
        assert_eq!(sub_count(3, 260, false), -1);
        assert_eq!(sub_count(300, 45, false), -1);
        assert_eq!(sub_count(3, 260, true), -257);
        assert_eq!(sub_len(1, u32::MAX as i64, false), 2);
    }

    #[test]
    fn generic_widths_work() {
        let mut a = Sketch::<u64>::with_key(80, HashKey::new(9, 9));
        let mut b = Sketch::<u64>::with_key(80, HashKey::new(9, 9));
        for id in 0..1000u64 {
            a.insert(id << 40 | id);
            if id % 50 != 3 {
                b.insert(id << 40 | id);
            }
        }
        a.subtract(&b);
        let mut d = a.decode().unwrap();
        d.missing.sort_unstable();
        let want: Vec<u64> = (0..1000u64)
            .filter(|i| i % 50 == 3)
            .map(|i| i << 40 | i)
            .collect();
        assert_eq!(d.missing, want);

        let mut c = Sketch::<u16>::with_key(40, HashKey::DEFAULT);
        c.insert(7);
        c.insert(9);
        let mut d = c.decode().unwrap();
        d.missing.sort_unstable();
        assert_eq!(d.missing, vec![7, 9]);
    }
}

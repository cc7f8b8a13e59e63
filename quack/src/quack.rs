//! The power-sum quACK (Sidekick (NSDI '24) §3.4).

use core::fmt;
use core::ops::{Sub, SubAssign};

use crate::field::Identifier;
use crate::simd::Kernels;

/// Largest threshold accepted by [`PowerSumQuack::try_new`] and by the wire parser.
///
/// Decoding costs `O(t²)` field operations and the wire form grows by `b` bytes per power sum;
/// 4096 is far above any useful configuration (the papers use `t ≤ 50`) and keeps Newton's
/// identities well defined in the 16-bit field (they divide by `1..=t`, which must stay `< p`).
pub const MAX_THRESHOLD: usize = 4096;

/// Error returned by [`PowerSumQuack::try_new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("threshold {threshold} exceeds the maximum {MAX_THRESHOLD}")]
pub struct ThresholdError {
    /// The rejected threshold.
    pub threshold: usize,
}

/// A power-sum quACK over identifiers of type `T` (`u16`, `u32` or `u64`).
///
/// It holds the first `t` power sums `Σ x^i` (`i = 1..=t`) of a multiset of identifiers modulo
/// the largest prime below `2^b`, the number of identifiers inserted (wrapping `u32`) and the last
/// identifier inserted (Sidekick (NSDI '24) §3.4, "Interface"). The difference of the sender's and the
/// receiver's quACK identifies up to `t` missing identifiers; see
/// [`decode_with_log`](PowerSumQuack::decode_with_log).
///
/// Any number of quACKs with different thresholds and widths can coexist: there is no global
/// state.
///
/// # Example
/// ```
/// use quack::PowerSumQuack;
///
/// let sent = [11u32, 22, 33, 44, 55];
/// let mut sender = PowerSumQuack::<u32>::new(3);
/// let mut receiver = PowerSumQuack::<u32>::new(3);
/// for &id in &sent {
///     sender.insert(id);
///     if id != 33 {
///         receiver.insert(id); // 33 is lost on the way
///     }
/// }
/// // The receiver's quACK travels over the wire.
/// let received = PowerSumQuack::<u32>::from_bytes(&receiver.to_bytes())?;
/// sender -= &received;
/// let decoded = sender.decode_with_log(&sent)?;
/// assert_eq!(decoded.missing_ids().collect::<Vec<_>>(), vec![33]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct PowerSumQuack<T: Identifier> {
    /// Lazily reduced power sums; `acc[i]` ≡ `Σ x^(i+1)` (mod p).
    pub(crate) acc: Vec<u64>,
    /// Lazy insertions since the accumulators were last normalised. Invariant: when it is 0,
    /// every accumulator is canonical (`< p`); every write of `acc` that may leave it
    /// non-canonical adds to it.
    pub(crate) pending: u32,
    /// Count of the identifiers folded into `acc` (the buffered ones are added by
    /// [`count`](Self::count)).
    pub(crate) count: u32,
    /// Last value as of the last flush ([`last_value`](Self::last_value) prefers the buffer).
    pub(crate) last_value: Option<T>,
    /// Ring of the most recent identifiers (widths with [`Identifier::BUFFERED`]); the
    /// [`buf_len`](Self::buf_len) written last, ending before slot `buf_pos % RING`, are not yet
    /// folded into `acc`. An insertion only stores into the ring and advances `buf_pos`; count
    /// and last value are derived from them. When all [`RING`] slots are unfolded, the older
    /// half ([`INSERT_BUFFER`] identifiers, stored 8 or more insertions earlier) is folded in:
    /// those stores have long completed, so the vector loads of the folding code do not stall
    /// on store-to-load forwarding from freshly stored identifiers.
    buf: [T; RING],
    /// Writes into the ring since it was last emptied, kept below `2·RING` (the single counter
    /// of the fast path).
    buf_pos: usize,
    /// Kernels the CPU supports, detected at construction.
    kernels: Kernels,
}

/// Identifiers a quACK of a buffered width collects before folding them into its power sums.
pub(crate) const INSERT_BUFFER: usize = 8;
/// Slots of the insertion ring: two halves of [`INSERT_BUFFER`].
const RING: usize = 2 * INSERT_BUFFER;

impl<T: Identifier> PowerSumQuack<T> {
    /// Creates an empty quACK with `threshold` power sums.
    ///
    /// # Panics
    /// If `threshold > MAX_THRESHOLD`; use [`try_new`](Self::try_new) for thresholds that come
    /// from configuration or the network.
    pub fn new(threshold: usize) -> Self {
        match Self::try_new(threshold) {
            Ok(q) => q,
            Err(e) => panic!("{e}"),
        }
    }

    /// Creates an empty quACK, or an error if `threshold > MAX_THRESHOLD`.
    pub fn try_new(threshold: usize) -> Result<Self, ThresholdError> {
        if threshold > MAX_THRESHOLD {
            return Err(ThresholdError { threshold });
        }
        Ok(Self::from_parts(vec![0; threshold], 0, None))
    }

    /// Builds a quACK from canonical parts (used by the wire parser).
    pub(crate) fn from_parts(acc: Vec<u64>, count: u32, last_value: Option<T>) -> Self {
        Self {
            acc,
            pending: 0,
            count,
            last_value,
            buf: [T::default(); RING],
            buf_pos: 0,
            kernels: Kernels::detect(),
        }
    }

    /// The threshold `t`: the number of power sums, i.e. the most missing identifiers a
    /// difference of two quACKs can decode.
    #[inline]
    pub fn threshold(&self) -> usize {
        self.acc.len()
    }

    /// Number of identifiers in the multiset (insertions minus removals, wrapping at `2^32`).
    #[inline]
    pub fn count(&self) -> u32 {
        self.count.wrapping_add(self.buf_len() as u32)
    }

    /// The identifier inserted last, if any (cleared by [`remove`](Self::remove) of that value
    /// and by subtraction).
    #[inline]
    pub fn last_value(&self) -> Option<T> {
        if self.buf_len() == 0 {
            self.last_value
        } else {
            Some(self.buf[self.buf_pos.wrapping_sub(1) % RING])
        }
    }

    /// Whether no identifier has been inserted (count zero and every power sum zero).
    pub fn is_empty(&self) -> bool {
        self.count() == 0 && self.canonical_sums().iter().all(|&s| s == 0)
    }

    #[inline]
    fn make_room(&mut self, n: u32) {
        if self.pending.saturating_add(n) > T::LAZY_LIMIT {
            self.normalize();
        }
    }

    /// Reduces every accumulator to its canonical value.
    fn normalize(&mut self) {
        for a in &mut self.acc {
            *a = T::acc_canonical(*a);
        }
        self.pending = 0;
    }

    /// Inserts an identifier: `t` modular multiply-adds (Sidekick (NSDI '24) §3.5, "Encoding").
    ///
    /// The multiply-adds of 8 consecutive insertions are done together (independent chains
    /// interleaved; AVX2 for 32-bit identifiers where available): the identifier is buffered and
    /// folded in when the buffer is full.
    /// Every read (power sums, wire form, subtraction, decoding, equality) includes buffered
    /// identifiers, so the buffer is not observable except in the cost profile.
    #[inline(always)]
    pub fn insert(&mut self, id: T) {
        if T::BUFFERED {
            // The whole fast path: one store and one counter update (count and last value are
            // derived from the ring). `% RING` keeps the index provably in bounds.
            let pos = self.buf_pos;
            self.buf[pos % RING] = id;
            self.buf_pos = pos + 1;
            if (pos + 1).is_multiple_of(INSERT_BUFFER) {
                self.fold_half();
            }
        } else {
            self.make_room(1);
            T::acc_insert(&mut self.acc, T::reduce(id.to_u64()));
            self.pending += 1;
            self.count = self.count.wrapping_add(1);
            self.last_value = Some(id);
        }
    }

    /// Identifiers in the ring not yet folded in: all writes until the ring first fills,
    /// then between [`INSERT_BUFFER`] and `RING − 1`.
    #[inline]
    fn buf_len(&self) -> usize {
        if self.buf_pos < RING {
            self.buf_pos
        } else {
            INSERT_BUFFER + self.buf_pos % INSERT_BUFFER
        }
    }

    /// Called when `buf_pos` reaches a multiple of [`INSERT_BUFFER`]: if the ring is full, folds
    /// its older half into the accumulators (kept out of line: the caller's fast path stays a
    /// store, an increment and a test).
    #[inline(never)]
    fn fold_half(&mut self) {
        if self.buf_pos < RING {
            return; // First half written: nothing to fold yet.
        }
        self.make_room(INSERT_BUFFER as u32);
        // The ring is full: its oldest slot is the next one to be written, a half boundary.
        let start = self.buf_pos % RING;
        let half: &[T; INSERT_BUFFER] = if start < INSERT_BUFFER {
            self.buf.first_chunk()
        } else {
            self.buf.last_chunk()
        }
        .unwrap_or_else(|| unreachable!("RING holds two halves"));
        T::acc_insert_full(&mut self.acc, half, self.kernels);
        self.pending += INSERT_BUFFER as u32;
        self.count = self.count.wrapping_add(INSERT_BUFFER as u32);
        // Same slot, same number of unfolded identifiers, bounded counter.
        self.buf_pos = RING + start;
    }

    /// The identifiers in the ring not yet folded in, oldest first, as (up to) two slices.
    fn unfolded(&self) -> (&[T], &[T]) {
        let n = self.buf_len();
        let start = (self.buf_pos - n) % RING;
        if start + n <= RING {
            (&self.buf[start..start + n], &[])
        } else {
            (&self.buf[start..], &self.buf[..start + n - RING])
        }
    }

    /// Folds the ring's identifiers into the accumulators (and into `count` and `last_value`).
    fn flush(&mut self) {
        let n = self.buf_len();
        if n > 0 {
            self.make_room(n as u32);
            let mut acc = core::mem::take(&mut self.acc);
            let (a, b) = self.unfolded();
            T::acc_insert_batch(&mut acc, a, self.kernels);
            T::acc_insert_batch(&mut acc, b, self.kernels);
            self.acc = acc;
            self.last_value = self.last_value();
            self.pending += n as u32;
            self.count = self.count.wrapping_add(n as u32);
            self.buf_pos = 0;
        }
    }

    /// Inserts several identifiers in order (same result as repeated [`insert`](Self::insert),
    /// with the arithmetic of several identifiers interleaved).
    pub fn insert_batch(&mut self, ids: &[T]) {
        let Some(&last) = ids.last() else { return };
        self.flush();
        // Chunks keep the lazy-reduction bound valid for arbitrarily long batches.
        for chunk in ids.chunks(1 << 16) {
            self.make_room(chunk.len() as u32);
            T::acc_insert_batch(&mut self.acc, chunk, self.kernels);
            self.pending += chunk.len() as u32;
        }
        self.count = self.count.wrapping_add(ids.len() as u32);
        self.last_value = Some(last);
    }

    /// Removes one occurrence of an identifier (multiset semantics: the inverse of
    /// [`insert`](Self::insert)). Removing an identifier that was never inserted yields a quACK
    /// with "negative" multiplicity, which subtraction and decoding treat consistently.
    pub fn remove(&mut self, id: T) {
        self.flush();
        self.make_room(1);
        let x = T::reduce(id.to_u64());
        let mut y = x;
        for a in &mut self.acc {
            // Adding p - y (< p < 2^b) keeps the lazy bound of an insertion.
            *a = T::acc_add(*a, T::neg_mod(y));
            y = T::mul_mod(y, x);
        }
        self.pending += 1;
        self.count = self.count.wrapping_sub(1);
        if self.last_value == Some(id) {
            self.last_value = None;
        }
    }

    /// Subtracts another quACK: power sums, counts (wrapping). The result represents the
    /// multiset difference. If the thresholds differ, the result keeps the smaller threshold
    /// (the first `min(t₁, t₂)` power sums are still exact), so this never panics. The last
    /// value of the result is cleared.
    pub fn sub_assign(&mut self, other: &Self) {
        let t = other.threshold();
        let (mine, theirs) = (self.buf_len(), other.buf_len());
        if mine + theirs > 0 {
            // Both rings' unfolded identifiers in one pass, this quACK's added and the
            // subtrahend's negated (no scratch copy of its sums); its accumulators are then
            // subtracted entry by entry. Sums beyond the smaller threshold are dropped first.
            // A negated identifier adds less than 64·p (u32 blocks) or p (other widths), a
            // lane of the one-pass u32 kernel less than one insertion's worth (padding lanes
            // included): 16 lazy insertions per identifier cover all of them.
            let room = 16 * (mine + theirs) as u32;
            self.make_room(room);
            self.acc.truncate(t);
            let mut acc = core::mem::take(&mut self.acc);
            let (a, b) = self.unfolded();
            let (c, d) = other.unfolded();
            T::acc_fold_signed(&mut acc, [a, b], [c, d], self.kernels);
            self.acc = acc;
            self.pending += room;
            self.count = self.count.wrapping_add(mine as u32);
            self.buf_pos = 0;
        }
        self.sub_parts(t, other.count(), |i| T::acc_canonical(other.acc[i]));
    }

    /// The accumulators if they are canonical and nothing is left in the insertion ring (as
    /// after a subtraction or parsing): the power sums without a copy.
    #[inline]
    pub(crate) fn canonical_acc(&self) -> Option<&[u64]> {
        (self.pending == 0 && self.buf_len() == 0).then_some(&self.acc)
    }

    /// Subtraction where `other_sum(i)` yields the canonical `i`-th power sum of the subtrahend.
    pub(crate) fn sub_parts(
        &mut self,
        other_t: usize,
        other_count: u32,
        other_sum: impl Fn(usize) -> u64,
    ) {
        self.flush();
        self.acc.truncate(other_t);
        for (i, a) in self.acc.iter_mut().enumerate() {
            *a = T::sub_mod(T::acc_canonical(*a), other_sum(i));
        }
        self.pending = 0;
        self.count = self.count.wrapping_sub(other_count);
        self.last_value = None;
    }

    /// The `i`-th power sum (`i` from 0, i.e. `Σ x^(i+1)`) as a canonical field element.
    ///
    /// # Panics
    /// If `i >= threshold()`.
    pub fn power_sum(&self, i: usize) -> T {
        T::from_u64_truncating(self.canonical_sums()[i])
    }

    /// The `t` power sums as canonical field elements.
    pub fn power_sums(&self) -> impl ExactSizeIterator<Item = T> + use<T> {
        self.canonical_sums()
            .into_iter()
            .map(T::from_u64_truncating)
    }

    /// Canonical power sums as `u64` field values, buffered identifiers included.
    pub(crate) fn canonical_sums(&self) -> Vec<u64> {
        let mut sums = vec![0; self.acc.len()];
        self.canonical_sums_to(&mut sums);
        sums
    }

    /// Writes the canonical power sums into `sums` (of length [`threshold`](Self::threshold)).
    pub(crate) fn canonical_sums_to(&self, sums: &mut [u64]) {
        sums.copy_from_slice(&self.acc);
        let n = self.buf_len();
        if n > 0 {
            // The scratch copy takes the unfolded identifiers lazily; normalise first if that
            // would exceed the lazy bound.
            if self.pending.saturating_add(n as u32) > T::LAZY_LIMIT {
                for a in sums.iter_mut() {
                    *a = T::acc_canonical(*a);
                }
            }
            let (a, b) = self.unfolded();
            T::acc_insert_batch(sums, a, self.kernels);
            T::acc_insert_batch(sums, b, self.kernels);
        }
        for a in sums.iter_mut() {
            *a = T::acc_canonical(*a);
        }
    }

    /// Resets to the empty quACK, keeping the threshold.
    pub fn clear(&mut self) {
        self.acc.fill(0);
        self.buf_pos = 0;
        self.pending = 0;
        self.count = 0;
        self.last_value = None;
    }
}

impl<T: Identifier> PartialEq for PowerSumQuack<T> {
    fn eq(&self, other: &Self) -> bool {
        self.count() == other.count()
            && self.last_value() == other.last_value()
            && self.threshold() == other.threshold()
            && self.canonical_sums() == other.canonical_sums()
    }
}

impl<T: Identifier> Eq for PowerSumQuack<T> {}

impl<T: Identifier> fmt::Debug for PowerSumQuack<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PowerSumQuack")
            .field("threshold", &self.threshold())
            .field("count", &self.count())
            .field("last_value", &self.last_value())
            .field("power_sums", &self.power_sums().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<T: Identifier> SubAssign<&PowerSumQuack<T>> for PowerSumQuack<T> {
    fn sub_assign(&mut self, rhs: &PowerSumQuack<T>) {
        PowerSumQuack::sub_assign(self, rhs);
    }
}

impl<T: Identifier> SubAssign for PowerSumQuack<T> {
    fn sub_assign(&mut self, rhs: PowerSumQuack<T>) {
        PowerSumQuack::sub_assign(self, &rhs);
    }
}

impl<T: Identifier> Sub<&PowerSumQuack<T>> for PowerSumQuack<T> {
    type Output = PowerSumQuack<T>;
    fn sub(mut self, rhs: &PowerSumQuack<T>) -> PowerSumQuack<T> {
        PowerSumQuack::sub_assign(&mut self, rhs);
        self
    }
}

impl<T: Identifier> Sub for PowerSumQuack<T> {
    type Output = PowerSumQuack<T>;
    fn sub(mut self, rhs: PowerSumQuack<T>) -> PowerSumQuack<T> {
        PowerSumQuack::sub_assign(&mut self, &rhs);
        self
    }
}

impl<T: Identifier> Sub<&PowerSumQuack<T>> for &PowerSumQuack<T> {
    type Output = PowerSumQuack<T>;
    fn sub(self, rhs: &PowerSumQuack<T>) -> PowerSumQuack<T> {
        let mut out = self.clone();
        PowerSumQuack::sub_assign(&mut out, rhs);
        out
    }
}

impl<T: Identifier> Extend<T> for PowerSumQuack<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for id in iter {
            self.insert(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_then_remove_is_empty() {
        let mut q = PowerSumQuack::<u32>::new(10);
        q.insert(5);
        q.insert(u32::MAX);
        q.remove(5);
        q.remove(u32::MAX);
        assert!(q.is_empty());
        assert_eq!(q.count(), 0);
        assert_eq!(q, PowerSumQuack::new(10));
    }

    #[test]
    fn power_sums_are_power_sums() {
        let mut q = PowerSumQuack::<u16>::new(3);
        q.insert(2);
        q.insert(3);
        assert_eq!(q.power_sums().collect::<Vec<_>>(), vec![5, 13, 35]);
        assert_eq!(q.count(), 2);
        assert_eq!(q.last_value(), Some(3));
    }

    #[test]
    fn batch_equals_sequential() {
        let ids: Vec<u32> = (0..1001u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let mut a = PowerSumQuack::<u32>::new(20);
        let mut b = PowerSumQuack::<u32>::new(20);
        a.insert_batch(&ids);
        for &id in &ids {
            b.insert(id);
        }
        assert_eq!(a, b);
    }

    proptest::proptest! {
        /// The portable code and the detected (AVX2 where available) kernels give the same
        /// quACK through the insertion ring, batches and removals.
        #[test]
        fn portable_and_detected_kernels_agree(
            ids in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..100),
            t in 1usize..=64,
            split in 0usize..100,
        ) {
            let mut a = PowerSumQuack::<u32>::new(t);
            a.kernels = Kernels::PORTABLE;
            let mut b = PowerSumQuack::<u32>::new(t);
            let split = split.min(ids.len());
            for q in [&mut a, &mut b] {
                for &x in &ids[..split] {
                    q.insert(x);
                }
                q.insert_batch(&ids[split..]);
                for &x in &ids[split..] {
                    q.insert(x);
                }
                if let Some(&x) = ids.first() {
                    q.remove(x);
                }
            }
            proptest::prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn mismatched_thresholds_subtract_to_the_smaller() {
        let mut a = PowerSumQuack::<u64>::new(8);
        let mut b = PowerSumQuack::<u64>::new(5);
        a.insert(7);
        a.insert(9);
        b.insert(7);
        a -= &b;
        assert_eq!(a.threshold(), 5);
        assert_eq!(a.count(), 1);
        assert_eq!(a.power_sum(1), 81);
    }

    #[test]
    fn threshold_cap() {
        assert!(PowerSumQuack::<u32>::try_new(MAX_THRESHOLD).is_ok());
        assert_eq!(
            PowerSumQuack::<u32>::try_new(MAX_THRESHOLD + 1),
            Err(ThresholdError {
                threshold: MAX_THRESHOLD + 1
            })
        );
    }

    #[test]
    fn lazy_limit_normalises() {
        let mut q = PowerSumQuack::<u16>::new(2);
        q.pending = u16::LAZY_LIMIT;
        q.acc = vec![u64::MAX - 10, 7];
        q.remove(1);
        assert_eq!(q.pending, 1);
        assert_eq!(q.power_sum(1), 6);
        // Buffered width: the fold of 8 identifiers (once the ring holds 16) normalises first.
        let mut q = PowerSumQuack::<u32>::new(2);
        q.pending = u32::LAZY_LIMIT - 3;
        q.acc = vec![u64::MAX - 10, 7];
        q.insert_batch(&[]);
        for _ in 0..16 {
            q.insert(1);
        }
        assert_eq!(q.pending, 8);
        assert_eq!(q.buf_len(), 8);
        assert_eq!(q.power_sum(1), 23);
        let want = (u128::from(u64::MAX) - 10 + 16) % u128::from(u32::MODULUS);
        assert_eq!(u128::from(q.power_sum(0)), want);
    }
}

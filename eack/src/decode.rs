//! Peeling decoder (Packrat (CoNEXT '26) §5.1; Yang et al. SIGCOMM '24 §4.2).

use thiserror::Error;

use crate::hash::HashKey;
use crate::id::Id;
use crate::mapping::IndexWalk;
use crate::sketch::{CodedSymbol, Sketch, sub_count, sub_len};

/// Both sides of a decoded set difference `A − B` (see [`Sketch::subtract`]).
///
/// For an eACK decoded at the proxy (`proxy − client`), `missing` lists packets the proxy
/// forwarded that the client has not received — the ones to retransmit — and `extra` lists
/// packets the client reports that the proxy never recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Difference<I: Id = u32> {
    /// Identifiers in the minuend's set (the proxy's view) absent from the subtrahend's (the
    /// client's).
    pub missing: Vec<I>,
    /// Identifiers in the subtrahend's set absent from the minuend's.
    pub extra: Vec<I>,
}

impl<I: Id> Difference<I> {
    /// True when both sides are empty.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty()
    }

    /// Total number of identifiers in the difference.
    pub fn len(&self) -> usize {
        self.missing.len() + self.extra.len()
    }

    /// Empties both lists (keeps their capacity).
    pub fn clear(&mut self) {
        self.missing.clear();
        self.extra.clear();
    }
}

/// Why a sketch could not be decoded. Every failure is detected; a decode never returns a wrong
/// difference except with the probability of a 32-bit checksum collision.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Peeling stalled: too few coded symbols for the size of the difference (send a longer
    /// prefix, or reset).
    #[error(
        "undecodable: peeling stalled after {recovered} identifiers with {remaining} non-empty coded symbols left"
    )]
    Undecodable {
        /// Identifiers recovered before the stall.
        recovered: usize,
        /// Coded symbols left non-empty.
        remaining: usize,
    },
    /// A coded symbol's identifier sum and checksum sum disagree: corruption, a different hash
    /// key on the two sides, or an identifier collision.
    #[error("checksum mismatch at coded symbol {index}")]
    ChecksumMismatch {
        /// Index of the offending symbol.
        index: usize,
    },
    /// Counts disagree with the identifiers: a count wrapped modulo 256 on the wire (more than
    /// 127 differing elements in one symbol) or the same identifier differs more than once (the
    /// set sizes in symbol 0 do not match what was peeled).
    #[error("count overflow at coded symbol {index}")]
    CountOverflow {
        /// Index of the offending symbol.
        index: usize,
    },
}

/// Reusable decoding scratch: decoding with one `Decoder` allocates only when a sketch is larger
/// than any seen before.
///
/// ```
/// use eack::{Decoder, Difference, Sketch};
///
/// let (mut a, mut b) = (Sketch::new(40), Sketch::new(40));
/// a.insert_all([1, 2, 3, 4]);
/// b.insert_all([1, 2, 5]);
/// let mut dec = Decoder::new();
/// let mut out = Difference::default();
/// dec.decode_difference(&a, &b, &mut out).unwrap();
/// out.missing.sort();
/// assert_eq!(out.missing, vec![3, 4]);
/// assert_eq!(out.extra, vec![5]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Decoder<I: Id = u32> {
    symbols: Vec<CodedSymbol<I>>,
    queue: Vec<u32>,
}

impl<I: Id> Decoder<I> {
    /// An empty decoder.
    pub fn new() -> Self {
        Decoder {
            symbols: Vec::new(),
            queue: Vec::new(),
        }
    }

    /// Decodes `sketch` (read as a difference) into `out` (cleared first).
    pub fn decode(
        &mut self,
        sketch: &Sketch<I>,
        out: &mut Difference<I>,
    ) -> Result<(), DecodeError> {
        out.clear();
        self.symbols.clear();
        self.symbols.extend_from_slice(&sketch.symbols);
        let exact = sketch.exact;
        if !exact {
            // Counts known modulo 256: read as signed bytes; symbol 0 holds the exact size.
            for s in &mut self.symbols {
                s.count = sub_count(s.count, 0, false);
            }
            if let Some(s0) = self.symbols.first_mut() {
                s0.count = sub_len(sketch.len, 0, false);
            }
        }
        let len_diff = sub_len(sketch.len, 0, exact);
        peel(
            len_diff,
            &mut self.symbols,
            &sketch.key,
            &mut self.queue,
            out,
        )
    }

    /// Decodes `minuend − subtrahend` without materialising the difference sketch (the proxy's
    /// hot path: `minuend` is its local sketch, `subtrahend` the received eACK). Uses the
    /// minuend's key and `min` of both sizes.
    pub fn decode_difference(
        &mut self,
        minuend: &Sketch<I>,
        subtrahend: &Sketch<I>,
        out: &mut Difference<I>,
    ) -> Result<(), DecodeError> {
        out.clear();
        let exact = minuend.exact && subtrahend.exact;
        self.symbols.clear();
        self.symbols.extend(
            minuend
                .symbols
                .iter()
                .zip(&subtrahend.symbols)
                .map(|(a, b)| CodedSymbol {
                    id_sum: a.id_sum.xor(b.id_sum),
                    checksum: a.checksum ^ b.checksum,
                    count: sub_count(a.count, b.count, exact),
                }),
        );
        let len_diff = sub_len(minuend.len, subtrahend.len, exact);
        if let Some(s0) = self.symbols.first_mut() {
            s0.count = len_diff;
        }
        peel(
            len_diff,
            &mut self.symbols,
            &minuend.key,
            &mut self.queue,
            out,
        )
    }
}

#[inline(always)]
fn is_unit(count: i64) -> bool {
    count == 1 || count == -1
}

/// A symbol found pure: its index, its content when found, and the hash of its identifier.
#[derive(Clone, Copy)]
struct Pure<I: Id> {
    index: usize,
    sym: CodedSymbol<I>,
    hash: u64,
}

/// Pops queue entries until one is a pure symbol (count ±1 and the checksum of its identifier
/// sum matches).
#[inline(always)]
fn pop_pure<I: Id>(
    queue: &[u32],
    qlen: &mut usize,
    syms: &[CodedSymbol<I>],
    key: &HashKey,
) -> Option<Pure<I>> {
    while *qlen > 0 {
        *qlen -= 1;
        let index = queue[*qlen] as usize;
        let Some(&sym) = syms.get(index) else {
            continue;
        };
        if !is_unit(sym.count) {
            continue;
        }
        let hash = key.hash(sym.id_sum.to_u64());
        if (hash >> 32) as u32 != sym.checksum {
            // Not pure (yet): more than one element, counts cancelling to ±1.
            continue;
        }
        return Some(Pure { index, sym, hash });
    }
    None
}

/// Removes an element (count `c`) from each of its symbols and writes the indices of those that
/// become ±1 to the front of `pushed`; returns how many. `pushed` must have room for one entry
/// per symbol. Kept out of line: a small register working set for the hot loop.
#[inline(never)]
fn remove_element<I: Id>(
    syms: &mut [CodedSymbol<I>],
    pushed: &mut [u32],
    id: I,
    checksum: u32,
    c: i64,
    hash: u64,
) -> usize {
    let mut k = 0usize;
    let mut walk = IndexWalk::new(hash);
    let bound = IndexWalk::bound(syms.len());
    while walk.below(bound) {
        let j = walk.index();
        let Some(t) = syms.get_mut(j) else { break };
        t.apply(id, checksum, -c);
        if let Some(slot) = pushed.get_mut(k) {
            *slot = j as u32;
        }
        k += usize::from(is_unit(t.count));
        walk.advance();
    }
    k
}

/// Peels `syms` in place, appending recovered identifiers to `out`.
fn peel<I: Id>(
    len_diff: i64,
    syms: &mut [CodedSymbol<I>],
    key: &HashKey,
    queue: &mut Vec<u32>,
    out: &mut Difference<I>,
) -> Result<(), DecodeError> {
    // The queue of candidate pure symbols is a stack with a manual length, written without a
    // data-dependent branch: every touched symbol is stored and the length advances only when
    // its count is ±1 (the branch would mispredict often).
    let n = syms.len();
    if queue.len() < 2 * n + 64 {
        queue.resize(2 * n + 64, 0);
    }
    let mut qlen = 0usize;
    for (i, s) in syms.iter().enumerate() {
        queue[qlen] = i as u32;
        qlen += usize::from(is_unit(s.count));
    }
    // Software pipelining: the next pure symbol (and its identifier's hash) is found before the
    // current element is walked, so that work does not wait for the walk's last step. The walk
    // cannot touch a pure symbol of another element (it would then hold two elements); if it did
    // change the look-ahead's symbol (the same symbol queued twice, or the same element pure in
    // two symbols), the look-ahead is validated again.
    let mut next = pop_pure(queue, &mut qlen, syms, key);
    while let Some(cur) = next {
        // A genuine difference empties one symbol for good with each element peeled, so it
        // never yields more than `n`; a hostile sketch can hand the same identifier back and
        // forth between symbols forever.
        if out.len() >= n {
            return Err(DecodeError::CountOverflow { index: cur.index });
        }
        if queue.len() < qlen + n + 2 {
            queue.resize(qlen + n + 64, 0);
        }
        next = pop_pure(queue, &mut qlen, syms, key);
        let (id, checksum, c) = (cur.sym.id_sum, cur.sym.checksum, cur.sym.count);
        if c == 1 {
            out.missing.push(id);
        } else {
            out.extra.push(id);
        }
        // A walk touches at most n symbols; the queue has room for all of them (and one more).
        qlen += remove_element(syms, &mut queue[qlen..], id, checksum, c, cur.hash);
        // Symbol i held exactly this element (count c): if the walk passed through it, its count
        // is now 0, otherwise it is still c.
        if syms[cur.index].count != 0 {
            // The checksum matched but the element does not map to this symbol: a checksum
            // collision or corruption; the peeled element is not trustworthy.
            return Err(DecodeError::ChecksumMismatch { index: cur.index });
        }
        match next {
            // Changed by the walk: queue it again and take the next valid candidate.
            Some(p) if syms[p.index] != p.sym => {
                queue[qlen] = p.index as u32;
                qlen += 1;
                next = pop_pure(queue, &mut qlen, syms, key);
            }
            // The queue was empty before the walk: take what the walk queued.
            None => next = pop_pure(queue, &mut qlen, syms, key),
            Some(_) => {}
        }
    }
    let mut remaining = 0usize;
    let mut count_only = None;
    let mut has_ids = false;
    for (i, s) in syms.iter().enumerate() {
        if s.is_empty() {
            continue;
        }
        remaining += 1;
        if s.id_sum == I::ZERO && s.checksum == 0 {
            count_only.get_or_insert(i);
        } else {
            has_ids = true;
        }
    }
    let peeled = out.missing.len() as i64 - out.extra.len() as i64;
    match (remaining, has_ids, count_only) {
        (0, _, _) if peeled == len_diff => Ok(()),
        // Every symbol is empty but the sizes disagree: only possible without symbol 0.
        (0, _, _) if syms.is_empty() => Err(DecodeError::Undecodable {
            recovered: out.len(),
            remaining: 0,
        }),
        (0, _, _) => Err(DecodeError::CountOverflow { index: 0 }),
        (_, false, Some(index)) => Err(DecodeError::CountOverflow { index }),
        _ => Err(DecodeError::Undecodable {
            recovered: out.len(),
            remaining,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `wire` fuzz target (a 10 s timeout): a crafted eACK whose symbols hand an
    /// identifier back and forth kept the peeling loop going forever. Decoding now stops after
    /// as many identifiers as there are symbols.
    #[test]
    fn a_peeling_cycle_ends() {
        let bytes = include_bytes!("../fuzz/corpus/wire/regression-peeling-cycle");
        let s = Sketch::decode_prefix(bytes).unwrap();
        let start = std::time::Instant::now();
        let r = s.decode();
        assert!(r.is_err(), "{r:?}");
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        // Legitimate differences up to the symbol count still decode.
        let mut a = Sketch::new(64);
        a.insert_all(0..40u32);
        let mut b = Sketch::new(64);
        b.insert_all(10..40u32);
        assert_eq!(a.difference(&b).decode().unwrap().missing.len(), 10);
    }

    #[test]
    fn empty_difference_decodes_to_nothing() {
        let mut a = Sketch::new(10);
        a.insert_all(0..50);
        let d = a.difference(&a).decode().unwrap();
        assert!(d.is_empty());
    }

    #[test]
    fn both_directions() {
        let mut a = Sketch::new(60);
        let mut b = Sketch::new(60);
        a.insert_all(0..100);
        b.insert_all(10..110);
        let mut d = a.difference(&b).decode().unwrap();
        d.missing.sort_unstable();
        d.extra.sort_unstable();
        assert_eq!(d.missing, (0..10).collect::<Vec<u32>>());
        assert_eq!(d.extra, (100..110).collect::<Vec<u32>>());
    }

    #[test]
    fn zero_symbols_decode_only_an_empty_difference() {
        let mut a = Sketch::new(0);
        assert_eq!(a.decode(), Ok(Difference::default()));
        a.insert(3);
        assert_eq!(
            a.decode(),
            Err(DecodeError::Undecodable {
                recovered: 0,
                remaining: 0
            })
        );
    }

    #[test]
    fn too_few_symbols_is_undecodable() {
        let mut a = Sketch::new(5);
        a.insert_all(0..40);
        match a.decode() {
            Err(DecodeError::Undecodable { remaining, .. }) => assert!(remaining > 0),
            other => panic!("expected Undecodable, got {other:?}"),
        }
    }

    #[test]
    fn key_mismatch_is_detected() {
        let mut a = Sketch::<u32>::with_key(40, HashKey::new(1, 1));
        let mut b = Sketch::<u32>::with_key(40, HashKey::new(2, 2));
        a.insert_all(0..10);
        b.insert_all(0..8);
        // b's symbols were built with another key: decoding a − b must fail, not invent ids.
        assert!(a.difference(&b).decode().is_err());
    }

    #[test]
    fn duplicated_missing_identifier_is_a_count_error() {
        let mut a = Sketch::new(30);
        a.insert(77);
        a.insert(77);
        assert_eq!(a.decode(), Err(DecodeError::CountOverflow { index: 0 }));
    }

    #[test]
    fn corrupted_checksum_is_detected() {
        let mut a = Sketch::new(30);
        a.insert(1234);
        a.symbols[0].checksum ^= 1;
        assert!(matches!(
            a.decode(),
            Err(DecodeError::Undecodable { .. } | DecodeError::ChecksumMismatch { .. })
        ));
        let mut b = Sketch::new(30);
        b.symbols[3].checksum = 5;
        assert_eq!(
            b.decode(),
            Err(DecodeError::Undecodable {
                recovered: 0,
                remaining: 1
            })
        );
        // A symbol that looks pure (count 1, matching checksum) but whose identifier does not
        // map to it is a detected checksum collision.
        let mut c = Sketch::new(30);
        let id = (0..u32::MAX)
            .find(|&id| {
                crate::mapping::Indices::new(HashKey::DEFAULT.hash(u64::from(id)), 30)
                    .all(|i| i != 7)
            })
            .unwrap();
        c.symbols[7] = CodedSymbol {
            id_sum: id,
            checksum: HashKey::DEFAULT.checksum(u64::from(id)),
            count: 1,
        };
        assert_eq!(c.decode(), Err(DecodeError::ChecksumMismatch { index: 7 }));
    }

    /// Textbook peeling: repeatedly take the lowest-index pure symbol.
    fn reference_peel(sketch: &Sketch<u32>) -> Option<(Vec<u32>, Vec<u32>)> {
        let key = sketch.key;
        let mut syms = sketch.symbols.clone();
        let (mut missing, mut extra) = (Vec::new(), Vec::new());
        while let Some(i) = (0..syms.len()).find(|&i| {
            is_unit(syms[i].count) && key.checksum(u64::from(syms[i].id_sum)) == syms[i].checksum
        }) {
            let s = syms[i];
            if s.count == 1 {
                missing.push(s.id_sum);
            } else {
                extra.push(s.id_sum);
            }
            for j in crate::mapping::Indices::new(key.hash(u64::from(s.id_sum)), syms.len()) {
                syms[j].apply(s.id_sum, s.checksum, -s.count);
            }
        }
        missing.sort_unstable();
        extra.sort_unstable();
        syms.iter()
            .all(CodedSymbol::is_empty)
            .then_some((missing, extra))
    }

    #[test]
    fn peeling_matches_the_textbook_peeler() {
        // Random two-sided differences at prefix lengths around the decoding threshold (many
        // undecodable): the pipelined peeler succeeds exactly when textbook peeling does, with
        // the same result.
        let mut rng = crate::experiment::SplitMix::new(77);
        let (mut ok, mut failed) = (0, 0);
        for trial in 0..3000u64 {
            let m = 1 + (rng.next_u64() % 40) as usize;
            let n = (m / 2 + (rng.next_u64() % (2 * m as u64 + 4)) as usize).max(1);
            let ids = rng.distinct_ids(m + 200);
            let mut a = Sketch::with_key(n, HashKey::new(trial, 3));
            let mut b = Sketch::with_key(n, HashKey::new(trial, 3));
            let split = (rng.next_u64() % (m as u64 + 1)) as usize;
            a.insert_all(ids[..split].iter().copied());
            b.insert_all(ids[split..m].iter().copied());
            a.insert_all(ids[m..].iter().copied());
            b.insert_all(ids[m..].iter().copied());
            let d = a.difference(&b);
            let got = d.decode().ok().map(|mut r| {
                r.missing.sort_unstable();
                r.extra.sort_unstable();
                (r.missing, r.extra)
            });
            let want = reference_peel(&d);
            assert_eq!(got, want, "trial {trial}, m = {m}, n = {n}");
            if want.is_some() {
                ok += 1;
            } else {
                failed += 1;
            }
        }
        assert!(ok > 500 && failed > 500, "{ok} decodable, {failed} not");
    }

    #[test]
    fn decoder_is_reusable() {
        let mut dec = Decoder::new();
        let mut out = Difference::default();
        for m in [1u32, 20, 3] {
            let mut a = Sketch::new(120);
            let mut b = Sketch::new(120);
            a.insert_all(0..200);
            b.insert_all(m..200);
            dec.decode_difference(&a, &b, &mut out).unwrap();
            out.missing.sort_unstable();
            assert_eq!(out.missing, (0..m).collect::<Vec<u32>>());
            // Same result through the materialised difference.
            let mut d = a.difference(&b).decode().unwrap();
            d.missing.sort_unstable();
            assert_eq!(d, out);
        }
    }
}

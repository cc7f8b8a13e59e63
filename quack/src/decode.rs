//! Decoding a quACK difference against the sender's candidate log (Sidekick (NSDI '24) §3.4–3.5).
//!
//! Newton's identities turn the `m` power sums of the missing multiset into the coefficients of
//! `P(x) = Π (x − r)` over the missing identifiers `r`; evaluating `P` at every candidate of the
//! log finds the missing ones ("plug in candidate roots", faster than factoring for
//! `n < ~40 000`, Sidekick (NSDI '24) §3.5 "Decoding").

use crate::field::{Identifier, eval_monic};
use crate::quack::PowerSumQuack;

/// Why a quACK difference could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// More identifiers are missing than the threshold allows. A count difference that wrapped
    /// below zero (the subtrahend counted more identifiers) also lands here, as a huge `missing`.
    #[error("{missing} identifiers missing, more than the threshold {threshold}")]
    TooManyMissing {
        /// The count of the difference (`sender.count() - receiver.count()`, wrapping).
        missing: u32,
        /// The threshold of the quACK.
        threshold: usize,
    },
    /// The power sums beyond the `m`-th disagree with the first `m`: the two quACKs do not
    /// describe a sender multiset and a sub-multiset of it (different identifiers, a corrupted
    /// quACK or a count that does not match the sums).
    #[error("power sums are inconsistent with a difference of {missing} identifiers")]
    InconsistentPowerSums {
        /// The count of the difference.
        missing: u32,
    },
    /// The roots of the polynomial found among the candidates do not account for the `m`
    /// missing identifiers (the log lacks identifiers that went missing, or lists an identifier
    /// fewer times than it is missing).
    #[error("the log accounts for {accounted} of {missing} missing identifiers")]
    InconsistentWithLog {
        /// The count of the difference.
        missing: u32,
        /// How many of them the log explains.
        accounted: u32,
    },
    /// Root finding without a log did not find `m` roots in the field: the polynomial has
    /// irreducible factors of degree ≥ 2, so the difference is not a multiset of identifiers.
    #[error("the polynomial has {found} roots in the field, expected {missing}")]
    NotSplit {
        /// The count of the difference.
        missing: u32,
        /// Roots found, with multiplicity.
        found: u32,
    },
}

/// A log entry found missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Missing<T> {
    /// Position of the entry in the candidate log.
    pub index: usize,
    /// The identifier at that position.
    pub id: T,
}

/// Log entries that share one field value, of which only some are missing: the decode cannot
/// tell which (Sidekick (NSDI '24) §3 collision handling: report, never guess).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indeterminate<T> {
    /// How many of the candidates are missing (`0 < missing < candidates.len()`).
    pub missing: u32,
    /// The log entries that share the field value, in log order.
    pub candidates: Vec<Missing<T>>,
}

impl<T: Identifier> Indeterminate<T> {
    /// The identifier if all candidates carry the same one (an identical resend: the
    /// identifier is known to be missing `missing` times, only the copy is unknown); `None` if
    /// distinct identifiers collide in the field (e.g. `x` and `x + p`).
    pub fn common_id(&self) -> Option<T> {
        let first = self.candidates.first()?.id;
        self.candidates
            .iter()
            .all(|c| c.id == first)
            .then_some(first)
    }
}

/// The result of [`PowerSumQuack::decode_with_log`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decoded<T> {
    /// Entries determined missing, in log order.
    pub(crate) missing: Vec<Missing<T>>,
    /// Groups of entries of which some are missing, ordered by their first log index.
    pub(crate) indeterminate: Vec<Indeterminate<T>>,
}

impl<T: Identifier> Decoded<T> {
    /// Log entries determined missing, in log order.
    pub fn missing(&self) -> &[Missing<T>] {
        &self.missing
    }

    /// Identifiers of the entries determined missing, in log order.
    pub fn missing_ids(&self) -> impl Iterator<Item = T> + '_ {
        self.missing.iter().map(|m| m.id)
    }

    /// Indices (into the log) of the entries determined missing, ascending.
    pub fn missing_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.missing.iter().map(|m| m.index)
    }

    /// Groups of log entries that collide in the field and of which only some are missing.
    pub fn indeterminate(&self) -> &[Indeterminate<T>] {
        &self.indeterminate
    }

    /// Whether every missing identifier was attributed to specific log entries.
    pub fn is_determinate(&self) -> bool {
        self.indeterminate.is_empty()
    }

    /// The missing multiset of identifiers, where it is known: determinate entries plus, for
    /// indeterminate groups whose candidates all carry the same identifier, that identifier
    /// `missing` times. Groups of distinct colliding identifiers are left out.
    pub fn missing_multiset(&self) -> Vec<T> {
        let mut out: Vec<T> = self.missing_ids().collect();
        for g in &self.indeterminate {
            if let Some(id) = g.common_id() {
                out.extend(core::iter::repeat_n(id, g.missing as usize));
            }
        }
        out
    }

    /// Total number of missing identifiers (determinate and indeterminate); equals the count of
    /// the decoded quACK difference.
    pub fn missing_count(&self) -> usize {
        self.missing.len()
            + self
                .indeterminate
                .iter()
                .map(|g| g.missing as usize)
                .sum::<usize>()
    }
}

/// Reusable scratch space for decoding: keeps the hot path free of allocation apart from the
/// returned [`Decoded`].
///
/// ```
/// use quack::{Decoder, PowerSumQuack};
///
/// let log = [1u32, 2, 3, 4];
/// let mut sent = PowerSumQuack::<u32>::new(4);
/// sent.insert_batch(&log);
/// let mut got = PowerSumQuack::<u32>::new(4);
/// got.insert_batch(&[1, 4]);
/// let mut decoder = Decoder::new();
/// let d = decoder.decode(&(&sent - &got), &log)?;
/// assert_eq!(d.missing_indices().collect::<Vec<_>>(), vec![1, 2]);
/// # Ok::<(), quack::DecodeError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    sums: Vec<u64>,
    coeffs: Vec<u64>,
    inverses: Vec<u64>,
    inverses_modulus: u64,
    work: Vec<u64>,
    groups: Vec<(u64, usize)>,
    /// Kernels the CPU supports, detected at construction.
    kernels: crate::simd::Kernels,
}

/// Thresholds up to this use stack scratch in [`PowerSumQuack::decode_with_log`] and the
/// compile-time table of inverses [`Identifier::SMALL_INVERSES`].
pub(crate) const SMALL_T: usize = 64;

/// The buffers one decode works in (borrowed from a [`Decoder`] or from the stack).
struct Scratch<'a> {
    /// Canonical power sums, `t` of them.
    sums: &'a mut [u64],
    /// The `m` coefficients.
    coeffs: &'a mut [u64],
    /// `inverses[k]` = 1/k for `k ≤ m`.
    inverses: &'a [u64],
    /// Scratch of the collision path (empty and unallocated unless hits collide).
    groups: &'a mut Vec<(u64, usize)>,
    work: &'a mut Vec<u64>,
    kernels: crate::simd::Kernels,
}

impl Decoder {
    /// A decoder with empty scratch buffers (they grow to the largest threshold seen).
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the quACK difference `diff` (sender minus receiver) against the sender's log of
    /// candidate identifiers. See [`PowerSumQuack::decode_with_log`].
    pub fn decode<T: Identifier>(
        &mut self,
        diff: &PowerSumQuack<T>,
        log: &[T],
    ) -> Result<Decoded<T>, DecodeError> {
        let mut out = Decoded::default();
        self.decode_into(diff, log, &mut out)?;
        Ok(out)
    }

    /// Like [`decode`](Self::decode) but writes into `out`, reusing its allocations: with a
    /// long-lived `Decoder` and `Decoded` the hot path allocates nothing once the buffers have
    /// grown. On error `out` holds no result (it is cleared).
    pub fn decode_into<T: Identifier>(
        &mut self,
        diff: &PowerSumQuack<T>,
        log: &[T],
        out: &mut Decoded<T>,
    ) -> Result<(), DecodeError> {
        let m = check_count(diff)?;
        self.sums.resize(diff.threshold(), 0);
        self.coeffs.resize(m, 0);
        self.prepare_inverses::<T>(m);
        let inverses: &[u64] = if m <= SMALL_T {
            &T::SMALL_INVERSES
        } else {
            &self.inverses
        };
        let mut scratch = Scratch {
            sums: &mut self.sums,
            coeffs: &mut self.coeffs,
            inverses,
            groups: &mut self.groups,
            work: &mut self.work,
            kernels: self.kernels,
        };
        scratch.decode(diff, m, log, out)
    }

    /// Computes the coefficients of the degree-`m` monic polynomial into `self.coeffs`
    /// (highest-degree first, leading 1 omitted) and checks the surplus power sums.
    /// Returns `m`.
    pub(crate) fn coefficients<T: Identifier>(
        &mut self,
        diff: &PowerSumQuack<T>,
    ) -> Result<usize, DecodeError> {
        let m = check_count(diff)?;
        self.sums.resize(diff.threshold(), 0);
        self.coeffs.resize(m, 0);
        self.prepare_inverses::<T>(m);
        let inverses: &[u64] = if m <= SMALL_T {
            &T::SMALL_INVERSES
        } else {
            &self.inverses
        };
        let mut scratch = Scratch {
            sums: &mut self.sums,
            coeffs: &mut self.coeffs,
            inverses,
            groups: &mut self.groups,
            work: &mut self.work,
            kernels: self.kernels,
        };
        scratch.coefficients(diff, m)?;
        Ok(m)
    }

    /// Coefficients computed by the last call of [`coefficients`](Self::coefficients).
    pub(crate) fn coeffs(&self) -> &[u64] {
        &self.coeffs
    }

    /// Inverses of `1..=m` beyond the compile-time table ([`SMALL_T`]), kept across calls.
    fn prepare_inverses<T: Identifier>(&mut self, m: usize) {
        if m <= SMALL_T {
            return;
        }
        if self.inverses_modulus != T::MODULUS {
            self.inverses.clear();
            self.inverses_modulus = T::MODULUS;
        }
        if self.inverses.is_empty() {
            self.inverses.extend([0, 1]);
        }
        // inv(k) = −⌊p/k⌋ · inv(p mod k) (mod p), for 2 ≤ k < p.
        while self.inverses.len() <= m {
            let k = self.inverses.len() as u64;
            let q = T::MODULUS / k;
            let inv = T::neg_mod(T::mul_mod(q, self.inverses[(T::MODULUS % k) as usize]));
            self.inverses.push(inv);
        }
    }
}

/// `m = count()` of a difference, or [`DecodeError::TooManyMissing`].
fn check_count<T: Identifier>(diff: &PowerSumQuack<T>) -> Result<usize, DecodeError> {
    let t = diff.threshold();
    let missing = diff.count();
    if missing as usize > t {
        return Err(DecodeError::TooManyMissing {
            missing,
            threshold: t,
        });
    }
    Ok(missing as usize)
}

impl Scratch<'_> {
    /// The whole decode of a difference with `m = count() ≤ t` missing identifiers.
    fn decode<T: Identifier>(
        &mut self,
        diff: &PowerSumQuack<T>,
        m: usize,
        log: &[T],
        out: &mut Decoded<T>,
    ) -> Result<(), DecodeError> {
        out.missing.clear();
        out.indeterminate.clear();
        self.coefficients(diff, m)?;
        if m == 0 {
            return Ok(());
        }
        // Every candidate where the polynomial vanishes goes straight into the result; the
        // attribution below checks (and, on collisions, regroups) them.
        out.missing.reserve(m);
        T::find_roots(
            self.coeffs,
            log,
            &mut |i| {
                out.missing.push(Missing {
                    index: i,
                    id: log[i],
                });
            },
            self.kernels,
        );
        let result = self.attribute(m, log, out);
        if result.is_err() {
            out.missing.clear();
            out.indeterminate.clear();
        }
        result
    }

    /// Fills `self.coeffs` with the `m` coefficients and checks the surplus power sums.
    fn coefficients<T: Identifier>(
        &mut self,
        diff: &PowerSumQuack<T>,
        m: usize,
    ) -> Result<(), DecodeError> {
        let t = diff.threshold();
        // After a subtraction the accumulators are the canonical sums: no copy.
        let sums: &[u64] = if let Some(acc) = diff.canonical_acc() {
            acc
        } else {
            diff.canonical_sums_to(self.sums);
            self.sums
        };
        T::newton(sums, self.inverses, self.coeffs);
        // Newton's identities for k > m: p_k + c_1 p_(k-1) + … + c_m p_(k-m) = 0.
        for k in m..t {
            let acc = T::add_mod(sums[k], T::dot_rev(self.coeffs, &sums[k - m..k]));
            if acc != 0 {
                return Err(DecodeError::InconsistentPowerSums { missing: m as u32 });
            }
        }
        Ok(())
    }

    /// Attributes the roots found among the candidates (in `out.missing`, in log order) to
    /// log entries.
    fn attribute<T: Identifier>(
        &mut self,
        m: usize,
        log: &[T],
        out: &mut Decoded<T>,
    ) -> Result<(), DecodeError> {
        let missing = m as u32;
        if out.missing.len() == m && m <= 64 {
            // Fast path: if the m hits carry m distinct field values, each is a simple root and
            // the roots account for all of P (sum of multiplicities ≤ deg P = m). Pairwise
            // comparison beats sorting for small m; a 16-entry array spares the common small
            // m the clearing of 512 bytes.
            let distinct = if m <= 16 {
                distinct_values::<T, 16>(&out.missing)
            } else {
                distinct_values::<T, 64>(&out.missing)
            };
            if distinct {
                return Ok(());
            }
        }
        self.groups.clear();
        self.groups.extend(
            out.missing
                .iter()
                .map(|h| (T::reduce(h.id.to_u64()), h.index)),
        );
        self.groups.sort_unstable();
        out.missing.clear();
        // General path: group hits by field value, find each root's multiplicity in P.
        let mut accounted = 0usize;
        let mut start = 0;
        while start < self.groups.len() {
            let value = self.groups[start].0;
            let end = start
                + self.groups[start..]
                    .iter()
                    .take_while(|g| g.0 == value)
                    .count();
            let occurrences = end - start;
            let mult = multiplicity::<T>(self.coeffs, value, self.work);
            if mult > occurrences {
                // More copies missing than were sent.
                return Err(DecodeError::InconsistentWithLog {
                    missing,
                    accounted: (accounted + occurrences) as u32,
                });
            }
            accounted += mult;
            if mult == occurrences {
                out.missing
                    .extend(self.groups[start..end].iter().map(|&(_, i)| Missing {
                        index: i,
                        id: log[i],
                    }));
            } else {
                out.indeterminate.push(Indeterminate {
                    missing: mult as u32,
                    candidates: self.groups[start..end]
                        .iter()
                        .map(|&(_, i)| Missing {
                            index: i,
                            id: log[i],
                        })
                        .collect(),
                });
            }
            start = end;
        }
        if accounted != m {
            return Err(DecodeError::InconsistentWithLog {
                missing,
                accounted: accounted as u32,
            });
        }
        out.missing.sort_unstable_by_key(|e| e.index);
        out.indeterminate
            .sort_unstable_by_key(|g| g.candidates.first().map_or(0, |c| c.index));
        Ok(())
    }
}

/// Whether the (at most `N`) hits carry pairwise distinct field values.
fn distinct_values<T: Identifier, const N: usize>(hits: &[Missing<T>]) -> bool {
    let mut vals = [0u64; N];
    for (v, h) in vals.iter_mut().zip(hits) {
        *v = T::reduce(h.id.to_u64());
    }
    let n = hits.len().min(N);
    (1..n).all(|a| (0..a).all(|b| vals[a] != vals[b]))
}

/// Multiplicity of the root `r` of the monic polynomial given by `coeffs` (repeated synthetic
/// division by `x − r`).
pub(crate) fn multiplicity<T: Identifier>(coeffs: &[u64], r: u64, work: &mut Vec<u64>) -> usize {
    work.clear();
    work.push(1);
    work.extend_from_slice(coeffs);
    let mut mult = 0;
    while work.len() > 1 {
        // Divide work (highest first) by (x - r): b_0 = a_0, b_i = a_i + r·b_(i-1).
        let mut carry = 0u64;
        for a in work.iter_mut() {
            *a = T::add_mod(*a, T::mul_mod(carry, r));
            carry = *a;
        }
        if carry != 0 {
            break;
        }
        work.pop();
        mult += 1;
    }
    mult
}

impl<T: Identifier> PowerSumQuack<T> {
    /// Decodes this quACK, taken as the difference *sender − receiver*, against the sender's
    /// log of candidate identifiers (every identifier it inserted since the quACKs last agreed,
    /// duplicates included, in any order).
    ///
    /// Returns the log entries that are missing. Identifiers are compared in the field: entries
    /// whose identifiers are congruent mod p (equal identifiers, or `x` and `x + p`) form a
    /// group; if only some of a group are missing the group is reported as
    /// [`Indeterminate`] rather than guessed (an identifier sent twice and missing once is
    /// reported once, as a group of two candidates with `missing == 1`).
    ///
    /// Errors: [`DecodeError::TooManyMissing`] if the count exceeds the threshold,
    /// [`DecodeError::InconsistentPowerSums`] if the power sums cannot come from `count`
    /// identifiers, [`DecodeError::InconsistentWithLog`] if the roots found among the
    /// candidates do not account for the count.
    ///
    /// Allocates scratch space per call; use a [`Decoder`] to reuse it.
    pub fn decode_with_log(&self, log: &[T]) -> Result<Decoded<T>, DecodeError> {
        let t = self.threshold();
        if t <= 16 {
            self.decode_on_stack::<16>(log)
        } else if t <= SMALL_T {
            self.decode_on_stack::<SMALL_T>(log)
        } else {
            Decoder::new().decode(self, log)
        }
    }

    /// [`decode_with_log`](Self::decode_with_log) with scratch arrays of `N ≥ t` entries on the
    /// stack (`N` ≤ [`SMALL_T`], so the compile-time inverses cover `m ≤ t`); the only
    /// allocation is the result's.
    fn decode_on_stack<const N: usize>(&self, log: &[T]) -> Result<Decoded<T>, DecodeError> {
        let t = self.threshold();
        let m = check_count(self)?;
        let mut sums = [0u64; N];
        let mut coeffs = [0u64; N];
        let mut scratch = Scratch {
            sums: &mut sums[..t],
            coeffs: &mut coeffs[..m],
            inverses: &T::SMALL_INVERSES,
            groups: &mut Vec::new(),
            work: &mut Vec::new(),
            kernels: crate::simd::Kernels::detect(),
        };
        let mut out = Decoded::default();
        scratch.decode(self, m, log, &mut out)?;
        Ok(out)
    }

    /// The coefficients `c_1..c_m` of the monic polynomial `x^m + c_1 x^(m−1) + … + c_m` whose
    /// roots are the identifiers of this (difference) quACK, `m = count()`, as canonical field
    /// elements.
    pub fn to_coeffs(&self) -> Result<Vec<T>, DecodeError> {
        let mut d = Decoder::new();
        d.coefficients(self)?;
        Ok(d.coeffs
            .iter()
            .map(|&c| T::from_u64_truncating(c))
            .collect())
    }

    /// Evaluates the polynomial of [`to_coeffs`](Self::to_coeffs) at `x` (canonical result).
    pub fn eval_polynomial(coeffs: &[T], x: T) -> T {
        let c: Vec<u64> = coeffs.iter().map(|c| T::reduce(c.to_u64())).collect();
        T::from_u64_truncating(eval_monic::<T>(&c, T::reduce(x.to_u64())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_of_known_roots() {
        let mut q = PowerSumQuack::<u32>::new(5);
        q.insert(10);
        q.insert(12);
        // (x - 10)(x - 12) = x² - 22x + 120
        assert_eq!(q.to_coeffs().unwrap(), vec![u32::MODULUS as u32 - 22, 120]);
    }

    #[test]
    fn multiplicity_counts_repeated_roots() {
        let mut q = PowerSumQuack::<u64>::new(6);
        for id in [5u64, 5, 5, 9] {
            q.insert(id);
        }
        let mut d = Decoder::new();
        d.coefficients(&q).unwrap();
        let mut work = Vec::new();
        assert_eq!(multiplicity::<u64>(d.coeffs(), 5, &mut work), 3);
        assert_eq!(multiplicity::<u64>(d.coeffs(), 9, &mut work), 1);
        assert_eq!(multiplicity::<u64>(d.coeffs(), 4, &mut work), 0);
    }

    #[test]
    fn duplicate_sent_twice_missing_once_is_indeterminate_once() {
        let log = [7u32, 8, 7, 9];
        let mut s = PowerSumQuack::<u32>::new(4);
        s.insert_batch(&log);
        let mut r = PowerSumQuack::<u32>::new(4);
        r.insert_batch(&[7, 8]);
        let d = (s - &r).decode_with_log(&log).unwrap();
        assert_eq!(d.missing_indices().collect::<Vec<_>>(), vec![3]);
        assert_eq!(d.indeterminate().len(), 1);
        assert_eq!(d.indeterminate()[0].missing, 1);
        assert_eq!(d.indeterminate()[0].common_id(), Some(7));
        assert_eq!(d.missing_count(), 2);
        let mut ms = d.missing_multiset();
        ms.sort_unstable();
        assert_eq!(ms, vec![7, 9]);
    }

    #[test]
    fn aliased_identifiers_are_indeterminate() {
        // 3 and 3 + p are the same field element.
        let alias = (3 + u32::MODULUS) as u32;
        let log = [3u32, alias, 100];
        let mut s = PowerSumQuack::<u32>::new(3);
        s.insert_batch(&log);
        let mut r = PowerSumQuack::<u32>::new(3);
        r.insert(alias);
        let d = (s - &r).decode_with_log(&log).unwrap();
        assert_eq!(d.missing_ids().collect::<Vec<_>>(), vec![100]);
        assert_eq!(d.indeterminate()[0].common_id(), None);
        assert_eq!(d.indeterminate()[0].candidates.len(), 2);
        assert!(!d.is_determinate());
    }

    #[test]
    fn errors() {
        let mut s = PowerSumQuack::<u16>::new(2);
        s.insert_batch(&[1, 2, 3]);
        assert_eq!(
            s.decode_with_log(&[1, 2, 3]),
            Err(DecodeError::TooManyMissing {
                missing: 3,
                threshold: 2
            })
        );
        let mut s = PowerSumQuack::<u16>::new(3);
        s.insert_batch(&[1, 2]);
        assert_eq!(
            s.decode_with_log(&[1, 5]),
            Err(DecodeError::InconsistentWithLog {
                missing: 2,
                accounted: 1
            })
        );
        // Count says one, sums say two.
        let mut s = PowerSumQuack::<u16>::new(3);
        s.insert_batch(&[1, 2]);
        s.count = 1;
        assert_eq!(
            s.decode_with_log(&[1, 2]),
            Err(DecodeError::InconsistentPowerSums { missing: 1 })
        );
        // Receiver ahead of sender: the count wraps.
        let mut s = PowerSumQuack::<u16>::new(3);
        s.remove(4);
        assert!(matches!(
            s.decode_with_log(&[4]),
            Err(DecodeError::TooManyMissing { .. })
        ));
    }

    #[test]
    fn decode_into_reuses_and_clears() {
        let log = [10u32, 20, 30];
        let mut s = PowerSumQuack::<u32>::new(3);
        s.insert_batch(&log);
        let mut r = PowerSumQuack::<u32>::new(3);
        r.insert(20);
        let diff = s - &r;
        let mut dec = Decoder::new();
        let mut out = Decoded::default();
        dec.decode_into(&diff, &log, &mut out).unwrap();
        assert_eq!(out.missing_indices().collect::<Vec<_>>(), vec![0, 2]);
        dec.decode_into(&diff, &log, &mut out).unwrap();
        assert_eq!(out.missing_count(), 2);
        // A log lacking a missing identifier: error, and no stale result left behind.
        assert!(dec.decode_into(&diff, &log[1..], &mut out).is_err());
        assert_eq!(out.missing_count(), 0);
    }

    #[test]
    fn zero_identifier_is_found() {
        let log = [0u64, 17, 0];
        let mut s = PowerSumQuack::<u64>::new(3);
        s.insert_batch(&log);
        let mut r = PowerSumQuack::<u64>::new(3);
        r.insert(17);
        let d = (s - &r).decode_with_log(&log).unwrap();
        assert_eq!(d.missing_indices().collect::<Vec<_>>(), vec![0, 2]);
    }
}

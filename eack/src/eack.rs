//! The eACK: client-side and proxy-side views over [`Sketch`] (Packrat (CoNEXT '26) §5.2, §6.1).

use thiserror::Error;

use crate::decode::{DecodeError, Decoder, Difference};
use crate::hash::HashKey;
use crate::id::Id;
use crate::sizing::symbols_for;
use crate::sketch::Sketch;
use crate::wire::{EncodeError, WireError};

/// Why the proxy could not use a received eACK. Any of these should make the proxy send a
/// Reset (new epoch) and fall back to end-to-end recovery (Packrat (CoNEXT '26) §6.1).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum EackError {
    /// Malformed bytes.
    #[error("malformed eACK: {0}")]
    Wire(#[from] WireError),
    /// The eACK belongs to another epoch (sent before a Reset took effect).
    #[error("eACK of epoch {got}, current epoch is {expected}")]
    Epoch {
        /// The proxy's epoch.
        expected: u32,
        /// The eACK's epoch.
        got: u32,
    },
    /// The difference did not decode.
    #[error("eACK did not decode: {0}")]
    Decode(#[from] DecodeError),
}

/// Client-side eACK: records every received datagram's identifier and serialises a prefix sized
/// to the number of packets the client believes are missing (rateless eACKs, Packrat (CoNEXT '26) §5.2.2).
///
/// Generic over the identifier width (`u32` by default; `u16` and `u64` for the 2- and 8-byte
/// identifiers a session may negotiate, Sidekick (NSDI '24) §3). The wire form names the width,
/// and a view of another width refuses it ([`WireError::IdWidth`]).
///
/// ```
/// use eack::{ProxyEack, ReceiverEack};
///
/// let mut client = ReceiverEack::new(160);
/// let mut proxy = ProxyEack::new(160, 4096);
/// for id in 0..100u32 {
///     proxy.insert(id);
///     if id != 42 {
///         client.on_receive(id);
///     }
/// }
/// let mut wire = Vec::new();
/// client.encode_for(1, 0.99, &mut wire);
/// let diff = proxy.on_eack(&wire).unwrap();
/// assert_eq!(diff.missing, vec![42]);
/// ```
#[derive(Clone, Debug)]
pub struct ReceiverEack<I: Id = u32> {
    sketch: Sketch<I>,
}

impl ReceiverEack<u32> {
    /// A receiver keeping `local_symbols` coded symbols (the negotiated local eACK size: 160 for
    /// the HTTP/3 download, 40 for media; Packrat (CoNEXT '26) Table 4), `u32` identifiers,
    /// default hash key, epoch 0.
    pub fn new(local_symbols: usize) -> Self {
        ReceiverEack::with_key(local_symbols, HashKey::DEFAULT)
    }
}

impl<I: Id> ReceiverEack<I> {
    /// As [`ReceiverEack::new`] for identifiers of type `I`, with a negotiated hash key.
    pub fn with_key(local_symbols: usize, key: HashKey) -> Self {
        ReceiverEack {
            sketch: Sketch::with_key(local_symbols, key),
        }
    }

    /// Records a received datagram's identifier.
    #[inline]
    pub fn on_receive(&mut self, id: I) {
        self.sketch.insert(id);
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.sketch.epoch()
    }

    /// Starts a fresh, empty set in `epoch` (on a Reset from the proxy).
    pub fn reset(&mut self, epoch: u32) {
        self.sketch.clear();
        self.sketch.set_epoch(epoch);
    }

    /// Number of identifiers recorded in this epoch.
    pub fn len(&self) -> u64 {
        self.sketch.len() as u64
    }

    /// True when nothing was recorded in this epoch.
    pub fn is_empty(&self) -> bool {
        self.sketch.len() == 0
    }

    /// The local sketch.
    pub fn sketch(&self) -> &Sketch<I> {
        &self.sketch
    }

    /// Number of local coded symbols.
    pub fn local_symbols(&self) -> usize {
        self.sketch.num_symbols()
    }

    /// Appends an eACK of exactly `n_symbols` coded symbols to `buf`.
    pub fn encode(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError> {
        self.sketch.encode_prefix(n_symbols, buf)
    }

    /// Appends an eACK sized by [`symbols_for`] for `expected_missing` packets at
    /// `success_probability`, capped at the local size. Returns the number of symbols sent.
    pub fn encode_for(
        &self,
        expected_missing: usize,
        success_probability: f64,
        buf: &mut Vec<u8>,
    ) -> usize {
        let n = symbols_for(expected_missing, success_probability).min(self.sketch.num_symbols());
        // n ≤ local size: cannot fail.
        let _ = self.sketch.encode_prefix(n, buf);
        n
    }
}

/// Proxy-side eACK: records every forwarded (or evicted, Packrat (CoNEXT '26) §6.1) identifier, decodes
/// received eACKs against its own view, and keeps the identifier set (up to a cap) so it can
/// answer a prefix longer than its local sketch.
///
/// The identifier set is bounded by `max_ids`; beyond it identifiers are no longer kept (counted
/// in [`ProxyEack::ids_dropped`]) and longer prefixes are decoded on their first
/// `local_symbols` symbols only.
#[derive(Clone, Debug)]
pub struct ProxyEack<I: Id = u32> {
    sketch: Sketch<I>,
    ids: Vec<I>,
    max_ids: usize,
    ids_dropped: u64,
    decoder: Decoder<I>,
    remote: Sketch<I>,
    extended: Sketch<I>,
}

impl ProxyEack<u32> {
    /// A proxy view of `local_symbols` coded symbols keeping at most `max_ids` identifiers for
    /// extension, `u32` identifiers, default hash key, epoch 0.
    pub fn new(local_symbols: usize, max_ids: usize) -> Self {
        ProxyEack::with_key(local_symbols, max_ids, HashKey::DEFAULT)
    }
}

impl<I: Id> ProxyEack<I> {
    /// As [`ProxyEack::new`] for identifiers of type `I`, with a negotiated hash key.
    pub fn with_key(local_symbols: usize, max_ids: usize, key: HashKey) -> Self {
        ProxyEack {
            sketch: Sketch::with_key(local_symbols, key),
            ids: Vec::new(),
            max_ids,
            ids_dropped: 0,
            decoder: Decoder::new(),
            remote: Sketch::with_key(0, key),
            extended: Sketch::with_key(0, key),
        }
    }

    /// Records an identifier in the proxy's view.
    #[inline]
    pub fn insert(&mut self, id: I) {
        self.sketch.insert(id);
        if self.ids.len() < self.max_ids {
            self.ids.push(id);
        } else {
            self.ids_dropped += 1;
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> u32 {
        self.sketch.epoch()
    }

    /// Starts a fresh, empty set in `epoch` (the proxy sends the Reset carrying it).
    pub fn reset(&mut self, epoch: u32) {
        self.sketch.clear();
        self.sketch.set_epoch(epoch);
        self.ids.clear();
        self.ids_dropped = 0;
    }

    /// Identifiers recorded in this epoch.
    pub fn len(&self) -> u64 {
        self.sketch.len() as u64
    }

    /// True when nothing was recorded in this epoch.
    pub fn is_empty(&self) -> bool {
        self.sketch.len() == 0
    }

    /// Identifiers not kept for extension in this epoch because the set reached `max_ids`.
    pub fn ids_dropped(&self) -> u64 {
        self.ids_dropped
    }

    /// The local sketch.
    pub fn sketch(&self) -> &Sketch<I> {
        &self.sketch
    }

    /// Decodes a received wire eACK: `missing` = identifiers the proxy recorded that the
    /// client has not, `extra` = identifiers the client has that the proxy never recorded.
    pub fn on_eack(&mut self, bytes: &[u8]) -> Result<Difference<I>, EackError> {
        let mut out = Difference::default();
        self.on_eack_into(bytes, &mut out)?;
        Ok(out)
    }

    /// As [`ProxyEack::on_eack`], writing into `out` and reusing internal scratch (no allocation
    /// in steady state).
    pub fn on_eack_into(&mut self, bytes: &[u8], out: &mut Difference<I>) -> Result<(), EackError> {
        out.clear();
        self.remote.decode_prefix_into(bytes)?;
        self.decode_remote(out)
    }

    /// Decodes an already-parsed remote sketch (see [`ProxyEack::on_eack`]).
    pub fn decode_sketch(
        &mut self,
        remote: &Sketch<I>,
        out: &mut Difference<I>,
    ) -> Result<(), EackError> {
        out.clear();
        self.remote.clone_from(remote);
        self.decode_remote(out)
    }

    fn decode_remote(&mut self, out: &mut Difference<I>) -> Result<(), EackError> {
        if self.remote.epoch() != self.sketch.epoch() {
            return Err(EackError::Epoch {
                expected: self.sketch.epoch(),
                got: self.remote.epoch(),
            });
        }
        let n = self.remote.num_symbols();
        let local = if n > self.sketch.num_symbols() && self.ids_dropped == 0 {
            self.extended.clone_from(&self.sketch);
            self.extended.extend_to(n, self.ids.iter().copied());
            &self.extended
        } else {
            &self.sketch
        };
        self.decoder.decode_difference(local, &self.remote, out)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_must_match_and_reset_starts_fresh() {
        let mut c = ReceiverEack::new(40);
        let mut p = ProxyEack::new(40, 100);
        c.on_receive(1);
        p.insert(1);
        p.insert(2);
        p.reset(3);
        let mut buf = Vec::new();
        c.encode(10, &mut buf).unwrap();
        assert_eq!(
            p.on_eack(&buf),
            Err(EackError::Epoch {
                expected: 3,
                got: 0
            })
        );
        c.reset(3);
        assert!(c.is_empty() && p.is_empty());
        p.insert(9);
        buf.clear();
        c.encode(10, &mut buf).unwrap();
        assert_eq!(p.on_eack(&buf).unwrap().missing, vec![9]);
    }

    #[test]
    fn longer_prefix_than_local_is_extended_from_the_id_set() {
        let mut c = ReceiverEack::new(200);
        let mut p = ProxyEack::new(20, 10_000);
        for id in 0..1000u32 {
            p.insert(id * 3);
            if id % 20 != 0 {
                c.on_receive(id * 3);
            }
        }
        // 50 missing: 20 symbols cannot decode, 150 can.
        let mut buf = Vec::new();
        c.encode(150, &mut buf).unwrap();
        let mut d = p.on_eack(&buf).unwrap();
        d.missing.sort_unstable();
        assert_eq!(
            d.missing,
            (0..1000u32)
                .filter(|i| i % 20 == 0)
                .map(|i| i * 3)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn id_cap_counts_drops_and_falls_back_to_local_prefix() {
        let mut c = ReceiverEack::new(200);
        let mut p = ProxyEack::new(20, 10);
        for id in 0..100u32 {
            p.insert(id);
            if id != 5 {
                c.on_receive(id);
            }
        }
        assert_eq!(p.ids_dropped(), 90);
        let mut buf = Vec::new();
        c.encode(150, &mut buf).unwrap();
        assert_eq!(p.on_eack(&buf).unwrap().missing, vec![5]);
    }

    #[test]
    fn malformed_and_undecodable_are_errors() {
        let mut p = ProxyEack::new(40, 10);
        assert!(matches!(p.on_eack(&[1, 2, 3]), Err(EackError::Wire(_))));
        let c = ReceiverEack::new(40);
        for id in 0..60u32 {
            p.insert(id);
        }
        let mut buf = Vec::new();
        c.encode(4, &mut buf).unwrap();
        assert!(matches!(p.on_eack(&buf), Err(EackError::Decode(_))));
    }

    #[test]
    fn encode_for_caps_at_local_size() {
        let c = ReceiverEack::new(40);
        let mut buf = Vec::new();
        assert_eq!(c.encode_for(1000, 0.99, &mut buf), 40);
        assert_eq!(buf.len(), crate::encoded_len::<u32>(40));
    }
}

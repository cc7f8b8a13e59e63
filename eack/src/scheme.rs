//! The two eACK constructions behind one trait, for the comparison of Packrat (CoNEXT '26) §5.3 (Table 1,
//! Table 2): the rIBLT [`Sketch`] and the power-sum [`PowerSumEack`] built on `quack`.

use crate::decode::{Decoder, Difference};
use crate::eack::EackError;
use crate::sketch::Sketch;
use crate::wire::EncodeError;
use quack::PowerSumQuack;

/// An eACK construction: the receiver inserts identifiers and encodes; the proxy decodes a
/// received encoding against its own state.
pub trait EackScheme {
    /// Name for reports.
    const NAME: &'static str;
    /// Decode failure.
    type Error: std::error::Error + Send + Sync + 'static;

    /// An empty eACK with `symbols` local symbols (rIBLT coded symbols, or power sums = the
    /// power-sum threshold).
    fn with_symbols(symbols: usize) -> Self;
    /// Records an identifier.
    fn insert_id(&mut self, id: u32);
    /// Appends an encoding of the first `n_symbols` symbols.
    fn encode(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError>;
    /// Decodes a peer's encoding against `self` (the proxy's view, the minuend): `missing` =
    /// identifiers of `self` the peer lacks. `log` holds the proxy's candidate identifiers (its
    /// not-yet-acknowledged cache): the power-sum construction needs it (decoding is linear in
    /// its length, Packrat (CoNEXT '26) Table 1), the rIBLT ignores it.
    fn decode_against(
        &mut self,
        remote: &[u8],
        log: &[u32],
        out: &mut Difference,
    ) -> Result<(), Self::Error>;
}

/// rIBLT state for [`EackScheme`]: a sketch plus decoding scratch.
#[derive(Clone, Debug)]
pub struct RibltEack {
    sketch: Sketch,
    remote: Sketch,
    decoder: Decoder,
}

impl RibltEack {
    /// The sketch.
    pub fn sketch(&self) -> &Sketch {
        &self.sketch
    }
}

impl EackScheme for RibltEack {
    const NAME: &'static str = "rIBLT";
    type Error = EackError;

    fn with_symbols(symbols: usize) -> Self {
        RibltEack {
            sketch: Sketch::new(symbols),
            remote: Sketch::new(0),
            decoder: Decoder::new(),
        }
    }

    fn insert_id(&mut self, id: u32) {
        self.sketch.insert(id);
    }

    fn encode(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError> {
        self.sketch.encode_prefix(n_symbols, buf)
    }

    fn decode_against(
        &mut self,
        remote: &[u8],
        _log: &[u32],
        out: &mut Difference,
    ) -> Result<(), EackError> {
        self.remote.decode_prefix_into(remote)?;
        self.decoder
            .decode_difference(&self.sketch, &self.remote, out)?;
        Ok(())
    }
}

/// Why a power-sum eACK failed.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PowerSumError {
    /// Malformed bytes.
    #[error("malformed power-sum eACK: {0}")]
    Wire(#[from] quack::WireError),
    /// Decoding failed (too many missing, inconsistent sums or log).
    #[error("power-sum eACK did not decode: {0}")]
    Decode(#[from] quack::DecodeError),
    /// Some missing identifiers are ambiguous (equal identifiers in the log).
    #[error("power-sum eACK decoded ambiguously")]
    Indeterminate,
}

/// The power-sum eACK of Packrat (CoNEXT '26) §5.3: a `quack` power-sum quACK with the roles swapped (the
/// client encodes, the proxy decodes against its log of cached identifiers). `t` power sums
/// decode up to `t` missing identifiers exactly; decoding costs `O(N·m)` for a log of `N`.
#[derive(Clone, Debug)]
pub struct PowerSumEack {
    quack: PowerSumQuack<u32>,
    diff: PowerSumQuack<u32>,
    decoder: quack::Decoder,
}

impl PowerSumEack {
    /// The power-sum quACK.
    pub fn quack(&self) -> &PowerSumQuack<u32> {
        &self.quack
    }
}

impl EackScheme for PowerSumEack {
    const NAME: &'static str = "power sum";
    type Error = PowerSumError;

    fn with_symbols(symbols: usize) -> Self {
        let t = symbols.clamp(1, quack::MAX_THRESHOLD);
        PowerSumEack {
            quack: PowerSumQuack::new(t),
            diff: PowerSumQuack::new(t),
            decoder: quack::Decoder::new(),
        }
    }

    fn insert_id(&mut self, id: u32) {
        self.quack.insert(id);
    }

    fn encode(&self, n_symbols: usize, buf: &mut Vec<u8>) -> Result<usize, EncodeError> {
        if n_symbols > self.quack.threshold() {
            return Err(EncodeError::NotEnoughSymbols {
                requested: n_symbols,
                available: self.quack.threshold(),
            });
        }
        // The first n power sums are a valid threshold-n quACK: subtracting an empty
        // threshold-n quACK keeps min(t, n) sums.
        let mut q = self.quack.clone();
        q.sub_assign(&PowerSumQuack::new(n_symbols.max(1)));
        let bytes = q.to_bytes();
        buf.extend_from_slice(&bytes);
        Ok(bytes.len())
    }

    fn decode_against(
        &mut self,
        remote: &[u8],
        log: &[u32],
        out: &mut Difference,
    ) -> Result<(), PowerSumError> {
        out.clear();
        let view = quack::QuackView::<u32>::parse(remote)?;
        self.diff.clone_from(&self.quack);
        self.diff.sub_assign_view(&view);
        let d = self.decoder.decode(&self.diff, log)?;
        if !d.is_determinate() {
            return Err(PowerSumError::Indeterminate);
        }
        out.missing.extend(d.missing_ids());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round<S: EackScheme>(symbols: usize, n: usize) -> Difference {
        let mut proxy = S::with_symbols(symbols);
        let mut client = S::with_symbols(symbols);
        let log: Vec<u32> = (1..=300u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
        for (k, &id) in log.iter().enumerate() {
            proxy.insert_id(id);
            if k % 30 != 7 {
                client.insert_id(id);
            }
        }
        let mut buf = Vec::new();
        client.encode(n, &mut buf).unwrap();
        let mut out = Difference::default();
        proxy.decode_against(&buf, &log, &mut out).unwrap();
        out.missing.sort_unstable();
        out
    }

    #[test]
    fn both_schemes_find_the_same_missing_identifiers() {
        let want: Vec<u32> = {
            let mut v: Vec<u32> = (1..=300u32)
                .enumerate()
                .filter(|(k, _)| k % 30 == 7)
                .map(|(_, i)| i.wrapping_mul(0x9e37_79b9))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(round::<RibltEack>(160, 40).missing, want);
        assert_eq!(round::<PowerSumEack>(20, 10).missing, want);
        assert_eq!(round::<PowerSumEack>(20, 20).missing, want);
    }

    #[test]
    fn power_sum_threshold_is_a_hard_limit() {
        let mut proxy = PowerSumEack::with_symbols(4);
        let client = PowerSumEack::with_symbols(4);
        let log: Vec<u32> = (1..10).collect();
        for &id in &log {
            proxy.insert_id(id);
        }
        let mut buf = Vec::new();
        client.encode(4, &mut buf).unwrap();
        let mut out = Difference::default();
        assert!(matches!(
            proxy.decode_against(&buf, &log, &mut out),
            Err(PowerSumError::Decode(
                quack::DecodeError::TooManyMissing { .. }
            ))
        ));
        assert!(client.encode(5, &mut buf).is_err());
    }
}

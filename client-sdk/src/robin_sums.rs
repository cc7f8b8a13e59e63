//! The sender's power sums at the session's identifier width: 2, 4 or 8 bytes (Sidekick
//! (NSDI '24) §3). Identifiers travel through the engine as `u64` (zero-extended); the sums, the
//! quACKs they are compared with and the decoding use the negotiated width, so a proxy quACK of
//! another width is refused as malformed.

use quack::{DecodeError, PowerSumQuack, Width, WireError};

/// Power sums of one width.
#[derive(Debug, Clone)]
pub(super) enum Sums {
    U16(PowerSumQuack<u16>),
    U32(PowerSumQuack<u32>),
    U64(PowerSumQuack<u64>),
}

macro_rules! each {
    ($self:expr, $q:ident => $e:expr) => {
        match $self {
            Sums::U16($q) => $e,
            Sums::U32($q) => $e,
            Sums::U64($q) => $e,
        }
    };
}

impl Sums {
    pub(super) fn new(width: Width, threshold: usize) -> Self {
        match width {
            Width::U16 => Self::U16(PowerSumQuack::new(threshold)),
            Width::U32 => Self::U32(PowerSumQuack::new(threshold)),
            Width::U64 => Self::U64(PowerSumQuack::new(threshold)),
        }
    }

    /// A proxy quACK, parsed at `width` (another width in its header is a wire error).
    pub(super) fn from_bytes(width: Width, bytes: &[u8]) -> Result<Self, WireError> {
        Ok(match width {
            Width::U16 => Self::U16(PowerSumQuack::from_bytes(bytes)?),
            Width::U32 => Self::U32(PowerSumQuack::from_bytes(bytes)?),
            Width::U64 => Self::U64(PowerSumQuack::from_bytes(bytes)?),
        })
    }

    pub(super) fn threshold(&self) -> usize {
        each!(self, q => q.threshold())
    }

    pub(super) fn count(&self) -> u32 {
        each!(self, q => q.count())
    }

    pub(super) fn last_value(&self) -> Option<u64> {
        match self {
            Self::U16(q) => q.last_value().map(u64::from),
            Self::U32(q) => q.last_value().map(u64::from),
            Self::U64(q) => q.last_value(),
        }
    }

    /// Insert an identifier read at this width (its high bits are zero).
    pub(super) fn insert(&mut self, id: u64) {
        match self {
            Self::U16(q) => q.insert(id as u16),
            Self::U32(q) => q.insert(id as u32),
            Self::U64(q) => q.insert(id),
        }
    }

    /// `self + candidates − proxy`, decoded against `candidates`: the indices whose fate is
    /// unknown (determinately missing, or in a group that collides in the field), and how many
    /// such collision groups there were. `proxy` has this width (both come from
    /// [`Sums::new`]/[`Sums::from_bytes`] with the session's).
    pub(super) fn unknown_after(
        &self,
        candidates: &[u64],
        proxy: &Self,
    ) -> Result<(Vec<usize>, usize), DecodeError> {
        fn run<T: quack::Identifier>(
            mine: &PowerSumQuack<T>,
            ids: Vec<T>,
            proxy: &PowerSumQuack<T>,
        ) -> Result<(Vec<usize>, usize), DecodeError> {
            let mut diff = mine.clone();
            diff.insert_batch(&ids);
            diff -= proxy;
            let d = diff.decode_with_log(&ids)?;
            let mut out: Vec<usize> = d.missing_indices().collect();
            for g in d.indeterminate() {
                out.extend(g.candidates.iter().map(|c| c.index));
            }
            Ok((out, d.indeterminate().len()))
        }
        match (self, proxy) {
            (Self::U16(a), Self::U16(b)) => {
                run(a, candidates.iter().map(|&i| i as u16).collect(), b)
            }
            (Self::U32(a), Self::U32(b)) => {
                run(a, candidates.iter().map(|&i| i as u32).collect(), b)
            }
            (Self::U64(a), Self::U64(b)) => run(a, candidates.to_vec(), b),
            // Unreachable by construction; treated as a quACK that does not decode.
            _ => Err(DecodeError::TooManyMissing {
                missing: u32::MAX,
                threshold: self.threshold(),
            }),
        }
    }
}

/// Reads an identifier of `width` with `src`, zero-extended.
pub(super) fn extract(src: quack::IdSource, width: Width, datagram: &[u8]) -> Option<u64> {
    match width {
        Width::U16 => src.extract::<u16>(datagram).ok().map(u64::from),
        Width::U32 => src.extract::<u32>(datagram).ok().map(u64::from),
        Width::U64 => src.extract::<u64>(datagram).ok(),
    }
}

//! The Packrat engine's eACK state at the session's identifier width (2, 4 or 8 bytes,
//! Sidekick (NSDI '24) §3; `IdentifierSpec::width`): the proxy's view of the epoch, the scratch
//! sketch a received eACK is parsed into, the decoder and its output. One variant per width,
//! each the generic code of the `eack` crate monomorphised, so the 4-byte path is what it was
//! before widths existed; identifiers cross this boundary zero-extended to `u64`.

use eack::{DecodeError, Decoder, Difference, HashKey, Id, Sketch, WireError};
use quack::{IdError, IdSource, Width};

#[derive(Debug, Clone)]
pub(super) struct View<I: Id> {
    /// Every identifier forwarded in this epoch (evicted, or encoded at an eACK).
    evicted: Sketch<I>,
    remote: Sketch<I>,
    decoder: Decoder<I>,
    diff: Difference<I>,
}

impl<I: Id> View<I> {
    fn new(local_symbols: usize, key: HashKey) -> Self {
        Self {
            evicted: Sketch::with_key(local_symbols, key),
            remote: Sketch::with_key(0, key),
            decoder: Decoder::new(),
            diff: Difference::default(),
        }
    }

    fn decode(&mut self, missing: &mut Vec<u64>) -> Result<usize, DecodeError> {
        self.decoder
            .decode_difference(&self.evicted, &self.remote, &mut self.diff)?;
        missing.extend(self.diff.missing.iter().map(|i| i.to_u64()));
        Ok(self.diff.extra.len())
    }
}

#[derive(Debug, Clone)]
pub(super) enum Views {
    U16(View<u16>),
    U32(View<u32>),
    U64(View<u64>),
}

macro_rules! each {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Views::U16($v) => $e,
            Views::U32($v) => $e,
            Views::U64($v) => $e,
        }
    };
}

impl Views {
    pub(super) fn new(width: Width, local_symbols: usize, key: HashKey) -> Self {
        match width {
            Width::U16 => Self::U16(View::new(local_symbols, key)),
            Width::U32 => Self::U32(View::new(local_symbols, key)),
            Width::U64 => Self::U64(View::new(local_symbols, key)),
        }
    }

    /// Heap bytes of one coded symbol at `width` (the engine's memory accounting).
    pub(super) fn symbol_bytes(width: Width) -> usize {
        match width {
            Width::U16 => std::mem::size_of::<eack::CodedSymbol<u16>>(),
            Width::U32 => std::mem::size_of::<eack::CodedSymbol<u32>>(),
            Width::U64 => std::mem::size_of::<eack::CodedSymbol<u64>>(),
        }
    }

    /// The datagram's identifier at this width, zero-extended.
    #[inline]
    pub(super) fn extract(&self, src: &IdSource, payload: &[u8]) -> Result<u64, IdError> {
        Ok(match self {
            Self::U16(_) => u64::from(src.extract::<u16>(payload)?),
            Self::U32(_) => u64::from(src.extract::<u32>(payload)?),
            Self::U64(_) => src.extract::<u64>(payload)?,
        })
    }

    /// Encodes one identifier (read at this width, so truncation loses nothing).
    #[inline]
    pub(super) fn insert(&mut self, id: u64) {
        each!(self, v => v.evicted.insert(Id::from_u64(id)));
    }

    /// Encodes several identifiers (one dispatch for the batch).
    #[inline]
    pub(super) fn insert_all(&mut self, ids: impl Iterator<Item = u64>) {
        each!(self, v => for id in ids {
            v.evicted.insert(Id::from_u64(id));
        });
    }

    /// Takes one identifier out of the local view (a packet the proxy gave up on).
    #[inline]
    pub(super) fn remove(&mut self, id: u64) {
        each!(self, v => v.evicted.remove(Id::from_u64(id)));
    }

    pub(super) fn epoch(&self) -> u32 {
        each!(self, v => v.evicted.epoch())
    }

    /// Clears the local view and starts `epoch`.
    pub(super) fn reset(&mut self, epoch: u32) {
        each!(self, v => {
            v.evicted.clear();
            v.evicted.set_epoch(epoch);
        });
    }

    /// Parses a received eACK into the scratch sketch; returns its epoch. An eACK of another
    /// width is [`WireError::IdWidth`].
    pub(super) fn parse(&mut self, bytes: &[u8]) -> Result<u32, WireError> {
        each!(self, v => {
            v.remote.decode_prefix_into(bytes)?;
            Ok(v.remote.epoch())
        })
    }

    /// Decodes the local view minus the parsed eACK: appends the missing identifiers to
    /// `missing` and returns how many the client has that the proxy never recorded.
    pub(super) fn decode(&mut self, missing: &mut Vec<u64>) -> Result<usize, DecodeError> {
        each!(self, v => v.decode(missing))
    }
}

//! eACKs built on rateless invertible Bloom lookup tables (Packrat, CoNEXT '26, §5).
//!
//! A receiver summarises the identifiers of the datagrams it received as a prefix of an infinite
//! stream of coded symbols; the proxy subtracts the sketch from its own view and peels the
//! difference to learn which cached packets to retransmit.
//!
//! - [`Sketch`]: the rIBLT (insert, subtract, decode, wire prefix).
//! - [`ReceiverEack`] / [`ProxyEack`]: the client-side and proxy-side views with epochs, generic
//!   over the identifier width (`u16`, `u32` — the default —, `u64`); [`WidthReceiverEack`] /
//!   [`WidthProxyEack`] pick the width at run time (the one a session negotiated).
//! - [`symbols_for`]: how many symbols to send for an expected number of missing packets.
//! - [`PowerSumEack`]: the power-sum construction on `quack`, behind the same [`EackScheme`]
//!   trait as [`RibltEack`], for the comparison of Packrat (CoNEXT '26) Table 2.
//!
//! Everything is sans-IO: bytes in, bytes or identifier lists out.

mod decode;
mod eack;
pub mod experiment;
mod hash;
mod id;
pub mod mapping;
mod scheme;
pub mod sizing;
mod sketch;
mod width;
mod wire;

pub use decode::{DecodeError, Decoder, Difference};
pub use eack::{EackError, ProxyEack, ReceiverEack};
pub use hash::HashKey;
pub use id::Id;
pub use scheme::{EackScheme, PowerSumEack, PowerSumError, RibltEack};
pub use sizing::symbols_for;
pub use sketch::{CodedSymbol, MAX_SYMBOLS, Sketch};
pub use width::{WidthProxyEack, WidthReceiverEack, peek_width};
pub use wire::{
    EncodeError, HEADER_LEN, WIRE_VERSION, WireError, encoded_len, fuzz_parse, symbol_wire_len,
};

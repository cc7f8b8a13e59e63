//! Power-sum quACKs (Sidekick, NSDI '24, §3).
//!
//! A quACK summarises a multiset of opaque packet identifiers as `t` power sums modulo a prime,
//! a count and the last element. Subtracting the receiver's quACK from the sender's and solving
//! Newton's identities yields the identifiers that are missing, as long as at most `t` are.
//!
//! - [`PowerSumQuack<T>`] for `T` = `u16`, `u32`, `u64` (fields modulo 65521, 4294967291 and
//!   18446744073709551557, the largest primes below `2^16`, `2^32`, `2^64`): insert, remove,
//!   subtract, count, last value, threshold.
//! - [`PowerSumQuack::decode_with_log`] / [`Decoder`]: the missing entries of the sender's log,
//!   with collisions reported as [`Indeterminate`]; [`PowerSumQuack::decode_by_factoring`]
//!   without a log.
//! - [`wire`]: the documented little-endian wire form, a zero-copy [`QuackView`] and typed
//!   [`WireError`]s.
//! - [`id_at_offset`], [`keyed_hash_id`], [`IdSource`]: identifiers from UDP payloads.
//!
//! The crate is sans-IO and has no global state.
//!
//! ```
//! use quack::{IdSource, PowerSumQuack};
//!
//! // Proxy side: quACK every datagram it forwards.
//! let datagrams: Vec<Vec<u8>> = (0u8..6).map(|i| vec![i; 20]).collect();
//! let ids: Vec<u32> = datagrams.iter().map(|d| IdSource::QUIC_DEFAULT.extract(d)).collect::<Result<_, _>>()?;
//! let mut proxy = PowerSumQuack::<u32>::new(8);
//! for (i, id) in ids.iter().enumerate() {
//!     if i != 2 && i != 4 {
//!         proxy.insert(*id);
//!     }
//! }
//! let wire = proxy.to_bytes();
//!
//! // Sender side: its own quACK of what it sent, minus the proxy's.
//! let mut sender = PowerSumQuack::<u32>::new(8);
//! sender.insert_batch(&ids);
//! sender -= &PowerSumQuack::from_bytes(&wire)?;
//! let lost = sender.decode_with_log(&ids)?;
//! assert_eq!(lost.missing_indices().collect::<Vec<_>>(), vec![2, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decode;
mod factor;
mod field;
mod id;
mod quack;
mod simd;
pub mod wire;

pub use decode::{DecodeError, Decoded, Decoder, Indeterminate, Missing};
pub use factor::MAX_SPLIT_ATTEMPTS;
pub use field::Identifier;
pub use id::{IdError, IdSource, id_at_offset, keyed_hash_id};
pub use quack::{MAX_THRESHOLD, PowerSumQuack, ThresholdError};
pub use wire::{QuackView, Width, WireError, fuzz_parse, peek_width};

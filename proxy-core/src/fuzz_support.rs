//! Bodies of the proxy's stateful fuzz targets (`proxy/fuzz/`), also run by the test suite.
//!
//! - [`fuzz_core_sessions`]: the whole core with a live sidekick session established through the
//!   protocol (discovery on the base path, Init from a real client), then fuzzed frames of that
//!   flow and of others, fuzzed and authentic sidekick datagrams, client resets, reconfigurations
//!   and time. Unlike `core::fuzz_core`, the frames reach the Robin, Packrat and multicast
//!   engines.
//! - [`fuzz_multicast_eack`]: one shared multicast cache with several clients, driven by a
//!   script of cached packets, joins, leaves, resets and eACKs (real or fuzzed).

mod core_sessions;
mod multicast;

pub use core_sessions::fuzz_core_sessions;
pub use multicast::fuzz_multicast_eack;

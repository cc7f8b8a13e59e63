//! The sans-IO core of the sidekick proxy.
//!
//! Parses captured frames, keeps a bounded flow table and runs one assistance per flow: Robin
//! (quACKs to senders, Sidekick (NSDI '24) §4), Packrat (cache and retransmit to receivers,
//! Packrat (CoNEXT '26) §5) or PEMI (transparent assistance, PEMI §4), with the sidekick
//! sessions that opt flows in. It owns no socket, thread, clock, file or random source: every
//! call takes `now` (a [`Time`] the caller read from its own clock), the flow table's
//! hash key comes from the caller, and output is polled. The daemon (`sidekick-proxy`: capture,
//! sockets, configuration files, metrics endpoint, signals) and the simulator drive it.
//!
//! [`core::ProxyCore`] is the entry point; its rustdoc gives the call order with an example.

pub mod core;
pub mod counters;
pub mod engine;
pub mod flow;
pub mod fuzz_support;
#[cfg(feature = "testing")]
pub mod lie;
pub mod packet;
pub mod packrat;
pub mod pemi;
pub mod robin;
pub mod session;

/// The time every call takes (the protocol's: sessions and the core share one clock).
pub use sidekick_protocol::Time;

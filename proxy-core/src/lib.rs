//! The sans-IO core of the sidekick proxy.
//!
//! Parses captured frames, keeps a bounded flow table and runs one assistance per flow: Robin
//! (quACKs to senders, Sidekick (NSDI '24) §4), Packrat (cache and retransmit to receivers,
//! Packrat (CoNEXT '26) §5) or PEMI (transparent assistance, PEMI §4), with the sidekick
//! sessions that opt flows in. It owns no socket, thread, clock, file or random source: every
//! call takes `now` (a `std::time::Instant` the caller read, as in quinn-proto), the flow table's
//! hash key comes from the caller, and output is polled. The daemon (`sidekick-proxy`: capture,
//! sockets, configuration files, metrics endpoint, signals) and the simulator drive it.
//!
//! [`core::ProxyCore`] is the entry point; its rustdoc gives the call order with an example.

// Unit tests start their simulated time from one real `Instant` (std has no other way to make one).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

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

/// The start of an offline run's time (fuzz bodies, trace replays), from which all its later
/// times derive: the crate's one clock read, as std makes an `Instant` no other way. Live callers
/// pass their own `now` to every call.
#[allow(clippy::disallowed_methods)]
pub(crate) fn offline_origin() -> std::time::Instant {
    std::time::Instant::now()
}

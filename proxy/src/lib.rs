//! The sidekick proxy daemon for access points and gateways.
//!
//! Captures the opaque packets of base connections (AF_PACKET rings, sniff or bridge mode),
//! reads its configuration, drops privileges, runs one worker per core and serves metrics; the
//! per-packet work is the sans-IO core of [`sidekick_proxy_core`], whose modules are re-exported
//! here under their own names.

#[cfg(feature = "testing")]
pub use sidekick_proxy_core::lie;
pub use sidekick_proxy_core::{
    Time, core, counters, engine, flow, fuzz_support, packet, packrat, pemi, robin, session,
};

pub mod config;
pub mod daemon;
pub mod metrics;
pub mod notify;
pub mod pace_board;
pub mod supervisor;
pub mod sys;
pub mod worker;

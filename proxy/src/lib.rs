//! The sidekick proxy for access points and gateways.
//!
//! Captures the opaque packets of base connections, keeps a bounded flow table and runs one engine
//! per flow: Robin (quACKs to senders), Packrat (cache and retransmit to receivers) or PEMI
//! (transparent assistance). The engines are sans-IO; capture and injection live in thin backends.

pub mod config;
pub mod core;
pub mod daemon;
pub mod engine;
pub mod flow;
pub mod fuzz_support;
#[cfg(feature = "testing")]
pub mod lie;
pub mod metrics;
pub mod notify;
pub mod packet;
pub mod packrat;
pub mod pemi;
pub mod robin;
pub mod session;
pub mod supervisor;
pub mod sys;
pub mod worker;

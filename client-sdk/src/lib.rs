//! The sidekick client SDK.
//!
//! Sans-IO engines that a QUIC or media client links in: the Robin sender (quACK-driven early
//! loss detection and PACUBIC congestion control) and the Packrat receiver (eACKs and selective
//! ACK withholding), with integrations for unmodified quinn and quiche.

pub mod delay_histogram;
pub mod fuzz;
pub mod integrations;
pub mod keylog;
pub mod lens;
pub mod local_addrs;
pub mod packrat;
pub mod pacubic;
pub mod robin;
/// The RTT estimator (shared with the proxy and the lab: `sidekick-wire`).
pub use sidekick_wire::rtt;
pub mod session;

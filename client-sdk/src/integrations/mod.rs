//! Integrations with QUIC stacks (cargo features `quinn` and `quiche`).

#[cfg(feature = "quiche")]
pub mod quiche_conn;
#[cfg(feature = "quinn")]
pub mod quinn_cc;
#[cfg(feature = "quinn")]
pub mod quinn_socket;

//! Addresses and frame builders shared by the core's in-memory pipeline tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;

use sidekick_protocol::SessionConfig;
use sidekick_protocol::messages::{IdentifierSpec, RobinConfig};

pub const CLIENT: &str = "10.0.0.2:50000";
pub const CLIENT_SK: &str = "10.0.0.2:50001";
pub const SERVER: &str = "198.51.100.10:443";
pub const PROXY: &str = "10.0.0.1:7788";

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// An Ethernet frame around the IP packet `ip`.
pub fn eth(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// A version-1 long-header packet (`ty` 0 Initial, 2 Handshake) with `len` protected bytes.
pub fn long(ty: u8, len: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (ty << 4), 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    if ty == 0 {
        p.push(0);
    }
    p.push(0x40 | (len >> 8) as u8);
    p.push(len as u8);
    p.extend(std::iter::repeat_n(0xaa, len));
    p
}

/// A Robin session: a quACK every 2 packets, threshold 8 (Sidekick (NSDI '24) Table 5 #1), QUIC identifiers.
pub fn robin_config() -> SessionConfig {
    SessionConfig {
        robin: Some(RobinConfig {
            interval_ms: 0,
            interval_packets: 2,
            threshold: 8,
            quack_on_gap_percent: 0,
        }),
        packrat: None,
        identifier: Some(IdentifierSpec::quic_default()),
    }
}

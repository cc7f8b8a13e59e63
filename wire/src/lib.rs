//! The wire layer the proxy, the SDK and the lab share: what every one of them reads off a
//! datagram without decrypting it.
//!
//! - [`varint`]: QUIC variable-length integers (RFC 9000 §16).
//! - [`quic`]: QUIC long headers (RFC 8999 §5.1, RFC 9000 §17.2, RFC 9369 §3.2) and the walk
//!   over the coalesced packets of a datagram (RFC 9000 §12.2), cleartext fields only.
//! - [`checksum`]: the Internet checksum (RFC 1071) of IPv4 headers and UDP/TCP segments.
//! - [`rtt`]: a smoothed RTT estimator (RFC 6298 §2 / RFC 9002 §5.3 gains) with a minimum.
//!
//! Nothing here does I/O or reads a clock, and nothing panics on any input: every parser returns
//! an error or `None` on truncated or malformed bytes (property tests beside each parser, and the
//! `quic_datagram` fuzz target in `wire/fuzz/`).
//!
//! ```
//! use sidekick_wire::quic::{LongType, Packet, packets};
//!
//! // A client Initial (version 1, 8-byte DCID, empty SCID and token, 4-byte payload) coalesced
//! // with a short-header packet.
//! let mut d = vec![0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 4, 0xaa, 0xbb, 0xcc, 0xdd];
//! d.extend_from_slice(&[0x40, 1, 2, 3]);
//! let kinds: Vec<_> = packets(&d).collect();
//! assert!(matches!(kinds[0], Ok(Packet::Long(h)) if h.ty == Some(LongType::Initial)));
//! assert!(matches!(kinds[1], Ok(Packet::Short { offset: 21, .. })));
//! ```

pub mod checksum;
pub mod quic;
pub mod rtt;
pub mod varint;

/// Why bytes could not be read as what they were expected to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes end before the field `0`.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A field has a value its version does not allow (e.g. a version 1 connection ID over 20
    /// bytes, RFC 9000 §17.2).
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// Not a QUIC long header (the header form bit is 0).
    #[error("not a long header")]
    NotLong,
}

/// The body of the `quic_datagram` fuzz target (`wire/fuzz/`), also run over the committed seeds
/// by `tests/fuzz_corpus.rs`: walks `data` as a datagram and checks what the walk promises (every
/// packet within the datagram, in order, the short header last), then reads varints and sums it.
///
/// # Panics
/// When a promise is broken: that is the bug the fuzzer looks for.
pub fn fuzz_datagram(data: &[u8]) {
    let mut end = 0usize;
    for p in quic::packets(data) {
        match p {
            Ok(quic::Packet::Long(h)) => {
                assert!(
                    end + h.packet_len <= data.len(),
                    "long packet past the datagram"
                );
                assert!(h.dcid.len() <= 255 && h.scid.len() <= 255);
                if h.is_known_version() {
                    assert!(h.dcid.len() <= quic::MAX_CID_LEN && h.scid.len() <= quic::MAX_CID_LEN);
                }
                end += h.packet_len;
            }
            Ok(quic::Packet::Short { offset, .. }) => {
                assert_eq!(offset, end, "short header not where the long ones end");
                end = data.len();
            }
            Err(_) => end = data.len(),
        }
    }
    if let Some(offset) = quic::short_header_offset(data) {
        assert!(offset < data.len());
    }
    let mut pos = 0;
    while let Some(v) = varint::read(data, &mut pos) {
        assert!(v <= varint::MAX);
        let mut out = Vec::new();
        varint::write(&mut out, v);
        assert!(out.len() <= 8);
    }
    let _ = checksum::internet_checksum(data);
}

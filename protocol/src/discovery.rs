//! Discovery markers carried inline on the base connection's 4-tuple (Sidekick (NSDI '24) §4.1).
//!
//! The client sends a *request* datagram on its base connection; an on-path proxy answers with a
//! *reply* datagram spoofed from the peer's address and port. Both are exactly
//! [`DISCOVERY_LEN`] = 128 bytes (the paper's 128-byte marker), so a reply never carries more
//! bytes than the request that triggered it (amplification factor 1).
//!
//! Why the base receiver drops the request: byte 0 has the QUIC short-header form (top bit 0,
//! fixed bit 1), bytes 1.. are a magic that no endpoint issued as a connection ID. A QUIC
//! receiver routes by destination connection ID: an unknown ID is dropped (or answered with a
//! stateless reset the client ignores, RFC 9000 §10.3); an endpoint with zero-length IDs routes
//! by 4-tuple, removes header protection from random bytes and drops the packet when AEAD
//! decryption fails (RFC 9000 §12.2/§5.3). Either way it is discarded as unauthenticated.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::error::Error;
use crate::keys::{NONCE_LEN, PUBLIC_KEY_LEN, SESSION_ID_LEN, SessionId, SessionKey};

/// Size of both discovery datagrams (UDP payload).
pub const DISCOVERY_LEN: usize = 128;
/// Magic at bytes 1..17 of a request.
pub const REQUEST_MAGIC: [u8; 16] = *b"\xa7SIDEKICK-REQ\x3c\x91\x0e";
/// Magic at bytes 1..17 of a reply.
pub const REPLY_MAGIC: [u8; 16] = *b"\xa7SIDEKICK-REP\x3c\x91\x0e";
/// Mask and value of byte 0: QUIC header form bit 0, fixed bit 1, rest random.
pub const FIRST_BYTE_MASK: u8 = 0xc0;
/// Required value of `byte0 & FIRST_BYTE_MASK`.
pub const FIRST_BYTE_VALUE: u8 = 0x40;
/// Length of the key-confirmation tag in a reply.
pub const REPLY_TAG_LEN: usize = 16;

const MAGIC_AT: usize = 1;
/// End (exclusive) of the 16-byte magic.
const MAGIC_END: usize = MAGIC_AT + 16;
const VERSION_AT: usize = 17;
const CAPS_AT: usize = 18;
const NONCE_AT: usize = 19;
// Request.
const REQ_PK_AT: usize = 35;
// Reply.
const REP_SID_AT: usize = 35;
const REP_PK_AT: usize = 51;
const REP_FAMILY_AT: usize = 83;
const REP_ADDR_AT: usize = 84;
const REP_PORT_AT: usize = 100;
const REP_TAG_AT: usize = 102;

/// A parsed discovery request (fixed size, `Copy`, no allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryRequest {
    /// Highest protocol version the client speaks.
    pub version: u8,
    /// Capability bits the client wants (`CAP_*`).
    pub capabilities: u8,
    /// Client nonce, echoed in the reply.
    pub nonce: [u8; NONCE_LEN],
    /// Client's ephemeral X25519 public key.
    pub public_key: [u8; PUBLIC_KEY_LEN],
}

/// A parsed discovery reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryReply {
    /// Protocol version the proxy selected.
    pub version: u8,
    /// Capability bits the proxy supports.
    pub capabilities: u8,
    /// Echo of the client's nonce.
    pub nonce: [u8; NONCE_LEN],
    /// The session id the proxy chose.
    pub session_id: SessionId,
    /// Proxy's ephemeral X25519 public key.
    pub public_key: [u8; PUBLIC_KEY_LEN],
    /// Where the client sends sidekick frames.
    pub sidekick_addr: SocketAddr,
    /// Key confirmation: HMAC-SHA256(session key, bytes 0..102), first 16 bytes.
    pub tag: [u8; REPLY_TAG_LEN],
}

#[inline]
fn has_marker(payload: &[u8], magic: &[u8; 16]) -> bool {
    payload.len() == DISCOVERY_LEN
        && payload[0] & FIRST_BYTE_MASK == FIRST_BYTE_VALUE
        && payload[MAGIC_AT..MAGIC_END] == magic[..]
}

/// Hot-path check run by the proxy on every UDP payload: a length compare, one masked byte and a
/// 16-byte compare. No allocation.
#[inline]
pub fn is_discovery_request(payload: &[u8]) -> Option<DiscoveryRequest> {
    if !has_marker(payload, &REQUEST_MAGIC) {
        return None;
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&payload[NONCE_AT..NONCE_AT + NONCE_LEN]);
    let mut public_key = [0u8; PUBLIC_KEY_LEN];
    public_key.copy_from_slice(&payload[REQ_PK_AT..REQ_PK_AT + PUBLIC_KEY_LEN]);
    Some(DiscoveryRequest {
        version: payload[VERSION_AT],
        capabilities: payload[CAPS_AT],
        nonce,
        public_key,
    })
}

/// Cheap check the client runs on datagrams arriving on its base socket.
#[inline]
pub fn is_discovery_reply(payload: &[u8]) -> bool {
    has_marker(payload, &REPLY_MAGIC)
}

impl DiscoveryRequest {
    /// Encodes the request; `first_byte_random` supplies the 6 random low bits of byte 0.
    pub fn encode(&self, first_byte_random: u8) -> [u8; DISCOVERY_LEN] {
        let mut b = [0u8; DISCOVERY_LEN];
        b[0] = FIRST_BYTE_VALUE | (first_byte_random & !FIRST_BYTE_MASK);
        b[MAGIC_AT..MAGIC_END].copy_from_slice(&REQUEST_MAGIC);
        b[VERSION_AT] = self.version;
        b[CAPS_AT] = self.capabilities;
        b[NONCE_AT..NONCE_AT + NONCE_LEN].copy_from_slice(&self.nonce);
        b[REQ_PK_AT..REQ_PK_AT + PUBLIC_KEY_LEN].copy_from_slice(&self.public_key);
        b
    }
}

fn write_addr(b: &mut [u8; DISCOVERY_LEN], addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(v4) => {
            b[REP_FAMILY_AT] = 4;
            b[REP_ADDR_AT..REP_ADDR_AT + 4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            b[REP_FAMILY_AT] = 6;
            b[REP_ADDR_AT..REP_ADDR_AT + 16].copy_from_slice(&v6.octets());
        }
    }
    b[REP_PORT_AT..REP_PORT_AT + 2].copy_from_slice(&addr.port().to_be_bytes());
}

impl DiscoveryReply {
    /// Encodes the reply and computes its key-confirmation tag under `key`.
    pub fn encode(&self, first_byte_random: u8, key: &SessionKey) -> [u8; DISCOVERY_LEN] {
        let mut b = [0u8; DISCOVERY_LEN];
        b[0] = FIRST_BYTE_VALUE | (first_byte_random & !FIRST_BYTE_MASK);
        b[MAGIC_AT..MAGIC_END].copy_from_slice(&REPLY_MAGIC);
        b[VERSION_AT] = self.version;
        b[CAPS_AT] = self.capabilities;
        b[NONCE_AT..NONCE_AT + NONCE_LEN].copy_from_slice(&self.nonce);
        b[REP_SID_AT..REP_SID_AT + SESSION_ID_LEN].copy_from_slice(self.session_id.as_bytes());
        b[REP_PK_AT..REP_PK_AT + PUBLIC_KEY_LEN].copy_from_slice(&self.public_key);
        write_addr(&mut b, self.sidekick_addr);
        let t = key.tag(&[&b[..REP_TAG_AT]]);
        b[REP_TAG_AT..REP_TAG_AT + REPLY_TAG_LEN].copy_from_slice(&t[..REPLY_TAG_LEN]);
        b
    }

    /// Parses a reply (its tag is checked later, once the key is derived).
    pub fn decode(payload: &[u8]) -> Result<DiscoveryReply, Error> {
        if payload.len() < DISCOVERY_LEN {
            return Err(Error::Truncated {
                need: DISCOVERY_LEN,
                have: payload.len(),
            });
        }
        if payload.len() > DISCOVERY_LEN {
            return Err(Error::Oversized {
                len: payload.len(),
                max: DISCOVERY_LEN,
            });
        }
        if !is_discovery_reply(payload) {
            return Err(Error::BadMagic);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&payload[NONCE_AT..NONCE_AT + NONCE_LEN]);
        let mut sid = [0u8; SESSION_ID_LEN];
        sid.copy_from_slice(&payload[REP_SID_AT..REP_SID_AT + SESSION_ID_LEN]);
        let mut public_key = [0u8; PUBLIC_KEY_LEN];
        public_key.copy_from_slice(&payload[REP_PK_AT..REP_PK_AT + PUBLIC_KEY_LEN]);
        let port = u16::from_be_bytes([payload[REP_PORT_AT], payload[REP_PORT_AT + 1]]);
        let ip = match payload[REP_FAMILY_AT] {
            4 => {
                let mut o = [0u8; 4];
                o.copy_from_slice(&payload[REP_ADDR_AT..REP_ADDR_AT + 4]);
                IpAddr::V4(Ipv4Addr::from(o))
            }
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&payload[REP_ADDR_AT..REP_ADDR_AT + 16]);
                IpAddr::V6(Ipv6Addr::from(o))
            }
            f => return Err(Error::Decode(format!("unknown address family {f}"))),
        };
        let mut tag = [0u8; REPLY_TAG_LEN];
        tag.copy_from_slice(&payload[REP_TAG_AT..REP_TAG_AT + REPLY_TAG_LEN]);
        Ok(DiscoveryReply {
            version: payload[VERSION_AT],
            capabilities: payload[CAPS_AT],
            nonce,
            session_id: SessionId(sid),
            public_key,
            sidekick_addr: SocketAddr::new(ip, port),
            tag,
        })
    }

    /// Checks the key-confirmation tag of the raw reply `payload` under `key`.
    pub fn verify_tag(payload: &[u8], key: &SessionKey) -> bool {
        payload.len() == DISCOVERY_LEN
            && key.verify(
                &[&payload[..REP_TAG_AT]],
                &payload[REP_TAG_AT..REP_TAG_AT + REPLY_TAG_LEN],
            )
    }
}

/// Fuzz body for the discovery decoders; must never panic.
pub fn fuzz_discovery(data: &[u8]) {
    if let Some(req) = is_discovery_request(data) {
        assert_eq!(req.encode(data[0])[..67], data[..67]);
    }
    if let Ok(rep) = DiscoveryReply::decode(data) {
        assert!(is_discovery_reply(data));
        assert_eq!(rep.nonce[..], data[NONCE_AT..NONCE_AT + NONCE_LEN]);
        let _ = DiscoveryReply::verify_tag(data, &SessionKey::from_bytes(&[1; 32]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip_and_detection() {
        let r = DiscoveryRequest {
            version: 1,
            capabilities: 3,
            nonce: [5; 16],
            public_key: [6; 32],
        };
        let b = r.encode(0xff);
        assert_eq!(b[0] & 0xc0, 0x40, "QUIC short-header form with fixed bit");
        assert_eq!(is_discovery_request(&b), Some(r));
        assert!(!is_discovery_reply(&b));
        assert_eq!(is_discovery_request(&b[..127]), None);
        let mut longer = b.to_vec();
        longer.push(0);
        assert_eq!(is_discovery_request(&longer), None);
        let mut lh = b;
        lh[0] = 0xc0; // long header form: not ours
        assert_eq!(is_discovery_request(&lh), None);
        let mut m = b;
        m[5] ^= 1;
        assert_eq!(is_discovery_request(&m), None);
    }

    #[test]
    fn reply_round_trip_v4_v6() {
        let key = SessionKey::from_bytes(&[2; 32]);
        for addr in ["192.0.2.7:4433", "[2001:db8::1]:9"] {
            let r = DiscoveryReply {
                version: 1,
                capabilities: 2,
                nonce: [1; 16],
                session_id: SessionId([2; 16]),
                public_key: [3; 32],
                sidekick_addr: addr.parse().unwrap(),
                tag: [0; 16],
            };
            let b = r.encode(0x12, &key);
            assert!(is_discovery_reply(&b));
            assert!(is_discovery_request(&b).is_none());
            let d = DiscoveryReply::decode(&b).unwrap();
            assert_eq!(d.sidekick_addr, r.sidekick_addr);
            assert_eq!(d.session_id, r.session_id);
            assert!(DiscoveryReply::verify_tag(&b, &key));
            assert!(!DiscoveryReply::verify_tag(
                &b,
                &SessionKey::from_bytes(&[9; 32])
            ));
            let mut bad = b;
            bad[REP_FAMILY_AT] = 5;
            assert!(matches!(
                DiscoveryReply::decode(&bad),
                Err(Error::Decode(_))
            ));
            assert!(matches!(
                DiscoveryReply::decode(&b[..100]),
                Err(Error::Truncated { .. })
            ));
            fuzz_discovery(&b);
        }
    }
}

//! Framing on the sidekick socket: fixed header, protobuf body, truncated HMAC-SHA256 tag.
//!
//! ```text
//!  0      2    3    4     5     6                22        30      34      36
//!  +------+----+----+-----+-----+----------------+---------+-------+-------+------+-----+
//!  |magic |ver |type|flags|rsvd | session id (16)| seq (8) |quota 4|len (2)| body | tag |
//!  +------+----+----+-----+-----+----------------+---------+-------+-------+------+-----+
//! ```
//!
//! All integers big-endian. The tag (16 bytes, or 32 with flag `TAG32`) is HMAC-SHA256 under the
//! session key over header ‖ body. The layout is specified in `docs/protocol.md` §4.

use crate::error::Error;
use crate::keys::{SESSION_ID_LEN, SessionId, SessionKey};
use crate::messages::{FrameDirection, Message};

/// First two bytes of every sidekick frame ("SK").
pub const FRAME_MAGIC: [u8; 2] = [0x53, 0x4b];
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u8 = 1;
/// Length of the fixed header.
pub const HEADER_LEN: usize = 36;
/// Largest datagram (UDP payload) this protocol sends or accepts.
pub const MAX_DATAGRAM: usize = 1400;
/// Flag: the tag is the full 32 bytes (otherwise 16).
pub const FLAG_TAG32: u8 = 0x01;
/// Flag: sent by the proxy (otherwise by the client). Covered by the tag, so a frame cannot be
/// reflected back to its sender.
pub const FLAG_FROM_PROXY: u8 = 0x02;

/// Tag length choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TagLen {
    /// 16-byte truncated HMAC-SHA256 (default; 128-bit forgery resistance).
    #[default]
    Short,
    /// Full 32-byte HMAC-SHA256.
    Long,
}

impl TagLen {
    /// Number of tag bytes.
    pub fn bytes(self) -> usize {
        match self {
            TagLen::Short => 16,
            TagLen::Long => 32,
        }
    }
}

/// The fixed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: u8,
    /// Message type byte (see [`crate::messages::msg_type`]).
    pub msg_type: u8,
    /// Flag bits; unknown bits are ignored (but authenticated).
    pub flags: u8,
    /// Session this frame belongs to.
    pub session_id: SessionId,
    /// Per-direction sequence number, starting at 1, for replay protection.
    pub seq: u64,
    /// Proxy → client: further messages the proxy may still send after this one.
    /// Client → proxy: the highest proxy sequence number the client authorises.
    pub quota: u32,
    /// Body length in bytes.
    pub body_len: u16,
}

impl Header {
    /// The direction the flags encode.
    pub fn direction(&self) -> FrameDirection {
        if self.flags & FLAG_FROM_PROXY != 0 {
            FrameDirection::ProxyToClient
        } else {
            FrameDirection::ClientToProxy
        }
    }

    /// Tag length encoded in the flags.
    pub fn tag_len(&self) -> TagLen {
        if self.flags & FLAG_TAG32 != 0 {
            TagLen::Long
        } else {
            TagLen::Short
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&FRAME_MAGIC);
        out.push(self.version);
        out.push(self.msg_type);
        out.push(self.flags);
        out.push(0);
        out.extend_from_slice(self.session_id.as_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.quota.to_be_bytes());
        out.extend_from_slice(&self.body_len.to_be_bytes());
    }

    /// Parses and checks the header of a datagram without authenticating it (to find the
    /// session). Checks: size bounds, magic, version, and that the declared body length plus
    /// the tag length equals the datagram length.
    pub fn peek(datagram: &[u8]) -> Result<Header, Error> {
        if datagram.len() > MAX_DATAGRAM {
            return Err(Error::Oversized {
                len: datagram.len(),
                max: MAX_DATAGRAM,
            });
        }
        let Some(h) = datagram.first_chunk::<HEADER_LEN>() else {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have: datagram.len(),
            });
        };
        if h[0..2] != FRAME_MAGIC {
            return Err(Error::BadMagic);
        }
        if h[2] != PROTOCOL_VERSION {
            return Err(Error::UnsupportedVersion(h[2]));
        }
        let mut sid = [0u8; SESSION_ID_LEN];
        sid.copy_from_slice(&h[6..22]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&h[22..30]);
        let mut quota = [0u8; 4];
        quota.copy_from_slice(&h[30..34]);
        let header = Header {
            version: h[2],
            msg_type: h[3],
            flags: h[4],
            session_id: SessionId(sid),
            seq: u64::from_be_bytes(seq),
            quota: u32::from_be_bytes(quota),
            body_len: u16::from_be_bytes([h[34], h[35]]),
        };
        let need = HEADER_LEN + header.body_len as usize + header.tag_len().bytes();
        if datagram.len() < need {
            return Err(Error::Truncated {
                need,
                have: datagram.len(),
            });
        }
        if datagram.len() > need {
            return Err(Error::LengthMismatch {
                declared: header.body_len as usize,
                actual: datagram.len() - HEADER_LEN - header.tag_len().bytes(),
            });
        }
        Ok(header)
    }
}

/// A decoded, authenticated frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// Its header.
    pub header: Header,
    /// Its message.
    pub message: Message,
}

/// Largest body that fits a datagram with the given tag length.
pub fn max_body(tag: TagLen) -> usize {
    MAX_DATAGRAM - HEADER_LEN - tag.bytes()
}

/// Protobuf field number reserved in every message body for padding (a length-delimited field
/// of zero bytes). Receivers skip it like any unknown field; senders use it to pad an Init to
/// [`MIN_INIT_DATAGRAM`].
pub const PADDING_FIELD: u32 = 2047;

/// Smallest datagram that may carry an Init. The InitAck the proxy answers with is never larger
/// (checked by a unit test against the largest InitAck the encoder can produce), so answering an
/// Init never sends more bytes than were received (zero amplification, Sidekick (NSDI '24) §4.1
/// "Security"). Proxies refuse shorter Inits with [`Error::Truncated`].
pub const MIN_INIT_DATAGRAM: usize = 256;

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a padding field to `body` so that it grows by at least `extra` bytes (nothing when
/// `extra` is 0). The field is `PADDING_FIELD`, wire type 2, filled with zeros.
fn pad_body(body: &mut Vec<u8>, extra: usize) {
    if extra == 0 {
        return;
    }
    let key = (u64::from(PADDING_FIELD) << 3) | 2;
    let fixed = varint_len(key);
    let mut n = extra.saturating_sub(fixed + 1);
    while fixed + varint_len(n as u64) + n < extra {
        n += 1;
    }
    put_varint(body, key);
    put_varint(body, n as u64);
    body.resize(body.len() + n, 0);
}

/// Encodes and authenticates one frame.
pub fn seal(
    dir: FrameDirection,
    tag: TagLen,
    session_id: SessionId,
    seq: u64,
    quota: u32,
    message: &Message,
    key: &SessionKey,
) -> Result<Vec<u8>, Error> {
    seal_padded(dir, tag, session_id, seq, quota, message, key, 0)
}

/// [`seal`], padding the body with a [`PADDING_FIELD`] so the datagram is at least `min_len`
/// bytes long (at most one byte longer). The target is capped at `MAX_DATAGRAM − 1`, so padding
/// alone never makes a frame exceed [`MAX_DATAGRAM`].
#[allow(clippy::too_many_arguments)]
pub fn seal_padded(
    dir: FrameDirection,
    tag: TagLen,
    session_id: SessionId,
    seq: u64,
    quota: u32,
    message: &Message,
    key: &SessionKey,
    min_len: usize,
) -> Result<Vec<u8>, Error> {
    let mut body = message.encode_body();
    let unpadded = HEADER_LEN + body.len() + tag.bytes();
    pad_body(
        &mut body,
        min_len.min(MAX_DATAGRAM - 1).saturating_sub(unpadded),
    );
    if body.len() > max_body(tag) {
        return Err(Error::Oversized {
            len: body.len(),
            max: max_body(tag),
        });
    }
    let mut flags = 0;
    if tag == TagLen::Long {
        flags |= FLAG_TAG32;
    }
    if dir == FrameDirection::ProxyToClient {
        flags |= FLAG_FROM_PROXY;
    }
    let header = Header {
        version: PROTOCOL_VERSION,
        msg_type: message.msg_type(),
        flags,
        session_id,
        seq,
        quota,
        body_len: body.len() as u16,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + tag.bytes());
    header.write(&mut out);
    out.extend_from_slice(&body);
    let t = key.tag(&[&out]);
    out.extend_from_slice(&t[..tag.bytes()]);
    Ok(out)
}

/// Seals an arbitrary `body` under `header` (its `body_len` is overwritten): lets tests and fuzz
/// targets build authentic frames whose bodies the encoder would never produce.
pub fn seal_raw(header: &Header, body: &[u8], key: &SessionKey) -> Result<Vec<u8>, Error> {
    let tag = header.tag_len();
    if body.len() > max_body(tag) {
        return Err(Error::Oversized {
            len: body.len(),
            max: max_body(tag),
        });
    }
    let header = Header {
        body_len: body.len() as u16,
        ..*header
    };
    let mut out = Vec::with_capacity(HEADER_LEN + body.len() + tag.bytes());
    header.write(&mut out);
    out.extend_from_slice(body);
    let t = key.tag(&[&out]);
    out.extend_from_slice(&t[..tag.bytes()]);
    Ok(out)
}

/// Parses, authenticates and decodes a frame that must travel in direction `expected`.
///
/// Order of checks: header ([`Header::peek`]), tag, direction, message type and body. Replay
/// and epoch checks are the session's job (they need state).
pub fn open(datagram: &[u8], key: &SessionKey, expected: FrameDirection) -> Result<Frame, Error> {
    let header = Header::peek(datagram)?;
    let tag_at = datagram.len() - header.tag_len().bytes();
    if !key.verify(&[&datagram[..tag_at]], &datagram[tag_at..]) {
        return Err(Error::BadMac);
    }
    if header.direction() != expected || !Message::allowed(header.msg_type, expected) {
        if !Message::allowed(header.msg_type, FrameDirection::ClientToProxy)
            && !Message::allowed(header.msg_type, FrameDirection::ProxyToClient)
        {
            return Err(Error::UnknownMessageType(header.msg_type));
        }
        return Err(Error::WrongDirection(header.msg_type));
    }
    let message = Message::decode_body(header.msg_type, &datagram[HEADER_LEN..tag_at])?;
    Ok(Frame { header, message })
}

/// Fuzz body for the frame decoder: arbitrary bytes under a fixed key, both directions.
pub fn fuzz_open(data: &[u8]) {
    let key = SessionKey::from_bytes(&[0x5a; 32]);
    for dir in [FrameDirection::ClientToProxy, FrameDirection::ProxyToClient] {
        if let Ok(f) = open(data, &key, dir) {
            // An authentic frame re-seals to the same bytes.
            let again = seal(
                dir,
                f.header.tag_len(),
                f.header.session_id,
                f.header.seq,
                f.header.quota,
                &f.message,
                &key,
            );
            assert!(again.is_ok());
        }
    }
    let _ = Header::peek(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{Quack, Reset};

    fn key() -> SessionKey {
        SessionKey::from_bytes(&[3; 32])
    }

    fn sample() -> Vec<u8> {
        seal(
            FrameDirection::ProxyToClient,
            TagLen::Short,
            SessionId([9; 16]),
            5,
            17,
            &Message::Quack(Quack {
                epoch: 1,
                data: vec![1, 2, 3],
            }),
            &key(),
        )
        .unwrap()
    }

    #[test]
    fn round_trip_both_tag_lengths() {
        for tag in [TagLen::Short, TagLen::Long] {
            let m = Message::Reset(Reset {
                epoch: 4,
                reason: 0,
            });
            let b = seal(
                FrameDirection::ClientToProxy,
                tag,
                SessionId([1; 16]),
                u64::MAX,
                u32::MAX,
                &m,
                &key(),
            )
            .unwrap();
            assert_eq!(b.len(), HEADER_LEN + m.encode_body().len() + tag.bytes());
            let f = open(&b, &key(), FrameDirection::ClientToProxy).unwrap();
            assert_eq!(f.message, m);
            assert_eq!(f.header.seq, u64::MAX);
            assert_eq!(f.header.quota, u32::MAX);
            assert_eq!(f.header.tag_len(), tag);
        }
    }

    #[test]
    fn malformed_frames() {
        let b = sample();
        assert!(open(&b, &key(), FrameDirection::ProxyToClient).is_ok());
        // Truncated at every length.
        for n in 0..b.len() {
            assert!(
                matches!(
                    open(&b[..n], &key(), FrameDirection::ProxyToClient),
                    Err(Error::Truncated { .. })
                ),
                "len {n}"
            );
        }
        // Trailing junk.
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            open(&long, &key(), FrameDirection::ProxyToClient),
            Err(Error::LengthMismatch { .. })
        ));
        // Oversized.
        assert!(matches!(
            open(
                &vec![0; MAX_DATAGRAM + 1],
                &key(),
                FrameDirection::ProxyToClient
            ),
            Err(Error::Oversized { .. })
        ));
        // Bad magic, unknown version.
        let mut m = b.clone();
        m[0] ^= 1;
        assert_eq!(
            open(&m, &key(), FrameDirection::ProxyToClient),
            Err(Error::BadMagic)
        );
        let mut v = b.clone();
        v[2] = 2;
        assert_eq!(
            open(&v, &key(), FrameDirection::ProxyToClient),
            Err(Error::UnsupportedVersion(2))
        );
        // Wrong key, flipped bit anywhere past the version byte.
        assert_eq!(
            open(
                &b,
                &SessionKey::from_bytes(&[4; 32]),
                FrameDirection::ProxyToClient
            ),
            Err(Error::BadMac)
        );
        for i in 3..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x80;
            let r = open(&c, &key(), FrameDirection::ProxyToClient);
            assert!(r.is_err(), "flip at {i} accepted");
        }
        // Right MAC, wrong direction (reflection).
        assert_eq!(
            open(&b, &key(), FrameDirection::ClientToProxy),
            Err(Error::WrongDirection(crate::messages::msg_type::QUACK))
        );
    }

    #[test]
    fn padding_reaches_the_minimum_and_is_skipped() {
        let m = Message::Reset(Reset {
            epoch: 4,
            reason: 0,
        });
        let plain = seal(
            FrameDirection::ClientToProxy,
            TagLen::Short,
            SessionId([1; 16]),
            1,
            0,
            &m,
            &key(),
        )
        .unwrap();
        for min in [
            0,
            plain.len(),
            plain.len() + 1,
            plain.len() + 2,
            100,
            180,
            181,
            182,
            183,
            256,
            1000,
            5000,
        ] {
            let b = seal_padded(
                FrameDirection::ClientToProxy,
                TagLen::Short,
                SessionId([1; 16]),
                1,
                0,
                &m,
                &key(),
                min,
            )
            .unwrap();
            let want = min.min(MAX_DATAGRAM - 1).max(plain.len());
            assert!(b.len() >= want, "min {min}: got {}", b.len());
            if min > plain.len() + 3 {
                assert!(b.len() <= want + 1, "min {min}: got {}", b.len());
            }
            assert!(b.len() <= MAX_DATAGRAM);
            let f = open(&b, &key(), FrameDirection::ClientToProxy).unwrap();
            assert_eq!(f.message, m);
        }
    }

    /// The largest InitAck the encoder can produce (every integer at its maximum, a 16-byte
    /// hash key, the long tag) fits in the minimum Init: answering an Init never amplifies.
    #[test]
    fn largest_init_ack_fits_in_the_minimum_init() {
        use crate::messages::{IdentifierSpec, InitAck, PackratConfig, RobinConfig, SessionConfig};
        let config = SessionConfig {
            robin: Some(RobinConfig {
                interval_ms: u32::MAX,
                interval_packets: u32::MAX,
                threshold: u32::MAX,
                quack_on_gap_percent: u32::MAX,
            }),
            packrat: Some(PackratConfig {
                eack_interval_ms: u32::MAX,
                eack_interval_packets: u32::MAX,
                local_symbols: u32::MAX,
                cache_capacity_bytes: u64::MAX,
                reorder_delay_ms: u32::MAX,
                multicast_group: Vec::new(),
            }),
            identifier: Some(IdentifierSpec {
                mode: i32::MIN,
                offset: i32::MIN,
                width: u32::MAX,
                hash_key: vec![0xff; crate::messages::MAX_HASH_KEY],
            }),
        };
        let ack = Message::InitAck(InitAck {
            accepted: true,
            capabilities: u32::MAX,
            config: Some(config),
            path_challenge: u64::MAX,
            epoch: u32::MAX,
            reject_code: u32::MAX,
        });
        let b = seal(
            FrameDirection::ProxyToClient,
            TagLen::Long,
            SessionId([0xff; 16]),
            u64::MAX,
            u32::MAX,
            &ack,
            &key(),
        )
        .unwrap();
        assert!(
            b.len() <= MIN_INIT_DATAGRAM,
            "largest InitAck is {} bytes",
            b.len()
        );
    }

    #[test]
    fn oversized_body_refused_on_seal() {
        let m = Message::Quack(Quack {
            epoch: 0,
            data: vec![0; MAX_DATAGRAM],
        });
        assert!(matches!(
            seal(
                FrameDirection::ProxyToClient,
                TagLen::Short,
                SessionId([0; 16]),
                1,
                0,
                &m,
                &key()
            ),
            Err(Error::Oversized { .. })
        ));
    }

    #[test]
    fn unknown_type_with_valid_mac() {
        let mut b = sample();
        b[3] = 99;
        let tag_at = b.len() - 16;
        let t = key().tag(&[&b[..tag_at]]);
        b[tag_at..].copy_from_slice(&t[..16]);
        assert_eq!(
            open(&b, &key(), FrameDirection::ProxyToClient),
            Err(Error::UnknownMessageType(99))
        );
        fuzz_open(&b);
    }
}

//! Wire format of the media applications (`sidekick-media`, `sidekick-media-fec`).
//!
//! Every datagram starts with a kind byte:
//!
//! | kind | name | layout after the kind byte |
//! |---|---|---|
//! | 0x01 | DATA | nonce counter `u64`, then ChaCha20-Poly1305 ciphertext of [`MediaPacket`] (seq `u32`, generation time `u64` µs since the Unix epoch, echo `u64` µs, payload), then the 16-byte tag |
//! | 0x02 | NACK | echo timestamp `u64` µs (receiver clock), count `u16`, `count` × seq `u32` |
//! | 0x03 | HELLO | requested duration `u32` ms (media-fec: client asks the server to stream) |
//! | 0x04 | FIN | total number of packets sent `u32` (sender → receiver, end of stream) |
//! | 0x05 | SUMMARY | UTF-8 JSON of the receiver's metrics |
//!
//! All integers big-endian. The sequence number (and everything else in DATA) is encrypted; the
//! last four bytes of a DATA datagram are its AEAD tag — pseudorandom, which is what a quACK or eACK
//! identifier needs (docs/architecture.md).

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};

/// Kind byte of a DATA datagram.
pub const KIND_DATA: u8 = 0x01;
/// Kind byte of a NACK datagram.
pub const KIND_NACK: u8 = 0x02;
/// Kind byte of a HELLO datagram.
pub const KIND_HELLO: u8 = 0x03;
/// Kind byte of a FIN datagram.
pub const KIND_FIN: u8 = 0x04;
/// Kind byte of a SUMMARY datagram.
pub const KIND_SUMMARY: u8 = 0x05;

/// Fixed test key: these are example applications; the encryption exists so that the sequence
/// number is opaque on the wire (Sidekick (NSDI '24) §5.1), not to protect anything.
pub const TEST_KEY: [u8; 32] = *b"sidekick-media-test-key-32-bytes";

/// Bytes of a DATA datagram besides the payload: kind, nonce, seq, generation time, echo, tag.
pub const DATA_OVERHEAD: usize = 1 + 8 + 4 + 8 + 8 + 16;

/// Most sequence numbers in one NACK datagram (keeps it under 1100 bytes).
pub const MAX_NACK_SEQS: usize = 256;

/// Errors decoding a media datagram.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Datagram shorter than its kind requires.
    #[error("truncated datagram")]
    Truncated,
    /// Unknown kind byte.
    #[error("unknown kind {0:#x}")]
    UnknownKind(u8),
    /// Authentication failed.
    #[error("decryption failed")]
    Decrypt,
    /// NACK count exceeds [`MAX_NACK_SEQS`] or the datagram's length.
    #[error("bad NACK count {0}")]
    BadCount(usize),
    /// SUMMARY is not UTF-8.
    #[error("summary is not UTF-8")]
    NotUtf8,
}

/// Plaintext of a DATA datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaPacket {
    /// Sequence number.
    pub seq: u32,
    /// When the packet's newest data was produced (µs since the Unix epoch, `CLOCK_REALTIME`);
    /// unchanged on retransmission.
    pub gen_unix_us: u64,
    /// Echo of the NACK timestamp this packet answers (0 for an original transmission).
    pub echo_us: u64,
    /// Media payload.
    pub payload: Vec<u8>,
}

/// A decoded media datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Encrypted media packet.
    Data(MediaPacket),
    /// Negative acknowledgement.
    Nack {
        /// Receiver timestamp to echo in retransmissions.
        ts_us: u64,
        /// Missing sequence numbers.
        seqs: Vec<u32>,
    },
    /// Start request.
    Hello {
        /// Requested stream duration, ms.
        duration_ms: u32,
    },
    /// End of stream.
    Fin {
        /// Packets sent (sequence numbers `0..total`).
        total: u32,
    },
    /// Receiver metrics as JSON.
    Summary(String),
}

/// ChaCha20-Poly1305 sealing and opening of DATA datagrams with the fixed test key.
pub struct Codec {
    key: LessSafeKey,
    counter: u64,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl Codec {
    /// A codec whose nonce counter starts at `nonce_start` (pick it at random per sender so two
    /// runs do not reuse nonces under the fixed key).
    pub fn new(nonce_start: u64) -> Self {
        // The key length is fixed and correct for ChaCha20-Poly1305, so this cannot fail.
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &TEST_KEY)
            .unwrap_or_else(|_| unreachable!("32-byte key for ChaCha20-Poly1305"));
        Self {
            key: LessSafeKey::new(unbound),
            counter: nonce_start,
        }
    }

    fn nonce(counter: u64) -> Nonce {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&counter.to_be_bytes());
        Nonce::assume_unique_for_key(n)
    }

    /// Seal a DATA datagram (a fresh nonce each call, so a retransmission has new bytes and a new
    /// identifier).
    pub fn seal(&mut self, p: &MediaPacket) -> Vec<u8> {
        let counter = self.counter;
        self.counter = self.counter.wrapping_add(1);
        let mut out = Vec::with_capacity(DATA_OVERHEAD + p.payload.len());
        out.push(KIND_DATA);
        out.extend_from_slice(&counter.to_be_bytes());
        let mut body = Vec::with_capacity(20 + p.payload.len() + 16);
        body.extend_from_slice(&p.seq.to_be_bytes());
        body.extend_from_slice(&p.gen_unix_us.to_be_bytes());
        body.extend_from_slice(&p.echo_us.to_be_bytes());
        body.extend_from_slice(&p.payload);
        let aad = [KIND_DATA];
        // Sealing in place only fails for inputs longer than the AEAD's limit (256 GiB).
        if self
            .key
            .seal_in_place_append_tag(Self::nonce(counter), Aad::from(aad), &mut body)
            .is_err()
        {
            unreachable!("ChaCha20-Poly1305 input limit exceeded");
        }
        out.extend_from_slice(&body);
        out
    }

    /// Decode any media datagram.
    pub fn decode(&self, buf: &[u8]) -> Result<Message, WireError> {
        let (&kind, rest) = buf.split_first().ok_or(WireError::Truncated)?;
        match kind {
            KIND_DATA => {
                if rest.len() < 8 + 20 + 16 {
                    return Err(WireError::Truncated);
                }
                let counter = u64_at(rest, 0);
                let mut body = rest[8..].to_vec();
                let plain = self
                    .key
                    .open_in_place(Self::nonce(counter), Aad::from([KIND_DATA]), &mut body)
                    .map_err(|_| WireError::Decrypt)?;
                Ok(Message::Data(MediaPacket {
                    seq: u32_at(plain, 0),
                    gen_unix_us: u64_at(plain, 4),
                    echo_us: u64_at(plain, 12),
                    payload: plain[20..].to_vec(),
                }))
            }
            KIND_NACK => {
                if rest.len() < 10 {
                    return Err(WireError::Truncated);
                }
                let ts_us = u64_at(rest, 0);
                let count = usize::from(u16::from_be_bytes([rest[8], rest[9]]));
                let body = &rest[10..];
                if count > MAX_NACK_SEQS || body.len() < 4 * count {
                    return Err(WireError::BadCount(count));
                }
                let seqs = (0..count).map(|i| u32_at(body, 4 * i)).collect();
                Ok(Message::Nack { ts_us, seqs })
            }
            KIND_HELLO => {
                if rest.len() < 4 {
                    return Err(WireError::Truncated);
                }
                Ok(Message::Hello {
                    duration_ms: u32_at(rest, 0),
                })
            }
            KIND_FIN => {
                if rest.len() < 4 {
                    return Err(WireError::Truncated);
                }
                Ok(Message::Fin {
                    total: u32_at(rest, 0),
                })
            }
            KIND_SUMMARY => std::str::from_utf8(rest)
                .map(|s| Message::Summary(s.to_owned()))
                .map_err(|_| WireError::NotUtf8),
            other => Err(WireError::UnknownKind(other)),
        }
    }
}

/// Encode NACK datagrams for `seqs` (split into chunks of [`MAX_NACK_SEQS`]).
pub fn encode_nacks(ts_us: u64, seqs: &[u32]) -> Vec<Vec<u8>> {
    seqs.chunks(MAX_NACK_SEQS)
        .map(|chunk| {
            let mut out = Vec::with_capacity(11 + 4 * chunk.len());
            out.push(KIND_NACK);
            out.extend_from_slice(&ts_us.to_be_bytes());
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            for s in chunk {
                out.extend_from_slice(&s.to_be_bytes());
            }
            out
        })
        .collect()
}

/// Encode a HELLO datagram.
pub fn encode_hello(duration_ms: u32) -> Vec<u8> {
    let mut out = vec![KIND_HELLO];
    out.extend_from_slice(&duration_ms.to_be_bytes());
    out
}

/// Encode a FIN datagram.
pub fn encode_fin(total: u32) -> Vec<u8> {
    let mut out = vec![KIND_FIN];
    out.extend_from_slice(&total.to_be_bytes());
    out
}

/// Encode a SUMMARY datagram.
pub fn encode_summary(json: &str) -> Vec<u8> {
    let mut out = vec![KIND_SUMMARY];
    out.extend_from_slice(json.as_bytes());
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Fuzz body: decoding arbitrary bytes never panics, and a decoded NACK/HELLO/FIN re-encodes to
/// the same prefix.
pub fn fuzz_parse(data: &[u8]) {
    let codec = Codec::new(0);
    match codec.decode(data) {
        Ok(Message::Nack { ts_us, seqs }) => {
            let enc = encode_nacks(ts_us, &seqs);
            if let Some(first) = enc.first() {
                assert_eq!(&first[..], &data[..first.len()]);
            }
        }
        Ok(Message::Hello { duration_ms }) => {
            assert_eq!(&encode_hello(duration_ms)[..], &data[..5]);
        }
        Ok(Message::Fin { total }) => assert_eq!(&encode_fin(total)[..], &data[..5]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn data_roundtrip_and_tamper() {
        let mut c = Codec::new(7);
        let p = MediaPacket {
            seq: 42,
            gen_unix_us: 1_700_000_000_000_000,
            echo_us: 5,
            payload: vec![9; 240],
        };
        let a = c.seal(&p);
        let b = c.seal(&p);
        assert_eq!(a.len(), DATA_OVERHEAD + 240);
        assert_ne!(a, b, "fresh nonce per datagram");
        assert_eq!(c.decode(&a), Ok(Message::Data(p.clone())));
        // The sequence number is not visible in clear.
        assert!(!a.windows(4).any(|w| w == 42u32.to_be_bytes()));
        let mut t = a.clone();
        let last = t.len() - 1;
        t[last] ^= 1;
        assert_eq!(c.decode(&t), Err(WireError::Decrypt));
    }

    #[test]
    fn control_roundtrip() {
        let c = Codec::new(0);
        let seqs: Vec<u32> = (0..300).collect();
        let nacks = encode_nacks(99, &seqs);
        assert_eq!(nacks.len(), 2);
        assert_eq!(
            c.decode(&nacks[1]),
            Ok(Message::Nack {
                ts_us: 99,
                seqs: (256..300).collect()
            })
        );
        assert_eq!(
            c.decode(&encode_hello(5000)),
            Ok(Message::Hello { duration_ms: 5000 })
        );
        assert_eq!(c.decode(&encode_fin(12)), Ok(Message::Fin { total: 12 }));
        assert_eq!(
            c.decode(&encode_summary("{}")),
            Ok(Message::Summary("{}".into()))
        );
        assert_eq!(c.decode(&[0x77]), Err(WireError::UnknownKind(0x77)));
        assert_eq!(c.decode(&[]), Err(WireError::Truncated));
        assert_eq!(
            c.decode(&[KIND_NACK, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1]),
            Err(WireError::BadCount(2))
        );
    }

    proptest! {
        #[test]
        fn fuzz_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..1200)) {
            fuzz_parse(&data);
        }

        #[test]
        fn fuzz_parse_kinds(kind in 0u8..7, rest in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut d = vec![kind];
            d.extend(rest);
            fuzz_parse(&d);
        }

        #[test]
        fn data_roundtrips(seq in any::<u32>(), g in any::<u64>(), e in any::<u64>(), payload in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut c = Codec::new(g);
            let p = MediaPacket { seq, gen_unix_us: g, echo_us: e, payload };
            let d = c.seal(&p);
            prop_assert_eq!(c.decode(&d), Ok(Message::Data(p)));
        }
    }
}

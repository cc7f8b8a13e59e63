//! Authentication of received 1-RTT packets, so that the lens trusts only packet numbers of
//! datagrams the stack itself will accept.
//!
//! Anyone on the path can inject a datagram whose header decodes to any packet number; before
//! this check a single one made the Packrat receiver open gaps and hold genuine traffic. The
//! lens now opens the packet with the connection's own 1-RTT keys (RFC 9001 §5.3) and reports
//! its number only when the AEAD verifies. Key updates (RFC 9001 §6) are followed: the next
//! generation's keys come from HKDF-Expand-Label(secret, "quic ku"), the header-protection key
//! never changes, and the previous generation is kept for packets reordered across an update.
//!
//! The plaintext is also what lets the lens read the peer's ACK frames ([`parse_ack_frame`]).

use ring::aead;

use super::{LensError, Suite, hkdf_expand_label};
use sidekick_wire::varint::read as varint;

/// One generation's packet-protection key and IV.
struct PacketKey {
    key: aead::LessSafeKey,
    iv: [u8; 12],
}

impl PacketKey {
    fn from_secret(suite: Suite, secret: &[u8]) -> Result<Self, LensError> {
        let mut key = [0u8; 32];
        let key = &mut key[..suite.key_len()];
        let mut iv = [0u8; 12];
        hkdf_expand_label(suite, secret, b"quic key", key)?;
        hkdf_expand_label(suite, secret, b"quic iv", &mut iv)?;
        let unbound = aead::UnboundKey::new(suite.aead(), key).map_err(|_| LensError::Crypto)?;
        Ok(Self {
            key: aead::LessSafeKey::new(unbound),
            iv,
        })
    }

    /// Opens `buf` (ciphertext ‖ tag) in place; the plaintext length on success.
    fn open(&self, pn: u64, header: &[u8], buf: &mut [u8]) -> Option<usize> {
        let mut nonce = self.iv;
        for (i, b) in pn.to_be_bytes().iter().enumerate() {
            nonce[4 + i] ^= b;
        }
        self.key
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(header),
                buf,
            )
            .ok()
            .map(|p| p.len())
    }
}

/// The key generations of one direction (RFC 9001 §6).
pub(super) struct PacketKeys {
    suite: Suite,
    phase: bool,
    current: PacketKey,
    next: PacketKey,
    next_secret: Vec<u8>,
    previous: Option<PacketKey>,
    /// Scratch buffer for the ciphertext (reused: no allocation per packet).
    buf: Vec<u8>,
    /// Key updates followed.
    pub(super) updates: u64,
}

fn next_secret(suite: Suite, secret: &[u8]) -> Result<Vec<u8>, LensError> {
    let mut out = vec![0u8; secret.len()];
    hkdf_expand_label(suite, secret, b"quic ku", &mut out)?;
    Ok(out)
}

impl PacketKeys {
    /// Keys of key phase 0 from the 1-RTT traffic secret.
    pub(super) fn new(suite: Suite, secret: &[u8]) -> Result<Self, LensError> {
        let next_secret = next_secret(suite, secret)?;
        Ok(Self {
            suite,
            phase: false,
            current: PacketKey::from_secret(suite, secret)?,
            next: PacketKey::from_secret(suite, &next_secret)?,
            next_secret,
            previous: None,
            buf: Vec::new(),
            updates: 0,
        })
    }

    /// Opens the protected payload of a packet numbered `pn` with key phase `phase`; returns the
    /// plaintext (borrowed from the scratch buffer) or `None` when no generation verifies it.
    pub(super) fn open(
        &mut self,
        pn: u64,
        phase: bool,
        header: &[u8],
        payload: &[u8],
    ) -> Option<&[u8]> {
        self.buf.clear();
        self.buf.extend_from_slice(payload);
        if phase == self.phase {
            let n = self.current.open(pn, header, &mut self.buf)?;
            return self.buf.get(..n);
        }
        // The other phase: the peer's key update, or a packet of the previous generation.
        if let Some(n) = self.next.open(pn, header, &mut self.buf) {
            if self.rotate().is_err() {
                return None;
            }
            return self.buf.get(..n);
        }
        self.buf.clear();
        self.buf.extend_from_slice(payload);
        let n = self.previous.as_ref()?.open(pn, header, &mut self.buf)?;
        self.buf.get(..n)
    }

    fn rotate(&mut self) -> Result<(), LensError> {
        let after = next_secret(self.suite, &self.next_secret)?;
        let after_key = PacketKey::from_secret(self.suite, &after)?;
        let current = std::mem::replace(&mut self.next, after_key);
        self.previous = Some(std::mem::replace(&mut self.current, current));
        self.next_secret = after;
        self.phase = !self.phase;
        self.updates += 1;
        Ok(())
    }
}

/// Packet numbers acknowledged by one ACK frame, as inclusive ranges, largest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckRanges {
    /// `(smallest, largest)` pairs.
    pub ranges: Vec<(u64, u64)>,
}

impl AckRanges {
    /// Whether `pn` is acknowledged.
    pub fn contains(&self, pn: u64) -> bool {
        self.ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&pn))
    }
}

/// Cap on ACK ranges read from one frame.
const MAX_ACK_RANGES: u64 = 64;

/// Reads the ACK frame at the start of a 1-RTT payload (after any PADDING or PING frames, as
/// stacks usually place it). `None` when the packet carries no ACK there or it is malformed;
/// a sample is enough for what the SDK uses it for.
pub fn parse_ack_frame(payload: &[u8]) -> Option<AckRanges> {
    let mut at = 0;
    loop {
        let ty = varint(payload, &mut at)?;
        match ty {
            0x00 | 0x01 => {}
            0x02 | 0x03 => break,
            _ => return None,
        }
    }
    let largest = varint(payload, &mut at)?;
    let _delay = varint(payload, &mut at)?;
    let count = varint(payload, &mut at)?;
    let first = varint(payload, &mut at)?;
    let mut smallest = largest.checked_sub(first)?;
    let mut out = AckRanges {
        ranges: vec![(smallest, largest)],
    };
    for _ in 0..count.min(MAX_ACK_RANGES) {
        let gap = varint(payload, &mut at)?;
        let len = varint(payload, &mut at)?;
        let hi = smallest.checked_sub(gap.checked_add(2)?)?;
        let lo = hi.checked_sub(len)?;
        out.ranges.push((lo, hi));
        smallest = lo;
    }
    Some(out)
}

/// Test support: a short-header 1-RTT packet as a peer holding `secret` would send it (AEAD
/// sealed, then header protection applied; RFC 9001 §5.3–5.4), with a 1-byte packet number.
#[cfg(test)]
pub(crate) fn seal_short_packet(
    suite: Suite,
    secret: &[u8],
    dcid: &[u8],
    pn: u64,
    plaintext: &[u8],
) -> Vec<u8> {
    let k = PacketKey::from_secret(suite, secret).unwrap();
    let hp = super::HeaderProtection::from_secret(suite, secret).unwrap();
    let mut header = vec![0x40];
    header.extend_from_slice(dcid);
    header.push(pn as u8);
    let mut nonce = k.iv;
    for (i, b) in pn.to_be_bytes().iter().enumerate() {
        nonce[4 + i] ^= b;
    }
    let mut body = plaintext.to_vec();
    k.key
        .seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(&header[..]),
            &mut body,
        )
        .unwrap();
    let mut p = header;
    let pn_offset = p.len() - 1;
    p.extend(body);
    let mask = hp.mask(&p[pn_offset + 4..pn_offset + 20]).unwrap();
    p[0] ^= mask[0] & 0x1f;
    p[pn_offset] ^= mask[1];
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ack_frames_are_read_after_padding_and_ping() {
        // PADDING, PING, ACK largest 100, delay 3, 1 extra range, first range 4 (96..=100),
        // gap 1, length 2 → 91..=93.
        let p = [0x00, 0x01, 0x02, 0x40, 100, 3, 1, 4, 1, 2];
        let a = parse_ack_frame(&p).unwrap();
        assert_eq!(a.ranges, vec![(96, 100), (91, 93)]);
        assert!(a.contains(92) && !a.contains(94) && !a.contains(101));
        // A STREAM frame first: no sample.
        assert_eq!(parse_ack_frame(&[0x08, 0, 0]), None);
        // A range below zero is malformed.
        assert_eq!(parse_ack_frame(&[0x02, 3, 0, 0, 9]), None);
    }

    #[test]
    fn key_updates_are_followed() {
        let secret = [7u8; 32];
        let suite = Suite::Aes128Gcm;
        let header = [0x40u8, 1, 2];
        let seal = |s: &[u8], pn: u64, msg: &[u8]| {
            let k = PacketKey::from_secret(suite, s).unwrap();
            let mut nonce = k.iv;
            for (i, b) in pn.to_be_bytes().iter().enumerate() {
                nonce[4 + i] ^= b;
            }
            let mut buf = msg.to_vec();
            k.key
                .seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(&header[..]),
                    &mut buf,
                )
                .unwrap();
            buf
        };
        let mut keys = PacketKeys::new(suite, &secret).unwrap();
        let c0 = seal(&secret, 1, b"gen0");
        assert_eq!(keys.open(1, false, &header, &c0), Some(&b"gen0"[..]));
        // A forged payload never opens.
        let mut forged = c0.clone();
        forged[0] ^= 1;
        assert_eq!(keys.open(1, false, &header, &forged), None);
        let s1 = next_secret(suite, &secret).unwrap();
        let c1 = seal(&s1, 2, b"gen1");
        assert_eq!(keys.open(2, true, &header, &c1), Some(&b"gen1"[..]));
        assert_eq!(keys.updates, 1);
        // A generation-0 packet reordered across the update still opens.
        assert_eq!(keys.open(1, false, &header, &c0), Some(&b"gen0"[..]));
        let s2 = next_secret(suite, &s1).unwrap();
        let c2 = seal(&s2, 3, b"gen2");
        assert_eq!(keys.open(3, false, &header, &c2), Some(&b"gen2"[..]));
        assert_eq!(keys.updates, 2);
    }

    proptest! {
        #[test]
        fn arbitrary_payloads_never_panic_the_ack_reader(p in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(a) = parse_ack_frame(&p) {
                prop_assert!(!a.ranges.is_empty());
                prop_assert!(a.ranges.iter().all(|(lo, hi)| lo <= hi));
            }
        }
    }
}

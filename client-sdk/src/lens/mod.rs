//! The packet-number lens: read one's own connection's QUIC packet numbers.
//!
//! An endpoint may look at its own packets. From the TLS 1-RTT traffic secrets that the QUIC
//! stack exports through its key-log hook (rustls `KeyLog`, quiche `set_keylog`), the lens
//! derives the header-protection key (RFC 9001 §5.4, HKDF-Expand-Label "quic hp"), removes header
//! protection from short-header packets and decodes the truncated packet number against the
//! largest one seen (RFC 9000 Appendix A.3). No QUIC stack is modified.
//!
//! Key-log lines do not name the cipher suite. A 48-byte secret means SHA-384 and AES-256-GCM; a
//! 32-byte secret is AES-128-GCM or ChaCha20-Poly1305: give the suite if the stack tells it,
//! otherwise the lens identifies it once by trial-decrypting the first 1-RTT packet.
//! Header-protection keys do not change on key update (RFC 9001 §6), so one key serves the whole
//! connection.
//!
//! ```
//! use sidekick::lens::{decode_packet_number, parse_keylog_line, KeyLogLabel};
//!
//! let line = format!("CLIENT_TRAFFIC_SECRET_0 {} {}", "ab".repeat(32), "01".repeat(48));
//! let entry = parse_keylog_line(&line).unwrap();
//! assert_eq!(entry.label, KeyLogLabel::ClientTrafficSecret0);
//! assert_eq!(entry.secret.len(), 48);
//! // RFC 9000 A.3 example: largest 0xa82f30ea, truncated 0x9b32 (16 bits) → 0xa82f9b32.
//! assert_eq!(decode_packet_number(Some(0xa82f30ea), 0x9b32, 2), 0xa82f9b32);
//! ```

use ring::aead::{self, quic};
use ring::hkdf;

pub(crate) mod auth;
mod keylog;

pub use auth::{AckRanges, parse_ack_frame};
pub use keylog::{KeyLogEntry, KeyLogError, KeyLogLabel, fuzz_keylog, parse_keylog_line};
pub use sidekick_wire::quic::{LongHeader, LongType, short_header_offset};

/// Errors reading a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LensError {
    /// The datagram or packet is shorter than its header says.
    #[error("packet truncated")]
    Truncated,
    /// The header form or type is not one that the lens handles.
    #[error("not a QUIC packet this lens can read")]
    NotQuic,
    /// No short-header packet in the datagram.
    #[error("no short-header packet in the datagram")]
    NoShortHeader,
    /// No 1-RTT secret for this direction yet.
    #[error("no 1-RTT secret for this direction yet")]
    NoKeys,
    /// The destination connection ID length is not known yet.
    #[error("destination connection ID length unknown")]
    UnknownCidLength,
    /// The cipher suite of a 32-byte secret could not be identified by trial decryption.
    #[error("cipher suite not identified")]
    UnknownSuite,
    /// The header-protection primitive failed.
    #[error("header protection failed")]
    Crypto,
    /// The packet does not open under the connection's 1-RTT keys: not the peer's (injected
    /// or corrupted); its packet number is ignored.
    #[error("packet not authenticated")]
    Unauthenticated,
}

/// A QUIC v1 AEAD (RFC 9001 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Suite {
    /// TLS_AES_128_GCM_SHA256.
    Aes128Gcm,
    /// TLS_AES_256_GCM_SHA384.
    Aes256Gcm,
    /// TLS_CHACHA20_POLY1305_SHA256.
    ChaCha20Poly1305,
}

impl Suite {
    /// The suites a secret of `len` bytes can belong to.
    pub fn candidates(len: usize) -> &'static [Suite] {
        match len {
            32 => &[Suite::Aes128Gcm, Suite::ChaCha20Poly1305],
            48 => &[Suite::Aes256Gcm],
            _ => &[],
        }
    }

    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Suite::Aes256Gcm => hkdf::HKDF_SHA384,
            Suite::Aes128Gcm | Suite::ChaCha20Poly1305 => hkdf::HKDF_SHA256,
        }
    }

    fn hp(self) -> &'static quic::Algorithm {
        match self {
            Suite::Aes128Gcm => &quic::AES_128,
            Suite::Aes256Gcm => &quic::AES_256,
            Suite::ChaCha20Poly1305 => &quic::CHACHA20,
        }
    }

    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Suite::Aes128Gcm => &aead::AES_128_GCM,
            Suite::Aes256Gcm => &aead::AES_256_GCM,
            Suite::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }

    fn key_len(self) -> usize {
        match self {
            Suite::Aes128Gcm => 16,
            Suite::Aes256Gcm | Suite::ChaCha20Poly1305 => 32,
        }
    }
}

struct Len(usize);
impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context, as QUIC uses it (RFC 9001 §5.1).
pub fn hkdf_expand_label(
    suite: Suite,
    secret: &[u8],
    label: &[u8],
    out: &mut [u8],
) -> Result<(), LensError> {
    let prk = hkdf::Prk::new_less_safe(suite.hkdf(), secret);
    let out_len = u16::try_from(out.len())
        .map_err(|_| LensError::Crypto)?
        .to_be_bytes();
    let full_len = [u8::try_from(6 + label.len()).map_err(|_| LensError::Crypto)?];
    let info: [&[u8]; 5] = [&out_len, &full_len, b"tls13 ", label, &[0]];
    prk.expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| LensError::Crypto)
}

/// Header-protection key of one direction.
pub struct HeaderProtection {
    suite: Suite,
    key: quic::HeaderProtectionKey,
}

impl std::fmt::Debug for HeaderProtection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderProtection")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

impl HeaderProtection {
    /// Derives the key from a traffic secret: HKDF-Expand-Label(secret, "quic hp").
    pub fn from_secret(suite: Suite, secret: &[u8]) -> Result<Self, LensError> {
        let mut key = [0u8; 32];
        let key = &mut key[..suite.key_len()];
        hkdf_expand_label(suite, secret, b"quic hp", key)?;
        let key = quic::HeaderProtectionKey::new(suite.hp(), key).map_err(|_| LensError::Crypto)?;
        Ok(Self { suite, key })
    }

    /// The suite.
    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// The 5-byte mask for a 16-byte ciphertext sample (RFC 9001 §5.4.1).
    pub fn mask(&self, sample: &[u8]) -> Result<[u8; 5], LensError> {
        self.key.new_mask(sample).map_err(|_| LensError::Crypto)
    }
}

/// A short header with protection removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortHeader {
    /// The full (decoded) packet number.
    pub packet_number: u64,
    /// The truncated packet number as it was on the wire.
    pub truncated: u64,
    /// Length of the packet number field (1–4).
    pub pn_len: usize,
    /// Key phase bit.
    pub key_phase: bool,
    /// Unprotected first byte.
    pub first_byte: u8,
}

/// RFC 9000 Appendix A.3: the packet number closest to `largest + 1` with the given low bytes.
pub fn decode_packet_number(largest: Option<u64>, truncated: u64, pn_len: usize) -> u64 {
    let pn_nbits = 8 * pn_len.clamp(1, 4) as u32;
    let expected = largest.map_or(0, |l| l.saturating_add(1));
    let win = 1u64 << pn_nbits;
    let hwin = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | (truncated & mask);
    if candidate.saturating_add(hwin) <= expected && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected.saturating_add(hwin) && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Removes header protection from the short-header packet `packet` (from its first byte to the end
/// of the datagram) whose destination connection ID has `dcid_len` bytes.
///
/// Returns the header and the unprotected header bytes (first byte through packet number), which
/// are the AEAD's associated data.
pub fn unprotect_short(
    hp: &HeaderProtection,
    packet: &[u8],
    dcid_len: usize,
    largest: Option<u64>,
) -> Result<(ShortHeader, Vec<u8>), LensError> {
    let first = *packet.first().ok_or(LensError::Truncated)?;
    // The fixed bit is not checked: peers may grease it (RFC 9287; quinn does).
    if first & 0x80 != 0 {
        return Err(LensError::NotQuic);
    }
    let pn_offset = 1 + dcid_len;
    // RFC 9001 §5.4.2: the sample starts 4 bytes after the start of the packet number field.
    let sample = packet
        .get(pn_offset + 4..pn_offset + 20)
        .ok_or(LensError::Truncated)?;
    let mask = hp.mask(sample)?;
    let first = first ^ (mask[0] & 0x1f);
    let pn_len = (first & 0x03) as usize + 1;
    let wire = packet
        .get(pn_offset..pn_offset + pn_len)
        .ok_or(LensError::Truncated)?;
    let mut header = packet[..pn_offset + pn_len].to_vec();
    header[0] = first;
    let mut truncated = 0u64;
    for (i, b) in wire.iter().enumerate() {
        let b = b ^ mask[1 + i];
        header[pn_offset + i] = b;
        truncated = (truncated << 8) | u64::from(b);
    }
    let packet_number = decode_packet_number(largest, truncated, pn_len);
    Ok((
        ShortHeader {
            packet_number,
            truncated,
            pn_len,
            key_phase: first & 0x04 != 0,
            first_byte: first,
        },
        header,
    ))
}

/// Whether the AEAD of `suite` with keys from `secret` opens the packet (trial decryption used to
/// tell AES-128-GCM from ChaCha20 for 32-byte secrets).
fn trial_open(suite: Suite, secret: &[u8], header: &[u8], payload: &[u8], pn: u64) -> bool {
    let mut key = [0u8; 32];
    let key = &mut key[..suite.key_len()];
    let mut iv = [0u8; 12];
    if hkdf_expand_label(suite, secret, b"quic key", key).is_err()
        || hkdf_expand_label(suite, secret, b"quic iv", &mut iv).is_err()
    {
        return false;
    }
    let Ok(unbound) = aead::UnboundKey::new(suite.aead(), key) else {
        return false;
    };
    let key = aead::LessSafeKey::new(unbound);
    for (i, b) in pn.to_be_bytes().iter().enumerate() {
        iv[4 + i] ^= b;
    }
    let mut buf = payload.to_vec();
    key.open_in_place(
        aead::Nonce::assume_unique_for_key(iv),
        aead::Aad::from(header),
        &mut buf,
    )
    .is_ok()
}

/// Fuzz body: the header parsers and the lens never panic on arbitrary datagrams.
pub fn fuzz_datagram(data: &[u8]) {
    let _ = short_header_offset(data);
    let _ = LongHeader::parse(data);
    let mut lens = PacketNumberLens::new(Role::Client);
    lens.set_secret(DatagramDirection::Incoming, &[7u8; 32]);
    lens.set_secret(DatagramDirection::Outgoing, &[9u8; 48]);
    lens.set_dcid_len(
        DatagramDirection::Incoming,
        data.first().map_or(0, |b| usize::from(b % 21)),
    );
    lens.set_dcid_len(DatagramDirection::Outgoing, 8);
    let _ = lens.observe(DatagramDirection::Incoming, data);
    let _ = lens.observe(DatagramDirection::Outgoing, data);
}

/// Which end of the connection the lens sits at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The QUIC client.
    Client,
    /// The QUIC server.
    Server,
}

/// Which way a datagram goes relative to the lens's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramDirection {
    /// Sent by this endpoint.
    Outgoing,
    /// Received by this endpoint.
    Incoming,
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LensStats {
    /// Short-header packets whose number was read.
    pub read: u64,
    /// Datagrams seen before the secret or CID length was known.
    pub not_ready: u64,
    /// Datagrams without a readable short-header packet (handshake-only, malformed).
    pub unreadable: u64,
    /// Trial decryptions that identified no suite.
    pub trial_failures: u64,
    /// Received packets that did not open under the 1-RTT keys (their numbers ignored).
    pub unauthenticated: u64,
    /// Key updates of the peer followed (RFC 9001 §6).
    pub key_updates: u64,
}

#[derive(Default)]
struct DirectionState {
    secret: Option<Vec<u8>>,
    hp: Option<HeaderProtection>,
    dcid_len: Option<usize>,
    largest: Option<u64>,
    keys: Option<auth::PacketKeys>,
    last_ack: Option<AckRanges>,
    stats: LensStats,
}

impl DirectionState {
    /// Counts a datagram that could not be read yet and says what is missing.
    fn not_ready(&mut self) -> LensError {
        self.stats.not_ready += 1;
        if self.secret.is_none() {
            LensError::NoKeys
        } else {
            LensError::UnknownCidLength
        }
    }
}

/// Packet numbers of both directions of one connection.
///
/// Feed it the stack's key-log lines (or secrets) and every datagram the endpoint sends and
/// receives. CID lengths are learnt from long headers (each side's source connection ID) or set
/// explicitly.
pub struct PacketNumberLens {
    role: Role,
    authenticate: bool,
    suite: Option<Suite>,
    client_random: Option<[u8; 32]>,
    outgoing: DirectionState,
    incoming: DirectionState,
}

impl std::fmt::Debug for PacketNumberLens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketNumberLens")
            .field("role", &self.role)
            .field("suite", &self.suite)
            .field("outgoing", &self.outgoing.stats)
            .field("incoming", &self.incoming.stats)
            .finish_non_exhaustive()
    }
}

impl PacketNumberLens {
    /// A lens for an endpoint of the given role, with no keys yet.
    pub fn new(role: Role) -> Self {
        Self {
            role,
            authenticate: true,
            suite: None,
            client_random: None,
            outgoing: DirectionState::default(),
            incoming: DirectionState::default(),
        }
    }

    /// Whether received packets must open under the 1-RTT keys before their numbers count
    /// (default: yes). Turning it off trusts any datagram that reaches the socket.
    pub fn set_authenticate(&mut self, on: bool) {
        self.authenticate = on;
    }

    /// The packet numbers acknowledged by the ACK frame of the last authenticated received
    /// packet, if it carried one first (taken: a second call returns `None`).
    pub fn take_ack(&mut self) -> Option<AckRanges> {
        self.incoming.last_ack.take()
    }

    /// Fixes the cipher suite (when the stack reports it), skipping trial decryption.
    pub fn set_suite(&mut self, suite: Suite) {
        self.suite = Some(suite);
        for dir in [&mut self.outgoing, &mut self.incoming] {
            dir.hp = None;
            dir.keys = None;
        }
        self.outgoing.hp = self.derive(DatagramDirection::Outgoing);
        self.incoming.hp = self.derive(DatagramDirection::Incoming);
    }

    /// The identified cipher suite.
    pub fn suite(&self) -> Option<Suite> {
        self.suite
    }

    /// Restricts the lens to the connection with this TLS client random (a key log may carry
    /// several connections' secrets).
    pub fn set_client_random(&mut self, random: [u8; 32]) {
        self.client_random = Some(random);
    }

    fn state(&mut self, dir: DatagramDirection) -> &mut DirectionState {
        match dir {
            DatagramDirection::Outgoing => &mut self.outgoing,
            DatagramDirection::Incoming => &mut self.incoming,
        }
    }

    fn derive(&self, dir: DatagramDirection) -> Option<HeaderProtection> {
        let state = match dir {
            DatagramDirection::Outgoing => &self.outgoing,
            DatagramDirection::Incoming => &self.incoming,
        };
        let secret = state.secret.as_ref()?;
        let suite = match self.suite {
            Some(s) => s,
            None => match Suite::candidates(secret.len()) {
                [only] => *only,
                _ => return None,
            },
        };
        if !Suite::candidates(secret.len()).contains(&suite) {
            return None;
        }
        HeaderProtection::from_secret(suite, secret).ok()
    }

    /// Installs the 1-RTT traffic secret of a direction.
    pub fn set_secret(&mut self, dir: DatagramDirection, secret: &[u8]) {
        let state = self.state(dir);
        state.secret = Some(secret.to_vec());
        state.hp = None;
        state.keys = None;
        let hp = self.derive(dir);
        if let Some(s) = hp.as_ref().map(HeaderProtection::suite) {
            self.suite.get_or_insert(s);
        }
        self.state(dir).hp = hp;
    }

    /// Takes a parsed key-log entry; returns whether it was a 1-RTT secret of this connection.
    pub fn on_keylog_entry(&mut self, entry: &KeyLogEntry) -> bool {
        if self.client_random.is_some_and(|r| r != entry.client_random) {
            return false;
        }
        let client_secret = match entry.label {
            KeyLogLabel::ClientTrafficSecret0 => true,
            KeyLogLabel::ServerTrafficSecret0 => false,
            _ => return false,
        };
        let dir = match (self.role, client_secret) {
            (Role::Client, true) | (Role::Server, false) => DatagramDirection::Outgoing,
            (Role::Client, false) | (Role::Server, true) => DatagramDirection::Incoming,
        };
        self.set_secret(dir, &entry.secret);
        true
    }

    /// Parses and takes one key-log line.
    pub fn on_keylog_line(&mut self, line: &str) -> Result<bool, KeyLogError> {
        let entry = parse_keylog_line(line)?;
        Ok(self.on_keylog_entry(&entry))
    }

    /// Sets the destination CID length of short-header packets in a direction.
    pub fn set_dcid_len(&mut self, dir: DatagramDirection, len: usize) {
        self.state(dir).dcid_len = Some(len.min(20));
    }

    /// Counters of a direction.
    pub fn stats(&self, dir: DatagramDirection) -> LensStats {
        match dir {
            DatagramDirection::Outgoing => self.outgoing.stats,
            DatagramDirection::Incoming => self.incoming.stats,
        }
    }

    /// Largest packet number read in a direction.
    pub fn largest(&self, dir: DatagramDirection) -> Option<u64> {
        match dir {
            DatagramDirection::Outgoing => self.outgoing.largest,
            DatagramDirection::Incoming => self.incoming.largest,
        }
    }

    /// Reads the packet number of the short-header packet in `datagram` sent (`Outgoing`) or
    /// received (`Incoming`) by this endpoint. Long headers teach the lens CID lengths.
    pub fn observe(&mut self, dir: DatagramDirection, datagram: &[u8]) -> Result<u64, LensError> {
        if datagram.first().is_some_and(|b| b & 0x80 != 0)
            && let Ok(long) = LongHeader::parse(datagram)
        {
            // A packet's SCID is what the other side puts in its DCID.
            let other = match dir {
                DatagramDirection::Outgoing => DatagramDirection::Incoming,
                DatagramDirection::Incoming => DatagramDirection::Outgoing,
            };
            if long.ty.is_some_and(|t| t != LongType::Retry) && self.state(other).dcid_len.is_none()
            {
                self.set_dcid_len(other, long.scid.len());
            }
        }
        let Some(offset) = short_header_offset(datagram) else {
            self.state(dir).stats.unreadable += 1;
            return Err(LensError::NoShortHeader);
        };
        let packet = &datagram[offset..];
        if self.state(dir).hp.is_none() {
            self.identify_suite(dir, packet)?;
        }
        let authenticate = self.authenticate && dir == DatagramDirection::Incoming;
        let state = self.state(dir);
        let (Some(hp), Some(dcid_len)) = (state.hp.as_ref(), state.dcid_len) else {
            return Err(state.not_ready());
        };
        match unprotect_short(hp, packet, dcid_len, state.largest) {
            Ok((h, header)) => {
                if authenticate {
                    state.last_ack = None;
                    if state.keys.is_none() {
                        let secret = state.secret.as_deref().unwrap_or_default();
                        state.keys = auth::PacketKeys::new(hp.suite(), secret).ok();
                    }
                    let Some(keys) = state.keys.as_mut() else {
                        return Err(LensError::Crypto);
                    };
                    let before = keys.updates;
                    let payload = packet.get(header.len()..).unwrap_or_default();
                    let Some(plain) = keys.open(h.packet_number, h.key_phase, &header, payload)
                    else {
                        state.stats.unauthenticated += 1;
                        return Err(LensError::Unauthenticated);
                    };
                    state.last_ack = parse_ack_frame(plain);
                    state.stats.key_updates += keys.updates - before;
                }
                state.largest = Some(
                    state
                        .largest
                        .map_or(h.packet_number, |l| l.max(h.packet_number)),
                );
                state.stats.read += 1;
                Ok(h.packet_number)
            }
            Err(e) => {
                state.stats.unreadable += 1;
                Err(e)
            }
        }
    }

    /// For an ambiguous 32-byte secret: tries each candidate suite on this packet.
    fn identify_suite(&mut self, dir: DatagramDirection, packet: &[u8]) -> Result<(), LensError> {
        let state = self.state(dir);
        let (Some(secret), Some(dcid_len)) = (state.secret.clone(), state.dcid_len) else {
            return Err(state.not_ready());
        };
        let largest = state.largest;
        for &suite in Suite::candidates(secret.len()) {
            let hp = HeaderProtection::from_secret(suite, &secret)?;
            let Ok((h, header)) = unprotect_short(&hp, packet, dcid_len, largest) else {
                continue;
            };
            if trial_open(
                suite,
                &secret,
                &header,
                &packet[header.len()..],
                h.packet_number,
            ) {
                self.suite = Some(suite);
                self.state(dir).hp = Some(hp);
                let other = match dir {
                    DatagramDirection::Outgoing => DatagramDirection::Incoming,
                    DatagramDirection::Incoming => DatagramDirection::Outgoing,
                };
                if self.state(other).hp.is_none() {
                    let hp = self.derive(other);
                    self.state(other).hp = hp;
                }
                return Ok(());
            }
        }
        self.state(dir).stats.trial_failures += 1;
        Err(LensError::UnknownSuite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9001_appendix_a_client_hp_key() {
        // RFC 9001 A.1: client initial secret and its "quic hp" key (AES-128).
        let secret =
            hex::decode("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
                .unwrap();
        let mut hp = [0u8; 16];
        hkdf_expand_label(Suite::Aes128Gcm, &secret, b"quic hp", &mut hp).unwrap();
        assert_eq!(hex::encode(hp), "9f50449e04a0e810283a1e9933adedd2");
        let mut key = [0u8; 16];
        hkdf_expand_label(Suite::Aes128Gcm, &secret, b"quic key", &mut key).unwrap();
        assert_eq!(hex::encode(key), "1f369613dd76d5467730efcbe3b1a22d");
    }

    #[test]
    fn rfc9001_appendix_a5_chacha20_short_header() {
        // RFC 9001 A.5: a ChaCha20-Poly1305 short-header packet, empty DCID, pn 654360564.
        let secret =
            hex::decode("9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b")
                .unwrap();
        let hp = HeaderProtection::from_secret(Suite::ChaCha20Poly1305, &secret).unwrap();
        let packet = hex::decode("4cfe4189655e5cd55c41f69080575d7999c25a5bfb").unwrap();
        let (h, header) = unprotect_short(&hp, &packet, 0, Some(654360563)).unwrap();
        assert_eq!(h.packet_number, 654360564);
        assert_eq!(h.pn_len, 3);
        assert_eq!(hex::encode(&header), "4200bff4");
        assert!(trial_open(
            Suite::ChaCha20Poly1305,
            &secret,
            &header,
            &packet[4..],
            654360564
        ));
        assert!(!trial_open(
            Suite::Aes128Gcm,
            &secret,
            &header,
            &packet[4..],
            654360564
        ));
        // The lens identifies ChaCha20 by trial decryption.
        let mut lens = PacketNumberLens::new(Role::Client);
        lens.set_secret(DatagramDirection::Incoming, &secret);
        lens.set_dcid_len(DatagramDirection::Incoming, 0);
        lens.incoming.largest = Some(654360563);
        assert_eq!(
            lens.observe(DatagramDirection::Incoming, &packet),
            Ok(654360564)
        );
        assert_eq!(lens.suite(), Some(Suite::ChaCha20Poly1305));
    }

    #[test]
    fn rfc9000_a3_example() {
        assert_eq!(
            decode_packet_number(Some(0xa82f30ea), 0x9b32, 2),
            0xa82f9b32
        );
        assert_eq!(decode_packet_number(None, 0, 1), 0);
        assert_eq!(decode_packet_number(Some(255), 0, 1), 256);
        assert_eq!(decode_packet_number(Some(300), 0xff, 1), 255);
    }

    #[test]
    fn keylog_rejects_bad_lines() {
        assert_eq!(parse_keylog_line("# comment"), Err(KeyLogError::Fields));
        assert!(matches!(
            parse_keylog_line(&format!(
                "CLIENT_RANDOM {} {}",
                "00".repeat(32),
                "00".repeat(48)
            )),
            Err(KeyLogError::UnknownLabel(_))
        ));
        assert_eq!(
            parse_keylog_line(&format!(
                "EXPORTER_SECRET {} {}",
                "00".repeat(31),
                "00".repeat(48)
            )),
            Err(KeyLogError::ClientRandom(31))
        );
        assert_eq!(
            parse_keylog_line(&format!(
                "EXPORTER_SECRET {} {}",
                "00".repeat(32),
                "00".repeat(40)
            )),
            Err(KeyLogError::SecretLength(40))
        );
        assert_eq!(
            parse_keylog_line(&format!("EXPORTER_SECRET {} zz", "00".repeat(32))),
            Err(KeyLogError::Hex)
        );
    }

    #[test]
    fn keylog_entry_debug_hides_secret() {
        let line = format!(
            "SERVER_TRAFFIC_SECRET_0 {} {}",
            "11".repeat(32),
            "abcd".repeat(16)
        );
        let entry = parse_keylog_line(&line).unwrap();
        assert!(!format!("{entry:?}").contains("abcd"));
    }

    #[test]
    fn long_header_learns_cid_lengths() {
        // A Handshake packet from the server: DCID 8 bytes (client's), SCID 16 bytes (server's).
        let mut pkt = vec![0xe0, 0, 0, 0, 1, 8];
        pkt.extend([1u8; 8]);
        pkt.push(16);
        pkt.extend([2u8; 16]);
        pkt.push(4); // Length varint
        pkt.extend([0u8; 4]);
        let long = LongHeader::parse(&pkt).unwrap();
        assert_eq!(
            (long.dcid.len(), long.scid.len(), long.packet_len),
            (8, 16, pkt.len())
        );
        let mut lens = PacketNumberLens::new(Role::Client);
        assert_eq!(
            lens.observe(DatagramDirection::Incoming, &pkt),
            Err(LensError::NoShortHeader)
        );
        assert_eq!(lens.outgoing.dcid_len, Some(16));
    }

    proptest! {
        #[test]
        fn decode_recovers_nearby_numbers(largest in 0u64..(1 << 40), delta in 1u64..100, len in 1usize..=4) {
            let pn = largest + delta;
            let bits = 8 * len as u32;
            prop_assume!(delta < (1u64 << bits) / 2);
            let truncated = pn & ((1u64 << bits) - 1);
            prop_assert_eq!(decode_packet_number(Some(largest), truncated, len), pn);
        }

        #[test]
        fn arbitrary_datagrams_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_datagram(&data);
        }

        #[test]
        fn arbitrary_keylog_text_never_panics(s in ".{0,200}") {
            fuzz_keylog(s.as_bytes());
        }
    }
}

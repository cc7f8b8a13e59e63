//! Session identifiers, per-session keys and the key agreement of discovery.
//!
//! Session ids are 16 bytes from `ring::rand::SystemRandom` (unguessable, Sidekick (NSDI '24) §4.1
//! "Security"). The per-session HMAC-SHA256 key is derived with HKDF-SHA256 from an X25519
//! exchange carried in the discovery request and reply (see `docs/protocol.md` §3), so a
//! *passive* observer of the base path cannot learn it.

use ring::{agreement, hkdf, hmac, rand::SecureRandom};

use crate::error::Error;

/// Length of a session id in bytes.
pub const SESSION_ID_LEN: usize = 16;
/// Length of the discovery nonce in bytes.
pub const NONCE_LEN: usize = 16;
/// Length of an X25519 public key in bytes.
pub const PUBLIC_KEY_LEN: usize = 32;
/// Length of the derived session key in bytes.
pub const SESSION_KEY_LEN: usize = 32;

/// HKDF `info` label prefix for the session key (followed by the session id).
const KEY_LABEL: &[u8] = b"sidekick v1 session key";

/// An opaque, unguessable session identifier chosen by the proxy.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub [u8; SESSION_ID_LEN]);

impl SessionId {
    /// Draws a fresh id from a cryptographically secure generator.
    pub fn random(rng: &dyn SecureRandom) -> Result<Self, Error> {
        let mut b = [0u8; SESSION_ID_LEN];
        rng.fill(&mut b)?;
        Ok(SessionId(b))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; SESSION_ID_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only a prefix: enough to correlate log lines, not the whole identifier.
        write!(f, "SessionId(")?;
        for b in &self.0[..4] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "…)")
    }
}

/// The per-session HMAC-SHA256 key shared by a client and a proxy.
#[derive(Clone)]
pub struct SessionKey {
    key: hmac::Key,
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(<redacted>)")
    }
}

struct Len32;
impl hkdf::KeyType for Len32 {
    fn len(&self) -> usize {
        SESSION_KEY_LEN
    }
}

impl SessionKey {
    /// A key from raw bytes (tests, or deployments that provision keys out of band).
    pub fn from_bytes(bytes: &[u8; SESSION_KEY_LEN]) -> Self {
        SessionKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
        }
    }

    /// Derives the session key from the X25519 shared secret:
    /// `HKDF-SHA256(salt = client nonce, ikm = shared, info = label ‖ session id)`.
    pub fn derive(shared: &[u8], nonce: &[u8; NONCE_LEN], session_id: &SessionId) -> Self {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, nonce).extract(shared);
        let info = [KEY_LABEL, session_id.as_bytes().as_slice()];
        let mut out = [0u8; SESSION_KEY_LEN];
        // `expand` and `fill` fail only for output lengths above 255·32 bytes; 32 is fixed.
        let ok = prk
            .expand(&info, Len32)
            .and_then(|okm| okm.fill(&mut out))
            .is_ok();
        debug_assert!(ok, "HKDF of 32 bytes cannot fail");
        Self::from_bytes(&out)
    }

    /// Full 32-byte HMAC-SHA256 tag over the concatenation of `parts`.
    pub fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut ctx = hmac::Context::with_key(&self.key);
        for p in parts {
            ctx.update(p);
        }
        let t = ctx.sign();
        let mut out = [0u8; 32];
        out.copy_from_slice(t.as_ref());
        out
    }

    /// Verifies a (possibly truncated, 16..=32 bytes) tag in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        if tag.len() < 16 || tag.len() > 32 {
            return false;
        }
        let full = self.tag(parts);
        ct_eq(&full[..tag.len()], tag)
    }
}

/// Constant-time equality of two equal-length slices (false when lengths differ).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut acc = 0u8;
    for (x, y) in a.iter().zip(b) {
        acc |= x ^ y;
    }
    acc == 0
}

/// One side's ephemeral X25519 key pair for a discovery exchange.
pub struct Ephemeral {
    private: agreement::EphemeralPrivateKey,
    public: [u8; PUBLIC_KEY_LEN],
}

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ephemeral(<redacted>)")
    }
}

impl Ephemeral {
    /// Generates a fresh key pair.
    pub fn generate(rng: &dyn SecureRandom) -> Result<Self, Error> {
        let private = agreement::EphemeralPrivateKey::generate(&agreement::X25519, rng)?;
        let pk = private.compute_public_key()?;
        let mut public = [0u8; PUBLIC_KEY_LEN];
        if pk.as_ref().len() != PUBLIC_KEY_LEN {
            return Err(Error::Crypto);
        }
        public.copy_from_slice(pk.as_ref());
        Ok(Ephemeral { private, public })
    }

    /// The public half, sent to the peer.
    pub fn public(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.public
    }

    /// Completes the exchange with the peer's public key and derives the session key.
    /// Fails (typed) on an invalid peer key, e.g. a low-order point giving an all-zero secret.
    pub fn agree(
        self,
        peer_public: &[u8; PUBLIC_KEY_LEN],
        nonce: &[u8; NONCE_LEN],
        session_id: &SessionId,
    ) -> Result<SessionKey, Error> {
        let peer = agreement::UnparsedPublicKey::new(&agreement::X25519, peer_public);
        agreement::agree_ephemeral(self.private, &peer, |shared| {
            SessionKey::derive(shared, nonce, session_id)
        })
        .map_err(|_| Error::Crypto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;

    #[test]
    fn both_sides_derive_the_same_key() {
        let rng = SystemRandom::new();
        let a = Ephemeral::generate(&rng).unwrap();
        let b = Ephemeral::generate(&rng).unwrap();
        let (pa, pb) = (*a.public(), *b.public());
        let sid = SessionId::random(&rng).unwrap();
        let nonce = [7u8; NONCE_LEN];
        let ka = a.agree(&pb, &nonce, &sid).unwrap();
        let kb = b.agree(&pa, &nonce, &sid).unwrap();
        assert_eq!(ka.tag(&[b"x"]), kb.tag(&[b"x"]));
        let t = ka.tag(&[b"hello", b"world"]);
        assert!(kb.verify(&[b"helloworld"], &t[..16]));
        assert!(!kb.verify(&[b"helloworlD"], &t[..16]));
        assert!(
            !kb.verify(&[b"helloworld"], &t[..8]),
            "tags below 16 bytes are refused"
        );
    }

    #[test]
    fn low_order_peer_key_is_refused() {
        let rng = SystemRandom::new();
        let a = Ephemeral::generate(&rng).unwrap();
        let sid = SessionId([1; 16]);
        // The all-zero point has order 1; X25519 with it yields the all-zero secret.
        assert_eq!(
            a.agree(&[0u8; 32], &[0; 16], &sid).unwrap_err(),
            Error::Crypto
        );
    }

    #[test]
    fn session_ids_differ() {
        let rng = SystemRandom::new();
        let a = SessionId::random(&rng).unwrap();
        let b = SessionId::random(&rng).unwrap();
        assert_ne!(a, b);
        assert!(format!("{a:?}").starts_with("SessionId("));
    }
}

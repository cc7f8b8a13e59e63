//! rustls with every random draw seeded: the simulator's TLS crypto provider.
//!
//! ring's provider draws the client random, the legacy session ID and the key shares from the
//! operating system. Those bytes decide the traffic keys, hence every AEAD tag, hence the packet
//! identifiers the quACKs and eACKs carry (the last bytes of each datagram). A rateless IBLT
//! decodes or fails depending on the identifiers' hashes, so with random keys a Packrat run
//! changed from run to run under one seed. This provider is ring's with two parts replaced: the
//! random source is a seeded generator, and the key exchange is X25519 with private keys drawn
//! from it (x25519-dalek). It is for the simulator only: keys from a seed are no secret.

use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rustls::crypto::{
    ActiveKeyExchange, CryptoProvider, GetRandomFailed, SecureRandom, SharedSecret,
    SupportedKxGroup,
};
use rustls::{Error, NamedGroup};

/// A seeded random source.
#[derive(Debug)]
struct SeededRandom(Mutex<StdRng>);

impl SeededRandom {
    fn fill_array<const N: usize>(&self) -> Result<[u8; N], GetRandomFailed> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }
}

impl SecureRandom for SeededRandom {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        self.0.lock().map_err(|_| GetRandomFailed)?.fill_bytes(buf);
        Ok(())
    }
}

/// X25519 (RFC 7748) with private keys from the seeded source.
#[derive(Debug)]
struct SeededX25519(&'static SeededRandom);

impl SupportedKxGroup for SeededX25519 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let secret = x25519_dalek::StaticSecret::from(
            self.0
                .fill_array::<32>()
                .map_err(|_| Error::FailedToGetRandomBytes)?,
        );
        let public = x25519_dalek::PublicKey::from(&secret);
        Ok(Box::new(X25519Exchange { secret, public }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

struct X25519Exchange {
    secret: x25519_dalek::StaticSecret,
    public: x25519_dalek::PublicKey,
}

impl ActiveKeyExchange for X25519Exchange {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, Error> {
        let peer: [u8; 32] = peer_pub_key
            .try_into()
            .map_err(|_| Error::from(rustls::PeerMisbehaved::InvalidKeyShare))?;
        let shared = self
            .secret
            .diffie_hellman(&x25519_dalek::PublicKey::from(peer));
        if !shared.was_contributory() {
            return Err(rustls::PeerMisbehaved::InvalidKeyShare.into());
        }
        Ok(SharedSecret::from(&shared.as_bytes()[..]))
    }

    fn pub_key(&self) -> &[u8] {
        self.public.as_bytes()
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::X25519
    }
}

/// ring's provider with its random source and key exchange seeded from `rng`'s state.
///
/// `rng` is not advanced (the seed comes from a copy), so everything else the caller draws from
/// it stays as it was before TLS was seeded. rustls keeps both parts as `&'static` references, so
/// each provider leaks its generator and its key-exchange group (a few hundred bytes per
/// endpoint, that is per trial).
pub fn provider(rng: &StdRng) -> Arc<CryptoProvider> {
    // A constant apart from the caller's own next draw (which seeds other things).
    let seed = rng.clone().next_u64() ^ 0x7e1e_5eed_0000_0001;
    let random: &'static SeededRandom = Box::leak(Box::new(SeededRandom(Mutex::new(
        StdRng::seed_from_u64(seed),
    ))));
    let kx: &'static SeededX25519 = Box::leak(Box::new(SeededX25519(random)));
    Arc::new(CryptoProvider {
        kx_groups: vec![kx],
        secure_random: random,
        ..rustls::crypto::ring::default_provider()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_one_key_share_and_the_exchange_agrees() {
        let a = provider(&StdRng::seed_from_u64(7));
        let b = provider(&StdRng::seed_from_u64(7));
        let ka = a.kx_groups[0].start().unwrap();
        let kb = b.kx_groups[0].start().unwrap();
        assert_eq!(ka.pub_key(), kb.pub_key());
        let other = provider(&StdRng::seed_from_u64(8)).kx_groups[0]
            .start()
            .unwrap();
        assert_ne!(ka.pub_key(), other.pub_key());
        let other_pub = other.pub_key().to_vec();
        let ka_pub = ka.pub_key().to_vec();
        let s1 = ka.complete(&other_pub).unwrap();
        let s2 = other.complete(&ka_pub).unwrap();
        assert_eq!(s1.secret_bytes(), s2.secret_bytes());
    }
}

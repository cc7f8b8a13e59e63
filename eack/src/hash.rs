//! The keyed identifier hash: one 64-bit value per identifier gives both the seed of its
//! coded-symbol index sequence and the checksum stored in coded symbols.

/// Key of the identifier hash. Client and proxy must use the same key (negotiated with the session
/// configuration, or [`HashKey::DEFAULT`]).
///
/// The mixer is a fast non-cryptographic 64-bit finaliser: a secret key makes it hard for an
/// off-path host to choose identifiers whose index sequences collide, it is not a MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashKey {
    k0: u64,
    k1: u64,
}

impl HashKey {
    /// The key used when none is configured.
    pub const DEFAULT: HashKey = HashKey::new(0x5163_6b65_6361_636b, 0x2d70_6163_6b72_6174);

    /// A key from two 64-bit words.
    pub const fn new(k0: u64, k1: u64) -> Self {
        HashKey { k0, k1 }
    }

    /// A key from 16 bytes (little-endian words), e.g. derived from a session secret.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&bytes[..8]);
        b.copy_from_slice(&bytes[8..]);
        HashKey::new(u64::from_le_bytes(a), u64::from_le_bytes(b))
    }

    /// The keyed 64-bit hash of an identifier (zero-extended to 64 bits).
    #[inline(always)]
    pub fn hash(&self, id: u64) -> u64 {
        // Murmur3's 64-bit finaliser (a bijection) applied to the keyed input, then a second key
        // word so that both words matter.
        let mut x = id.wrapping_add(self.k0);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        x ^ self.k1
    }

    /// The 32-bit checksum stored (XORed) in coded symbols: the high half of [`HashKey::hash`].
    #[inline(always)]
    pub fn checksum(&self, id: u64) -> u32 {
        (self.hash(id) >> 32) as u32
    }
}

impl Default for HashKey {
    fn default() -> Self {
        HashKey::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_the_hash() {
        let a = HashKey::DEFAULT;
        let b = HashKey::new(1, 2);
        assert_ne!(a.hash(7), b.hash(7));
        assert_eq!(a.hash(7), a.hash(7));
        assert_eq!(a.checksum(7), (a.hash(7) >> 32) as u32);
        assert_eq!(HashKey::from_bytes([0; 16]), HashKey::new(0, 0));
    }

    #[test]
    fn hash_is_injective_on_a_sample() {
        let k = HashKey::DEFAULT;
        let mut v: Vec<u64> = (0..10_000u64).map(|i| k.hash(i)).collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 10_000);
    }
}

//! The Internet checksum (RFC 1071): the ones'-complement sum of 16-bit big-endian words, used by
//! IPv4 headers, ICMP, and UDP/TCP with their pseudo-headers (RFC 768, RFC 793, RFC 8200 §8.1).

/// A running ones'-complement sum. Feed it the words in any order (the sum commutes), then
/// [`Checksum::finish`].
///
/// ```
/// use sidekick_wire::checksum::Checksum;
/// // RFC 1071 §3's example words 0001 f203 f4f5 f6f7: sum ddf2, checksum 220d.
/// let mut c = Checksum::new();
/// c.add_bytes(&[0x00, 0x01, 0xf2, 0x03]);
/// c.add_bytes(&[0xf4, 0xf5, 0xf6, 0xf7]);
/// assert_eq!(c.finish(), 0x220d);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksum {
    // 64 bits: no carry is lost before folding, whatever the length summed.
    acc: u64,
}

impl Checksum {
    /// An empty sum.
    #[must_use]
    pub const fn new() -> Self {
        Self { acc: 0 }
    }

    /// Adds `data` as 16-bit big-endian words; an odd last byte is padded with a zero byte, so
    /// only the last slice of a message may have an odd length.
    pub fn add_bytes(&mut self, data: &[u8]) {
        let mut chunks = data.chunks_exact(2);
        for c in &mut chunks {
            self.acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            self.acc += u64::from(*last) << 8;
        }
    }

    /// Adds a value already in host order (a pseudo-header's protocol number or length).
    pub fn add(&mut self, v: u32) {
        self.acc += u64::from(v);
    }

    /// The folded sum, not complemented.
    #[must_use]
    pub fn sum(&self) -> u16 {
        let mut acc = self.acc;
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// The checksum to write into a header: the complement of the folded sum.
    #[must_use]
    pub fn finish(&self) -> u16 {
        !self.sum()
    }
}

/// The checksum of `data` alone (an IPv4 header, an ICMP message).
///
/// ```
/// // A header whose checksum field is correct sums to 0xffff, so its checksum is 0.
/// let h = [0x45, 0, 0, 0x1c, 0, 0, 0, 0, 64, 1, 0x66, 0xdf, 10, 0, 0, 1, 10, 0, 0, 2];
/// assert_eq!(sidekick_wire::checksum::internet_checksum(&h), 0);
/// ```
#[must_use]
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut c = Checksum::new();
    c.add_bytes(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn writing_the_checksum_makes_the_message_verify(mut data in proptest::collection::vec(any::<u8>(), 2..200), at in 0usize..100) {
            if data.len() % 2 == 1 {
                data.push(0);
            }
            let at = (at * 2) % data.len();
            data[at] = 0;
            data[at + 1] = 0;
            let c = internet_checksum(&data);
            data[at..at + 2].copy_from_slice(&c.to_be_bytes());
            // A message with its checksum in place sums to 0xffff (or 0, its other representation).
            prop_assert!(matches!(internet_checksum(&data), 0 | 0xffff));
        }

        #[test]
        fn split_sums_agree(data in proptest::collection::vec(any::<u8>(), 0..300), cut in 0usize..150) {
            let cut = (cut * 2).min(data.len() & !1);
            let mut c = Checksum::new();
            c.add_bytes(&data[..cut]);
            c.add_bytes(&data[cut..]);
            prop_assert_eq!(c.finish(), internet_checksum(&data));
        }
    }
}

//! QUIC variable-length integers (RFC 9000 §16): two high bits give the length (1, 2, 4 or 8
//! bytes), the rest is the value in network byte order.

/// Largest value a varint can carry (2⁶² − 1).
pub const MAX: u64 = (1 << 62) - 1;

/// Reads the varint at `*pos` and advances `*pos` past it; `None` (and `*pos` unchanged) when the
/// bytes end first.
///
/// ```
/// let mut pos = 0;
/// assert_eq!(sidekick_wire::varint::read(&[0x40, 0x25, 0x07], &mut pos), Some(37));
/// assert_eq!(pos, 2);
/// ```
#[inline]
pub fn read(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..pos.checked_add(len)?)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    *pos += len;
    Some(v)
}

/// Bytes the shortest encoding of `v` takes (values above [`MAX`] are written as [`MAX`]).
#[must_use]
pub fn len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends the shortest encoding of `v` (saturated at [`MAX`]).
pub fn write(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc_9000_appendix_a_examples() {
        for (bytes, v) in [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c][..],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d][..], 494_878_333),
            (&[0x7b, 0xbd][..], 15_293),
            (&[0x25][..], 37),
        ] {
            let mut pos = 0;
            assert_eq!(read(bytes, &mut pos), Some(v));
            assert_eq!(pos, bytes.len());
            let mut out = Vec::new();
            write(&mut out, v);
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn truncated_leaves_the_position() {
        let mut pos = 1;
        assert_eq!(read(&[0, 0x80, 1, 2], &mut pos), None);
        assert_eq!(pos, 1);
        assert_eq!(read(&[], &mut 0), None);
    }

    proptest! {
        #[test]
        fn roundtrip(v in 0..=MAX, prefix in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = prefix.clone();
            write(&mut out, v);
            prop_assert_eq!(out.len(), prefix.len() + len(v));
            let mut pos = prefix.len();
            prop_assert_eq!(read(&out, &mut pos), Some(v));
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn any_bytes_read_or_none(bytes in proptest::collection::vec(any::<u8>(), 0..12), at in 0usize..14) {
            let mut pos = at;
            if let Some(v) = read(&bytes, &mut pos) {
                prop_assert!(v <= MAX);
                prop_assert!(pos > at && pos <= bytes.len());
            } else {
                prop_assert_eq!(pos, at);
            }
        }
    }
}

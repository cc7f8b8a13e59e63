//! The committed seeds of the `quic_datagram` fuzz target (`fuzz/corpus/quic_datagram/`): coalesced
//! handshake datagrams of versions 1 and 2, padding, Retry, Version Negotiation and a short
//! header. Every seed runs through the fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test
//! -p sidekick-wire --test fuzz_corpus` rewrites them.
#![allow(clippy::unwrap_used)]

use sidekick_wire::quic::{QUIC_V1, QUIC_V2};
use sidekick_wire::{fuzz_datagram, varint};

fn long(first: u8, version: u32, token: Option<&[u8]>, payload: usize) -> Vec<u8> {
    let mut p = vec![first];
    p.extend_from_slice(&version.to_be_bytes());
    p.extend_from_slice(&[8, 1, 2, 3, 4, 5, 6, 7, 8, 4, 9, 9, 9, 9]);
    if let Some(t) = token {
        varint::write(&mut p, t.len() as u64);
        p.extend_from_slice(t);
    }
    varint::write(&mut p, payload as u64);
    p.extend(std::iter::repeat_n(0x5a, payload));
    p
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut initial_hs = long(0xc0, QUIC_V1, Some(b""), 200);
    initial_hs.extend(long(0xe0, QUIC_V1, None, 300));
    let mut padded = long(0xc0, QUIC_V1, Some(b"token"), 100);
    padded.extend([0u8; 60]);
    let mut hs_short = long(0xe0, QUIC_V2, None, 50);
    hs_short.extend([0x41, 1, 2, 3, 4, 5, 6, 7, 8, 0xaa, 0xbb]);
    vec![
        ("initial_handshake_v1", initial_hs),
        ("initial_padding_v1", padded),
        ("handshake_short_v2", hs_short),
        ("retry_v1", long(0xf0, QUIC_V1, None, 20)),
        (
            "version_negotiation",
            vec![
                0x80, 0, 0, 0, 0, 1, 7, 1, 8, 0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf,
            ],
        ),
        ("short", vec![0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    ]
}

#[test]
fn every_seed_runs_through_the_fuzz_body() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/quic_datagram");
    if std::env::var_os("SIDEKICK_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        fuzz_datagram(&std::fs::read(e.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= seeds().len(), "seeds missing in {}", dir.display());
}

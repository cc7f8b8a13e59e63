//! The committed fuzz seeds (`fuzz/corpus/wire/`): real eACK encodings (32-, 64- and 16-bit
//! identifiers, several prefixes and epochs). Every seed runs through the fuzz body here;
//! `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p eack --test fuzz_corpus` rewrites them.
#![allow(clippy::unwrap_used)]

use eack::{HashKey, ReceiverEack, Sketch};

/// The committed seeds of `target` (`fuzz/corpus/TARGET/`).
fn corpus(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// With `SIDEKICK_WRITE_FUZZ_SEEDS=1`, (re)writes the seeds of `target`; then runs every seed
/// of `target` through its fuzz body (a seed that once crashed stays a regression test).
fn seeds(target: &str, make: impl FnOnce() -> Vec<(&'static str, Vec<u8>)>, body: fn(&[u8])) {
    let dir = corpus(target);
    if std::env::var_os("SIDEKICK_WRITE_FUZZ_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in make() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        body(&bytes);
        n += 1;
    }
    assert!(n > 0, "no seeds in {}", dir.display());
}

fn eack_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let mut rx = ReceiverEack::new(40);
    for id in (0..20u32).filter(|i| i % 7 != 3) {
        rx.on_receive(id);
    }
    for (name, n) in [("u32-40of40", 40), ("u32-8of40", 8), ("u32-0of40", 0)] {
        let mut w = Vec::new();
        rx.encode(n, &mut w).unwrap();
        v.push((name, w));
    }
    let mut s = Sketch::new(20);
    s.set_epoch(7);
    s.insert_all([1, 2, 3, 0xdead_beef]);
    let mut w = Vec::new();
    s.encode_prefix(20, &mut w).unwrap();
    v.push(("u32-epoch7", w));
    let mut s64 = Sketch::<u64>::with_key(12, HashKey::DEFAULT);
    s64.insert_all([1u64 << 40, 5, 9]);
    let mut w = Vec::new();
    s64.encode_prefix(12, &mut w).unwrap();
    v.push(("u64-12", w));
    let mut s16 = Sketch::<u16>::with_key(6, HashKey::DEFAULT);
    s16.insert_all([1u16, 500]);
    let mut w = Vec::new();
    s16.encode_prefix(6, &mut w).unwrap();
    v.push(("u16-6", w));
    // Receiver views at the two other widths a session may negotiate, a few packets lost.
    let mut r16 = ReceiverEack::<u16>::with_key(40, HashKey::DEFAULT);
    let mut r64 = ReceiverEack::<u64>::with_key(40, HashKey::DEFAULT);
    r16.reset(3);
    r64.reset(3);
    for i in (0..60u64).filter(|i| i % 11 != 5) {
        r16.on_receive(i as u16 * 1031);
        r64.on_receive(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    let mut w = Vec::new();
    r16.encode(24, &mut w).unwrap();
    v.push(("u16-receiver-24of40", w));
    let mut w = Vec::new();
    r64.encode(24, &mut w).unwrap();
    v.push(("u64-receiver-24of40", w));
    v
}

#[test]
fn fuzz_seeds() {
    seeds("wire", eack_seeds, eack::fuzz_parse);
}

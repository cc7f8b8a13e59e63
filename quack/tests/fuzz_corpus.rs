//! The committed fuzz seeds (`fuzz/corpus/parse/`): real quACK encodings of every width. Every
//! seed runs through the fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p quack --test
//! fuzz_corpus` rewrites them.
#![allow(clippy::unwrap_used)]

use quack::PowerSumQuack;

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

fn quack_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut v = Vec::new();
    let mut q32 = PowerSumQuack::<u32>::new(8);
    v.push(("u32-empty-t8", q32.to_bytes()));
    for i in 0..20u32 {
        q32.insert(i.wrapping_mul(0x9e37_79b9));
    }
    v.push(("u32-20-t8", q32.to_bytes()));
    let mut q32 = PowerSumQuack::<u32>::new(10);
    q32.insert_batch(&[1, 2, 3, 0xdead_beef]);
    v.push(("u32-4-t10", q32.to_bytes()));
    let mut q16 = PowerSumQuack::<u16>::new(4);
    for i in 0..6u16 {
        q16.insert(i * 1000 + 7);
    }
    v.push(("u16-6-t4", q16.to_bytes()));
    let mut q64 = PowerSumQuack::<u64>::new(2);
    q64.insert(0x0123_4567_89ab_cdef);
    v.push(("u64-1-t2", q64.to_bytes()));
    v
}

#[test]
fn fuzz_seeds() {
    seeds("parse", quack_seeds, quack::fuzz_parse);
}

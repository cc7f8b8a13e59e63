//! The committed fuzz seeds of the C API's targets (`fuzz/corpus/{c_api, c_api_calls}/`): real
//! quACKs of the body's own sends and call scripts through every surface. Every seed runs through
//! its fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p sidekick-capi --test
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

fn c_api_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // The body's Robin (threshold 10) sends datagrams 0..8; the proxy missed 3.
    let mut q = PowerSumQuack::<u32>::new(10);
    for id in (0..8u32).filter(|&i| i != 3) {
        q.insert(id);
    }
    let mut short_datagram = vec![0x41, 1, 2, 3, 4, 5, 6, 7, 8];
    short_datagram.extend_from_slice(&[0x20; 24]);
    vec![("quack-lost-3", q.to_bytes()), ("datagram", short_datagram)]
}

/// `op, len, args`: the first argument byte advances the clock (× 997 µs).
fn call(op: u8, args: &[u8]) -> Vec<u8> {
    let mut v = vec![op, args.len() as u8 + 1, 10];
    v.extend_from_slice(args);
    v
}

fn c_api_calls_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Robin: sends (op 9: packet number, datagram), a quACK of them (op 10), events (op 11).
    let mut robin = Vec::new();
    let mut q = PowerSumQuack::<u32>::new(10);
    for i in 0..6u32 {
        let mut a = i.to_le_bytes().to_vec();
        a.extend_from_slice(&[0x40, 0x40]);
        a.extend_from_slice(&(i + 1000).to_le_bytes());
        robin.extend(call(9, &a));
        if i != 1 {
            q.insert(i + 1000);
        }
    }
    robin.extend(call(10, &q.to_bytes()));
    robin.extend(call(11, &[200]));
    robin.extend(call(12, &[0]));
    // Packrat: datagrams with packet numbers 0, 1, 3 (a gap), an eACK (op 15), ready (op 14).
    let mut packrat = Vec::new();
    for pn in [0u32, 1, 3] {
        let mut a = pn.to_le_bytes().to_vec();
        a.extend_from_slice(&[0x41; 8]);
        a.extend_from_slice(&(pn + 77).to_le_bytes());
        packrat.extend(call(13, &a));
    }
    packrat.extend(call(15, &[0xef]));
    packrat.extend(call(14, &[0xef]));
    packrat.extend(call(16, &[3]));
    // Quacks and PACUBIC: inserts, subtract, decode; an ACK, a quACK loss, the window.
    let mut rest = Vec::new();
    rest.extend(call(1, &[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]));
    rest.extend(call(5, &[]));
    rest.extend(call(6, &[8, 1, 2, 3]));
    rest.extend(call(
        17,
        &[0x10, 0, 0, 0, 0, 0, 0, 0, 0xdc, 0x05, 0, 0, 0, 0, 0, 0],
    ));
    rest.extend(call(
        18,
        &[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f],
    ));
    rest.extend(call(19, &[3]));
    // The client: a discovery request out (op 22), a datagram in (op 21), a new Packrat session
    // (op 25, which 0, mask bit 0).
    let mut client = Vec::new();
    client.extend(call(22, &[0xef, 0]));
    client.extend(call(21, &[0, 0x41, 1, 2, 3, 4, 5, 6, 7, 8, 9]));
    client.extend(call(25, &[0, 1, 0, 0, 0]));
    client.extend(call(23, &[4]));
    vec![
        ("robin", robin),
        ("packrat", packrat),
        ("quack-pacubic", rest),
        ("client", client),
    ]
}

#[test]
fn fuzz_seeds() {
    seeds("c_api", c_api_seeds, sidekick_capi::fuzz_c_api);
    seeds(
        "c_api_calls",
        c_api_calls_seeds,
        sidekick_capi::fuzz_c_api_calls,
    );
}

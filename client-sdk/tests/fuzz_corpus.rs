//! The committed fuzz seeds of the SDK's targets (`fuzz/corpus/TARGET/`): real QUIC datagrams
//! (the handshake of a recorded quinn download, `proxy-core/tests/data/`), key-log lines in the NSS
//! format, quACKs of the body's own sends, and hostile-proxy scripts. Every seed runs through
//! its fuzz body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p sidekick --test fuzz_corpus`
//! rewrites them.
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

const TRACE: &str = include_str!("../../proxy-core/tests/data/pemi-quinn-download.trace");

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Whole long-header datagrams of the trace (`<t> <dir> <sport> <dport> <len> <hash> <head>`).
fn long_headers() -> Vec<Vec<u8>> {
    TRACE
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let head = hex(f.get(6)?);
            (head.len().to_string() == *f.get(4)? && head.len() > 1).then_some(head)
        })
        .take(2)
        .collect()
}

fn lens_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut d = long_headers();
    let mut short = vec![0x4b, 1, 2, 3, 4, 5, 6, 7, 8];
    short.extend((0..40u8).map(|i| i.wrapping_mul(37)));
    // The body reads the destination connection id length from the first byte (0x4b % 21 = 12).
    vec![
        ("initial", d.remove(0)),
        ("handshake", d.remove(0)),
        ("short", short),
    ]
}

fn keylog_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let random = "52".repeat(32);
    let lines = [
        format!(
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET {random} {}",
            "a1".repeat(32)
        ),
        format!(
            "SERVER_HANDSHAKE_TRAFFIC_SECRET {random} {}",
            "b2".repeat(32)
        ),
        format!("CLIENT_TRAFFIC_SECRET_0 {random} {}", "c3".repeat(48)),
        format!("SERVER_TRAFFIC_SECRET_0 {random} {}", "d4".repeat(48)),
    ];
    vec![
        ("tls13-handshake", lines.join("\n").into_bytes()),
        ("comment", b"# SSL/TLS secrets log file\n".to_vec()),
    ]
}

fn quack_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // The body sends datagrams 0..8 (identifier = the datagram, little-endian) at threshold 4.
    let mut all = PowerSumQuack::<u32>::new(4);
    let mut lost_two = PowerSumQuack::<u32>::new(4);
    for id in 0..8u32 {
        all.insert(id);
        if id != 2 && id != 5 {
            lost_two.insert(id);
        }
    }
    vec![
        ("all-received", all.to_bytes()),
        ("lost-2-5", lost_two.to_bytes()),
    ]
}

fn step(op: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![op, payload.len() as u8];
    v.extend_from_slice(payload);
    v
}

/// An InitAck accepting `robin`/`packrat` (the layout `sidekick::fuzz` reads).
fn init_ack(robin: bool, packrat: bool) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    let cfg = &mut p[6..];
    cfg[0] = u8::from(robin) | if packrat { 2 } else { 0 };
    cfg[1..5].copy_from_slice(&30u32.to_le_bytes());
    cfg[9..13].copy_from_slice(&10u32.to_le_bytes());
    cfg[17..21].copy_from_slice(&10u32.to_le_bytes());
    cfg[25..29].copy_from_slice(&160u32.to_le_bytes());
    cfg[30..34].copy_from_slice(&48_000u32.to_le_bytes());
    cfg[34..38].copy_from_slice(&30u32.to_le_bytes());
    cfg[43..47].copy_from_slice(&(-4i32).to_le_bytes());
    cfg[47] = 4;
    step(1, &p)
}

fn hostile_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut robin = vec![0, 0];
    robin.extend(init_ack(true, false));
    for i in 0..6u8 {
        robin.extend(step(6, &[0, i, i, i, i]));
    }
    robin.extend(step(2, &[1, 0, 1, 0, 0, 0, 0x11, 0x02, 8, 0]));
    robin.extend(step(8, &[100, 0]));
    let mut packrat = vec![1, 0];
    packrat.extend(init_ack(false, true));
    for i in 0..6u8 {
        packrat.extend(step(7, &[0, i, 0, 0, 0, 9, 9, 9]));
    }
    packrat.extend(step(3, &[2, 1, 0, 0, 0, 1, 0, 0, 0]));
    let mut lying = vec![2, 0x10];
    let mut ack = init_ack(true, true);
    ack[2 + 6 + 37] = 0xff; // reorder_delay_ms above 4·10⁹ ms
    lying.extend(ack);
    lying.extend(step(0, &[5, 1, 0xde, 0xad]));
    vec![
        ("robin", robin),
        ("packrat", packrat),
        ("lying-echo", lying),
    ]
}

#[test]
fn fuzz_seeds() {
    seeds("lens_datagram", lens_seeds, sidekick::lens::fuzz_datagram);
    seeds("keylog", keylog_seeds, sidekick::lens::fuzz_keylog);
    seeds("robin_quack", quack_seeds, sidekick::robin::fuzz_quack);
    seeds(
        "hostile_proxy",
        hostile_seeds,
        sidekick::fuzz::fuzz_hostile_proxy,
    );
}

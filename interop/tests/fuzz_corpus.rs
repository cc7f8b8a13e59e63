//! The committed fuzz seeds of the link element's checksum filler (`fuzz/corpus/fill_checksum/`):
//! Ethernet frames with IPv4/UDP, IPv6/UDP and IPv4/TCP carrying a QUIC-like payload, their
//! transport checksums left partial as a kernel hands them over. Every seed runs through the fuzz
//! body here; `SIDEKICK_WRITE_FUZZ_SEEDS=1 cargo test -p sidekick-lab --test fuzz_corpus`
//! rewrites them.
#![allow(clippy::unwrap_used)]

use sidekick_wire::checksum::internet_checksum;

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

fn payload() -> Vec<u8> {
    let mut p = vec![0x41, 1, 2, 3, 4, 5, 6, 7, 8];
    p.extend((0..31u8).map(|i| i.wrapping_mul(29)));
    p
}

fn eth(ethertype: [u8; 2], l3: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&ethertype);
    f.extend_from_slice(l3);
    f
}

fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let c = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(l4);
    ip
}

fn udp(p: &[u8]) -> Vec<u8> {
    let mut u = vec![0x88, 0x96, 0x11, 0x51];
    u.extend_from_slice(&((8 + p.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(p);
    u
}

fn checksum_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let p = payload();
    let mut v6 = vec![0x60, 0, 0, 0, 0, 0, 17, 64];
    let u = udp(&p);
    v6[4..6].copy_from_slice(&(u.len() as u16).to_be_bytes());
    v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v6.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3]);
    v6.extend_from_slice(&u);
    let mut tcp = vec![
        0x88, 0x96, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
    ];
    tcp.extend_from_slice(&p);
    vec![
        ("ipv4-udp", eth([0x08, 0x00], &ipv4(17, &udp(&p)))),
        ("ipv6-udp", eth([0x86, 0xdd], &v6)),
        ("ipv4-tcp", eth([0x08, 0x00], &ipv4(6, &tcp))),
    ]
}

fn drop_rule_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut s = b"down:2,down:3".to_vec();
    for _ in 0..4 {
        s.push(0xff);
        s.extend_from_slice(&eth([0x08, 0x00], &ipv4(17, &udp(&payload()))));
    }
    vec![("second-and-third", s)]
}

#[test]
fn fuzz_seeds() {
    seeds(
        "drop_rules",
        drop_rule_seeds,
        sidekick_lab::droprule::fuzz_drop_rules,
    );
    seeds(
        "fill_checksum",
        checksum_seeds,
        sidekick_lab::csum::fuzz_fill_checksum,
    );
}

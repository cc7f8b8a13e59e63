//! Minimum-of-many timing of insert and decode (u32, plus u16/u64 insert), robust to a loaded
//! machine: each figure is the minimum over 300 runs (a run = 1000 inserts, or 20 decodes),
//! where criterion reports medians. Also prints a breakdown of the n = 25, m = 10 decode.
//!
//! Run: `cargo run --profile bench -p quack --example mintime`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use quack::{Decoded, Decoder, PowerSumQuack};
use std::hint::black_box;
use std::time::Instant;

fn min_ns(reps: usize, inner: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..inner {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / inner as f64);
    }
    best
}

fn main() {
    breakdown();
    let ids: Vec<u32> = (0..1024u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5bd1e995)
        .collect();
    for t in [10usize, 20, 50] {
        let mut q = PowerSumQuack::<u32>::new(t);
        let per = min_ns(300, 1, || {
            for &id in &ids[..1000] {
                q.insert(black_box(id));
            }
        }) / 1000.0;
        let mut q2 = PowerSumQuack::<u32>::new(t);
        let batch = min_ns(300, 1, || q2.insert_batch(black_box(&ids[..1000]))) / 1000.0;
        let mut q3 = PowerSumQuack::<u64>::new(t);
        let ids64: Vec<u64> = ids
            .iter()
            .map(|&x| u64::from(x) * 0x9E37_79B9_7F4A_7C15)
            .collect();
        let p64 = min_ns(300, 1, || {
            for &id in &ids64[..1000] {
                q3.insert(black_box(id));
            }
        }) / 1000.0;
        let mut q4 = PowerSumQuack::<u16>::new(t);
        let p16 = min_ns(300, 1, || {
            for &id in &ids[..1000] {
                q4.insert(black_box(id as u16));
            }
        }) / 1000.0;
        println!(
            "insert t={t}: u32 {per:.2} ns, u32 batch {batch:.2} ns, u16 {p16:.2} ns, u64 {p64:.2} ns"
        );
    }
    for (n, m) in [(25usize, 10usize), (300, 10), (1000, 20)] {
        let log: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x1234_5678)
            .collect();
        let mut s = PowerSumQuack::<u32>::new(m);
        s.insert_batch(&log);
        let mut r = PowerSumQuack::<u32>::new(m);
        for (i, &id) in log.iter().enumerate() {
            if i % (n / m) != 0 || i / (n / m) >= m {
                r.insert(id);
            }
        }
        let diff = s - &r;
        let mut dec = Decoder::new();
        let mut out = Decoded::default();
        assert_eq!(dec.decode(&diff, &log).unwrap().missing().len(), m);
        let d = min_ns(300, 20, || {
            dec.decode_into(black_box(&diff), black_box(&log), &mut out)
                .unwrap();
        });
        println!("decode n={n} m={m}: {:.3} us", d / 1000.0);
    }
}

fn breakdown() {
    let log: Vec<u32> = (0..25u32)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x1234_5678)
        .collect();
    let mut s = PowerSumQuack::<u32>::new(10);
    s.insert_batch(&log);
    let mut r = PowerSumQuack::<u32>::new(10);
    r.insert_batch(&log[10..]);
    let diff = s - &r;
    let mut dec = Decoder::new();
    let mut out = Decoded::default();
    let full = min_ns(300, 20, || {
        dec.decode_into(black_box(&diff), black_box(&log), &mut out)
            .unwrap();
    });
    let coeffs = min_ns(300, 20, || {
        black_box(diff.to_coeffs().unwrap());
    });
    let sums = min_ns(300, 20, || {
        black_box(diff.power_sums().count());
    });
    let empty: Vec<u32> = Vec::new();
    let newton = min_ns(300, 20, || {
        black_box(dec.decode(black_box(&diff), black_box(&empty)).unwrap_err());
    });
    let one = min_ns(300, 20, || {
        black_box(
            dec.decode(black_box(&diff), black_box(&log[..1]))
                .unwrap_err(),
        );
    });
    println!("newton only (reused decoder) {newton:.0} ns, with 1 candidate {one:.0} ns");
    println!(
        "breakdown n=25 m=10: full {full:.0} ns, to_coeffs (alloc decoder) {coeffs:.0} ns, power_sums {sums:.0} ns"
    );
}

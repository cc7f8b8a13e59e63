//! Minimum-of-many timing of the benchmark settings of issue 4 (insert into 40/160-symbol
//! sketches, decode at 10/20/40 missing with the recommended prefix), robust to a loaded
//! machine: each figure is the minimum over 300 runs, where criterion reports medians.
//!
//! Run: `cargo run --profile bench -p eack --example eack_mintime`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use std::hint::black_box;
use std::time::Instant;

use eack::experiment::SplitMix;
use eack::{Decoder, Difference, Sketch, symbols_for};

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

/// The benchmark's scenario: 1000 recorded, `m` missing, an `n`-symbol prefix that decodes.
fn pair(m: usize, local: usize, n: usize) -> (Sketch, Sketch) {
    for seed in 0.. {
        let mut rng = SplitMix::new(seed);
        let ids: Vec<u32> = rng.distinct_ids(1000);
        let mut proxy = Sketch::new(local);
        let mut client = Sketch::new(local);
        proxy.insert_all(ids.iter().copied());
        client.insert_all(ids[m..].iter().copied());
        let mut wire = Vec::new();
        client.encode_prefix(n, &mut wire).unwrap();
        let remote = Sketch::decode_prefix(&wire).unwrap();
        if let Ok(d) = proxy.difference(&remote).decode()
            && d.missing.len() == m
        {
            return (proxy, remote);
        }
    }
    unreachable!()
}

fn main() {
    let mut rng = SplitMix::new(1);
    let ids: Vec<u32> = (0..1000).map(|_| rng.next_u64() as u32).collect();
    for t in [40usize, 80, 160] {
        let mut s = Sketch::new(t);
        let per = min_ns(300, 1, || {
            for &id in &ids {
                s.insert(black_box(id));
            }
        }) / 1000.0;
        black_box(&s);
        println!("insert t={t}: {per:.2} ns");
    }
    for m in [10usize, 20, 40] {
        let n = symbols_for(m, 0.99);
        let (proxy, remote) = pair(m, 160, n);
        let mut dec = Decoder::new();
        let mut out = Difference::default();
        let d = min_ns(300, 20, || {
            dec.decode_difference(black_box(&proxy), black_box(&remote), &mut out)
                .unwrap();
        });
        println!("decode m={m} ({n} symbols): {:.3} us", d / 1000.0);
    }
}

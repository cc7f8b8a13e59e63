//! eACK benchmarks (seed 002 §5.3, Figs. 3–4, Table 2).
//!
//! `cargo bench -p eack` prints:
//! - `insert/t`: incremental encode of one identifier into a t-symbol sketch (Fig. 3a);
//! - `decode/m`: subtract + peel at the proxy for m missing packets out of 1000 recorded, with
//!   the prefix length the sizing function recommends for p = 0.99 (the rateless eACK), and
//!   `decode_full160/m` with all 160 local symbols (Fig. 3b);
//! - the symbols-per-missing multiplier distribution (Fig. 4) at m = 10, 20, 40;
//! - the power-sum vs rIBLT comparison at Table 2's conditions.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use eack::experiment::{NeededDistribution, SplitMix};
use eack::{Decoder, Difference, ProxyEack, ReceiverEack, Sketch, symbols_for};

fn insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert");
    let mut rng = SplitMix::new(1);
    let ids: Vec<u32> = (0..1000).map(|_| rng.next_u64() as u32).collect();
    g.throughput(Throughput::Elements(ids.len() as u64));
    for t in [40usize, 80, 160] {
        let mut s = Sketch::new(t);
        g.bench_with_input(BenchmarkId::from_parameter(t), &t, |b, _| {
            b.iter(|| {
                for &id in &ids {
                    s.insert(black_box(id));
                }
            });
        });
        black_box(&s);
    }
    g.finish();
}

/// Proxy and client sketches (`local` symbols) over 1000 identifiers, `m` missing at the
/// client, with a seed for which the `n`-symbol prefix decodes.
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

fn decode(c: &mut Criterion) {
    for (name, full) in [("decode", false), ("decode_full160", true)] {
        let mut g = c.benchmark_group(name);
        for m in [10usize, 20, 40] {
            let n = if full { 160 } else { symbols_for(m, 0.99) };
            let (proxy, remote) = pair(m, 160, n);
            let mut dec = Decoder::new();
            let mut out = Difference::default();
            g.bench_with_input(BenchmarkId::from_parameter(m), &m, |b, _| {
                b.iter(|| {
                    dec.decode_difference(black_box(&proxy), black_box(&remote), &mut out)
                        .unwrap();
                    out.missing.len()
                });
            });
        }
        g.finish();
    }
}

fn on_eack(c: &mut Criterion) {
    // Wire bytes in, retransmission list out (parse + subtract + peel), m = 20, 160 local.
    let mut rng = SplitMix::new(7);
    let ids = rng.distinct_ids(1000);
    let mut client = ReceiverEack::new(160);
    let mut proxy = ProxyEack::new(160, 0);
    for (k, &id) in ids.iter().enumerate() {
        proxy.insert(id);
        if k >= 20 {
            client.on_receive(id);
        }
    }
    let mut wire = Vec::new();
    client.encode(160, &mut wire).unwrap();
    let mut out = Difference::default();
    c.bench_function("on_eack/20", |b| {
        b.iter(|| {
            proxy.on_eack_into(black_box(&wire), &mut out).unwrap();
            out.missing.len()
        });
    });
}

fn multiplier_distribution() {
    // Fig. 4: symbols needed / m over random differences (10 000 trials each here; the sizing
    // table uses 100 000, `cargo run --release -p eack --example sizing`).
    println!("symbols needed per missing element (Fig. 4), 10000 trials");
    println!("   m    mean    p50    p99   success at symbols_for(m, 0.99)");
    for m in [10usize, 20, 40] {
        let d = NeededDistribution::measure(m, 10_000, 0xbe4c);
        let n = symbols_for(m, 0.99);
        println!(
            "{m:4}  {:.3}  {:.3}  {:.3}   {:.4} ({n} symbols)",
            d.mean_multiplier(),
            d.multiplier_quantile(0.5),
            d.multiplier_quantile(0.99),
            d.success_at(n)
        );
    }
}

fn figures(c: &mut Criterion) {
    multiplier_distribution();
    insert(c);
    decode(c);
    on_eack(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = figures
}
criterion_main!(benches);

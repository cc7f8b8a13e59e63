//! Criterion benchmarks reproducing Sidekick (NSDI '24) §3.5 (Fig. 2, Table 3):
//!
//! - `insert/<width>/t=<t>`: one identifier inserted into a quACK of threshold t (Fig. 2c);
//!   the reported time is per identifier.
//! - `insert_loop/<width>/t=<t>`: 1000 single-identifier inserts per iteration; the reported
//!   time is per 1000 identifiers.
//! - `insert_batch/<width>/t=<t>`: 1000 identifiers with [`PowerSumQuack::insert_batch`]; the
//!   reported time is per 1000 identifiers.
//! - `decode/u32/n=<n>/m=<m>`: decode a difference of `m` missing identifiers against a log of
//!   `n` candidates with a reusable [`Decoder`] and result (`decode_into`, Fig. 2a/2b), and
//!   `decode_alloc/...` through the allocating [`PowerSumQuack::decode_with_log`] (fresh scratch
//!   and result per call); `decode_sweep/...` varies n and m (reusable decoder, new result).
//! - `wire/...`: serialize and parse.
//! - `factor/...`: decode without a log.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall-clock time:
//! the development machine is shared by several builds at once, and time spent descheduled is
//! not the code's cost (the `eack` benchmarks measure the same way). Set `QUACK_BENCH_WALL=1`
//! for wall-clock time.
//!
//! Run: `cargo bench -p quack` (about two minutes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Throughput, criterion_group, criterion_main};
use quack::{Decoded, Decoder, Identifier, PowerSumQuack, QuackView};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sidekick_bench_support::CpuTime;

type Criterion = criterion::Criterion<CpuTime>;

fn ids<T: Identifier>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| T::from_u64_truncating(rng.random()))
        .collect()
}

/// Sender log of `n` identifiers and the difference quACK with `m` of them missing.
fn scenario<T: Identifier>(n: usize, m: usize, t: usize) -> (Vec<T>, PowerSumQuack<T>) {
    let log = ids::<T>(n, (n * 1000 + m) as u64);
    let mut sender = PowerSumQuack::<T>::new(t);
    sender.insert_batch(&log);
    let mut receiver = PowerSumQuack::<T>::new(t);
    let mut rng = StdRng::seed_from_u64(7);
    let mut lost = vec![false; n];
    let mut k = 0;
    while k < m {
        let i = rng.random_range(0..n);
        if !lost[i] {
            lost[i] = true;
            k += 1;
        }
    }
    for (id, l) in log.iter().zip(&lost) {
        if !l {
            receiver.insert(*id);
        }
    }
    (log, sender - &receiver)
}

fn bench_insert_width<T: Identifier>(c: &mut Criterion, name: &str) {
    let data = ids::<T>(1024, 1);
    let mut g = c.benchmark_group(format!("insert/{name}"));
    for t in [10usize, 20, 50] {
        g.bench_function(BenchmarkId::from_parameter(format!("t={t}")), |b| {
            let mut q = PowerSumQuack::<T>::new(t);
            let mut i = 0usize;
            b.iter(|| {
                q.insert(black_box(data[i & 1023]));
                i += 1;
            });
            black_box(&q);
        });
    }
    g.finish();
    // The same single-identifier inserts, 1000 per timed iteration (criterion's per-iteration
    // overhead and the index arithmetic above are then not attributed to the insert).
    let mut g = c.benchmark_group(format!("insert_loop/{name}"));
    g.throughput(Throughput::Elements(1000));
    for t in [10usize, 20] {
        g.bench_function(BenchmarkId::from_parameter(format!("t={t}")), |b| {
            let mut q = PowerSumQuack::<T>::new(t);
            b.iter(|| {
                for &id in &data[..1000] {
                    q.insert(black_box(id));
                }
            });
            black_box(&q);
        });
    }
    g.finish();
    let mut g = c.benchmark_group(format!("insert_batch/{name}"));
    g.throughput(Throughput::Elements(1000));
    for t in [10usize, 20, 50] {
        g.bench_function(BenchmarkId::from_parameter(format!("t={t}")), |b| {
            let mut q = PowerSumQuack::<T>::new(t);
            b.iter(|| q.insert_batch(black_box(&data[..1000])));
            black_box(&q);
        });
    }
    g.finish();
}

fn bench_insert(c: &mut Criterion) {
    bench_insert_width::<u16>(c, "u16");
    bench_insert_width::<u32>(c, "u32");
    bench_insert_width::<u64>(c, "u64");
}

fn bench_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode/u32");
    for (n, m) in [(25usize, 10usize), (300, 10), (1000, 20)] {
        let (log, diff) = scenario::<u32>(n, m, m);
        let mut dec = Decoder::new();
        let mut out = Decoded::default();
        dec.decode_into(&diff, &log, &mut out).unwrap();
        assert_eq!(out.missing().len(), m);
        g.bench_function(BenchmarkId::from_parameter(format!("n={n}/m={m}")), |b| {
            b.iter(|| {
                dec.decode_into(black_box(&diff), black_box(&log), &mut out)
                    .unwrap();
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("decode_alloc/u32");
    for (n, m) in [(25usize, 10usize), (1000, 20)] {
        let (log, diff) = scenario::<u32>(n, m, m);
        g.bench_function(BenchmarkId::from_parameter(format!("n={n}/m={m}")), |b| {
            b.iter(|| black_box(&diff).decode_with_log(black_box(&log)).unwrap());
        });
    }
    g.finish();
    let mut g = c.benchmark_group("decode_sweep/u32");
    for (n, m) in [
        (100usize, 10usize),
        (3000, 10),
        (10000, 10),
        (1000, 1),
        (1000, 5),
        (1000, 50),
    ] {
        let (log, diff) = scenario::<u32>(n, m, m.max(10));
        let mut dec = Decoder::new();
        g.bench_function(BenchmarkId::from_parameter(format!("n={n}/m={m}")), |b| {
            b.iter(|| dec.decode(black_box(&diff), black_box(&log)).unwrap());
        });
    }
    g.finish();
    let mut g = c.benchmark_group("decode_width");
    {
        let (log, diff) = scenario::<u16>(1000, 20, 20);
        let mut dec = Decoder::new();
        g.bench_function("u16/n=1000/m=20", |b| {
            b.iter(|| dec.decode(black_box(&diff), black_box(&log)));
        });
    }
    {
        let (log, diff) = scenario::<u64>(1000, 20, 20);
        let mut dec = Decoder::new();
        g.bench_function("u64/n=1000/m=20", |b| {
            b.iter(|| dec.decode(black_box(&diff), black_box(&log)).unwrap());
        });
    }
    g.finish();
}

fn bench_wire(c: &mut Criterion) {
    let mut g = c.benchmark_group("wire/u32/t=20");
    let mut q = PowerSumQuack::<u32>::new(20);
    q.insert_batch(&ids::<u32>(100, 3));
    let bytes = q.to_bytes();
    let mut buf = vec![0u8; q.encoded_len()];
    g.bench_function("write_to", |b| {
        b.iter(|| black_box(&q).write_to(black_box(&mut buf)));
    });
    g.bench_function("to_bytes", |b| b.iter(|| black_box(&q).to_bytes()));
    g.bench_function("parse_view", |b| {
        b.iter(|| QuackView::<u32>::parse(black_box(&bytes)).unwrap());
    });
    g.bench_function("from_bytes", |b| {
        b.iter(|| PowerSumQuack::<u32>::from_bytes(black_box(&bytes)).unwrap());
    });
    g.finish();
}

fn bench_factor(c: &mut Criterion) {
    let mut g = c.benchmark_group("factor");
    let (_, d32) = scenario::<u32>(100, 10, 10);
    g.bench_function("u32/m=10", |b| {
        b.iter(|| black_box(&d32).decode_by_factoring().unwrap());
    });
    let (_, d64) = scenario::<u64>(100, 10, 10);
    g.bench_function("u64/m=10", |b| {
        b.iter(|| black_box(&d64).decode_by_factoring().unwrap());
    });
    g.finish();
}

fn config() -> Criterion {
    criterion::Criterion::default()
        .with_measurement(CpuTime::from_env("QUACK_BENCH_WALL"))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_insert, bench_decode, bench_wire, bench_factor
}
criterion_main!(benches);

//! eACK benchmarks (Packrat (CoNEXT '26) §5.3, Figs. 3–4, Table 2).
//!
//! `cargo bench -p eack` prints:
//! - `insert/t`: incremental encode of one identifier into a t-symbol sketch (Fig. 3a);
//! - `decode/m`: subtract + peel at the proxy for m missing packets out of 1000 recorded, with
//!   the prefix length the sizing function recommends for p = 0.99 (the rateless eACK), and
//!   `decode_full160/m` with all 160 local symbols (Fig. 3b);
//! - the symbols-per-missing multiplier distribution (Fig. 4) at m = 10, 20, 40;
//! - `insert_width/b` and `on_eack_width/b`: the same at 16- and 64-bit identifiers;
//! - the power-sum vs rIBLT comparison at Table 2's conditions (`table2/...`, plus a printed
//!   summary with the gain).
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall-clock time:
//! the development machine is shared by several builds at once, and time spent descheduled is
//! not the code's cost. Set `EACK_BENCH_WALL=1` for wall-clock time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use eack::experiment::{NeededDistribution, SplitMix};
use eack::{
    Decoder, Difference, EackScheme, HashKey, Id, PowerSumEack, ProxyEack, ReceiverEack, RibltEack,
    Sketch, symbols_for,
};
use sidekick_bench_support::{CpuTime, thread_cpu_time};

type C = Criterion<CpuTime>;

fn insert(c: &mut C) {
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

fn decode(c: &mut C) {
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

fn on_eack(c: &mut C) {
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

/// Insert (t = 160) and `on_eack/20` at the other identifier widths (2 and 8 bytes), beside the
/// 32-bit figures above: `insert_width/{16,64}`, `on_eack_width/{16,64}`.
fn widths(c: &mut C) {
    fn at<I: Id>(c: &mut C, bits: u32) {
        let mut rng = SplitMix::new(1);
        let ids: Vec<I> = (0..1000).map(|_| I::from_u64(rng.next_u64())).collect();
        let mut g = c.benchmark_group("insert_width");
        g.throughput(Throughput::Elements(ids.len() as u64));
        let mut s = Sketch::<I>::with_key(160, HashKey::DEFAULT);
        g.bench_with_input(BenchmarkId::from_parameter(bits), &bits, |b, _| {
            b.iter(|| {
                for &id in &ids {
                    s.insert(black_box(id));
                }
            });
        });
        black_box(&s);
        g.finish();
        let mut client = ReceiverEack::<I>::with_key(160, HashKey::DEFAULT);
        let mut proxy = ProxyEack::<I>::with_key(160, 0, HashKey::DEFAULT);
        // Distinct identifiers (16-bit ones collide otherwise), 20 missing.
        let mut seen = std::collections::BTreeSet::new();
        let mut rng = SplitMix::new(7);
        while seen.len() < 1000 {
            seen.insert(I::from_u64(rng.next_u64()));
        }
        for (k, &id) in seen.iter().enumerate() {
            proxy.insert(id);
            if k % 50 != 3 {
                client.on_receive(id);
            }
        }
        let mut wire = Vec::new();
        client.encode(160, &mut wire).unwrap();
        let mut out = Difference::default();
        c.benchmark_group("on_eack_width")
            .bench_function(BenchmarkId::from_parameter(bits), |b| {
                b.iter(|| {
                    proxy.on_eack_into(black_box(&wire), &mut out).unwrap();
                    out.missing.len()
                });
            });
    }
    at::<u16>(c, 16);
    at::<u64>(c, 64);
}

fn multiplier_distribution() {
    // Fig. 4: symbols needed / m over random differences (20 000 trials each here; the sizing
    // table uses 100 000, `cargo run --release -p eack --example sizing`).
    println!("symbols needed per missing element (Fig. 4), 20000 trials");
    println!("   m    mean    p50    p99   success at symbols_for(m, 0.99)");
    for m in [10usize, 20, 40] {
        let d = NeededDistribution::measure(m, 20_000, 0xbe4c);
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

/// Packrat (CoNEXT '26) Table 2's network conditions: (label, throughput bit/s, loss fraction of an eACK
/// interval, eACK RTT s). "<1%" is taken as 1%.
const TABLE2: [(&str, f64, f64, f64); 5] = [
    ("20Mbps_1pct_10ms", 20e6, 0.01, 0.010),
    ("20Mbps_15pct_10ms", 20e6, 0.15, 0.010),
    ("50Mbps_50pct_10ms", 50e6, 0.50, 0.010),
    ("20Mbps_10pct_100ms", 20e6, 0.10, 0.100),
    ("100Mbps_1pct_100ms", 100e6, 0.01, 0.100),
];

/// One Table 2 case for scheme `S`: the proxy has N = throughput·RTT / 1500 B unacknowledged
/// packets (its log), the client misses m = loss·N of them (at least 1) and sends `n` symbols.
/// Returns proxy, wire bytes and log, for a seed where the case decodes.
fn table2_case<S: EackScheme>(
    rate: f64,
    loss: f64,
    rtt: f64,
    symbols: usize,
    n: usize,
) -> (S, Vec<u8>, Vec<u32>, usize) {
    let big_n = (rate * rtt / (8.0 * 1500.0)).ceil() as usize;
    let m = ((loss * big_n as f64).round() as usize).max(1);
    for seed in 0.. {
        let mut rng = SplitMix::new(seed);
        let log = rng.distinct_ids(big_n);
        let mut proxy = S::with_symbols(symbols);
        let mut client = S::with_symbols(symbols);
        for (k, &id) in log.iter().enumerate() {
            proxy.insert_id(id);
            if k >= m {
                client.insert_id(id);
            }
        }
        let mut wire = Vec::new();
        client.encode(n, &mut wire).unwrap();
        let mut out = Difference::default();
        if proxy.decode_against(&wire, &log, &mut out).is_ok() && out.missing.len() == m {
            return (proxy, wire, log, m);
        }
    }
    unreachable!()
}

/// Median thread-CPU nanoseconds per call of `f` (51 batches of `iters`).
fn median_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..51)
        .map(|_| {
            let t = thread_cpu_time();
            for _ in 0..iters {
                f();
            }
            thread_cpu_time().saturating_sub(t).as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn table2(c: &mut C) {
    println!("Table 2: decode time per eACK, power sum (t = m) vs rIBLT (symbols_for(m, 0.99))");
    println!(
        "{:<20} {:>5} {:>4} {:>12} {:>12} {:>8}",
        "condition", "N", "m", "psum ns", "rIBLT ns", "gain"
    );
    let mut g = c.benchmark_group("table2");
    for (label, rate, loss, rtt) in TABLE2 {
        let big_n = (rate * rtt / (8.0 * 1500.0)).ceil() as usize;
        let m = ((loss * big_n as f64).round() as usize).max(1);
        let (mut ps, ps_wire, log, _) = table2_case::<PowerSumEack>(rate, loss, rtt, m, m);
        let n = symbols_for(m, 0.99);
        let (mut rb, rb_wire, _, _) = table2_case::<RibltEack>(rate, loss, rtt, 160.max(n), n);
        let mut out = Difference::default();
        let ps_ns = median_ns(200, || {
            ps.decode_against(black_box(&ps_wire), &log, &mut out)
                .unwrap();
        });
        let rb_ns = median_ns(200, || {
            rb.decode_against(black_box(&rb_wire), &log, &mut out)
                .unwrap();
        });
        println!(
            "{label:<20} {big_n:>5} {m:>4} {ps_ns:>12.0} {rb_ns:>12.0} {:>7.2}x",
            ps_ns / rb_ns
        );
        g.bench_function(BenchmarkId::new("psum", label), |b| {
            b.iter(|| {
                ps.decode_against(black_box(&ps_wire), &log, &mut out)
                    .unwrap();
            });
        });
        g.bench_function(BenchmarkId::new("riblt", label), |b| {
            b.iter(|| {
                rb.decode_against(black_box(&rb_wire), &log, &mut out)
                    .unwrap();
            });
        });
    }
    g.finish();
}

fn figures(c: &mut C) {
    // `EACK_BENCH_QUICK=1` skips the printed summaries (for filtered runs).
    if std::env::var_os("EACK_BENCH_QUICK").is_none() {
        multiplier_distribution();
        table2(c);
    }
    insert(c);
    decode(c);
    on_eack(c);
    widths(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .with_measurement(CpuTime::from_env("EACK_BENCH_WALL"))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = figures
}
criterion_main!(benches);

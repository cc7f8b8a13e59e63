//! `decode_fresh`: decoding *fresh* quACKs through the public API, as an application does — the
//! sender's quACK and the receiver's quACK are built outside the timed part (criterion's
//! `iter_batched_ref`, a new pair for every decode), and the timed part is the subtraction
//! (`sender -= &receiver`, i.e. `sub_assign`) followed by the decode. The routine takes the
//! pair by reference and its result is dropped outside the timed part: by value
//! (`iter_batched`) each ~0.4 KB input was moved in and out inside it, which added 20–40 ns
//! that no application pays. The `decode` bench in
//! `quack.rs` reuses one difference quACK, so its input stays in the caches and no insertion
//! work is left for the subtraction; this one does not.
//!
//! Scenario: n = 25 candidates in the sender's log, m = 10 of them missing, threshold t = 10.
//! Both quACKs are built by single-identifier `insert`s (the sender's per-packet path), so the
//! identifiers still in the insertion ring are folded in by the subtraction, inside the timed
//! part. A third variant takes the receiver's quACK from its wire form (`from_bytes`).
//!
//! - `decode_fresh/decode_with_log/n=25/m=10`: `sender -= &receiver; sender.decode_with_log(&log)`
//! - `decode_fresh/decoder/n=25/m=10`: the same with one reused [`Decoder`] and [`Decoded`]
//!   (`decode_into`).
//! - `decode_fresh/decoder_wire/n=25/m=10`: the reused decoder, receiver parsed from bytes.
//!
//! Times are the benchmark thread's CPU time, as in `quack.rs` (`QUACK_BENCH_WALL=1` for
//! wall-clock time).
//!
//! Run: `cargo bench -p quack --bench decode_fresh` (about 20 s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, criterion_group, criterion_main};
use quack::{Decoded, Decoder, PowerSumQuack};
use sidekick_bench_support::CpuTime;

type Criterion = criterion::Criterion<CpuTime>;

const N: usize = 25;
const M: usize = 10;
const T: usize = 10;

/// xorshift64*: a deterministic, fast source of identifiers and loss patterns.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// One fresh input: the sender's log, its quACK and the receiver's quACK (M random entries lost).
fn fresh(rng: &mut Rng) -> (Vec<u32>, PowerSumQuack<u32>, PowerSumQuack<u32>) {
    let log: Vec<u32> = (0..N).map(|_| rng.next() as u32).collect();
    let mut lost = [false; N];
    let mut k = 0;
    while k < M {
        let i = (rng.next() % N as u64) as usize;
        if !lost[i] {
            lost[i] = true;
            k += 1;
        }
    }
    let mut sender = PowerSumQuack::<u32>::new(T);
    let mut receiver = PowerSumQuack::<u32>::new(T);
    for (&id, &l) in log.iter().zip(&lost) {
        sender.insert(id);
        if !l {
            receiver.insert(id);
        }
    }
    (log, sender, receiver)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_fresh");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    g.bench_function(format!("decode_with_log/n={N}/m={M}"), |b| {
        b.iter_batched_ref(
            || fresh(&mut rng),
            |(log, sender, receiver)| {
                *sender -= &*receiver;
                let d = sender.decode_with_log(log).unwrap();
                assert_eq!(d.missing().len(), M);
                d
            },
            BatchSize::SmallInput,
        );
    });
    let mut dec = Decoder::new();
    let mut out = Decoded::default();
    g.bench_function(format!("decoder/n={N}/m={M}"), |b| {
        b.iter_batched_ref(
            || fresh(&mut rng),
            |(log, sender, receiver)| {
                *sender -= &*receiver;
                dec.decode_into(sender, log, &mut out).unwrap();
                assert_eq!(out.missing().len(), M);
            },
            BatchSize::SmallInput,
        );
    });
    g.bench_function(format!("decoder_wire/n={N}/m={M}"), |b| {
        b.iter_batched_ref(
            || {
                let (log, sender, receiver) = fresh(&mut rng);
                (log, sender, receiver.to_bytes())
            },
            |(log, sender, wire)| {
                let receiver = PowerSumQuack::<u32>::from_bytes(black_box(wire)).unwrap();
                *sender -= &receiver;
                dec.decode_into(sender, log, &mut out).unwrap();
                assert_eq!(out.missing().len(), M);
                receiver
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

fn config() -> Criterion {
    criterion::Criterion::default()
        .with_measurement(CpuTime::from_env("QUACK_BENCH_WALL"))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench
}
criterion_main!(benches);

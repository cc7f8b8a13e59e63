//! Fresh-input decoding for profiling: builds `ROUNDS` pairs of quACKs (n = 25 identifiers,
//! m = 10 lost, t = 10, single `insert`s) up front, then subtracts and decodes each once with
//! `decode_with_log` and once more (rebuilt) with a reused `Decoder`. Under callgrind the
//! per-function counts separate building from decoding:
//!
//! `valgrind --tool=callgrind target/release/examples/decode_fresh 1000`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use quack::{Decoded, Decoder, PowerSumQuack};
use std::hint::black_box;

const N: usize = 25;
const M: usize = 10;

type Input = (Vec<u32>, PowerSumQuack<u32>, PowerSumQuack<u32>);

fn inputs(rounds: usize, seed: u64) -> Vec<Input> {
    let mut s = seed;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    (0..rounds)
        .map(|_| {
            let log: Vec<u32> = (0..N).map(|_| next() as u32).collect();
            let mut lost = [false; N];
            let mut k = 0;
            while k < M {
                let i = (next() % N as u64) as usize;
                if !lost[i] {
                    lost[i] = true;
                    k += 1;
                }
            }
            let mut a = PowerSumQuack::<u32>::new(M);
            let mut b = PowerSumQuack::<u32>::new(M);
            for (&id, &l) in log.iter().zip(&lost) {
                a.insert(id);
                if !l {
                    b.insert(id);
                }
            }
            (log, a, b)
        })
        .collect()
}

#[inline(never)]
fn run_with_log(inputs: &mut [Input]) -> usize {
    let mut found = 0;
    for (log, a, b) in inputs.iter_mut() {
        *a -= &*b;
        found += a.decode_with_log(log).unwrap().missing().len();
    }
    found
}

#[inline(never)]
fn run_decoder(inputs: &mut [Input], dec: &mut Decoder, out: &mut Decoded<u32>) -> usize {
    let mut found = 0;
    for (log, a, b) in inputs.iter_mut() {
        *a -= &*b;
        dec.decode_into(a, log, out).unwrap();
        found += out.missing().len();
    }
    found
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(1000, |a| a.parse().expect("rounds"));
    let mut x = inputs(rounds, 1);
    let t0 = std::time::Instant::now();
    let f1 = black_box(run_with_log(&mut x));
    let e1 = t0.elapsed();
    let mut y = inputs(rounds, 2);
    let mut dec = Decoder::new();
    let mut out = Decoded::default();
    let t1 = std::time::Instant::now();
    let f2 = black_box(run_decoder(&mut y, &mut dec, &mut out));
    let e2 = t1.elapsed();
    assert_eq!(f1, rounds * M);
    assert_eq!(f2, rounds * M);
    println!(
        "decode_with_log {:.3} us, Decoder {:.3} us (per fresh decode, {rounds} rounds)",
        e1.as_secs_f64() * 1e6 / rounds as f64,
        e2.as_secs_f64() * 1e6 / rounds as f64
    );
}

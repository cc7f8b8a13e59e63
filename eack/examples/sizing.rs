//! Regenerates `eack::sizing::SIZING_TABLE` (Packrat (CoNEXT '26) Fig. 4): for each m, the number of coded
//! symbols needed to decode m missing elements with probability p, over many random trials
//! (the quantile at level `eack::sizing::table_level(p)`, slightly above p).
//!
//! `cargo run --release -p eack --example sizing [trials]` (default 100000) prints the table;
//! `cargo run --release -p eack --example sizing -- check [trials]` (default 20000) measures,
//! on trials independent of the table's, how often `symbols_for(m, p)` symbols decode at every
//! m of the table for p = 0.9, 0.99 and 0.999.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

use eack::experiment::NeededDistribution;
use eack::sizing::{SIZING_PROBABILITIES, SIZING_TABLE, table_level};
use eack::symbols_for;

const ROWS: [usize; 19] = [
    1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 160,
];

fn check(trials: usize) {
    println!("# success of symbols_for(m, p) on {trials} independent trials per m");
    println!("#   m   p=0.9 (n)          p=0.99 (n)         p=0.999 (n)");
    let mut worst = 1.0f64;
    for &(m, _) in SIZING_TABLE {
        let d = NeededDistribution::measure(m, trials, 0xc4ec_0001);
        let mut line = format!("{m:5}");
        for p in [0.9, 0.99, 0.999] {
            let n = symbols_for(m, p);
            let s = d.success_at(n);
            if (p - 0.99f64).abs() < 1e-9 {
                worst = worst.min(s);
            }
            write!(line, "   {s:.4} ({n:4})  ").expect("writing to a String");
        }
        println!("{line}");
    }
    println!("# lowest success at p = 0.99: {worst:.4}");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("check") {
        let trials = args
            .next()
            .map_or(20_000, |a| a.parse().expect("trials must be a number"));
        check(trials);
        return;
    }
    let trials: usize = first.map_or(100_000, |a| a.parse().expect("trials must be a number"));
    let mut rows = Vec::new();
    println!("# symbols needed / m  (Fig. 4), {trials} trials per m");
    println!("#   m   mean   p50    p80    p90    p99    p99.9");
    for &m in &ROWS {
        let d = NeededDistribution::measure(m, trials, 0x5eed);
        println!(
            "# {m:4}  {:.3}  {:.3}  {:.3}  {:.3}  {:.3}  {:.3}",
            d.mean_multiplier(),
            d.multiplier_quantile(0.5),
            d.multiplier_quantile(0.8),
            d.multiplier_quantile(0.9),
            d.multiplier_quantile(0.99),
            d.multiplier_quantile(0.999),
        );
        let q: Vec<usize> = SIZING_PROBABILITIES
            .iter()
            .map(|&p| d.quantile(table_level(p)))
            .collect();
        rows.push((m, q));
    }
    println!("pub const SIZING_TABLE: &[(usize, [usize; 6])] = &[");
    for (m, q) in rows {
        let q: Vec<String> = q.iter().map(ToString::to_string).collect();
        println!("    ({m}, [{}]),", q.join(", "));
    }
    println!("];");
}

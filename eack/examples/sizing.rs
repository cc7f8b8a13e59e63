//! Regenerates `eack::sizing::SIZING_TABLE` (seed 002 Fig. 4): for each m, the number of coded
//! symbols needed to decode m missing elements with probability p, over many random trials.
//!
//! `cargo run --release -p eack --example sizing [trials]` (default 100000).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use eack::experiment::NeededDistribution;
use eack::sizing::SIZING_PROBABILITIES;

const ROWS: [usize; 19] = [
    1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 160,
];

fn main() {
    let trials: usize = std::env::args()
        .nth(1)
        .map_or(100_000, |a| a.parse().expect("trials must be a number"));
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
            .map(|&p| d.quantile(p))
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

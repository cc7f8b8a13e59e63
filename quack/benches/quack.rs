//! Criterion benchmarks of the quACK (placeholder until the benches land).
fn main() {}

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use std::hint::black_box;
use std::time::Instant;
#[inline(never)]
pub fn insert_many(s: &mut eack::Sketch, ids: &[u32]) {
    for &id in ids {
        s.insert(id);
    }
}
fn main() {
    let mut rng = eack::experiment::SplitMix::new(1);
    let ids: Vec<u32> = (0..1000).map(|_| rng.next_u64() as u32).collect();
    for t in [40usize, 160] {
        let mut s = eack::Sketch::new(t);
        let mut best = f64::MAX;
        for _ in 0..2000 {
            let st = Instant::now();
            insert_many(&mut s, black_box(&ids));
            best = best.min(st.elapsed().as_nanos() as f64 / 1000.0);
        }
        println!("t={t}: best {best:.1} ns/insert");
    }
}

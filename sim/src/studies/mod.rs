//! Studies the lab cannot run (issue 23, point 5): an access point at scale ([`scale`]),
//! fairness of assisted flows against plain ones on a shared bottleneck ([`fairness`]), and large
//! loss × delay × bandwidth sweeps with heat maps of the gain ([`sweep`]).
//!
//! Each study is a function of its parameters and a seed (the CPU figures of [`scale`] aside,
//! which are measured) and runs behind `sidekick-sim study <name>`.

pub mod alloc;
pub mod cli;
pub mod fairness;
pub mod heatmap;
pub mod scale;
pub mod sweep;

use std::time::Duration;

/// Jain's fairness index of `x`: `(Σx)² / (n·Σx²)`, 1 when all shares are equal, `1/n` when one
/// takes everything; `None` for no samples or all zero.
///
/// ```
/// use sidekick_sim::studies::jain;
/// assert_eq!(jain(&[5.0, 5.0]), Some(1.0));
/// assert_eq!(jain(&[1.0, 0.0]), Some(0.5));
/// ```
pub fn jain(x: &[f64]) -> Option<f64> {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && q > 0.0).then(|| s * s / (x.len() as f64 * q))
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): time the machine's other load
/// spends is not counted, unlike wall-clock time.
pub fn thread_cpu_time() -> Duration {
    alloc::thread_cpu_time()
}

/// The median of `v` (`None` when empty).
pub fn median(v: &[f64]) -> Option<f64> {
    sidekick_lab::stats::summarize(v).map(|s| s.median)
}

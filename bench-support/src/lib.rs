//! What the workspace's criterion benchmarks share (a dev-dependency of `quack` and `eack`).
//!
//! Benchmarks measure the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall-clock time: the development machine is shared by several builds at once, and time spent
//! descheduled is not the code's cost. Each benchmark names an environment variable that switches
//! it back to wall-clock time.
//!
//! ```
//! use std::time::Duration;
//! use sidekick_bench_support::CpuTime;
//!
//! let criterion = criterion::Criterion::default()
//!     .with_measurement(CpuTime::from_env("MY_BENCH_WALL"))
//!     .measurement_time(Duration::from_secs(1));
//! # let _ = criterion;
//! ```
// The thread CPU clock needs `libc::clock_gettime`, an FFI call (see `thread_cpu_time`).
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// The calling thread's CPU time.
///
/// # Panics
/// If the kernel has no thread CPU clock (Linux always has one).
#[must_use]
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Criterion measurement: thread CPU time, or wall time when the benchmark's variable is set, in
/// the same units and formatting as criterion's wall-clock measurement.
#[derive(Debug)]
pub struct CpuTime {
    wall_since: Option<Instant>,
}

impl CpuTime {
    /// Thread CPU time, or wall time when the environment variable `wall_var` is set.
    #[must_use]
    pub fn from_env(wall_var: &str) -> Self {
        CpuTime {
            wall_since: std::env::var_os(wall_var).map(|_| Instant::now()),
        }
    }

    fn now(&self) -> Duration {
        match self.wall_since {
            Some(start) => start.elapsed(),
            None => thread_cpu_time(),
        }
    }
}

impl Measurement for CpuTime {
    type Intermediate = Duration;
    type Value = Duration;
    fn start(&self) -> Duration {
        self.now()
    }
    fn end(&self, i: Duration) -> Duration {
        self.now().saturating_sub(i)
    }
    fn add(&self, v1: &Duration, v2: &Duration) -> Duration {
        *v1 + *v2
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WallTime.formatter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_with_work_and_wall_time_with_time() {
        let m = CpuTime::from_env("SIDEKICK_BENCH_SUPPORT_UNSET_VARIABLE");
        let start = m.start();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(m.end(start) > Duration::ZERO, "{x}");
        // Sleeping costs no CPU time.
        let start = m.start();
        std::thread::sleep(Duration::from_millis(30));
        assert!(m.end(start) < Duration::from_millis(20));
    }
}

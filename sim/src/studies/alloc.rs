//! The two FFI-level measurements of the studies: a counting global allocator (live heap bytes)
//! and the thread's CPU clock.
//!
//! The `sidekick-sim` binary installs [`Counting`] as its global allocator, so
//! [`live_bytes`] is the heap the process holds; a binary without it reads 0 (see
//! [`installed`]).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static USED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Bytes allocated minus bytes freed by this thread (no destructor, so usable from the
    /// allocator at any time).
    static THREAD_NET: Cell<i64> = const { Cell::new(0) };
}

fn thread_add(n: i64) {
    let _ = THREAD_NET.try_with(|c| c.set(c.get() + n));
}

/// The system allocator, counting live bytes.
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: sidekick_sim::studies::alloc::Counting = sidekick_sim::studies::alloc::Counting;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

fn add(n: usize) {
    let live = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(live, Ordering::Relaxed);
    thread_add(n as i64);
}

fn sub(n: usize) {
    LIVE.fetch_sub(n, Ordering::Relaxed);
    thread_add(-(n as i64));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are atomics
// and never influence what is allocated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            USED.store(true, Ordering::Relaxed);
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            USED.store(true, Ordering::Relaxed);
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (hence from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub(layout.size());
            add(new_size);
        }
        p
    }
}

/// Heap bytes live now (0 when [`Counting`] is not the global allocator).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Bytes this thread allocated minus those it freed, since it started (0 when [`Counting`] is
/// not the global allocator): unlike [`live_bytes`], not disturbed by other threads.
pub fn thread_net_bytes() -> i64 {
    THREAD_NET.try_with(Cell::get).unwrap_or(0)
}

/// The most heap bytes live at once since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak measurement from the live bytes now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Whether [`Counting`] is the process's global allocator (it has counted an allocation).
pub fn installed() -> bool {
    // Allocate once so that an installed allocator has certainly counted something.
    drop(std::hint::black_box(Box::new(0u64)));
    USED.load(Ordering::Relaxed)
}

/// The calling thread's CPU time.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

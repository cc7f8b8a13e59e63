//! What every entry point of the C API shares: the status codes, the panic and null guards, the
//! conversion of caller-supplied pointers into slices, and the per-handle clock.

// The C API is a foreign-function boundary: it must dereference the raw pointers C hands it.
// Every unsafe block below states the caller contract it relies on (documented in the header).
#![allow(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// Result of every C API call.
///
/// Zero is success, positive values are non-error outcomes ("nothing to poll", partial
/// results), negative values are errors. A call that returns an error changed nothing unless its
/// documentation says otherwise.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkStatus {
    /// Success.
    Ok = 0,
    /// Nothing to return: no event, no datagram, no timer, value not known yet.
    Empty = 1,
    /// Decoding succeeded but some missing log entries collide with others in the field and
    /// cannot be told apart (Sidekick (NSDI '24) §3: reported, never guessed); the determinate ones were
    /// written.
    Indeterminate = 2,
    /// A required pointer was null.
    NullPointer = -1,
    /// An argument is out of range (threshold too large, non-finite factor, bad enum value…).
    InvalidArgument = -2,
    /// The output buffer is too small; the needed size was written to the length output and
    /// the item stays queued.
    BufferTooSmall = -3,
    /// The bytes are not a valid quACK (or not of 32-bit identifiers).
    Malformed = -4,
    /// The datagram is too short to carry an identifier at the configured offset.
    NoIdentifier = -5,
    /// More identifiers are missing than the threshold can decode.
    TooManyMissing = -6,
    /// The quACK difference is inconsistent (power sums do not fit the count, or the log does
    /// not explain the missing identifiers).
    Inconsistent = -7,
    /// The quACK's threshold differs from the configured one.
    ThresholdMismatch = -8,
    /// The quACK is older than one already processed (ignored).
    Stale = -9,
    /// The quACK counts more packets than were sent.
    NeverSent = -10,
    /// The quACK's last element is not a logged identifier.
    UnknownLast = -11,
    /// The sidekick protocol refused the call in its current state (e.g. started twice).
    Protocol = -12,
    /// A Rust panic was caught at the boundary (a bug); the handle is poisoned.
    Panic = -100,
    /// The handle was poisoned by an earlier panic; free it.
    Poisoned = -101,
}

/// Handles that can be poisoned by a caught panic.
pub(crate) trait Handle {
    /// The poison flag.
    fn poisoned(&mut self) -> &mut bool;
}

/// Runs `f` and turns a panic into [`SkStatus::Panic`] (for calls without a handle).
pub(crate) fn guard(f: impl FnOnce() -> SkStatus) -> SkStatus {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(SkStatus::Panic)
}

/// Runs `f` on the handle behind `ptr`: null check, poison check, panic guard.
///
/// # Safety
/// `ptr` is null or points to a live handle created by the matching `*_new` function and not
/// used by another thread during the call.
pub(crate) unsafe fn with_handle<H: Handle>(
    ptr: *mut H,
    f: impl FnOnce(&mut H) -> SkStatus,
) -> SkStatus {
    // SAFETY: the caller guarantees `ptr` is null or a live, exclusively used handle.
    let Some(h) = (unsafe { ptr.as_mut() }) else {
        return SkStatus::NullPointer;
    };
    if *h.poisoned() {
        return SkStatus::Poisoned;
    }
    if let Ok(s) = catch_unwind(AssertUnwindSafe(|| f(&mut *h))) {
        s
    } else {
        // The engine may be half-updated: refuse further use.
        *h.poisoned() = true;
        SkStatus::Panic
    }
}

/// Moves `value` to the heap and returns the pointer C owns.
pub(crate) fn into_raw<H>(value: H) -> *mut H {
    Box::into_raw(Box::new(value))
}

/// Frees a handle created by [`into_raw`]; null is ignored.
///
/// # Safety
/// `ptr` is null or a handle from [`into_raw`] of the same type, not freed before and not used
/// afterwards.
pub(crate) unsafe fn free_raw<H>(ptr: *mut H) {
    if !ptr.is_null() {
        // A panic in a destructor must not cross the boundary either.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller guarantees `ptr` came from `Box::into_raw` and is freed once.
            drop(unsafe { Box::from_raw(ptr) });
        }));
    }
}

/// Borrows `len` elements at `ptr`; a null pointer is accepted for `len == 0`.
///
/// # Safety
/// If non-null, `ptr` is valid for reads of `len` elements for the returned lifetime.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T], SkStatus> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(SkStatus::NullPointer);
    }
    if len
        .checked_mul(size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
        || !ptr.is_aligned()
    {
        return Err(SkStatus::InvalidArgument);
    }
    // SAFETY: non-null, aligned, size checked, validity for `len` reads guaranteed by the caller.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a writable buffer of `cap` elements at `ptr` (null allowed for `cap == 0`).
///
/// # Safety
/// If non-null, `ptr` is valid for writes of `cap` elements and not aliased during the call.
pub(crate) unsafe fn slice_mut<'a, T>(ptr: *mut T, cap: usize) -> Result<&'a mut [T], SkStatus> {
    if cap == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(SkStatus::NullPointer);
    }
    if cap
        .checked_mul(size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
        || !ptr.is_aligned()
    {
        return Err(SkStatus::InvalidArgument);
    }
    // SAFETY: non-null, aligned, size checked; the caller guarantees validity and exclusivity.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, cap) })
}

/// Writes `value` through an output pointer that must not be null.
///
/// # Safety
/// If non-null, `ptr` is valid for a write of `T` (it need not be initialised).
pub(crate) unsafe fn write_out<T>(ptr: *mut T, value: T) -> Result<(), SkStatus> {
    if ptr.is_null() {
        return Err(SkStatus::NullPointer);
    }
    if !ptr.is_aligned() {
        return Err(SkStatus::InvalidArgument);
    }
    // SAFETY: non-null and aligned; validity guaranteed by the caller. `write` does not read or
    // drop the old (possibly uninitialised) value.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Writes `value` through an optional output pointer (null: nothing written).
///
/// # Safety
/// As [`write_out`].
pub(crate) unsafe fn write_opt<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() && ptr.is_aligned() {
        // SAFETY: non-null and aligned; validity guaranteed by the caller.
        unsafe { ptr.write(value) };
    }
}

/// Turns `Result<(), SkStatus>` bodies into a status.
pub(crate) fn status(r: Result<SkStatus, SkStatus>) -> SkStatus {
    r.unwrap_or_else(|e| e)
}

/// Copies `src` into `buf` if it fits. Returns the status and writes `src.len()` to `out_len`
/// either way (the size needed when the buffer is too small).
///
/// # Safety
/// `buf` is valid for `cap` byte writes (or null with `cap == 0`); `out_len` is valid for a
/// write.
pub(crate) unsafe fn copy_out(
    src: &[u8],
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> Result<SkStatus, SkStatus> {
    // SAFETY: forwarded caller contract.
    unsafe { write_out(out_len, src.len())? };
    if src.len() > cap {
        return Ok(SkStatus::BufferTooSmall);
    }
    // SAFETY: forwarded caller contract; `src.len() <= cap`.
    let out = unsafe { slice_mut(buf, src.len())? };
    out.copy_from_slice(src);
    Ok(SkStatus::Ok)
}

/// A packet number from C: negative means "not known".
pub(crate) fn packet_number(pn: i64) -> Option<u64> {
    u64::try_from(pn).ok()
}

/// A packet number for C: `-1` when not known.
pub(crate) fn packet_number_to_c(pn: Option<u64>) -> i64 {
    pn.and_then(|p| i64::try_from(p).ok()).unwrap_or(-1)
}

/// Maps the caller's monotonic microseconds onto [`Instant`]s, per handle (no global state).
///
/// The first time seen becomes the handle's epoch, anchored at an `Instant` taken when the
/// handle was created; the anchor is only a reference point, the engines never read the clock.
/// Times earlier than the epoch are clamped to it (the caller's clock must be monotonic).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    anchor: Instant,
    base_us: Option<u64>,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            anchor: Instant::now(),
            base_us: None,
        }
    }

    /// The instant of `now_us`.
    pub(crate) fn at(&mut self, now_us: u64) -> Result<Instant, SkStatus> {
        let base = *self.base_us.get_or_insert(now_us);
        self.anchor
            .checked_add(Duration::from_micros(now_us.saturating_sub(base)))
            .ok_or(SkStatus::InvalidArgument)
    }

    /// `t` in the caller's microseconds (truncated: for past events such as send times).
    pub(crate) fn to_us(self, t: Instant) -> u64 {
        let since = t.saturating_duration_since(self.anchor).as_micros();
        self.base_us
            .unwrap_or(0)
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }

    /// `t` in the caller's microseconds, rounded up: a deadline, so that calling back at the
    /// returned time finds the timer expired.
    pub(crate) fn deadline_us(self, t: Instant) -> u64 {
        let since = t.saturating_duration_since(self.anchor);
        let up = u64::from(!since.subsec_nanos().is_multiple_of(1000));
        self.to_us(t).saturating_add(up)
    }
}

/// Microseconds as a [`Duration`].
pub(crate) fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// A [`Duration`] in microseconds (saturating).
pub(crate) fn to_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct H {
        poisoned: bool,
        calls: u32,
    }

    impl Handle for H {
        fn poisoned(&mut self) -> &mut bool {
            &mut self.poisoned
        }
    }

    #[test]
    fn a_panic_is_caught_and_poisons_the_handle() {
        let mut h = H {
            poisoned: false,
            calls: 0,
        };
        let p: *mut H = &raw mut h;
        // SAFETY: `p` points to a live local.
        let s = unsafe {
            with_handle(p, |h| {
                h.calls += 1;
                panic!("engine bug")
            })
        };
        assert_eq!(s, SkStatus::Panic);
        // SAFETY: as above.
        let s = unsafe {
            with_handle(p, |h| {
                h.calls += 1;
                SkStatus::Ok
            })
        };
        assert_eq!(s, SkStatus::Poisoned);
        assert_eq!(h.calls, 1, "a poisoned handle runs nothing");
        assert_eq!(guard(|| panic!("no handle")), SkStatus::Panic);
    }

    #[test]
    fn null_handles_and_buffers_are_refused() {
        // SAFETY: null is allowed by the contract.
        let s = unsafe { with_handle(std::ptr::null_mut::<H>(), |_| SkStatus::Ok) };
        assert_eq!(s, SkStatus::NullPointer);
        // SAFETY: null with a non-zero length is refused before any read.
        assert_eq!(
            unsafe { slice::<u8>(std::ptr::null(), 3) },
            Err(SkStatus::NullPointer)
        );
        // SAFETY: zero length never reads.
        assert_eq!(unsafe { slice::<u8>(std::ptr::null(), 0) }, Ok(&[][..]));
        let mut len = 0usize;
        let mut buf = [0u8; 2];
        // SAFETY: valid buffer and length pointer.
        let r = unsafe { copy_out(&[1, 2, 3], buf.as_mut_ptr(), 2, &raw mut len) };
        assert_eq!((r, len), (Ok(SkStatus::BufferTooSmall), 3));
        assert_eq!(buf, [0, 0], "nothing written when it does not fit");
    }

    #[test]
    fn clock_maps_microseconds_from_the_first_call() {
        let mut c = Clock::new();
        let t0 = c.at(5_000_000).unwrap();
        let t1 = c.at(5_250_000).unwrap();
        assert_eq!(t1 - t0, Duration::from_millis(250));
        assert_eq!(c.to_us(t1), 5_250_000);
        let later = t1 + Duration::from_nanos(1);
        assert_eq!(
            (c.to_us(later), c.deadline_us(later)),
            (5_250_000, 5_250_001)
        );
        assert_eq!(c.deadline_us(t1), 5_250_000);
        assert_eq!(c.at(1).unwrap(), t0, "earlier times clamp to the epoch");
        assert!(c.at(u64::MAX).is_ok());
    }
}

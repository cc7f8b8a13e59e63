//! C API of the power-sum quACK over 32-bit identifiers (Sidekick (NSDI '24) §3).

// FFI boundary: raw pointers from C are checked and converted in `ffi`; every unsafe block here
// forwards the caller contract stated in the function's `# Safety` section.
#![allow(unsafe_code)]

use quack::{DecodeError, MAX_THRESHOLD, PowerSumQuack};

use crate::ffi::{
    Handle, SkStatus, copy_out, free_raw, guard, into_raw, slice, slice_mut, status, with_handle,
    write_out,
};

/// A power-sum quACK of 32-bit identifiers (opaque).
pub struct SkQuack {
    q: PowerSumQuack<u32>,
    poisoned: bool,
}

impl Handle for SkQuack {
    fn poisoned(&mut self) -> &mut bool {
        &mut self.poisoned
    }
}

/// Largest threshold `sk_quack_new` accepts.
pub const SK_QUACK_MAX_THRESHOLD: usize = 4096;
const _: () = assert!(SK_QUACK_MAX_THRESHOLD == MAX_THRESHOLD);

/// Creates an empty quACK with `threshold` power sums (at most `SK_QUACK_MAX_THRESHOLD`).
/// Free it with `sk_quack_free`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_quack_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_new(threshold: usize, out: *mut *mut SkQuack) -> SkStatus {
    guard(|| {
        if out.is_null() {
            return SkStatus::NullPointer;
        }
        let Ok(q) = PowerSumQuack::<u32>::try_new(threshold) else {
            return SkStatus::InvalidArgument;
        };
        let h = into_raw(SkQuack { q, poisoned: false });
        // SAFETY: `out` is non-null and valid for writes (caller contract).
        status(unsafe { write_out(out, h) }.map(|()| SkStatus::Ok))
    })
}

/// Frees a quACK (null is ignored).
///
/// Ownership: takes the handle back and releases it; it must not be used again.
/// Thread safety: not concurrently with any other call on the same handle.
///
/// # Safety
/// `q` is null or a quACK from this API, not freed before and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_free(q: *mut SkQuack) {
    // SAFETY: forwarded caller contract.
    unsafe { free_raw(q) }
}

/// Inserts an identifier (multiset semantics: an identical resend counts twice).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_insert(q: *mut SkQuack, id: u32) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            h.q.insert(id);
            SkStatus::Ok
        })
    }
}

/// Inserts `len` identifiers from `ids` in order.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` as in `sk_quack_insert`; `ids` is valid for `len` reads (may be null if `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_insert_batch(
    q: *mut SkQuack,
    ids: *const u32,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            // SAFETY: forwarded caller contract on `ids`.
            match slice(ids, len) {
                Ok(ids) => {
                    h.q.insert_batch(ids);
                    SkStatus::Ok
                }
                Err(e) => e,
            }
        })
    }
}

/// Removes one occurrence of an identifier (the inverse of `sk_quack_insert`).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_remove(q: *mut SkQuack, id: u32) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            h.q.remove(id);
            SkStatus::Ok
        })
    }
}

/// The number of identifiers (insertions minus removals, wrapping at 2^32).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK; `out_count` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_count(q: *mut SkQuack, out_count: *mut u32) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            // SAFETY: forwarded caller contract on `out_count`.
            status(write_out(out_count, h.q.count()).map(|()| SkStatus::Ok))
        })
    }
}

/// The threshold `t`.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK; `out_threshold` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_threshold(
    q: *mut SkQuack,
    out_threshold: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            // SAFETY: forwarded caller contract on `out_threshold`.
            status(write_out(out_threshold, h.q.threshold()).map(|()| SkStatus::Ok))
        })
    }
}

/// The identifier inserted last; `SK_STATUS_EMPTY` if there is none (cleared by removal of it
/// and by subtraction).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK; `out_id` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_last_value(q: *mut SkQuack, out_id: *mut u32) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| match h.q.last_value() {
            // SAFETY: forwarded caller contract on `out_id`.
            Some(v) => status(write_out(out_id, v).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// The length of the wire form (`8 + 4 + 4·t` bytes).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK; `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_encoded_len(q: *mut SkQuack, out_len: *mut usize) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            // SAFETY: forwarded caller contract on `out_len`.
            status(write_out(out_len, h.q.encoded_len()).map(|()| SkStatus::Ok))
        })
    }
}

/// Serialises the quACK into `buf` (the wire form of `quack::wire`). Writes the length to
/// `out_len`; if `cap` is too small returns `SK_STATUS_BUFFER_TOO_SMALL` with the needed length.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `q` is null or a live quACK; `buf` is valid for `cap` byte writes (null if `cap` is 0);
/// `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_serialize(
    q: *mut SkQuack,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            let bytes = h.q.to_bytes();
            // SAFETY: forwarded caller contract on `buf`, `cap`, `out_len`.
            status(copy_out(&bytes, buf, cap, out_len))
        })
    }
}

/// Parses a serialised quACK of 32-bit identifiers into a new handle. Malformed bytes (any
/// width other than 32 bits, a bad length, non-canonical sums…) give `SK_STATUS_MALFORMED`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_quack_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `bytes` is valid for `len` reads; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_parse(
    bytes: *const u8,
    len: usize,
    out: *mut *mut SkQuack,
) -> SkStatus {
    guard(|| {
        if out.is_null() {
            return SkStatus::NullPointer;
        }
        // SAFETY: forwarded caller contract on `bytes`.
        let bytes = match unsafe { slice(bytes, len) } {
            Ok(b) => b,
            Err(e) => return e,
        };
        let Ok(q) = PowerSumQuack::<u32>::from_bytes(bytes) else {
            return SkStatus::Malformed;
        };
        let h = into_raw(SkQuack { q, poisoned: false });
        // SAFETY: `out` is non-null and valid for writes (caller contract).
        status(unsafe { write_out(out, h) }.map(|()| SkStatus::Ok))
    })
}

/// `q -= other`: the multiset difference (power sums and counts). With different thresholds
/// the result keeps the smaller one. `q` and `other` may be the same handle.
///
/// Ownership: both handles stay the caller's; `other` is only read. Thread safety: not
/// concurrently with another call on either handle (other handles are independent).
///
/// # Safety
/// `q` and `other` are null or live quACKs not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_subtract(q: *mut SkQuack, other: *const SkQuack) -> SkStatus {
    if other.is_null() {
        return SkStatus::NullPointer;
    }
    let same = std::ptr::eq(q.cast_const(), other);
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(q, |h| {
            if same {
                let copy = h.q.clone();
                h.q -= &copy;
            } else {
                // SAFETY: `other` is non-null, live (caller contract) and distinct from `q`, so
                // the shared borrow does not alias the exclusive one.
                let o = &*other;
                if o.poisoned {
                    return SkStatus::Poisoned;
                }
                h.q -= &o.q;
            }
            SkStatus::Ok
        })
    }
}

/// Decodes `diff` (a difference *sender − receiver*) against the sender's log of `log_len`
/// identifiers: which log entries are missing.
///
/// The missing entries, in log order, go to `out_indices` (positions in `log`) and/or `out_ids`
/// (their identifiers); either may be null. `out_len` receives their number. At most `t`
/// entries are missing, so `cap = t` always suffices; with a smaller `cap`,
/// `SK_STATUS_BUFFER_TOO_SMALL` is returned with the needed count.
///
/// Returns `SK_STATUS_OK`, or `SK_STATUS_INDETERMINATE` when some missing entries collide with
/// other log entries (identical resends) and cannot be attributed: those are not written.
/// Errors: `SK_STATUS_TOO_MANY_MISSING` (more than `t`), `SK_STATUS_INCONSISTENT`.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `diff` is null or a live quACK; `log` is valid for `log_len` reads; `out_indices` and
/// `out_ids` are null or valid for `cap` writes; `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_quack_decode(
    diff: *mut SkQuack,
    log: *const u32,
    log_len: usize,
    out_indices: *mut usize,
    out_ids: *mut u32,
    cap: usize,
    out_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(diff, |h| {
            status((|| {
                // SAFETY: forwarded caller contract on `log`.
                let log = slice(log, log_len)?;
                if out_len.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                let decoded = h.q.decode_with_log(log).map_err(|e| match e {
                    DecodeError::TooManyMissing { .. } => SkStatus::TooManyMissing,
                    _ => SkStatus::Inconsistent,
                })?;
                let missing = decoded.missing();
                // SAFETY: `out_len` is non-null; validity is the caller's contract.
                write_out(out_len, missing.len())?;
                if missing.len() > cap {
                    return Ok(SkStatus::BufferTooSmall);
                }
                if !out_indices.is_null() {
                    // SAFETY: non-null, valid for `cap >= missing.len()` writes (contract).
                    let idx = slice_mut(out_indices, missing.len())?;
                    for (o, m) in idx.iter_mut().zip(missing) {
                        *o = m.index;
                    }
                }
                if !out_ids.is_null() {
                    // SAFETY: as above.
                    let ids = slice_mut(out_ids, missing.len())?;
                    for (o, m) in ids.iter_mut().zip(missing) {
                        *o = m.id;
                    }
                }
                Ok(if decoded.is_determinate() {
                    SkStatus::Ok
                } else {
                    SkStatus::Indeterminate
                })
            })())
        })
    }
}

/// Reads a 32-bit identifier (little-endian) at `offset` of a UDP payload; a negative offset
/// counts from the end (`-4`: the last 4 bytes, the QUIC default). `SK_STATUS_NO_IDENTIFIER` if
/// the payload is too short.
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
///
/// # Safety
/// `payload` is valid for `len` reads; `out_id` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_identifier_at(
    payload: *const u8,
    len: usize,
    offset: i32,
    out_id: *mut u32,
) -> SkStatus {
    guard(|| {
        status((|| {
            // SAFETY: forwarded caller contract on `payload`.
            let p = unsafe { slice(payload, len)? };
            let id = quack::id_at_offset::<u32>(p, offset as isize)
                .map_err(|_| SkStatus::NoIdentifier)?;
            // SAFETY: forwarded caller contract on `out_id`.
            unsafe { write_out(out_id, id)? };
            Ok(SkStatus::Ok)
        })())
    })
}

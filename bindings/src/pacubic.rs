//! C API of PACUBIC, the path-aware CUBIC congestion controller (Sidekick (NSDI '24) §4.3.2, App. A).

// FFI boundary: raw pointers from C are checked and converted in `ffi`; every unsafe block here
// forwards the caller contract stated in the function's `# Safety` section.
#![allow(unsafe_code)]

use sidekick_sdk::pacubic::{CongestionSource, Pacubic, PacubicConfig};

use crate::ffi::{
    Clock, Handle, SkStatus, free_raw, guard, into_raw, micros, status, with_handle, write_opt,
    write_out,
};

/// Where a congestion event was detected (pass as `uint32_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkCongestionSource {
    /// End-to-end loss (the transport's ACKs or timers): CUBIC's β* = 0.7, C* = 0.4.
    EndToEnd = 0,
    /// Near-segment loss from a quACK: β = 1 − r(1 − β*), C = C*/r³.
    Quack = 1,
}

/// PACUBIC parameters (windows in bytes); fill with `sk_pacubic_config_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkPacubicConfig {
    /// Maximum segment size.
    pub mss: u64,
    /// Initial window.
    pub initial_window: u64,
    /// Minimum window.
    pub minimum_window: u64,
    /// β* (end-to-end multiplicative decrease), in (0, 1).
    pub beta_star: f64,
    /// C* (end-to-end cubic constant), > 0.
    pub c_star: f64,
    /// Non-zero: RFC 9438 §4.7 fast convergence.
    pub fast_convergence: u8,
}

impl SkPacubicConfig {
    fn to_rust(self) -> Result<PacubicConfig, SkStatus> {
        let beta_ok = self.beta_star.is_finite() && self.beta_star > 0.0 && self.beta_star < 1.0;
        let c_ok = self.c_star.is_finite() && self.c_star > 0.0;
        if self.mss == 0 || !beta_ok || !c_ok {
            return Err(SkStatus::InvalidArgument);
        }
        Ok(PacubicConfig {
            mss: self.mss,
            initial_window: self.initial_window,
            minimum_window: self.minimum_window,
            beta_star: self.beta_star,
            c_star: self.c_star,
            fast_convergence: self.fast_convergence != 0,
        })
    }
}

/// PACUBIC counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkPacubicStats {
    /// Reductions after end-to-end losses.
    pub e2e_events: u64,
    /// Reductions after quACK-detected losses.
    pub quack_events: u64,
    /// Events ignored inside a recovery period.
    pub events_in_recovery: u64,
}

/// The PACUBIC controller (opaque).
pub struct SkPacubic {
    cc: Pacubic,
    clock: Clock,
    poisoned: bool,
}

impl Handle for SkPacubic {
    fn poisoned(&mut self) -> &mut bool {
        &mut self.poisoned
    }
}

/// Fills `out` with the defaults (MSS 1200, initial window 10 MSS, minimum 2 MSS, β* 0.7,
/// C* 0.4, fast convergence on).
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_config_default(out: *mut SkPacubicConfig) -> SkStatus {
    guard(|| {
        let d = PacubicConfig::default();
        let c = SkPacubicConfig {
            mss: d.mss,
            initial_window: d.initial_window,
            minimum_window: d.minimum_window,
            beta_star: d.beta_star,
            c_star: d.c_star,
            fast_convergence: u8::from(d.fast_convergence),
        };
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, c) }.map(|()| SkStatus::Ok))
    })
}

/// Creates a controller in slow start (`config` null: defaults). Free it with
/// `sk_pacubic_free`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_pacubic_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `config` is null or valid for a read; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_new(
    config: *const SkPacubicConfig,
    out: *mut *mut SkPacubic,
) -> SkStatus {
    guard(|| {
        status((|| {
            if out.is_null() {
                return Err(SkStatus::NullPointer);
            }
            // SAFETY: `config` is null or valid for a read (caller contract).
            let c = match unsafe { config.as_ref() } {
                Some(c) => c.to_rust()?,
                None => PacubicConfig::default(),
            };
            let h = into_raw(SkPacubic {
                cc: Pacubic::new(c),
                clock: Clock::new(),
                poisoned: false,
            });
            // SAFETY: forwarded caller contract.
            unsafe { write_out(out, h)? };
            Ok(SkStatus::Ok)
        })())
    })
}

/// Frees a controller (null is ignored).
///
/// Ownership: takes the handle back and releases it; it must not be used again.
/// Thread safety: not concurrently with any other call on the same handle.
///
/// # Safety
/// `cc` is null or a controller from this API, not freed before and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_free(cc: *mut SkPacubic) {
    // SAFETY: forwarded caller contract.
    unsafe { free_raw(cc) }
}

/// `bytes` newly acknowledged end to end at `now_us`; `sent_us` is the send time of the newest
/// acknowledged packet, `rtt_us` the smoothed end-to-end RTT.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_on_ack(
    cc: *mut SkPacubic,
    now_us: u64,
    sent_us: u64,
    bytes: u64,
    rtt_us: u64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status((|| {
                let sent = h.clock.at(sent_us)?;
                let now = h.clock.at(now_us)?;
                h.cc.on_ack(now, sent, bytes, micros(rtt_us));
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// A congestion event at `now_us` for a packet sent at `sent_us`, detected end to end
/// (`source` = `SK_CONGESTION_SOURCE_END_TO_END`) or from a quACK (`SK_CONGESTION_SOURCE_QUACK`).
/// `r` (near RTT / end-to-end RTT) replaces the stored ratio when it is finite and > 0 (it is
/// clamped to [0.01, 1]); pass 0 to keep the one set by `sk_pacubic_set_rtt_ratio`.
/// `out_reduced` (optional) tells whether the window shrank (one reduction per recovery period).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller not used concurrently; `out_reduced` is null or valid for
/// a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_on_loss(
    cc: *mut SkPacubic,
    now_us: u64,
    sent_us: u64,
    source: u32,
    r: f64,
    out_reduced: *mut bool,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status((|| {
                let source = match source {
                    0 => CongestionSource::EndToEnd,
                    1 => CongestionSource::Quack,
                    _ => return Err(SkStatus::InvalidArgument),
                };
                let sent = h.clock.at(sent_us)?;
                let now = h.clock.at(now_us)?;
                if r.is_finite() && r > 0.0 {
                    h.cc.set_rtt_ratio(r);
                }
                let reduced = h.cc.on_congestion_event(now, sent, source);
                write_opt(out_reduced, reduced);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Sets PACUBIC's `r` for later quACK-detected events (clamped to [0.01, 1]; non-finite or
/// non-positive values are refused).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_set_rtt_ratio(cc: *mut SkPacubic, r: f64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            if !(r.is_finite() && r > 0.0) {
                return SkStatus::InvalidArgument;
            }
            h.cc.set_rtt_ratio(r);
            SkStatus::Ok
        })
    }
}

/// Persistent congestion (RFC 9002 §7.6): the window collapses to the minimum.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_on_persistent_congestion(
    cc: *mut SkPacubic,
    now_us: u64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.cc.on_persistent_congestion(now);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// A new maximum datagram size (0 is refused).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_on_mtu_update(cc: *mut SkPacubic, mss: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            if mss == 0 {
                return SkStatus::InvalidArgument;
            }
            h.cc.on_mtu_update(mss);
            SkStatus::Ok
        })
    }
}

/// The congestion window in bytes.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller; `out_cwnd` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_cwnd(cc: *mut SkPacubic, out_cwnd: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status(write_out(out_cwnd, h.cc.window()).map(|()| SkStatus::Ok))
        })
    }
}

/// The slow-start threshold in bytes (`UINT64_MAX` before the first event).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller; `out_ssthresh` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_ssthresh(
    cc: *mut SkPacubic,
    out_ssthresh: *mut u64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status(write_out(out_ssthresh, h.cc.ssthresh()).map(|()| SkStatus::Ok))
        })
    }
}

/// Whether the controller is in slow start.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_in_slow_start(cc: *mut SkPacubic, out: *mut bool) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            status(write_out(out, h.cc.in_slow_start()).map(|()| SkStatus::Ok))
        })
    }
}

/// Counters.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `cc` is null or a live controller; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_pacubic_stats(
    cc: *mut SkPacubic,
    out: *mut SkPacubicStats,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(cc, |h| {
            let s = h.cc.stats();
            let stats = SkPacubicStats {
                e2e_events: s.e2e_events,
                quack_events: s.quack_events,
                events_in_recovery: s.events_in_recovery,
            };
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

//! C API of the sidekick client session (`SidekickClient`): discovery on the base socket, the
//! sidekick connection to the proxy, Robin and Packrat on the base datagrams, timers and
//! fallback. This is what a C QUIC client calls from its UDP send and receive paths.

// FFI boundary: raw pointers from C (buffers, socket addresses) are checked and converted here
// and in `ffi`; every unsafe block forwards the caller contract stated in its `# Safety` section.
#![allow(unsafe_code)]

use sidekick_sdk::lens::DatagramDirection;
use sidekick_sdk::robin::LossRule;
use sidekick_sdk::session::{
    Engine, FallbackCause, SdkEvent, SidekickClient, SidekickConfig, Transmit,
};

use crate::client_types::{
    SkClientEvent, SkClientEventKind, SkClientStats, SkDestination, SkFallbackCause,
    SkSessionConfig, fallback_to_c,
};
use crate::ffi::{
    Clock, Handle, SkStatus, copy_out, free_raw, guard, into_raw, micros, packet_number_to_c,
    slice, status, with_handle, write_opt, write_out,
};
use crate::robin::SkLossRule;
use crate::sockaddr::{sockaddr_from_rust, sockaddr_to_rust};

/// The sidekick client session (opaque).
pub struct SkClient {
    client: SidekickClient,
    clock: Clock,
    /// A transmit whose buffer was too small, returned first next time.
    pending_transmit: Option<Transmit>,
    /// A deliverable datagram whose buffer was too small.
    pending_deliver: Option<Vec<u8>>,
    poisoned: bool,
}

impl Handle for SkClient {
    fn poisoned(&mut self) -> &mut bool {
        &mut self.poisoned
    }
}

/// Creates a client session for one base connection (not started). `SK_STATUS_INVALID_ARGUMENT`
/// if the configuration breaks the protocol's constraints. Free it with `sk_client_free`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_client_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `config` is valid for a read; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_new(
    config: *const SkSessionConfig,
    out: *mut *mut SkClient,
) -> SkStatus {
    guard(|| {
        status((|| {
            if out.is_null() {
                return Err(SkStatus::NullPointer);
            }
            // SAFETY: `config` is null or valid for a read (caller contract).
            let c = unsafe { config.as_ref() }.ok_or(SkStatus::NullPointer)?;
            let inflight = c.eack_inflight_allowance as usize;
            let session = c.to_rust()?;
            let mut config = SidekickConfig::with_session(session);
            config.packrat.inflight_allowance = inflight;
            let h = into_raw(SkClient {
                client: SidekickClient::new(config),
                clock: Clock::new(),
                pending_transmit: None,
                pending_deliver: None,
                poisoned: false,
            });
            // SAFETY: forwarded caller contract.
            unsafe { write_out(out, h)? };
            Ok(SkStatus::Ok)
        })())
    })
}

/// Frees a client (null is ignored).
///
/// Ownership: takes the handle back and releases it; it must not be used again.
/// Thread safety: not concurrently with any other call on the same handle.
///
/// # Safety
/// `c` is null or a client from this API, not freed before and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_free(c: *mut SkClient) {
    // SAFETY: forwarded caller contract.
    unsafe { free_raw(c) }
}

/// Starts discovery at `now_us`: a discovery request is queued for the base socket
/// (`sk_client_poll_transmit`). `SK_STATUS_PROTOCOL` if already started.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_start(c: *mut SkClient, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.client.start(now).map_err(|_| SkStatus::Protocol)?;
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// The QUIC stack sends `datagram` on the base socket at `now_us`: call just before the send
/// (a quACK naming it may arrive before the send returns). `out_logged` (optional) tells
/// whether Robin logged it.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `datagram` is valid for `len` reads;
/// `out_logged` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_on_base_sent(
    c: *mut SkClient,
    now_us: u64,
    datagram: *const u8,
    len: usize,
    out_logged: *mut bool,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let d = slice(datagram, len)?;
                let now = h.clock.at(now_us)?;
                let logged = h.client.on_base_sent(now, d);
                write_opt(out_logged, logged);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// The last `n` datagrams reported by `sk_client_on_base_sent` were not sent after all.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_withdraw_sent(c: *mut SkClient, n: usize) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            h.client.withdraw_sent(n);
            SkStatus::Ok
        })
    }
}

/// A datagram arrived on the base socket from the base peer at `now_us`. Discovery replies are
/// consumed; every other datagram becomes available from `sk_client_poll_deliver` (at once, or
/// after Packrat's reorder window when it follows a gap).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `datagram` is valid for `len` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_on_base_received(
    c: *mut SkClient,
    now_us: u64,
    datagram: *const u8,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let d = slice(datagram, len)?;
                let now = h.clock.at(now_us)?;
                h.client.on_base_received(now, d.to_vec());
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Pops the next datagram the QUIC stack may receive now into `buf` (`out_len` gets its
/// length). `SK_STATUS_EMPTY` if none; `SK_STATUS_BUFFER_TOO_SMALL` keeps it queued.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `buf` is valid for `cap` byte writes
/// (null if `cap` is 0); `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_poll_deliver(
    c: *mut SkClient,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                if out_len.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                if h.pending_deliver.is_none() {
                    h.pending_deliver = h.client.poll_deliver();
                }
                let Some(d) = h.pending_deliver.as_ref() else {
                    return Ok(SkStatus::Empty);
                };
                let s = copy_out(d, buf, cap, out_len)?;
                if s == SkStatus::Ok {
                    h.pending_deliver = None;
                }
                Ok(s)
            })())
        })
    }
}

/// A datagram arrived on the sidekick socket from `from` (a `struct sockaddr_in` or
/// `sockaddr_in6` of `from_len` bytes) at `now_us`. Forged, replayed or malformed frames are
/// counted and ignored (`SK_STATUS_OK`): they never switch the sidekick off.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `from` is valid for `from_len` reads;
/// `datagram` is valid for `len` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_on_sidekick_received(
    c: *mut SkClient,
    now_us: u64,
    from: *const libc::sockaddr,
    from_len: usize,
    datagram: *const u8,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let from = sockaddr_to_rust(from, from_len)?;
                let d = slice(datagram, len)?;
                let now = h.clock.at(now_us)?;
                h.client.on_sidekick_datagram(now, from, d);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Pops the next datagram to send into `buf` (`out_len` gets its length) and where it goes:
/// `out_dest` is `SK_DESTINATION_BASE` (the base socket, to the base peer) or
/// `SK_DESTINATION_SIDEKICK` (the sidekick socket, to the address written to `out_addr`,
/// `out_addr_len` bytes; both optional for base-only callers). `SK_STATUS_EMPTY` if nothing is
/// queued; `SK_STATUS_BUFFER_TOO_SMALL` keeps it queued.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `buf` is valid for `cap` byte writes
/// (null if `cap` is 0); `out_len` and `out_dest` are valid for writes; `out_addr` and
/// `out_addr_len` are null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_poll_transmit(
    c: *mut SkClient,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
    out_dest: *mut SkDestination,
    out_addr: *mut libc::sockaddr_storage,
    out_addr_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                if out_len.is_null() || out_dest.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                if h.pending_transmit.is_none() {
                    h.pending_transmit = h.client.poll_transmit();
                }
                let Some(t) = h.pending_transmit.as_ref() else {
                    return Ok(SkStatus::Empty);
                };
                let (dest, bytes, addr) = match t {
                    Transmit::Base(b) => (SkDestination::Base, b, None),
                    Transmit::Sidekick(a, b) => (SkDestination::Sidekick, b, Some(*a)),
                };
                write_out(out_dest, dest)?;
                let s = copy_out(bytes, buf, cap, out_len)?;
                if s != SkStatus::Ok {
                    return Ok(s);
                }
                if let Some(a) = addr {
                    let (storage, alen) = sockaddr_from_rust(a);
                    write_opt(out_addr, storage);
                    write_opt(out_addr_len, alen);
                }
                h.pending_transmit = None;
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Pops the next session event (`SK_STATUS_EMPTY` if none).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `out_event` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_poll_event(
    c: *mut SkClient,
    out_event: *mut SkClientEvent,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                if out_event.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                let Some(e) = h.client.poll_event() else {
                    return Ok(SkStatus::Empty);
                };
                let ev = match e {
                    SdkEvent::Established => SkClientEvent::empty(SkClientEventKind::Established),
                    SdkEvent::NearLoss(l) => SkClientEvent {
                        id: l.id,
                        packet_number: packet_number_to_c(l.packet_number),
                        sent_us: h.clock.to_us(l.sent),
                        len: l.len,
                        rule: match l.rule {
                            LossRule::Reordering => SkLossRule::Reordering,
                            LossRule::Time => SkLossRule::Time,
                        },
                        ..SkClientEvent::empty(SkClientEventKind::NearLoss)
                    },
                    SdkEvent::Delivered { bytes, newest_sent } => SkClientEvent {
                        delivered_bytes: bytes,
                        newest_sent_us: h.clock.to_us(newest_sent),
                        ..SkClientEvent::empty(SkClientEventKind::Delivered)
                    },
                    SdkEvent::Fallback(cause) => {
                        let (fallback_cause, fallback_detail) = fallback_to_c(cause);
                        SkClientEvent {
                            fallback_cause,
                            fallback_detail,
                            ..SkClientEvent::empty(SkClientEventKind::Fallback)
                        }
                    }
                    SdkEvent::EngineDropped(engine, cause) => {
                        let (fallback_cause, fallback_detail) = fallback_to_c(cause);
                        SkClientEvent {
                            fallback_cause,
                            fallback_detail,
                            ..SkClientEvent::empty(match engine {
                                Engine::Robin => SkClientEventKind::RobinDropped,
                                Engine::Packrat => SkClientEventKind::PackratDropped,
                            })
                        }
                    }
                };
                write_out(out_event, ev)?;
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// The next instant (caller's microseconds) at which `sk_client_handle_timeout` must run;
/// `SK_STATUS_EMPTY` if no timer is armed.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client; `out_us` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_poll_timeout(c: *mut SkClient, out_us: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| match h.client.poll_timeout() {
            Some(t) => status(write_out(out_us, h.clock.deadline_us(t)).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// Runs the timers due at `now_us` (discovery and Init retries, quota refresh, idle timeout,
/// Robin's time rule, Packrat's reorder window and eACK timer).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_handle_timeout(c: *mut SkClient, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.client.handle_timeout(now);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Stops using the sidekick at `now_us` (cause `SK_FALLBACK_CAUSE_APPLICATION`): the session is
/// closed and every held datagram is released.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_fall_back(c: *mut SkClient, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.client.fall_back(now, FallbackCause::Application);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Asks the proxy for another session configuration at `now_us` (quACK interval and threshold,
/// eACK settings; Sidekick (NSDI '24) §5.2); `out_id` (optional) receives the request's id. The
/// proxy's answer must be a clamp of `config`: accepted, the session starts a new epoch with
/// fresh engines (`SkClientStats.reconfigurations`); refused, it keeps its configuration
/// (`reconfigurations_refused`). `SK_STATUS_PROTOCOL` unless the session is established;
/// `SK_STATUS_INVALID_ARGUMENT` for a configuration the protocol refuses.
///
/// Ownership: borrows the handle and `config` for the duration of the call; nothing of the
/// caller's is kept. Thread safety: not concurrently with another call on the same handle;
/// distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `config` is valid for a read; `out_id`
/// is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_reconfigure(
    c: *mut SkClient,
    now_us: u64,
    config: *const SkSessionConfig,
    out_id: *mut u32,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                // `config` is null or valid for a read (caller contract).
                let cfg = config.as_ref().ok_or(SkStatus::NullPointer)?;
                let session = cfg.to_rust()?;
                let id = h.client.reconfigure(now, session).map_err(|e| match e {
                    sidekick_protocol::Error::InvalidState(_) => SkStatus::Protocol,
                    _ => SkStatus::InvalidArgument,
                })?;
                if !out_id.is_null() {
                    // `out_id` is non-null and valid for a write (caller contract).
                    write_out(out_id, id)?;
                }
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Whether the sidekick is in use (`out_active`) and, if the client fell back, why
/// (`out_cause`, `SK_FALLBACK_CAUSE_NONE` otherwise). Both outputs are optional.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client; `out_active` and `out_cause` are null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_state(
    c: *mut SkClient,
    out_active: *mut bool,
    out_cause: *mut SkFallbackCause,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            write_opt(out_active, h.client.is_active());
            let cause = h
                .client
                .fallback_cause()
                .map_or(SkFallbackCause::None, |c| fallback_to_c(c).0);
            write_opt(out_cause, cause);
            SkStatus::Ok
        })
    }
}

/// Feeds the transport's end-to-end RTT (for PACUBIC's `r`).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_on_e2e_rtt(c: *mut SkClient, rtt_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            h.client.on_e2e_rtt(micros(rtt_us));
            SkStatus::Ok
        })
    }
}

/// PACUBIC's `r` once both RTTs are known (`SK_STATUS_EMPTY` before).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client; `out_ratio` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_rtt_ratio(c: *mut SkClient, out_ratio: *mut f64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| match h.client.rtt_ratio() {
            Some(r) => status(write_out(out_ratio, r).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// Feeds one line of the TLS stack's key log (`SSLKEYLOGFILE` format, e.g. from
/// `SSL_CTX_set_keylog_callback`) to the packet-number lens; 1-RTT traffic secrets let it read
/// the packet numbers of the base connection (needed for Packrat's reorder window and for
/// packet numbers in loss events). `SK_STATUS_MALFORMED` if the line does not parse; lines of
/// other labels are accepted and ignored.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `line` is valid for `len` reads (no NUL
/// terminator needed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_keylog_line(
    c: *mut SkClient,
    line: *const u8,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            status((|| {
                let l = slice(line, len)?;
                let l = std::str::from_utf8(l).map_err(|_| SkStatus::Malformed)?;
                h.client
                    .lens_mut()
                    .on_keylog_line(l.trim_end())
                    .map_err(|_| SkStatus::Malformed)?;
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Sets the destination connection ID length of short-header packets the client sends
/// (`outgoing` non-zero) or receives, when the stack knows it (otherwise it is learnt from long
/// headers). At most 20.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `c` is null or a live client not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_set_dcid_len(
    c: *mut SkClient,
    outgoing: u8,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            if len > 20 {
                return SkStatus::InvalidArgument;
            }
            let dir = if outgoing == 0 {
                DatagramDirection::Incoming
            } else {
                DatagramDirection::Outgoing
            };
            h.client.lens_mut().set_dcid_len(dir, len);
            SkStatus::Ok
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
/// `c` is null or a live client; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_stats(c: *mut SkClient, out: *mut SkClientStats) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            let s = h.client.stats();
            let stats = SkClientStats {
                quacks: s.quacks,
                inconsistent_quacks: s.inconsistent_quacks,
                stale_quacks: s.stale_quacks,
                eacks_sent: s.eacks_sent,
                resets_requested: s.resets_requested,
                resets_by_proxy: s.resets_by_proxy,
                over_quota: s.over_quota,
                rejected_frames: s.rejected_frames,
                retransmissions: s.retransmissions,
                events_dropped: s.events_dropped,
                reconfigurations: s.reconfigurations,
                reconfigurations_refused: s.reconfigurations_refused,
            };
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

/// Robin's counters while the session runs Robin (the session drops its engines when it falls
/// back, so sample them while it is active); `SK_STATUS_EMPTY` when no Robin engine runs.
/// `events_dropped` counts the engine's queue only.
///
/// Ownership: the caller owns `out`; nothing is kept. Thread safety: as every `sk_client_*`
/// call, not concurrently with another call on the same client.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_robin_stats(
    c: *mut SkClient,
    out: *mut crate::robin::SkRobinStats,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            let Some(r) = h.client.robin() else {
                return SkStatus::Empty;
            };
            let stats = crate::robin::robin_stats_to_c(&r.stats(), r.outstanding() as u64, 0);
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

/// Packrat's counters while the session runs Packrat; `SK_STATUS_EMPTY` when no Packrat
/// engine runs. `ready_now` and `ready_dropped` are 0: the session hands datagrams out through
/// `sk_client_poll_deliver`, not the engine's queue.
///
/// Ownership: the caller owns `out`; nothing is kept. Thread safety: as every `sk_client_*`
/// call, not concurrently with another call on the same client.
///
/// # Safety
/// `c` is null or a live client not used concurrently; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_client_packrat_stats(
    c: *mut SkClient,
    out: *mut crate::packrat::SkPackratStats,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(c, |h| {
            let Some(p) = h.client.packrat() else {
                return SkStatus::Empty;
            };
            let stats = crate::packrat::packrat_stats_to_c(
                &p.stats(),
                p.held() as u64,
                p.open_gaps() as u64,
                0,
                0,
            );
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

//! C API of the Robin sender engine (Sidekick (NSDI '24) §4.3.1): logs sent datagrams, decodes the proxy's
//! quACKs, reports near-segment losses and hands back copies to retransmit.

// FFI boundary: raw pointers from C are checked and converted in `ffi`; every unsafe block here
// forwards the caller contract stated in the function's `# Safety` section.
#![allow(unsafe_code)]

use std::collections::VecDeque;

use quack::{IdSource, MAX_THRESHOLD};
use sidekick_sdk::robin::{LossRule, QuackError, RobinEvent, RobinSender, RobinSenderConfig};

use crate::ffi::{
    Clock, Handle, SkStatus, free_raw, guard, into_raw, micros, packet_number, packet_number_to_c,
    slice, slice_mut, status, to_micros, with_handle, write_opt, write_out,
};

/// How identifiers are read from datagrams (proxy and endpoint must agree).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkIdentifier {
    /// 0: `width` bytes (little-endian) at `offset`; 1: keyed SipHash-1-3 of the payload with
    /// `hash_key`, truncated to `width` bytes.
    pub mode: u8,
    /// Identifier width in bytes: 2, 4 or 8 (0 reads as 4, the default). Narrower identifiers
    /// make shorter quACKs and collide more often within a quACK window (Sidekick (NSDI '24)
    /// §3); the proxy must grant the same width. Robin's quACKs and Packrat's eACKs both use
    /// it (a multicast group's session takes 4 only).
    pub width: u8,
    /// Byte offset into the UDP payload; negative counts from the end (-4, the QUIC default:
    /// the AEAD tag of the datagram's last packet).
    pub offset: i32,
    /// Key of mode 1.
    pub hash_key: [u8; 16],
}

impl SkIdentifier {
    pub(crate) fn quic_default() -> Self {
        Self {
            mode: 0,
            width: 4,
            offset: -4,
            hash_key: [0; 16],
        }
    }

    /// The identifier width (0 reads as 4).
    pub(crate) fn width(self) -> Result<quack::Width, SkStatus> {
        match self.width {
            2 => Ok(quack::Width::U16),
            0 | 4 => Ok(quack::Width::U32),
            8 => Ok(quack::Width::U64),
            _ => Err(SkStatus::InvalidArgument),
        }
    }

    pub(crate) fn to_source(self) -> Result<IdSource, SkStatus> {
        match self.mode {
            0 => Ok(IdSource::Offset(self.offset as isize)),
            1 => Ok(IdSource::KeyedHash(self.hash_key)),
            _ => Err(SkStatus::InvalidArgument),
        }
    }
}

/// Robin engine parameters; fill with `sk_robin_config_default` and adjust.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkRobinConfig {
    /// quACK threshold `t` agreed with the proxy (at most `SK_QUACK_MAX_THRESHOLD`).
    pub threshold: usize,
    /// Identifier rule.
    pub identifier: SkIdentifier,
    /// A missing packet is lost once this many later-sent packets were received (3).
    pub reorder_threshold: u32,
    /// Time rule factor on the near RTT (9/8).
    pub time_factor: f64,
    /// The proxy's quACK interval in microseconds (slack for the time rule).
    pub quack_interval_us: u64,
    /// Cap on datagrams awaiting a verdict.
    pub max_log: usize,
    /// Bytes of sent datagrams kept for early retransmission (0 disables it).
    pub retransmit_buffer_bytes: usize,
    /// How many times one datagram may be resent on quACK evidence.
    pub max_retransmissions: u8,
    /// Resend a lost datagram only while at most this many packets were sent after it (128;
    /// 0: no limit): a receiver discards packet numbers far behind its highest as possible
    /// duplicates.
    pub resend_window: u64,
}

impl SkRobinConfig {
    fn from_rust(c: &RobinSenderConfig) -> Self {
        let identifier = match c.id_source {
            IdSource::Offset(o) => SkIdentifier {
                mode: 0,
                width: c.width.bytes() as u8,
                offset: i32::try_from(o).unwrap_or(-4),
                hash_key: [0; 16],
            },
            IdSource::KeyedHash(k) => SkIdentifier {
                mode: 1,
                width: c.width.bytes() as u8,
                offset: 0,
                hash_key: k,
            },
        };
        Self {
            threshold: c.threshold,
            identifier,
            reorder_threshold: c.reorder_threshold,
            time_factor: c.time_factor,
            quack_interval_us: to_micros(c.quack_interval),
            max_log: c.max_log,
            retransmit_buffer_bytes: c.retransmit_buffer_bytes,
            max_retransmissions: c.max_retransmissions,
            resend_window: c.resend_window,
        }
    }

    fn to_rust(self) -> Result<RobinSenderConfig, SkStatus> {
        if self.threshold > MAX_THRESHOLD
            || !self.time_factor.is_finite()
            || self.time_factor < 0.0
            || self.max_log == 0
            || self.reorder_threshold == 0
        {
            return Err(SkStatus::InvalidArgument);
        }
        Ok(RobinSenderConfig {
            threshold: self.threshold,
            id_source: self.identifier.to_source()?,
            width: self.identifier.width()?,
            reorder_threshold: self.reorder_threshold,
            time_factor: self.time_factor,
            quack_interval: micros(self.quack_interval_us),
            max_log: self.max_log,
            retransmit_buffer_bytes: self.retransmit_buffer_bytes,
            max_retransmissions: self.max_retransmissions,
            resend_window: self.resend_window,
        })
    }
}

/// Which rule declared a datagram lost.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkLossRule {
    /// Not a loss event.
    None = 0,
    /// At least `reorder_threshold` later-sent datagrams reached the proxy.
    Reordering = 1,
    /// The time rule expired.
    Time = 2,
}

/// Kind of a Robin event.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkRobinEventKind {
    /// A datagram was lost between the sender and the proxy: a congestion event for PACUBIC
    /// (`sk_pacubic_on_loss` with `SK_CONGESTION_SOURCE_QUACK`).
    Lost = 1,
    /// Resend this identical datagram now (copied into the caller's buffer).
    Retransmit = 2,
    /// The proxy received `delivered_bytes` more (ACK-reduction input; data stays unreleased).
    Delivered = 3,
    /// The quACK state is unusable: ask the proxy for a reset, then call `sk_robin_reset`.
    NeedReset = 4,
}

/// One Robin event. Fields not meaningful for the kind are zero (`packet_number` -1).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkRobinEvent {
    /// What happened.
    pub kind: SkRobinEventKind,
    /// `LOST`: engine sequence number of the send.
    pub seq: u64,
    /// `LOST`: the datagram's identifier (zero-extended from its width).
    pub id: u64,
    /// `LOST`: its QUIC packet number, -1 if unknown.
    pub packet_number: i64,
    /// `LOST`: when it was sent (caller's microseconds).
    pub sent_us: u64,
    /// `LOST`: its size in bytes.
    pub len: usize,
    /// `LOST`: which rule.
    pub rule: SkLossRule,
    /// `DELIVERED`: bytes newly confirmed received by the proxy.
    pub delivered_bytes: u64,
    /// `DELIVERED`: send time of the newest of them (caller's microseconds).
    pub newest_sent_us: u64,
    /// `RETRANSMIT`: length of the datagram written to the buffer (or needed).
    pub datagram_len: usize,
}

impl SkRobinEvent {
    fn empty(kind: SkRobinEventKind) -> Self {
        Self {
            kind,
            seq: 0,
            id: 0,
            packet_number: -1,
            sent_us: 0,
            len: 0,
            rule: SkLossRule::None,
            delivered_bytes: 0,
            newest_sent_us: 0,
            datagram_len: 0,
        }
    }
}

/// Robin counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkRobinStats {
    /// Datagrams logged.
    pub sent_logged: u64,
    /// Datagrams too short to carry an identifier.
    pub unidentifiable: u64,
    /// quACKs accepted.
    pub quacks: u64,
    /// Malformed quACKs.
    pub wire_errors: u64,
    /// Stale quACKs ignored.
    pub stale: u64,
    /// quACKs claiming receipts of packets never sent.
    pub never_sent: u64,
    /// quACKs whose last element is unknown.
    pub unknown_last: u64,
    /// quACKs that did not decode.
    pub undecodable: u64,
    /// Threshold mismatches.
    pub threshold_mismatch: u64,
    /// Datagrams confirmed received by the proxy.
    pub delivered: u64,
    /// Losses by the reordering rule.
    pub lost_by_reordering: u64,
    /// Losses by the time rule.
    pub lost_by_time: u64,
    /// Datagrams resent.
    pub retransmitted: u64,
    /// Losses with no copy to resend.
    pub retransmit_unavailable: u64,
    /// Log entries evicted by the cap.
    pub log_evicted: u64,
    /// Events dropped because a queue was full (engine and C API queue).
    pub events_dropped: u64,
    /// Resets performed.
    pub resets: u64,
    /// Datagrams awaiting a verdict now.
    pub outstanding: u64,
    /// Losses not resent: more than `resend_window` packets were sent after them.
    pub resends_too_late: u64,
}

/// Cap on events waiting for `sk_robin_poll_event` (the engine's own queue has the same cap).
const MAX_EVENTS: usize = 4096;

/// The Robin sender engine (opaque).
pub struct SkRobin {
    robin: RobinSender,
    clock: Clock,
    events: VecDeque<RobinEvent>,
    dropped: u64,
    poisoned: bool,
}

impl Handle for SkRobin {
    fn poisoned(&mut self) -> &mut bool {
        &mut self.poisoned
    }
}

impl SkRobin {
    fn drain(&mut self) {
        for e in self.robin.poll_events() {
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
                self.dropped += 1;
            }
            self.events.push_back(e);
        }
    }
}

/// Fills `out` with the defaults (t = 10, last 4 bytes, 3 packets, 9/8, 30 ms, 8192 entries,
/// 4 MiB of copies, 2 retransmissions, a
/// resend window of 128 packets).
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_config_default(out: *mut SkRobinConfig) -> SkStatus {
    guard(|| {
        let c = SkRobinConfig::from_rust(&RobinSenderConfig::default());
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, c) }.map(|()| SkStatus::Ok))
    })
}

/// Creates a Robin engine (`config` null: defaults). Free it with `sk_robin_free`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_robin_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `config` is null or valid for a read; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_new(
    config: *const SkRobinConfig,
    out: *mut *mut SkRobin,
) -> SkStatus {
    guard(|| {
        status((|| {
            if out.is_null() {
                return Err(SkStatus::NullPointer);
            }
            // SAFETY: `config` is null or valid for a read (caller contract).
            let c = match unsafe { config.as_ref() } {
                Some(c) => c.to_rust()?,
                None => RobinSenderConfig::default(),
            };
            let h = into_raw(SkRobin {
                robin: RobinSender::new(c),
                clock: Clock::new(),
                events: VecDeque::new(),
                dropped: 0,
                poisoned: false,
            });
            // SAFETY: forwarded caller contract.
            unsafe { write_out(out, h)? };
            Ok(SkStatus::Ok)
        })())
    })
}

/// Frees a Robin engine (null is ignored).
///
/// Ownership: takes the handle back and releases it; it must not be used again.
/// Thread safety: not concurrently with any other call on the same handle.
///
/// # Safety
/// `r` is null or an engine from this API, not freed before and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_free(r: *mut SkRobin) {
    // SAFETY: forwarded caller contract.
    unsafe { free_raw(r) }
}

/// Logs a datagram the transport sends at `now_us` (call just before the send). `packet_number`
/// is its QUIC packet number or -1. Writes the engine sequence number to `out_seq` (optional).
/// `SK_STATUS_NO_IDENTIFIER` if the datagram carries no identifier (not logged).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently; `datagram` is valid for `len` reads;
/// `out_seq` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_on_sent(
    r: *mut SkRobin,
    now_us: u64,
    datagram: *const u8,
    len: usize,
    packet_number_or_neg: i64,
    out_seq: *mut u64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            status((|| {
                let d = slice(datagram, len)?;
                let now = h.clock.at(now_us)?;
                let seq = h.robin.on_sent(now, d, packet_number(packet_number_or_neg));
                h.drain();
                let seq = seq.ok_or(SkStatus::NoIdentifier)?;
                write_opt(out_seq, seq);
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Withdraws the last `n` logged sends (the socket refused them).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_withdraw_last(r: *mut SkRobin, n: usize) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            h.robin.withdraw_last(n);
            SkStatus::Ok
        })
    }
}

/// Processes a quACK (the proxy's serialised power sums) received at `now_us`. Losses,
/// retransmissions and deliveries become events (`sk_robin_poll_event`). A rejected quACK
/// changes no state and returns its reason (`SK_STATUS_MALFORMED`, `_THRESHOLD_MISMATCH`,
/// `_STALE`, `_NEVER_SENT`, `_UNKNOWN_LAST`, `_INCONSISTENT`).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently; `bytes` is valid for `len` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_on_quack(
    r: *mut SkRobin,
    now_us: u64,
    bytes: *const u8,
    len: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            status((|| {
                let b = slice(bytes, len)?;
                let now = h.clock.at(now_us)?;
                let res = h.robin.on_quack(now, b);
                h.drain();
                res.map_err(|e| match e {
                    QuackError::Wire(_) => SkStatus::Malformed,
                    QuackError::Threshold { .. } => SkStatus::ThresholdMismatch,
                    QuackError::Stale { .. } => SkStatus::Stale,
                    QuackError::NeverSent { .. } => SkStatus::NeverSent,
                    QuackError::UnknownLast => SkStatus::UnknownLast,
                    QuackError::Undecodable(_) => SkStatus::Inconsistent,
                })?;
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Pops the next event into `out_event` (`SK_STATUS_EMPTY` if none). A `RETRANSMIT` event
/// copies the datagram into `buf`; if `cap` is too small it returns
/// `SK_STATUS_BUFFER_TOO_SMALL` with `datagram_len` set and keeps the event queued.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently; `out_event` is valid for a write; `buf`
/// is valid for `cap` byte writes (null if `cap` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_poll_event(
    r: *mut SkRobin,
    out_event: *mut SkRobinEvent,
    buf: *mut u8,
    cap: usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            status((|| {
                if out_event.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                let Some(e) = h.events.front() else {
                    return Ok(SkStatus::Empty);
                };
                let ev = match e {
                    RobinEvent::Lost(l) => SkRobinEvent {
                        seq: l.seq,
                        id: l.id,
                        packet_number: packet_number_to_c(l.packet_number),
                        sent_us: h.clock.to_us(l.sent),
                        len: l.len,
                        rule: match l.rule {
                            LossRule::Reordering => SkLossRule::Reordering,
                            LossRule::Time => SkLossRule::Time,
                        },
                        ..SkRobinEvent::empty(SkRobinEventKind::Lost)
                    },
                    RobinEvent::Retransmit(d) => {
                        let ev = SkRobinEvent {
                            datagram_len: d.len(),
                            ..SkRobinEvent::empty(SkRobinEventKind::Retransmit)
                        };
                        if d.len() > cap {
                            write_out(out_event, ev)?;
                            return Ok(SkStatus::BufferTooSmall);
                        }
                        slice_mut(buf, d.len())?.copy_from_slice(d);
                        ev
                    }
                    RobinEvent::Delivered { bytes, newest_sent } => SkRobinEvent {
                        delivered_bytes: *bytes,
                        newest_sent_us: h.clock.to_us(*newest_sent),
                        ..SkRobinEvent::empty(SkRobinEventKind::Delivered)
                    },
                    RobinEvent::NeedReset => SkRobinEvent::empty(SkRobinEventKind::NeedReset),
                };
                write_out(out_event, ev)?;
                h.events.pop_front();
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Applies the time rule at `now_us` (call when `sk_robin_poll_timeout` expires).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_handle_timeout(r: *mut SkRobin, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.robin.handle_timeout(now);
                h.drain();
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// When the time rule next needs to run (caller's microseconds); `SK_STATUS_EMPTY` if no timer.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine; `out_us` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_poll_timeout(r: *mut SkRobin, out_us: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| match h.robin.poll_timeout() {
            Some(t) => status(write_out(out_us, h.clock.deadline_us(t)).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// Feeds the end-to-end RTT measured by the transport (for PACUBIC's `r`).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_on_e2e_rtt(r: *mut SkRobin, rtt_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            h.robin.on_e2e_rtt(micros(rtt_us));
            SkStatus::Ok
        })
    }
}

/// PACUBIC's `r` = min near-segment RTT / min end-to-end RTT (Sidekick (NSDI '24) §4.3.2);
/// `SK_STATUS_EMPTY` until both are known.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine; `out_ratio` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_rtt_ratio(r: *mut SkRobin, out_ratio: *mut f64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| match h.robin.rtt_ratio() {
            Some(v) => status(write_out(out_ratio, v).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// Starts a new epoch after a Reset was agreed with the proxy.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `r` is null or a live engine not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_reset(r: *mut SkRobin) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            h.robin.reset();
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
/// `r` is null or a live engine; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_stats(r: *mut SkRobin, out: *mut SkRobinStats) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(r, |h| {
            let stats = robin_stats_to_c(&h.robin.stats(), h.robin.outstanding() as u64, h.dropped);
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

/// The C form of Robin's counters; `extra_dropped` adds events a C-side queue dropped.
pub(crate) fn robin_stats_to_c(
    s: &sidekick_sdk::robin::RobinStats,
    outstanding: u64,
    extra_dropped: u64,
) -> SkRobinStats {
    SkRobinStats {
        sent_logged: s.sent_logged,
        unidentifiable: s.unidentifiable,
        quacks: s.quacks,
        wire_errors: s.wire_errors,
        stale: s.stale,
        never_sent: s.never_sent,
        unknown_last: s.unknown_last,
        undecodable: s.undecodable,
        threshold_mismatch: s.threshold_mismatch,
        delivered: s.delivered,
        lost_by_reordering: s.lost_by_reordering,
        lost_by_time: s.lost_by_time,
        retransmitted: s.retransmitted,
        retransmit_unavailable: s.retransmit_unavailable,
        log_evicted: s.log_evicted,
        events_dropped: s.events_dropped + extra_dropped,
        resets: s.resets,
        outstanding,
        resends_too_late: s.resends_too_late,
    }
}

/// The first release's name of [`sk_robin_handle_timeout`], kept so that C callers built
/// against it still link; new code uses `sk_robin_handle_timeout`.
///
/// # Safety
/// As [`sk_robin_handle_timeout`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_on_timeout(r: *mut SkRobin, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe { sk_robin_handle_timeout(r, now_us) }
}

/// The first release's name of [`sk_robin_poll_timeout`], kept so that C callers built against
/// it still link; new code uses `sk_robin_poll_timeout`.
///
/// # Safety
/// As [`sk_robin_poll_timeout`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_robin_next_timeout(r: *mut SkRobin, out_us: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe { sk_robin_poll_timeout(r, out_us) }
}

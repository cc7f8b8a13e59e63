//! C API of the Packrat receiver engine (Packrat (CoNEXT '26) §4, §5.2): eACKs of received datagrams and
//! the reorder window that holds datagrams after a gap back from the QUIC stack.

// FFI boundary: raw pointers from C are checked and converted in `ffi`; every unsafe block here
// forwards the caller contract stated in the function's `# Safety` section.
#![allow(unsafe_code)]

use std::collections::VecDeque;

use quack::IdSource;
use sidekick_sdk::packrat::{PackratReceiver, PackratReceiverConfig};

use crate::ffi::{
    Clock, Handle, SkStatus, copy_out, free_raw, guard, into_raw, micros, packet_number, slice,
    status, to_micros, with_handle, write_out,
};
use crate::robin::SkIdentifier;

/// Largest eACK symbol count `sk_packrat_new` accepts (the protocol's cap).
pub const SK_PACKRAT_MAX_SYMBOLS: usize = 65_536;

/// The largest `max_held` and `max_gaps` a Packrat configuration may ask for.
pub const SK_PACKRAT_MAX_CAP: usize = 65_536;
const _: () = assert!(
    SK_PACKRAT_MAX_CAP == sidekick_sdk::packrat::MAX_GAPS_LIMIT
        && SK_PACKRAT_MAX_CAP == sidekick_sdk::packrat::MAX_HELD_LIMIT
);

/// Cap on released datagrams waiting for `sk_packrat_poll_ready`.
const MAX_READY: usize = 4096;

/// Packrat parameters; fill with `sk_packrat_config_default` (the WiFi scenario of Packrat (CoNEXT '26)).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkPackratConfig {
    /// Local eACK coded symbols (160 for downloads, 40 for media), 1..=`SK_PACKRAT_MAX_SYMBOLS`.
    pub local_symbols: usize,
    /// Identifier rule.
    pub identifier: SkIdentifier,
    /// Send an eACK at least this often while packets arrive (microseconds).
    pub eack_interval_us: u64,
    /// …or after this many packets.
    pub eack_every_packets: u32,
    /// Non-zero: selective eACKs, only while a gap is open (Packrat (CoNEXT '26) §5.2.3).
    pub selective: u8,
    /// Target decoding probability used to size each eACK, in (0, 1).
    pub success_probability: f64,
    /// The reorder window in microseconds (30 ms WiFi/cellular, 65 ms satellite).
    pub reorder_window_us: u64,
    /// Packets added to the open gaps when sizing an eACK.
    pub inflight_allowance: usize,
    /// Cap on held datagrams, at most `SK_PACKRAT_MAX_CAP`.
    pub max_held: usize,
    /// Cap on tracked missing packet numbers, at most `SK_PACKRAT_MAX_CAP`.
    pub max_gaps: usize,
}

impl SkPackratConfig {
    fn from_rust(c: &PackratReceiverConfig) -> Self {
        let width = c.width.bytes() as u8;
        let identifier = match c.id_source {
            IdSource::Offset(o) => SkIdentifier {
                offset: i32::try_from(o).unwrap_or(-i32::from(width)),
                width,
                ..SkIdentifier::quic_default()
            },
            IdSource::KeyedHash(k) => SkIdentifier {
                mode: 1,
                width,
                offset: 0,
                hash_key: k,
            },
        };
        Self {
            local_symbols: c.local_symbols,
            identifier,
            eack_interval_us: to_micros(c.eack_interval),
            eack_every_packets: c.eack_every_packets,
            selective: u8::from(c.selective),
            success_probability: c.success_probability,
            reorder_window_us: to_micros(c.reorder_window),
            inflight_allowance: c.inflight_allowance,
            max_held: c.max_held,
            max_gaps: c.max_gaps,
        }
    }

    fn to_rust(self) -> Result<PackratReceiverConfig, SkStatus> {
        let p = self.success_probability;
        if self.local_symbols == 0
            || self.local_symbols > SK_PACKRAT_MAX_SYMBOLS
            || !(p.is_finite() && p > 0.0 && p < 1.0)
            || self.inflight_allowance > SK_PACKRAT_MAX_SYMBOLS
            || self.max_gaps > SK_PACKRAT_MAX_CAP
            || self.max_held > SK_PACKRAT_MAX_CAP
        {
            return Err(SkStatus::InvalidArgument);
        }
        Ok(PackratReceiverConfig {
            local_symbols: self.local_symbols,
            // 2-, 4- or 8-byte identifiers (Sidekick (NSDI '24) §3; 4 is Packrat (CoNEXT '26)
            // §5.2.1's default): the eACKs name the width, and the proxy's engine must run at
            // the same one (the session negotiates it).
            id_source: self.identifier.to_source()?,
            width: self.identifier.width()?,
            eack_interval: micros(self.eack_interval_us),
            eack_every_packets: self.eack_every_packets,
            selective: self.selective != 0,
            success_probability: p,
            reorder_window: micros(self.reorder_window_us),
            inflight_allowance: self.inflight_allowance,
            max_held: self.max_held,
            max_gaps: self.max_gaps,
            ..PackratReceiverConfig::default()
        })
    }
}

/// Packrat counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkPackratStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams without an identifier.
    pub unidentifiable: u64,
    /// Datagrams without a packet number: delivered at once.
    pub no_packet_number: u64,
    /// Datagrams held back.
    pub held: u64,
    /// Gaps opened.
    pub gaps_opened: u64,
    /// Gaps filled by a late or retransmitted packet.
    pub gaps_filled: u64,
    /// Gaps closed by the reorder window expiring.
    pub gaps_expired: u64,
    /// Gaps closed by a proxy report of nothing missing.
    pub gaps_cleared_by_proxy: u64,
    /// Gaps not tracked because of the cap.
    pub gaps_untracked: u64,
    /// Held datagrams released early because of the cap.
    pub held_overflow: u64,
    /// eACKs produced.
    pub eacks: u64,
    /// Coded symbols sent in eACKs.
    pub eack_symbols: u64,
    /// Resets (new epochs).
    pub resets: u64,
    /// Datagrams held now.
    pub held_now: u64,
    /// Packet numbers believed missing now.
    pub open_gaps: u64,
    /// Datagrams ready for the stack, not yet polled.
    pub ready_now: u64,
    /// Ready datagrams dropped because the caller did not poll (cap 4096).
    pub ready_dropped: u64,
}

/// The Packrat receiver engine (opaque).
pub struct SkPackrat {
    rx: PackratReceiver,
    clock: Clock,
    /// Datagrams released by the engine, waiting for `sk_packrat_poll_ready` (the engine bounds
    /// what it holds; these are released datagrams the caller has not collected yet).
    ready: VecDeque<Vec<u8>>,
    ready_dropped: u64,
    /// An eACK produced for a buffer that was too small.
    pending_eack: Option<Vec<u8>>,
    poisoned: bool,
}

impl Handle for SkPackrat {
    fn poisoned(&mut self) -> &mut bool {
        &mut self.poisoned
    }
}

impl SkPackrat {
    fn collect(&mut self) {
        for d in self.rx.poll_ready() {
            if self.ready.len() >= MAX_READY {
                // The caller stopped collecting: the oldest goes (QUIC recovers it end to end).
                self.ready.pop_front();
                self.ready_dropped += 1;
            }
            self.ready.push_back(d);
        }
    }
}

/// Fills `out` with the defaults (160 symbols, last 4 bytes, eACK every 10 ms / 16 packets,
/// 95 % decoding target, 30 ms reorder window).
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_config_default(out: *mut SkPackratConfig) -> SkStatus {
    guard(|| {
        let c = SkPackratConfig::from_rust(&PackratReceiverConfig::default());
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, c) }.map(|()| SkStatus::Ok))
    })
}

/// Creates a receiver in epoch 0 (`config` null: defaults). Free it with `sk_packrat_free`.
///
/// Ownership: the caller owns the new handle written to `*out` and releases it with
/// `sk_packrat_free`; inputs are copied, nothing of the caller's is kept. Thread safety:
/// callable from any thread; the new handle may move between threads.
///
/// # Safety
/// `config` is null or valid for a read; `out` is valid for a pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_new(
    config: *const SkPackratConfig,
    out: *mut *mut SkPackrat,
) -> SkStatus {
    guard(|| {
        status((|| {
            if out.is_null() {
                return Err(SkStatus::NullPointer);
            }
            // SAFETY: `config` is null or valid for a read (caller contract).
            let c = match unsafe { config.as_ref() } {
                Some(c) => c.to_rust()?,
                None => PackratReceiverConfig::default(),
            };
            let h = into_raw(SkPackrat {
                rx: PackratReceiver::new(c),
                clock: Clock::new(),
                ready: VecDeque::new(),
                ready_dropped: 0,
                pending_eack: None,
                poisoned: false,
            });
            // SAFETY: forwarded caller contract.
            unsafe { write_out(out, h)? };
            Ok(SkStatus::Ok)
        })())
    })
}

/// Frees a receiver (null is ignored).
///
/// Ownership: takes the handle back and releases it; it must not be used again.
/// Thread safety: not concurrently with any other call on the same handle.
///
/// # Safety
/// `p` is null or a receiver from this API, not freed before and not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_free(p: *mut SkPackrat) {
    // SAFETY: forwarded caller contract.
    unsafe { free_raw(p) }
}

/// A datagram arrived at `now_us` with QUIC packet number `packet_number_or_neg` (-1 if the
/// lens could not read it). Its identifier enters the eACK; the datagram becomes available from
/// `sk_packrat_poll_ready` at once or, after a gap, when the gap fills or the window expires.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently; `datagram` is valid for `len` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_on_received(
    p: *mut SkPackrat,
    now_us: u64,
    datagram: *const u8,
    len: usize,
    packet_number_or_neg: i64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            status((|| {
                let d = slice(datagram, len)?;
                let now = h.clock.at(now_us)?;
                h.rx.on_datagram(now, d.to_vec(), packet_number(packet_number_or_neg));
                h.collect();
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// Pops the next datagram the QUIC stack may receive, in order, into `buf`; `out_len` gets its
/// length. `SK_STATUS_EMPTY` if none; `SK_STATUS_BUFFER_TOO_SMALL` keeps it queued.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently; `buf` is valid for `cap` byte writes
/// (null if `cap` is 0); `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_poll_ready(
    p: *mut SkPackrat,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            status((|| {
                let Some(d) = h.ready.front() else {
                    return Ok(SkStatus::Empty);
                };
                let s = copy_out(d, buf, cap, out_len)?;
                if s == SkStatus::Ok {
                    h.ready.pop_front();
                }
                Ok(s)
            })())
        })
    }
}

/// An eACK to send to the proxy now, if one is due at `now_us`: its bytes go to `buf`
/// (`out_len` gets the length). `SK_STATUS_EMPTY` if none is due; `SK_STATUS_BUFFER_TOO_SMALL`
/// keeps it for the next call. In a sidekick session the bytes travel in an Eack message
/// (`sk_client_*` does that itself).
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently; `buf` is valid for `cap` byte writes
/// (null if `cap` is 0); `out_len` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_poll_eack(
    p: *mut SkPackrat,
    now_us: u64,
    buf: *mut u8,
    cap: usize,
    out_len: *mut usize,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            status((|| {
                if out_len.is_null() {
                    return Err(SkStatus::NullPointer);
                }
                let now = h.clock.at(now_us)?;
                if h.pending_eack.is_none() {
                    h.pending_eack = h.rx.poll_eack(now);
                    h.collect();
                }
                let Some(e) = h.pending_eack.as_ref() else {
                    return Ok(SkStatus::Empty);
                };
                let s = copy_out(e, buf, cap, out_len)?;
                if s == SkStatus::Ok {
                    h.pending_eack = None;
                }
                Ok(s)
            })())
        })
    }
}

/// Advances time to `now_us`: gaps older than the reorder window expire and release what they
/// held.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_handle_timeout(p: *mut SkPackrat, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.rx.handle_timeout(now);
                h.collect();
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// The proxy reported it has nothing to retransmit: gaps the last eACK covered are not going
/// to be repaired, so what they held is released.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_on_proxy_nothing_missing(
    p: *mut SkPackrat,
    now_us: u64,
) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            status((|| {
                let now = h.clock.at(now_us)?;
                h.rx.on_proxy_nothing_missing(now);
                h.collect();
                Ok(SkStatus::Ok)
            })())
        })
    }
}

/// The proxy started epoch `epoch` (Reset): the local eACK restarts empty.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver not used concurrently.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_reset(p: *mut SkPackrat, epoch: u32) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            h.rx.reset(epoch);
            h.pending_eack = None;
            SkStatus::Ok
        })
    }
}

/// The next instant (caller's microseconds) at which `sk_packrat_handle_timeout` or
/// `sk_packrat_poll_eack` has work; `SK_STATUS_EMPTY` if none.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver; `out_us` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_poll_timeout(p: *mut SkPackrat, out_us: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| match h.rx.poll_timeout() {
            Some(t) => status(write_out(out_us, h.clock.deadline_us(t)).map(|()| SkStatus::Ok)),
            None => SkStatus::Empty,
        })
    }
}

/// Counters and current occupancy.
///
/// Ownership: borrows the handle and the caller's buffers for the duration of the call
/// (outputs are copies the caller owns); nothing of the caller's is kept. Thread safety:
/// not concurrently with another call on the same handle; distinct handles are independent.
///
/// # Safety
/// `p` is null or a live receiver; `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_stats(p: *mut SkPackrat, out: *mut SkPackratStats) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe {
        with_handle(p, |h| {
            let stats = packrat_stats_to_c(
                &h.rx.stats(),
                h.rx.held() as u64,
                h.rx.open_gaps() as u64,
                h.ready.len() as u64,
                h.ready_dropped,
            );
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

/// The C form of Packrat's counters with the current occupancy.
pub(crate) fn packrat_stats_to_c(
    s: &sidekick_sdk::packrat::PackratStats,
    held_now: u64,
    open_gaps: u64,
    ready_now: u64,
    ready_dropped: u64,
) -> SkPackratStats {
    SkPackratStats {
        received: s.received,
        unidentifiable: s.unidentifiable,
        no_packet_number: s.no_packet_number,
        held: s.held,
        gaps_opened: s.gaps_opened,
        gaps_filled: s.gaps_filled,
        gaps_expired: s.gaps_expired,
        gaps_cleared_by_proxy: s.gaps_cleared_by_proxy,
        gaps_untracked: s.gaps_untracked,
        held_overflow: s.held_overflow,
        eacks: s.eacks,
        eack_symbols: s.eack_symbols,
        resets: s.resets,
        held_now,
        open_gaps,
        ready_now,
        ready_dropped,
    }
}

/// The first release's name of [`sk_packrat_handle_timeout`], kept so that C callers built
/// against it still link; new code uses `sk_packrat_handle_timeout`.
///
/// # Safety
/// As [`sk_packrat_handle_timeout`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_on_timeout(p: *mut SkPackrat, now_us: u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe { sk_packrat_handle_timeout(p, now_us) }
}

/// The first release's name of [`sk_packrat_poll_timeout`], kept so that C callers built
/// against it still link; new code uses `sk_packrat_poll_timeout`.
///
/// # Safety
/// As [`sk_packrat_poll_timeout`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_packrat_next_timeout(p: *mut SkPackrat, out_us: *mut u64) -> SkStatus {
    // SAFETY: forwarded caller contract.
    unsafe { sk_packrat_poll_timeout(p, out_us) }
}

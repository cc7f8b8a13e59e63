//! C API of the sidekick client session (`SidekickClient`): discovery on the base socket, the
//! sidekick connection to the proxy, Robin and Packrat on the base datagrams, timers and
//! fallback. This is what a C QUIC client calls from its UDP send and receive paths.

// FFI boundary: raw pointers from C (buffers, socket addresses) are checked and converted here
// and in `ffi`; every unsafe block forwards the caller contract stated in its `# Safety` section.
#![allow(unsafe_code)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use sidekick_protocol::FallbackReason;
use sidekick_protocol::messages::{
    IdentifierMode, IdentifierSpec, PackratConfig, RobinConfig, SessionConfig,
};
use sidekick_sdk::lens::Direction;
use sidekick_sdk::robin::LossRule;
use sidekick_sdk::session::{FallbackCause, SdkEvent, SidekickClient, SidekickConfig, Transmit};

use crate::ffi::{
    Clock, Handle, SkStatus, copy_out, free_raw, guard, into_raw, micros, packet_number_to_c,
    slice, status, with_handle, write_opt, write_out,
};
use crate::robin::{SkIdentifier, SkLossRule};

/// The session configuration requested from the proxy in Init (seed 001 §4.1, seed 002 §6.1).
/// Fill with `sk_session_config_robin` / `sk_session_config_packrat` and adjust; both modes may
/// be enabled.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkSessionConfig {
    /// Non-zero: request Robin (quACKs for uploads).
    pub robin: u8,
    /// Robin: a quACK every this many milliseconds (0: not time-driven).
    pub quack_interval_ms: u32,
    /// Robin: a quACK every this many packets (0: not count-driven).
    pub quack_interval_packets: u32,
    /// Robin: threshold `t` (1..=1024).
    pub quack_threshold: u32,
    /// Non-zero: request Packrat (eACKs and proxy retransmissions for downloads).
    pub packrat: u8,
    /// Packrat: an eACK every this many milliseconds (0: not time-driven).
    pub eack_interval_ms: u32,
    /// Packrat: an eACK every this many packets (0: not count-driven).
    pub eack_interval_packets: u32,
    /// Packrat: local eACK coded symbols.
    pub local_symbols: u32,
    /// Packrat: the proxy's cache capacity in bytes.
    pub cache_capacity_bytes: u64,
    /// Packrat: the reorder (ACK-withholding) window in milliseconds.
    pub reorder_delay_ms: u32,
    /// How the proxy and the client read identifiers (4 bytes wide).
    pub identifier: SkIdentifier,
}

impl SkSessionConfig {
    fn from_rust(s: &SessionConfig) -> Self {
        let r = s.robin.clone().unwrap_or_default();
        let p = s.packrat.clone().unwrap_or_default();
        let identifier = match &s.identifier {
            Some(i) if i.mode == IdentifierMode::KeyedHash as i32 => {
                let mut key = [0u8; 16];
                let n = i.hash_key.len().min(16);
                key[..n].copy_from_slice(&i.hash_key[..n]);
                SkIdentifier {
                    mode: 1,
                    offset: 0,
                    hash_key: key,
                }
            }
            Some(i) => SkIdentifier {
                offset: i.offset,
                ..SkIdentifier::quic_default()
            },
            None => SkIdentifier::quic_default(),
        };
        Self {
            robin: u8::from(s.robin.is_some()),
            quack_interval_ms: r.interval_ms,
            quack_interval_packets: r.interval_packets,
            quack_threshold: r.threshold,
            packrat: u8::from(s.packrat.is_some()),
            eack_interval_ms: p.eack_interval_ms,
            eack_interval_packets: p.eack_interval_packets,
            local_symbols: p.local_symbols,
            cache_capacity_bytes: p.cache_capacity_bytes,
            reorder_delay_ms: p.reorder_delay_ms,
            identifier,
        }
    }

    fn to_rust(self) -> Result<SessionConfig, SkStatus> {
        let identifier = match self.identifier.mode {
            0 => IdentifierSpec {
                offset: self.identifier.offset,
                ..IdentifierSpec::quic_default()
            },
            1 => IdentifierSpec {
                mode: IdentifierMode::KeyedHash as i32,
                offset: 0,
                width: 4,
                hash_key: self.identifier.hash_key.to_vec(),
            },
            _ => return Err(SkStatus::InvalidArgument),
        };
        let s = SessionConfig {
            robin: (self.robin != 0).then_some(RobinConfig {
                interval_ms: self.quack_interval_ms,
                interval_packets: self.quack_interval_packets,
                threshold: self.quack_threshold,
            }),
            packrat: (self.packrat != 0).then_some(PackratConfig {
                eack_interval_ms: self.eack_interval_ms,
                eack_interval_packets: self.eack_interval_packets,
                local_symbols: self.local_symbols,
                cache_capacity_bytes: self.cache_capacity_bytes,
                reorder_delay_ms: self.reorder_delay_ms,
            }),
            identifier: Some(identifier),
        };
        s.validate().map_err(|_| SkStatus::InvalidArgument)?;
        Ok(s)
    }
}

/// Where a datagram from `sk_client_poll_transmit` goes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkDestination {
    /// On the base (QUIC) socket to the base peer: discovery requests, early retransmissions.
    Base = 0,
    /// On the sidekick socket to the proxy address written alongside.
    Sidekick = 1,
}

/// Why the client stopped using the sidekick.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkFallbackCause {
    /// Not fallen back.
    None = 0,
    /// No discovery reply: no sidekick proxy on the path.
    NoProxy = 1,
    /// No InitAck after all attempts.
    InitTimeout = 2,
    /// The proxy rejected the Init (`fallback_detail` has its error code).
    Rejected = 3,
    /// Nothing authentic from the proxy for the idle timeout.
    IdleTimeout = 4,
    /// A Config or Reset was never acknowledged.
    ControlTimeout = 5,
    /// The proxy closed the session.
    ClosedByProxy = 6,
    /// Too many inconsistent quACKs.
    InconsistentQuacks = 7,
    /// A quACK claimed receipts of packets never sent.
    NeverSent = 8,
    /// The proxy sent beyond the quota the client granted.
    OverQuota = 9,
    /// The proxy reset the epoch too often.
    TooManyResets = 10,
    /// The application asked for it (`sk_client_fall_back`).
    Application = 11,
}

fn fallback_to_c(c: FallbackCause) -> (SkFallbackCause, u32) {
    match c {
        FallbackCause::Protocol(r) => match r {
            FallbackReason::NoProxy => (SkFallbackCause::NoProxy, 0),
            FallbackReason::InitTimeout => (SkFallbackCause::InitTimeout, 0),
            FallbackReason::Rejected(code) => (SkFallbackCause::Rejected, code),
            FallbackReason::IdleTimeout => (SkFallbackCause::IdleTimeout, 0),
            FallbackReason::ControlTimeout => (SkFallbackCause::ControlTimeout, 0),
        },
        FallbackCause::ClosedByProxy => (SkFallbackCause::ClosedByProxy, 0),
        FallbackCause::InconsistentQuacks => (SkFallbackCause::InconsistentQuacks, 0),
        FallbackCause::NeverSent => (SkFallbackCause::NeverSent, 0),
        FallbackCause::OverQuota => (SkFallbackCause::OverQuota, 0),
        FallbackCause::TooManyResets => (SkFallbackCause::TooManyResets, 0),
        FallbackCause::Application => (SkFallbackCause::Application, 0),
    }
}

/// Kind of a session event.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkClientEventKind {
    /// The sidekick session is up.
    Established = 1,
    /// A datagram was lost on the near segment: a quACK congestion event for PACUBIC.
    NearLoss = 2,
    /// The proxy received `delivered_bytes` more.
    Delivered = 3,
    /// The client fell back to plain end-to-end behaviour (`fallback_cause`).
    Fallback = 4,
}

/// One session event; fields not meaningful for the kind are zero (`packet_number` -1).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkClientEvent {
    /// What happened.
    pub kind: SkClientEventKind,
    /// `NEAR_LOSS`: the datagram's identifier.
    pub id: u32,
    /// `NEAR_LOSS`: its QUIC packet number, -1 if unknown.
    pub packet_number: i64,
    /// `NEAR_LOSS`: when it was sent (caller's microseconds).
    pub sent_us: u64,
    /// `NEAR_LOSS`: its size in bytes.
    pub len: usize,
    /// `NEAR_LOSS`: which rule.
    pub rule: SkLossRule,
    /// `DELIVERED`: bytes newly confirmed received by the proxy.
    pub delivered_bytes: u64,
    /// `DELIVERED`: send time of the newest of them (caller's microseconds).
    pub newest_sent_us: u64,
    /// `FALLBACK`: why.
    pub fallback_cause: SkFallbackCause,
    /// `FALLBACK` with `REJECTED`: the proxy's error code.
    pub fallback_detail: u32,
}

impl SkClientEvent {
    fn empty(kind: SkClientEventKind) -> Self {
        Self {
            kind,
            id: 0,
            packet_number: -1,
            sent_us: 0,
            len: 0,
            rule: SkLossRule::None,
            delivered_bytes: 0,
            newest_sent_us: 0,
            fallback_cause: SkFallbackCause::None,
            fallback_detail: 0,
        }
    }
}

/// Session counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkClientStats {
    /// quACKs handed to Robin.
    pub quacks: u64,
    /// Of which inconsistent.
    pub inconsistent_quacks: u64,
    /// Of which stale.
    pub stale_quacks: u64,
    /// eACKs sent.
    pub eacks_sent: u64,
    /// Resets the client requested.
    pub resets_requested: u64,
    /// Resets started by the proxy.
    pub resets_by_proxy: u64,
    /// Frames from the proxy over quota.
    pub over_quota: u64,
    /// Sidekick datagrams refused (forged MACs, replays, wrong source…).
    pub rejected_frames: u64,
    /// Early retransmissions queued on the base socket.
    pub retransmissions: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
}

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

/// Fills `out` with a Robin-only configuration: a quACK every `interval_ms` with threshold `t`
/// (seed 001 Table 5: 30 ms and t = 10 for the upload scenario), QUIC identifiers.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_session_config_robin(
    interval_ms: u32,
    threshold: u32,
    out: *mut SkSessionConfig,
) -> SkStatus {
    guard(|| {
        let c = SidekickConfig::robin(interval_ms, threshold);
        let s = SkSessionConfig::from_rust(&c.protocol.session);
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, s) }.map(|()| SkStatus::Ok))
    })
}

/// Fills `out` with a Packrat-only configuration with the WiFi defaults of seed 002 (eACK every
/// 10 ms / 16 packets, 160 symbols, 48 kB cache, 30 ms reorder window).
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_session_config_packrat(out: *mut SkSessionConfig) -> SkStatus {
    guard(|| {
        let c = SidekickConfig::packrat();
        let s = SkSessionConfig::from_rust(&c.protocol.session);
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, s) }.map(|()| SkStatus::Ok))
    })
}

/// Creates a client session for one base connection (not started). `SK_STATUS_INVALID_ARGUMENT`
/// if the configuration breaks the protocol's constraints. Free it with `sk_client_free`.
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
            let session = c.to_rust()?;
            let h = into_raw(SkClient {
                client: SidekickClient::new(SidekickConfig::with_session(session)),
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

/// Whether the sidekick is in use (`out_active`) and, if the client fell back, why
/// (`out_cause`, `SK_FALLBACK_CAUSE_NONE` otherwise). Both outputs are optional.
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
                Direction::Incoming
            } else {
                Direction::Outgoing
            };
            h.client.lens_mut().set_dcid_len(dir, len);
            SkStatus::Ok
        })
    }
}

/// Counters.
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
            };
            status(write_out(out, stats).map(|()| SkStatus::Ok))
        })
    }
}

/// Reads a `sockaddr_in` / `sockaddr_in6` from C.
///
/// # Safety
/// `addr` is null or valid for `len` byte reads.
unsafe fn sockaddr_to_rust(
    addr: *const libc::sockaddr,
    len: usize,
) -> Result<SocketAddr, SkStatus> {
    if addr.is_null() {
        return Err(SkStatus::NullPointer);
    }
    let family_end =
        std::mem::offset_of!(libc::sockaddr, sa_family) + size_of::<libc::sa_family_t>();
    if len < family_end {
        return Err(SkStatus::InvalidArgument);
    }
    // SAFETY: `addr` is valid for `len >= family_end` bytes; read_unaligned tolerates any
    // alignment of the caller's buffer.
    let family = unsafe {
        std::ptr::read_unaligned(
            addr.cast::<u8>()
                .add(std::mem::offset_of!(libc::sockaddr, sa_family))
                .cast::<libc::sa_family_t>(),
        )
    };
    match i32::from(family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says sockaddr_in and `len` covers it.
            let sin = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says sockaddr_in6 and `len` covers it.
            let sin6 = unsafe { std::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => Err(SkStatus::InvalidArgument),
    }
}

/// Writes a socket address as a `sockaddr_storage` and its length.
fn sockaddr_from_rust(addr: SocketAddr) -> (libc::sockaddr_storage, usize) {
    // SAFETY: sockaddr_storage is plain old data for which all-zero bytes are a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in.
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in.
            unsafe {
                std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), sin);
            }
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in6.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            // SAFETY: sockaddr_storage is larger than and aligned at least as sockaddr_in6.
            unsafe {
                std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), sin6);
            }
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_round_trip_through_sockaddr() {
        for a in ["192.0.2.1:7000", "[2001:db8::5]:443"] {
            let a: SocketAddr = a.parse().unwrap();
            let (s, len) = sockaddr_from_rust(a);
            // SAFETY: `s` is a live sockaddr_storage of at least `len` bytes.
            let back = unsafe { sockaddr_to_rust((&raw const s).cast(), len) };
            assert_eq!(back, Ok(a));
            // SAFETY: as above, with a length that is too short.
            let short = unsafe { sockaddr_to_rust((&raw const s).cast(), len - 1) };
            assert_eq!(short, Err(SkStatus::InvalidArgument));
        }
    }
}

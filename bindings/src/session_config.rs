//! C API: presets for the client session's configuration (`SkSessionConfig`): Robin, Packrat,
//! both on one session, and a multicast group.

// FFI boundary: raw pointers from C are checked and converted here and in `ffi`; every unsafe
// block forwards the caller contract stated in its `# Safety` section.
#![allow(unsafe_code)]

use sidekick_sdk::session::SidekickConfig;

use crate::client_types::SkSessionConfig;
use crate::ffi::{SkStatus, guard, status, write_out};
use crate::sockaddr::sockaddr_to_rust;

/// Fills `out` with a Robin-only configuration: a quACK every `interval_ms` with threshold `t`
/// (Sidekick (NSDI '24) Table 5: 30 ms and t = 10 for the upload scenario), QUIC identifiers.
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
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

/// Fills `out` with a Packrat-only configuration with the WiFi defaults of Packrat (CoNEXT '26) (eACK every
/// 10 ms / 16 packets, 160 symbols, 48 kB cache, 30 ms reorder window; eACKs sized for 16
/// packets in flight beyond the open gaps).
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
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

/// Fills `out` with Robin and Packrat on one session, for a connection that both sends and
/// receives near the lossy link (an upload beside a download, a call with media both ways): a
/// quACK every `interval_ms` with threshold `t` for what the client sends (as
/// `sk_session_config_robin`), and Packrat's WiFi defaults for what it receives (as
/// `sk_session_config_packrat`, eACKs sized for 16 packets in flight). The engines share the
/// session's identifiers (4 bytes), quota and epoch: a reset restarts both. When one engine's
/// assessment fails while the other runs, only it stops (`SK_CLIENT_EVENT_KIND_ROBIN_DROPPED`
/// or `SK_CLIENT_EVENT_KIND_PACKRAT_DROPPED`).
///
/// Ownership: reads only its arguments and writes only the caller's outputs; nothing is
/// kept. Thread safety: no shared state, callable from any thread at any time.
///
/// # Safety
/// `out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_session_config_robin_and_packrat(
    interval_ms: u32,
    threshold: u32,
    out: *mut SkSessionConfig,
) -> SkStatus {
    guard(|| {
        let c = SidekickConfig::robin_and_packrat(interval_ms, threshold);
        let s = SkSessionConfig::from_rust(&c.protocol.session);
        // SAFETY: forwarded caller contract.
        status(unsafe { write_out(out, s) }.map(|()| SkStatus::Ok))
    })
}

/// Asks Packrat assistance for a multicast stream (Packrat (CoNEXT '26) §6.1 "Multicast Proxy"):
/// the server sends the stream to `group` (a `sockaddr_in` / `sockaddr_in6` of a multicast
/// address and port) from the address this session's base connection runs to; the proxy keeps
/// one shared cache of the group's stream and this client's eACK and virtual cache. The session
/// itself runs on the client's unicast path to the server (e.g. the socket it sends NACKs from).
/// A null `group` makes the session unicast again. Enables Packrat (`packrat = 1`).
/// `SK_STATUS_INVALID_ARGUMENT` if the address is not multicast.
///
/// Ownership: reads `group` and updates `*config` in place; nothing is kept. Thread safety: no
/// shared state, callable from any thread at any time.
///
/// # Safety
/// `config` is valid for reads and writes; `group` is null or valid for `group_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sk_session_config_set_multicast_group(
    config: *mut SkSessionConfig,
    group: *const libc::sockaddr,
    group_len: usize,
) -> SkStatus {
    guard(|| {
        status((|| {
            // SAFETY: `config` is null or valid for reads and writes (caller contract).
            let c = unsafe { config.as_mut() }.ok_or(SkStatus::NullPointer)?;
            if group.is_null() {
                c.set_multicast_group(None);
                return Ok(SkStatus::Ok);
            }
            // SAFETY: `group` is valid for `group_len` bytes (caller contract).
            let g = unsafe { sockaddr_to_rust(group, group_len) }?;
            if !g.ip().is_multicast() {
                return Err(SkStatus::InvalidArgument);
            }
            c.set_multicast_group(Some(g));
            c.packrat = 1;
            Ok(SkStatus::Ok)
        })())
    })
}

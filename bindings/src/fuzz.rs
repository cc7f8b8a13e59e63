//! Fuzz body of the C API (target `c_api` in `bindings/fuzz/`, also run by the property tests):
//! arbitrary bytes through every entry point that takes wire input must never reach a panic
//! (which the boundary would turn into `SK_STATUS_PANIC`).

// Calls the C API's `unsafe extern "C"` functions with pointers to live Rust buffers.
#![allow(unsafe_code)]

use std::ptr::{null, null_mut};

use crate::client::{
    sk_client_free, sk_client_handle_timeout, sk_client_new, sk_client_on_base_received,
    sk_client_on_sidekick_received, sk_client_poll_deliver, sk_client_start,
};
use crate::client_types::SkSessionConfig;
use crate::ffi::SkStatus;
use crate::packrat::{
    sk_packrat_free, sk_packrat_new, sk_packrat_on_received, sk_packrat_poll_eack,
};
use crate::quack_api::{sk_quack_decode, sk_quack_free, sk_quack_parse};
use crate::robin::{
    SkRobinEvent, sk_robin_free, sk_robin_new, sk_robin_on_quack, sk_robin_on_sent,
    sk_robin_poll_event,
};

fn ok(s: SkStatus) {
    assert!(
        !matches!(s, SkStatus::Panic | SkStatus::Poisoned),
        "the C API caught a panic"
    );
}

/// Feeds `data` as a quACK, a received datagram and a sidekick frame to fresh handles.
///
/// # Panics
/// If any entry point reports a caught panic.
pub fn fuzz_c_api(data: &[u8]) {
    // SAFETY (whole body): every pointer passed points to a live local buffer of the stated
    // length, or is null where the API allows it; each handle is freed once.
    unsafe {
        // A quACK from the wire, decoded against a log taken from the same bytes.
        let mut q = null_mut();
        let s = sk_quack_parse(data.as_ptr(), data.len(), &raw mut q);
        ok(s);
        if s == SkStatus::Ok {
            let log: Vec<u32> = data
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let (mut idx, mut n) = ([0usize; 64], 0usize);
            ok(sk_quack_decode(
                q,
                log.as_ptr(),
                log.len(),
                idx.as_mut_ptr(),
                null_mut(),
                idx.len(),
                &raw mut n,
            ));
        }
        sk_quack_free(q);

        // Robin: eight sends, then the bytes as a quACK.
        let mut r = null_mut();
        ok(sk_robin_new(null(), &raw mut r));
        for i in 0u32..8 {
            let d = i.to_le_bytes();
            ok(sk_robin_on_sent(
                r,
                u64::from(i),
                d.as_ptr(),
                d.len(),
                i64::from(i),
                null_mut(),
            ));
        }
        ok(sk_robin_on_quack(r, 100, data.as_ptr(), data.len()));
        let mut ev = std::mem::MaybeUninit::<SkRobinEvent>::uninit();
        let mut buf = [0u8; 64];
        for _ in 0..32 {
            let s = sk_robin_poll_event(r, ev.as_mut_ptr(), buf.as_mut_ptr(), buf.len());
            ok(s);
            if s == SkStatus::Empty {
                break;
            }
        }
        sk_robin_free(r);

        // Packrat: the bytes as a received datagram with a packet number from its first byte.
        let mut p = null_mut();
        ok(sk_packrat_new(null(), &raw mut p));
        let pn = data.first().map_or(-1, |&b| i64::from(b));
        ok(sk_packrat_on_received(p, 5, data.as_ptr(), data.len(), pn));
        let mut len = 0usize;
        let mut eack = [0u8; 4096];
        ok(sk_packrat_poll_eack(
            p,
            10,
            eack.as_mut_ptr(),
            eack.len(),
            &raw mut len,
        ));
        sk_packrat_free(p);

        // Client: the bytes on the base socket (a forged discovery reply?) and from the proxy.
        let mut cfg = std::mem::MaybeUninit::<SkSessionConfig>::uninit();
        ok(crate::session_config::sk_session_config_robin(
            30,
            10,
            cfg.as_mut_ptr(),
        ));
        let mut c = null_mut();
        ok(sk_client_new(cfg.as_ptr(), &raw mut c));
        ok(sk_client_start(c, 0));
        ok(sk_client_on_base_received(c, 1, data.as_ptr(), data.len()));
        let from = crate::sockaddr::sockaddr_from_rust(([192, 0, 2, 1], 7000).into());
        ok(sk_client_on_sidekick_received(
            c,
            2,
            (&raw const from.0).cast(),
            from.1,
            data.as_ptr(),
            data.len(),
        ));
        ok(sk_client_handle_timeout(c, 3));
        let mut out = vec![0u8; data.len() + 1];
        ok(sk_client_poll_deliver(
            c,
            out.as_mut_ptr(),
            out.len(),
            &raw mut len,
        ));
        sk_client_free(c);
    }
}

//! Fuzz body of the C API's call sequences (target `c_api_calls` in `bindings/fuzz/`, also run by
//! the property tests): every entry point, called in any order with arguments from the fuzz
//! input — configurations with any field values (NaN, zero, huge caps), output buffers of any
//! size, clocks that jump or go backwards, null handles after a refused `*_new`, socket
//! addresses of any family and length. No call may reach a panic (the boundary would report
//! `SK_STATUS_PANIC`) and every length output must agree with its status.

// Calls the C API's `unsafe extern "C"` functions with pointers to live Rust buffers.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::ptr::{null, null_mut};

use crate::client::{
    SkClient, sk_client_fall_back, sk_client_free, sk_client_handle_timeout, sk_client_keylog_line,
    sk_client_new, sk_client_on_base_received, sk_client_on_base_sent, sk_client_on_e2e_rtt,
    sk_client_on_sidekick_received, sk_client_poll_deliver, sk_client_poll_event,
    sk_client_poll_timeout, sk_client_poll_transmit, sk_client_rtt_ratio, sk_client_set_dcid_len,
    sk_client_start, sk_client_state, sk_client_stats, sk_client_withdraw_sent,
};
use crate::client_types::{SkClientEvent, SkClientStats, SkDestination, SkSessionConfig};
use crate::ffi::SkStatus;
use crate::packrat::{
    SkPackrat, SkPackratConfig, SkPackratStats, sk_packrat_config_default, sk_packrat_free,
    sk_packrat_handle_timeout, sk_packrat_new, sk_packrat_on_proxy_nothing_missing,
    sk_packrat_on_received, sk_packrat_poll_eack, sk_packrat_poll_ready, sk_packrat_poll_timeout,
    sk_packrat_reset, sk_packrat_stats,
};
use crate::pacubic::{
    SkPacubic, SkPacubicConfig, SkPacubicStats, sk_pacubic_config_default, sk_pacubic_cwnd,
    sk_pacubic_free, sk_pacubic_in_slow_start, sk_pacubic_new, sk_pacubic_on_ack,
    sk_pacubic_on_loss, sk_pacubic_on_mtu_update, sk_pacubic_on_persistent_congestion,
    sk_pacubic_set_rtt_ratio, sk_pacubic_ssthresh, sk_pacubic_stats,
};
use crate::quack_api::{
    SkQuack, sk_identifier_at, sk_quack_count, sk_quack_decode, sk_quack_encoded_len,
    sk_quack_free, sk_quack_insert, sk_quack_insert_batch, sk_quack_last_value, sk_quack_new,
    sk_quack_parse, sk_quack_remove, sk_quack_serialize, sk_quack_subtract, sk_quack_threshold,
};
use crate::robin::{
    SkIdentifier, SkRobin, SkRobinConfig, SkRobinEvent, SkRobinEventKind, SkRobinStats,
    sk_robin_config_default, sk_robin_free, sk_robin_handle_timeout, sk_robin_new,
    sk_robin_on_e2e_rtt, sk_robin_on_quack, sk_robin_on_sent, sk_robin_poll_event,
    sk_robin_poll_timeout, sk_robin_reset, sk_robin_rtt_ratio, sk_robin_stats,
    sk_robin_withdraw_last,
};
use crate::session_config::{
    sk_session_config_packrat, sk_session_config_robin, sk_session_config_robin_and_packrat,
};

/// Reads arguments off the fuzz input (zeros once it is exhausted).
struct Args<'a>(&'a [u8]);

impl Args<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let n = N.min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        b
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
    fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }
    /// A size: small most of the time, anything otherwise.
    fn size(&mut self) -> usize {
        match self.u8() {
            b @ 0..=0xef => usize::from(b),
            0xf0..=0xf7 => self.u32() as usize,
            _ => self.u64() as usize,
        }
    }
    fn rest(&mut self) -> &[u8] {
        std::mem::take(&mut self.0)
    }
}

fn ok(s: SkStatus) -> SkStatus {
    assert!(
        !matches!(s, SkStatus::Panic | SkStatus::Poisoned),
        "the C API caught a panic"
    );
    s
}

/// A status with a length output: Ok fits the buffer, BufferTooSmall asks for more.
fn ok_len(s: SkStatus, len: usize, cap: usize) {
    match ok(s) {
        SkStatus::Ok => assert!(len <= cap, "{len} bytes written to a {cap}-byte buffer"),
        SkStatus::BufferTooSmall => assert!(len > cap, "too small, yet {len} <= {cap}"),
        _ => {}
    }
}

fn identifier(a: &mut Args<'_>) -> SkIdentifier {
    SkIdentifier {
        mode: a.u8() % 3,
        width: a.u8() % 10,
        offset: a.u32() as i32,
        hash_key: a.bytes(),
    }
}

/// The handles under test; null after a refused `*_new` (every call must then say so).
struct Handles {
    client: *mut SkClient,
    robin: *mut SkRobin,
    packrat: *mut SkPackrat,
    pacubic: *mut SkPacubic,
    quacks: [*mut SkQuack; 2],
}

impl Handles {
    // SAFETY (all methods): every handle is null or live, and freed exactly once.
    unsafe fn free(&mut self) {
        unsafe {
            sk_client_free(std::mem::replace(&mut self.client, null_mut()));
            sk_robin_free(std::mem::replace(&mut self.robin, null_mut()));
            sk_packrat_free(std::mem::replace(&mut self.packrat, null_mut()));
            sk_pacubic_free(std::mem::replace(&mut self.pacubic, null_mut()));
            for q in &mut self.quacks {
                sk_quack_free(std::mem::replace(q, null_mut()));
            }
        }
    }

    /// Replaces one handle by one made from a configuration with fields overwritten by the
    /// input (a mask byte says which).
    unsafe fn renew(&mut self, which: u8, a: &mut Args<'_>) {
        let mask = a.u32();
        let set = |bit: u32| mask & (1 << bit) != 0;
        unsafe {
            match which % 5 {
                0 => {
                    let mut cfg = MaybeUninit::<SkSessionConfig>::uninit();
                    ok(if set(0) && set(9) {
                        sk_session_config_robin_and_packrat(a.u32(), a.u32(), cfg.as_mut_ptr())
                    } else if set(0) {
                        sk_session_config_packrat(cfg.as_mut_ptr())
                    } else {
                        sk_session_config_robin(a.u32(), a.u32(), cfg.as_mut_ptr())
                    });
                    let mut c = cfg.assume_init();
                    if set(1) {
                        c.robin = a.u8();
                        c.quack_interval_ms = a.u32();
                        c.quack_interval_packets = a.u32();
                        c.quack_threshold = a.u32();
                        c.quack_on_gap_percent = a.u32();
                    }
                    if set(2) {
                        c.packrat = a.u8();
                        c.eack_interval_ms = a.u32();
                        c.eack_interval_packets = a.u32();
                        c.local_symbols = a.u32();
                        c.cache_capacity_bytes = a.u64();
                        c.reorder_delay_ms = a.u32();
                    }
                    if set(3) {
                        c.identifier = identifier(a);
                    }
                    sk_client_free(std::mem::replace(&mut self.client, null_mut()));
                    ok(sk_client_new(&raw const c, &raw mut self.client));
                }
                1 => {
                    let mut cfg = MaybeUninit::<SkRobinConfig>::uninit();
                    ok(sk_robin_config_default(cfg.as_mut_ptr()));
                    let mut c = cfg.assume_init();
                    if set(1) {
                        c.threshold = a.size();
                    }
                    if set(2) {
                        c.identifier = identifier(a);
                    }
                    if set(3) {
                        c.reorder_threshold = a.u32();
                    }
                    if set(4) {
                        c.time_factor = a.f64();
                    }
                    if set(5) {
                        c.quack_interval_us = a.u64();
                    }
                    if set(6) {
                        c.max_log = a.size();
                    }
                    if set(7) {
                        c.retransmit_buffer_bytes = a.size();
                    }
                    if set(8) {
                        c.max_retransmissions = a.u8();
                    }
                    sk_robin_free(std::mem::replace(&mut self.robin, null_mut()));
                    ok(sk_robin_new(&raw const c, &raw mut self.robin));
                }
                2 => {
                    let mut cfg = MaybeUninit::<SkPackratConfig>::uninit();
                    ok(sk_packrat_config_default(cfg.as_mut_ptr()));
                    let mut c = cfg.assume_init();
                    if set(1) {
                        c.local_symbols = a.size();
                    }
                    if set(2) {
                        c.identifier = identifier(a);
                    }
                    if set(3) {
                        c.eack_interval_us = a.u64();
                        c.eack_every_packets = a.u32();
                    }
                    if set(4) {
                        c.selective = a.u8();
                    }
                    if set(5) {
                        c.success_probability = a.f64();
                    }
                    if set(6) {
                        c.reorder_window_us = a.u64();
                    }
                    if set(7) {
                        c.inflight_allowance = a.size();
                    }
                    if set(8) {
                        c.max_held = a.size();
                    }
                    if set(9) {
                        c.max_gaps = a.size();
                    }
                    sk_packrat_free(std::mem::replace(&mut self.packrat, null_mut()));
                    ok(sk_packrat_new(&raw const c, &raw mut self.packrat));
                }
                3 => {
                    let mut cfg = MaybeUninit::<SkPacubicConfig>::uninit();
                    ok(sk_pacubic_config_default(cfg.as_mut_ptr()));
                    let mut c = cfg.assume_init();
                    if set(1) {
                        c.mss = a.u64();
                    }
                    if set(2) {
                        c.initial_window = a.u64();
                        c.minimum_window = a.u64();
                    }
                    if set(3) {
                        c.beta_star = a.f64();
                    }
                    if set(4) {
                        c.c_star = a.f64();
                    }
                    if set(5) {
                        c.fast_convergence = a.u8();
                    }
                    sk_pacubic_free(std::mem::replace(&mut self.pacubic, null_mut()));
                    ok(sk_pacubic_new(&raw const c, &raw mut self.pacubic));
                }
                _ => {
                    let i = usize::from(mask as u8 & 1);
                    sk_quack_free(std::mem::replace(&mut self.quacks[i], null_mut()));
                    ok(sk_quack_new(a.size(), &raw mut self.quacks[i]));
                }
            }
        }
    }
}

/// Fuzz body: creates a client (Robin), a Robin engine, a Packrat engine, PACUBIC and two quACKs
/// with default settings, then runs a script of calls `op, len, args[len]` (`op % 26` selects
/// the entry point, see the match below; 25 replaces a handle by one made from a configuration
/// read from the arguments). The clock advances by a fuzzed amount per call and may jump
/// backwards (bit 7 of `op`).
///
/// # Panics
/// If any entry point reports a caught panic or a length that contradicts its status.
pub fn fuzz_c_api_calls(data: &[u8]) {
    let mut h = Handles {
        client: null_mut(),
        robin: null_mut(),
        packrat: null_mut(),
        pacubic: null_mut(),
        quacks: [null_mut(); 2],
    };
    let mut now: u64 = 1_000_000;
    let mut rest = data;
    // SAFETY (whole body): every pointer passed points to a live local buffer of the stated
    // length (or is null where a call allows it); handles are null or live and freed once.
    unsafe {
        let mut cfg = MaybeUninit::<SkSessionConfig>::uninit();
        ok(sk_session_config_robin(30, 10, cfg.as_mut_ptr()));
        ok(sk_client_new(cfg.as_ptr(), &raw mut h.client));
        ok(sk_client_start(h.client, now));
        ok(sk_robin_new(null(), &raw mut h.robin));
        ok(sk_packrat_new(null(), &raw mut h.packrat));
        ok(sk_pacubic_new(null(), &raw mut h.pacubic));
        ok(sk_quack_new(8, &raw mut h.quacks[0]));
        ok(sk_quack_new(8, &raw mut h.quacks[1]));

        while let [op, len, tail @ ..] = rest {
            let n = usize::from(*len).min(tail.len());
            let (args, next) = tail.split_at(n);
            rest = next;
            let mut a = Args(args);
            let step = u64::from(a.u8()) * 997;
            now = if op & 0x80 != 0 {
                now.wrapping_sub(step)
            } else {
                now.saturating_add(step)
            };
            let [q0, q1] = h.quacks;
            let mut out_len = 0usize;
            match op % 26 {
                0 => {
                    ok(sk_quack_insert(q0, a.u32()));
                }
                1 => {
                    let ids: Vec<u32> = a
                        .rest()
                        .chunks(4)
                        .map(|c| c.iter().fold(0u32, |x, b| (x << 8) | u32::from(*b)))
                        .collect();
                    ok(sk_quack_insert_batch(q1, ids.as_ptr(), ids.len()));
                }
                2 => {
                    ok(sk_quack_remove(q1, a.u32()));
                }
                3 => {
                    let cap = a.size().min(4096);
                    let mut buf = vec![0u8; cap];
                    let s = sk_quack_serialize(q0, buf.as_mut_ptr(), cap, &raw mut out_len);
                    ok_len(s, out_len, cap);
                }
                4 => {
                    let i = usize::from(a.u8() & 1);
                    let mut q = null_mut();
                    let bytes = a.rest();
                    if ok(sk_quack_parse(bytes.as_ptr(), bytes.len(), &raw mut q)) == SkStatus::Ok {
                        sk_quack_free(std::mem::replace(&mut h.quacks[i], q));
                    }
                }
                5 => {
                    ok(sk_quack_subtract(q0, q1));
                }
                6 => {
                    let cap = a.size().min(64);
                    let log: Vec<u32> = a.rest().iter().map(|&b| u32::from(b) * 7919).collect();
                    let mut idx = vec![0usize; cap];
                    let mut ids = vec![0u32; cap];
                    let s = sk_quack_decode(
                        q0,
                        log.as_ptr(),
                        log.len(),
                        idx.as_mut_ptr(),
                        ids.as_mut_ptr(),
                        cap,
                        &raw mut out_len,
                    );
                    ok_len(s, out_len, cap);
                }
                7 => {
                    let (mut c, mut t, mut v, mut l) = (0u32, 0usize, 0u32, 0usize);
                    ok(sk_quack_count(q0, &raw mut c));
                    ok(sk_quack_threshold(q1, &raw mut t));
                    ok(sk_quack_last_value(q0, &raw mut v));
                    ok(sk_quack_encoded_len(q1, &raw mut l));
                }
                8 => {
                    let off = a.u32() as i32;
                    let p = a.rest();
                    let mut id = 0u32;
                    ok(sk_identifier_at(p.as_ptr(), p.len(), off, &raw mut id));
                }
                9 => {
                    let pn = i64::from(a.u32() as i32);
                    let d = a.rest();
                    let mut seq = 0u64;
                    ok(sk_robin_on_sent(
                        h.robin,
                        now,
                        d.as_ptr(),
                        d.len(),
                        pn,
                        &raw mut seq,
                    ));
                }
                10 => {
                    let d = a.rest();
                    ok(sk_robin_on_quack(h.robin, now, d.as_ptr(), d.len()));
                }
                11 => {
                    let cap = a.size().min(2048);
                    let mut buf = vec![0u8; cap];
                    let mut ev = MaybeUninit::<SkRobinEvent>::uninit();
                    let s = ok(sk_robin_poll_event(
                        h.robin,
                        ev.as_mut_ptr(),
                        buf.as_mut_ptr(),
                        cap,
                    ));
                    if matches!(s, SkStatus::Ok | SkStatus::BufferTooSmall) {
                        let ev = ev.assume_init();
                        if ev.kind == SkRobinEventKind::Retransmit {
                            ok_len(s, ev.datagram_len, cap);
                        }
                    }
                }
                12 => {
                    let (mut t, mut r) = (0u64, 0f64);
                    let mut st = MaybeUninit::<SkRobinStats>::uninit();
                    match a.u8() % 6 {
                        0 => ok(sk_robin_handle_timeout(h.robin, now)),
                        1 => ok(sk_robin_poll_timeout(h.robin, &raw mut t)),
                        2 => ok(sk_robin_withdraw_last(h.robin, a.size())),
                        3 => ok(sk_robin_reset(h.robin)),
                        4 => ok(sk_robin_on_e2e_rtt(h.robin, a.u64())),
                        _ => {
                            ok(sk_robin_rtt_ratio(h.robin, &raw mut r));
                            ok(sk_robin_stats(h.robin, st.as_mut_ptr()))
                        }
                    };
                }
                13 => {
                    let pn = i64::from(a.u32() as i32);
                    let d = a.rest();
                    ok(sk_packrat_on_received(
                        h.packrat,
                        now,
                        d.as_ptr(),
                        d.len(),
                        pn,
                    ));
                }
                14 => {
                    let cap = a.size().min(2048);
                    let mut buf = vec![0u8; cap];
                    let s =
                        sk_packrat_poll_ready(h.packrat, buf.as_mut_ptr(), cap, &raw mut out_len);
                    ok_len(s, out_len, cap);
                }
                15 => {
                    let cap = a.size().min(8192);
                    let mut buf = vec![0u8; cap];
                    let s = sk_packrat_poll_eack(
                        h.packrat,
                        now,
                        buf.as_mut_ptr(),
                        cap,
                        &raw mut out_len,
                    );
                    ok_len(s, out_len, cap);
                }
                16 => {
                    let mut t = 0u64;
                    let mut st = MaybeUninit::<SkPackratStats>::uninit();
                    match a.u8() % 4 {
                        0 => ok(sk_packrat_handle_timeout(h.packrat, now)),
                        1 => ok(sk_packrat_on_proxy_nothing_missing(h.packrat, now)),
                        2 => ok(sk_packrat_reset(h.packrat, a.u32())),
                        _ => {
                            ok(sk_packrat_poll_timeout(h.packrat, &raw mut t));
                            ok(sk_packrat_stats(h.packrat, st.as_mut_ptr()))
                        }
                    };
                }
                17 => {
                    let sent = now.wrapping_sub(a.u64() % 10_000_000);
                    ok(sk_pacubic_on_ack(
                        h.pacubic,
                        now,
                        sent,
                        a.u64() % 100_000,
                        a.u64(),
                    ));
                }
                18 => {
                    let sent = now.wrapping_sub(u64::from(a.u32()));
                    let mut reduced = false;
                    let (source, r) = (a.u32() % 3, a.f64());
                    ok(sk_pacubic_on_loss(
                        h.pacubic,
                        now,
                        sent,
                        source,
                        r,
                        &raw mut reduced,
                    ));
                }
                19 => {
                    let (mut w, mut b) = (0u64, false);
                    let mut st = MaybeUninit::<SkPacubicStats>::uninit();
                    match a.u8() % 4 {
                        0 => ok(sk_pacubic_set_rtt_ratio(h.pacubic, a.f64())),
                        1 => ok(sk_pacubic_on_persistent_congestion(h.pacubic, now)),
                        2 => ok(sk_pacubic_on_mtu_update(h.pacubic, a.u64())),
                        _ => {
                            ok(sk_pacubic_cwnd(h.pacubic, &raw mut w));
                            ok(sk_pacubic_ssthresh(h.pacubic, &raw mut w));
                            ok(sk_pacubic_in_slow_start(h.pacubic, &raw mut b));
                            ok(sk_pacubic_stats(h.pacubic, st.as_mut_ptr()))
                        }
                    };
                }
                20 => {
                    if a.u8() & 1 == 0 {
                        let d = a.rest();
                        let mut logged = false;
                        ok(sk_client_on_base_sent(
                            h.client,
                            now,
                            d.as_ptr(),
                            d.len(),
                            &raw mut logged,
                        ));
                    } else {
                        ok(sk_client_withdraw_sent(h.client, a.size()));
                    }
                }
                21 => {
                    if a.u8() & 1 == 0 {
                        let d = a.rest();
                        ok(sk_client_on_base_received(
                            h.client,
                            now,
                            d.as_ptr(),
                            d.len(),
                        ));
                    } else {
                        // Any family, any length up to the storage's size.
                        let mut from: libc::sockaddr_storage = std::mem::zeroed();
                        let raw = (&raw mut from).cast::<u8>();
                        let size = size_of::<libc::sockaddr_storage>();
                        let from_len = usize::from(a.u8()).min(size);
                        let b: [u8; 32] = a.bytes();
                        std::ptr::copy_nonoverlapping(b.as_ptr(), raw, b.len());
                        let d = a.rest();
                        ok(sk_client_on_sidekick_received(
                            h.client,
                            now,
                            (&raw const from).cast(),
                            from_len,
                            d.as_ptr(),
                            d.len(),
                        ));
                    }
                }
                22 => {
                    let cap = a.size().min(2048);
                    let mut buf = vec![0u8; cap];
                    let mut dest = MaybeUninit::<SkDestination>::uninit();
                    let mut addr: libc::sockaddr_storage = std::mem::zeroed();
                    let mut addr_len = 0usize;
                    if a.u8() & 1 == 0 {
                        let s = sk_client_poll_transmit(
                            h.client,
                            buf.as_mut_ptr(),
                            cap,
                            &raw mut out_len,
                            dest.as_mut_ptr(),
                            &raw mut addr,
                            &raw mut addr_len,
                        );
                        ok_len(s, out_len, cap);
                    } else {
                        let s = sk_client_poll_deliver(
                            h.client,
                            buf.as_mut_ptr(),
                            cap,
                            &raw mut out_len,
                        );
                        ok_len(s, out_len, cap);
                    }
                }
                23 => {
                    let mut ev = MaybeUninit::<SkClientEvent>::uninit();
                    let mut st = MaybeUninit::<SkClientStats>::uninit();
                    let (mut t, mut active, mut r) = (0u64, false, 0f64);
                    let mut cause = MaybeUninit::uninit();
                    match a.u8() % 5 {
                        0 => ok(sk_client_poll_event(h.client, ev.as_mut_ptr())),
                        1 => ok(sk_client_poll_timeout(h.client, &raw mut t)),
                        2 => ok(sk_client_handle_timeout(h.client, now)),
                        3 => ok(sk_client_state(
                            h.client,
                            &raw mut active,
                            cause.as_mut_ptr(),
                        )),
                        _ => {
                            ok(sk_client_rtt_ratio(h.client, &raw mut r));
                            ok(sk_client_stats(h.client, st.as_mut_ptr()))
                        }
                    };
                }
                24 => {
                    match a.u8() % 5 {
                        0 => {
                            let line = a.rest();
                            ok(sk_client_keylog_line(h.client, line.as_ptr(), line.len()))
                        }
                        1 => ok(sk_client_set_dcid_len(h.client, a.u8(), a.size())),
                        2 => ok(sk_client_on_e2e_rtt(h.client, a.u64())),
                        3 => ok(sk_client_fall_back(h.client, now)),
                        _ => ok(sk_client_start(h.client, now)),
                    };
                }
                _ => {
                    let which = a.u8();
                    h.renew(which, &mut a);
                }
            }
        }
        h.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_entry_point_on_a_short_script() {
        let mut s = Vec::new();
        for op in 0..26u8 {
            s.extend_from_slice(&[op, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        }
        fuzz_c_api_calls(&s);
    }

    proptest! {
        #[test]
        fn fuzz_c_api_calls_never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_c_api_calls(&data);
        }
    }
}

//! The handshake rescue (`core::handshake_rescue`) under arbitrary datagrams in both directions:
//! never panics, replays only kept datagrams of flows a client Initial opened, each at most once,
//! and its memory reservation always equals what it keeps.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sidekick_proxy::core::fuzz_rescue(data));

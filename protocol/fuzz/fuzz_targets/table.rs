//! Fuzz target: the proxy session table with one established session, driven by a script of raw and
//! authentic datagrams, timers and proxy-side sends.
//! Run with `cargo fuzz run table` from `protocol/`. The body is
//! `sidekick_protocol::fuzz::fuzz_table`, which the crate's unit and property tests also exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_protocol::fuzz::fuzz_table(data);
});

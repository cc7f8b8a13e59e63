//! Fuzz target: the discovery request detector and the reply parser.
//! Run with `cargo fuzz run discovery` from `protocol/`. The body is
//! `sidekick_protocol::fuzz::fuzz_discovery`, which the crate's unit and property tests also exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_protocol::fuzz::fuzz_discovery(data);
});

//! Fuzz target: frame header parsing, authentication and body decoding (both directions).
//! Run with `cargo fuzz run frame_open` from `protocol/`. The body is
//! `sidekick_protocol::fuzz::fuzz_open`, which the crate's unit and property tests also exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_protocol::fuzz::fuzz_open(data);
});

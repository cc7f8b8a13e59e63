//! Fuzz target: every message body decoder (first byte = type), with re-encode round trip.
//! Run with `cargo fuzz run message_body` from `protocol/`. The body is
//! `sidekick_protocol::fuzz::fuzz_decode_body`, which the crate's unit and property tests also exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sidekick_protocol::fuzz::fuzz_decode_body(data);
});

//! Fuzz target: the quACK wire parser (and decoding of whatever parses).
//! Run with `cargo fuzz run parse` from `quack/`. The body is `quack::fuzz_parse`, which the
//! crate's unit and property tests also exercise.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    quack::fuzz_parse(data);
});

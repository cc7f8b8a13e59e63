//! Fuzzes the eACK wire parser: `cargo +nightly fuzz run wire` from `eack/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    eack::fuzz_parse(data);
});

//! Fuzzes the link element's checksum filler with arbitrary frames.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_lab::csum::fuzz_fill_checksum(data);
});

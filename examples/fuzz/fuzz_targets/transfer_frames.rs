//! Fuzz the transfer request/summary framing.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_examples::transfer::fuzz_parse(data);
});

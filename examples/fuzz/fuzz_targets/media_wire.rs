//! Fuzz the media wire decoder (DATA, NACK, HELLO, FIN, SUMMARY).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_examples::wire::fuzz_parse(data);
});

//! Arbitrary eACK bytes against a Packrat engine never panic and keep the cache within its cap.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sidekick_proxy::packrat::fuzz_eack(data));

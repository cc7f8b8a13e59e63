//! Arbitrary frames and sidekick datagrams through the whole core: never panic, always forward.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sidekick_proxy::core::fuzz_core(data));

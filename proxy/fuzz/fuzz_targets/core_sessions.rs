//! The core with a live session established through the protocol: fuzzed frames of its flow and
//! fuzzed sidekick datagrams reach the engines; the core fails open and stays within its caps.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sidekick_proxy::fuzz_support::fuzz_core_sessions(data)
});

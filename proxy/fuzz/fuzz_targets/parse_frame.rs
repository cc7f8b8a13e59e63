//! Frame, UDP and QUIC long-header parsing never panics.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sidekick_proxy::packet::fuzz_parse(data));
